"""eatt: energy-friendly attention from PyTorch to verified hardware.

The API for your own model (docs/own_model.md) loads on first use, so ``import eatt`` (and the
CLI) stays free of torch: ``eatt.layers``, ``eatt.capture``, ``eatt.export_layer``
(eatt.own_model) and ``eatt.nn.MultiheadAttention``.
"""

from eatt.version import __version__

__all__ = ["__version__", "capture", "export_layer", "layer_core", "layers"]

#: the names eatt/own_model.py gives the package, loaded when first read
_OWN_MODEL = ("layers", "capture", "export_layer", "layer_core")


def __getattr__(name: str):
    if name in _OWN_MODEL:
        from eatt import own_model

        return getattr(own_model, name)
    raise AttributeError(f"module 'eatt' has no attribute {name!r}")
