"""One stream loop for the folded engine's pipelined leaves' testbenches (folded_adder_tree,
folded_proj_tile, folded_score_lane): a new input set every cycle, each output checked `lag`
cycles after its inputs (lag 0: a combinational leaf, checked after a settle delay)."""

from __future__ import annotations

from collections.abc import Callable

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer


async def stream(dut, count: int, lag: int, drive: Callable[[int], None],
                 check: Callable[[int], None]) -> None:  # fmt: skip
    """drive(n) sets input set n on the pins; check(k) reads the output of set k. With a lag
    the leaf's `clk` runs and inputs change between rising edges."""
    if lag:
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        await FallingEdge(dut.clk)
    for n in range(count + lag):
        if n < count:
            drive(n)
        if lag:
            await FallingEdge(dut.clk)
        else:
            await Timer(1, "ns")
        k = n - lag + (1 if lag else 0)  # the set whose output is out now
        if 0 <= k < count:
            check(k)
