"""Which model architectures each engine release serves, as the engine's own model registry lists them.

An engine loads a checkpoint by the class name in its config.json's ``architectures`` ("DeepseekV32ForCausalLM",
"Qwen3_5MoeForConditionalGeneration"); a name its registry lacks fails at start-up, or (vLLM and SGLang) falls back
to the Transformers backend, which runs none of the kernels, batching or parallel layouts that are planned. Planning
such a model on that engine would recommend something it does not serve as planned, so the engine is refused for
that model, naming the registry and the commit it was read at.

Each engine's registry is shipped as data, ``registries/<engine>.json``: the architecture names and a ``_source``
(repository, path, commit, version, what was read and how the engine matches the config's list). ``matches`` says
which names of the config's ``architectures`` the engine looks up: "any" (vLLM, SGLang try each in order) or "first"
(TensorRT-LLM reads ``architectures[0]``). An engine without a file (TGI) is not checked: never refused here, never
claimed. A config without ``architectures`` is not refused either (nothing to look up).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from recommender.engines.model_refusal import refuse_unless_one_serves

__all__ = ["Registry", "architecture_refusal", "check_served", "registry"]


@dataclass(frozen=True, slots=True)
class Registry:
    """One engine release's model registry.

    Args:
        engine: the engine's registry name ("vllm", "sglang", "trtllm").
        repository: the GitHub repository it was read from.
        path: the registry's file or folder in that repository.
        commit: the commit (or release tag) it was read at.
        version: the engine release at that commit.
        first_only: True when the engine looks up only the first name of the config's ``architectures``.
        architectures: the class names it registers.
    """

    engine: str
    repository: str
    path: str
    commit: str
    version: str
    first_only: bool
    architectures: frozenset[str]

    @property
    def cited(self) -> str:
        """Where the list was read, as a refusal names it: ``repository path@commit`` (a full hash shortened)."""
        commit = self.commit[:9] if len(self.commit) == 40 else self.commit
        return f"{self.repository} {self.path}@{commit}"

    def serves(self, architectures: Sequence[str]) -> bool:
        """Whether it registers the name it looks up in a config's ``architectures`` (True for an empty list)."""
        if not architectures:
            return True
        looked_up = architectures[:1] if self.first_only else architectures
        return any(name in self.architectures for name in looked_up)


@cache
def registry(engine: str) -> Registry | None:
    """`engine`'s shipped registry, or None where none was read (not checked)."""
    path = resources.files("recommender.engines") / "registries" / f"{engine}.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    source = data["_source"]
    return Registry(
        engine=engine,
        repository=source["repository"],
        path=source["path"],
        commit=source["commit"],
        version=source["version"],
        first_only=data["matches"] == "first",
        architectures=frozenset(data["architectures"]),
    )


def architecture_refusal(engine: str, architectures: Sequence[str]) -> str | None:
    """Why `engine` does not serve a model whose config lists `architectures`, naming the registry; None if it does
    (or its registry was not read, or the config names none)."""
    known = registry(engine)
    if known is None or known.serves(architectures):
        return None
    name = architectures[0] if known.first_only or len(architectures) == 1 else " / ".join(architectures)
    return f"architecture {name} is not in the model registry of {engine} {known.version} ({known.cited})"


def check_served(architectures: Sequence[str], engines: Sequence[str], *, field: str) -> None:
    """Refuse a model none of `engines` registers: one line naming `field`, each engine's registry and the fix."""
    refuse_unless_one_serves(
        engines,
        lambda e: architecture_refusal(e, architectures),
        field=field,
        problem="serves this model's architecture",
        fix="add an engine whose registry lists it to engines, or serve a model of an architecture they list",
    )
