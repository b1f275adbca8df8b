"""Train the embedded demo model: a small Llama-architecture causal LM of Python source.

Why the project trains its own model: the demo and the tests must run offline on two
CPU cores, and the quality question ("does int4 keep this use case's quality?") needs
a model that has learned something, so that quantization has something to lose.

Reproducible: the corpus is the interpreter's standard library (see corpus.py), the
tokenizer and the model are trained in one fixed order with fixed seeds, and torch runs
with deterministic algorithms on a fixed thread count. Every linear layer's width is a
multiple of 64 so that bitsandbytes 4-bit and group-wise torchao kernels run on the CPU.

    python -m recommender.demo.train --output recommender/demo/model
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from recommender.demo.corpus import iter_source_files

SEED = 20261122
VOCAB_SIZE = 2048
SPECIAL_TOKENS = ["<|endoftext|>"]


def demo_config() -> LlamaConfig:
    """The architecture: 4 layers, width 256, GQA with 2 KV heads, all widths multiples of 64."""
    # rope_theta and torch_dtype: transformers 4.x takes them as such and 5.x through the backward-compatibility
    # kwargs its dataclass_transform signature does not show; both build the same config.
    return LlamaConfig(  # type: ignore[call-arg]
        vocab_size=VOCAB_SIZE,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=1024,
        rope_theta=10_000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        torch_dtype="bfloat16",
    )


def train_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (GPT-2 style), so any text round-trips without unknowns."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    # transformers 5 leaves the fast tokenizer's __init__ unannotated.
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        model_max_length=1024,
    )


def token_stream(tokenizer: PreTrainedTokenizerFast, texts: list[str]) -> np.ndarray:
    """All training files as one stream of token ids, each file ended by <|endoftext|>."""
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    for text in texts:
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(eos)
    return np.asarray(ids, dtype=np.int64)


def lr_at(step: int, *, steps: int, peak: float, warmup: int) -> float:
    """Linear warm-up then cosine decay to a tenth of the peak."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def run_steps(
    model: LlamaForCausalLM,
    optim: torch.optim.Optimizer,
    stream: np.ndarray,
    rng: np.random.Generator,
    *,
    steps: int,
    seq_len: int,
    batch_size: int,
    peak_lr: float,
    log_every: int,
) -> float:
    """Train on random windows of `stream` with warm-up and cosine decay; returns the last loss."""
    started = time.perf_counter()
    loss_value = float("nan")
    for step in range(steps):
        starts = rng.integers(0, stream.size - seq_len - 1, size=batch_size)
        batch = torch.from_numpy(np.stack([stream[s : s + seq_len] for s in starts]))
        for group in optim.param_groups:
            group["lr"] = lr_at(step, steps=steps, peak=peak_lr, warmup=max(1, steps // 20))
        loss = model(input_ids=batch, labels=batch).loss
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        loss_value = float(loss)
        if step % log_every == 0 or step == steps - 1:
            elapsed = time.perf_counter() - started
            print(f"step {step:5d}/{steps}  loss {loss_value:.3f}  {elapsed:6.0f}s", flush=True)
    return loss_value


def train(output: Path, *, steps: int, seq_len: int, batch_size: int, peak_lr: float) -> dict[str, float]:
    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(SEED)

    texts = [f.text for f in iter_source_files("train")]
    tokenizer = train_tokenizer(texts)
    stream = token_stream(tokenizer, texts)
    print(f"corpus: {len(texts)} files, {stream.size:,} tokens")

    model = LlamaForCausalLM(demo_config())  # type: ignore[no-untyped-call]  # untyped __init__ in transformers 5.17
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters")
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    optim = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=peak_lr,
        betas=(0.9, 0.95),
    )
    started = time.perf_counter()
    loss_value = run_steps(
        model, optim, stream, rng, steps=steps, seq_len=seq_len, batch_size=batch_size, peak_lr=peak_lr, log_every=50
    )

    output.mkdir(parents=True, exist_ok=True)
    # transformers types PreTrainedModel.to through functools.wraps(nn.Module.to), whose first parameter is `self`.
    model = model.to(torch.bfloat16)  # type: ignore[arg-type]
    model.eval()
    model.save_pretrained(output, safe_serialization=True)
    tokenizer.save_pretrained(output)
    summary = {
        "parameters": n_params,
        "train_tokens_seen": steps * batch_size * seq_len,
        "corpus_tokens": int(stream.size),
        "final_train_loss": loss_value,
        "steps": steps,
        "seq_len": seq_len,
        "batch_size": batch_size,
        "peak_lr": peak_lr,
        "seed": SEED,
        "train_seconds": round(time.perf_counter() - started, 1),
    }
    (output / "training_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "model")
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--peak-lr", type=float, default=3e-3)
    args = parser.parse_args()
    summary = train(
        args.output, steps=args.steps, seq_len=args.seq_len, batch_size=args.batch_size, peak_lr=args.peak_lr
    )
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
