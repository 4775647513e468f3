"""Suite-wide settings."""

import torch

from eatt.rtl_sim.tools import use_local_icarus

# Icarus Verilog: the system's, else the one `make install` unpacked into .venv/debian (its
# folder goes on PATH here, so the tests that look for iverilog find it)
use_local_icarus()

# CI has 2 cores, shared with Verilator and g++ builds the tests start: one intra-op thread
# keeps small-tensor torch work from oversubscribing them (measured: up to 50x slower with 2).
torch.set_num_threads(1)
