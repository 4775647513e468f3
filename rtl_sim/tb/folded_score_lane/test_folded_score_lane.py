"""Testbench of folded_score_lane (rtl_sim/rtl/folded_score_lane.sv): the partial score of one
(query, key) pair over SIMD features, L1 (E-ATT) or dot (vanilla; the Dense Synthesizer's
hidden codes against a column of W_2, k then K_W bits wide).

As every leaf testbench: the pytest functions at the bottom build the leaf with a parameter
set (eatt.rtl_sim.runner.run_leaf, cached) and run the cocotb test ``lane_vectors`` in it,
which compares the part with the golden model's own score functions
(eatt.quant.golden.l1_scores_int, matmul_int) on random codes, the extremes first.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
import pytest

from eatt.quant.golden import l1_scores_int, matmul_int, signed_bits
from eatt.rtl_sim.folding import tree_stages
from eatt.rtl_sim.leaf_stream import pack, stream
from eatt.rtl_sim.runner import run_leaf


def _case(simd: int, qk_w: int, l1: int, k_w: int | None = None) -> dict:
    """SCORE_W as the golden score_bits of a head of SIMD features (the bound of the part)."""
    top = 2 ** (qk_w - 1)
    k_top = top if k_w is None else 2 ** (k_w - 1)
    bound = simd * (2 * top - 1) if l1 else simd * top * k_top
    case = dict(SIMD=simd, QK_W=qk_w, SCORE_W=signed_bits(bound), L1=l1)
    return case if k_w is None else dict(case, K_W=k_w)


CASES = {
    "l1-4": _case(4, 12, 1),
    "dot-4": _case(4, 12, 0),
    "l1-1-narrow": _case(1, 5, 1),
    "dot-3-narrow": _case(3, 6, 0),
    # Dense: hidden codes (QK_W) against weights (K_W), wider and narrower
    "dense-4-w8": _case(4, 12, 0, k_w=8),
    "dense-2-w14": dict(_case(2, 6, 0, k_w=14), LEVELS=1),
    # pipelined (the engine's adder_levels): a register after every LEVELS adder levels
    "l1-8-levels1": dict(_case(8, 12, 1), LEVELS=1),
    "dot-3-levels2": dict(_case(3, 6, 0), LEVELS=2),
    "l1-1-levels1": dict(_case(1, 5, 1), LEVELS=1),
}
VECTORS = 300


def vectors(p: dict, n: int, seed: int):
    rng = np.random.default_rng(seed)
    lo, hi = -(2 ** (p["QK_W"] - 1)), 2 ** (p["QK_W"] - 1) - 1
    k_w = p.get("K_W", p["QK_W"])
    k_lo, k_hi = -(2 ** (k_w - 1)), 2 ** (k_w - 1) - 1
    q = rng.integers(lo, hi + 1, size=(n, p["SIMD"]))
    k = rng.integers(k_lo, k_hi + 1, size=(n, p["SIMD"]))
    q[0], k[0] = lo, k_hi  # the largest |q - k|
    q[1], k[1] = hi, k_lo
    q[2], k[2] = lo, k_lo  # the largest product
    q[3], k[3] = lo, k_hi  # the most negative product
    return q, k


def expected_part(p: dict, q: np.ndarray, k: np.ndarray) -> int:
    if p["L1"]:
        return int(l1_scores_int(q[None], k[None])[0, 0])
    return int(matmul_int(q[None], k[:, None])[0, 0])


@cocotb.test()
async def lane_vectors(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    p = CASES[case["name"]]
    q, k = vectors(p, case["vectors"], case["seed"])
    # a pipelined lane: the engine's stages less its q/k register (tree_stages counts it)
    lag = max(0, tree_stages(p["SIMD"], p.get("LEVELS", 0)) - 1)

    def drive(n: int) -> None:  # a pipelined lane: a new pair every cycle
        dut.q.value = pack(q[n], p["QK_W"])
        dut.k.value = pack(k[n], p.get("K_W", p["QK_W"]))

    def check(m: int) -> None:
        got = dut.part.value.to_signed()
        want = expected_part(p, q[m], k[m])
        assert got == want, f"vector {m}: q={q[m].tolist()} k={k[m].tolist()}: {got}"

    await stream(dut, len(q), lag, drive, check)


pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("name", sorted(CASES))
def test_folded_score_lane(name):
    case = json.dumps({"name": name, "vectors": VECTORS, "seed": 1})
    result = run_leaf(
        __file__,
        "folded_score_lane",
        CASES[name],
        leaves=("folded_adder_tree",),
        EATT_LEAF_CASE=case,
    )
    assert result["tests"] == 1
