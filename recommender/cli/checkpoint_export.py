"""Write a scheme's checkpoint where the user asked: what `recommender quantize` and a study's winner do.

The checkpoint is made (or found) in the content-addressed store first, then copied, so a
study that already scored the scheme hands over the very files it scored. Schemes whose
engines quantize in flight (bitsandbytes, vLLM's online fp8) and evaluation-only schemes
write nothing: the refusal says what launches them instead.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.config.destinations import check_output_dir as check_writable_dir
from recommender.engines import ENGINES_BY_NAME, evaluation_only
from recommender.errors import BadInputError
from recommender.input_files import usable_path
from recommender.quantize._base import QuantScheme
from recommender.quantize.checkpoint_scheme import CheckpointScheme
from recommender.quantize.file_modes import apply_umask_modes

if TYPE_CHECKING:
    from recommender.models.source import ModelSource
    from recommender.quantize.checkpoint import QuantizeContext


def checkpoint_scheme(method: QuantScheme, *, field: str = "--scheme") -> CheckpointScheme:
    """`method` if it writes a checkpoint an engine loads, else one line saying what launches it."""
    if isinstance(method, CheckpointScheme) and method.checkpoint_format is not None:
        missing = method.missing_library()
        if missing is not None:
            raise BadInputError(field, f"{method.name} needs {missing[0]}, which is not installed", missing[1])
        return method
    flag = ENGINES_BY_NAME["vllm"].flag_for(method)
    if evaluation_only(method):
        fix = "it is evaluation-only (no serving engine launches it); pick a compressed-tensors or ModelOpt scheme"
    elif flag:
        fix = f"the engine quantizes the original weights as it loads them: launch with --quantization {flag}"
    else:
        fix = "it serves the original weights; launch the model as it is"
    raise BadInputError(field, f"{method.name} has no checkpoint to write", fix)


def check_output_dir(out: Path, *, field: str = "--out") -> None:
    """Refuse, before any quantizing, an output that exists and is not an empty directory (nothing is
    overwritten), a name the filesystem cannot hold, or a parent that is missing, a file or not writable."""
    if usable_path(out, field=field).exists() and (not out.is_dir() or any(out.iterdir())):
        raise BadInputError(field, f"{out} exists and is not an empty directory", "give a new directory")
    if not out.parent.exists():
        raise BadInputError(field, f"the parent directory {out.parent} does not exist", "create it first")
    check_writable_dir(out, field=field)


def export_checkpoint(scheme: CheckpointScheme, source: ModelSource, context: QuantizeContext, out: Path) -> Path:
    """The scheme's checkpoint of `source`, copied to `out` (made in the store first when missing)."""
    made = scheme.checkpoint(source, context)
    try:
        shutil.copytree(made, out, dirs_exist_ok=True)
    except OSError as exc:  # after the work: say where the checkpoint is kept
        raise BadInputError(
            "--out",
            f"cannot write {out} ({exc.strerror or exc}); the checkpoint is kept at {made}",
            f"copy it from there: cp -r {made} DIR",
        ) from None
    apply_umask_modes(out)  # copytree keeps the store's modes, and older store entries hold 0600 weights
    return out
