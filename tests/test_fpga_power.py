"""FPGA energy the way FPGA users get it (rtl_sim/fpga_power.py, `eatt power --target fpga`):
the coefficients file, the SAIF writer and the ECP5 models without tools, then the smallest
core of tests/test_power.py end to end: Yosys synth_ecp5, the mapped netlist in Icarus with
Yosys' ECP5 models (bit-exact with the golden model), the primitive table, the SAIF, the
Vivado script, the proxy; the CLI in text and --json mode and its exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig
from eatt.quant.golden import random_weights
from eatt.rtl_sim.fpga_energy import CLASSES, load_coefficients, proxy_energy
from eatt.rtl_sim.fpga_saif import saif_name, vcd_durations, write_saif
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.tools import ToolMissing
from tests.cli import run_eatt

# tests/test_power.py's smallest core that still has every stage
SMALL = dict(len_q=2, len_k=2, dim=2, heads=1, in_bits=4, in_frac=2, weight_bits=4, qk_bits=6)

VCD = """$timescale 1ps $end
$scope module top $end
$var wire 1 ! ap_clk $end
$var wire 2 " x [1:0] $end
$var wire 1 # \\u_a.q[3] $end
$upscope $end
$enddefinitions $end
#0
$dumpvars
0!
bx0 "
x#
$end
#5000
1!
b01 "
0#
#10000
0!
b10 "
1#
#15000
1!
"""


# -- without tools ---------------------------------------------------------------------------------
def parse_saif(text: str) -> list:
    """A SAIF file as nested lists of tokens (a backslash escapes the next character); the
    parentheses must balance and nothing may follow the top list."""
    stack: list[list] = [[]]
    token, escape = "", False
    for ch in text:
        if escape:
            token, escape = token + "\\" + ch, False
        elif ch == "\\":
            escape = True
        elif ch in "() \t\n":
            if token:
                stack[-1].append(token)
                token = ""
            if ch == "(":
                stack.append([])
            elif ch == ")":
                assert len(stack) > 1, "unbalanced ')'"
                done = stack.pop()
                stack[-1].append(done)
        else:
            token += ch
    assert len(stack) == 1 and not token, "unbalanced '('"
    assert len(stack[0]) == 1, "more than one top-level list"
    return stack[0][0]


def saif_nets(tree: list) -> tuple[int, dict[str, dict[str, int]]]:
    """(DURATION, {net: {T0, T1, TX, TC, IG}}) of a parsed SAIF with one INSTANCE."""
    assert tree[0] == "SAIFILE"
    fields = {e[0]: e[1:] for e in tree[1:] if isinstance(e, list)}
    duration = int(fields["DURATION"][0])
    instance = fields["INSTANCE"]
    net = next(e for e in instance if isinstance(e, list) and e[0] == "NET")
    nets = {entry[0]: {k: int(v) for k, v in entry[1:]} for entry in net[1:]}
    return duration, nets


def test_vcd_durations_and_saif_of_a_small_vcd(tmp_path):
    bits, end, timescale = vcd_durations(VCD)
    assert end == 15000 and timescale == "1 ps"
    spent = {(n, i): t for n, i, t in bits}
    assert spent[("ap_clk", None)] == [10000, 5000, 0]  # 0 for 0-5 and 10-15 ns
    assert spent[("x", 1)] == [5000, 5000, 5000]  # x, 0, 1
    assert spent[("x", 0)] == [10000, 5000, 0]
    # the escaping backslash dropped; a trailing [3] reads as a bit index (as parse_vcd reads it)
    assert spent[("u_a.q", 3)] == [5000, 5000, 5000]
    path = tmp_path / "a.saif"
    n = write_saif(path, VCD, "top", scale=2.0, toggles={"ap_clk": 3, "x[0]": 2})
    duration, nets = saif_nets(parse_saif(path.read_text()))
    assert n == 4 and duration == 30000 and len(nets) == 4
    assert all(v["T0"] + v["T1"] + v["TX"] == duration for v in nets.values())
    assert nets["ap_clk"] == {"T0": 20000, "T1": 10000, "TX": 0, "TC": 3, "IG": 0}
    assert nets["x[0]"]["TC"] == 2 and nets["x[1]"]["TC"] == 0
    assert "u_a\\.q[3]" in nets  # a flattened RTL name, escaped
    assert saif_name("g[0].s", 4) == "g\\[0\\]\\.s[4]"


def test_default_coefficients_cite_their_source():
    c = load_coefficients()
    assert c["file"].endswith("eatt/configs/fpga_energy.yaml") and "VTR" in c["summary"]
    assert set(c["pj"]) == set(CLASSES)
    for name in CLASSES:
        assert c["pj"][name] is not None and c["pj"][name] > 0, name
        assert c["source"][name].strip(), name
    assert c["basis"]["DSP"] == "input" and c["basis"]["BRAM"] == "enabled_clock"
    assert c["pj"]["DSP"] == pytest.approx(1.09 / 2)  # VTR's 18x18 figure, per transition
    assert c["pj"]["BRAM"] == pytest.approx(17.9 / 2)


@pytest.mark.parametrize(
    "text, match",
    [
        ("classes: [1, 2]", "needs a mapping 'classes'"),
        ("classes: {LUTS: {pj: 1, source: x}}", "unknown class 'LUTS'"),
        ("classes: {LUT: {pj: -1, source: x}}", "classes.LUT.pj must be a number >= 0"),
        ("classes: {LUT: {pj: .nan, source: x}}", "classes.LUT.pj must be a number >= 0"),
        ("classes: {LUT: {pj: 1, basis: area, source: x}}", "classes.LUT.basis must be one of"),
        ("classes: {LUT: {pj: 1}}", "classes.LUT.source: say where 1 comes from"),
        ("classes: {LUT: 3}", "classes.LUT must be a mapping"),
        ("classes: {", "not valid YAML/JSON"),
    ],
)
def test_a_bad_coefficients_file_is_one_line(tmp_path, text, match):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(f"--fpga-coefficients {path}")) as err:
        load_coefficients(path)
    assert match in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match="No such file"):
        load_coefficients(tmp_path / "none.yaml")


def test_a_block_ram_port_counts_its_clock_only_while_enabled():
    """basis enabled_clock: a DP16KD port's clock transitions x the share of the run its CE was
    high (a constant CE: all or none); a flip-flop's clock all counts."""
    from eatt.rtl_sim.fpga_energy import primitive_table

    ram = {
        "type": "DP16KD",
        "port_directions": {"CLKA": "input", "CLKB": "input", "CEA": "input", "CEB": "input"},
        "connections": {"CLKA": [1], "CLKB": [1], "CEA": [5], "CEB": ["0"]},
    }
    ff = {"type": "TRELLIS_FF", "port_directions": {"CLK": "input"}, "connections": {"CLK": [1]}}
    module = {"cells": {"ram": ram, "ff": ff}}
    rows = primitive_table(module, {1: 100, 5: 7}, calls=2, high={5: 0.25})
    assert rows["BRAM"]["clock_toggles_per_call"] == 50  # the clock net once per cell
    assert rows["BRAM"]["enabled_clock_toggles_per_call"] == 12.5  # 100 x (0.25 + 0), / 2
    assert rows["FF"]["enabled_clock_toggles_per_call"] == rows["FF"]["clock_toggles_per_call"]
    ram["connections"]["CEB"] = ["1"]  # both ports on one clock: the block's share is at most 1
    assert primitive_table(module, {1: 100}, 2)["BRAM"]["enabled_clock_toggles_per_call"] == 50


def test_a_class_without_coefficient_is_left_out_of_the_total(tmp_path):
    path = tmp_path / "c.json"  # JSON is YAML
    path.write_text(json.dumps({"classes": {"LUT": {"pj": 0.5, "source": "mine"}}}))
    c = load_coefficients(path)
    rows = {
        name: {"toggles_per_call": 4.0, "input_toggles_per_call": 0.0, "clock_toggles_per_call": 0}
        for name in CLASSES
    }
    proxy, without = proxy_energy(rows, c)
    assert proxy["total"] == proxy["LUT"] == 2.0 and proxy["FF"] is None
    assert without == [n for n in CLASSES if n != "LUT"]
    path.write_text(json.dumps({"classes": {"LUT": {"pj": None}}}))
    assert proxy_energy(rows, load_coefficients(path))[0] is None


def test_models_mult18x18d_and_dp16kd_ours():
    from eatt.rtl_sim.fpga_power import (
        check_multipliers,
        find_ecp5_models,
        model_library,
        without_model,
    )

    try:
        files = find_ecp5_models()
    except ToolMissing as err:
        pytest.skip(str(err))
    models = model_library(files)
    assert "LUT4" in models and "TRELLIS_FF" in models and "CCU2C" in models
    assert "eatt_p" in models["MULT18X18D"]  # Yosys has it only as a blackbox
    assert "eatt_mem" in models["DP16KD"]  # a blackbox in Yosys' cells_sim
    cells = {"a": {"type": "DP16KD"}, "b": {"type": "LUT4"}, "c": {"type": "EHXPLLL"}}
    assert without_model({"cells": cells}, models) == ["EHXPLLL"]
    # the registers rtl_sim/ecp5_dspreg.py sets are modelled (CLK0), the others are not
    mult = {"type": "MULT18X18D", "parameters": {"REG_OUTPUT_CLK": "CLK2"}, "connections": {}}
    with pytest.raises(RuntimeError, match="REG_OUTPUT_CLK"):
        check_multipliers({"cells": {"m": mult}})
    mult = {"type": "MULT18X18D", "parameters": {}, "connections": {"C0": [7], "A0": [8]}}
    with pytest.raises(RuntimeError, match="C0"):
        check_multipliers({"cells": {"m": mult}})


# -- end to end ------------------------------------------------------------------------------------
def _tools() -> None:
    from eatt.rtl_sim.fpga_power import find_ecp5_models
    from eatt.rtl_sim.resources import find_yosys
    from eatt.rtl_sim.runner import check_simulator

    try:
        find_yosys(), find_ecp5_models(), check_simulator("icarus")
    except ToolMissing as err:
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def rtl(tmp_path_factory):
    cfg = CoreConfig.from_dict(dict(kind="eatt", **SMALL))
    out = tmp_path_factory.mktemp("fpga") / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    return out


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_eatt("power", *args, timeout=900, env=None if env is None else {**os.environ, **env})


@pytest.mark.rtl
def test_fpga_power_end_to_end(rtl):
    """The mapped netlist equals the golden model; LUT and FF rows; the SAIF parses and every
    net's times add up; the Vivado script; the same vectors again give the same toggles."""
    _tools()
    from eatt.rtl_sim.fpga_power import fpga_power
    from eatt.rtl_sim.power import parse_vcd

    r = fpga_power(rtl, vectors=20, seed=1, timeout=600)
    assert r["target"] == "fpga" and r["mismatches"] == 0 and r["vectors"] == 20
    p = r["primitives"]
    assert list(p) == list(CLASSES)
    for name in ("LUT", "FF"):
        assert p[name]["cells"] > 0 and p[name]["toggles_per_call"] > 0, name
    assert p["FF"]["clock_toggles_per_call"] > 0 and p["FF"]["types"] == {
        "TRELLIS_FF": p["FF"]["cells"]
    }
    assert sum(row["cells"] for row in p.values()) == sum(r["yosys"]["cells"].values())
    assert r["nets_with_activity"] == r["nets"]  # every net of the netlist was traced
    proxy = r["proxy_energy_per_call_pj"]
    assert proxy["total"] > 0
    assert proxy["total"] == pytest.approx(sum(proxy[c] for c in CLASSES), abs=1e-5)
    assert r["coefficients"]["without"] == [] and "VTR" in r["coefficients"]["summary"]
    folder = rtl / "power_fpga"
    assert json.loads((folder / "result.json").read_text()) == r
    # the SAIF: balanced, one entry per dumped bit, T0 + T1 + TX == DURATION, TC = the toggles
    vcd = folder / "gate" / "sim" / "icarus" / "dump.vcd"
    toggles, duration_ns = parse_vcd(vcd.read_text())
    duration, nets = saif_nets(parse_saif((folder / "activity.saif").read_text()))
    assert duration == round(duration_ns * 1000) and len(nets) == len(toggles)
    assert all(v["T0"] + v["T1"] + v["TX"] == duration for v in nets.values())
    assert nets["ap_clk"]["TC"] == toggles["ap_clk"] >= 2 * (r["cycles"] - 1)
    assert r["saif"] == str(folder / "activity.saif")
    # the Vivado script
    tcl = (folder / "vivado_power.tcl").read_text()
    assert f"set top {r['top']}" in tcl and "synth_design -top $top -part $part" in tcl
    assert "set part xc7z020clg400-1" in tcl and "create_clock" in tcl
    assert "read_saif -strip_path $top" in tcl and "report_power -file" in tcl
    for source in json.loads((rtl / "metadata.json").read_text())["sources"]:
        assert source in tcl
    # deterministic: the same vectors again
    again = fpga_power(rtl, vectors=20, seed=1, timeout=600)
    assert again["primitives"] == p and again["proxy_energy_per_call_pj"] == proxy
    assert (folder / "activity.saif").is_file() and not (rtl / "power_fpga.failed").exists()


@pytest.mark.rtl
def test_cli_text_json_and_exit_codes(rtl, tmp_path):
    _tools()
    text = cli(str(rtl), "--target", "fpga", "--vectors", "12")
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "0 mismatches" in out and "proxy" in out and "VTR" in out and "vivado_power.tcl" in out
    assert re.search(r"^LUT\s+\d+", out, re.M) and re.search(r"^FF\s+\d+", out, re.M)
    js = cli(str(rtl), "--target", "fpga", "--vectors", "12", "--json", "--clock", "5")
    assert js.returncode == 0, js.stderr
    r = json.loads(js.stdout)
    assert r["target"] == "fpga" and r["clock_ns"] == 5.0 and r["mismatches"] == 0
    assert "set clock_ns 5" in (rtl / "power_fpga" / "vivado_power.tcl").read_text()
    # bad input: one line naming the flag or the file, exit 2, nothing run
    bad = tmp_path / "bad.yaml"
    bad.write_text("classes: {LUT: {pj: lots}}\n")
    cases = [
        (["--fpga-coefficients", str(bad)], f"--fpga-coefficients {bad}", 2),
        (["--fpga-coefficients", str(tmp_path / "none.yaml")], "none.yaml", 2),
        (["--liberty", "osu018"], "--liberty: only for --target asic", 2),
        ([], "EATT_YOSYS=nosuch", 3),  # a missing tool
    ]
    for extra, match, code in cases:
        for mode in ([], ["--json"]):
            env = {"EATT_YOSYS": "nosuch"} if code == 3 else None
            res = cli(str(rtl), "--target", "fpga", "--vectors", "4", *extra, *mode, env=env)
            assert res.returncode == code, (extra, res.stderr)
            assert res.stdout == "" and len(res.stderr.strip().splitlines()) == 1, res.stderr
            assert match in res.stderr and "Traceback" not in res.stderr
    assert not [p for p in rtl.iterdir() if p.name.startswith(".power_fpga")]


@pytest.mark.rtl
def test_a_mismatch_is_exit_1_and_keeps_the_last_result(rtl, monkeypatch, capsys):
    """A netlist that differs from the golden model is an error naming the first differing
    vector (exit 1), never an energy; the last good DIR/power_fpga stays."""
    _tools()
    import eatt.rtl_sim.fpga_power as fp
    from eatt.cli import main

    if not (rtl / "power_fpga" / "result.json").is_file():
        fp.fpga_power(rtl, vectors=4, seed=1)
    before = (rtl / "power_fpga" / "result.json").read_text()
    real = fp.activity

    def wrong(*args, **kw):
        act = real(*args, **kw)
        first = {"vector": 2, "index": [0, 1], "expected": 5, "got": 4}
        return {**act, "mismatches": 1, "first_mismatch": first}

    monkeypatch.setattr(fp, "activity", wrong)
    assert main(["power", str(rtl), "--target", "fpga", "--vectors", "4"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and "differs from the golden model" in err[-1]
    assert "vector 2" in err[-1]
    assert (rtl / "power_fpga" / "result.json").read_text() == before
    assert (rtl / "power_fpga.failed").is_dir()


@pytest.mark.rtl
@pytest.mark.parametrize(
    "kind, level, rows",
    [("vanilla", "alignment", ("DSP",)), ("eatt", "folded", ("DSP", "other"))],
)
def test_multipliers_and_the_folded_engine(tmp_path, kind, level, rows):
    """The dot product's MULT18X18D (eatt's model of Yosys' blackbox) and the folded engine's
    AXI4-Stream run (LUT RAM, wide-LUT multiplexers): bit-exact, on their rows of the table."""
    _tools()
    from eatt.rtl_sim.fpga_power import fpga_power

    cfg = CoreConfig.from_dict(dict(kind=kind, **SMALL))
    options = BuildOptions(folding={"lanes": 1, "simd": 2, "pe": 1} if level == "folded" else None)
    generate_rtl(cfg, random_weights(cfg, seed=3), tmp_path / "rtl", level=level, options=options)
    r = fpga_power(tmp_path / "rtl", vectors=4, seed=1, timeout=600)
    assert r["mismatches"] == 0 and r["level"] == level
    for name in rows:
        row = r["primitives"][name]
        assert row["cells"] > 0 and row["toggles_per_call"] > 0, name
        assert r["proxy_energy_per_call_pj"][name] > 0, name
    assert r["primitives"]["DSP"]["types"].keys() == {"MULT18X18D"}


def test_a_power_fpga_folder_it_did_not_write_is_left_alone(tmp_path):
    from eatt.rtl_sim.fpga_power import fpga_power

    cfg = CoreConfig.from_dict(dict(kind="eatt", **SMALL))
    generate_rtl(cfg, random_weights(cfg), tmp_path / "rtl")
    mine = tmp_path / "rtl" / "power_fpga"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    with pytest.raises(ValueError, match="not written by eatt power --target fpga"):
        fpga_power(tmp_path / "rtl", vectors=4)
    assert (mine / "notes.txt").read_text() == "mine\n"


@pytest.mark.rtl
def test_block_ram_beyond_the_model_is_mapped_again_as_lut_ram(rtl, monkeypatch):
    """A netlist whose DP16KD eatt's model does not cover (ecp5_models.check_block_rams) is
    synthesized again with synth_ecp5 -nobram, and the result and the text say why."""
    _tools()
    import eatt.rtl_sim.fpga_power as fp
    from eatt.cli.power import _fpga_text

    calls = []

    def first_beyond(module):
        calls.append(module)
        return ["ram0: REGMODE_A OUTREG"] if len(calls) == 1 else []

    monkeypatch.setattr(fp, "check_block_rams", first_beyond)
    r = fp.fpga_power(rtl, vectors=4, seed=1)
    assert r["yosys"]["nobram"] and r["mismatches"] == 0 and len(calls) == 1
    assert r["yosys"]["nobram_why"] == ["ram0: REGMODE_A OUTREG"]
    assert "block RAM mapped as LUT RAM: ram0: REGMODE_A OUTREG" in _fpga_text(r, "DIR")


@pytest.mark.rtl
def test_verilator_gives_icarus_toggles(rtl):
    """--simulator verilator: the same netlist, bit-exact, Verilator's SAIF as the activity
    (for Vivado at the --clock: its times rescaled) and the same transitions as Icarus' VCD."""
    _tools()
    from eatt.rtl_sim.fpga_power import fpga_power
    from eatt.rtl_sim.runner import check_simulator

    try:
        check_simulator("verilator")
    except ToolMissing as err:
        pytest.skip(str(err))
    ica = fpga_power(rtl, vectors=8, seed=2, timeout=600, simulator="icarus")
    ver = fpga_power(rtl, vectors=8, seed=2, timeout=600, simulator="verilator", clock_ns=5)
    assert ver["mismatches"] == 0 and ver["sim"]["simulator"] == "verilator"
    assert ver["saif_clock_ns"] == 5.0 and ica["sim"]["simulator"] == "icarus"
    saif = (rtl / "power_fpga" / "activity.saif").read_text()
    raw = (rtl / "power_fpga" / "gate" / "sim" / "verilator" / "dump.saif").read_text()
    dur = [int(re.search(r"\(DURATION (\d+)\)", t)[1]) for t in (saif, raw)]
    assert "(SAIFILE" in saif[:200] and dur[0] * 2 == dur[1]  # at the 5 ns clock
    assert ver["cycles"] == ica["cycles"] and ver["nets_with_activity"] == ica["nets_with_activity"]
    # the same transitions but at power-up (Verilator starts at 0, Icarus at x, whose x -> 0 is
    # no transition): at most one a net over all 8 calls
    for name, row in ica["primitives"].items():
        got, want = ver["primitives"][name]["toggles_per_call"], row["toggles_per_call"]
        assert abs(got - want) * 8 <= ica["nets"], (name, got, want)
