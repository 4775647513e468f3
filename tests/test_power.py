"""Energy from switching activity (rtl_sim.power, `eatt power`): the VCD reader, the net
mapping, the one-line errors and exit codes, and a tiny core of each kind through Yosys (OSU
0.18 um cells), the gate-level Icarus simulation with VCD (bit-exact with the golden model) and
OpenSTA. The calculator itself is tested in tests/test_liberty.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig
from eatt.quant.golden import random_weights
from eatt.rtl_sim.folded import folded_schedule
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.power import (
    check_tools,
    find_liberty,
    find_sta,
    parse_slack,
    parse_vcd,
    parse_worst_path,
    power,
    toggles_by_bit,
)
from eatt.rtl_sim.tools import ToolMissing

# the smallest core that still has every stage: seconds in Yosys, a short gate-level build
SMALL = dict(len_q=2, len_k=2, dim=2, heads=1, in_bits=4, in_frac=2, weight_bits=4, qk_bits=6)

VCD = """$date today $end
$timescale 1ps $end
$scope module top $end
$var wire 1 ! ap_clk $end
$var wire 2 " x [1:0] $end
$var wire 1 # _12_ $end
$var wire 1 # _12_alias $end
$var wire 3 $ w [4:2] $end
$upscope $end
$enddefinitions $end
#0
$dumpvars
0!
bx0 "
x#
b0 $
$end
#5000
1!
b01 "
0#
b101 $
#10000
0!
b10 "
1#
b111 $
#15000
1!
b10 "
0#
bx11 $
"""


def test_parse_vcd_counts_0_1_transitions_per_bit():
    nets, duration = parse_vcd(VCD)
    assert duration == pytest.approx(15.0)  # ns
    assert nets["ap_clk"] == 3
    # x: x0 -> 01 (bit 1: x->0 not counted; bit 0: 0->1) -> 10 (both flip) -> 10
    assert nets["x[0]"] == 2 and nets["x[1]"] == 1
    assert nets["_12_"] == 2 and nets["_12_alias"] == 2  # x->0 is not a toggle; aliases share
    # w [4:2]: 000 -> 101 -> 111 -> x11: w[4] 1, w[3] 1, w[2] 1 (w[4] 1->x not counted)
    assert (nets["w[4]"], nets["w[3]"], nets["w[2]"]) == (1, 1, 1)


def test_parse_slack_takes_the_worst_path_group():
    """report_checks' slack lines (one per path group): the least; none -> None."""
    text = (
        "Startpoint: _c1_ (rising edge-triggered flip-flop clocked by clk)\n"
        "  10.000   data required time\n"
        "           -4.371   slack (VIOLATED)\n\n"
        "Startpoint: a (input port clocked by clk)\n"
        "            2.148   slack (MET)\n"
    )
    assert parse_slack(text) == -4.371
    assert parse_slack("            0.5   slack (MET)\n") == 0.5
    assert parse_slack("No paths found.\n") is None


def test_parse_worst_path_names_its_ends():
    """report_checks' first path (the worst, -path_delay max): its startpoint and endpoint."""
    text = (
        "Startpoint: u_engine.numer[3]_reg (rising edge-triggered flip-flop clocked by clk)\n"
        "Endpoint: u_engine.a_mem.wdata_r (rising edge-triggered flip-flop clocked by clk)\n"
        "           -4.371   slack (VIOLATED)\n"
    )
    assert parse_worst_path(text) == {
        "startpoint": "u_engine.numer[3]_reg",
        "endpoint": "u_engine.a_mem.wdata_r",
    }
    assert parse_worst_path("No paths found.\n") == {}


def test_toggles_by_bit_maps_bus_bits_and_single_nets():
    module = {
        "netnames": {
            "ap_clk": {"bits": [2]},
            "x": {"bits": [3, 4]},
            "_12_": {"bits": [5]},
            "w": {"bits": [7, 8, 9], "offset": 2},
            "const": {"bits": ["0"]},
            "silent": {"bits": [6]},
        }
    }
    toggles = toggles_by_bit(module, parse_vcd(VCD)[0])
    assert toggles == {2: 3, 3: 2, 4: 1, 5: 2, 7: 1, 8: 1, 9: 1}  # 6 ("silent") has no entry


def test_missing_library_and_sta_are_tool_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("EATT_DEBIAN_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    if not os.path.exists("/usr/share/qflow/tech/osu018/osu018_stdcells.lib"):
        with pytest.raises(ToolMissing, match="qflow-tech-osu018"):
            find_liberty("osu018")
    with pytest.raises(ToolMissing, match="opensta"):
        find_sta()
    with pytest.raises(ValueError, match="--liberty nosuch.lib: no such file"):
        find_liberty("nosuch.lib")


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """eatt power in a session of its own: a timeout ends the whole group (its Yosys and
    Icarus children too, which a kill of the command alone would leave running)."""
    cmd = [sys.executable, "-m", "eatt.cli", "power", *args]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=None if env is None else {**os.environ, **env},
    )
    try:
        out, err = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.parametrize(
    "args, match, code",
    [
        ([], "DIR", 2),
        (["{tmp}"], "metadata.json", 2),
        (["{rtl}", "--clock", "0"], "--clock", 2),
        (["{rtl}", "--vectors", "0"], "--vectors", 2),
        (["{rtl}", "--target", "gpu"], "--target", 2),
        (["{rtl}", "--target", "fpga", "--liberty", "osu018"], "--liberty", 2),
        (["{rtl}", "--fpga-coefficients", "{tmp}/c.yaml"], "--fpga-coefficients", 2),
        (["{rtl}", "--liberty", "{tmp}/none.lib"], "--liberty", 2),
        (["{rtl}", "--inputs", "{tmp}/none.npz"], "none.npz", 2),
        (["{rtl}", "--liberty", "osu035"], "qflow-tech-osu035", 3),
    ],
)
def test_cli_bad_input_is_one_line(tmp_path, args, match, code):
    cfg = CoreConfig.from_dict(dict(kind="eatt", **SMALL))
    generate_rtl(cfg, random_weights(cfg), tmp_path / "rtl")
    args = [a.format(tmp=tmp_path, rtl=tmp_path / "rtl") for a in args]
    if code == 3 and os.path.exists("/usr/share/qflow/tech/osu035"):
        pytest.skip("the system has the osu035 cells")
    for extra in ([], ["--json"]):
        r = cli(*args, *extra, env={"EATT_DEBIAN_ROOT": str(tmp_path / "nothing")})
        assert r.returncode == code, r.stderr
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert match in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "rtl" / "power").exists()
    assert not [p for p in (tmp_path / "rtl").iterdir() if p.name.startswith(".power")]


def test_a_power_folder_it_did_not_write_is_left_alone(tmp_path):
    cfg = CoreConfig.from_dict(dict(kind="eatt", **SMALL))
    generate_rtl(cfg, random_weights(cfg), tmp_path / "rtl")
    mine = tmp_path / "rtl" / "power"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    for extra in ([], ["--json"]):
        r = cli(str(tmp_path / "rtl"), *extra)
        assert r.returncode == 2 and "not written by eatt power" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""
    assert (mine / "notes.txt").read_text() == "mine\n"


def test_a_folded_engine_too_big_for_cells_is_one_line(tmp_path):
    """A folded engine whose weight ROMs are too shallow for memory macros (simd 32: 16 words)
    and would become more standard cells than eatt power takes (dim 128: 65,536 weights; the
    paper's d 512 ran Yosys for hours before): refused at once, one line, exit 2, nothing
    written into the RTL folder. (With deeper ROMs the weights are macros:
    tests/test_memory_macros.py.)"""
    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=2, len_k=2, dim=128, heads=4))
    rtl = tmp_path / "rtl"
    options = BuildOptions(folding={"simd": 32})
    generate_rtl(cfg, random_weights(cfg), rtl, level="folded", options=options)
    before = sorted(p.name for p in rtl.iterdir())
    for extra in ([], ["--json"]):
        r = cli(str(rtl), *extra)
        assert r.returncode == 2 and r.stdout == "", r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        assert "65,536 weights would become standard cells" in r.stderr
    assert sorted(p.name for p in rtl.iterdir()) == before


def _tools() -> None:
    try:
        check_tools()
    except ToolMissing as err:
        pytest.skip(str(err))


@pytest.mark.rtl
@pytest.mark.slow
def test_small_cores_energy_eatt_below_dot(tmp_path):
    """Both kinds on the same vectors: the netlist equals the golden model, the toggles are
    reproducible, E-ATT's alignment costs less energy per call than the dot product's."""
    _tools()
    results = {}
    for kind in ("eatt", "vanilla"):
        cfg = CoreConfig.from_dict(dict(kind=kind, **SMALL))
        out = tmp_path / kind
        generate_rtl(cfg, random_weights(cfg, seed=3), out)
        r = power(out, vectors=40, seed=1, timeout=900)
        assert r["mismatches"] == 0 and r["vectors"] == 40 and r["kind"] == kind
        assert r["nets_with_activity"] == r["nets"]  # every net of the netlist was traced
        e = r["energy_per_call_pj"]
        assert e["total"] > 0 and e["switching"] > 0 and e["internal"] > 0 and e["leakage"] > 0
        assert e["total"] == pytest.approx(e["switching"] + e["internal"] + e["leakage"])
        assert r["area_um2"] > 0 and r["cells"] > 0 and r["sta"]["fmax_mhz"] > 0
        assert r["sta"]["vectorless_energy_per_call_pj"] > 0
        path = r["sta"]["worst_path"]  # its ends: a register's RTL name, or a port
        assert set(path) == {"startpoint", "endpoint"}
        assert not any(v.startswith("_c") for v in path.values()), path
        t = r["throughput"]  # the unrolled core: a call a cycle, len_q query tokens a call
        assert t["ii_cycles"] == 1 and t["tokens_per_call"] == SMALL["len_q"]
        assert t["calls_per_s"] == pytest.approx(r["sta"]["fmax_mhz"] * 1e6)
        assert t["power_mw"] == pytest.approx(e["total"] * t["calls_per_s"] * 1e-9, rel=1e-5)
        files = {p.name for p in (out / "power").iterdir()}
        assert {"netlist.v", "netlist.json", "yosys.log", "sta.log", "result.json"} <= files
        assert (out / "power" / "gate" / "sim" / "icarus" / "dump.vcd").is_file()
        assert json.loads((out / "power" / "result.json").read_text()) == r
        # by stage (rtl_sim/stages.py): every pJ of the dynamic energy in exactly one place
        stages = r["by_stage"]
        assert list(stages) == ["projections", "scores", "control"]  # the alignment core
        assert sum(v["dynamic_pj"] for v in stages.values()) == pytest.approx(e["dynamic"])
        assert sum(v["cells"] for v in stages.values()) == pytest.approx(r["cells"], abs=0.01)
        assert (out / "power" / "registers.json").is_file()
        assert not (out / "power" / "named.json").exists()  # the large named netlist is gone
        results[kind] = r
    assert (
        results["eatt"]["energy_per_call_pj"]["total"]
        < results["vanilla"]["energy_per_call_pj"]["total"]
    )
    # the alignment's part (Q, K and the scores): selection and L1 against products
    for stage in ("projections", "scores"):
        e_att, dot = (results[k]["by_stage"][stage]["dynamic_pj"] for k in ("eatt", "vanilla"))
        assert e_att < dot, stage
    # the same vectors again: identical toggles, identical energy
    again = power(tmp_path / "eatt", vectors=40, seed=1, timeout=900)
    assert again["energy_per_call_pj"] == results["eatt"]["energy_per_call_pj"]
    assert again["sim"]["cached_build"]


@pytest.mark.rtl
@pytest.mark.slow
def test_the_folded_engine_pipelined_for_a_clock(tmp_path):
    """adder_levels 1 (registered reads, cut trees, N x R registered): Yosys reads the leaves
    (a cast after a unary minus once stopped its parser), and the netlist equals the golden
    model with the stream's cycles where folded_schedule puts them."""
    _tools()
    cfg = CoreConfig.from_dict(dict(kind="eatt", **dict(SMALL, dim=4, heads=1)))
    folding = {"lanes": 1, "simd": 4, "pe": 2}
    out = tmp_path / "rtl"
    options = BuildOptions(folding=folding, adder_levels=1)
    generate_rtl(cfg, random_weights(cfg, seed=3), out, level="folded", options=options)
    r = power(out, vectors=4, seed=1, timeout=900)
    assert r["mismatches"] == 0 and r["vectors"] == 4 and r["sta"]["fmax_mhz"] > 0
    assert r["cycles"] > folded_schedule(cfg, **folding, vectors=4, adder_levels=1)["out"][-1]


@pytest.mark.rtl
@pytest.mark.slow
def test_the_folded_engine_at_equal_cycles(tmp_path):
    """The folded engine's netlist (AXI4-Stream, weights baked into cells from the .mem files,
    the softmax tables memory macros) equals the golden model; E-ATT with a V/O tile half as
    wide takes the cycles of vanilla's one tile; the energy splits into flip-flops, logic and
    the input ports' nets."""
    _tools()
    results = {}
    for kind, pe in (("eatt", 1), ("vanilla", 2)):
        cfg = CoreConfig.from_dict(dict(kind=kind, **SMALL))
        out = tmp_path / kind
        folding = {"lanes": 1, "simd": 2, "pe": pe}
        options = BuildOptions(folding=folding)
        generate_rtl(cfg, random_weights(cfg, seed=3), out, level="folded", options=options)
        r = power(out, vectors=6, seed=1, timeout=900)
        assert r["mismatches"] == 0 and r["vectors"] == 6 and r["level"] == "folded"
        split, e = r["energy_split_per_call_pj"], r["energy_per_call_pj"]
        assert min(split[k] for k in ("flip_flops", "logic", "input_ports")) > 0
        assert sum(split.values()) == pytest.approx(e["dynamic"], rel=1e-6)
        stages = r["by_stage"]
        assert set(stages) == {
            "projections", "scores", "softmax", "values", "memories", "control",
        }  # fmt: skip
        # the exp and reciprocal tables (256 words) are memory macros, in their stages' energy
        macros = r["memories"]["pj_per_call"]["dynamic"]
        names = {m["name"].split(".g_macro")[0].rsplit(".", 1)[-1] for m in r["memories"]["macros"]}
        assert names == {"exp_rom", "recip_rom"}
        assert e["total"] == pytest.approx(e["netlist"] + e["memories"])
        assert sum(v["dynamic_pj"] for v in stages.values()) == pytest.approx(
            e["dynamic"] + macros, rel=1e-6
        )
        results[kind] = r
    # the 6 vectors' stream (the phases overlapped): each kind's last output where
    # folded_schedule puts it
    last = {}
    for k, pe in (("eatt", 1), ("vanilla", 2)):
        cfg = CoreConfig.from_dict(dict(kind=k, **SMALL))
        last[k] = folded_schedule(cfg, 1, 2, pe, vectors=6)["out"][-1]
    got = results["eatt"]["cycles"] - results["vanilla"]["cycles"]
    assert got == last["eatt"] - last["vanilla"]


@pytest.mark.rtl
@pytest.mark.slow
def test_cli_text_and_json(tmp_path):
    _tools()
    cfg = CoreConfig.from_dict(dict(kind="eatt", **SMALL))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    text = cli(str(out), "--vectors", "20")
    assert text.returncode == 0, text.stderr
    assert "energy/call" in text.stdout and "0 mismatches" in text.stdout
    assert "by stage   projections" in text.stdout
    assert (
        "closes at" in text.stdout
        and "calls/s" in text.stdout
        and "Icarus Verilog simulation" in text.stderr
    )  # progress
    js = cli(str(out), "--vectors", "20", "--json", "--clock", "20")
    assert js.returncode == 0, js.stderr
    r = json.loads(js.stdout)
    assert r["clock_ns"] == 20.0 and r["mismatches"] == 0 and r["energy_per_call_pj"]["total"] > 0


def test_flow_stage_is_skipped_without_its_tools(tmp_path, monkeypatch):
    """`eatt flow`'s measured-energy stage needs Debian's tools; without them it says so."""
    from eatt.steps import STEPS, BuildContext, BuildOptions

    cfg = CoreConfig.from_dict(dict(kind="eatt", **SMALL))
    weights = random_weights(cfg)
    generate_rtl(cfg, weights, tmp_path / "rtl")
    monkeypatch.setenv("EATT_DEBIAN_ROOT", str(tmp_path / "nothing"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    options = BuildOptions(power_optional=True)  # a flow's: a missing tool skips the step
    ctx = BuildContext(cfg, weights, tmp_path, seed=0, vectors=10, options=options)
    r = STEPS["power"].run(ctx, "alignment")
    if os.path.exists("/usr/share/qflow/tech/osu018/osu018_stdcells.lib"):
        assert "skipped" in r and "opensta" in r["skipped"]
    else:
        assert "skipped" in r and "qflow-tech-osu018" in r["skipped"]
    assert not (tmp_path / "rtl" / "power").exists()


@pytest.mark.rtl
def test_a_failed_run_keeps_the_last_result(tmp_path, monkeypatch):
    """A tool that fails (here: past a 0.01 s timeout) leaves the last good DIR/power as it
    was; its own logs go to DIR/power.failed, which the message names (issue 39 item 4)."""
    _tools()
    monkeypatch.setenv("EATT_YOSYS_CACHE", "0")  # Yosys itself runs past the timeout
    from eatt.outdir import mark

    cfg = CoreConfig.from_dict(dict(kind="eatt", **SMALL))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg), out)
    good = out / "power"
    good.mkdir()
    mark(good, "eatt power")
    (good / "result.json").write_text('{"last": "good"}\n')
    with pytest.raises(RuntimeError, match=r"power\.failed/"):
        power(out, vectors=4, seed=1, timeout=0.01)
    assert (good / "result.json").read_text() == '{"last": "good"}\n'
    failed = out / "power.failed"
    assert failed.is_dir() and (failed / "yosys.log").is_file()
    assert failed.stat().st_mode & 0o777 == 0o777 & ~_umask()
    assert not [p for p in out.iterdir() if p.name.startswith(".power")]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
