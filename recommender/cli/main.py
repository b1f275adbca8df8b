"""The `recommender` command line: the app, its global options and the registration of every command (one module
each in this package: parse, call the library, print).

Exit codes: 0 a recommendation was found; 1 the search ran but no candidate met every
threshold; 2 bad input (one line on stderr naming the field and the fix).
"""

from __future__ import annotations

import faulthandler
import signal
import sys
from typing import Annotated

import typer

from recommender.cli import compare as cli_compare
from recommender.cli import estimate as cli_estimate
from recommender.cli import eval as cli_eval
from recommender.cli import gate as cli_gate
from recommender.cli import plan as cli_plan
from recommender.cli import probe as cli_probe
from recommender.cli import quantize as cli_quantize
from recommender.cli import report as cli_report
from recommender.cli import schema as cli_schema
from recommender.cli import search as cli_search
from recommender.cli import worker as cli_worker
from recommender.cli.interrupt import EXIT_GRACE_S, exit_within
from recommender.errors import BadInputError
from recommender.quiet import VERBOSE_ENV, quiet_libraries
from recommender.report.console import usage_error

app = typer.Typer(
    name="recommender",
    help=(
        "Find the cheapest way to serve a model that keeps its quality and latency.\n\n"
        "Searches serving scheme x GPU x engine x tensor parallelism x batch size with Optuna; quality from "
        "real lm-eval runs on the checkpoint an engine loads, speed measured here or from a step cost "
        "calibrated per engine on measured GPU serving runs (with intervals), everything logged to MLflow.\n\n"
        "Start with: recommender search   (runs the embedded demo offline)"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _options(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            envvar=VERBOSE_ENV,
            show_envvar=True,
            help="Also show the libraries' own logs, warnings and progress bars (transformers, lm-eval, "
            "Optuna, MLflow, llm-compressor); without it the terminal shows only this tool's output.",
        ),
    ] = False,
) -> None:
    """Options for every command; before any library is imported, so their switches take effect."""
    quiet_libraries(verbose=verbose)


#: Every command, in the order `recommender --help` lists them: (name, function, epilog), one module each.
COMMANDS = (
    ("search", cli_search.search_command, cli_search.EPILOG),
    ("worker", cli_worker.worker_command, cli_worker.EPILOG),
    ("eval", cli_eval.eval_command, cli_eval.EPILOG),
    ("quantize", cli_quantize.quantize_command, cli_quantize.EPILOG),
    ("plan", cli_plan.plan_command, cli_plan.EPILOG),
    ("estimate", cli_estimate.estimate_command, cli_estimate.EPILOG),
    ("probe", cli_probe.probe_command, cli_probe.EPILOG),
    ("report", cli_report.report_command, cli_report.EPILOG),
    ("compare", cli_compare.compare_command, cli_compare.EPILOG),
    ("gate", cli_gate.gate_command, cli_gate.EPILOG),
    ("schema", cli_schema.schema_command, cli_schema.EPILOG),
)


def _register() -> None:
    for name, command, epilog in COMMANDS:
        app.command(name, epilog=epilog)(command)


_register()


def _stacks_on_sigusr1() -> None:
    """`kill -USR1 PID` writes every thread's stack to the process's own stderr (not where pytest captures)."""
    if not hasattr(signal, "SIGUSR1") or sys.__stderr__ is None:
        return
    try:
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
    except (ValueError, OSError):  # stderr without a file descriptor (an embedding host): no stacks, nothing else lost
        return


def main() -> None:
    """Entry point: turns BadInputError into one line and exit code 2.

    `kill -USR1 PID` prints every thread's stack to stderr and the command goes on: where a long search or a
    worker waits (a claim, a database lock) without stopping it."""
    _stacks_on_sigusr1()
    try:
        code = app(standalone_mode=False)
    except BadInputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        code = 130
    except typer.TyperException as exc:  # a wrong command, flag or value, found by the command-line parser
        sys.stderr.write(usage_error(exc) + "\n")
        sys.exit(int(getattr(exc, "exit_code", 2)))
    if code == 130:  # Ctrl-C: typer turns the KeyboardInterrupt into exit code 130
        sys.stderr.write("interrupted: finished trials and evaluated documents are saved; rerun to resume\n")
        exit_within(EXIT_GRACE_S, 130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
