"""The block RAM output register pass (rtl_sim/ecp5_outreg.py) and eatt's OUTREG model.

Three memories (9, 18 and 36 bits wide, the widths Yosys maps) and a 35-bit ROM (a pseudo dual
port block RAM whose write clock is tied off) read synchronously, each word registered again
after its block RAM (one with an enable, one without, one with the enable of
its read): synth_ecp5, the pass moves those registers into the DP16KDs, Yosys writes the
netlist again, and the RTL and the netlist (Yosys' cell models, eatt's DP16KD with OUTREG) run
the same random writes and reads in Icarus: every output word of every cycle must agree. The
rules that keep a register out are checked on small JSON netlists.
"""

from __future__ import annotations

import random

import pytest

from eatt.rtl_sim.ecp5_models import check_block_rams
from eatt.rtl_sim.ecp5_outreg import absorb_output_registers
from tests.ecp5_sim import bench_text, cycles_differing, rtl_and_netlist, write_inits

WIDTHS = {9: 2048, 18: 1024, 36: 512, 35: 512}
#: the register after each memory: enabled by its own signal, always loading, by the read's
ENABLES = {9: "oe9", 18: "1'b1", 36: "re36", 35: "oe35"}
#: never written: a ROM, its block RAM's write clock tied off (the weight ROMs' case)
ROMS = {35}


def _rtl() -> str:
    ports, bodies = [], []
    for w, d in WIDTHS.items():
        a = d.bit_length() - 2
        ports.append(
            f"    input wire we{w}, input wire re{w}, input wire oe{w},\n"
            f"    input wire [{a}:0] wa{w}, input wire [{a}:0] ra{w},\n"
            f"    input wire [{w - 1}:0] wd{w}, output reg [{w - 1}:0] q{w}"
        )
        bodies.append(
            f"    (* no_rw_check *) reg [{w - 1}:0] m{w} [0:{d - 1}];\n"
            f"    reg [{w - 1}:0] rd{w};\n"
            f'    initial $readmemh("init{w}.hex", m{w});\n'
            f"    always @(posedge clk) begin\n"
            + ("" if w in ROMS else f"        if (we{w}) m{w}[wa{w}] <= wd{w};\n")
            + f"        if (re{w}) rd{w} <= m{w}[ra{w}];\n"
            f"        if ({ENABLES[w]}) q{w} <= rd{w};\n"
            f"    end\n"
        )
    return (
        "module mems (\n    input wire clk,\n"
        + ",\n".join(ports)
        + "\n);\n"
        + "".join(bodies)
        + "endmodule\n"
    )


def _testbench(cycles: int, seed: int) -> str:
    rng = random.Random(seed)
    lines = []
    for _ in range(cycles):
        for w, d in WIDTHS.items():
            hot = rng.randrange(8)  # a few addresses, so reads meet earlier writes
            wa = hot if rng.random() < 0.5 else rng.randrange(d)
            ra = hot if rng.random() < 0.5 else rng.randrange(d)
            we, re = int(rng.random() < 0.4), int(rng.random() < 0.8)
            if we and re and wa == ra:  # never a word read as it is written (no_rw_check)
                re = 0
            lines.append(
                f"        we{w} = {we}; re{w} = {re}; oe{w} = {int(rng.random() < 0.7)}; "
                f"wa{w} = {wa}; ra{w} = {ra}; wd{w} = {w}'h{rng.getrandbits(w):x};"
            )
        lines.append('        @(posedge clk); #1 $display("%h %h %h %h", q9, q18, q36, q35);')
    sigs = "\n".join(
        f"    reg we{w}, re{w}, oe{w}; reg [{d.bit_length() - 2}:0] wa{w}, ra{w};"
        f" reg [{w - 1}:0] wd{w}; wire [{w - 1}:0] q{w};"
        for w, d in WIDTHS.items()
    )
    return bench_text(sigs, list(("we", "re", "oe", "wa", "ra", "wd", "q")), WIDTHS, lines)


@pytest.mark.rtl
def test_output_registers_move_into_the_block_rams_and_the_netlist_equals_the_rtl(tmp_path):
    write_inits(tmp_path, WIDTHS, seed=3)
    (tmp_path / "mems.v").write_text(_rtl())
    (tmp_path / "tb.v").write_text(_testbench(400, seed=7))
    seen = {}

    def edit(netlist: dict) -> None:
        cells = netlist["modules"]["mems"]["cells"].values()
        seen["flops"] = sum(c["type"] == "TRELLIS_FF" for c in cells)
        seen["moved"] = absorb_output_registers(netlist)

    rtl, mapped, module = rtl_and_netlist(tmp_path, edit)
    rams = [c for c in module["cells"].values() if c["type"] == "DP16KD"]
    assert sorted(int(c["parameters"]["DATA_WIDTH_A"], 2) for c in rams) == [9, 18, 36, 36]
    rom = [c for c in rams if c["connections"]["CLKA"] != c["connections"]["CLKB"]]
    assert len(rom) == 1 and rom[0]["connections"]["CLKA"] == ["0"], rom
    # every word register went into its block RAM (one read side each), none is left
    assert seen["moved"] == {"sides": len(rams), "flip_flops": seen["flops"]}, seen
    assert not any(c["type"] == "TRELLIS_FF" for c in module["cells"].values())
    assert all(c["parameters"]["REGMODE_B"] == "OUTREG" for c in rams)
    assert check_block_rams(module) == []
    assert len(rtl) == 400 and "x" not in "".join(rtl[8:])
    diff = cycles_differing(rtl, mapped)
    assert not diff, f"{len(diff)} cycles differ, first {diff[:3]}"


def _netlist(ff: dict | None = None, extra_load: bool = False, second: dict | None = None):
    """A DP16KD whose DOB0 (and DOB1 with `second`) drive flip-flops (module doc)."""
    ram = {
        "type": "DP16KD",
        "parameters": {"DATA_WIDTH_A": f"{18:032b}", "DATA_WIDTH_B": f"{18:032b}"},
        "port_directions": {"DOB0": "output", "DOB1": "output", "CLKB": "input"},
        "connections": {"DOB0": [10], "DOB1": [11], "CLKB": [2]},
    }

    def flop(d: int, q: int, **params):
        return {
            "type": "TRELLIS_FF",
            "parameters": {"CEMUX": "CE", "CLKMUX": "CLK", "REGSET": "RESET", **params},
            "port_directions": {"DI": "input", "CLK": "input", "CE": "input", "LSR": "input",
                                "Q": "output"},
            "connections": {"DI": [d], "CLK": [2], "CE": [5], "LSR": ["0"], "Q": [q]},
        }  # fmt: skip

    cells = {"ram": ram, "f0": flop(10, 20, **(ff or {})), "f1": flop(11, 21, **(second or {}))}
    if extra_load:
        cells["lut"] = {
            "type": "LUT4", "port_directions": {"A": "input", "Z": "output"},
            "connections": {"A": [10], "Z": [30]},
        }  # fmt: skip
    return {"modules": {"top": {"ports": {}, "cells": cells}}}


def test_the_rules_keep_registers_out():
    n = _netlist()
    assert absorb_output_registers(n) == {"sides": 1, "flip_flops": 2}
    ram = n["modules"]["top"]["cells"]["ram"]
    assert ram["connections"]["DOB0"] == [20] and ram["connections"]["OCEB"] == [5]
    assert ram["parameters"]["REGMODE_B"] == "OUTREG"
    assert "REGMODE_A" not in ram["parameters"] and set(n["modules"]["top"]["cells"]) == {"ram"}
    # a word bit with a second load, a flip-flop that sets, one on the other clock edge, two
    # enables: the side stays NOREG and every flip-flop stays
    for case in (
        _netlist(extra_load=True),
        _netlist(ff={"REGSET": "SET"}),
        _netlist(ff={"CLKMUX": "INV"}),
        _netlist(second={"CEMUX": "1"}),
    ):
        assert absorb_output_registers(case) == {"sides": 0, "flip_flops": 0}
        assert {"f0", "f1"} <= set(case["modules"]["top"]["cells"])
