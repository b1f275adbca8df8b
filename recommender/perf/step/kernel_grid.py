"""One configuration's measured kernel times on a grid, and their interpolation (``kernel_tables.py`` fills it).

Log-log interpolation between grid points; below the grid the first value holds (fixed costs dominate), above it
time grows in proportion. The per-step lookups the scheduler makes run in plain floats (a few microseconds);
the vectorised decode path runs in numpy over a decode stretch's steps.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["KernelTable", "tuned_envelope"]


def tuned_envelope(seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each point's time lowered to the fastest at the same or a later grid point, and where that was.

    >>> best, at = tuned_envelope(np.array([3.0, 2.0, 2.5, 4.0]))
    >>> best.tolist(), at.tolist()
    ([2.0, 2.0, 2.5, 4.0], [1, 1, 2, 3])
    """
    best, at = seconds.astype(float).copy(), np.arange(len(seconds))
    for i in range(len(seconds) - 2, -1, -1):
        if best[i + 1] < best[i]:
            best[i], at[i] = best[i + 1], at[i + 1]
    return best, at


def _loglog(x: np.ndarray | float, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Interpolation in log-log space; below the grid the first value, above it proportional to x."""
    x = np.maximum(np.asarray(x, dtype=float), xs[0])
    inside = np.exp(np.interp(np.log(x), np.log(xs), np.log(ys)))
    out: np.ndarray = np.where(x > xs[-1], ys[-1] * x / xs[-1], inside)
    return out


@dataclass(frozen=True)
class KernelTable:
    """One configuration's measured kernel seconds on a grid (module docstring), and where they came from."""

    source: str
    tokens: np.ndarray
    linear_s: np.ndarray
    prompts: np.ndarray
    context_attention_s: np.ndarray
    seqs: np.ndarray
    contexts: np.ndarray
    decode_attention_s: np.ndarray  # [len(seqs), len(contexts)]
    measured_share: float = 1.0
    _log_dec: np.ndarray = field(init=False, repr=False)
    _scalar: _ScalarGrid = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_log_dec", np.log(np.maximum(self.decode_attention_s, 1e-12)))
        object.__setattr__(self, "_scalar", _ScalarGrid.of(self))

    def linear(self, tokens: int) -> float:
        """Non-attention kernels of a step of `tokens` tokens, s."""
        return self._scalar.linear(tokens) if tokens else 0.0

    def context_attention(self, sum_sq: int, sum_cross: int) -> float:
        """Prefill attention of a step's chunks, s: the single prompt with the same causal work."""
        work = sum_sq / 2 + sum_cross
        if work <= 0:
            return 0.0
        return self._scalar.attention(math.sqrt(2 * work))

    def decode_attention_one(self, seqs: int, kv_tokens: float) -> float:
        """Decode attention of one step (the scheduler's per-step path: plain floats, no numpy)."""
        return self._scalar.decoder(seqs)(kv_tokens) if seqs > 0 else 0.0

    def decode_attention_of(self, seqs: int) -> Callable[[float], float]:
        """``decode_attention_one`` at `seqs` (> 0) sequences as a function of the KV tokens alone (a decode
        stretch's steps: the batch's row is interpolated once)."""
        return self._scalar.decoder(seqs)

    def decode_attention(self, seqs: int, kv_tokens: np.ndarray | float) -> np.ndarray:
        """Decode attention of `seqs` sequences reading `kv_tokens` KV tokens in all, s (vectorised over steps)."""
        kv = np.asarray(kv_tokens, dtype=float)
        if seqs <= 0:
            return np.zeros_like(kv)
        per_seq = np.maximum(kv / seqs, self.contexts[0])
        b = min(max(seqs, int(self.seqs[0])), int(self.seqs[-1]))
        # bilinear in (log b, log L): rows at the two nearest batch sizes, each interpolated along the context
        i = int(np.clip(np.searchsorted(self.seqs, b) - 1, 0, len(self.seqs) - 2))
        w = (np.log(b) - np.log(self.seqs[i])) / (np.log(self.seqs[i + 1]) - np.log(self.seqs[i]))
        logs = np.log(self.contexts)
        lx = np.log(np.minimum(per_seq, self.contexts[-1]))
        row = (1 - w) * np.interp(lx, logs, self._log_dec[i]) + w * np.interp(lx, logs, self._log_dec[i + 1])
        seconds = np.exp(row) * np.maximum(per_seq / self.contexts[-1], 1.0) * max(seqs / self.seqs[-1], 1.0)
        return np.asarray(seconds)


def _log_interp(x: float, lxs: list[float], lys: list[float], xs_last: float) -> float:
    """Scalar log-log interpolation with :func:`_loglog`'s ends, in plain floats (a step is priced in microseconds)."""
    lx = math.log(max(x, math.exp(lxs[0])))
    if x > xs_last:
        return math.exp(lys[-1]) * x / xs_last
    i = min(max(bisect.bisect_right(lxs, lx) - 1, 0), len(lxs) - 2)
    w = (lx - lxs[i]) / (lxs[i + 1] - lxs[i])
    return math.exp(lys[i] + w * (lys[i + 1] - lys[i]))


@dataclass(frozen=True)
class _ScalarGrid:
    """A table's grid as Python lists of logarithms, for the per-step scalar lookups."""

    tokens: list[float]
    linear_s: list[float]
    prompts: list[float]
    attention_s: list[float]
    seqs: list[float]
    contexts: list[float]
    decode_rows: list[list[float]]
    ends: tuple[float, float, float, float, float]
    #: Memos: a step's linear time by token count, and the decode row interpolated to a batch size (both bounded
    #: by the engine's token budget and seats; the simulator asks the same few thousand again and again).
    _linear_memo: dict[int, float] = field(default_factory=dict, compare=False, repr=False)
    _row_memo: dict[int, list[float]] = field(default_factory=dict, compare=False, repr=False)
    _decoder_memo: dict[int, Callable[[float], float]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, t: KernelTable) -> _ScalarGrid:
        def logs(a: np.ndarray) -> list[float]:
            return [math.log(max(float(v), 1e-12)) for v in a]

        return cls(
            logs(t.tokens),
            logs(t.linear_s),
            logs(t.prompts),
            logs(t.context_attention_s),
            logs(t.seqs),
            logs(t.contexts),
            [logs(row) for row in t.decode_attention_s],
            (float(t.tokens[-1]), float(t.prompts[-1]), float(t.seqs[0]), float(t.seqs[-1]), float(t.contexts[-1])),
        )

    def linear(self, tokens: int) -> float:
        found = self._linear_memo.get(tokens)
        if found is None:
            found = self._linear_memo[tokens] = _log_interp(tokens, self.tokens, self.linear_s, self.ends[0])
        return found

    def attention(self, prompt: float) -> float:
        return _log_interp(prompt, self.prompts, self.attention_s, self.ends[1])

    def decoder(self, seqs: int) -> Callable[[float], float]:
        """As ``KernelTable.decode_attention`` for one step of `seqs` sequences, a function of the KV tokens."""
        found = self._decoder_memo.get(seqs)
        if found is None:
            found = self._decoder_memo[seqs] = self._make_decoder(seqs)
        return found

    def _make_decoder(self, seqs: int) -> Callable[[float], float]:
        contexts, row, last_context = self.contexts, self._row(seqs), self.ends[4]
        shortest, batch_scale = math.exp(contexts[0]), max(seqs / self.ends[3], 1.0)

        def decode(kv_tokens: float) -> float:
            per_seq = max(kv_tokens / seqs, shortest)
            seconds = _log_interp(min(per_seq, last_context), contexts, row, last_context)
            return seconds * max(per_seq / last_context, 1.0) * batch_scale

        return decode

    def _row(self, seqs: int) -> list[float]:
        """The log decode times along the contexts at `seqs` sequences: the two nearest batch rows mixed in log b
        (log-linear in both, as the vectorised path)."""
        row = self._row_memo.get(seqs)
        if row is None:
            lb = math.log(min(max(float(seqs), self.ends[2]), self.ends[3]))
            i = min(max(bisect.bisect_right(self.seqs, lb) - 1, 0), len(self.seqs) - 2)
            w = (lb - self.seqs[i]) / (self.seqs[i + 1] - self.seqs[i])
            low, high = self.decode_rows[i], self.decode_rows[i + 1]
            row = self._row_memo[seqs] = [(1 - w) * a + w * b for a, b in zip(low, high, strict=True)]
        return row
