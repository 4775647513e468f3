"""A small RTL against its synth_ecp5 netlist, as tests/test_ecp5_models.py and
tests/test_ecp5_outreg.py check eatt's DP16KD model: Yosys maps ``mems.v`` (top ``mems``), an
optional edit of the JSON netlist runs (the output register pass), Yosys writes the netlist's
Verilog, and Icarus runs ``tb.v`` against the RTL and against the netlist with Yosys' cell
models and eatt's; the lines each prints, and the netlist's top module.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from eatt.rtl_sim.ecp5_models import cell_models, find_ecp5_models, model_library
from eatt.rtl_sim.tools import ToolMissing, use_local_icarus


def write_inits(tmp: Path, widths: dict[int, int], seed: int) -> None:
    """tmp/init<w>.hex: random words for each memory (width w: depth)."""
    rng = random.Random(seed)
    for w, d in widths.items():
        (tmp / f"init{w}.hex").write_text("".join(f"{rng.getrandbits(w):x}\n" for _ in range(d)))


def bench_text(signals: str, ports: list[str], widths: dict[int, int], lines: list[str]) -> str:
    """tb.v: `signals` declared, mems with each port p<w> of `ports` connected, the cycles'
    `lines` in one initial block."""
    conns = ", ".join(f".{p}{w}({p}{w})" for w in widths for p in ports)
    return (
        "`timescale 1ns/1ps\nmodule tb;\n    reg clk = 0;\n    always #5 clk = ~clk;\n"
        f"{signals}\n    mems dut(.clk(clk), {conns});\n    initial begin\n"
        + "\n".join(lines)
        + "\n        $finish;\n    end\nendmodule\n"
    )


def run_icarus(tmp: Path, sources: list[str]) -> list[str]:
    """Icarus on `sources` in `tmp`: the lines the testbench displays."""
    subprocess.run(
        ["iverilog", "-g2012", "-o", "sim.vvp", *sources], cwd=tmp, check=True, timeout=300
    )
    out = subprocess.run(
        ["vvp", "-n", "sim.vvp"], cwd=tmp, capture_output=True, text=True, check=True, timeout=600
    )
    (tmp / "sim.vvp").unlink()
    return [ln for ln in out.stdout.splitlines() if ln and not ln.startswith(("VCD", "WARNING"))]


def rtl_and_netlist(
    tmp: Path, edit: Callable[[dict], object] | None = None
) -> tuple[list[str], list[str], dict]:
    """(the RTL's lines, the netlist's lines, the netlist's top module) for tmp/mems.v and
    tmp/tb.v (module doc); a skip where Yosys' ECP5 models or Icarus are missing."""
    from eatt.rtl_sim.resources import find_yosys, run_yosys

    try:
        yosys = find_yosys()
        models = model_library(find_ecp5_models(yosys))
    except ToolMissing as err:
        pytest.skip(str(err))
    if not use_local_icarus():
        pytest.skip("iverilog not found")
    script = (
        "read_verilog mems.v; synth_ecp5 -top mems; delete t:$scopeinfo; opt_clean -purge; "
        "write_json netlist.json"
    )
    code, _, _ = run_yosys(yosys, script, tmp, tmp / "yosys.log", "synth_ecp5", 600)
    assert code == 0, (tmp / "yosys.log").read_text()[-2000:]
    netlist = json.loads((tmp / "netlist.json").read_text())
    if edit is not None:
        edit(netlist)
        (tmp / "netlist.json").write_text(json.dumps(netlist))
    code, _, _ = run_yosys(
        yosys, "read_json netlist.json; write_verilog -noattr netlist.v", tmp,
        tmp / "yosys_v.log", "write_verilog", 600,
    )  # fmt: skip
    assert code == 0, (tmp / "yosys_v.log").read_text()[-2000:]
    module = netlist["modules"]["mems"]
    (tmp / "cells.v").write_text(cell_models(models, module))
    rtl = run_icarus(tmp, ["mems.v", "tb.v"])
    mapped = run_icarus(tmp, ["netlist.v", "cells.v", "tb.v"])
    return rtl, mapped, module


def cycles_differing(rtl: list[str], mapped: list[str]) -> list[tuple[int, str, str]]:
    """The cycles whose words differ; an x of the RTL (a word not read yet) matches the
    cell's 0."""

    def same(a: str, b: str) -> bool:
        return len(a) == len(b) and all(p in ("x", q) for p, q in zip(a, b, strict=True))

    return [(i, a, b) for i, (a, b) in enumerate(zip(rtl, mapped, strict=True)) if not same(a, b)]
