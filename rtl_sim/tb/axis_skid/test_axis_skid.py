"""Testbench of axis_skid (rtl_sim/rtl/axis_skid.sv): an AXI4-Stream register slice.

Two halves in one file, as verilog-axis' testbenches:

- the pytest functions at the bottom build the leaf (eatt.rtl_sim.runner.run_leaf, cached) and
  run the cocotb test in it; ``pytest rtl_sim/tb/axis_skid`` runs them alone;
- the cocotb test ``skid_stream`` runs inside the simulator: a source offers random beats with
  random gaps, a sink takes them under random back-pressure (phases of every pattern: both
  free, the sink stalling, the source pausing); every beat the sink takes must be the next one
  sent (none lost, repeated or reordered), and with both sides free a beat passes every cycle
  (full throughput) one cycle after it is taken.
"""

from __future__ import annotations

import json
import os
import shutil

import cocotb
import numpy as np
import pytest
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer

from eatt.rtl_sim.runner import run_leaf

CASES = {"w8": dict(W=8), "w77": dict(W=77)}
BEATS = 600


@cocotb.test()
async def skid_stream(dut):
    case = json.loads(os.environ["EATT_LEAF_CASE"])
    w = CASES[case["name"]]["W"]
    rng = np.random.default_rng(case["seed"])
    beats = [int(rng.integers(0, 2**62)) % (2**w) for _ in range(BEATS)]
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.s_valid.value, dut.m_ready.value = 0, 0
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    sent, got, cycle, free_run = 0, [], 0, []
    while len(got) < BEATS:
        assert cycle < 20 * BEATS, f"{len(got)} of {BEATS} beats after {cycle} cycles"
        phase = (cycle // 100) % 4  # both free, the sink stalling, the source pausing, both
        p_src = 1.0 if phase in (0, 1) else 0.5
        p_snk = 1.0 if phase in (0, 2) else 0.4
        valid = sent < BEATS and rng.random() < p_src
        ready = rng.random() < p_snk
        dut.s_valid.value = int(valid)
        if valid:
            dut.s_data.value = beats[sent]
        dut.m_ready.value = int(ready)
        await Timer(1, unit="ns")  # the handshakes as the next edge takes them
        if valid and int(dut.s_ready.value):
            sent += 1
        if ready and int(dut.m_valid.value):
            got.append(int(dut.m_data.value))
            assert got[-1] == beats[len(got) - 1], f"beat {len(got) - 1}: {got[-1]:#x}"
            if phase == 0 and cycle % 100 > 2:
                free_run.append(cycle)
        await FallingEdge(dut.clk)
        cycle += 1
    # full throughput: in the both-free phases a beat came out every cycle after the first two
    runs = [b - a for a, b in zip(free_run, free_run[1:], strict=False) if b - a < 50]
    assert runs and set(runs) == {1}, sorted(set(runs))


pytestmark = pytest.mark.rtl
HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None


@pytest.mark.parametrize("name", sorted(CASES))
def test_axis_skid(name):
    case = json.dumps({"name": name, "seed": 1})
    assert run_leaf(__file__, "axis_skid", CASES[name], EATT_LEAF_CASE=case)["tests"] == 1


@pytest.mark.skipif(not HAVE_ICARUS, reason="Icarus Verilog not installed")
def test_axis_skid_icarus():
    case = json.dumps({"name": "w77", "seed": 2})
    result = run_leaf(__file__, "axis_skid", CASES["w77"], "icarus", EATT_LEAF_CASE=case)
    assert result["tests"] == 1
