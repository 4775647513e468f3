"""cocotb testbench of the folded top (<kind>_folded: folded_attention, AXI4-Stream in and out).

Run by eatt.rtl_sim.folded.simulate_folded through cocotb_tools.runner; not collected by
pytest. The job file named by $EATT_TB_JOB (JSON) gives the interface and parameters (from
metadata.json), the input vectors (.npy files), the cycles the metadata promises and where to
write results. The testbench records what the RTL produces; the caller compares every output
with GoldenCore.forward (eatt.rtl_sim.folded), so the bit-exactness check lives in one place.

The streams are driven by cocotbext-axi: an AxiStreamSource on s_axis (one beat per frame
element: byte_size is the whole tdata) and an AxiStreamSink on m_axis, with random pauses on
both sides in the stall test. A monitor records the cycle of each frame's first beat on both
streams, at the falling edge, where the handshake of the next rising edge is settled (a beat:
tvalid and tready both high); between frames it waits on value changes, not on every cycle.

Tests (all write into one results JSON, read back by the runner):
  - test_stream:  every vector back to back, no pause on either side: the outputs in order;
                  the cycle of each vector's first input beat and first output beat, relative
                  to the first vector's first input beat, must equal the job's schedule
                  (folded_schedule: the overlapped phases' hand-over); II = the gap between
                  the last two vectors' first input beats. At least the job's timing_vectors
                  are streamed (the vectors again, their outputs not kept), so that the
                  stream has settled on its II.
  - test_stalls:  the first vectors again with random pauses on s_axis and m_axis.
  - test_reset:   reset in the middle of a vector's computation, then one clean vector, alone
                  in the engine: latency = its first input beat -> first output beat, the
                  job's latency_cycles.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

PERIOD_NS = 10


def _job() -> dict:
    return json.loads(Path(os.environ["EATT_TB_JOB"]).read_text())


def _update_results(job: dict, **items) -> None:
    path = Path(job["results"])
    results = json.loads(path.read_text()) if path.exists() else {}
    results.update(items)
    path.write_text(json.dumps(results))


def pack_beats(tokens: np.ndarray, simd: int, bits: int) -> list[int]:
    """(count, dim) signed codes -> count * dim / simd beats, simd elements each, element t of
    a beat at [t*bits +: bits]."""
    mask = (1 << bits) - 1
    beats = []
    for chunk in tokens.reshape(-1, simd).tolist():
        word = 0
        for t, value in enumerate(chunk):
            word |= (int(value) & mask) << (t * bits)
        beats.append(word)
    return beats


def unpack_beats(beats: list[int], simd: int, bits: int) -> list[int]:
    mask, sign = (1 << bits) - 1, 1 << (bits - 1)
    out = []
    for word in beats:
        for t in range(simd):
            v = (int(word) >> (t * bits)) & mask
            out.append(v - (1 << bits) if v & sign else v)
    return out


class FoldedTB:
    """Wraps the DUT: clock, reset, the AXI4-Stream source and sink, the beat monitor."""

    def __init__(self, dut, job: dict):
        self.dut = dut
        self.job = job
        p = job["parameters"]
        self.p = p
        self.simd = p["SIMD"]
        self.x = np.load(job["x"])
        self.y = np.load(job["y"])
        self.masks = {name: np.load(path) for name, path in job["masks"].items()}
        self.in_beats = job["interface"]["inputs"]["s_axis"]["beats"]
        self.out_beats = job["interface"]["outputs"]["m_axis"]["beats"]
        in_w, out_w = p["SIMD"] * p["IN_W"], p["SIMD"] * p["OUT_W"]
        self.source = AxiStreamSource(
            AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst, byte_size=in_w
        )
        self.sink = AxiStreamSink(
            AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst, byte_size=out_w
        )
        self.in_cycles: list[int] = []  # cycle of each vector's first input beat
        self.out_cycles: list[int] = []  # cycle of each vector's first output beat

    async def start(self) -> None:
        cocotb.start_soon(Clock(self.dut.clk, PERIOD_NS, unit="ns").start())
        await self.reset()
        cocotb.start_soon(self._monitor())

    async def reset(self) -> None:
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)

    async def _monitor(self) -> None:
        dut = self.dut
        s_axis = (dut.s_axis_tvalid, dut.s_axis_tready, self.in_beats, self.in_cycles)
        m_axis = (dut.m_axis_tvalid, dut.m_axis_tready, self.out_beats, self.out_cycles)
        cocotb.start_soon(self._first_beats(*s_axis))
        cocotb.start_soon(self._first_beats(*m_axis))

    async def _first_beats(self, valid, ready, beats: int, cycles: list[int]) -> None:
        """Record the cycle of the first beat of every frame (`beats` beats) on one stream: the
        beats are counted at the falling edge, where the handshake of the next rising edge is
        settled (a beat: tvalid and tready both high); while either is low, a value-change
        trigger, so no Python runs in the cycles without a beat."""
        count = 0
        while True:
            await FallingEdge(self.dut.clk)
            if int(valid.value) and int(ready.value):
                if count % beats == 0:
                    cycles.append(int(get_sim_time("ns") // PERIOD_NS))
                count += 1
            elif not int(valid.value):
                await RisingEdge(valid)
            else:
                await RisingEdge(ready)

    def frame(self, n: int) -> AxiStreamFrame:
        """Vector n as one frame: x then y, the mask inputs in tuser of the first beat."""
        p = self.p
        beats = pack_beats(self.x[n], self.simd, p["IN_W"])
        beats += pack_beats(self.y[n], self.simd, p["IN_W"])
        length = int(self.masks["length"][n]) if "length" in self.masks else 0
        offset = int(self.masks["offset"][n]) if "offset" in self.masks else 0
        user = [length | (offset << p["LEN_W"])] + [0] * (len(beats) - 1)
        return AxiStreamFrame(tdata=beats, tuser=user)

    async def receive(self) -> list[int]:
        frame = await self.sink.recv()
        return unpack_beats(list(frame.tdata), self.simd, self.p["OUT_W"])

    async def stream(self, count: int) -> list[list[int]]:
        """`count` vectors sent back to back (the job's in turn, again from the first past the
        last); their outputs in order. The source
        holds them all from the start: the engine takes a vector whenever a bank of its input
        memories is free (the phases overlap), while the previous ones compute."""
        for i in range(count):
            await self.source.send(self.frame(i % len(self.x)))
        return [await self.receive() for _ in range(count)]


def _pauses(seed: int, busy: float):
    rng = random.Random(seed)
    while True:
        yield rng.random() < busy


@cocotb.test()
async def test_stream(dut):
    job = _job()
    tb = FoldedTB(dut, job)
    await tb.start()
    n = len(tb.x)
    # at least timing_vectors (the job's again) so that the stream settles on its II
    outputs = await tb.stream(job["timing_vectors"])
    np.save(job["got"], np.asarray(outputs[:n], dtype=np.int64))
    firsts_in, firsts_out = tb.in_cycles, tb.out_cycles
    got = {
        "in": [c - firsts_in[0] for c in firsts_in],
        "out": [c - firsts_in[0] for c in firsts_out],
    }
    want = job["schedule"]  # None: a top around the engine (a pin wrapper's register slices)
    ii = firsts_in[-1] - firsts_in[-2]
    _update_results(
        job,
        ii_cycles=ii,
        stream_cycles=tb.out_cycles[-1] - tb.in_cycles[0] + tb.out_beats,
        schedule_match=want is None or got == want,
    )
    for side in ("in", "out") if want is not None else ():
        wrong = [i for i, (a, b) in enumerate(zip(got[side], want[side], strict=True)) if a != b]
        assert not wrong, (
            f"vector {wrong[0]}'s first {side}put beat at cycle {got[side][wrong[0]]}, "
            f"the schedule says {want[side][wrong[0]]}"
        )


@cocotb.test()
async def test_stalls(dut):
    job = _job()
    tb = FoldedTB(dut, job)
    tb.source.set_pause_generator(_pauses(job["seed"], 0.3))
    tb.sink.set_pause_generator(_pauses(job["seed"] + 1, 0.3))
    await tb.start()
    got = await tb.stream(job["bubble_vectors"])
    np.save(job["got_bubbles"], np.asarray(got, dtype=np.int64))


@cocotb.test()
async def test_reset(dut):
    job = _job()
    tb = FoldedTB(dut, job)
    await tb.start()
    await tb.source.send(tb.frame(min(1, len(tb.x) - 1)))
    await ClockCycles(dut.clk, tb.in_beats + job["latency_cycles"] // 3)
    await tb.reset()  # in the middle of the computation: the vector is dropped
    await ClockCycles(dut.clk, 2)
    assert not tb.sink.count(), "an output came out of a vector that was reset"
    assert int(dut.s_axis_tready.value) == 1, "not ready for a vector after reset"
    await tb.source.send(tb.frame(0))
    out = await tb.receive()
    # the vector was alone in the engine: its first input beat -> first output beat
    latency = tb.out_cycles[-1] - tb.in_cycles[-1]
    _update_results(job, reset_ok=True, reset_output=out, latency_cycles=latency)
    assert latency == job["latency_cycles"], (
        f"latency {latency} cycles, metadata says {job['latency_cycles']}"
    )
