"""The accelerator catalog's datasheet facts: FP4 where the silicon has it, compute capabilities, memory totals."""

from __future__ import annotations

import pytest

from recommender.perf.catalog.gpus import load_catalog

CATALOG = load_catalog()
#: Parts with FP4 tensor/matrix cores: Blackwell (NVFP4/MXFP4) and CDNA 4 (MXFP4).
FP4_PARTS = {"b200", "gb200", "b300", "rtx-pro-6000", "mi355x"}


@pytest.mark.parametrize("key", sorted(CATALOG.accelerators))
def test_every_native_precision_has_its_peak_and_a_source(key: str) -> None:
    accel = CATALOG.get(key)
    assert set(accel.native_precisions) <= set(accel.peak_tflops), key
    assert accel.spec_source.strip(), key
    assert ("fp4" in accel.native_precisions) == (key in FP4_PARTS), key


def test_fp4_peaks_follow_the_datasheets() -> None:
    """Dense FP4 per GPU: HGX B200 72 PF / 8, GB200 10 PF, HGX B300 108 PF / 8, RTX PRO 6000 SE 4 PF sparse / 2,
    MI355X AMD's dense 10.1 PF; never below the FP8 rate."""
    fp4 = {key: CATALOG.get(key).peak_tflops["fp4"] for key in sorted(FP4_PARTS)}
    assert fp4 == {"b200": 9000, "gb200": 10000, "b300": 13500, "rtx-pro-6000": 2000, "mi355x": 10100}
    for key in FP4_PARTS:
        assert fp4[key] >= CATALOG.get(key).peak_tflops["fp8"], key


def test_compute_capabilities_and_device_memory() -> None:
    capability = {k: CATALOG.get(k).compute_capability for k in ("b200", "gb200", "b300", "rtx-pro-6000", "a40")}
    assert capability == {"b200": "10.0", "gb200": "10.0", "b300": "10.3", "rtx-pro-6000": "12.0", "a40": "8.6"}
    assert CATALOG.get("mi325x").compute_capability is None and CATALOG.get("mi355x").compute_capability is None
    mib = {k: CATALOG.get(k).memory_mib for k in ("b300", "rtx-pro-6000", "a40")}
    assert mib == {"b300": 275040, "rtx-pro-6000": 97887, "a40": 46068}  # nvidia-smi totals in public logs
    assert CATALOG.get("rtx-pro-6000").memory_bandwidth_gbps == 1597  # the Server Edition, not the Workstation's 1,792


def test_figures_kept_without_a_found_source_say_so() -> None:
    """B300's INT8, RTX PRO 6000's INT8 and the Infinity Fabric rates of MI325X/MI355X are marked, not passed off."""
    for key in ("b300", "rtx-pro-6000", "mi325x", "mi355x", "a10g"):
        assert "(unverified)" in CATALOG.get(key).spec_source, key
