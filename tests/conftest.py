"""Suite-wide settings."""

from collections import defaultdict

import torch

from eatt.rtl_sim.tools import use_local_icarus

# Icarus Verilog: the system's, else the one `make install` unpacked into .venv/debian (its
# folder goes on PATH here, so the tests that look for iverilog find it)
use_local_icarus()

# CI has 2 cores, shared with Verilator and g++ builds the tests start: one intra-op thread
# keeps small-tensor torch work from oversubscribing them (measured: up to 50x slower with 2).
torch.set_num_threads(1)


#: the slowest test files, in seconds of their tests in a quiet fresh-clone CI run (2 cores, from
#: the per-file summary below; 31 min in all). `make test` runs files on two xdist workers
#: (--dist loadfile --no-loadscope-reorder) in the collection order, so the longest go first and
#: the workers end together (longest-processing-time-first); the rest keep their order. Refresh
#: from the summary.
SLOW_FILES = {
    "test_readme_commands.py": 490,
    "test_readme_trained.py": 460,  # README's trained-model half
    "test_rtl.py": 300,
    "test_sweep.py": 250,
    "test_readme_paper.py": 205,
    "test_own_model.py": 205,
    "test_flow_layer.py": 200,
    "test_memory_macros.py": 195,
    "test_fpga_power.py": 150,
    "test_power.py": 150,
    "test_layers.py": 100,
    "test_bad_input.py": 80,
    "test_window_cross_loop.py": 75,  # test_window_cross.py's loop half (the rest: ~10 s)
    "test_cli.py": 70,
    "test_pnr.py": 70,
    "test_flow.py": 65,
    "test_windowed_seq2seq.py": 60,
    "test_resources.py": 60,
    "test_icarus.py": 50,
    "test_folded.py": 50,
    "test_hls_folded.py": 45,
    "test_ding.py": 45,
    "test_hls_csim_cache.py": 40,
    "test_clock_gating.py": 45,
    "test_masks.py": 30,
    "test_da4ml_trace.py": 30,
    "test_bench_rtl_compare.py": 30,
}


def pytest_collection_modifyitems(config, items):
    # a stable sort: each file keeps its own order
    items.sort(key=lambda item: -SLOW_FILES.get(item.path.name, 0))


_SECONDS_PER_FILE: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report):
    _SECONDS_PER_FILE[report.nodeid.split("::")[0]] += report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Seconds per test file (setup, call and teardown), the slowest 15: for SLOW_FILES."""
    if _SECONDS_PER_FILE:
        terminalreporter.write_sep("=", "slowest 15 test files (seconds)")
        slowest = sorted(_SECONDS_PER_FILE.items(), key=lambda kv: -kv[1])[:15]
        for name, seconds in slowest:
            terminalreporter.write_line(f"{seconds:8.1f}  {name}")
