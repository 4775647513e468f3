"""Testbench of folded_v_banks (rtl_sim/rtl/folded_v_banks.sv): V as the folded engine's
attention unit reads it, LANES lanes of M pieces, two banks.

Two halves in one file, as verilog-axis' testbenches:

- the pytest functions at the bottom build the leaf for one parameter set
  (eatt.rtl_sim.runner.run_leaf, cached) and run the cocotb test in it;
  ``pytest rtl_sim/tb/folded_v_banks`` runs them alone;
- the cocotb test ``v_banks`` runs inside the simulator, with the engine's hand-over around the
  unit: vector n's pieces go into bank n mod 2 in a random order with random gaps (as the
  multiply walk writes them), while the other bank, holding vector n - 1, is read at random
  addresses; once a vector's last piece is in, its bank is read back in full. Every read must
  be the chunk the Python model holds, on every lane, the cycle after re; with ADDER_LEVELS a
  piece lands a cycle after its write (the bank is read from the second cycle after the last
  piece on).
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

from eatt.rtl_sim.runner import run_leaf

#: parameter sets: one piece a chunk or several, flip-flops or a macro (MACRO_ROWS at most the
#: depth), the write direct or registered (ADDER_LEVELS)
CASES = {
    "m1-flops": dict(LANES=2, SIMD=2, MUL_COLS=2, V_W=6, KB=2, DC=3),
    "m2-macro": dict(LANES=2, SIMD=4, MUL_COLS=2, V_W=5, KB=3, DC=2, MACRO_ROWS=8),
    "m2-reg": dict(LANES=4, SIMD=4, MUL_COLS=2, V_W=5, KB=2, DC=2, ADDER_LEVELS=1),
    "m4-reg-macro": dict(
        LANES=1, SIMD=4, MUL_COLS=1, V_W=7, KB=4, DC=4, MACRO_ROWS=16, ADDER_LEVELS=1
    ),  # fmt: skip
}
VECTORS = 5


@cocotb.test()
async def v_banks(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    p = CASES[case["name"]]
    rng = np.random.default_rng(case["seed"])
    lanes, simd, cols, w = p["LANES"], p["SIMD"], p["MUL_COLS"], p["V_W"]
    kb, dc, m = p["KB"], p["DC"], simd // cols
    # vector n: lane l, key block b, chunk c, column t
    vs = rng.integers(0, 2**w, size=(VECTORS, lanes, kb, dc, simd))
    pieces = [(l, b, c, s) for l in range(lanes) for b in range(kb) for c in range(dc)
              for s in range(m)]  # fmt: skip

    def chunk(vec: int, b: int, c: int) -> int:  # v: every lane's chunk, lane 0 lowest
        flat = vs[vec, :, b, c, :].reshape(-1)
        return sum(int(x) << (i * w) for i, x in enumerate(flat))

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for sig in (dut.we, dut.re, dut.pre_b, dut.att_b):
        sig.value = 0
    await FallingEdge(dut.clk)
    for vec in range(VECTORS):
        order = [pieces[i] for i in rng.permutation(len(pieces))]
        dut.pre_b.value = vec % 2
        while order:
            # the writer: the next piece, or a gap
            if order and rng.random() < 0.7:
                ln, b, c, s = order.pop()
                dut.we.value = 1
                dut.lane.value, dut.blk.value, dut.cc.value, dut.sub.value = ln, b, c, s
                dut.wdata.value = sum(
                    int(x) << (i * w) for i, x in enumerate(vs[vec, ln, b, c, s * cols :][:cols])
                )
            else:
                dut.we.value = 0
            # the reader: vector vec - 1 from the other bank, at random
            dut.re.value = 0
            if vec > 0 and order and rng.random() < 0.5:
                b, c = int(rng.integers(0, kb)), int(rng.integers(0, dc))
                dut.att_b.value, dut.re.value = (vec - 1) % 2, 1
                dut.rd_blk.value, dut.rd_cc.value = b, c
                rd = (vec - 1, b, c)
            else:
                rd = None
            await FallingEdge(dut.clk)  # the edge between took the read: v is its chunk
            if rd is not None:
                got = int(dut.v.value)
                assert got == chunk(*rd), f"read {rd}: {got:#x}"
        # the last piece went in at the last edge (a cycle later with ADDER_LEVELS): read the
        # vector back in full from the cycle after
        dut.we.value = 0
        await FallingEdge(dut.clk)
        for b in range(kb):
            for c in range(dc):
                dut.att_b.value, dut.re.value = vec % 2, 1
                dut.rd_blk.value, dut.rd_cc.value = b, c
                await Timer(1, unit="ns")
                await FallingEdge(dut.clk)
                dut.re.value = 0
                await Timer(1, unit="ns")
                assert int(dut.v.value) == chunk(vec, b, c), f"vector {vec} block {b} chunk {c}"


pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None
LEAVES = ("folded_ram", "folded_macro")


@pytest.mark.parametrize("name", sorted(CASES))
def test_folded_v_banks(name):
    case = json.dumps({"name": name, "seed": 1})
    result = run_leaf(__file__, "folded_v_banks", CASES[name], leaves=LEAVES,
                      EATT_LEAF_CASE=case)  # fmt: skip
    assert result["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
def test_folded_v_banks_icarus():
    case = json.dumps({"name": "m2-reg", "seed": 2})
    result = run_leaf(__file__, "folded_v_banks", CASES["m2-reg"], "icarus", leaves=LEAVES,
                      EATT_LEAF_CASE=case)  # fmt: skip
    assert result["tests"] == 1
