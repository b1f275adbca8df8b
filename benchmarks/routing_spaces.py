"""The chat and RAG ready spaces planned with and without a prefix-aware router, each as shipped and with the prompt
sharing such a service has, on reduced copies (one or two GPUs, one precision) so each plan takes seconds.

    PYTHONPATH=. .venv/bin/python benchmarks/routing_spaces.py

Each copy adds ``space.routing: [round-robin, prefix-aware, load-aware]`` and plans it (``recommender plan --spec
COPY --json``): per GPU, the replicas one replica's capacity asks for, each router's fleet (replicas, hit rate), the
winner and the reason printed. The copies (the full spaces plan 7 GPUs x 5 precisions, each row's fleet sized three
times: longer than 5 minutes on 2 cores):

- ``chat-70b``: fp8 (``fp8-dynamic``) on H100-SXM at TP 2 or 4, as shipped (1,024-token prompts sharing nothing), then
  with 4-turn conversations (``conversation: {turns: 4, think_time_s: 30, message_tokens: 200}``);
- ``rag-8b``: bf16 at TP 1, batch 64, as shipped on H100-SXM (3,000-token prompts sharing nothing), then on L40S and
  H100-SXM with 4 system-prompt templates of 1,024 tokens (``shared_prefix: {tokens: 1024, templates: 4}``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
ROUTING = ["round-robin", "prefix-aware", "load-aware"]


def _copies() -> dict[str, dict[str, Any]]:
    chat = yaml.safe_load((ROOT / "search_spaces" / "chat-70b.yaml").read_text())
    chat["use_case"] = str(ROOT / "evals" / "chat-assistant.yaml")
    chat["space"].update(schemes={"fp8": ["fp8-dynamic"]}, hardware=["h100-sxm"], tensor_parallel=[2, 4])
    chat["space"]["routing"] = ROUTING
    chat["current"] = {"precision": "fp8", "scheme": "fp8-dynamic", "hardware": "h100-sxm", "batch_size": 128}
    conversations = {**chat, "traffic": {**chat["traffic"], "conversation": {"turns": 4, "think_time_s": 30}}}
    conversations["traffic"]["conversation"]["message_tokens"] = 200
    rag = yaml.safe_load((ROOT / "search_spaces" / "rag-8b.yaml").read_text())
    rag["use_case"] = str(ROOT / "evals" / "rag-service.yaml")
    rag["space"].update(schemes={"bf16": ["baseline"]}, tensor_parallel=[1], batch_sizes=[64], routing=ROUTING)
    plain_rag = {**rag, "space": {**rag["space"], "hardware": ["h100-sxm"]}}
    shared = {**rag, "space": {**rag["space"], "hardware": ["l40s", "h100-sxm"]}}
    shared["traffic"] = {**rag["traffic"], "shared_prefix": {"tokens": 1024, "templates": 4}}
    return {
        "chat-70b": chat,
        "chat-70b + 4-turn conversations": conversations,
        "rag-8b": plain_rag,
        "rag-8b + 4 x 1,024-token system prompts": shared,
    }


def main() -> None:
    print("| space | GPU | one replica x N | round-robin | prefix-aware | load-aware | winner | plan s |")
    print("|---|---|---|---|---|---|---|---|")
    reasons = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in _copies().items():
            path = Path(tmp) / "spec.yaml"
            path.write_text(yaml.safe_dump(spec, sort_keys=False))
            t0 = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "recommender", "plan", "--spec", str(path), "--json"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            )
            wall = time.perf_counter() - t0
            for c in json.loads(done.stdout)["routing"]:
                cells = [
                    f"{f['replicas'] if f['met'] else '>' + str(f['replicas'])}, {f['prefix_hit_rate']:.0%}"
                    for f in c["fleets"]
                ]
                gpu = f"{c['hardware']} {c['precision']}"
                print(f"| {name} | {gpu} | {c['row']['replicas']} | {' | '.join(cells)} | {c['winner']} | {wall:.0f} |")
                reasons.append(f"- {name}, {gpu}: {c['reason']}")
    print("\n" + "\n".join(reasons))


if __name__ == "__main__":
    main()
