"""A candidate's scheme objects: the one its `method` names, and that one as scored (KV dtype applied)."""

from __future__ import annotations

from recommender.config.candidate import Candidate
from recommender.quantize import get_scheme
from recommender.quantize.kv_cache import FP8KVCache


def test_the_scheme_of_an_auto_kv_candidate_is_the_registrys_own() -> None:
    c = Candidate("fp8", "fp8-dynamic", "h100-sxm", 8)
    assert c.scheme == c.base_scheme == get_scheme("fp8-dynamic")


def test_an_fp8_kv_cache_wraps_the_weights_scheme_and_names_it_as_scored() -> None:
    c = Candidate("fp8", "fp8-dynamic", "h100-sxm", 8, kv_cache_dtype="fp8")
    assert c.base_scheme == get_scheme("fp8-dynamic") and c.method == "fp8-dynamic"
    assert isinstance(c.scheme, FP8KVCache) and c.scheme.base == c.base_scheme
    assert c.scheme.name == "fp8-dynamic+kv-fp8" == get_scheme("fp8-dynamic+kv-fp8").name


def test_a_modelopt_scheme_with_fp8_kv_is_its_own_calibrated_variant() -> None:
    c = Candidate("fp4", "modelopt-nvfp4", "b200", 8, kv_cache_dtype="fp8")
    assert not isinstance(c.scheme, FP8KVCache)  # its checkpoint carries the KV scales: no wrapper
    assert c.scheme == c.base_scheme.fp8_kv_variant() and c.scheme.name == "modelopt-nvfp4+kv-fp8"
