"""The energy split by stage (rtl_sim.stages, liberty.netlist_energy(stages=...)): register names
to stages for each level, and a hand-built netlist whose cells' stages and energies are worked
out by hand."""

from __future__ import annotations

import pytest

from eatt.rtl_sim.liberty import Cell, Library, Pin, netlist_energy
from eatt.rtl_sim.stages import cell_stages, register_names, register_stage, stage_names


@pytest.mark.parametrize(
    "level, register, stage",
    [
        ("alignment", "q[3][1]", "projections"),
        ("alignment", "k[0][0]", "projections"),
        ("alignment", "s[12]", "scores"),
        ("alignment", "s_vld", "control"),
        # adder_levels >= 1: the inner registers of the trees (rtl_sim/pipeline.py _Pipe)
        ("alignment", "qa_0_3l_r0[2]", "projections"),
        ("alignment", "score_h0_q1_k0l_r0[4]", "scores"),
        ("attention", "za_1_2r_r0[3]", "projections"),
        ("attention", "v0_r0[1][2]", "values"),
        ("attention", "e_sum_0_0_r1[5]", "softmax"),
        ("attention", "numer_0_1_2_r0[7]", "values"),
        ("attention", "v0[1][2]", "projections"),
        ("attention", "z[40]", "projections"),
        ("attention", "s1[0][1][1]", "scores"),
        ("attention", "e_sum[1][0]", "softmax"),
        ("attention", "o4[2][3]", "values"),
        ("attention", "stage_en[3]", "control"),
        ("folded", "u_engine.g_select.u_select.acc[2][1]", "projections"),
        ("folded", "u_engine.u_multiply.g_rom[0].g_used.word[3]", "projections"),
        ("folded", "u_engine.g_lane[1].k_bank[3][2]", "projections"),
        ("folded", "u_engine.q_mem[1][0]", "projections"),
        ("folded", "u_engine.g_lane[0].s_bank[1][3]", "scores"),
        ("folded", "u_engine.g_lane[1].s_acc[3]", "scores"),
        ("folded", "u_engine.u_attend.g_lane[0].part_r[7]", "scores"),
        ("folded", "u_engine.u_attend.g_qk.u_scores.g_lane[1].u_score.part_q[3]", "scores"),
        (
            "folded",
            "u_engine.u_attend.g_qk.u_scores.g_lane[0].k_bank.g_flops.mem[1]",
            "projections",
        ),
        ("folded", "u_engine.u_attend.g_randinit.u_scores.ws_rom.g_macro.u_macro", "scores"),
        ("folded", "u_engine.g_select.u_select.wstate[1]", "projections"),  # a walk's state
        ("folded", "u_engine.smax[4]", "softmax"),
        ("folded", "u_engine.g_lane[2].e_bank[0][1]", "softmax"),
        ("folded", "u_engine.numer[1][7]", "values"),
        ("folded", "u_engine.a_mem[5][0]", "values"),
        ("folded", "u_engine.x_mem[1][0]", "memories"),
        # memories as instances (folded_ram / folded_rom): their flip-flops, or the macro cell
        ("folded", "u_engine.x_mem.g_flops.mem[1][0]", "memories"),
        ("folded", "u_engine.g_lane[0].k_bank.g_macro.u_macro", "projections"),
        ("folded", "u_engine.u_multiply.g_rom[1].g_used.rom.g_macro.u_macro", "projections"),
        ("folded", "u_engine.g_lane[1].s_bank.g_flops.mem[0][3]", "scores"),
        ("folded", "u_engine.exp_rom.g_macro.u_macro", "softmax"),
        ("folded", "u_engine.recip_rom.g_macro.u_macro", "values"),
        ("folded", "u_engine.a_mem.g_macro.u_macro", "values"),
        ("folded", "u_engine.state[2]", "control"),
        ("folded", "m_axis_tvalid", "control"),
        ("window", "anything", "control"),  # a level with no table: all control
    ],
)
def test_register_stage(level, register, stage):
    assert register_stage(level, register) == stage


def test_stage_names_in_report_order():
    assert stage_names("alignment") == ["projections", "scores", "control"]
    assert stage_names("folded") == [
        "projections", "scores", "softmax", "values", "memories", "control",
    ]  # fmt: skip


def _pin(name, direction, cap=0.0, clock=False):
    return Pin(name, direction, cap, None, clock, ())


LIB = Library(
    name="hand",
    voltage=1.0,
    cells={
        "INV": Cell("INV", 1.0, 1.0, {"A": _pin("A", "input", 0.01), "Y": _pin("Y", "output")},
                    False),
        "NAND2": Cell("NAND2", 2.0, 2.0, {"A": _pin("A", "input", 0.02),
                                         "B": _pin("B", "input", 0.02),
                                         "Y": _pin("Y", "output")}, False),
        "DFF": Cell("DFF", 4.0, 4.0, {"CLK": _pin("CLK", "input", 0.03, clock=True),
                                     "D": _pin("D", "input", 0.01),
                                     "Q": _pin("Q", "output")}, True),
    },
)  # fmt: skip


def _cell(kind, **pins):
    return {"type": kind, "connections": {p: [b] for p, b in pins.items()}}


# clk (2) and a (3) in, y (9) out. inv1 feeds the register q and the NAND that computes s;
# inv2 drives the output; inv3 is a counter's next value; inv4 drives nothing.
MODULE = {
    "ports": {
        "clk": {"direction": "input", "bits": [2]},
        "a": {"direction": "input", "bits": [3]},
        "y": {"direction": "output", "bits": [9]},
    },
    "cells": {
        "_c0_": _cell("INV", A=3, Y=4),
        "_c1_": _cell("DFF", CLK=2, D=4, Q=5),
        "_c2_": _cell("NAND2", A=4, B=5, Y=6),
        "_c3_": _cell("DFF", CLK=2, D=6, Q=7),
        "_c4_": _cell("INV", A=7, Y=9),
        "_c5_": _cell("DFF", CLK=2, D=10, Q=8),
        "_c6_": _cell("INV", A=8, Y=10),
        "_c7_": _cell("INV", A=3, Y=11),
    },
    "netnames": {},
}
NAMED = {
    **MODULE,
    "netnames": {
        "q": {"bits": [5, 12], "hide_name": 0},  # bit 0 of a 2-bit register
        "$abc$5": {"bits": [5], "hide_name": 1},  # a hidden alias: not a register's name
        "s": {"bits": [7], "hide_name": 0},
        "s_alias_longer": {"bits": [7], "hide_name": 0},  # the shortest name wins
        "stage_en": {"bits": [8], "hide_name": 0},
    },
}


def test_register_names_and_cell_stages():
    registers = register_names(NAMED, LIB)
    assert registers == {"_c1_": "q[0]", "_c3_": "s", "_c5_": "stage_en"}
    stages = cell_stages(MODULE, LIB, "alignment", registers)
    assert stages == {
        "_c0_": {"projections": 0.5, "scores": 0.5},  # feeds q and, through the NAND, s
        "_c1_": {"projections": 1.0},
        "_c2_": {"scores": 1.0},  # stops at the flip-flop q: not projections
        "_c3_": {"scores": 1.0},
        "_c4_": {"scores": 1.0},  # the output port: alignment's OUTPUT_STAGE
        "_c5_": {"control": 1.0},
        "_c6_": {"control": 1.0},
        "_c7_": {"control": 1.0},  # reaches nothing
    }


def test_energy_by_stage_by_hand():
    registers = register_names(NAMED, LIB)
    stages = cell_stages(MODULE, LIB, "alignment", registers)
    toggles = {2: 20, 3: 4, 4: 4, 5: 2, 6: 2, 7: 2, 8: 10, 9: 2, 10: 10, 11: 4}
    r = netlist_energy(MODULE, toggles, LIB, cycles=10, period_ns=1.0, stages=stages)
    by = r["by_stage"]
    # every cell counted once; every pJ once
    assert sum(v["count"] for v in by.values()) == pytest.approx(r["cells"])
    assert sum(v["area"] for v in by.values()) == pytest.approx(r["area"])
    for key in ("switching_pj", "leakage_pj"):
        assert sum(v[key] for v in by.values()) == pytest.approx(r[key])
    # no internal tables here: all dynamic energy is switching, 0.5 C V^2 t (V = 1)
    # clock net 2, driven by the port: 3 clock pins of .03 x 20 toggles, .3 pJ each stage's FF
    # net 3 (port a): inv1 A .01 x 4 -> .02, half projections, half scores; inv4 A .02 control
    # net 4 (inv1): DFF D .01 + NAND A .02 = .03 x 4 = .06, half and half
    # net 5 (q): NAND B .02 x 2 = .02 projections; net 6 (NAND): DFF D .01 x 2 = .01 scores
    # net 7 (s): inv2 A .01 x 2 = .01 scores; net 9 (output, no load): 0
    # net 8 (stage_en): inv3 A .01 x 10 = .05; net 10 (inv3): DFF D .01 x 10 = .05: control
    assert by["projections"]["switching_pj"] == pytest.approx(0.3 + 0.01 + 0.03 + 0.02)
    assert by["scores"]["switching_pj"] == pytest.approx(0.3 + 0.01 + 0.03 + 0.01 + 0.01)
    assert by["control"]["switching_pj"] == pytest.approx(0.3 + 0.02 + 0.05 + 0.05)
    assert by["projections"]["count"] == pytest.approx(1.5)
    assert by["control"]["area"] == pytest.approx(4.0 + 1.0 + 1.0)
    assert "by_stage" not in netlist_energy(MODULE, toggles, LIB, cycles=10, period_ns=1.0)


def test_an_input_port_net_is_shared_out_whole():
    """An input port that also drives an output port directly: its whole switching energy
    (the output's load too) goes to the cells it drives, so the stages still add up."""
    registers = register_names(NAMED, LIB)
    stages = cell_stages(MODULE, LIB, "alignment", registers)
    module = {**MODULE, "ports": {**MODULE["ports"], "a_out": {"direction": "output", "bits": [3]}}}
    toggles = {2: 20, 3: 4, 4: 4, 5: 2, 6: 2, 7: 2, 8: 10, 9: 2, 10: 10, 11: 4}
    r = netlist_energy(
        module, toggles, LIB, cycles=10, period_ns=1.0, output_load_pf=0.5, stages=stages
    )
    total = sum(v["switching_pj"] for v in r["by_stage"].values())
    assert total == pytest.approx(r["switching_pj"])
