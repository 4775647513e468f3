"""Calls and tokens per second of a core at a measured clock (rtl_sim/throughput.py)."""

from __future__ import annotations

import pytest

from eatt.rtl_sim.throughput import line, throughput

CONFIG = {"len_q": 64, "len_k": 64, "dim": 128, "heads": 4}


def test_folded_engine_one_call_per_ii():
    meta = {"level": "folded", "config": CONFIG, "ii_cycles": 105_474, "latency_cycles": 104_450}
    t = throughput(meta, 100.0, energy_pj=2e6)
    assert t["ii_cycles"] == 105_474 and t["tokens_per_call"] == 64
    assert t["calls_per_s"] == pytest.approx(100e6 / 105_474, abs=1e-3)
    assert t["tokens_per_s"] == pytest.approx(64 * 100e6 / 105_474, abs=1e-2)
    assert t["latency_us"] == pytest.approx(1044.5)
    assert t["power_mw"] == pytest.approx(2e6 * 1e-12 * 100e6 / 105_474 * 1e3, rel=1e-5)
    assert "calls/s" in line(t) and "105,474" in line(t) and "64 tokens a call" in line(t)


def test_unrolled_core_a_call_a_cycle_and_window_a_step():
    meta = {"level": "attention", "config": CONFIG, "latency_cycles": 4}
    t = throughput(meta, 95.3)
    assert t["ii_cycles"] == 1 and t["calls_per_s"] == pytest.approx(95.3e6)
    assert t["tokens_per_s"] == pytest.approx(64 * 95.3e6) and t["power_mw"] is None
    assert "95.3 M calls/s" in line(t)
    window = {"level": "window", "config": CONFIG, "window_rows": 5, "latency_cycles_max": 8}
    t = throughput(window, 50.0)
    assert t["ii_cycles"] == 5 and t["tokens_per_call"] == 1 and t["calls_per_s"] == 1e7
    assert t["latency_us"] == pytest.approx(0.16)


def test_no_clock_no_rate():
    t = throughput({"level": "folded", "config": CONFIG, "ii_cycles": 10}, None)
    assert t["calls_per_s"] is None and t["tokens_per_s"] is None and t["latency_us"] is None
    assert line(t) == "throughput   no clock measured" and line(None) == line(t)
