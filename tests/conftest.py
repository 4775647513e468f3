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


#: the slowest test files, in seconds of their tests in a fresh run (2 cores, from the per-file
#: summary below; 2026-12-03, 25.6 min beside a training run on one core, the commands forked
#: from tests/cli.py's preloading server). `make test` runs files on two xdist workers
#: (--dist loadfile --no-loadscope-reorder) in the collection order, so the longest go first and
#: the workers end together (longest-processing-time-first); the rest keep their order. Refresh
#: from the summary (files below its first 15 are estimates: <= 55 s there).
SLOW_FILES = {
    "test_sweep.py": 410,  # Ray: its commands run as plain subprocesses
    "test_readme_commands.py": 305,
    "test_windowed_seq2seq.py": 225,
    "test_readme_trained.py": 185,  # README's trained-model half
    "test_readme_paper.py": 155,
    "test_bench_rtl_compare.py": 115,
    "test_train.py": 110,
    "test_flow_layer.py": 105,
    "test_pnr.py": 95,
    "test_rtl.py": 90,
    "test_resources.py": 75,
    "test_own_model.py": 65,
    "test_power.py": 60,
    "test_da4ml_trace.py": 60,
    "test_sim_runner.py": 55,
    "test_memory_macros.py": 55,
    "test_fpga_power.py": 50,
    "test_layers.py": 45,
    "test_window_cross_loop.py": 45,  # test_window_cross.py's loop half (the rest: ~10 s)
    "test_bad_input.py": 40,
    "test_flow.py": 40,
    "test_icarus.py": 40,
    "test_folded.py": 40,
    "test_hls_folded.py": 40,
    "test_clock_gating.py": 40,
    "test_ding.py": 35,
    "test_hls_csim_cache.py": 35,
    "test_cli.py": 30,
    "test_masks.py": 30,
}


def pytest_collection_modifyitems(config, items):
    # a stable sort: each file keeps its own order
    items.sort(key=lambda item: -SLOW_FILES.get(item.path.name, 0))


_SECONDS_PER_FILE: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report):
    _SECONDS_PER_FILE[report.nodeid.split("::")[0]] += report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Seconds per test file (setup, call and teardown), the slowest 30: for SLOW_FILES."""
    if _SECONDS_PER_FILE:
        terminalreporter.write_sep("=", "slowest 30 test files (seconds)")
        slowest = sorted(_SECONDS_PER_FILE.items(), key=lambda kv: -kv[1])[:30]
        for name, seconds in slowest:
            terminalreporter.write_line(f"{seconds:8.1f}  {name}")
