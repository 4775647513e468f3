"""Testbench of folded_max_tree (rtl_sim/rtl/folded_max_tree.sv): the largest of TERMS signed
values among those flagged visible, in a balanced tree, combinational or pipelined every LEVELS
compare levels.

Two halves in one file, as verilog-axis' testbenches:

- the pytest function at the bottom builds the leaf for one parameter set
  (eatt.rtl_sim.runner.run_leaf, cached) and runs the cocotb test in it;
  ``pytest rtl_sim/tb/folded_max_tree`` runs them alone;
- the cocotb test ``max_vectors`` runs inside the simulator: random values and visible flags
  (the extremes first, ties, one visible value, none visible), a new set every cycle, against
  numpy's max over the visible values (the golden model's masked max,
  eatt.quant.golden.GoldenCore.softmax_weights).
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
import pytest

from eatt.rtl_sim.leaf_stream import signed, stream
from eatt.rtl_sim.runner import run_leaf

#: parameter sets: TERMS not a power of two among them, one term, LEVELS 0 to 2
CASES = {
    "t4-w10": dict(TERMS=4, W=10),
    "t5-w9": dict(TERMS=5, W=9),
    "t8-w4": dict(TERMS=8, W=4),
    "t1-w6": dict(TERMS=1, W=6),
    "t4-w30-levels1": dict(TERMS=4, W=30, LEVELS=1),
    "t2-w12-levels1": dict(TERMS=2, W=12, LEVELS=1),
    "t8-w9-levels2": dict(TERMS=8, W=9, LEVELS=2),
    "t5-w7-levels1": dict(TERMS=5, W=7, LEVELS=1),
    "t1-w6-levels1": dict(TERMS=1, W=6, LEVELS=1),
}
VECTORS = 300


def stages(p: dict) -> int:
    """Cycles from the inputs to {any, max} (folded_max_tree.sv STAGES)."""
    depth, levels = (p["TERMS"] - 1).bit_length(), p.get("LEVELS", 0)
    return -(-depth // levels) if levels else 0


def vectors(p: dict, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, visible): random, then the extremes, ties, one and no visible value."""
    rng = np.random.default_rng(seed)
    t, w = p["TERMS"], p["W"]
    lo, hi = -(2 ** (w - 1)), 2 ** (w - 1) - 1
    values = rng.integers(lo, hi + 1, size=(count, t))
    visible = rng.integers(0, 2, size=(count, t)).astype(bool)
    values[0], values[1], values[2] = lo, hi, rng.integers(lo, hi + 1)  # ties
    visible[:3] = True
    visible[3] = False  # none visible
    visible[4] = np.arange(t) == t - 1  # the last one only
    values[5] = lo
    values[5, 0] = hi  # the largest first
    visible[5] = True
    return values, visible


@cocotb.test()
async def max_vectors(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    p = CASES[case["name"]]
    values, visible = vectors(p, case["vectors"], case["seed"])
    mask = (1 << p["W"]) - 1

    def drive(n: int) -> None:
        word = 0
        for t, value in enumerate(values[n].tolist()):
            word |= (int(value) & mask) << (t * p["W"])
        dut.values.value = word
        dut.visible.value = sum(1 << t for t, v in enumerate(visible[n].tolist()) if v)

    def check(k: int) -> None:
        any_visible = bool(visible[k].any())
        assert int(dut.any.value) == any_visible, f"vector {k}: any"
        if any_visible:
            got = signed(int(dut.max.value), p["W"])
            want = int(values[k][visible[k]].max())
            assert got == want, f"vector {k}: {values[k].tolist()}: {got} != {want}"

    await stream(dut, len(values), stages(p), drive, check)


pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("name", sorted(CASES))
def test_folded_max_tree(name):
    case = json.dumps({"name": name, "vectors": VECTORS, "seed": 1})
    result = run_leaf(__file__, "folded_max_tree", CASES[name], EATT_LEAF_CASE=case)
    assert result["tests"] == 1
