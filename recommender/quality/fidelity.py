"""Fidelity against the unquantized model: KL divergence, top-1 agreement, perplexity ratio.

Judged the way llama.cpp's perplexity tool judges quantizations: run the baseline and
the variant over the same token windows and compare next-token distributions position
by position. The text is the use case's own documents (its first perplexity task, by default),
so "fidelity" means fidelity on the text this use case cares about.

KL is exact: KL(bf16 reference || candidate) in nats per token, summed over the *whole*
vocabulary at every position — not a top-k bound.

Our protocol, which a KL limit is stated under: `text_windows` windows of `window_tokens`
tokens, sampled at random with a fixed seed (`WINDOW_SEED`) from the text task's documents
taken in a seeded order; every next-token position of a window is scored (positions 1 to
window_tokens - 1, so short contexts count too — llama.cpp scores only the second half of
512-token contexts, so its published figures are not on this scale); mean over positions.
The windows are the sampling unit: the verdict is an interval over windows (see verdict.py),
so each window's mean KL is kept (`window_kl`). A limit is calibrated against the tasks:
a candidate's mean NLL rises over the reference's by KL(p || q) on text drawn from the
reference, so a limit of r * `reference_nll` corresponds to a relative perplexity-type rise of
about r (`kl_limit_for`). The reference's log-probabilities are
computed once and reused for every candidate; only one model is in memory at a time (the
reference first, then each candidate), so they must outlive the reference model, and for a
real vocabulary they are large: see `ReferenceLogProbs` for where they are kept.
"""

from __future__ import annotations

import os
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from recommender.paths import cache_root

if TYPE_CHECKING:
    import torch
    from lm_eval.tasks import TaskManager
    from torch import nn
    from transformers import PreTrainedTokenizerBase

    from recommender.quality.suite import UseCase


@dataclass(frozen=True, slots=True)
class FidelityResult:
    """The candidate's next-token distributions against the bf16 reference's, over `tokens` positions."""

    #: Mean over positions of KL(reference || candidate) over the full vocabulary, in nats/token.
    mean_kl: float
    #: 99th percentile over positions of the same KL, in nats/token.
    p99_kl: float
    #: Fraction of positions where the reference's most likely token is also a most likely token of the candidate.
    top1_agreement: float
    #: exp(mean NLL of the candidate - mean NLL of the reference) on the windows' next tokens.
    ppl_ratio: float
    #: Positions compared (windows x (window length - 1)).
    tokens: int
    #: Mean KL of each window (nats/token), the sampling units of the verdict's interval; empty in older results.
    window_kl: tuple[float, ...] = ()
    #: The reference's own mean NLL per token on the windows (nats), the scale a KL limit is calibrated on.
    reference_nll: float | None = None


def kl_limit_for(relative_rise: float, reference_nll: float) -> float:
    """The mean-KL limit matching a relative rise of the NLL per token (E_p[-log q] - E_p[-log p] = KL(p || q))."""
    return relative_rise * reference_nll


#: Changes whenever the computation changes, so cached results are not reused across it.
ALGORITHM = "full-vocab-kl-v3-seeded-windows"
#: Seed of the fidelity windows' sampling (documents' order and which windows are kept).
WINDOW_SEED = 34
#: Positions per KL step: bounds the float64 temporaries to this many rows of the vocabulary.
POSITION_CHUNK = 32


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)


class ReferenceLogProbs:
    """Token windows and the reference's full-vocabulary next-token log-probabilities over them, on disk.

    Why on disk: 128k vocabulary entries x 255 positions x 4 bytes is 131 MB per window, 2.1 GB
    for the default 16 windows of 256 tokens, and a candidate's own forward pass needs as much
    again while the reference's are read back. A float32 numpy memmap holds them: written one
    window at a time as the reference runs, read back one window at a time as each candidate
    runs, so memory holds a window of each at most and the page cache keeps what fits (a small
    vocabulary never leaves RAM in practice, so one code path serves both). The file lives under
    the cache root, not /tmp (often a RAM-backed tmpfs), and is removed with this object.
    Float32, as log_softmax computes them: the KL of near-identical models is a sum of small
    differences of close numbers, which half precision would blur.
    """

    def __init__(self, windows: torch.Tensor, path: Path, vocab: int) -> None:
        self.windows = windows
        self.path = path
        self.shape = (int(windows.shape[0]), int(windows.shape[1]) - 1, vocab)
        self._finalizer = weakref.finalize(self, _remove, path)
        self._array("w+").flush()  # sized (sparse) now; filled window by window

    def _array(self, mode: Literal["r", "r+", "w+"]) -> np.memmap[Any, np.dtype[np.float32]]:
        return np.memmap(self.path, dtype=np.float32, mode=mode, shape=self.shape)

    def write(self, i: int, log_probs: torch.Tensor) -> None:
        """Store window `i`'s log-probabilities ((positions, vocab), float32)."""
        store = self._array("r+")
        store[i] = log_probs.numpy()
        store.flush()

    def window(self, i: int) -> torch.Tensor:
        """Window `i`'s log-probabilities, (positions, vocab) float32, read into memory."""
        import torch

        return torch.from_numpy(np.array(self._array("r")[i]))

    def close(self) -> None:
        """Remove the file now (it is removed anyway when this object is collected or the process exits)."""
        self._finalizer()


def fidelity_windows(use_case: UseCase, manager: TaskManager, tokenizer: PreTrainedTokenizerBase) -> torch.Tensor:
    """Token windows sampled at random (seeded) from the documents of the use case's text task.

    Documents are read in a seeded order until there are twice as many candidate windows as wanted
    (or the documents run out), and `text_windows` of those are kept at random: the windows are not
    the first documents of the split, which are often one source or one kind of text.
    """
    import torch
    from lm_eval.tasks import get_task_dict

    name = use_case.fidelity.text_task or use_case.task_names[0]
    task = get_task_dict([name], manager)[name]
    docs = list(task.test_docs() if task.has_test_docs() else task.validation_docs())
    size = use_case.fidelity.window_tokens
    wanted = use_case.fidelity.text_windows
    rng = np.random.default_rng(WINDOW_SEED)
    ids: list[int] = []
    for i in rng.permutation(len(docs)):
        parts = [task.doc_to_text(docs[i]), task.doc_to_target(docs[i])]
        text = "".join(p for p in parts if isinstance(p, str))
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        if len(ids) >= 2 * size * wanted:
            break
    slots = len(ids) // size
    if slots == 0:
        raise ValueError(f"task {name} has fewer than {size} tokens of text for fidelity windows")
    keep = np.sort(rng.choice(slots, size=min(wanted, slots), replace=False))
    rows = [ids[s * size : (s + 1) * size] for s in keep]
    return torch.tensor(rows, dtype=torch.long)


def _window_log_probs(model: nn.Module, row: torch.Tensor) -> torch.Tensor:
    """Next-token log-probabilities (float32, CPU) for one window: shape (len - 1, vocab)."""
    import torch

    device = next(model.parameters()).device
    with torch.inference_mode():
        logits = model(row.unsqueeze(0).to(device)).logits[0, :-1].float()
    return torch.log_softmax(logits, dim=-1).cpu()


def reference_log_probs(model: nn.Module, windows: torch.Tensor, *, directory: Path | None = None) -> ReferenceLogProbs:
    """Run the reference over `windows` and keep its full log-probabilities in a file under `directory`.

    `directory` defaults to ``<cache root>/fidelity``.
    """
    folder = directory if directory is not None else cache_root() / "fidelity"
    folder.mkdir(parents=True, exist_ok=True)
    first = _window_log_probs(model, windows[0])
    fd, name = tempfile.mkstemp(dir=folder, prefix="reference-", suffix=".f32")
    os.close(fd)
    reference = ReferenceLogProbs(windows, Path(name), int(first.shape[-1]))
    reference.write(0, first)
    for i in range(1, len(windows)):
        reference.write(i, _window_log_probs(model, windows[i]))
    return reference


def kl_per_position(reference: torch.Tensor, candidate: torch.Tensor) -> torch.Tensor:
    """KL(reference || candidate) in nats at each row of two (positions, vocab) log-probability tensors, float64.

    Terms where the reference gives a token zero probability contribute nothing (0 log 0 = 0).
    """
    import torch

    p_logp, q_logp = reference.double(), candidate.double()
    terms = p_logp.exp() * (p_logp - q_logp)
    return torch.where(torch.isneginf(p_logp), torch.zeros_like(terms), terms).sum(-1)


def compare(model: nn.Module, reference: ReferenceLogProbs, *, position_chunk: int = POSITION_CHUNK) -> FidelityResult:
    """Exact full-vocabulary KL(reference || candidate) per position, top-1 agreement, perplexity ratio."""
    import torch

    kls, agree, nll_var, nll_ref = [], [], [], []
    for i, row in enumerate(reference.windows):
        q_all = _window_log_probs(model, row)
        p_all = reference.window(i)
        if p_all.shape != q_all.shape:
            raise ValueError(f"candidate's vocabulary {tuple(q_all.shape)} differs from the reference's {p_all.shape}")
        for start in range(0, p_all.shape[0], position_chunk):
            kls.append(kl_per_position(p_all[start : start + position_chunk], q_all[start : start + position_chunk]))
        # Agreement: the reference's top token is also a top token of the candidate (bf16 logits tie often).
        top = p_all.argmax(dim=-1, keepdim=True)
        agree.append(q_all.gather(-1, top).squeeze(-1) >= q_all.max(dim=-1).values)
        targets = row[1:].unsqueeze(-1)
        nll_var.append(-q_all.gather(-1, targets).squeeze(-1).double())
        nll_ref.append(-p_all.gather(-1, targets).squeeze(-1).double())
    kl_all = torch.cat(kls).clamp_min(0.0)
    per_window = kl_all.view(len(reference.windows), -1).mean(dim=-1)
    return FidelityResult(
        mean_kl=float(kl_all.mean()),
        p99_kl=float(torch.quantile(kl_all, 0.99)),
        top1_agreement=float(torch.cat(agree).float().mean()),
        ppl_ratio=float(torch.exp(torch.cat(nll_var).mean() - torch.cat(nll_ref).mean())),
        tokens=int(kl_all.numel()),
        window_kl=tuple(float(k) for k in per_window),
        reference_nll=float(torch.cat(nll_ref).mean()),
    )
