"""Testbench of piece_mult (rtl_sim/rtl/piece_mult.sv): a x b exactly, a cut into 17-bit
pieces whose products with b are registered (and with REGS 3, registers on each side of
each multiplier).

Two halves in one file, as verilog-axis' testbenches:

- the pytest function at the bottom builds the leaf for one parameter set
  (eatt.rtl_sim.runner.run_leaf, cached) and runs the cocotb test in it;
  ``pytest rtl_sim/tb/piece_mult`` runs them alone;
- the cocotb test ``product_vectors`` runs inside the simulator: random operands (the
  extremes first, pairs of them, and zero), a new pair every cycle, each product checked
  REGS cycles later against Python's exact integer product.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
import pytest

from eatt.rtl_sim.leaf_stream import signed, stream
from eatt.rtl_sim.runner import run_leaf

#: parameter sets: one piece (a fits a port), two, three (the top piece 1 to 17 bits wide),
#: the callers' shapes (recip_normalize's N x R, folded_attend's V x e, the tile's A x W)
CASES = {
    "a12-b12-one": dict(A_W=12, B_W=12),
    "a18-b18-one": dict(A_W=18, B_W=18),
    "a19-b9-two": dict(A_W=19, B_W=9),
    "a26-b14-normalize": dict(A_W=26, B_W=14),
    "a24-b8-tile": dict(A_W=24, B_W=8),
    "a35-b18-three": dict(A_W=35, B_W=18),
    "a40-b5-three": dict(A_W=40, B_W=5),
    "a20-b6-piece5": dict(A_W=20, B_W=6, PIECE=5),
    # registers beside each multiplier (REGS 3: three cycles)
    "a26-b14-regs3": dict(A_W=26, B_W=14, REGS=3),
    "a12-b12-regs3": dict(A_W=12, B_W=12, REGS=3),
    "a40-b5-regs3": dict(A_W=40, B_W=5, REGS=3),
}
VECTORS = 300


def operands(p: dict, count: int, seed: int) -> tuple[list[int], list[int]]:
    """(a, b): the extremes and zero in every pairing first, then random."""
    rng = np.random.default_rng(seed)
    edges = {}
    for name, width in (("a", p["A_W"]), ("b", p["B_W"])):
        edges[name] = [-(2 ** (width - 1)), 2 ** (width - 1) - 1, 0, -1, 1]
    pairs = [(x, y) for x in edges["a"] for y in edges["b"]]
    a = [x for x, _ in pairs] + [
        int(v) for v in rng.integers(-(2 ** (p["A_W"] - 1)), 2 ** (p["A_W"] - 1), count)
    ]
    b = [y for _, y in pairs] + [
        int(v) for v in rng.integers(-(2 ** (p["B_W"] - 1)), 2 ** (p["B_W"] - 1), count)
    ]
    return a, b


@cocotb.test()
async def product_vectors(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    p = CASES[case["name"]]
    a, b = operands(p, case["vectors"], case["seed"])
    a_mask, b_mask = (1 << p["A_W"]) - 1, (1 << p["B_W"]) - 1

    def drive(n: int) -> None:
        dut.a.value, dut.b.value = a[n] & a_mask, b[n] & b_mask

    def check(k: int) -> None:
        got = signed(int(dut.product.value), p["A_W"] + p["B_W"])
        assert got == a[k] * b[k], f"pair {k}: {a[k]} x {b[k]}: {got}"

    await stream(dut, len(a), p.get("REGS", 1), drive, check)


pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("name", sorted(CASES))
def test_piece_mult(name):
    case = json.dumps({"name": name, "vectors": VECTORS, "seed": 1})
    result = run_leaf(__file__, "piece_mult", CASES[name], EATT_LEAF_CASE=case)
    assert result["tests"] == 1
