"""Testbench of folded_adder_tree (rtl_sim/rtl/folded_adder_tree.sv): TERMS signed terms summed
in a balanced tree, combinational or pipelined every LEVELS adder levels.

Two halves in one file, as verilog-axis' testbenches:

- the pytest function at the bottom builds the leaf for one parameter set
  (eatt.rtl_sim.runner.run_leaf, cached) and runs the cocotb test in it;
  ``pytest rtl_sim/tb/folded_adder_tree`` runs them alone;
- the cocotb test ``tree_vectors`` runs inside the simulator: random terms (the extremes
  first, and sums that wrap W bits, which the leaf's callers never produce but the modular
  sum must still give), a new set every cycle, against numpy's sum modulo 2^W.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
import pytest

from eatt.rtl_sim.leaf_stream import signed, stream
from eatt.rtl_sim.runner import run_leaf

#: parameter sets: TERMS not a power of two among them, one term, LEVELS 0 to 3
CASES = {
    "t4-w10": dict(TERMS=4, W=10, LEVELS=0),
    "t5-w9-levels1": dict(TERMS=5, W=9, LEVELS=1),
    "t8-w12-levels2": dict(TERMS=8, W=12, LEVELS=2),
    "t16-w7-levels3": dict(TERMS=16, W=7, LEVELS=3),
    "t1-w6-levels1": dict(TERMS=1, W=6, LEVELS=1),
    "t8-w12-levels1-unreg": dict(TERMS=8, W=12, LEVELS=1, REG_TERMS=0),  # the caller's terms
}
VECTORS = 300


def stages(p: dict) -> int:
    """Cycles from the terms to the sum (folded_adder_tree.sv STAGES)."""
    depth = (p["TERMS"] - 1).bit_length()
    levels, reg = p["LEVELS"], p.get("REG_TERMS", 1)
    return (reg + (depth - 1) // levels if depth else reg) if levels else 0


@cocotb.test()
async def tree_vectors(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    p = CASES[case["name"]]
    rng = np.random.default_rng(case["seed"])
    lo, hi = -(2 ** (p["W"] - 1)), 2 ** (p["W"] - 1) - 1
    terms = rng.integers(lo, hi + 1, size=(case["vectors"], p["TERMS"]))
    terms[0], terms[1] = lo, hi
    lag = stages(p)
    mask = (1 << p["W"]) - 1

    def drive(n: int) -> None:
        word = 0
        for t, value in enumerate(terms[n].tolist()):
            word |= (int(value) & mask) << (t * p["W"])
        dut.terms.value = word

    def check(k: int) -> None:
        got = signed(int(dut.sum.value), p["W"])
        want = signed(int(terms[k].sum()), p["W"])
        assert got == want, f"vector {k}: {terms[k].tolist()}: {got} != {want}"

    await stream(dut, len(terms), lag, drive, check)


pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("name", sorted(CASES))
def test_folded_adder_tree(name):
    case = json.dumps({"name": name, "vectors": VECTORS, "seed": 1})
    result = run_leaf(__file__, "folded_adder_tree", CASES[name], EATT_LEAF_CASE=case)
    assert result["tests"] == 1
