"""cocotb testbench of the alignment top (<kind>_alignment, ap_ctrl_hs handshake).

The attention top (<kind>_attention, tb/test_attention.py) has the same handshake and inputs and
one output port of another shape, which the job's interface names: both levels use CoreTB and
the tests below.

Run by eatt.rtl_sim.runner.simulate through cocotb_tools.runner; not collected by pytest. The job
file named by $EATT_TB_JOB (JSON) gives the interface (from metadata.json), the input vectors
(.npy files) and where to write results. The testbench records what the RTL produces; the
caller compares it with the golden model, so the bit-exactness check lives in one place.

Signals are driven and sampled at the falling clock edge, so every value read is settled and
every value driven is seen by the next rising edge. Cycle t is the t-th falling edge.

Tests (all write into one results JSON, read back by the runner):
  - test_latency:  one start into an idle core: latency = cycles from the cycle in which
                   ap_start is accepted (ap_ready high) to the cycle in which ap_done is high;
                   it must be the job's latency_cycles (metadata.json) when the job gives one.
  - test_reset:    a start, then reset before ap_done: no ap_done may follow, ap_idle returns.
  - test_stream:   every vector back to back (ap_start held high): outputs in order, the
                   initiation interval (cycles between accepted starts, must be 1: a start is
                   accepted while the core is busy), the first result after latency_cycles.
  - test_bubbles:  the first vectors again with random idle cycles between starts.
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
from cocotb.triggers import FallingEdge, Timer


def _job() -> dict:
    return json.loads(Path(os.environ["EATT_TB_JOB"]).read_text())


def _pack(values: np.ndarray, bits: int) -> int:
    """Flat signed elements -> one packed bus value, element 0 at the least significant bits."""
    mask = (1 << bits) - 1
    word = 0
    for index, value in enumerate(values.reshape(-1).tolist()):
        word |= (int(value) & mask) << (index * bits)
    return word


def _unpack(word: int, count: int, bits: int) -> list[int]:
    mask, sign = (1 << bits) - 1, 1 << (bits - 1)
    out = []
    for index in range(count):
        v = (word >> (index * bits)) & mask
        out.append(v - (1 << bits) if v & sign else v)
    return out


PERIOD_NS = 10


def _cycle() -> int:
    """Index of the current clock cycle, from simulation time (no race between coroutines)."""
    return int(get_sim_time("ns") // PERIOD_NS)


class CoreTB:
    """Wraps the DUT: clock, reset, the start driver and the ap_done monitor."""

    def __init__(self, dut, job: dict):
        self.dut = dut
        self.job = job
        iface = job["interface"]
        self.in_bits = iface["inputs"]["x"]["element_bits"]
        # the one output port: "s" (alignment scores) or "z" (attention outputs)
        (self.out_name, port), *_ = iface["outputs"].items()
        self.out_bits = port["element_bits"]
        self.out_count = int(np.prod(port["shape"]))
        self.out_port = getattr(dut, self.out_name)
        self.out_vld = getattr(dut, port["valid"])
        self.done_cycles: list[int] = []
        self.outputs: list[list[int]] = []
        # a masked core's per-vector inputs (the interface names them: length, offset)
        self.masks = {
            name: np.load(path) for name, path in job.get("masks", {}).items()
            if name in iface["inputs"]
        }  # fmt: skip

    async def start(self) -> None:
        """Start the clock, hold reset for 3 cycles; returns at a falling edge."""
        Clock(self.dut.ap_clk, PERIOD_NS, unit="ns").start()
        self.dut.ap_start.value = 0
        self.dut.ap_rst.value = 1
        self.dut.x.value = 0
        self.dut.y.value = 0
        for name in self.masks:
            getattr(self.dut, name).value = 0
        for _ in range(3):
            await FallingEdge(self.dut.ap_clk)
        self.dut.ap_rst.value = 0
        cocotb.start_soon(self._monitor())
        await FallingEdge(self.dut.ap_clk)

    async def _monitor(self) -> None:
        while True:
            await FallingEdge(self.dut.ap_clk)
            if int(self.dut.ap_done.value):
                assert int(self.out_vld.value) == 1, f"{self.out_name}_vld must equal ap_done"
                self.done_cycles.append(_cycle())
                word = self.out_port.value.to_unsigned()
                self.outputs.append(_unpack(word, self.out_count, self.out_bits))

    async def start_vector(self, x: np.ndarray, y: np.ndarray, n: int = 0) -> int:
        """At a falling edge: raise ap_start with vector n (x, y and, for a masked core, its
        mask inputs), wait until it is accepted (ap_ready high before a rising edge); return
        the accepting cycle. Ends at the next falling edge."""
        self.dut.x.value = _pack(x, self.in_bits)
        self.dut.y.value = _pack(y, self.in_bits)
        for name, values in self.masks.items():
            getattr(self.dut, name).value = int(values[n])
        self.dut.ap_start.value = 1
        while True:
            await Timer(1, "ns")  # let ap_ready settle after the new inputs
            ready = int(self.dut.ap_ready.value)
            cycle = _cycle()
            await FallingEdge(self.dut.ap_clk)
            if ready:
                return cycle

    async def stream(self, xs: np.ndarray, ys: np.ndarray) -> list[int]:
        """Every vector back to back (ap_start held high), then drain until each has its
        ap_done (or the limit); the accepting cycles."""
        accepted = [await self.start_vector(xs[n], ys[n], n) for n in range(len(xs))]
        await self.idle(0)
        await self.drain(len(xs), limit=len(xs) + 1000)
        assert len(self.done_cycles) == len(xs), (
            f"{len(self.done_cycles)} ap_done for {len(xs)} starts"
        )
        return accepted

    async def idle(self, cycles: int) -> None:
        self.dut.ap_start.value = 0
        for _ in range(cycles):
            await FallingEdge(self.dut.ap_clk)

    async def drain(self, expected: int, limit: int) -> None:
        for _ in range(limit):
            if len(self.done_cycles) >= expected:
                break
            await FallingEdge(self.dut.ap_clk)
        await FallingEdge(self.dut.ap_clk)  # let the monitor see the last edge


def _results_path(job: dict) -> Path:
    return Path(job["results"])


def _update_results(job: dict, **items) -> None:
    path = _results_path(job)
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update(items)
    path.write_text(json.dumps(data))


@cocotb.test()
async def test_latency(dut):
    job = _job()
    xs, ys = np.load(job["x"]), np.load(job["y"])
    tb = CoreTB(dut, job)
    await tb.start()
    assert int(dut.ap_idle.value) == 1, "ap_idle must be high after reset"
    assert int(dut.ap_done.value) == 0, "ap_done must be low after reset"
    accepted = await tb.start_vector(xs[0], ys[0])
    dut.ap_start.value = 0
    await Timer(1, "ns")
    busy = int(dut.ap_idle.value) == 0
    await tb.drain(1, limit=1000)
    assert tb.done_cycles, "no ap_done within 1000 cycles"
    latency = tb.done_cycles[0] - accepted
    assert busy or latency <= 1, "ap_idle must be low while a vector is in flight"
    stated = job.get("latency_cycles")
    assert not stated or latency == stated, f"latency {latency}, metadata says {stated}"
    await tb.idle(3)
    assert len(tb.done_cycles) == 1, "more than one ap_done for one start"
    assert int(dut.ap_idle.value) == 1, "ap_idle must return high when the core is empty"
    _update_results(job, latency_cycles=latency, latency_output=tb.outputs[0])


@cocotb.test()
async def test_reset(dut):
    job = _job()
    xs, ys = np.load(job["x"]), np.load(job["y"])
    tb = CoreTB(dut, job)
    await tb.start()
    await tb.start_vector(xs[0], ys[0])
    dut.ap_start.value = 0
    dut.ap_rst.value = 1  # reset while the vector is in flight
    await FallingEdge(dut.ap_clk)
    dut.ap_rst.value = 0
    await tb.idle(2 * job["latency_cycles"] + 4)
    assert not tb.done_cycles, "ap_done after a reset dropped the vector in flight"
    assert int(dut.ap_idle.value) == 1, "ap_idle must be high after reset"
    _update_results(job, reset_ok=True)


@cocotb.test()
async def test_stream(dut):
    job = _job()
    xs, ys = np.load(job["x"]), np.load(job["y"])
    tb = CoreTB(dut, job)
    await tb.start()
    accepted = await tb.stream(xs, ys)
    ii = int(np.diff(accepted).max()) if len(accepted) > 1 else 1
    assert ii == 1, f"initiation interval {ii}: a start must be accepted in every cycle"
    first = tb.done_cycles[0] - accepted[0]
    stated = job.get("latency_cycles")
    assert not stated or first == stated, f"stream latency {first}, metadata says {stated}"
    np.save(job["got"], np.asarray(tb.outputs, dtype=np.int64))
    _update_results(
        job,
        stream_vectors=len(xs),
        ii_cycles=ii,
        stream_cycles=tb.done_cycles[-1] - accepted[0],
        stream_latency_cycles=first,
    )


@cocotb.test()
async def test_bubbles(dut):
    job = _job()
    count = min(len(np.load(job["x"])), job.get("bubble_vectors", 32))
    xs, ys = np.load(job["x"])[:count], np.load(job["y"])[:count]
    tb = CoreTB(dut, job)
    await tb.start()
    rng = random.Random(job.get("seed", 0))
    for n in range(count):
        await tb.idle(rng.choice((0, 0, 1, 2, 3)))
        await tb.start_vector(xs[n], ys[n], n)
    await tb.idle(0)
    await tb.drain(count, limit=count * 4 + 1000)
    assert len(tb.done_cycles) == count, f"{len(tb.done_cycles)} ap_done for {count} starts"
    np.save(job["got_bubbles"], np.asarray(tb.outputs, dtype=np.int64))
    _update_results(job, bubble_vectors=count)
