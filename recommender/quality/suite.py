"""A use-case suite: which lm-eval tasks stand for the use case, and how much each may degrade.

Suites are YAML under ``evals/`` (see ``recommender/demo/use_case.yaml``). Task names are standard
lm-eval names or names from the suite's own task folder (``include_path``), which lm-eval's
TaskManager registers alongside its built-in tasks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from recommender.errors import BadInputError, pydantic_location
from recommender.input_files import load_yaml, usable_path

Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
#: Documents per task: ten million, beyond any lm-eval task's size (limits only bound the work).
MAX_DOCUMENTS = 10_000_000


class Threshold(BaseModel):
    """How much worse than the baseline a task may get; exactly one kind per task.

    ``max_relative_drop``: degradation / |baseline| (0.05 = 5 % worse).
    ``max_absolute_drop``: degradation in the metric's own units (0.02 = 2 points of accuracy).
    ``min_value``: an absolute floor (or ceiling, for lower-is-better metrics).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    max_relative_drop: Fraction | None = None
    max_absolute_drop: Annotated[float, Field(ge=0.0)] | None = None
    min_value: float | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Threshold:
        set_kinds = [k for k in ("max_relative_drop", "max_absolute_drop", "min_value") if getattr(self, k) is not None]
        if len(set_kinds) != 1:
            raise ValueError("give exactly one of max_relative_drop, max_absolute_drop, min_value")
        return self

    def describe(self, higher_is_better: bool) -> str:
        if self.max_relative_drop is not None:
            return f"relative drop <= {self.max_relative_drop:.1%}"
        if self.max_absolute_drop is not None:
            return f"absolute drop <= {self.max_absolute_drop:g}"
        return f"{'>=' if higher_is_better else '<='} {self.min_value:g}"


class TaskThreshold(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    task: str
    metric: str = Field(description="lm-eval metric key without the filter, e.g. acc or word_perplexity.")
    filter: str = "none"
    higher_is_better: bool
    threshold: Threshold
    limit: Annotated[int, Field(gt=0, le=MAX_DOCUMENTS)] | None = Field(
        default=None, description="Documents for this task; default: the suite's limit."
    )


class Fidelity(BaseModel):
    """Distribution-level limits against the unquantized model, measured on held-out text."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    max_mean_kl: Annotated[float, Field(gt=0.0)] | None = None
    text_task: str | None = Field(
        default=None, description="Task whose documents give the text; default: the first task."
    )
    text_windows: Annotated[int, Field(gt=0, le=MAX_DOCUMENTS)] = 64
    window_tokens: Annotated[int, Field(gt=8, le=1_000_000)] = 256


class Calibration(BaseModel):
    """Documents that calibrating schemes (GPTQ, AWQ, SmoothQuant) run through the model.

    They come from the task's training split (or its validation split when the test split is
    the scored one), never from the documents quality is scored on.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    task: str | None = Field(default=None, description="Task whose documents calibrate; default: the text task.")
    samples: Annotated[int, Field(gt=0, le=4096)] = Field(
        default=16, description="Calibration samples (GPTQ papers use 128 to 512; 16 keeps the demo fast)."
    )
    tokens: Annotated[int, Field(gt=8, le=32768)] = Field(default=256, description="Tokens per sample.")


class UseCase(BaseModel):
    """A use case as lm-eval tasks with thresholds, plus fidelity limits."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: str
    description: str = ""
    include_path: Path | None = Field(
        default=None, description="Folder of local lm-eval task YAMLs, relative to the suite."
    )
    limit: Annotated[int, Field(gt=0, le=MAX_DOCUMENTS)] | None = Field(
        default=None, description="Documents per task (None: all)."
    )
    batch_size: Annotated[int, Field(gt=0, le=4096)] = 8
    tasks: list[TaskThreshold] = Field(min_length=1)
    fidelity: Fidelity = Fidelity()
    calibration: Calibration = Calibration()
    verdict_policy: Literal["confidence", "point"] = Field(
        default="confidence", description="confidence: decide on the bootstrap interval; point: on the estimate."
    )
    confidence: Annotated[float, Field(gt=0.5, lt=1.0)] = 0.95
    adaptive: bool = Field(default=True, description="Evaluate in growing chunks; stop once the verdict is clear.")
    suite_path: Path | None = Field(default=None, exclude=True)

    @field_validator("tasks")
    @classmethod
    def _distinct_checks(cls, value: list[TaskThreshold]) -> list[TaskThreshold]:
        """Each (task, metric, filter) once: two thresholds on one score would silently keep the stricter."""
        seen: list[tuple[str, str, str]] = []
        for t in value:
            if (t.task, t.metric, t.filter) in seen:
                raise ValueError(f"{t.task} {t.metric} listed twice; give each task and metric one threshold")
            seen.append((t.task, t.metric, t.filter))
        return value

    @property
    def task_names(self) -> list[str]:
        return [t.task for t in self.tasks]

    def resolved_include_path(self) -> Path | None:
        if self.include_path is None:
            return None
        base = self.suite_path.parent if self.suite_path else Path.cwd()
        return (base / self.include_path).resolve()


def load_use_case(path: Path, *, field: str = "use_case") -> UseCase:
    """Read and validate a suite file; problems become one BadInputError naming the field."""
    raw = load_yaml(path, field=field, what="use-case suite")
    try:
        suite = UseCase.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = pydantic_location(tuple(first["loc"]))
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise BadInputError(f"{path}: {loc}", msg, "see recommender/demo/use_case.yaml for a valid suite") from None
    suite = suite.model_copy(update={"suite_path": path.resolve()})
    if suite.include_path is not None:
        usable_path(suite.include_path, field=f"{path}: include_path")
    include = suite.resolved_include_path()
    if include is not None and not usable_path(include, field=f"{path}: include_path").is_dir():
        raise BadInputError(
            f"{path}: include_path", f"{include} is not a directory", "point at the folder of task YAMLs"
        )
    return suite
