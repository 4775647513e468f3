"""pytest in rtl_sim/tb: collect the hand-written leaves' testbenches (tb/<module>/), not the
cocotb testbenches of the generated tops (test_alignment.py, test_attention.py,
test_window.py, test_folded.py) or of a netlist's activity run (test_activity.py,
test_activity_folded.py), which eatt.rtl_sim.runner (rtl_sim/folded.py, rtl_sim/power.py) runs
inside the simulator with a job file."""

from eatt.rtl_sim.tools import use_local_icarus

use_local_icarus()  # the leaves' Icarus runs: .venv/debian's iverilog where the system has none

collect_ignore = [
    "test_alignment.py",
    "test_attention.py",
    "test_window.py",
    "test_folded.py",
    "test_activity.py",
    "test_activity_folded.py",
]
