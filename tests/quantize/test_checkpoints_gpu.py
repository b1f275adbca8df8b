"""The same saved checkpoints on CUDA and on the CPU: the scores a GPU machine gets match this machine's.

Skipped without a CUDA device (CI has none). On a GPU, each checkpoint is loaded twice — on the CPU as
the search scores it and on CUDA — and both are compared with the bf16 model on the same token windows:
their KL against bf16 must agree (kernels differ in accumulation order, not in the weights) and the
two placements must agree with each other far more closely than either differs from bf16.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from recommender.device import DeviceInfo
from recommender.models.source import ModelSource
from recommender.quantize import get_scheme
from recommender.quantize.checkpoint import CalibrationSet, CheckpointStore, QuantizeContext
from recommender.quantize.llmcompressor import LlmCompressorScheme, load_checkpoint

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def _mean_kl(reference: torch.Tensor, other: torch.Tensor) -> float:
    p = torch.log_softmax(reference.float(), dim=-1)
    q = torch.log_softmax(other.float(), dim=-1)
    return float((p.exp() * (p - q)).sum(-1).mean())


def _logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    device = next(model.parameters()).device
    with torch.inference_mode():
        return model(ids.to(device)).logits.float().cpu()


@pytest.mark.parametrize("name", ["fp8-dynamic", "w4a16-gptq-g128", "int8-w8a8"])
def test_checkpoint_scores_the_same_on_cuda(tmp_path: Path, demo_model_dir: Path, name: str) -> None:
    source = ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir)
    ids = source.load_tokenizer()(Path(json.__file__).read_text(), add_special_tokens=False)["input_ids"]
    rows = tuple(tuple(ids[i * 64 : (i + 1) * 64]) for i in range(8))
    context = QuantizeContext(CheckpointStore(tmp_path), lambda: CalibrationSet(rows[:4], "json/__init__.py"))
    scheme = get_scheme(name)
    assert isinstance(scheme, LlmCompressorScheme)
    path = scheme.checkpoint(source, context)
    windows = torch.tensor([list(r) for r in rows[4:]])
    reference = _logits(source.load_model(dtype=torch.bfloat16, device=DeviceInfo("cpu")), windows)
    on_cpu = _logits(load_checkpoint(path, DeviceInfo("cpu")), windows)
    on_cuda = _logits(load_checkpoint(path, DeviceInfo("cuda", torch.cuda.get_device_capability(0))), windows)
    kl_cpu, kl_cuda = _mean_kl(reference, on_cpu), _mean_kl(reference, on_cuda)
    between = _mean_kl(on_cpu, on_cuda)
    print(f"{name}: mean KL vs bf16 on cpu {kl_cpu:.6f}, on cuda {kl_cuda:.6f}, cpu vs cuda {between:.6f}")
    assert abs(kl_cpu - kl_cuda) <= 0.25 * max(kl_cpu, kl_cuda) + 1e-4
    assert between < max(kl_cpu, 1e-4)
