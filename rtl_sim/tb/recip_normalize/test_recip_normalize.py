"""Testbench of recip_normalize (rtl_sim/rtl/recip_normalize.sv): O = N / E with the table.

Two halves in one file, as verilog-axis' testbenches:

- the pytest functions at the bottom (``test_recip_normalize*``) build the leaf with the
  parameters of one config (eatt.rtl_sim.runner.run_leaf: cocotb_tools.runner, cached) and run
  the cocotb test in it; ``pytest rtl_sim/tb/recip_normalize`` runs them alone;
- the cocotb test ``normalize_vectors`` runs inside the simulator: RecipNormalizeTB drives the
  sum E and the numerators N, plays the reciprocal ROM (the generated top's recip_rom) from the
  golden table, and compares O with the golden model.

The reference is eatt.quant.golden itself: random softmax weights e and values V give
E = sum_j e_j and N = sum_j e_j V_j, and GoldenCore.weighted_values(e, V) is the expected O
(the golden reciprocal, rounding and clamp), so the leaf is checked on the (E, N) pairs the core
can produce, edge cases included (E a power of two, E at its maximum, V at both extremes).
"""

from __future__ import annotations

import json
import os
import shutil

import cocotb
import numpy as np
import pytest
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer

from eatt.config import CoreConfig
from eatt.quant.golden import GoldenCore, derive_formats, matmul_int, random_weights
from eatt.rtl_sim.leaf_stream import pack, unpack
from eatt.rtl_sim.runner import run_leaf

#: parameter sets: configs whose golden formats give the leaf's widths (one core row each:
#: heads 1, len_q 1, so LANES = dim = d_head)
CASES = {
    "default": dict(len_k=4, dim=4),  # eatt_default.yaml's formats, d_head 4
    "narrow": dict(  # 2-entry table, few fraction bits: the clamp and the rounding bite
        len_k=3, dim=2, v_bits=6, qk_bits=6, out_bits=6, exp_table_size=16, exp_frac=3,
        recip_table_size=2, recip_frac=3,
    ),
    "wide": dict(  # a 54-bit product, a 4096-entry table
        len_k=5, dim=3, v_bits=20, qk_bits=16, out_bits=16, exp_frac=14, recip_frac=16,
        recip_table_size=4096, in_bits=10, in_frac=5, weight_bits=10,
    ),
    "long": dict(len_k=16, dim=8, recip_table_size=64, recip_frac=10),  # E of 15 bits
}  # fmt: skip
VECTORS = 400


def case_config(name: str) -> CoreConfig:
    return CoreConfig(kind="eatt", len_q=1, heads=1, **CASES[name])


def parameters(cfg: CoreConfig) -> dict[str, int]:
    """The leaf's parameters for cfg: the golden widths, as generate.recip_normalize passes."""
    f = derive_formats(cfg)
    return {
        "LANES": cfg.d_head,
        "SUM_W": f.esum_bits,
        "NUMER_W": f.numer_bits,
        "INDEX_W": f.recip_index_bits,
        "RECIP_W": f.recip_bits,
        "RECIP_FRAC": cfg.recip_frac,
        "PROD_W": f.prod_bits,
        "OUT_W": f.attn_bits,
    }


def golden_vectors(cfg: CoreConfig, n: int, seed: int):
    """(E, N, expected O) of n rows: edge rows first, then random softmax weights and values."""
    golden = GoldenCore(cfg, random_weights(cfg, seed=0))
    f = golden.formats
    lk, lanes, top = cfg.len_k, cfg.d_head, 2**cfg.exp_frac
    vmin, vmax = -(2 ** (f.v_code_bits - 1)), 2 ** (f.v_code_bits - 1) - 1
    rng = np.random.default_rng(seed)
    e = rng.integers(0, top + 1, size=(n, 1, 1, lk))
    e[: n // 4, 0, 0, 0] = top  # the max entry is EXP[0], as in the core
    e[n // 4 : n // 2] = rng.integers(0, 4, size=(n // 2 - n // 4, 1, 1, lk))  # small sums
    v = rng.integers(vmin, vmax + 1, size=(n, lk, lanes))
    edges = [
        (np.eye(1, lk, 0, dtype=np.int64) * top, vmax),  # E = 2**exp_frac
        (np.full((1, lk), top), vmin),  # E at its maximum, N at its minimum
        (np.full((1, lk), top), vmax),
        (np.eye(1, lk, lk - 1, dtype=np.int64), vmin),  # E = 1
        (np.eye(1, lk, lk - 1, dtype=np.int64), vmax),
    ]
    for row, (weights, value) in enumerate(edges):
        e[row, 0, 0] = weights[0]
        v[row] = value
    e[e.sum(axis=-1)[..., 0, 0] == 0, 0, 0, 0] = 1  # E >= 1
    total = e.sum(axis=-1)[:, 0, 0]
    numer = matmul_int(e, golden.split_heads(v))[:, 0, 0]  # (n, lanes)
    expected = golden.weighted_values(e, v)[:, 0]  # (n, lanes)
    return total, numer, expected, golden.recip_table


# -- the cocotb side ------------------------------------------------------------------------------
class RecipNormalizeTB:
    """Drives E and N, answers recip_index with the table (the generated top's ROM), reads O."""

    def __init__(self, dut, params: dict[str, int], table: np.ndarray):
        self.dut = dut
        self.p = params
        self.table = table
        if params.get("PIPE"):  # N x R registered: O a clock edge after its inputs
            cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())

    async def normalize(self, total: int, numer) -> list[int]:
        p, dut = self.p, self.dut
        dut.e_sum.value = int(total)
        dut.numer.value = pack(numer, p["NUMER_W"])
        if p.get("PIPE"):  # the leading one of E, then the index (and the shift) registered
            await RisingEdge(dut.clk)
            await RisingEdge(dut.clk)
        await Timer(1, "ns")
        dut.recip.value = int(self.table[int(dut.recip_index.value)])
        # N x R registered (PIPE 2: N and R, then the pieces' products, before it; PIPE 3: a
        # register on each side of each piece besides, the shift in two stages)
        for _ in range({0: 0, 1: 1, 2: 3, 3: 6}[p.get("PIPE", 0)]):
            await RisingEdge(dut.clk)
        await Timer(1, "ns")
        return unpack(int(dut.o.value), p["LANES"], p["OUT_W"])


@cocotb.test()
async def normalize_vectors(dut):
    """Every (E, N) row of golden_vectors: O must equal GoldenCore.weighted_values."""
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    cfg = case_config(case["name"])
    total, numer, expected, table = golden_vectors(cfg, case["vectors"], case["seed"])
    tb = RecipNormalizeTB(dut, {**parameters(cfg), "PIPE": case.get("pipe", 0)}, table)
    for row in range(len(total)):
        got = await tb.normalize(total[row], numer[row])
        want = expected[row].tolist()
        assert got == want, f"row {row}: E={total[row]} N={numer[row].tolist()}: {got} != {want}"


# -- the pytest side ------------------------------------------------------------------------------
pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def _run(name: str, simulator: str, pipe: int = 0) -> dict:
    case = json.dumps({"name": name, "vectors": VECTORS, "seed": 1, "pipe": pipe})
    params = {**parameters(case_config(name)), "PIPE": pipe}
    return run_leaf(
        __file__, "recip_normalize", params, simulator, leaves=("piece_mult",), EATT_LEAF_CASE=case
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_recip_normalize(name):
    assert _run(name, "verilator")["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
@pytest.mark.parametrize("name", ["narrow", "wide"])
def test_recip_normalize_icarus(name):
    assert _run(name, "icarus")["tests"] == 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_recip_normalize_pipelined(name):
    """PIPE = 1 (the folded engine's adder_levels): the same O, the index two clock edges after
    E and O one after N and R (rounded from N x R >>> (s - 1), no adder for the half)."""
    assert _run(name, "verilator", pipe=1)["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
def test_recip_normalize_pipelined_icarus():
    assert _run("wide", "icarus", pipe=1)["tests"] == 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_recip_normalize_pieces(name):
    """PIPE = 2 (an FPGA's clock): N and R registered beside the multipliers, N x R in pieces
    of at most 18 x 18 bits registered before their sum (one piece at "narrow", three at
    "wide"'s 54-bit product): the same O three clock edges after N and R."""
    assert _run(name, "verilator", pipe=2)["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
def test_recip_normalize_pieces_icarus():
    assert _run("wide", "icarus", pipe=2)["tests"] == 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_recip_normalize_pieces_beside(name):
    """PIPE = 3 (the folded engine's adder_levels): PIPE 2 with a register on each side of each
    piece's multiplier (piece_mult REGS 3) and the shift in two stages: the same O six clock
    edges after N and R."""
    assert _run(name, "verilator", pipe=3)["tests"] == 1
