"""Fidelity on a tiny random-initialised Llama: the chunked, disk-backed KL is the full-vocabulary KL."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from recommender.quality import fidelity as fid


def _llama(seed: int, *, vocab: int = 512) -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=vocab,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    model: nn.Module = LlamaForCausalLM(config).eval()  # type: ignore[no-untyped-call]
    return model


def _perturbed(model: nn.Module, scale: float) -> nn.Module:
    """The same weights plus noise: a stand-in for a quantized copy, close but not equal."""
    other = _llama(0)
    other.load_state_dict(model.state_dict())
    torch.manual_seed(1)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(scale * p.abs().mean() * torch.randn_like(p))
    return other


def _direct_kl(reference: nn.Module, candidate: nn.Module, windows: torch.Tensor) -> torch.Tensor:
    """KL(reference || candidate) in nats at every position, all windows at once, in float64."""
    with torch.inference_mode():
        p = torch.log_softmax(reference(windows).logits[:, :-1].double(), dim=-1)
        q = torch.log_softmax(candidate(windows).logits[:, :-1].double(), dim=-1)
    return torch.nn.functional.kl_div(q, p, log_target=True, reduction="none").sum(-1).flatten()


def test_chunked_kl_equals_the_full_vocabulary_kl(tmp_path: Path) -> None:
    reference = _llama(0)
    candidate = _perturbed(reference, 0.2)
    torch.manual_seed(2)
    windows = torch.randint(0, 512, (3, 40))
    stored = fid.reference_log_probs(reference, windows, directory=tmp_path)
    assert stored.path.parent == tmp_path and stored.path.stat().st_size == 3 * 39 * 512 * 4  # float32 on disk

    # A chunk that does not divide the 39 positions, so chunk boundaries fall mid-window.
    result = fid.compare(candidate, stored, position_chunk=5)
    direct = _direct_kl(reference, candidate, windows)
    assert result.tokens == direct.numel() == 3 * 39
    assert result.mean_kl > 1e-3  # a real divergence, not a trivially equal pair
    assert result.mean_kl == pytest.approx(float(direct.mean()), abs=1e-6)
    assert result.p99_kl == pytest.approx(float(torch.quantile(direct, 0.99)), abs=1e-6)

    # The reference against itself: zero KL, full agreement, perplexity ratio 1.
    same = fid.compare(reference, stored)
    assert same.mean_kl == pytest.approx(0.0, abs=1e-9) and same.top1_agreement == 1.0
    assert same.ppl_ratio == pytest.approx(1.0, abs=1e-9)

    stored.close()
    assert not stored.path.exists()


def test_kl_is_over_the_whole_vocabulary_not_a_top_k_bound() -> None:
    # Both put half their mass on the same 4 top tokens; the reference spreads the other half over
    # 996 tokens, the candidate over 10 of them. Top-k plus one bucket for the rest sees no difference.
    vocab, tail = 1000, torch.arange(4, 1000)
    p = torch.zeros(1, vocab)
    p[0, tail] = math.log(4 / 996)
    q = torch.full((1, vocab), -30.0)
    q[0, :4] = 0.0
    q[0, 4:14] = math.log(4 / 10)
    p_logp, q_logp = torch.log_softmax(p, -1), torch.log_softmax(q, -1)
    p64, q64 = p_logp.double(), q_logp.double()
    expected = float((p64.exp() * (p64 - q64)).sum())
    assert float(fid.kl_per_position(p_logp, q_logp)[0]) == pytest.approx(expected, rel=1e-12)
    assert expected > 10.0
    # The top-4-plus-tail-bucket bound the previous algorithm computed: all but zero.
    top_p, top_q = p64[0, :4], q64[0, :4]
    tail_p, tail_q = torch.log1p(-top_p.exp().sum()), torch.log1p(-top_q.exp().sum())
    bound = float((top_p.exp() * (top_p - top_q)).sum() + tail_p.exp() * (tail_p - tail_q))
    assert abs(bound) < 1e-3
    # A reference token of probability zero adds nothing (0 log 0 = 0), not NaN.
    p_logp[0, 999] = -torch.inf
    assert torch.isfinite(fid.kl_per_position(p_logp, q_logp)).all()
