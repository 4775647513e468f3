"""cocotb testbench of the whole-core top (<kind>_attention, ap_ctrl_hs handshake).

Same inputs, handshake and tests as the alignment top (tb/test_alignment.py, whose CoreTB reads
the output port, here ``z`` with ``z_vld``, from the job's interface): the tests are imported,
and cocotb runs every test object it finds in this module.
"""

from test_alignment import CoreTB, test_bubbles, test_latency, test_reset, test_stream

__all__ = ["CoreTB", "test_bubbles", "test_latency", "test_reset", "test_stream"]
