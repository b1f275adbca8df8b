"""Claims in a real database: one computation per key across workers, takeover of a dead owner's claim."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from recommender.study.claims import CLAIMS, ClaimStore


def _store(tmp_path: Path, **kwargs: float) -> ClaimStore:
    return ClaimStore.open(f"sqlite:///{tmp_path}/claims.db", **kwargs)


def test_concurrent_workers_compute_a_key_once(tmp_path: Path) -> None:
    calls: list[str] = []
    answers: dict[str, tuple[dict, bool]] = {}

    def work(name: str) -> None:
        store = _store(tmp_path, heartbeat_s=0.2)

        def compute() -> dict:
            calls.append(store.owner)
            time.sleep(1.0)  # long enough that every other worker finds the claim held
            return {"by": store.owner}

        answers[name] = store.run_once("quality:x", "quality of x", compute)

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(calls) == 1
    assert sorted(ran for _, ran in answers.values()) == [False, False, True]
    assert {result["by"] for result, _ in answers.values()} == {calls[0]}
    assert [key for key, _, _ in _store(tmp_path).completions()] == ["quality:x"]


def test_a_dead_owners_claim_is_taken_over_after_the_grace_period(tmp_path: Path) -> None:
    store = _store(tmp_path, heartbeat_s=0.2)
    # What a SIGKILLed worker leaves: a running claim whose beat never moves again.
    with store.engine.begin() as db:
        db.execute(
            sa.insert(CLAIMS).values(
                key="k", label="quality of k", owner="dead:1:abc", state="running", beat=3, attempts=1, result=None
            )
        )
    waits: list[str] = []
    store.on_wait = waits.append
    started = time.monotonic()
    result, ran = store.run_once("k", "quality of k", lambda: {"value": 1})
    assert ran and result == {"value": 1}
    assert time.monotonic() - started >= store.grace_s
    assert waits and "dead:1:abc" in waits[0]
    claim, stored = store.get("k")  # type: ignore[misc]
    assert claim.state == "done" and claim.owner == store.owner and claim.attempts == 2 and stored == {"value": 1}


def test_a_live_owner_keeps_its_claim(tmp_path: Path) -> None:
    owner = _store(tmp_path, heartbeat_s=0.1)
    waiter = _store(tmp_path, heartbeat_s=0.1)
    got: list[tuple[dict, bool]] = []

    def slow() -> dict:
        time.sleep(1.5)  # five grace periods: only the heartbeat keeps the claim
        return {"owner": owner.owner}

    t = threading.Thread(target=lambda: got.append(owner.run_once("k", "k", slow)))
    t.start()
    time.sleep(0.3)
    result, ran = waiter.run_once("k", "k", lambda: {"owner": waiter.owner})
    t.join(timeout=30)
    assert not ran and result == {"owner": owner.owner}
    assert len(owner.completions()) == 1


def test_a_failed_computation_releases_its_claim(tmp_path: Path) -> None:
    store = _store(tmp_path)

    def boom() -> dict:
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        store.run_once("k", "k", boom)
    assert store.get("k") is None and store.completions() == []
    assert store.run_once("k", "k", lambda: {"ok": True}) == ({"ok": True}, True)


def test_method_identity_is_the_same_in_every_process() -> None:
    """Quality cache keys and claim keys must agree across workers: no set order or address may leak in."""
    code = "from recommender.quantize import all_schemes as a; print('\\n'.join(m.identity() for m in a().values()))"
    outputs = [
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")  # two string-hash orders: a set's order or an address that leaks differs between them
    ]
    assert outputs[0] and outputs[0] == outputs[1]
    assert "0x" not in outputs[0]
