"""cocotb test of a generated core behind serial_shell (eatt.rtl_sim.pnr.serial_top): the host
loads each vector's input bits over the pins, starts, waits for busy to fall and shifts the
result out; every result must equal the golden model's, packed as the core's ports pack it.
Run by test_serial_shell.py::test_wrapped_core (EATT_SERIAL_JOB: a JSON file with "pins",
"in_bits", "out_bits" and "vectors": [[input word, expected output word], ...])."""

from __future__ import annotations

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer


@cocotb.test()
async def wrapped_core(dut):
    job = json.loads(open(os.environ["EATT_SERIAL_JOB"]).read())
    pins, in_w, out_w = job["pins"], job["in_bits"], job["out_bits"]
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())

    async def cycle(**inputs: int) -> None:
        await FallingEdge(dut.clk)
        for name in ("din", "din_vld", "go", "dout_next", "rst"):
            getattr(dut, name).value = inputs.get(name, 0)
        await Timer(1, "ns")

    await cycle(rst=1)
    await cycle()
    for n, (word, want) in enumerate(job["vectors"]):
        for k in range(-(-in_w // pins)):
            await cycle(din=(word >> (k * pins)) & ((1 << pins) - 1), din_vld=1)
        await cycle(go=1)
        for _ in range(1000):
            await cycle()
            if not int(dut.busy.value):
                break
        else:
            raise AssertionError(f"vector {n}: busy never fell")
        got = 0
        for k in range(-(-out_w // pins)):
            got |= int(dut.dout.value) << (k * pins)
            await cycle(dout_next=1)
            await cycle()
        got &= (1 << out_w) - 1
        assert got == want, f"vector {n}: got {got:#x}, the golden model gives {want:#x}"
