"""`eatt sim DIR --netlist ecp5` (rtl_sim/netlist_sim.py): the folded engine's mapped ECP5
netlist (Yosys synth_ecp5, the ECP5 cell models) against the golden model without an activity
trace, in text and --json mode; what it refuses, in one line, before any work."""

from __future__ import annotations

import json
import subprocess

import pytest

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig, default_config
from eatt.quant.golden import random_weights
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.tools import ToolMissing
from tests.cli import run_eatt

#: the masked E-ATT engine with its stages for a clock (the visible flags registered)
MASKED = dict(kind="eatt", len_q=2, len_k=2, dim=4, heads=1, key_padding=True, causal=True)


def eatt(*args: str) -> subprocess.CompletedProcess:
    return run_eatt(*args, timeout=900)


def _tools() -> None:
    from eatt.rtl_sim.ecp5_models import find_ecp5_models
    from eatt.rtl_sim.resources import find_yosys
    from eatt.rtl_sim.runner import check_simulator

    try:
        find_yosys(), find_ecp5_models(), check_simulator("verilator")
    except ToolMissing as err:
        pytest.skip(str(err))


@pytest.mark.rtl
def test_the_folded_engines_netlist_equals_the_golden_model(tmp_path):
    _tools()
    rtl = tmp_path / "rtl"
    cfg = CoreConfig.from_dict(MASKED)
    options = BuildOptions(folding={"lanes": 1, "simd": 2, "pe": 1}, adder_levels=1)
    generate_rtl(cfg, random_weights(cfg, seed=3), rtl, level="folded", options=options)
    r = eatt("sim", str(rtl), "--netlist", "ecp5", "--vectors", "24", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout)
    assert result["ok"] and result["mismatches"] == 0 and result["vectors"] == 24
    assert result["netlist"] == "ecp5" and result["level"] == "folded"
    assert result["sim"]["simulator"] == "verilator" and result["cycles"] > 0
    assert json.loads((rtl / "netlist_ecp5" / "result.json").read_text())["ok"]
    assert not list((rtl / "netlist_ecp5" / "gate").rglob("dump.saif"))  # no activity trace

    r = eatt("sim", str(rtl), "--netlist", "ecp5", "--vectors", "24")  # the builds are cached
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ECP5 netlist of eatt_folded (Yosys synth_ecp5, cached; Verilator): 24 vectors, " in (
        r.stdout
    )
    assert "0 mismatching against the golden model" in r.stdout and "result: PASS" in r.stdout


def test_what_it_refuses_in_one_line(tmp_path):
    window = tmp_path / "window"
    wcfg = default_config("window")
    generate_rtl(wcfg, random_weights(wcfg), window)
    mine = tmp_path / "core"
    cfg = CoreConfig.from_dict(MASKED)
    options = BuildOptions(folding={"lanes": 1, "simd": 2, "pe": 1})
    generate_rtl(cfg, random_weights(cfg), mine, level="folded", options=options)
    (mine / "netlist_ecp5").mkdir()
    (mine / "netlist_ecp5" / "notes.txt").write_text("mine\n")
    for folder, extra, message in (
        (window, (), "--netlist simulates the cores"),
        (mine, (), "not written by eatt sim --netlist ecp5"),
        (mine, ("--netlist", "xc7"), "invalid choice: 'xc7'"),
    ):
        r = eatt("sim", str(folder), *(extra or ("--netlist", "ecp5")), "--vectors", "4")
        assert r.returncode == 2, r.stderr
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert (mine / "netlist_ecp5" / "notes.txt").read_text() == "mine\n"
