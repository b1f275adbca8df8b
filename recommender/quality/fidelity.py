"""Fidelity against the unquantized model: KL divergence, top-1 agreement, perplexity ratio.

Judged the way llama.cpp's perplexity tool judges quantizations: run the baseline and
the variant over the same token windows and compare next-token distributions position
by position. The baseline's log-probabilities are computed once and reused for every
variant. The text is the use case's own documents (its first perplexity task, by default),
so "fidelity" means fidelity on the text this use case cares about.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from lm_eval.tasks import TaskManager
    from torch import nn
    from transformers import PreTrainedTokenizerBase

    from recommender.quality.suite import UseCase


@dataclass(frozen=True, slots=True)
class FidelityResult:
    mean_kl: float
    p99_kl: float
    top1_agreement: float
    ppl_ratio: float
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BaselineLogits:
    """Token windows and the baseline's log-probabilities over them (float32, on CPU)."""

    windows: torch.Tensor
    log_probs: torch.Tensor


def fidelity_windows(use_case: UseCase, manager: TaskManager, tokenizer: PreTrainedTokenizerBase) -> torch.Tensor:
    """Token windows cut from the documents of the use case's text task."""
    import torch
    from lm_eval.tasks import get_task_dict

    name = use_case.fidelity.text_task or use_case.task_names[0]
    task = get_task_dict([name], manager)[name]
    docs = task.test_docs() if task.has_test_docs() else task.validation_docs()
    size = use_case.fidelity.window_tokens
    wanted = use_case.fidelity.text_windows
    ids: list[int] = []
    for doc in docs:
        parts = [task.doc_to_text(doc), task.doc_to_target(doc)]
        text = "".join(p for p in parts if isinstance(p, str))
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        if len(ids) >= size * wanted:
            break
    n = min(wanted, len(ids) // size)
    if n == 0:
        raise ValueError(f"task {name} has fewer than {size} tokens of text for fidelity windows")
    return torch.tensor(ids[: n * size], dtype=torch.long).view(n, size)


def _log_probs(model: nn.Module, windows: torch.Tensor) -> torch.Tensor:
    import torch

    device = next(model.parameters()).device
    outs = []
    with torch.inference_mode():
        for row in windows:
            logits = model(row.unsqueeze(0).to(device)).logits[0, :-1].float()
            outs.append(torch.log_softmax(logits, dim=-1).cpu())
    return torch.stack(outs)


def baseline_logits(model: nn.Module, windows: torch.Tensor) -> BaselineLogits:
    return BaselineLogits(windows=windows, log_probs=_log_probs(model, windows))


def compare(model: nn.Module, baseline: BaselineLogits) -> FidelityResult:
    """KL(baseline || variant) per position, top-1 agreement, and the perplexity ratio."""
    import torch

    variant = _log_probs(model, baseline.windows)
    base = baseline.log_probs
    kl = (base.exp() * (base - variant)).sum(-1).flatten().clamp_min(0.0)
    targets = baseline.windows[:, 1:].unsqueeze(-1)
    nll_base = -base.gather(-1, targets).mean()
    nll_var = -variant.gather(-1, targets).mean()
    agree = (base.argmax(-1) == variant.argmax(-1)).float().mean()
    return FidelityResult(
        mean_kl=float(kl.mean()),
        p99_kl=float(torch.quantile(kl, 0.99)),
        top1_agreement=float(agree),
        ppl_ratio=float(torch.exp(nll_var - nll_base)),
        tokens=int(kl.numel()),
    )
