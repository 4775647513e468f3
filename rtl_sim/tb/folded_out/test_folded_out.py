"""Testbench of folded_out (rtl_sim/rtl/folded_out.sv): the folded engine's output unit, the Z
memory of two banks written in pieces and read back as the beats of m_axis.

Two halves in one file, as verilog-axis' testbenches:

- the pytest functions at the bottom build the leaf for one parameter set
  (eatt.rtl_sim.runner.run_leaf, cached) and run the cocotb test in it;
  ``pytest rtl_sim/tb/folded_out`` runs them alone;
- the cocotb test ``out_stream`` runs inside the simulator, with the engine's hand-over around
  the unit as folded_attention.sv has it: a writer puts vector n's pieces into bank n mod 2 in
  a random order with random gaps while that bank is free, then marks it full; m_axis takes
  beats under random back-pressure; each bank is freed and out_b toggled after its last beat
  (out_end). Every beat must be the vector's next word, tlast on the last, and the first beat
  of a lone vector must come 1 + out_extra cycles after its bank is full
  (eatt.rtl_sim.folding.out_extra).
"""

from __future__ import annotations

import json
import os
import shutil

import cocotb
import numpy as np
import pytest
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer

from eatt.rtl_sim.folding import out_extra
from eatt.rtl_sim.runner import run_leaf

#: parameter sets: a word in one piece or in two, read when offered or ahead into the FIFO
#: (ADDER_LEVELS), flip-flops or a macro (MACRO_ROWS at most the depth)
CASES = {
    "direct-m1": dict(SIMD=2, MUL_COLS=2, OUT_W=8, LEN_Q=3, DIM=4),
    "direct-m2-macro": dict(SIMD=4, MUL_COLS=2, OUT_W=6, LEN_Q=2, DIM=8, MACRO_ROWS=4),
    "ahead-m2": dict(SIMD=4, MUL_COLS=2, OUT_W=6, LEN_Q=3, DIM=8, ADDER_LEVELS=1),
    "ahead-m1-macro": dict(
        SIMD=2, MUL_COLS=2, OUT_W=8, LEN_Q=4, DIM=6, MACRO_ROWS=8, ADDER_LEVELS=1
    ),  # fmt: skip
}
VECTORS = 6


@cocotb.test()
async def out_stream(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    p = CASES[case["name"]]
    rng = np.random.default_rng(case["seed"])
    simd, cols, w = p["SIMD"], p["MUL_COLS"], p["OUT_W"]
    dc, m = p["DIM"] // simd, simd // cols
    beats = p["LEN_Q"] * dc
    lag = 1 + out_extra(p.get("ADDER_LEVELS", 0))
    words = rng.integers(0, 2**w, size=(VECTORS, beats, simd))  # element e of a beat
    pieces = [(t, c, s) for t in range(p["LEN_Q"]) for c in range(dc) for s in range(m)]

    def packed(vec: int, beat: int, lo: int, n: int) -> int:
        return sum(int(v) << (i * w) for i, v in enumerate(words[vec, beat, lo : lo + n]))

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    for sig in (dut.wr_en, dut.post_b, dut.out_b, dut.full, dut.m_axis_tready):
        sig.value = 0
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    full, out_b = [False, False], 0
    writing, order, gap = 0, list(rng.permutation(len(pieces))), 0  # vector being written
    reading, beat, full_at = 0, 0, None
    for k in range(40 * VECTORS * (beats * m + 8)):
        # the writer: vector `writing` into bank writing % 2 while that bank is free
        bank = writing % 2
        dut.wr_en.value = 0
        if writing < VECTORS and not full[bank]:
            if gap:
                gap -= 1
            elif order:
                t, c, s = pieces[order.pop()]
                dut.post_b.value, dut.wr_en.value = bank, 1
                dut.wr_tok.value, dut.wr_cc.value, dut.wr_sub.value = t, c, s
                dut.wr_code.value = packed(writing, t * dc + c, s * cols, cols)
                gap = int(rng.integers(0, 3))
            else:  # the last piece went in last cycle: the bank is full from now on
                full[bank] = True
                writing += 1
                order = list(rng.permutation(len(pieces)))
        dut.out_b.value, dut.full.value = out_b, int(full[out_b])
        if full[out_b] and full_at is None:
            full_at = k
        # the first vector alone, m_axis always ready; later ones with back-pressure
        ready = reading == 0 or bool(rng.random() < 0.6)
        dut.m_axis_tready.value = int(ready)
        await Timer(1, unit="ns")  # the inputs in, m_axis as the next edge takes it
        if int(dut.m_axis_tvalid.value):
            if reading == 0 and beat == 0:
                assert k - full_at == lag, f"first beat {k - full_at} cycles after full, not {lag}"
            if ready:
                want = packed(reading, beat, 0, simd)
                assert int(dut.m_axis_tdata.value) == want, f"vector {reading} beat {beat}"
                assert int(dut.m_axis_tlast.value) == (beat == beats - 1)
                assert int(dut.out_end.value) == (beat == beats - 1)
                beat += 1
        await FallingEdge(dut.clk)
        if beat == beats:  # out_end was taken at this edge: the bank is free, out_b toggles
            full[out_b], out_b = False, 1 - out_b
            reading, beat, full_at = reading + 1, 0, None
            if reading == VECTORS:
                return
    raise AssertionError(f"{reading} of {VECTORS} vectors out")


pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None
LEAVES = ("folded_ram", "folded_macro")


@pytest.mark.parametrize("name", sorted(CASES))
def test_folded_out(name):
    case = json.dumps({"name": name, "seed": 1})
    result = run_leaf(__file__, "folded_out", CASES[name], leaves=LEAVES, EATT_LEAF_CASE=case)
    assert result["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
def test_folded_out_icarus():
    case = json.dumps({"name": "ahead-m2", "seed": 2})
    result = run_leaf(__file__, "folded_out", CASES["ahead-m2"], "icarus", leaves=LEAVES,
                      EATT_LEAF_CASE=case)  # fmt: skip
    assert result["tests"] == 1
