"""cocotb testbench of a core's synthesized netlist for switching activity (eatt power).

One test, the stream of tb/test_alignment.py alone: reset, every vector back to back, drain. The
simulator records every net's toggles over the whole run (Verilator --trace-saif, dump.saif in
the run folder), so the activity is that of the vectors and nothing else: no second reset, no
idle gaps. The outputs go to the job's ``got`` file and are compared with the golden model by
the caller (eatt.rtl_sim.power): a netlist that computes anything else is an error, not a power
number. Works for both levels (the job's interface names the output port).
"""

from __future__ import annotations

import cocotb
import numpy as np
from test_alignment import CoreTB, _cycle, _job, _update_results


@cocotb.test()
async def test_activity(dut):
    job = _job()
    xs, ys = np.load(job["x"]), np.load(job["y"])
    tb = CoreTB(dut, job)
    await tb.start()
    first = _cycle()
    for n in range(len(xs)):
        await tb.start_vector(xs[n], ys[n], n)
    await tb.idle(0)
    await tb.drain(len(xs), limit=len(xs) + 1000)
    assert len(tb.done_cycles) == len(xs), f"{len(tb.done_cycles)} ap_done for {len(xs)} starts"
    np.save(job["got"], np.asarray(tb.outputs, dtype=np.int64))
    _update_results(job, vectors=len(xs), stream_cycles=_cycle() - first, cycles=_cycle())
