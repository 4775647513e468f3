"""Testbenches of serial_shell (rtl_sim/rtl/serial_shell.sv): the serial load / shift-out wrapper
that lets a wide core be placed with few pins (docs/pnr.md "Wrapper").

The cocotb test ``round_trips`` puts a model core behind the shell: it accepts a start like an
ap_ctrl_hs core (core_ready = core_start), samples core_in in that cycle, and LATENCY cycles
later raises core_done for one cycle with core_out = f(core_in), f a fixed pseudo-random function
of all IN_W input bits. The host loads random vectors chunk by chunk (random gaps between the
chunks, a reset now and then), starts, waits for busy to fall and shifts the result out: every
vector's result must be f(vector), bit for bit, and the core must see exactly the vector sent.
So the shell transports every input bit to the core and every output bit back, and changes
nothing in between: the wrapped core computes what the core computes.

``test_wrapped_core`` checks the same on real cores: the top that eatt.rtl_sim.pnr generates
(serial_top: a tiny E-ATT or dot alignment core behind the shell, 8 pins) simulated in
Verilator (wrapped_core.py beside this file), every result equal to the golden model's.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer

from eatt.config import CoreConfig
from eatt.quant.golden import GoldenCore, edge_inputs, random_inputs, random_weights
from eatt.rtl_sim.generate import generate_rtl, load_metadata
from eatt.rtl_sim.leaf_stream import pack
from eatt.rtl_sim.pnr import serial_top
from eatt.rtl_sim.runner import _cocotb_build, _cocotb_test, _sim_environ, run_leaf

# name -> (IN_W, OUT_W, PINS, LATENCY)
CASES = {
    "ragged": (19, 13, 4, 2),  # neither width a multiple of the pins
    "one_chunk": (8, 8, 8, 1),
    "wide": (150, 70, 8, 3),
}
VECTORS = 40
SHELL_SV = Path(__file__).resolve().parents[2] / "rtl" / "serial_shell.sv"


def model(core_in: int, out_w: int) -> int:
    return random.Random(core_in).getrandbits(out_w)


class ShellTB:
    def __init__(self, dut, in_w: int, out_w: int, pins: int, latency: int):
        self.dut, self.in_w, self.out_w, self.pins, self.latency = dut, in_w, out_w, pins, latency
        self.seen: list[int] = []  # core_in at each accepted start
        self.pending: list[tuple[int, int]] = []  # (cycles left, result)
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        for name in ("din", "din_vld", "go", "dout_next", "core_done", "core_out", "rst"):
            getattr(dut, name).value = 0

    async def cycle(self, **inputs: int) -> None:
        """One clock cycle: the host's inputs and the model core's outputs change after the
        falling edge; the core's start is read 1 ns later (before the rising edge)."""
        dut = self.dut
        await FallingEdge(dut.clk)
        for name in ("din", "din_vld", "go", "dout_next", "rst"):
            getattr(dut, name).value = inputs.get(name, 0)
        done = [r for left, r in self.pending if left == 0]
        self.pending = [(left - 1, r) for left, r in self.pending if left > 0]
        dut.core_done.value = int(bool(done))
        dut.core_out.value = done[0] if done else random.getrandbits(self.out_w)
        await Timer(1, "ns")
        if inputs.get("rst", 0):  # core_start is unknown until the reset's edge (Icarus: X)
            dut.core_ready.value = 0
            return
        start = int(dut.core_start.value)
        dut.core_ready.value = start
        if start:
            core_in = int(dut.core_in.value)
            self.seen.append(core_in)
            self.pending.append((self.latency - 1, model(core_in, self.out_w)))

    async def load(self, vector: int, rng: random.Random) -> None:
        chunks = -(-self.in_w // self.pins)
        for k in range(chunks):
            while rng.random() < 0.3:
                await self.cycle()
            await self.cycle(din=(vector >> (k * self.pins)) & ((1 << self.pins) - 1), din_vld=1)

    async def run(self, vector: int, rng: random.Random) -> int:
        await self.load(vector, rng)
        await self.cycle(go=1)
        waited = 0
        while True:
            await self.cycle()
            if not int(self.dut.busy.value):
                break
            waited += 1
            assert waited < 10 * self.latency + 10, "busy never fell"
        result = 0
        for k in range(-(-self.out_w // self.pins)):
            result |= int(self.dut.dout.value) << (k * self.pins)
            await self.cycle(dout_next=1)  # the shift happens at this cycle's rising edge,
            await self.cycle()  # so dout is read again one cycle later
        return result & ((1 << self.out_w) - 1)


@cocotb.test()
async def round_trips(dut):
    """Random vectors through shell + model core: the result is the core's, bit for bit."""
    in_w, out_w, pins, latency = (int(v) for v in os.environ["EATT_LEAF_CASE"].split(","))
    tb = ShellTB(dut, in_w, out_w, pins, latency)
    rng = random.Random(7)
    await tb.cycle(rst=1)
    edge = [0, (1 << in_w) - 1, 1, 1 << (in_w - 1)]
    for n in range(VECTORS):
        vector = edge[n] if n < len(edge) else rng.getrandbits(in_w)
        if rng.random() < 0.1:
            await tb.cycle(rst=1)
        got = await tb.run(vector, rng)
        assert tb.seen[-1] == vector, f"vector {n}: the core saw {tb.seen[-1]:#x}, sent {vector:#x}"
        want = model(vector, out_w)
        assert got == want, f"vector {n} ({vector:#x}): got {got:#x}, the core gave {want:#x}"
    assert len(tb.seen) == VECTORS  # one start per vector


# -- the pytest side ------------------------------------------------------------------------------
pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def _run(name: str, simulator: str) -> dict:
    in_w, out_w, pins, latency = CASES[name]
    return run_leaf(
        __file__,
        "serial_shell",
        {"IN_W": in_w, "OUT_W": out_w, "PINS": pins},
        simulator,
        EATT_LEAF_CASE=f"{in_w},{out_w},{pins},{latency}",
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_serial_shell(name):
    assert _run(name, "verilator")["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
def test_serial_shell_icarus():
    assert _run("ragged", "icarus")["tests"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["eatt", "vanilla"])
def test_wrapped_core(tmp_path, kind):
    """A generated core behind the shell, as `eatt pnr --wrapper` places it, computes the golden
    model's scores: the edge vectors and 20 random ones."""
    from cocotb_tools.runner import get_results

    cfg = CoreConfig.from_dict(dict(kind=kind, len_q=2, len_k=3, dim=4, heads=1))
    weights = random_weights(cfg, seed=3)
    out = tmp_path / "rtl"
    generate_rtl(cfg, weights, out)
    meta = load_metadata(out)
    name, text = serial_top(meta, pins=8)
    (out / f"{name}.sv").write_text(text)
    ex, ey = edge_inputs(cfg)
    rx, ry = random_inputs(cfg, 20, seed=1)
    x, y = [*ex, *rx], [*ey, *ry]
    s = GoldenCore(cfg, weights).alignment(x, y)
    iface = meta["interface"]
    bits, score_bits = cfg.in_bits, iface["outputs"]["s"]["element_bits"]
    x_width = iface["inputs"]["x"]["width"]
    vectors = [
        [pack(x[n], bits) | pack(y[n], bits) << x_width, pack(s[n], score_bits)]
        for n in range(len(x))
    ]
    in_bits = sum(v["width"] for v in iface["inputs"].values())
    job = {"pins": 8, "in_bits": in_bits, "out_bits": iface["outputs"]["s"]["width"]}
    (tmp_path / "job.json").write_text(json.dumps({**job, "vectors": vectors}))
    sources = [out / f for f in meta["sources"]] + [SHELL_SV, out / f"{name}.sv"]
    bdir = tmp_path / "build"
    bdir.mkdir()
    _cocotb_build("verilator", sources, name, bdir)
    run = tmp_path / "run"
    run.mkdir()
    with _sim_environ(
        "verilator", Path(__file__).parent, EATT_SERIAL_JOB=str(tmp_path / "job.json")
    ):
        xml = _cocotb_test("verilator", "wrapped_core", name, bdir, run, 0, run / "sim.log")
    total, failed = get_results(xml)
    assert total == 1 and failed == 0, (run / "sim.log").read_text()[-3000:]
