"""Testbench of folded_numer (rtl_sim/rtl/folded_numer.sv): the attention unit's numerators,
N[t] = sum_j e[j] V[j][t] over the key blocks, LANES keys and SIMD features a cycle.

Two halves in one file, as verilog-axis' testbenches:

- the pytest function at the bottom builds the leaf for one parameter set
  (eatt.rtl_sim.runner.run_leaf, cached) and runs the cocotb test in it;
  ``pytest rtl_sim/tb/folded_numer`` runs them alone;
- the cocotb test ``numer_stream`` runs inside the simulator: a new set of weights e and V
  words every cycle (the extremes first), `acc` and `first` at random EXTRA + 1 cycles after
  the set they add, and N checked every cycle against Python's exact sums (the golden
  model's weighted_values before the division).
"""

from __future__ import annotations

import json
import os
import shutil

import cocotb
import numpy as np
import pytest
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from eatt.rtl_sim.leaf_stream import pack, unpack
from eatt.rtl_sim.runner import run_leaf

#: parameter sets: one lane, one feature, the trained layer's widths, the pipelined unit
CASES = {
    "l2-s2": dict(LANES=2, SIMD=2, EXP_W=11, V_W=12, NUMER_W=28),
    "l1-s1": dict(LANES=1, SIMD=1, EXP_W=6, V_W=5, NUMER_W=14),
    "l3-s2-extra4": dict(LANES=3, SIMD=2, EXP_W=11, V_W=22, NUMER_W=40, EXTRA=4),
    "l2-s2-extra5-reads2": dict(LANES=2, SIMD=2, EXP_W=11, V_W=12, NUMER_W=26, EXTRA=5, READS=2),
    "l2-s4-extra2": dict(LANES=2, SIMD=4, EXP_W=9, V_W=12, NUMER_W=26, EXTRA=2),
}
CYCLES = 300


@cocotb.test()
async def numer_stream(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    p = CASES[case["name"]]
    lanes, simd, lag = p["LANES"], p["SIMD"], p.get("EXTRA", 0) + 1
    rng = np.random.default_rng(case["seed"])
    e = rng.integers(0, 2 ** p["EXP_W"], size=(CYCLES, lanes))
    v = rng.integers(-(2 ** (p["V_W"] - 1)), 2 ** (p["V_W"] - 1), size=(CYCLES, lanes, simd))
    e[:4] = 2 ** p["EXP_W"] - 1  # the extremes first: the largest sums of either sign
    v[:2], v[2:4] = -(2 ** (p["V_W"] - 1)), 2 ** (p["V_W"] - 1) - 1
    acc = rng.random(CYCLES) < 0.8
    first = rng.random(CYCLES) < 0.3
    acc[lag], first[lag] = True, True  # N starts defined
    acc[lag + 1 : lag + 4], first[lag + 1 : lag + 4] = True, False  # the extremes add up
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value, dut.acc.value, dut.first.value = 1, 0, 0
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    n = [0] * simd  # N as the model has it
    for k in range(CYCLES + lag + 1):
        if k < CYCLES:
            dut.e.value = pack(e[k], p["EXP_W"])
            dut.v.value = pack(v[k], p["V_W"])  # lane l's features at (l * SIMD + t)
        on = lag <= k < CYCLES and bool(acc[k])
        dut.acc.value, dut.first.value = int(on), int(on and bool(first[k]))
        await FallingEdge(dut.clk)
        if on:
            total = (e[k - lag][:, None] * v[k - lag]).sum(axis=0)
            n = [int(t) + (0 if first[k] else x) for t, x in zip(total.tolist(), n, strict=True)]
        if k > lag:
            got = unpack(int(dut.numer.value), simd, p["NUMER_W"])
            assert got == n, f"cycle {k}: {got} != {n}"


pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None


@pytest.mark.parametrize("name", sorted(CASES))
def test_folded_numer(name):
    case = json.dumps({"name": name, "seed": 1})
    result = run_leaf(
        __file__,
        "folded_numer",
        CASES[name],
        leaves=("folded_adder_tree", "piece_mult"),
        EATT_LEAF_CASE=case,
    )
    assert result["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
@pytest.mark.parametrize("name", ["l1-s1", "l3-s2-extra4"])
def test_folded_numer_icarus(name):
    """The same stream in Icarus (the small case is where Verilator once differed: e taken as
    signed inside a function call, now written out)."""
    case = json.dumps({"name": name, "seed": 1})
    leaves = ("folded_adder_tree", "piece_mult")
    result = run_leaf(__file__, "folded_numer", CASES[name], "icarus", leaves=leaves,
                      EATT_LEAF_CASE=case)  # fmt: skip
    assert result["tests"] == 1
