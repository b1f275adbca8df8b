"""Offline, deterministic data for the demo model's lm-eval tasks.

Why this module exists: the tool evaluates quantized variants of the demo model with
lm-eval, and it must do so with no network at all, so the tasks cannot point at a hub
dataset. Instead their documents are generated here from the held-out ("eval") split
of the demo corpus (the running interpreter's standard library, see `corpus.py`).

Generation is a pure function of the generator version and the held-out texts: the
output is cached under ``cache_root()/eval_data/<task>/<fingerprint>.jsonl`` where the
fingerprint hashes both, so the same interpreter always yields the same bytes and a
different interpreter (different stdlib sources) regenerates instead of reusing stale
data. Files are written atomically and only when missing.

Two tasks are built:

* ``demo_code_ppl``: held-out files cut at line boundaries into chunks of at most
  `PPL_MAX_CHARS` characters, one document per chunk (``text``, ``source``), scored
  with rolling log-likelihood like lm-eval's wikitext task.
* ``demo_code_next_line``: four-way multiple choice; the context is up to
  `NEXT_LINE_CONTEXT_LINES` lines preceding a position in a held-out file, the choices
  are the true next line and three distractor lines of similar length drawn from the
  other held-out lines with a fixed-seed RNG.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import os
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from recommender.demo.corpus import SourceFile, iter_source_files
from recommender.paths import cache_root

#: Bump whenever the output of a generator changes for the same sources.
GENERATOR_VERSION = "1"

PPL_TASK = "demo_code_ppl"
NEXT_LINE_TASK = "demo_code_next_line"

#: Upper bound on the characters of one perplexity document (a single longer line
#: still makes a document of its own).
PPL_MAX_CHARS = 3000

#: How many lines before the target line make up the context, at most.
NEXT_LINE_CONTEXT_LINES = 8
#: How many multiple-choice documents to draw (fewer if there are not enough positions).
NEXT_LINE_NUM_DOCS = 600
#: Number of choices per document: the true line plus distractors.
NEXT_LINE_NUM_CHOICES = 4
#: Lines shorter than this (after stripping) are neither targets nor distractors.
NEXT_LINE_MIN_CHARS = 8
#: Distractors are sampled among this many pool lines closest in length to the target.
NEXT_LINE_LENGTH_WINDOW = 64
#: Fixed RNG seed for position sampling, distractors and answer placement.
NEXT_LINE_SEED = 20240611


def fingerprint(task: str, files: Sequence[SourceFile]) -> str:
    """SHA-256 over the generator version, the task name and every (relpath, text)."""
    h = hashlib.sha256()
    for part in (GENERATOR_VERSION, task):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    for f in files:
        for part in (f.relpath, f.text):
            data = part.encode("utf-8", errors="surrogatepass")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
    return h.hexdigest()


def ppl_docs(files: Iterable[SourceFile]) -> list[dict[str, Any]]:
    """Cut each file into line-aligned chunks of at most `PPL_MAX_CHARS` characters."""
    docs: list[dict[str, Any]] = []
    for f in files:
        chunk: list[str] = []
        size = 0
        for line in f.text.splitlines(keepends=True):
            if chunk and size + len(line) > PPL_MAX_CHARS:
                docs.append({"text": "".join(chunk), "source": f.relpath})
                chunk, size = [], 0
            chunk.append(line)
            size += len(line)
        if chunk:
            docs.append({"text": "".join(chunk), "source": f.relpath})
    return [d for d in docs if d["text"].strip()]


def _eligible(line: str) -> bool:
    return len(line.strip()) >= NEXT_LINE_MIN_CHARS


def next_line_docs(files: Sequence[SourceFile]) -> list[dict[str, Any]]:
    """Draw the multiple-choice next-line documents.

    A position (file, line i) is eligible when line i has at least
    `NEXT_LINE_MIN_CHARS` non-blank characters and the up-to-8 lines before it are not
    all blank. The context is those preceding lines verbatim (leading blank lines
    dropped) followed by a newline; each choice is a line with trailing whitespace
    removed and its indentation kept. Documents stay in sampled (random) order so that
    lm-eval's ``limit`` picks a spread of files rather than the first one.
    """
    per_file = [[ln.rstrip() for ln in f.text.split("\n")] for f in files]
    pool = sorted(
        {ln for lines in per_file for ln in lines if _eligible(ln)},
        key=lambda s: (len(s), s),
    )
    pool_lens = [len(s) for s in pool]

    positions: list[tuple[int, int]] = []
    for fi, lines in enumerate(per_file):
        for li in range(1, len(lines)):
            if not _eligible(lines[li]):
                continue
            ctx = lines[max(0, li - NEXT_LINE_CONTEXT_LINES) : li]
            if any(c.strip() for c in ctx):
                positions.append((fi, li))

    rng = random.Random(NEXT_LINE_SEED)
    chosen = rng.sample(positions, min(NEXT_LINE_NUM_DOCS, len(positions)))
    n_distract = NEXT_LINE_NUM_CHOICES - 1
    docs: list[dict[str, Any]] = []
    for fi, li in chosen:
        lines = per_file[fi]
        true_line = lines[li]
        ctx = lines[max(0, li - NEXT_LINE_CONTEXT_LINES) : li]
        while ctx and not ctx[0].strip():
            ctx = ctx[1:]
        # Candidates: the pool lines closest in length to the true line.
        centre = bisect.bisect_left(pool_lens, len(true_line))
        lo = max(0, centre - NEXT_LINE_LENGTH_WINDOW // 2)
        hi = min(len(pool), lo + NEXT_LINE_LENGTH_WINDOW)
        lo = max(0, hi - NEXT_LINE_LENGTH_WINDOW)
        seen = {true_line.strip()}
        candidates: list[str] = []
        for c in pool[lo:hi]:
            # No re-indented copies of the true line or of each other.
            if c.strip() not in seen:
                seen.add(c.strip())
                candidates.append(c)
        distractors = rng.sample(candidates, n_distract)
        label = rng.randrange(NEXT_LINE_NUM_CHOICES)
        choices = list(distractors)
        choices.insert(label, true_line)
        context, source = "\n".join(ctx) + "\n", files[fi].relpath
        docs.append({"context": context, "choices": choices, "label": label, "source": source, "line": li + 1})
    return docs


def _write_jsonl(path: Path, docs: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8", newline="\n") as fh:
        for doc in docs:
            fh.write(json.dumps(doc, ensure_ascii=True, sort_keys=True))
            fh.write("\n")
    os.replace(tmp, path)


def _build(task: str, make: Any, files: Sequence[SourceFile] | None) -> Path:
    files = list(iter_source_files("eval")) if files is None else list(files)
    path = cache_root() / "eval_data" / task / f"{fingerprint(task, files)}.jsonl"
    if not path.exists():
        _write_jsonl(path, make(files))
    return path


def build_ppl_data(files: Sequence[SourceFile] | None = None) -> Path:
    """Write (if missing) and return the ``demo_code_ppl`` jsonl for the held-out files."""
    return _build(PPL_TASK, ppl_docs, files)


#: Training-split files whose chunks form the ppl task's `train` split: calibration documents for
#: GPTQ/AWQ/SmoothQuant, from files the evaluation split never contains (``corpus.split_of``).
CALIBRATION_FILES = 24


def build_ppl_calibration_data(files: Sequence[SourceFile] | None = None) -> Path:
    """Write (if missing) and return the ``demo_code_ppl`` train-split jsonl (training files, never scored)."""
    if files is None:
        files = list(itertools.islice(iter_source_files("train"), CALIBRATION_FILES))
    return _build(f"{PPL_TASK}_train", ppl_docs, files)


def build_next_line_data(files: Sequence[SourceFile] | None = None) -> Path:
    """Write (if missing) and return the ``demo_code_next_line`` jsonl for the held-out files."""
    return _build(NEXT_LINE_TASK, next_line_docs, files)


def load_as_dataset_dict(path: Path, *, train: Path | None = None) -> Any:
    """Load a generated jsonl as a ``datasets.DatasetDict`` with a ``test`` split (and ``train`` if given).

    The packaged ``json`` builder needs no network, so this works with
    ``HF_DATASETS_OFFLINE=1``; its Arrow cache goes under our cache dir, keyed by the
    file's fingerprinted name.
    """
    import datasets

    files = {"test": str(path)} | ({"train": str(train)} if train is not None else {})
    return datasets.load_dataset(
        "json",
        data_files=files,
        cache_dir=str(cache_root() / "hf_datasets"),
    )
