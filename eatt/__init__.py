"""eatt: energy-friendly attention from PyTorch to verified hardware."""

__version__ = "0.1.0"
