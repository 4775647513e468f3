"""pytest in rtl_sim/tb: collect the hand-written leaves' testbenches (tb/<module>/), not the
cocotb testbenches of the generated tops (test_alignment.py, test_attention.py,
test_window.py, test_folded.py), which eatt.rtl_sim.runner (and rtl_sim/folded.py) run inside
the simulator with a job file."""

collect_ignore = ["test_alignment.py", "test_attention.py", "test_window.py", "test_folded.py"]
