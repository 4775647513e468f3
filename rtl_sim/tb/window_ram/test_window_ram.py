"""Testbench of window_ram (rtl_sim/rtl/window_ram.sv): the window unit's memory, a simple
dual-port RAM with a synchronous read.

The pytest functions at the bottom build the leaf for one (DEPTH, AB, WIDTH)
(eatt.rtl_sim.runner.run_leaf) and run the cocotb test ``random_access`` in it: RamTB fills
every row, then writes and reads at random (both ports in the same cycle, the same address
included) and compares rdata every cycle with a model: after a clock edge with re high, rdata
is the row at raddr as it was before that edge's write (read-first); without re it holds.
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

#: (DEPTH, AB, WIDTH): len_k rows, address bits, row bits (window_widths: count, V and K codes)
CASES = {"d10-w37": (10, 4, 37), "d16-w8": (16, 4, 8), "d5-w130": (5, 3, 130)}
CYCLES = 400


class RamTB:
    """Clock, the write/read driver and the read-first model of the rows."""

    def __init__(self, dut, depth: int, width: int):
        self.dut = dut
        self.depth, self.width = depth, width
        self.rows: list[int | None] = [None] * depth
        self.rdata: int | None = None  # what rdata must hold after the last edge
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())

    async def cycle(self, we: int, waddr: int, wdata: int, re: int, raddr: int) -> None:
        dut = self.dut
        await FallingEdge(dut.clk)
        if self.rdata is not None:
            assert int(dut.rdata.value) == self.rdata, f"rdata {dut.rdata.value} != {self.rdata}"
        dut.we.value, dut.waddr.value, dut.wdata.value = we, waddr, wdata
        dut.re.value, dut.raddr.value = re, raddr
        await Timer(1, "ns")
        if re:
            self.rdata = self.rows[raddr]
        if we:
            self.rows[waddr] = wdata


@cocotb.test()
async def random_access(dut):
    depth, width = int(os.environ["EATT_LEAF_DEPTH"]), int(os.environ["EATT_LEAF_WIDTH"])
    tb = RamTB(dut, depth, width)
    rng = random.Random(1)
    for row in range(depth):  # every row written once (rows are not reset)
        await tb.cycle(1, row, rng.getrandbits(width), 0, 0)
    for _ in range(CYCLES):
        await tb.cycle(
            int(rng.random() < 0.4),
            rng.randrange(depth),
            rng.getrandbits(width),
            int(rng.random() < 0.7),
            rng.randrange(depth),
        )
    await tb.cycle(0, 0, 0, 0, 0)  # the last read is checked


# -- the pytest side ------------------------------------------------------------------------------
pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def _run(name: str, simulator: str) -> dict:
    depth, ab, width = CASES[name]
    params = {"DEPTH": depth, "AB": ab, "WIDTH": width}
    env = {"EATT_LEAF_DEPTH": str(depth), "EATT_LEAF_WIDTH": str(width)}
    return run_leaf(__file__, "window_ram", params, simulator, **env)


@pytest.mark.parametrize("name", sorted(CASES))
def test_window_ram(name):
    assert _run(name, "verilator")["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
def test_window_ram_icarus():
    assert _run("d10-w37", "icarus")["tests"] == 1
