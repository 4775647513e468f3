"""cocotb testbench of the folded engine's synthesized netlist for switching activity (eatt power).

One test, the stream run of tb/test_folded.py alone: reset, every vector back to back through
the AXI4-Stream source and sink with no pause, drain. The netlist's nets are dumped to a VCD
over the whole run (a second top-level module of the netlist folder, Icarus), so the activity
is that of the vectors and nothing else. The outputs go to the job's ``got`` file and are
compared with the golden model by the caller (eatt.rtl_sim.power). The memory macros' models
count their reads and writes and write them when the simulation ends
(rtl_sim/rtl/folded_macro.sv); when the job names macros, the run goes one period past the last
beat, so its read is counted.
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.simtime import get_sim_time
from cocotb.triggers import Timer
from test_folded import PERIOD_NS, FoldedTB, _job, _update_results


def _cycle() -> int:
    return int(get_sim_time("ns") // PERIOD_NS)


@cocotb.test()
async def test_activity(dut):
    job = _job()
    tb = FoldedTB(dut, job)
    await tb.start()
    first = _cycle()
    n = len(tb.x)
    np.save(job["got"], np.asarray(await tb.stream(n), dtype=np.int64))
    stream, cycles = _cycle() - first, _cycle()
    if job.get("macros"):
        await Timer(PERIOD_NS, "ns")  # the last beat's read counted (a nonblocking update)
    _update_results(job, vectors=n, stream_cycles=stream, cycles=cycles)
