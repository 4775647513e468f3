"""Testbench of ap_pipe_ctrl (rtl_sim/rtl/ap_pipe_ctrl.sv): the ap_ctrl_hs handshake of a
fixed-latency pipeline.

The pytest functions at the bottom build the leaf for one LATENCY (eatt.rtl_sim.runner.run_leaf)
and run the cocotb test ``handshake_random`` in it: PipeCtrlTB drives ap_start and ap_rst at
random for a few hundred cycles (long runs of starts, gaps, resets mid-flight) and compares every
output, every cycle, with a small model of the protocol (docs/rtl.md "Interface"):

- ap_ready = ap_start and not ap_rst (II 1, never stalls);
- ap_done is high exactly LATENCY cycles after each accepted start, unless a reset came between;
- stage_en[k] is high when the vector accepted k cycles ago is still live;
- ap_idle = no start and nothing in flight.
"""

from __future__ import annotations

import os
import random
import shutil

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer

from eatt.rtl_sim.runner import run_leaf

CASES = {"latency1": 1, "latency2": 2, "latency6": 6}
CYCLES = 600


class PipeCtrlModel:
    """The protocol: the ages of the live vectors (cycles since each was accepted)."""

    def __init__(self, latency: int):
        self.latency = latency
        self.live: list[int] = []  # ages of the vectors in flight, after the last clock edge

    def outputs(self, start: int, rst: int) -> dict[str, int]:
        """What the outputs must be in this cycle, before its clock edge."""
        accept = int(bool(start) and not rst)
        en = accept | sum(1 << (age + 1) for age in self.live if age + 1 < self.latency)
        return {
            "ap_ready": accept,
            "ap_done": int(self.latency - 1 in self.live),
            "ap_idle": int(not start and not self.live),
            "stage_en": en,
        }

    def clock(self, start: int, rst: int) -> None:
        if rst:
            self.live = []
            return
        aged = [age + 1 for age in self.live if age + 1 < self.latency]
        self.live = ([0] if start else []) + aged


class PipeCtrlTB:
    """Clock, reset, the start/reset driver and the per-cycle check against PipeCtrlModel.

    Inputs change just after a falling edge; the outputs are read 1 ns later (settled, before
    the rising edge that acts on them)."""

    def __init__(self, dut, latency: int):
        self.dut = dut
        self.model = PipeCtrlModel(latency)
        self.cycles = 0
        cocotb.start_soon(Clock(dut.ap_clk, 10, unit="ns").start())

    async def cycle(self, start: int, rst: int) -> None:
        dut = self.dut
        await FallingEdge(dut.ap_clk)
        dut.ap_start.value = start
        dut.ap_rst.value = rst
        await Timer(1, "ns")
        if self.cycles:  # the first cycle's outputs are unknown until the reset's edge
            want = self.model.outputs(start, rst)
            got = {name: int(getattr(dut, name).value) for name in want}
            assert got == want, f"cycle {self.cycles} (start {start}, rst {rst}): {got} != {want}"
        self.model.clock(start, rst)
        self.cycles += 1


@cocotb.test()
async def handshake_random(dut):
    """Random starts and resets: every output, every cycle, equals the model's."""
    tb = PipeCtrlTB(dut, int(os.environ["EATT_LEAF_LATENCY"]))
    rng = random.Random(1)
    await tb.cycle(0, 1)
    await tb.cycle(0, 0)
    mode = "burst"
    for _ in range(CYCLES):
        if rng.random() < 0.05:
            mode = rng.choice(["burst", "gaps", "idle"])
        start = {"burst": 1, "gaps": int(rng.random() < 0.5), "idle": 0}[mode]
        await tb.cycle(start, int(rng.random() < 0.02))


# -- the pytest side ------------------------------------------------------------------------------
pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def _run(name: str, simulator: str) -> dict:
    latency = CASES[name]
    return run_leaf(
        __file__,
        "ap_pipe_ctrl",
        {"LATENCY": latency},
        simulator,
        EATT_LEAF_LATENCY=str(latency),
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_ap_pipe_ctrl(name):
    assert _run(name, "verilator")["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
def test_ap_pipe_ctrl_icarus():
    assert _run("latency2", "icarus")["tests"] == 1
