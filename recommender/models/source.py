"""Where a model's weights come from: a local directory or a hub id, through one code path.

Both go through transformers' ``from_pretrained``; a local directory is checked up front
(config present, safetensors weights, pickle only with an explicit opt-in) so a wrong
path fails with one line instead of a deep stack. Remote code and pickle weights are
off unless the spec opts in.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recommender.errors import BadInputError
from recommender.input_files import expand_user, load_json, usable_path
from recommender.perf.catalog.config_fields import check_config_fields

if TYPE_CHECKING:
    from torch import nn
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

    from recommender.device import DeviceInfo

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+\Z")  # \Z: "$" would accept "org/name\n"


def looks_like_hub_id(source: str) -> bool:
    """Whether `source` is shaped like org/name (a path written as ./x, /x or ~/x never is)."""
    return not source.startswith((".", "/", "~")) and bool(_HUB_ID.match(source))


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A resolved model reference.

    Args:
        location: absolute directory path, or a hub id.
        is_local: True for a directory.
        revision: hub revision, for hub ids.
        allow_pickle: allow .bin (pickle) weights.
        trust_remote_code: run code shipped with the model.
    """

    location: str
    is_local: bool
    revision: str | None = None
    allow_pickle: bool = False
    trust_remote_code: bool = False
    display_name: str | None = None

    @classmethod
    def resolve(
        cls,
        source: str,
        *,
        base_dir: Path,
        field: str = "model.source",
        revision: str | None = None,
        allow_pickle: bool = False,
        trust_remote_code: bool = False,
        name: str | None = None,
    ) -> ModelSource:
        """Turn the user's string into a source: an existing directory wins over a hub id."""
        candidate = expand_user(Path(source), field=field)
        if not candidate.is_absolute():
            candidate = base_dir / candidate
        usable_path(candidate, field=field)
        looks_like_path = not looks_like_hub_id(source)
        if candidate.is_dir():
            _check_local_dir(candidate.resolve(), field=field, allow_pickle=allow_pickle)
            return cls(str(candidate.resolve()), True, None, allow_pickle, trust_remote_code, name)
        if looks_like_path:
            raise BadInputError(
                field,
                f"model directory {str(candidate)!r} not found",
                "give an existing directory with config.json and *.safetensors, or a hub id such as org/name",
            )
        return cls(source, False, revision, allow_pickle, trust_remote_code, name)

    @property
    def name(self) -> str:
        if self.display_name:
            return self.display_name
        return Path(self.location).name if self.is_local else self.location

    def _common_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"trust_remote_code": self.trust_remote_code}
        if not self.is_local and self.revision:
            kwargs["revision"] = self.revision
        if not self.allow_pickle:
            kwargs["use_safetensors"] = True
        return kwargs

    def load_config(self, *, field: str = "model.source") -> PretrainedConfig:
        """The model's config; the first thing loaded, so it is where unreadable models are refused."""
        from huggingface_hub.errors import StrictDataclassError
        from transformers import AutoConfig

        kwargs = self._common_kwargs()
        kwargs.pop("use_safetensors", None)
        if self.is_local:  # read through the input reader first: encoding, duplicate keys, nesting, kind, fields
            data = load_json(Path(self.location) / "config.json", field=field, what="config.json")
            check_config_fields(data, field=f"{field}: {self.location}/config.json", required=False)
        else:
            cached = self._cached_hub_config(kwargs)
            if cached is not None:
                return cached
            _check_hub_reachable(self.location, field=field)
        try:
            config: PretrainedConfig = AutoConfig.from_pretrained(self.location, **kwargs)
            return config
        except StrictDataclassError as exc:  # the config class's own field checks (transformers 5)
            raise BadInputError(
                field, f"the model's config is refused by transformers: {_last_line(exc)}", "fix config.json"
            ) from None
        except ValueError as exc:
            if "trust_remote_code" in str(exc):
                raise BadInputError(
                    field,
                    f"{self.location} needs its own code to load",
                    "read that code, then opt in with model.trust_remote_code: true (--trust-remote-code)",
                ) from None
            raise BadInputError(field, f"cannot read the model's config: {str(exc).splitlines()[0][:200]}") from None
        except OSError as exc:
            raise BadInputError(
                field,
                f"cannot load {self.location}: {str(exc).splitlines()[0][:200]}",
                "check the path or hub id (hub ids need network access and, for gated models, a token)",
            ) from None

    def _cached_hub_config(self, kwargs: dict[str, Any]) -> PretrainedConfig | None:
        """The hub model's config from the local Hugging Face cache, asking no server (None: not cached)."""
        from transformers import AutoConfig

        try:
            config: PretrainedConfig = AutoConfig.from_pretrained(self.location, local_files_only=True, **kwargs)
            return config
        except (OSError, ValueError):
            return None

    def load_tokenizer(self) -> PreTrainedTokenizerBase:
        from transformers import AutoTokenizer

        kwargs = self._common_kwargs()
        kwargs.pop("use_safetensors", None)
        return AutoTokenizer.from_pretrained(self.location, **kwargs)

    def load_model(self, *, dtype: Any, device: DeviceInfo, **extra: Any) -> nn.Module:
        """Load weights with transformers, in eval mode, on `device`."""
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(
            self.location, dtype=dtype, device_map=device.kind, **self._common_kwargs(), **extra
        )
        model.eval()  # type: ignore[no-untyped-call]
        return model

    def fingerprint(self) -> str:
        """sha256 over the weight files' bytes (local), or the hub id at its revision."""
        if not self.is_local:
            return f"hub:{self.location}@{self.revision or 'main'}"
        return _hash_weights(self.location, self.allow_pickle)


def _last_line(exc: Exception) -> str:
    """The cause a wrapped error ends with ("ValueError: The hidden size ..."), cut to one line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]


@functools.lru_cache(maxsize=8)
def _hash_weights(location: str, allow_pickle: bool) -> str:
    """Hashing a large model's weights takes minutes: once per process, however many callers ask."""
    digest = hashlib.sha256()
    for path in sorted(_weight_files(Path(location), allow_pickle=allow_pickle)):
        digest.update(path.name.encode())
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _weight_files(root: Path, *, allow_pickle: bool) -> list[Path]:
    files = list(root.glob("*.safetensors"))
    if allow_pickle:
        files += list(root.glob("*.bin"))
    return files


def _check_local_dir(root: Path, *, field: str, allow_pickle: bool) -> None:
    if not (root / "config.json").is_file():
        raise BadInputError(field, f"{root} has no config.json", "point at a saved Hugging Face model directory")
    if _weight_files(root, allow_pickle=allow_pickle):
        return
    if list(root.glob("*.bin")):
        raise BadInputError(
            field,
            f"{root} has only pickle (.bin) weights, which can run code when loaded",
            "convert them to safetensors, or if you trust the files set model.allow_pickle: true (--allow-pickle)",
        )
    raise BadInputError(field, f"{root} has no *.safetensors weights", "point at a directory with the model's weights")


#: Seconds to wait for the hub's server before saying it cannot be reached (its own retries take ~46 s).
HUB_CONNECT_TIMEOUT_S = 3.0


def _check_hub_reachable(hub_id: str, *, field: str) -> None:
    """Refuse at once, in one line, a hub id that is not cached when the hub is off (HF_HUB_OFFLINE) or its
    server does not answer within ``HUB_CONNECT_TIMEOUT_S`` (any HTTP answer, even 401 or 404, is an answer)."""
    import urllib.error
    import urllib.request

    from huggingface_hub import constants

    fix = "pass a local model directory, or run once with network access so the hub's cache holds it"
    if constants.HF_HUB_OFFLINE:
        raise BadInputError(
            field, f"cannot load {hub_id}: not in the local Hugging Face cache and HF_HUB_OFFLINE is set", fix
        )
    request = urllib.request.Request(f"{constants.ENDPOINT.rstrip('/')}/api/models/{hub_id}", method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=HUB_CONNECT_TIMEOUT_S).close()  # noqa: S310 (the hub's own URL)
    except urllib.error.HTTPError:
        return  # the server answered (a gated or unknown model is said later, by the real request)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BadInputError(
            field,
            f"cannot load {hub_id}: the hub ({constants.ENDPOINT}) cannot be reached within "
            f"{HUB_CONNECT_TIMEOUT_S:g} s ({reason})",
            fix,
        ) from None
