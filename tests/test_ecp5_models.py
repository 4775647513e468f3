"""eatt's DP16KD model (rtl_sim/ecp5_models.py) against the RTL Yosys mapped onto it.

Three memories with initial contents, each with a write port and a synchronous read port, 9, 18
and 36 bits wide (2048, 1024 and 512 words), become DP16KD cells in all three of the widths
the model covers. The RTL and its synth_ecp5 netlist (Yosys' cell models, eatt's DP16KD) run
the same random writes and reads in Icarus; every read word of every cycle must agree.
"""

from __future__ import annotations

import random

import pytest

from eatt.rtl_sim.ecp5_models import check_block_rams, dp16kd_model, find_ecp5_models
from eatt.rtl_sim.tools import ToolMissing
from tests.ecp5_sim import bench_text, cycles_differing, rtl_and_netlist, write_inits

WIDTHS = {9: 2048, 18: 1024, 36: 512}

RTL = """
module mems (
    input wire clk,
{ports}
);
{bodies}
endmodule
"""

BODY = """    reg [{w1}:0] m{w} [0:{d1}];
    initial $readmemh("init{w}.hex", m{w});
    always @(posedge clk) begin
        if (we{w}) m{w}[wa{w}] <= wd{w};
        if (re{w}) rd{w} <= m{w}[ra{w}];
    end
"""

PORTS = """    input wire we{w}, input wire re{w},
    input wire [{a1}:0] wa{w}, input wire [{a1}:0] ra{w},
    input wire [{w1}:0] wd{w}, output reg [{w1}:0] rd{w},"""


def _rtl() -> str:
    ports = "\n".join(
        PORTS.format(w=w, w1=w - 1, a1=d.bit_length() - 2) for w, d in WIDTHS.items()
    ).rstrip(",")
    bodies = "".join(BODY.format(w=w, w1=w - 1, d1=d - 1) for w, d in WIDTHS.items())
    return RTL.format(ports=ports, bodies=bodies)


def _testbench(cycles: int, seed: int) -> str:
    rng = random.Random(seed)
    lines = []
    for _ in range(cycles):
        for w, d in WIDTHS.items():
            hot = rng.randrange(8)  # a few addresses, so reads meet earlier writes
            lines.append(
                f"        we{w} = {int(rng.random() < 0.4)}; re{w} = {int(rng.random() < 0.8)}; "
                f"wa{w} = {hot if rng.random() < 0.5 else rng.randrange(d)}; "
                f"ra{w} = {hot if rng.random() < 0.5 else rng.randrange(d)}; "
                f"wd{w} = {w}'h{rng.getrandbits(w):x};"
            )
        lines.append('        @(posedge clk); #1 $display("%h %h %h", rd9, rd18, rd36);')
    sigs = "\n".join(
        f"    reg we{w}, re{w}; reg [{d.bit_length() - 2}:0] wa{w}, ra{w}; reg [{w - 1}:0] wd{w};"
        f" wire [{w - 1}:0] rd{w};"
        for w, d in WIDTHS.items()
    )
    return bench_text(sigs, list(("we", "re", "wa", "ra", "wd", "rd")), WIDTHS, lines)


@pytest.mark.rtl
def test_the_block_ram_model_equals_the_rtl_in_widths_9_18_36(tmp_path):
    write_inits(tmp_path, WIDTHS, seed=5)
    (tmp_path / "mems.v").write_text(_rtl())
    (tmp_path / "tb.v").write_text(_testbench(400, seed=11))
    rtl, netlist, module = rtl_and_netlist(tmp_path)
    rams = [c for c in module["cells"].values() if c["type"] == "DP16KD"]
    widths = {int(c["parameters"]["DATA_WIDTH_A"], 2) for c in rams}
    assert widths == {9, 18, 36}, widths  # every width the model covers is in use
    assert check_block_rams(module) == []
    assert len(rtl) == 400 and "x" not in "".join(rtl[8:])
    diff = cycles_differing(rtl, netlist)
    assert not diff, f"{len(diff)} cycles differ, first {diff[:3]}"


def test_block_rams_beyond_the_model_are_named():
    def cell(**params):
        p = {"DATA_WIDTH_A": f"{18:032b}", "DATA_WIDTH_B": f"{18:032b}", **params}
        return {"type": "DP16KD", "parameters": p, "connections": {"RSTA": ["0"], "CSB0": [5]}}

    module = {
        "cells": {
            "ok": {**cell(), "connections": {}},
            "reg": {**cell(REGMODE_B="OUTREG"), "connections": {}},  # modelled
            "odd": {**cell(REGMODE_A="LATCH"), "connections": {}},
            "w4": {**cell(DATA_WIDTH_A=f"{4:032b}"), "connections": {}},
            "cs": cell(),
        }
    }
    assert check_block_rams(module) == [
        "odd: REGMODE_A LATCH",
        "w4: DATA_WIDTH 4/18",
        "cs: CSB0 not tied to 0",
    ]


def test_the_model_keeps_yosys_declaration():
    try:
        sim, _ = find_ecp5_models()
    except ToolMissing as err:
        pytest.skip(str(err))
    text = dp16kd_model(sim.read_text())
    assert "(* blackbox *)" not in text and "parameter INITVAL_3F" in text
    assert "INITVAL_3F[eatt_i * 20 +: 18]" in text and text.rstrip().endswith("endmodule")
