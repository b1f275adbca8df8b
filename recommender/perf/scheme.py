"""What the performance model reads of a serving scheme: its bits, whether activations stay 16-bit, its kernel path.

A structural type, so `perf/` stays below the quantization registry: `recommender.quantize.QuantScheme`
satisfies it, and so does any object with these five attributes (a test's toy scheme). Callers that start
from a scheme's name pass a `SchemeLookup` (the registry's ``get_scheme``) instead of perf importing one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Scheme(Protocol):
    """A quantization scheme as far as memory, step cost and simulation need it."""

    @property
    def name(self) -> str: ...

    @property
    def precision(self) -> str:
        """The precision family (bf16, fp16, fp8, int8, int4, fp4): the tensor-core rate it may use."""
        ...

    @property
    def bits_per_weight(self) -> float:
        """Effective storage bits per linear weight, scales included."""
        ...

    @property
    def weight_only(self) -> bool:
        """True when activations stay 16-bit (dequantize, then a 16-bit matmul)."""
        ...

    @property
    def kernel_family(self) -> str:
        """The kernel path engines run it with (e.g. "bnb-nf4", "fp8"): where kernels are slower than their bits."""
        ...


#: A scheme by name (``recommender.quantize.get_scheme``), for data that names schemes (measured runs).
SchemeLookup = Callable[[str], Scheme]
