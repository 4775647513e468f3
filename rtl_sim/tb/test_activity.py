"""cocotb testbench of a core's synthesized netlist for switching activity (eatt power).

One test, the stream of tb/test_alignment.py alone: reset, every vector back to back, drain. The
netlist's nets are dumped to a VCD over the whole run (a second top-level module of the netlist
folder, Icarus), so the activity is that of the vectors and nothing else: no second reset, no
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
    await tb.stream(xs, ys)
    np.save(job["got"], np.asarray(tb.outputs, dtype=np.int64))
    _update_results(job, vectors=len(xs), stream_cycles=_cycle() - first, cycles=_cycle())
