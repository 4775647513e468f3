"""The DSP register pass (rtl_sim/ecp5_dspreg.py) and eatt's MULT18X18D model with registers.

Three products, each registered on its inputs and after (one with an enable on its inputs,
one whose input register also feeds other logic): synth_ecp5, the pass moves those registers
into the MULT18X18Ds (the third keeps its input flip-flops, its product register goes in),
Yosys writes the netlist again, and the RTL and the netlist (Yosys' cell models, eatt's
MULT18X18D with registers) run the same random inputs in Icarus: every output of every cycle
must agree.
"""

from __future__ import annotations

import random

import pytest

from eatt.rtl_sim.ecp5_dspreg import absorb_multiplier_registers
from eatt.rtl_sim.ecp5_models import check_multipliers
from tests.ecp5_sim import cycles_differing, rtl_and_netlist

RTL = """
module mems (
    input wire clk, input wire en,
    input wire [7:0] a8, input wire [7:0] b8,
    input wire signed [15:0] a16, input wire signed [11:0] b12,
    output reg [15:0] p1, output reg signed [27:0] p2, output reg [15:0] p3
);
    reg [7:0] xa, xb; reg [15:0] pp;  // inputs and product registered
    always @(posedge clk) begin xa <= a8; xb <= b8; pp <= xa * xb; p1 <= pp; end
    reg signed [15:0] ya; reg signed [11:0] yb; reg signed [27:0] qq;  // inputs enabled
    always @(posedge clk) begin
        if (en) begin ya <= a16; yb <= b12; end
        qq <= ya * yb;
        p2 <= qq;
    end
    reg [7:0] za, zb; reg [15:0] rr;  // za also feeds p3's logic: the inputs stay in fabric
    always @(posedge clk) begin
        za <= a8 + 8'd1; zb <= ~b8; rr <= za * zb; p3 <= rr ^ {8'b0, za};
    end
endmodule
"""


def _testbench(cycles: int, seed: int) -> str:
    rng = random.Random(seed)
    lines = []
    for _ in range(cycles):
        lines.append(
            f"        en = {int(rng.random() < 0.6)}; a8 = 8'h{rng.getrandbits(8):x}; "
            f"b8 = 8'h{rng.getrandbits(8):x}; a16 = 16'h{rng.getrandbits(16):x}; "
            f"b12 = 12'h{rng.getrandbits(12):x};"
        )
        lines.append('        @(posedge clk); #1 $display("%h %h %h", p1, p2, p3);')
    return (
        "`timescale 1ns/1ps\nmodule tb;\n    reg clk = 0;\n    always #5 clk = ~clk;\n"
        "    reg en; reg [7:0] a8, b8; reg [15:0] a16; reg [11:0] b12;\n"
        "    wire [15:0] p1, p3; wire [27:0] p2;\n"
        "    mems dut(.clk(clk), .en(en), .a8(a8), .b8(b8), .a16(a16), .b12(b12), .p1(p1),"
        " .p2(p2), .p3(p3));\n    initial begin\n" + "\n".join(lines) + "\n        $finish;\n"
        "    end\nendmodule\n"
    )


@pytest.mark.rtl
def test_multiplier_registers_move_into_the_dsp_blocks_and_the_netlist_equals_the_rtl(tmp_path):
    (tmp_path / "mems.v").write_text(RTL)
    (tmp_path / "tb.v").write_text(_testbench(300, seed=5))
    seen = {}

    def edit(netlist: dict) -> None:
        seen["moved"] = absorb_multiplier_registers(netlist)

    rtl, mapped, module = rtl_and_netlist(tmp_path, edit)
    mults = [c for c in module["cells"].values() if c["type"] == "MULT18X18D"]
    assert len(mults) == 3 and seen["moved"]["multipliers"] == 3, seen
    params = [{k: str(v) for k, v in m["parameters"].items()} for m in mults]
    assert all(p["REG_OUTPUT_CLK"] == "CLK0" for p in params)
    inputs = [p for p in params if p.get("REG_INPUTA_CLK") == "CLK0"]
    assert len(inputs) == 2 and all(p["REG_INPUTB_CLK"] == "CLK0" for p in inputs)
    # the enabled inputs on a CE pin of their own, the product's always loading
    assert any(p["REG_INPUTA_CE"] != p["REG_OUTPUT_CE"] for p in inputs)
    check_multipliers(module)
    assert len(rtl) == 300 and "x" not in "".join(rtl[6:])
    diff = cycles_differing(rtl, mapped)
    assert not diff, f"{len(diff)} cycles differ, first {diff[:3]}"


def test_the_model_check_refuses_what_it_does_not_simulate():
    cell = {"type": "MULT18X18D", "parameters": {"REG_PIPELINE_CLK": "CLK0"}, "connections": {}}
    with pytest.raises(RuntimeError, match="REG_PIPELINE_CLK"):
        check_multipliers({"cells": {"m": cell}})
    cell = {"type": "MULT18X18D", "parameters": {"REG_OUTPUT_CLK": "CLK1"}, "connections": {}}
    with pytest.raises(RuntimeError, match="REG_OUTPUT_CLK"):
        check_multipliers({"cells": {"m": cell}})
    cell = {"type": "MULT18X18D", "parameters": {"REG_OUTPUT_CLK": "CLK0"},
            "connections": {"RST0": [7]}}  # fmt: skip
    with pytest.raises(RuntimeError, match="RST0"):
        check_multipliers({"cells": {"m": cell}})
    ok = {"type": "MULT18X18D", "parameters": {"REG_INPUTA_CLK": "CLK0"}, "connections": {}}
    check_multipliers({"cells": {"m": ok}})
