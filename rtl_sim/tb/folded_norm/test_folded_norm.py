"""Testbench of folded_norm (rtl_sim/rtl/folded_norm.sv): the folded attention unit's O = N / E
into O's memory, read back through the walks' port.

Two halves in one file, as verilog-axis' testbenches:

- the pytest functions at the bottom build the leaf with the parameters of one config
  (eatt.rtl_sim.runner.run_leaf, cached) and run the cocotb test in it;
  ``pytest rtl_sim/tb/folded_norm`` runs them alone;
- the cocotb test ``normalize_rows`` runs inside the simulator as the attention unit drives the
  leaf: per vector (bank n mod 2), query and head, E is set, R read once (``recip_re``), then
  each chunk's KB numerator items one a cycle with random gaps, only the last block's N the
  real one (the earlier blocks' partial sums are random); E, the query, the head and the bank
  hold until the last O is written. Each vector's O is then read through a_re and must equal
  eatt.quant.golden.GoldenCore.weighted_values on the softmax weights and values whose E and N
  were driven (random, and rows at the edges: E = 1, E at its maximum, V at both ends).
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

from eatt.config import CoreConfig
from eatt.quant.golden import GoldenCore, derive_formats, matmul_int, random_weights
from eatt.rtl_sim.folded import memory_files
from eatt.rtl_sim.leaf_stream import pack, unpack
from eatt.rtl_sim.runner import run_leaf

#: parameter sets: a config (its golden formats give the widths), SIMD, key blocks, the pipeline
#: (PIPE 3, LAT 7: the engine's adder_levels) and macros (MACRO_ROWS at most the depth)
CASES = {
    "comb": dict(cfg=dict(len_q=3, len_k=4, dim=8, heads=2), SIMD=2, KB=2),
    "pipe-macro": dict(
        cfg=dict(len_q=2, len_k=6, dim=8, heads=2), SIMD=4, KB=3, PIPE=3, LAT=7, MACRO_ROWS=8
    ),
    "pipe-narrow": dict(
        cfg=dict(len_q=2, len_k=4, dim=4, heads=1, v_bits=6, qk_bits=6, out_bits=6,
                 exp_table_size=16, exp_frac=3, recip_table_size=2, recip_frac=3),
        SIMD=2, KB=4, PIPE=3, LAT=7,
    ),
}  # fmt: skip
VECTORS = 3


def case_config(name: str) -> CoreConfig:
    return CoreConfig(kind="eatt", **CASES[name]["cfg"])


def parameters(name: str) -> dict[str, int | str]:
    c, cfg = CASES[name], case_config(name)
    f = derive_formats(cfg)
    simd = c["SIMD"]
    return {
        "SIMD": simd, "LEN_Q": cfg.len_q, "DC": cfg.dim // simd, "HC": cfg.d_head // simd,
        "KB": c["KB"], "SUM_W": f.esum_bits, "NUMER_W": f.numer_bits,
        "RIDX_W": f.recip_index_bits, "RECIP_W": f.recip_bits, "RECIP_FRAC": cfg.recip_frac,
        "PROD_W": f.prod_bits, "ATTN_W": f.attn_bits, "RECIP_FILE": '"recip.mem"',
        "MACRO_ROWS": c.get("MACRO_ROWS", 32), "PIPE": c.get("PIPE", 0), "LAT": c.get("LAT", 0),
        "C_CW": max(1, (cfg.d_head // simd - 1).bit_length()),
    }  # fmt: skip


def golden_rows(cfg: CoreConfig, seed: int):
    """E (n, heads, len_q), N (n, heads, len_q, d_head) and the expected O (n, len_q, dim)."""
    golden = GoldenCore(cfg, random_weights(cfg, seed=0))
    f = golden.formats
    top = 2**cfg.exp_frac
    vmin, vmax = -(2 ** (f.v_code_bits - 1)), 2 ** (f.v_code_bits - 1) - 1
    rng = np.random.default_rng(seed)
    e = rng.integers(0, top + 1, size=(VECTORS, cfg.heads, cfg.len_q, cfg.len_k))
    e[..., 0] = top  # the max entry is EXP[0], as in the core
    v = rng.integers(vmin, vmax + 1, size=(VECTORS, cfg.len_k, cfg.dim))
    e[0, 0, 0] = np.eye(1, cfg.len_k, cfg.len_k - 1, dtype=np.int64)[0]  # E = 1
    e[1] = top  # E at its maximum
    v[1] = vmin
    v[2, :, : cfg.d_head] = vmax
    numer = matmul_int(e, golden.split_heads(v))
    return e.sum(axis=-1), numer, golden.weighted_values(e, v)


@cocotb.test()
async def normalize_rows(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    name = case["name"]
    cfg, p = case_config(name), parameters(name)
    rng = np.random.default_rng(case["seed"])
    total, numer, expected = golden_rows(cfg, case["seed"])
    simd, hc, dc, kb, nw = p["SIMD"], p["HC"], p["DC"], p["KB"], p["NUMER_W"]

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for sig in (dut.recip_re, dut.item, dut.a_re, dut.att_b, dut.post_b, dut.qi, dut.hh):
        sig.value = 0
    dut.rst.value = 1
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    for n in range(VECTORS):
        dut.att_b.value = n % 2
        for qi in range(cfg.len_q):
            for hh in range(cfg.heads):
                dut.qi.value, dut.hh.value = qi, hh
                dut.esum.value = int(total[n, hh, qi])
                for _ in range(2):  # the index follows E by two cycles (PIPE)
                    await FallingEdge(dut.clk)
                dut.recip_re.value = 1
                await FallingEdge(dut.clk)
                dut.recip_re.value = 0
                for _ in range(2):  # R read, then registered (PIPE)
                    await FallingEdge(dut.clk)
                for c in range(hc):
                    for jb in range(kb):
                        while rng.random() < 0.3:  # a gap
                            dut.item.value = 0
                            await FallingEdge(dut.clk)
                        if jb == kb - 1:
                            words = numer[n, hh, qi, c * simd : (c + 1) * simd].tolist()
                        else:  # a partial sum: not written
                            words = rng.integers(-(2 ** (nw - 1)), 2 ** (nw - 1), simd).tolist()
                        dut.item.value, dut.item_jb.value, dut.item_c.value = 1, jb, c
                        dut.numer.value = pack(words, nw)
                        await FallingEdge(dut.clk)
                dut.item.value = 0
                for _ in range(p["LAT"] + 1):  # the last O written
                    await FallingEdge(dut.clk)
        # read the vector's O back, token by token, chunk by chunk
        for tok in range(cfg.len_q):
            for rc in range(dc):
                dut.post_b.value, dut.a_re.value = n % 2, 1
                dut.a_rd_tok.value, dut.a_rd_rc.value = tok, rc
                await FallingEdge(dut.clk)
                dut.a_re.value = 0
                await Timer(1, unit="ns")
                got = unpack(int(dut.a_word.value), simd, p["ATTN_W"])
                want = expected[n, tok, rc * simd : (rc + 1) * simd].tolist()
                assert got == want, f"vector {n} token {tok} chunk {rc}: {got} != {want}"


pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None
LEAVES = ("folded_ram", "folded_rom", "folded_macro", "recip_normalize", "piece_mult")


def _run(name: str, simulator: str = "verilator") -> dict:
    cfg = case_config(name)
    p = parameters(name)
    files = {"recip.mem": memory_files(cfg, random_weights(cfg, seed=0), p["SIMD"], p["SIMD"],
                                       1)["recip.mem"]}  # fmt: skip
    case = json.dumps({"name": name, "seed": 1})
    return run_leaf(__file__, "folded_norm", p, simulator, leaves=LEAVES, files=files,
                    EATT_LEAF_CASE=case)  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_folded_norm(name):
    assert _run(name)["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
def test_folded_norm_icarus():
    assert _run("pipe-macro", "icarus")["tests"] == 1
