"""Testbench of folded_proj_tile (rtl_sim/rtl/folded_proj_tile.sv): one SIMD x COLS tile of a
projection, rows selected (E-ATT Q/K) or multiplied (every other projection).

Two halves in one file, as verilog-axis' testbenches:

- the pytest functions at the bottom build the leaf with one parameter set
  (eatt.rtl_sim.runner.run_leaf: cocotb_tools.runner, cached) and run the cocotb test in it;
  ``pytest rtl_sim/tb/folded_proj_tile`` runs them alone;
- the cocotb test ``tile_vectors`` runs inside the simulator: random inputs and weights, edge
  values first (all rows selected, the extreme codes), against numpy's exact integer sums; a
  pipelined tile (LEVELS >= 1) takes a new tile every cycle and gives its sums STAGES cycles
  later.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
import pytest

from eatt.rtl_sim.leaf_stream import pack, stream, unpack
from eatt.rtl_sim.runner import run_leaf

#: parameter sets: (SIMD, [COLS,] A_W, W_W, ACC_W, SELECT); ACC_W holds SIMD products of the
#: extremes; COLS defaults to SIMD (E-ATT's V/O walk uses COLS < SIMD)
CASES = {
    "select-4": dict(SIMD=4, A_W=8, W_W=8, ACC_W=11, SELECT=1),
    "multiply-4": dict(SIMD=4, A_W=8, W_W=8, ACC_W=18, SELECT=0),
    "multiply-3-narrow": dict(SIMD=3, A_W=5, W_W=4, ACC_W=10, SELECT=0),
    "select-1": dict(SIMD=1, A_W=8, W_W=6, ACC_W=6, SELECT=1),
    "multiply-4x2": dict(SIMD=4, COLS=2, A_W=8, W_W=8, ACC_W=18, SELECT=0),
    # pipelined (the build's adder_levels): a register after every LEVELS adder levels
    "multiply-8-levels1": dict(SIMD=8, COLS=2, A_W=8, W_W=8, ACC_W=22, SELECT=0, LEVELS=1),
    "select-8-levels2": dict(SIMD=8, A_W=8, W_W=8, ACC_W=14, SELECT=1, LEVELS=2),
    "multiply-3-narrow-levels1": dict(SIMD=3, A_W=5, W_W=4, ACC_W=10, SELECT=0, LEVELS=1),
    "select-1-levels1": dict(SIMD=1, A_W=8, W_W=6, ACC_W=6, SELECT=1, LEVELS=1),
    # operands wider than a multiplier port: the products in 17-bit pieces, registered
    "multiply-4-wide-levels1": dict(SIMD=4, COLS=2, A_W=24, W_W=8, ACC_W=34, SELECT=0, LEVELS=1),
    "multiply-3-wider-levels2": dict(SIMD=3, A_W=40, W_W=8, ACC_W=50, SELECT=0, LEVELS=2),
    # a register on each side of every multiplier (the walks' MUL_REGS 3): two stages more
    "multiply-8-levels1-regs3": dict(
        SIMD=8, COLS=2, A_W=8, W_W=8, ACC_W=22, SELECT=0, LEVELS=1, MUL_REGS=3
    ),
    "multiply-4-wide-levels1-regs3": dict(
        SIMD=4, COLS=2, A_W=24, W_W=8, ACC_W=34, SELECT=0, LEVELS=1, MUL_REGS=3
    ),
    "select-8-levels2-regs3": dict(SIMD=8, A_W=8, W_W=8, ACC_W=14, SELECT=1, LEVELS=2, MUL_REGS=3),
}


def stages(p: dict) -> int:
    """Cycles from a tile's inputs to its sums (folded_proj_tile.sv STAGES): a select tile
    ignores MUL_REGS."""
    levels, depth = p.get("LEVELS", 0), (p["SIMD"] - 1).bit_length()
    if not levels:
        return 0
    products = 0 if p["SELECT"] else p.get("MUL_REGS", 1) - 1
    return (1 + (depth - 1) // levels if depth else 1) + products


VECTORS = 300


def expected_parts(p: dict, sel: np.ndarray, a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """part[c] = sum_r (sel[r] ? w[r][c] : 0) or sum_r a[r] * w[r][c]."""
    return (sel if p["SELECT"] else a) @ w


def vectors(p: dict, n: int, seed: int):
    rng = np.random.default_rng(seed)
    s, cols = p["SIMD"], p.get("COLS", p["SIMD"])
    alo, ahi = -(2 ** (p["A_W"] - 1)), 2 ** (p["A_W"] - 1) - 1
    wlo, whi = -(2 ** (p["W_W"] - 1)), 2 ** (p["W_W"] - 1) - 1
    sel = rng.integers(0, 2, size=(n, s))
    a = rng.integers(alo, ahi + 1, size=(n, s))
    w = rng.integers(wlo, whi + 1, size=(n, s, cols))
    sel[:4] = 1  # every row selected, at the extremes
    a[0], w[0] = alo, wlo
    a[1], w[1] = alo, whi
    a[2], w[2] = ahi, wlo
    a[3], w[3] = ahi, whi
    return sel, a, w


@cocotb.test()
async def tile_vectors(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    p = CASES[case["name"]]
    cols, lag = p.get("COLS", p["SIMD"]), stages(p)
    sel, a, w = vectors(p, case["vectors"], case["seed"])

    def drive(n: int) -> None:  # a pipelined tile: a new tile every cycle
        dut.sel.value = pack(sel[n], 1)
        dut.a.value = pack(a[n], p["A_W"])
        dut.w.value = pack(w[n], p["W_W"])  # w[r][c] at (r*COLS + c)

    def check(k: int) -> None:
        got = unpack(int(dut.part.value), cols, p["ACC_W"])
        want = expected_parts(p, sel[k], a[k], w[k]).tolist()
        assert got == want, f"vector {k}: sel={sel[k]} a={a[k]} w={w[k].tolist()}: {got}"

    await stream(dut, len(sel), lag, drive, check)


pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("name", sorted(CASES))
def test_folded_proj_tile(name):
    case = json.dumps({"name": name, "vectors": VECTORS, "seed": 1})
    result = run_leaf(
        __file__,
        "folded_proj_tile",
        CASES[name],
        leaves=("folded_adder_tree", "piece_mult"),
        EATT_LEAF_CASE=case,
    )
    assert result["tests"] == 1
