"""What the hand-written modules' testbenches (rtl_sim/tb/) share: one stream loop for the
folded engine's pipelined leaves (folded_adder_tree, folded_proj_tile, folded_score_lane,
folded_max_tree): a new input set every cycle, each output checked `lag` cycles after its
inputs (lag 0: a combinational leaf, checked after a settle delay); and the packing of
signed fields into a port's word and back."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import cocotb
import numpy as np
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


def pack(values: Iterable[int] | np.ndarray, bits: int) -> int:
    """Fields of `bits` bits, two's complement, field 0 in the least significant bits."""
    mask, word = (1 << bits) - 1, 0
    for index, value in enumerate(np.asarray(values).reshape(-1).tolist()):
        word |= (int(value) & mask) << (index * bits)
    return word


def signed(value: int, bits: int) -> int:
    """The low `bits` bits of value, read as two's complement."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def unpack(word: int, count: int, bits: int) -> list[int]:
    """`count` signed fields of `bits` bits from a word (:func:`pack`'s order)."""
    return [signed(word >> (i * bits), bits) for i in range(count)]
