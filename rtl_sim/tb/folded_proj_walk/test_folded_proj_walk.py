"""Testbench of folded_proj_walk (rtl_sim/rtl/folded_proj_walk.sv): one projection datapath of
the folded engine, its weight ROMs, the folded_proj_tile leaf and the accumulators.

Two halves in one file, as verilog-axis' testbenches:

- the pytest functions at the bottom write the weight ROMs ($readmemh files, the order of
  rtl_sim/folded.py weight_tiles), build the walk with the tile leaf for one parameter set
  (eatt.rtl_sim.runner.run_leaf, cached) and run the cocotb test in it;
  ``pytest rtl_sim/tb/folded_proj_walk`` runs them alone;
- the cocotb test ``walk_vectors`` runs inside the simulator: it answers every token-chunk
  read (rd_tok, rd_rc) a cycle later from random token memories, starts the phases (start_pre,
  then start_post for a multiply walk's O pass) and compares every finished column chunk
  (wr_*) with numpy's exact integer sums, shifted and cut to the code widths, and each
  phase's cycles (the last drain cycle, with ``finishing``, included) with the walk's order: a
  multiply walk in pass, token, column chunk order, T * DC * (DIM / COLS) + DRAIN cycles a pass
  (2, more when ADDER_LEVELS pipelines it: eatt.rtl_sim.folding.walk_drain);
  the select walk's K and Q in slots (SLOTS of DC x DC tiles per key token, the Q tokens
  left after the last one).
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

from eatt.rtl_sim.folded import hex_lines, weight_tiles
from eatt.rtl_sim.folding import walk_drain
from eatt.rtl_sim.leaf_stream import pack, unpack
from eatt.rtl_sim.runner import run_leaf

K, V, Q, O = 0, 1, 2, 3  # the passes (folded_proj_walk.sv PASS_*)
FILES = {K: "wk.mem", V: "wv.mem", Q: "wq.mem", O: "wo.mem"}
_COMMON = dict(DIM=4, LEN_Q=3, LEN_K=4, LANES=2, IN_W=8, W_W=6, ATTN_W=9, ACC_W=18, TAU=-3)
_SHIFTS = dict(Q_SHIFT=3, QK_W=7, V_SHIFT=2, V_W=9, O_SHIFT=4, OUT_W=8)
#: parameter sets, as folded_attention.sv sets them: vanilla's one multiply walk (K, V, Q, then
#: O); E-ATT's multiply walk (V, then O; COLS = PE) and its select walk (K, Q; SLOTS = SIMD/PE)
CASES = {
    "vanilla-s2": dict(
        _COMMON, **_SHIFTS, SIMD=2, COLS=2, SELECT=0, N_PRE=3, PRE=0b10_01_00, POST=1, USES=15
    ),
    "eatt-multiply-s2-pe1": dict(
        _COMMON, **_SHIFTS, SIMD=2, COLS=1, SELECT=0, N_PRE=1, PRE=0b01, POST=1, USES=0b1010
    ),
    "eatt-select-s2-slots2": dict(
        _COMMON, **_SHIFTS, SIMD=2, COLS=2, SELECT=1, SLOTS=2, USES=0b0101, LEN_Q=6
    ),
    "eatt-select-s4-slots1": dict(
        _COMMON,
        **_SHIFTS,
        SIMD=4,
        COLS=4,
        SELECT=1,
        SLOTS=1,
        USES=0b0101,
        DIM=8,
        LEN_Q=2,
        LEN_K=2,
        LANES=1,
    ),
    # pipelined for a clock (the build's adder_levels): registered reads, a cut tree
    "vanilla-s4-levels1": dict(
        _COMMON,
        **_SHIFTS,
        SIMD=4,
        COLS=4,
        SELECT=0,
        N_PRE=3,
        PRE=0b10_01_00,
        POST=1,
        USES=15,
        DIM=8,
        ADDER_LEVELS=1,
    ),
    "eatt-select-s2-slots2-levels2": dict(
        _COMMON, **_SHIFTS, SIMD=2, COLS=2, SELECT=1, SLOTS=2, USES=0b0101, LEN_Q=6, ADDER_LEVELS=2
    ),
    # Dense: V, then the hidden layer relu(X W_1) in the Q pass, then O; no K
    "dense-s2-relu": dict(
        _COMMON,
        **_SHIFTS,
        SIMD=2,
        COLS=2,
        SELECT=0,
        N_PRE=2,
        PRE=0b10_01,
        POST=1,
        USES=0b1110,
        RELU=1,
    ),
}


def drain(p: dict) -> int:
    return walk_drain(p["SIMD"], p.get("ADDER_LEVELS", 0))


def _rand(rng, bits: int, shape) -> np.ndarray:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    values = rng.integers(lo, hi + 1, size=shape)
    values.flat[0], values.flat[-1] = lo, hi  # the extreme codes
    return values


def data(p: dict, seed: int) -> dict:
    """Random weights (one dim x dim matrix a pass) and token memories x, y, o."""
    rng = np.random.default_rng(seed)
    d = p["DIM"]
    return {
        "w": {n: _rand(rng, p["W_W"], (d, d)) for n in (K, V, Q, O)},
        "x": _rand(rng, p["IN_W"], (p["LEN_Q"], d)),
        "y": _rand(rng, p["IN_W"], (p["LEN_K"], d)),
        "o": _rand(rng, p["ATTN_W"], (p["LEN_Q"], d)),
    }


def memory_files(p: dict, d: dict) -> dict[str, str]:
    """The ROMs of the passes the walk uses: COLS-wide tiles (rtl_sim/folded.py weight_tiles)."""
    return {
        FILES[n]: hex_lines(weight_tiles(d["w"][n], p["SIMD"], p["COLS"]), p["W_W"])
        for n in (K, V, Q, O)
        if p["USES"] >> n & 1
    }


def _code(value: np.ndarray, shift: int, bits: int) -> list[int]:
    """(value >>> shift) cut to its low `bits` bits, read back signed (the walk's wr_* codes)."""
    v = (value >> shift) & ((1 << bits) - 1)
    return [int(c) for c in np.where(v >= 1 << (bits - 1), v - (1 << bits), v)]


def expected_chunk(p: dict, d: dict, pas: int, tok: int, col: int) -> list[int]:
    """The codes of columns col .. col + COLS - 1 of token tok in pass pas."""
    if pas == O:
        a = d["o"][tok]
    else:
        a = (d["x"] if pas == Q else d["y"])[tok]
        if p["SELECT"]:
            a = (a > p["TAU"]).astype(np.int64)  # Eq. 4, strict
    acc = a @ d["w"][pas][:, col : col + p["COLS"]]
    if pas == V:
        return _code(acc, p["V_SHIFT"], p["V_W"])
    if pas == O:
        return _code(acc, p["O_SHIFT"], p["OUT_W"])
    if pas == Q and p.get("RELU"):  # Dense's hidden layer: relu after the requantization
        return [max(c, 0) for c in _code(acc, p["Q_SHIFT"], p["QK_W"])]
    return _code(acc, p["Q_SHIFT"], p["QK_W"])


def multiply_phase(p: dict, passes: list[int]) -> tuple[list[tuple], int]:
    """A multiply walk's chunks in order (pass, token, column chunk, piece) and its cycles."""
    dc, m = p["DIM"] // p["SIMD"], p["SIMD"] // p["COLS"]
    chunks, cycles = [], 0
    for pas in passes:
        tokens = p["LEN_K"] if pas in (K, V) else p["LEN_Q"]
        chunks += [(pas, t, cc, s) for t in range(tokens) for cc in range(dc) for s in range(m)]
        cycles += tokens * dc * (p["DIM"] // p["COLS"]) + drain(p)
    return chunks, cycles


def select_phase(p: dict) -> tuple[list[tuple], int]:
    """The select walk's chunks (K of every key token, Q of every query) and its cycles."""
    dc, lq, lk = p["DIM"] // p["SIMD"], p["LEN_Q"], p["LEN_K"]
    tokens = ((K, lk), (Q, lq))
    chunks = [(pas, t, cc, 0) for pas, n in tokens for t in range(n) for cc in range(dc)]
    tail = max(0, lq - lk * (p["SLOTS"] - 1))  # the Q tokens after the last key token
    return chunks, (lk * p["SLOTS"] + tail) * dc * dc + drain(p)


class WalkTB:
    """Clock and reset; each cycle (after a falling edge): the token chunk addressed by (rd_tok,
    rd_rc) in the cycle before (the engine's memories read synchronously), then the walk's
    outputs read 1 ns later."""

    def __init__(self, dut, p: dict, d: dict):
        self.dut, self.p, self.d = dut, p, d
        self.read = (0, 0)  # the token chunk addressed in the cycle before
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())

    def _word(self, mem: str, tok: int, rc: int, bits: int) -> int:
        rows, s = self.d[mem], self.p["SIMD"]
        if tok >= len(rows):
            return 0  # a token this memory has not: the walk reads another one's
        return pack(rows[tok][rc * s : (rc + 1) * s], bits)

    async def reset(self) -> None:
        dut = self.dut
        dut.rst.value, dut.start_pre.value, dut.start_post.value = 1, 0, 0
        dut.x_word.value, dut.y_word.value, dut.o_word.value = 0, 0, 0
        for _ in range(3):
            await FallingEdge(dut.clk)
        dut.rst.value = 0

    async def cycle(self) -> dict:
        dut, p = self.dut, self.p
        await FallingEdge(dut.clk)
        tok, rc = self.read  # the address of the cycle before: a synchronous read
        dut.x_word.value = self._word("x", tok, rc, p["IN_W"])
        dut.y_word.value = self._word("y", tok, rc, p["IN_W"])
        dut.o_word.value = self._word("o", tok, rc, p["ATTN_W"])
        self.read = int(dut.rd_tok.value), int(dut.rd_rc.value)
        await Timer(1, "ns")
        out = {"finishing": int(dut.finishing.value), "valid": int(dut.wr_valid.value)}
        if out["valid"]:
            pas = int(dut.wr_pass.value)
            width, port = {V: ("V_W", "wr_v"), O: ("OUT_W", "wr_z")}.get(pas, ("QK_W", "wr_qk"))
            out["chunk"] = (pas, int(dut.wr_tok.value), int(dut.wr_cc.value))
            out["chunk"] += (int(dut.wr_sub.value),)
            out["lane"] = (int(dut.wr_lane.value), int(dut.wr_blk.value))
            codes = int(getattr(dut, port).value)
            out["codes"] = unpack(codes, p["COLS"], p[width])
        return out

    async def phase(self, start, chunks: list[tuple], cycles: int, ordered: bool) -> None:
        """Pulse `start`, then check every chunk and the cycles up to `finishing`."""
        p, d = self.p, self.d
        m = p["SIMD"] // p["COLS"]
        start.value = 1  # sampled at the next rising edge: the phase's first cycle follows it
        out = await self.cycle()
        start.value = 0
        got, n = [], 1
        while True:
            if out["valid"]:
                pas, tok, cc, sub = chunk = out["chunk"]
                got.append(chunk)
                want = expected_chunk(p, d, pas, tok, (cc * m + sub) * p["COLS"])
                assert out["codes"] == want, f"{chunk}: {out['codes']} != {want}"
                if not p["SELECT"] or pas == K:
                    lanes = p["LANES"]
                    assert out["lane"] == (tok % lanes, tok // lanes), f"{chunk}: {out['lane']}"
            if out["finishing"]:
                break
            assert n < 10 * cycles, f"no finishing after {n} cycles"
            out = await self.cycle()
            n += 1
        assert n == cycles, f"{n} cycles, not {cycles}"
        if ordered:
            assert got == chunks
        else:  # the select walk: every chunk once, each pass in token order
            assert sorted(got) == sorted(chunks)
            for pas in (K, Q):
                assert [c for c in got if c[0] == pas] == [c for c in chunks if c[0] == pas]
        for _ in range(3):  # idle: nothing written
            out = await self.cycle()
            assert not out["valid"] and not out["finishing"]


@cocotb.test()
async def walk_vectors(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    p = CASES[case["name"]]
    tb = WalkTB(dut, p, data(p, case["seed"]))
    await tb.reset()
    for _ in range(case["runs"]):  # back to back: the counters return to their start
        if p["SELECT"]:
            await tb.phase(dut.start_pre, *select_phase(p), ordered=False)
            continue
        pre = [p["PRE"] >> (2 * i) & 3 for i in range(p["N_PRE"])]
        await tb.phase(dut.start_pre, *multiply_phase(p, pre), ordered=True)
        if p["POST"]:
            await tb.phase(dut.start_post, *multiply_phase(p, [O]), ordered=True)


# -- the pytest side ------------------------------------------------------------------------------
pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def _run(name: str, simulator: str) -> dict:
    p, seed = CASES[name], 1
    case = json.dumps({"name": name, "seed": seed, "runs": 2})
    files = memory_files(p, data(p, seed))
    leaves = ("folded_proj_tile", "folded_adder_tree", "piece_mult", "folded_rom", "folded_macro")
    return run_leaf(
        __file__, "folded_proj_walk", p, simulator, leaves=leaves, files=files, EATT_LEAF_CASE=case
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_folded_proj_walk(name):
    assert _run(name, "verilator")["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
@pytest.mark.parametrize("name", ["vanilla-s2", "vanilla-s4-levels1"])
def test_folded_proj_walk_icarus(name):
    assert _run(name, "icarus")["tests"] == 1
