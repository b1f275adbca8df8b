"""Checkpoint faults through the real `recommender quantize` (issue 44): a real llm-compressor checkpoint of the
demo model in a real store, then spoiled on disk (truncated weights, a safetensors header that lies about its
tensors, an edited config) or written under a file-size limit (`ulimit -f`, enforced by the kernel like a full
disk). A spoiled checkpoint is found by its manifest's checksums, said in one line and quantized again; a full
disk is one line naming the checkpoint and the space it needs, and leaves no directory to be found later."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.quantize.checkpoint import MANIFEST, manifest_mismatch
from tests.conftest import DEMO_MODEL, REPO

# Each case quantizes the demo model twice in a subprocess (about 10 s each on two cores).
pytestmark = pytest.mark.slow


def _quantize(cache: Path, out: Path, *, file_limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def limited() -> None:
        if file_limit is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    env = {**os.environ, "PYTHONPATH": str(REPO), "RECOMMENDER_CACHE_DIR": str(cache)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "recommender.cli.main",
            "quantize",
            "--model",
            str(DEMO_MODEL),
            "--scheme",
            "w4a16-rtn-g128",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=limited,
        timeout=600,
        check=False,
    )


def _lying_header(weights: Path) -> None:
    """Rewrite the safetensors header so its first tensor claims more bytes than the file holds (same length)."""
    data = weights.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    name = next(k for k in header if k != "__metadata__")
    start, end = header[name]["data_offsets"]
    text = data[8 : 8 + size].decode()
    lie = text.replace(f"[{start},{end}]", f"[{start},{end + 7}]", 1).encode()
    assert lie != text.encode()
    weights.write_bytes(struct.pack("<Q", len(lie)) + lie + data[8 + size :])


@pytest.mark.parametrize("spoil", ["truncated weights", "lying header", "edited config"])
def test_a_spoiled_checkpoint_is_found_by_its_checksums_and_made_again(spoil: str, tmp_path: Path) -> None:
    first = _quantize(tmp_path / "cache", tmp_path / "first")
    assert first.returncode == 0, first.stderr
    (stored,) = (tmp_path / "cache" / "checkpoints").iterdir()
    assert (stored / MANIFEST).is_file() and manifest_mismatch(stored) is None
    good = (stored / "model.safetensors").read_bytes()
    if spoil == "truncated weights":
        os.truncate(stored / "model.safetensors", len(good) // 2)
    elif spoil == "lying header":
        _lying_header(stored / "model.safetensors")
    else:
        config = json.loads((stored / "config.json").read_text(encoding="utf-8"))
        config["num_hidden_layers"] += 1
        (stored / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert manifest_mismatch(stored) is not None
    second = _quantize(tmp_path / "cache", tmp_path / "second")
    assert second.returncode == 0, second.stderr
    notes = [line for line in second.stderr.splitlines() if line.startswith("note: checkpoint")]
    assert len(notes) == 1 and "is corrupt" in notes[0] and "quantized again" in notes[0], second.stderr
    assert manifest_mismatch(stored) is None and (stored / "model.safetensors").read_bytes() == good
    assert (tmp_path / "second" / "model.safetensors").read_bytes() == good  # what is served: the good bytes
    assert sorted(p.name for p in (tmp_path / "cache" / "checkpoints").iterdir()) == [stored.name]


def test_a_full_disk_while_quantizing_is_one_line_and_leaves_no_checkpoint(tmp_path: Path) -> None:
    done = _quantize(tmp_path / "cache", tmp_path / "out", file_limit=1 << 20)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(tmp_path / "cache" / "checkpoints") in errors[0] and "the disk ran out while writing it" in errors[0]
    assert "MB" in errors[0] and "ulimit -f" in errors[0]
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []  # nothing half-written to find later
    assert not (tmp_path / "out").exists()
    again = _quantize(tmp_path / "cache", tmp_path / "out")  # room again: it is made, whole
    assert again.returncode == 0, again.stderr
    (stored,) = (tmp_path / "cache" / "checkpoints").iterdir()
    assert manifest_mismatch(stored) is None
