"""The AMD Quark FP8 scheme in the engines' rows and its launch command (sources in recommender/engines/vllm.py).

AMD's own FP8 path for an MI300X is a Quark checkpoint, which vLLM on ROCm loads with ``--quantization quark``
(``QuarkW8A8Fp8``, minimum capability 89: also Ada and Hopper on CUDA, with no weight-only fallback below).
"""

from __future__ import annotations

import shlex

import pytest

from recommender.config.candidate import Candidate
from recommender.device import DeviceInfo
from recommender.engines.eligibility import eligibility
from recommender.fleet.launch import launch_commands
from recommender.perf.catalog.gpus import load_catalog
from recommender.quantize import get_scheme

ADA, AMPERE = (DeviceInfo("cuda", compute_capability=c) for c in ((8, 9), (8, 0)))


@pytest.mark.parametrize(
    ("device", "engines"),
    [
        (load_catalog().accelerators["mi300x"].device, ("vllm",)),
        (ADA, ("vllm",)),
        (AMPERE, ()),  # no Quark scheme matches below 8.9: vLLM raises, it does not fall back
    ],
)
def test_only_vllm_launches_quark_fp8_where_its_quark_loader_runs(device: DeviceInfo, engines: tuple[str, ...]) -> None:
    result = eligibility(get_scheme("quark-fp8"), device, ("vllm", "sglang", "tgi", "trtllm"))
    assert result.engines == engines


def test_vllm_on_an_mi300x_serves_the_exported_directory_with_the_quark_flag() -> None:
    mi300x = load_catalog().get("mi300x").device
    assert mi300x.kind == "rocm"
    candidate = Candidate("fp8", "quark-fp8", "mi300x", 64, 1)
    commands = {
        e.engine: e
        for e in launch_commands(
            candidate,
            model="meta-llama/Llama-3.1-70B",
            max_model_len=768,
            checkpoint="/ckpt/llama-70b-quark-fp8",
            device=mi300x,
            engine="vllm",
        )
    }
    vllm = shlex.split(commands["vllm"].command or "")
    assert vllm[:3] == ["vllm", "serve", "/ckpt/llama-70b-quark-fp8"]
    assert vllm[vllm.index("--quantization") + 1] == "quark"
    assert any("quant_method quark" in note for note in commands["vllm"].notes)
    assert not commands["sglang"].supported and not commands["trtllm"].supported
