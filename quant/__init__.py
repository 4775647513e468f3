"""quant stage: the golden model, its checks, the Brevitas modules, QONNX export.

``eatt.quant.calibrate`` (quant/calibration.py: formats from observed ranges) loads on first
use, with torch and Brevitas.
"""


def __getattr__(name: str):
    if name == "calibrate":
        from eatt.quant.calibration import calibrate

        return calibrate
    raise AttributeError(f"module 'eatt.quant' has no attribute {name!r}")
