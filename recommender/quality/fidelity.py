"""Fidelity against the unquantized model: KL divergence, top-1 agreement, perplexity ratio.

Judged the way llama.cpp's perplexity tool judges quantizations: run the baseline and
the variant over the same token windows and compare next-token distributions position
by position. The baseline's log-probabilities are computed once and reused for every
variant. The text is the use case's own documents (its first perplexity task, by default),
so "fidelity" means fidelity on the text this use case cares about.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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


@dataclass(frozen=True)
class BaselineLogits:
    """Token windows and the baseline's top-k next-token log-probabilities over them.

    Only the top ``k`` entries per position are kept (plus the target token's
    log-probability), so a 128k-token vocabulary costs k, not 128k, floats per position.
    KL is then computed over the top-k tokens plus one bucket for the rest of the vocabulary,
    which is a lower bound of the full KL (merging outcomes never increases divergence) and
    equal to it when the tail holds little mass.
    """

    windows: torch.Tensor
    topk_logp: torch.Tensor
    topk_idx: torch.Tensor
    target_logp: torch.Tensor


#: Baseline tokens kept per position.
TOP_K = 64
#: Changes whenever the computation changes, so cached results are not reused across it.
ALGORITHM = f"top{TOP_K}+tail-v1"


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


def _window_log_probs(model: nn.Module, row: torch.Tensor) -> torch.Tensor:
    """Next-token log-probabilities (float32, CPU) for one window: shape (len - 1, vocab)."""
    import torch

    device = next(model.parameters()).device
    with torch.inference_mode():
        logits = model(row.unsqueeze(0).to(device)).logits[0, :-1].float()
    return torch.log_softmax(logits, dim=-1).cpu()


def baseline_logits(model: nn.Module, windows: torch.Tensor, *, k: int = TOP_K) -> BaselineLogits:
    import torch

    topk_logp, topk_idx, target = [], [], []
    for row in windows:
        logp = _window_log_probs(model, row)
        values, indices = logp.topk(min(k, logp.shape[-1]), dim=-1)
        topk_logp.append(values)
        topk_idx.append(indices)
        target.append(logp.gather(-1, row[1:].unsqueeze(-1)).squeeze(-1))
    return BaselineLogits(windows, torch.stack(topk_logp), torch.stack(topk_idx), torch.stack(target))


def _log1mexp(logsum: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(x)) for the tail mass, clamped away from log(0)."""
    import torch

    return torch.log((-torch.expm1(logsum)).clamp_min(1e-12))


def compare(model: nn.Module, baseline: BaselineLogits) -> FidelityResult:
    """KL(baseline || variant) per position (top-k + tail bucket), top-1 agreement, perplexity ratio."""
    import torch

    kls, agree, nll_var = [], [], []
    for i, row in enumerate(baseline.windows):
        variant = _window_log_probs(model, row)
        p_logp = baseline.topk_logp[i]
        q_logp = variant.gather(-1, baseline.topk_idx[i])
        p_tail = _log1mexp(torch.logsumexp(p_logp, dim=-1))
        q_tail = _log1mexp(torch.logsumexp(q_logp, dim=-1))
        kl = (p_logp.exp() * (p_logp - q_logp)).sum(-1) + p_tail.exp() * (p_tail - q_tail)
        kls.append(kl.clamp_min(0.0))
        # Agreement: the baseline's top token is also a top token of the variant (bf16 logits tie often).
        agree.append(q_logp[:, 0] >= variant.max(dim=-1).values)
        nll_var.append(-variant.gather(-1, row[1:].unsqueeze(-1)).squeeze(-1))
    kl_all = torch.cat(kls)
    nll_base = -baseline.target_logp.mean()
    return FidelityResult(
        mean_kl=float(kl_all.mean()),
        p99_kl=float(torch.quantile(kl_all, 0.99)),
        top1_agreement=float(torch.cat(agree).float().mean()),
        ppl_ratio=float(torch.exp(torch.cat(nll_var).mean() - nll_base)),
        tokens=int(kl_all.numel()),
    )
