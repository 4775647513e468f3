"""Testbench of l1_score_row (rtl_sim/rtl/l1_score_row.sv): S = -sum_t |q[t] - k[t]|.

The pytest functions at the bottom build the leaf for one head's lane bounds (parameters from
eatt.rtl_sim.generate.l1_score_row_parameters, as the generator passes them; built and run by
eatt.rtl_sim.runner.run_leaf) and run the cocotb test ``scores_in_bounds`` in it: ScoreRowTB
drives q and k rows drawn inside each lane's bounds (their corners first: the largest |q - k|
both ways, equal lanes) and compares the score with the golden model's
eatt.quant.golden.l1_scores_int.

Each case gives, per lane, the (lo, hi) bounds of q and of k (as the generator derives them
from the weights' column bounds): varied widths, a lane that is always 0, a lane count that is
not a power of two (the pairwise tree passes an odd node up), one lane (no adder), and the full
12-bit range (the ``widths: "config"`` datapath).
"""

from __future__ import annotations

import json
import os
import shutil

import cocotb
import numpy as np
import pytest
from cocotb.triggers import Timer

from eatt.quant.golden import l1_scores_int
from eatt.rtl_sim.eatt_datapath import l1_score_row_parameters
from eatt.rtl_sim.leaf_stream import pack, signed
from eatt.rtl_sim.runner import run_leaf

#: name -> (qk_bits, score_bits, q bounds per lane, k bounds per lane)
CASES = {
    "lanes8": (11, 16, [(-37, 40), (-5, 60), (0, 0), (-300, 250), (-2, 3), (-64, 63), (-9, 0),
                        (-500, 511)],
               [(-40, 37), (-60, 5), (-1, 1), (-250, 300), (-3, 2), (-64, 63), (0, 9),
                (-511, 500)]),
    "lanes3": (8, 11, [(-100, 100), (-7, 7), (-128, 127)], [(-90, 110), (-8, 6), (-128, 127)]),
    "lanes1": (6, 7, [(-32, 31)], [(-32, 31)]),
    "lanes16-full": (12, 17, [(-2048, 2047)] * 16, [(-2048, 2047)] * 16),
}  # fmt: skip
VECTORS = 300


def parameters(name: str) -> dict:
    qk_bits, score_bits, qbounds, kbounds = CASES[name]
    return l1_score_row_parameters(qbounds, kbounds, qk_bits, score_bits)


def vectors(name: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, lanes) q and k rows inside the case's bounds: the corners first, then random."""
    _, _, qbounds, kbounds = CASES[name]
    (qlo, qhi), (klo, khi) = np.array(qbounds).T, np.array(kbounds).T
    rng = np.random.default_rng(seed)
    q = rng.integers(qlo, qhi + 1, size=(n, len(qlo)))
    k = rng.integers(klo, khi + 1, size=(n, len(klo)))
    corners = [(qhi, klo), (qlo, khi), (qlo, klo), (qhi, khi), (qhi, qhi.clip(klo, khi))]
    for row, (a, b) in enumerate(corners):
        q[row], k[row] = a, b
    return q, k


class ScoreRowTB:
    """Drives a q row and a k row, reads the score (the leaf is combinational)."""

    def __init__(self, dut, params: dict):
        self.dut = dut
        self.p = params

    async def score(self, q, k) -> int:
        self.dut.q.value = pack(q, self.p["IN_W"])
        self.dut.k.value = pack(k, self.p["IN_W"])
        await Timer(1, "ns")
        return signed(int(self.dut.score.value), self.p["SCORE_W"])


@cocotb.test()
async def scores_in_bounds(dut):
    """Every row of vectors(): the score must equal golden l1_scores_int."""
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    q, k = vectors(case["name"], case["vectors"], case["seed"])
    expected = l1_scores_int(q[:, None, :], k[:, None, :])[:, 0, 0]
    tb = ScoreRowTB(dut, parameters(case["name"]))
    for row in range(len(q)):
        got = await tb.score(q[row], k[row])
        assert got == expected[row], f"row {row}: q={q[row]} k={k[row]}: {got} != {expected[row]}"


# -- the pytest side ------------------------------------------------------------------------------
pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def _run(name: str, simulator: str) -> dict:
    p = parameters(name)
    params = {key: p[key] for key in ("LANES", "IN_W", "SCORE_W")}
    # one sized literal for the command line (-G / -P), lane 0 at the least significant bits
    word = sum(bound << (32 * t) for t, bound in enumerate(p["diff_max"]))
    params["DIFF_MAX"] = f"{32 * p['LANES']}'h{word:x}"
    case = json.dumps({"name": name, "vectors": VECTORS, "seed": 1})
    return run_leaf(__file__, "l1_score_row", params, simulator, EATT_LEAF_CASE=case)


@pytest.mark.parametrize("name", sorted(CASES))
def test_l1_score_row(name):
    assert _run(name, "verilator")["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
@pytest.mark.parametrize("name", ["lanes8", "lanes3"])
def test_l1_score_row_icarus(name):
    assert _run(name, "icarus")["tests"] == 1
