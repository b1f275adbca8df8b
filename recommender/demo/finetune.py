"""Release v2 of the demo model: v1 trained further, so the releases demo compares two real checkpoints.

A new release of a model moves what quantization does to it — a fine-tune changes the
weights' ranges and outliers — and the releases commands (`recommender compare`,
`recommender gate`) exist to show that movement. v2 continues v1's training on the same
corpus with a fresh data order and a lower learning rate; the tokenizer is v1's.
Deterministic like train.py (fixed seed, deterministic algorithms, 2 threads).

    python -m recommender.demo.finetune --output recommender/demo/model-v2
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np
import torch
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

from recommender.demo.corpus import iter_source_files
from recommender.demo.train import run_steps, token_stream

SEED = 20261123
V1 = Path(__file__).parent / "model"


def finetune(
    output: Path, *, base: Path, steps: int, seq_len: int, batch_size: int, peak_lr: float
) -> dict[str, object]:
    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(SEED)

    tokenizer = PreTrainedTokenizerFast.from_pretrained(base)
    stream = token_stream(tokenizer, [f.text for f in iter_source_files("train")])
    model = LlamaForCausalLM.from_pretrained(base, dtype=torch.float32)
    model.train()
    optim = torch.optim.AdamW(model.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.1)
    started = time.perf_counter()
    loss_value = run_steps(
        model, optim, stream, rng, steps=steps, seq_len=seq_len, batch_size=batch_size, peak_lr=peak_lr, log_every=25
    )

    output.mkdir(parents=True, exist_ok=True)
    # transformers types PreTrainedModel.to through functools.wraps(nn.Module.to), whose first parameter is `self`.
    model.to(torch.bfloat16).eval().save_pretrained(output, safe_serialization=True)  # type: ignore[arg-type]
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(base / name, output / name)
    summary = {
        "base": str(base.name),
        "steps": steps,
        "seq_len": seq_len,
        "batch_size": batch_size,
        "peak_lr": peak_lr,
        "seed": SEED,
        "final_train_loss": loss_value,
        "train_seconds": round(time.perf_counter() - started, 1),
    }
    (output / "training_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "model-v2")
    parser.add_argument("--base", type=Path, default=V1)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--peak-lr", type=float, default=1e-3)
    args = parser.parse_args()
    summary = finetune(
        args.output,
        base=args.base,
        steps=args.steps,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        peak_lr=args.peak_lr,
    )
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
