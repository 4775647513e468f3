"""bench/folded_compare.py's own plumbing: the equal-cycles pairs and their ratios from sweep
records (synthetic here; the real runs are bench/results/folded_compare*.json)."""

from __future__ import annotations

import pytest
from bench_module import load_bench


@pytest.fixture(scope="module")
def bench():
    return load_bench("folded_compare")


def _record(kind, lut, dsp, nodsp=None, status="done", lanes=2):
    metrics = {"cycles": 388, "LUT": lut, "FF": 10, "CARRY4": 5, "DSP48E1": dsp, "BRAM": 0}
    if nodsp is not None:
        metrics["LUT_nodsp"] = nodsp
    return {
        "id": f"{kind}-{lanes}",
        "status": status,
        "config": {"kind": kind, "len_q": 4, "len_k": 4, "dim": 8, "heads": 2},
        "folding": {"lanes": lanes, "simd": 2},
        "metrics": metrics,
    }


def test_pairs_at_equal_cycles_and_ratios(bench):
    records = [
        _record("eatt", 1000, 10, nodsp=3000),
        _record("vanilla", 1000, 20, nodsp=6000),
        _record("eatt", 5, 1, lanes=4),  # no done peer: no row
        _record("vanilla", 5, 1, lanes=4, status="failed"),
    ]
    (row,) = bench.compare(records, dsp_luts=100)
    assert (row["lanes"], row["simd"], row["equal_cycles"]) == (2, 2, True)
    assert row["eatt"]["LUT_equiv"] == 2000 and row["vanilla"]["LUT_equiv"] == 3000
    assert row["ratios"] == {"LUT": 1.0, "LUT_equiv": 0.6667, "LUT_nodsp": 0.5}
    assert 0 < row["paper_attention_energy_ratio"] < 1
    md = bench.markdown([row], "small", 100)
    assert "| 4 x 4, 8, 2 | 2, 2 (2) | 388 / 388 |" in md and "3,000 / 6,000 (0.50)" in md


def test_rates_where_a_stage_measured_a_clock(bench):
    e, v = _record("eatt", 1000, 10), _record("vanilla", 1000, 20)
    e["metrics"] |= {"pnr_fmax_mhz": 90.0, "pnr_calls_per_s": 90e6 / 388}
    v["metrics"] |= {"pnr_fmax_mhz": 60.0, "pnr_calls_per_s": 60e6 / 388}
    (row,) = bench.compare([e, v], dsp_luts=100)
    assert row["ratios"]["pnr_fmax_mhz"] == 1.5 and row["ratios"]["pnr_calls_per_s"] == 1.5
    assert "fmax_mhz" not in row["ratios"]  # no OpenSTA clock in these records
    md = bench.markdown([row], "rates", 100)
    assert "| ECP5 90 / 60 (1.50) | ECP5 231,959 / 154,639 (1.50) |" in md
