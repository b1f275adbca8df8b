"""lm-eval hooks for the demo-code tasks (`custom_dataset` loaders and metrics).

Why: the tasks must run fully offline, so instead of a hub `dataset_path` each YAML
points `custom_dataset` at a loader here, which generates (or reuses from the cache)
the deterministic jsonl built by `recommender.demo.eval_data` from the held-out stdlib
files. lm-eval calls the loader as ``custom_dataset(**metadata, **dataset_kwargs)``,
hence the ignored keyword arguments.
"""

from __future__ import annotations

import re
from typing import Any

from recommender.demo.eval_data import (
    build_next_line_data,
    build_ppl_calibration_data,
    build_ppl_data,
    load_as_dataset_dict,
)


def load_ppl(**_: Any) -> Any:
    """DatasetDict: `test` = chunks of held-out files (scored); `train` = chunks of training files (calibration)."""
    return load_as_dataset_dict(build_ppl_data(), train=build_ppl_calibration_data())


def load_next_line(**_: Any) -> Any:
    """DatasetDict with a `test` split of `{context, choices, label, source, line}` docs."""
    return load_as_dataset_dict(build_next_line_data())


def process_ppl_results(doc: dict[str, Any], results: tuple[float]) -> dict[str, tuple[float, int]]:
    """Same accounting as lm-eval's wikitext task: words split on whitespace, UTF-8 bytes."""
    (loglikelihood,) = results
    text = doc["text"]
    words = len(re.split(r"\s+", text))
    n_bytes = len(text.encode("utf-8"))
    return {
        "word_perplexity": (loglikelihood, words),
        "byte_perplexity": (loglikelihood, n_bytes),
        "bits_per_byte": (loglikelihood, n_bytes),
    }
