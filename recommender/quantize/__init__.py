"""Precision -> quantization method registry.

Add a method by appending it to its backend file's ``METHODS`` (or a new backend file
listed in ``_BACKENDS`` below); nothing else changes. Importing this package imports no
torch: the methods' loaders import their libraries when they run.
"""

from __future__ import annotations

import difflib

from recommender.errors import BadInputError
from recommender.quantize import baseline, bitsandbytes, llmcompressor, modelopt, quark, torchao
from recommender.quantize._base import QuantScheme
from recommender.quantize.kv_cache import FP8_KV_SUFFIX, with_kv_cache

__all__ = ["QuantScheme", "all_schemes", "get_scheme", "with_kv_cache"]

_BACKENDS = (baseline, llmcompressor, modelopt, quark, bitsandbytes, torchao)


def all_schemes() -> dict[str, QuantScheme]:
    """Every registered scheme by name."""
    return {m.name: m for backend in _BACKENDS for m in backend.METHODS}


def get_scheme(name: str, *, field: str = "scheme") -> QuantScheme:
    """The scheme called `name`, or a BadInputError naming the field and the closest names."""
    methods = all_schemes()
    if name.endswith(FP8_KV_SUFFIX):
        base = name.removesuffix(FP8_KV_SUFFIX)
        if FP8_KV_SUFFIX in base:  # an fp8 KV cache is fp8 once: no nesting (1,200 of them used to recurse)
            raise BadInputError(
                field,
                f"{FP8_KV_SUFFIX} is given {name.count(FP8_KV_SUFFIX)} times",
                f"give it once, at the end: {base.split(FP8_KV_SUFFIX)[0][:40]}{FP8_KV_SUFFIX}",
            )
        return with_kv_cache(get_scheme(base, field=field), "fp8")
    if name in methods:
        return methods[name]
    close = difflib.get_close_matches(name, methods, n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(sorted(methods))}"
    raise BadInputError(field, f"unknown quantization scheme {name!r}", hint)
