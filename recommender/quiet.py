"""Keep the libraries' own chatter off the terminal: only the tool's output reaches the user.

A search loads models with transformers, scores them with lm-eval, quantizes with torchao,
bitsandbytes and llm-compressor, and records with Optuna and MLflow; each of those prints
progress bars, INFO logs, import-time warnings or a subprocess's complaint by default. The user
asked a question and reads the answer: those lines bury it, and some (llm-compressor's logs)
even go to stdout, where `--json` output belongs. `--verbose` (or RECOMMENDER_VERBOSE=1)
leaves all of it on, for debugging a library.

Errors are untouched: nothing here redirects stdout or stderr, exceptions propagate, our
one-line `error:` messages are printed by the CLI, and libraries still log at ERROR.

Most libraries read their switch from the environment when they are imported, so
`quiet_libraries` runs once at the start of the CLI, before any of them is imported. Two read
nothing there and reset their loggers on import (Optuna) or spawn a subprocess that writes
straight to the terminal (lm-eval's `git describe`): `quiet_optuna` and `quiet_lm_eval` are
called where those libraries are imported, and read the verbose switch from the environment.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings

#: Set to 1 (by `recommender --verbose`, or by the user) to leave every library's output on.
VERBOSE_ENV = "RECOMMENDER_VERBOSE"

#: Each library's own switch, read at its import (an environment variable the user set wins).
_QUIET_ENV = {
    # tqdm reads TQDM_* at its import as defaults for every bar: DISABLE covers bars whose caller leaves
    # `disable` unset; a bar whose caller passes disable=False (lm-eval's "Running loglikelihood requests",
    # "Tokenizing inputs") keeps the DELAY default, so it never reaches its first draw, nor its last.
    "TQDM_DISABLE": "1",
    "TQDM_DELAY": "1e9",
    # huggingface_hub's bars, which transformers uses too ("Loading weights", downloads).
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_VERBOSITY": "error",
    # datasets' "Map", "Generating test split", "Saving the dataset".
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "DATASETS_VERBOSITY": "error",
    # transformers' warnings ("Token indices sequence length is longer than ...") and advice.
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    # tokenizers warns at every fork after a parallel encode (lm-eval's `git describe` is one); also what
    # llm-compressor's oneshot would otherwise set itself, with a warning.
    "TOKENIZERS_PARALLELISM": "false",
    # MLflow: "Creating initial MLflow database tables", alembic's migrations, "🏃 View run ... at" on stdout.
    "MLFLOW_LOGGING_LEVEL": "WARNING",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
    # lm-eval's own logging setup, where something calls it.
    "LMEVAL_LOG_LEVEL": "ERROR",
    # loguru users: llm-compressor logs INFO to stdout ("IndependentPipeline | INFO ..."), compressed-tensors
    # to loguru's default stderr sink; each library's import-time configure_logger reads these.
    # Not LLM_COMPRESSOR_LOG_DISABLED: disabled, llm-compressor never registers its METRIC level, and
    # GPTQ's timing log then raises "Level 'METRIC' does not exist". A console level above METRIC (38) works.
    "LLM_COMPRESSOR_LOG_LEVEL": "ERROR",
    "COMPRESSED_TENSORS_LOG_DISABLED": "true",
}

#: Standard-library loggers that no import resets: import-time notices (CUDA-only extensions absent on CPU,
#: deprecations), per-request warnings, per-matmul casts of LLM.int8, alembic's migration steps.
_QUIET_LOGGERS = (
    "torchao",
    "torch.utils._pytree",
    "torch.fx._symbolic_trace",
    "lm_eval",
    "lm-eval",
    "bitsandbytes",
    "accelerate",
    "alembic",
)


def is_verbose() -> bool:
    """Whether the user asked for the libraries' output (`--verbose` sets the variable for the whole process)."""
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def quiet_libraries(*, verbose: bool) -> None:
    """Switch the libraries' bars, logs and warnings off, before any of them is imported; `verbose` leaves them on.

    Python warnings are ignored as the warnings documentation advises for applications, unless the user
    asked for them with -W or PYTHONWARNINGS.
    """
    if verbose:
        os.environ[VERBOSE_ENV] = "1"  # for quiet_optuna / quiet_lm_eval, called later where those load
        return
    for name, value in _QUIET_ENV.items():
        os.environ.setdefault(name, value)
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    if not sys.warnoptions:
        warnings.simplefilter("ignore")


def quiet_optuna() -> None:
    """Optuna resets its logger to INFO on import: "A new study created", and each failed trial's traceback.

    The search prints its own line per candidate, failed ones included.
    """
    if is_verbose():
        return
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)


def quiet_lm_eval() -> None:
    """lm-eval's loggers at ERROR (task notes, HFLM advice); its `git describe` without "fatal: not a git repository".

    lm-eval records the git hash of the working directory in every result by running git with the
    terminal as its stderr; outside a repository git complains there once per evaluation. The replacement
    records the same hash (or lm-eval's own fallback) and sends git's complaint nowhere.
    """
    if is_verbose():
        return
    for name in ("lm_eval", "lm-eval"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import lm_eval.evaluator

    lm_eval.evaluator.get_git_commit_hash = _git_commit_hash


def _git_commit_hash() -> str | None:
    """lm_eval.loggers.utils.get_git_commit_hash, with git's stderr discarded."""
    from lm_eval.loggers.utils import get_commit_from_path

    try:
        out = subprocess.check_output(["git", "describe", "--always"], stderr=subprocess.DEVNULL)  # noqa: S607
    except (subprocess.CalledProcessError, FileNotFoundError):
        found: str | None = get_commit_from_path(os.getcwd())
        return found
    return out.strip().decode()
