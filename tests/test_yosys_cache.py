"""The Yosys run cache (rtl_sim/yosys_cache.py): a second eatt power of the same RTL copies the
netlist (same numbers), a changed source or library misses, EATT_YOSYS_CACHE=0 and a broken
entry run Yosys."""

from __future__ import annotations

import json
import shutil

import pytest

from eatt.config import CoreConfig
from eatt.quant.golden import random_weights
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.power import power
from eatt.rtl_sim.resources import find_yosys
from eatt.rtl_sim.yosys_cache import PLACEHOLDER, cache_key, run_cached

SMALL = dict(len_q=2, len_k=2, dim=2, heads=1, in_bits=4, in_frac=2, weight_bits=4, qk_bits=6)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EATT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("EATT_YOSYS_CACHE", raising=False)
    return tmp_path / "cache" / "yosys"


def _script(rel: str) -> str:
    return f"read_verilog -sv top.sv; synth -top top; write_json {rel}/netlist.json"


def _run(out, name: str):
    work = out / name
    work.mkdir()
    return run_cached(
        find_yosys(), _script(name), out, work, work / "yosys.log", "Yosys of top", 120,
        ["top.sv"], ("netlist.json",),
    )  # fmt: skip


def test_the_same_run_is_copied_and_a_changed_source_misses(tmp_path, cache):
    out = tmp_path / "rtl"
    out.mkdir()
    (out / "top.sv").write_text("module top(input a, b, output y); assign y = a & b; endmodule\n")
    code, seconds, _, cached = _run(out, ".w1")
    assert code == 0 and not cached and len(list(cache.iterdir())) == 1
    code, again, _, cached = _run(out, ".w2")  # another folder name: the same key
    assert code == 0 and cached and again == seconds
    netlists = [(out / w / "netlist.json").read_bytes() for w in (".w1", ".w2")]
    assert netlists[0] == netlists[1]
    assert (out / ".w2" / "yosys.log").is_file()  # the log comes with it
    (out / "top.sv").write_text("module top(input a, b, output y); assign y = a | b; endmodule\n")
    assert not _run(out, ".w3")[3]
    (out / ".w4").mkdir()
    (out / ".w4" / "cells.lib").write_text("library (x) {}\n")  # a file in the folder: a key part
    w3, w4 = (cache_key(find_yosys(), _script(n), out, out / n, ["top.sv"]) for n in (".w3", ".w4"))
    assert w3 != w4 and PLACEHOLDER not in _script(".w3")


def test_off_and_broken_entries_run_yosys(tmp_path, cache, monkeypatch):
    out = tmp_path / "rtl"
    out.mkdir()
    (out / "top.sv").write_text("module top(input a, output y); assign y = ~a; endmodule\n")
    assert not _run(out, ".w1")[3]
    entry = next(cache.iterdir())
    (entry / "netlist.json").unlink()  # broken: Yosys runs, and its output is used
    code, _, _, cached = _run(out, ".w2")
    assert code == 0 and not cached and (out / ".w2" / "netlist.json").is_file()
    shutil.rmtree(cache)
    monkeypatch.setenv("EATT_YOSYS_CACHE", "0")
    assert not _run(out, ".w3")[3] and not cache.exists()


@pytest.mark.rtl
def test_power_twice_gives_the_same_numbers(tmp_path, cache):
    """eatt power's second run of an RTL folder takes the netlist from the cache."""
    cfg = CoreConfig.from_dict(dict(kind="eatt", **SMALL))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg), out)
    first = power(out, vectors=4, seed=1, simulator="icarus")
    second = power(out, vectors=4, seed=1, simulator="icarus")
    assert not first["yosys"]["cached"] and second["yosys"]["cached"]
    assert second["energy_per_call_pj"] == first["energy_per_call_pj"]
    assert second["mismatches"] == 0 and second["sta"] == first["sta"]
    saved = json.loads((out / "power" / "result.json").read_text())
    assert saved["yosys"]["cached"]
