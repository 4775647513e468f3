"""Suite-wide settings."""

import torch

# CI has 2 cores, shared with Verilator and g++ builds the tests start: one intra-op thread
# keeps small-tensor torch work from oversubscribing them (measured: up to 50x slower with 2).
torch.set_num_threads(1)
