"""cocotb testbench of the windowed attention unit (window_attention, ap_ctrl_hs handshake).

Run by eatt.rtl_sim.window.simulate_window through cocotb_tools.runner; not collected by
pytest. The job file named by $EATT_TB_JOB (JSON) gives the interface (metadata.json), the
steps and memories (.npz) and where to write results; steps come in groups that share one
memory (a decoder's steps over one sentence). The testbench records what the RTL produces and
when; the caller compares every output with eatt.quant.window.WindowGolden (O, and with
position flexible the focus F after O's elements).

Signals are driven and sampled at the falling clock edge (as tb/test_alignment.py).

Tests (all write into one results JSON):
  - test_latency:  load memory 0, one step into an idle unit: cycles ap_start accepted -> ap_done.
  - test_reset:    a step, reset two cycles later: no ap_done may follow, ap_idle returns; then
                   the same step again must give the right output.
  - test_stream:   per memory: wait for ap_idle, load the memory through the write port, then
                   its steps back to back (ap_start held): per-step latency and start interval.
  - test_bubbles:  the first steps again with random idle cycles between starts.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer
from test_alignment import PERIOD_NS, _cycle, _pack, _unpack


def _job() -> dict:
    return json.loads(Path(os.environ["EATT_TB_JOB"]).read_text())


def _update_results(job: dict, **items) -> None:
    path = Path(job["results"])
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update(items)
    path.write_text(json.dumps(data))


class WindowTB:
    """Clock, reset, memory loader, step driver and the ap_done monitor."""

    def __init__(self, dut, job: dict):
        self.dut = dut
        self.job = job
        iface = job["interface"]
        self.widths = iface["widths"]
        self.has_g = "g" in iface["inputs"]
        self.out_bits = iface["outputs"]["o"]["element_bits"]
        self.dim = iface["outputs"]["o"]["shape"][0]
        # Flexible's focus F (unsigned rows, one per head), recorded after O's elements
        focus = iface["outputs"].get("f")
        self.focus = None if focus is None else (focus["shape"][0], focus["element_bits"])
        data = np.load(job["data"])
        self.data = {name: data[name] for name in data.files}
        self.done_cycles: list[int] = []
        self.outputs: list[list[int]] = []

    async def start(self) -> None:
        Clock(self.dut.ap_clk, PERIOD_NS, unit="ns").start()
        dut = self.dut
        dut.ap_start.value = 0
        dut.ap_rst.value = 1
        for name in ("x", "p", "w", "len", "mem_we", "mem_addr", "mem_k", "mem_v", "mem_cnt"):
            getattr(dut, name).value = 0
        dut.len.value = 1
        if self.has_g:
            dut.g.value = 0
        for _ in range(3):
            await FallingEdge(dut.ap_clk)
        dut.ap_rst.value = 0
        cocotb.start_soon(self._monitor())
        await FallingEdge(dut.ap_clk)

    async def _monitor(self) -> None:
        while True:
            await FallingEdge(self.dut.ap_clk)
            if int(self.dut.ap_done.value):
                assert int(self.dut.o_vld.value) == 1, "o_vld must equal ap_done"
                self.done_cycles.append(_cycle())
                word = self.dut.o.value.to_unsigned()
                row = _unpack(word, self.dim, self.out_bits)
                if self.focus is not None:
                    heads, bits = self.focus
                    f = self.dut.f.value.to_unsigned()
                    row += [(f >> (h * bits)) & ((1 << bits) - 1) for h in range(heads)]
                self.outputs.append(row)

    async def wait_idle(self, limit: int = 10000) -> None:
        self.dut.ap_start.value = 0
        for _ in range(limit):
            await Timer(1, "ns")
            if int(self.dut.ap_idle.value):
                return
            await FallingEdge(self.dut.ap_clk)
        raise AssertionError(f"ap_idle not high within {limit} cycles")

    async def load(self, group: int) -> None:
        """Write every row of memory `group` through the write port, one row per cycle."""
        dut, d, w = self.dut, self.data, self.widths
        for row in range(d["keys"].shape[1]):
            dut.mem_we.value = 1
            dut.mem_addr.value = row
            dut.mem_k.value = _pack(d["keys"][group, row], w["qk_bits"])
            dut.mem_v.value = _pack(d["values"][group, row], w["v_bits"])
            dut.mem_cnt.value = int(d["counts"][group, row])
            await FallingEdge(dut.ap_clk)
        dut.mem_we.value = 0

    async def start_step(self, i: int) -> int:
        """Raise ap_start with step i until accepted; return the accepting cycle."""
        dut, d = self.dut, self.data
        dut.x.value = _pack(d["x"][i], self.widths["in_bits"])
        dut.p.value = int(d["p"][i])
        dut.w.value = int(d["w"][i])
        dut.len.value = int(d["length"][d["group"][i]])
        if self.has_g:
            dut.g.value = int(d["g"][i])
        dut.ap_start.value = 1
        while True:
            await Timer(1, "ns")
            ready = int(dut.ap_ready.value)
            cycle = _cycle()
            await FallingEdge(dut.ap_clk)
            if ready:
                return cycle

    async def drain(self, expected: int, limit: int) -> None:
        self.dut.ap_start.value = 0
        for _ in range(limit):
            if len(self.done_cycles) >= expected:
                break
            await FallingEdge(self.dut.ap_clk)
        await FallingEdge(self.dut.ap_clk)


def _limit(job: dict) -> int:
    return 4 * job["latency_cycles_max"] + 50


@cocotb.test()
async def test_latency(dut):
    job = _job()
    tb = WindowTB(dut, job)
    await tb.start()
    assert int(dut.ap_idle.value) == 1, "ap_idle must be high after reset"
    await tb.load(int(tb.data["group"][0]))
    accepted = await tb.start_step(0)
    dut.ap_start.value = 0
    await Timer(1, "ns")
    busy = int(dut.ap_idle.value) == 0
    await tb.drain(1, limit=_limit(job))
    assert tb.done_cycles, "no ap_done for one step"
    assert busy, "ap_idle must be low while a step is in flight"
    await FallingEdge(dut.ap_clk)
    assert len(tb.done_cycles) == 1, "more than one ap_done for one start"
    assert int(dut.ap_idle.value) == 1, "ap_idle must return high when the unit is empty"
    _update_results(job, latency_cycles=tb.done_cycles[0] - accepted, latency_output=tb.outputs[0])


@cocotb.test()
async def test_reset(dut):
    job = _job()
    tb = WindowTB(dut, job)
    await tb.start()
    await tb.load(int(tb.data["group"][0]))
    await tb.start_step(0)
    dut.ap_start.value = 0
    await FallingEdge(dut.ap_clk)
    dut.ap_rst.value = 1  # reset in the middle of the step
    await FallingEdge(dut.ap_clk)
    dut.ap_rst.value = 0
    for _ in range(_limit(job)):
        await FallingEdge(dut.ap_clk)
    assert not tb.done_cycles, "ap_done after a reset dropped the step in flight"
    assert int(dut.ap_idle.value) == 1, "ap_idle must be high after reset"
    # the memory survives a reset (it is RAM); the same step again must be right
    await tb.start_step(0)
    await tb.drain(1, limit=_limit(job))
    assert len(tb.done_cycles) == 1, "no ap_done for the step after the reset"
    _update_results(job, reset_ok=True, after_reset_output=tb.outputs[0])


@cocotb.test()
async def test_stream(dut):
    job = _job()
    tb = WindowTB(dut, job)
    await tb.start()
    group = tb.data["group"]
    accepted = []
    for g in np.unique(group):
        await tb.wait_idle()
        await tb.load(int(g))
        for i in np.flatnonzero(group == g):
            accepted.append(await tb.start_step(int(i)))
        dut.ap_start.value = 0
    n = len(group)
    await tb.drain(n, limit=n * _limit(job))
    assert len(tb.done_cycles) == n, f"{len(tb.done_cycles)} ap_done for {n} starts"
    np.save(job["got"], np.asarray(tb.outputs, dtype=np.int64))
    _update_results(job, accepted=accepted, done=tb.done_cycles)


@cocotb.test()
async def test_bubbles(dut):
    job = _job()
    tb = WindowTB(dut, job)
    group = tb.data["group"]
    count = min(len(group), job["bubble_vectors"])
    await tb.start()
    rng = random.Random(job.get("seed", 0))
    loaded = None
    for i in range(count):
        if group[i] != loaded:
            await tb.wait_idle()
            await tb.load(int(group[i]))
            loaded = group[i]
        dut.ap_start.value = 0
        for _ in range(rng.choice((0, 0, 1, 2, 5))):
            await FallingEdge(dut.ap_clk)
        await tb.start_step(i)
    await tb.drain(count, limit=count * _limit(job))
    assert len(tb.done_cycles) == count, f"{len(tb.done_cycles)} ap_done for {count} starts"
    np.save(job["got_bubbles"], np.asarray(tb.outputs, dtype=np.int64))
    _update_results(job, bubble_vectors=count)
