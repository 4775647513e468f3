"""Testbench of folded_attend (rtl_sim/rtl/folded_attend.sv): the folded engine's attention
unit alone: its Q, K, V memories (two banks), the score lanes, the softmax and O = N / E.

Two halves in one file, as verilog-axis' testbenches:

- the pytest functions at the bottom build the unit for one config and folding (the engine's
  parameters, eatt.rtl_sim.folded.folded_parameters; its score ROM and softmax tables as the
  engine's $readmemh files) with its leaves (eatt.rtl_sim.runner.run_leaf, cached) and run the
  cocotb test in it; ``pytest rtl_sim/tb/folded_attend`` runs them alone;
- the cocotb test ``attend_vectors`` runs inside the simulator: it writes two vectors' Q, K
  (Dense: the hidden layer H; RandInit: neither) and V codes from the golden model
  (eatt.quant.golden.GoldenCore.forward's intermediates) into the two banks through the
  walks' write ports, chunk by chunk as the walks do, then starts each bank in turn with its
  mask inputs, counts the cycles from the edge that takes `ready` to the end of `done`'s
  cycle (the attention phase of eatt.rtl_sim.folding.folded_cycles) and reads O back
  through the post pass's read port, every word equal to the golden model's attention
  output (``attn``).
  Edge vectors first (every length and offset among them), then random ones.
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
from eatt.quant.golden import GoldenCore, random_weights
from eatt.quant.stimuli import edge_inputs, edge_masks, random_inputs, random_masks
from eatt.rtl_sim.folded import folded_parameters, mem_files, memory_files
from eatt.rtl_sim.folding import folded_cycles
from eatt.rtl_sim.leaf_stream import pack, unpack
from eatt.rtl_sim.runner import run_leaf

K, V, Q = 0, 1, 2  # the walks' passes (folded_proj_walk.sv PASS_*)
SMALL = dict(len_q=3, len_k=4, dim=8, heads=2)
MASKED = dict(SMALL, key_padding=True, causal=True)
#: name -> (config, lanes, simd, pe, adder_levels, macro_rows): every mechanism, masks,
#: pe < simd (V in pieces), the pipelined unit, and memories as macros
CASES = {
    "eatt-masked-l2-s4-pe1": (dict(kind="eatt", **MASKED), 2, 4, 1, 0, 32),
    "eatt-l2-s2-macros": (dict(kind="eatt", **SMALL), 2, 2, 2, 0, 2),
    "vanilla-masked-l1-s4-levels2": (dict(kind="vanilla", **MASKED), 1, 4, 4, 2, 32),
    "dense-masked-l2-s2": (dict(kind="dense", **MASKED), 2, 2, 2, 0, 32),
    "dense-l4-s4-levels1": (dict(kind="dense", **SMALL), 4, 4, 4, 1, 32),
    "randinit-masked-l2-s2-levels1": (dict(kind="randinit", **MASKED), 2, 2, 2, 1, 32),
    "eatt-masked-l4-s2-levels1": (dict(kind="eatt", **MASKED), 4, 2, 1, 1, 32),
}
#: the unit's parameters among the engine's (folded_attention.sv passes them on)
UNIT_PARAMS = (
    "SCORE LEN_Q LEN_K DIM HEADS LANES SIMD PE W_W QK_W V_W SCORE_W EXP_SHIFT EXP_SIZE EXP_W "
    "SUM_W NUMER_W RIDX_W RECIP_W RECIP_FRAC PROD_W ATTN_W KEY_PADDING CAUSAL LEN_W OFF_W SC "
    "LANE_TERMS"
).split()
VECTORS = 8  # random ones, after the edge vectors


def setup(name: str, seed: int) -> dict:
    """The config, folding, weights, the vectors' inputs and masks, and the golden stages."""
    config, lanes, simd, pe, levels, macro_rows = CASES[name]
    cfg = CoreConfig.from_dict(config)
    weights = random_weights(cfg, seed=seed)
    ex, ey = edge_inputs(cfg)
    count = VECTORS + (len(ex) + VECTORS) % 2  # an even count: two banks at a time
    rx, ry = random_inputs(cfg, count, seed=seed)
    x, y = np.concatenate([ex, rx]), np.concatenate([ey, ry])
    edge, rand = edge_masks(cfg, len(ex)), random_masks(cfg, count, seed)
    masks = {k: np.concatenate([edge[k], rand[k]]) for k in edge}
    stages = GoldenCore(cfg, weights).forward(x, y, intermediates=True, masks=masks)
    return dict(
        cfg=cfg, weights=weights, lanes=lanes, simd=simd, pe=pe, levels=levels,
        macro_rows=macro_rows, masks=masks, stages=stages, n=len(x),
    )  # fmt: skip


def parameters(s: dict) -> dict:
    cfg = s["cfg"]
    engine = folded_parameters(cfg, s["lanes"], s["simd"], s["pe"])
    files = mem_files(cfg)
    p = {k: engine[k] for k in UNIT_PARAMS}
    p.update({k: f'"{files[k]}"' for k in ("EXP_FILE", "RECIP_FILE", "WS_FILE") if k in files})
    return dict(p, MACRO_ROWS=s["macro_rows"], ADDER_LEVELS=s["levels"])


class AttendTB:
    def __init__(self, dut, s: dict, p: dict):
        self.dut, self.s, self.p = dut, s, p
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())

    async def reset(self) -> None:
        dut = self.dut
        for port in ("ready", "att_b", "length", "offset", "pre_b", "qk_valid", "vo_valid",
                     "post_b", "a_re", "a_rd_tok", "a_rd_rc"):  # fmt: skip
            getattr(dut, port).value = 0
        dut.rst.value = 1
        for _ in range(3):
            await FallingEdge(self.dut.clk)
        dut.rst.value = 0

    async def write(self, n: int, bank: int) -> None:
        """Vector n's chunks into bank `bank`, one a cycle: K and Q (or H) SIMD wide, V in
        pieces of the multiply walk's columns."""
        dut, p, st = self.dut, self.p, self.s["stages"]
        simd, lanes = p["SIMD"], p["LANES"]
        cols = p["PE"] if p["SCORE"] == 0 else simd
        dc = p["DIM"] // simd
        dut.pre_b.value = bank
        writes = []
        q = st["q"] if "q" in st else st.get("hidden")  # Dense: H in Q's place
        for pas, codes, tokens in ((K, st.get("k"), p["LEN_K"]), (Q, q, p["LEN_Q"])):
            if codes is not None:
                writes += [
                    ("qk", pas, t, cc, 0, codes[n][t]) for t in range(tokens) for cc in range(dc)
                ]
        writes += [
            ("vo", V, j, cc, sub, st["v"][n][j])
            for j in range(p["LEN_K"])
            for cc in range(dc)
            for sub in range(simd // cols)
        ]
        for port, pas, tok, cc, sub, row in writes:
            await FallingEdge(dut.clk)
            dut.qk_valid.value, dut.vo_valid.value = int(port == "qk"), int(port == "vo")
            if port == "qk":
                dut.qk_pass.value, dut.qk_tok.value, dut.qk_cc.value = pas, tok, cc
                dut.qk_lane.value, dut.qk_blk.value = tok % lanes, tok // lanes
                dut.qk_code.value = pack(row[cc * simd : (cc + 1) * simd], p["QK_W"])
            else:
                dut.vo_pass.value, dut.vo_cc.value, dut.vo_sub.value = pas, cc, sub
                dut.vo_lane.value, dut.vo_blk.value = tok % lanes, tok // lanes
                lo = cc * simd + sub * cols
                dut.v_code.value = pack(row[lo : lo + cols], p["V_W"])
        await FallingEdge(dut.clk)
        dut.qk_valid.value, dut.vo_valid.value = 0, 0

    async def attend(self, n: int, bank: int) -> int:
        """Start bank `bank` with vector n's masks; its cycles from `ready` to `done`."""
        dut, masks, p = self.dut, self.s["masks"], self.p
        dut.att_b.value = bank
        dut.length.value = int(masks["length"][n]) if "length" in masks else p["LEN_K"]
        dut.offset.value = int(masks["offset"][n]) if "offset" in masks else 0
        dut.ready.value = 1
        cycles = 0
        while True:
            await FallingEdge(dut.clk)
            dut.ready.value = 0
            cycles += 1
            if int(dut.done.value):
                return cycles
            assert cycles < 100_000, "no done"

    async def read(self, n: int, bank: int) -> None:
        """O of bank `bank` word by word (a synchronous read: the word a cycle later)."""
        dut, p = self.dut, self.p
        simd, dc = p["SIMD"], p["DIM"] // p["SIMD"]
        attn = self.s["stages"]["attn"][n]
        dut.post_b.value = bank
        for i in range(p["LEN_Q"]):
            for rc in range(dc):
                dut.a_re.value, dut.a_rd_tok.value, dut.a_rd_rc.value = 1, i, rc
                await FallingEdge(dut.clk)
                dut.a_re.value = 0
                await Timer(1, "ns")
                got = unpack(int(dut.a_word.value), simd, p["ATTN_W"])
                want = [int(v) for v in attn[i][rc * simd : (rc + 1) * simd]]
                assert got == want, f"vector {n}, token {i}, chunk {rc}: {got} != {want}"


@cocotb.test()
async def attend_vectors(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    s = setup(case["name"], case["seed"])
    tb = AttendTB(dut, s, parameters(s))
    cycles = folded_cycles(s["cfg"], s["lanes"], s["simd"], s["pe"], s["levels"])["attention"]
    await tb.reset()
    for n in range(0, s["n"], 2):  # two vectors in the two banks, then each computed and read
        await tb.write(n, 0)
        await tb.write(n + 1, 1)
        for bank in (0, 1):
            got = await tb.attend(n + bank, bank)
            assert got == cycles, f"vector {n + bank}: {got} cycles, not {cycles}"
            await tb.read(n + bank, bank)


# -- the pytest side ------------------------------------------------------------------------------
pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None
LEAVES = (
    "folded_v_banks",
    "folded_norm",
    "folded_scores_qk",
    "folded_scores_dense",
    "folded_scores_randinit",
    "folded_ram",
    "folded_rom",
    "folded_macro",
    "folded_score_lane",
    "folded_adder_tree",
    "folded_max_tree",
    "folded_numer",
    "recip_normalize",
    "piece_mult",
)


def _run(name: str, simulator: str) -> dict:
    seed = 2
    s = setup(name, seed)
    files = memory_files(s["cfg"], s["weights"], s["simd"], s["pe"], s["lanes"])
    case = json.dumps({"name": name, "seed": seed})
    return run_leaf(
        __file__, "folded_attend", parameters(s), simulator, leaves=LEAVES, files=files,
        EATT_LEAF_CASE=case,
    )  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_folded_attend(name):
    assert _run(name, "verilator")["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
@pytest.mark.parametrize("name", ["eatt-masked-l2-s4-pe1", "randinit-masked-l2-s2-levels1"])
def test_folded_attend_icarus(name):
    assert _run(name, "icarus")["tests"] == 1
