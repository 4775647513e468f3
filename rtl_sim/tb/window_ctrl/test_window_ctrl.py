"""Testbench of window_ctrl (rtl_sim/rtl/window_ctrl.sv): the window unit's handshake and
address generator.

The pytest functions at the bottom build the leaf with the widths of one window config
(window_widths, as rtl_sim/window.py passes them; eatt.rtl_sim.runner.run_leaf) and run the
cocotb test ``random_steps`` in it: WindowCtrlTB offers random steps (p, w, len) with random
gaps and a rare reset, and checks every output every cycle against the schedule of
window_ctrl.sv's header, built from the golden window bounds (eatt.quant.window.window_bounds):
a step accepted in cycle A with rows [lo, hi], n = hi - lo + 1, reads address lo + k in cycle
A + k, delivers item k in A + k + 1 (index k, distance |lo + k - p|, last at k = n - 1),
red_go (red_rows = n) in A + n + 1, nrm_go in A + n + 2 and ap_done in A + n + 3; the next step
is accepted from A + n on; a reset drops everything in flight.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections import defaultdict

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer

from eatt.config import CoreConfig
from eatt.quant.window import window_bounds
from eatt.rtl_sim.runner import run_leaf
from eatt.rtl_sim.window import window_widths

CASES = {
    "k10-d2": dict(len_k=10, dim=4, heads=2, window_d=2, position="gaussian"),
    "k6-d7": dict(len_k=6, dim=4, heads=1, window_d=7, position="none"),  # the whole memory
    "k16-d3": dict(len_k=16, dim=4, heads=1, window_d=3, position="none"),
}
CYCLES = 800


def case_config(name: str) -> CoreConfig:
    return CoreConfig.from_dict(dict(kind="window", len_q=1, **CASES[name]))


def parameters(cfg: CoreConfig) -> dict[str, int]:
    w = window_widths(cfg)
    keys = {"AB": "addr_bits", "WB": "w_bits", "LB": "len_bits", "DB": "dist_bits"}
    keys.update(IB="index_bits", RB="rows_bits")
    return {name: w[key] for name, key in keys.items()}


class WindowCtrlModel:
    """The schedule of window_ctrl.sv's header: per cycle, what each output must be."""

    def __init__(self):
        self.events: dict[int, dict] = defaultdict(dict)
        self.issue_until = -1  # last address cycle of the step being read

    def outputs(self, cycle: int, start: int, rst: int, step: tuple[int, int, int]) -> dict:
        busy = cycle <= self.issue_until
        accept = bool(start) and not busy and not rst
        if accept:
            p, w, length = step
            lo, hi = (int(b) for b in window_bounds(p, w, length))
            n = hi - lo + 1
            for k in range(n):
                self.events[cycle + k]["raddr"] = lo + k
                self.events[cycle + k + 1]["item"] = (k, abs(lo + k - p), int(k == n - 1))
            self.events[cycle + n + 1]["red"] = n
            self.events[cycle + n + 2]["nrm"] = 1
            self.events[cycle + n + 3]["done"] = 1
            self.issue_until = cycle + n - 1
        ev = self.events.get(cycle, {})
        want = {
            "ap_ready": int(accept),
            "rd_en": int(accept or busy),
            "item_vld": int("item" in ev),
            "red_go": int("red" in ev),
            "nrm_go": int("nrm" in ev),
            "ap_done": int("done" in ev),
        }
        want["ap_idle"] = int(not start and not busy and not any(want[k] for k in list(want)[2:]))
        if want["rd_en"]:
            want["raddr"] = ev["raddr"]
        if "item" in ev:
            want["item_idx"], want["item_dist"], want["item_last"] = ev["item"]
        if "red" in ev:
            want["red_rows"] = ev["red"]
        return want

    def clock(self, cycle: int, rst: int) -> None:
        if rst:  # every register is reset: nothing scheduled after this cycle happens
            self.events = defaultdict(dict, {c: e for c, e in self.events.items() if c <= cycle})
            self.issue_until = -1


class WindowCtrlTB:
    """Clock, the step driver (inputs change after a falling edge, outputs read 1 ns later)."""

    def __init__(self, dut):
        self.dut = dut
        self.model = WindowCtrlModel()
        self.cycle_no = 0
        cocotb.start_soon(Clock(dut.ap_clk, 10, unit="ns").start())

    async def cycle(self, start: int, rst: int, step: tuple[int, int, int]) -> bool:
        """One cycle; returns whether the step was accepted."""
        dut = self.dut
        await FallingEdge(dut.ap_clk)
        dut.ap_start.value, dut.ap_rst.value = start, rst
        dut.p.value, dut.w.value, dut.len.value = step
        await Timer(1, "ns")
        want = self.model.outputs(self.cycle_no, start, rst, step)
        if self.cycle_no:  # the outputs are unknown before the first reset's edge
            got = {name: int(getattr(dut, name).value) for name in want}
            assert got == want, f"cycle {self.cycle_no}, step {step}: {got} != {want}"
        self.model.clock(self.cycle_no, rst)
        self.cycle_no += 1
        return bool(want["ap_ready"])


@cocotb.test()
async def random_steps(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    len_k, half = case["len_k"], case["window_d"]
    rng = random.Random(1)
    tb = WindowCtrlTB(dut)

    def new_step() -> tuple[int, int, int]:
        length = rng.randint(1, len_k)
        return rng.randrange(length), rng.randint(0, half), length

    await tb.cycle(0, 1, (0, 0, 1))
    step, gap = new_step(), 0
    for _ in range(CYCLES):
        if gap:
            gap -= 1
            await tb.cycle(0, 0, step)
            continue
        if await tb.cycle(1, int(rng.random() < 0.01), step):
            step = new_step()
            gap = rng.choice([0, 0, 0, 1, 2, 5])


# -- the pytest side ------------------------------------------------------------------------------
pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def _run(name: str, simulator: str) -> dict:
    cfg = case_config(name)
    case = json.dumps({"len_k": cfg.len_k, "window_d": cfg.window_d})
    return run_leaf(__file__, "window_ctrl", parameters(cfg), simulator, EATT_LEAF_CASE=case)


@pytest.mark.parametrize("name", sorted(CASES))
def test_window_ctrl(name):
    assert _run(name, "verilator")["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
def test_window_ctrl_icarus():
    assert _run("k10-d2", "icarus")["tests"] == 1
