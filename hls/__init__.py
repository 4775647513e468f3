"""hls stage: an hls4ml extension that turns our QONNX cores into HLS C++ projects.

Importing eatt.hls registers, once per process (importing or calling register() again is
harmless):

- for each hardware unit of the registry (eatt/units.py): its layer class (stage ``hls_layer``,
  named as its op type) with hls4ml's layer map, its ONNX handler (``hls_handler``) and its
  config and function templates (``hls_templates``) for each backend,
- the headers templates/nnet_attention_core.h and
  templates/nnet_window_attention.h (which includes the core's) for the Vivado and Vitis
  backends,
- the optimizer passes of eatt/hls/passes.py (a MatMul by a constant over a (tokens, features)
  tensor as a per-token Dense, in hls4ml's parse_qonnx flow).

eatt.hls.project has the library API (write_project, synth, parse_csynth_report); docs/hls.md
describes the generated project.
"""

from __future__ import annotations

from pathlib import Path

from eatt.units import UNITS

TEMPLATES = Path(__file__).resolve().parent / "templates"
BACKENDS = ("Vivado", "Vitis")

_registered = False


def register() -> None:
    """Register the layers, handlers, templates and headers with hls4ml (idempotent)."""
    global _registered
    if _registered:
        return
    import hls4ml
    from hls4ml.converters.onnx_to_hls import layer_handlers, register_onnx_layer_handler

    backends = [hls4ml.backends.get_backend(name) for name in BACKENDS]
    for unit in UNITS.values():  # each unit's layer, handler and templates (eatt/units.py)
        hls4ml.model.layers.register_layer(unit.op_type, unit.load("hls_layer"))
        # register_onnx_layer_handler refuses a second registration: check first (a
        # re-imported module would otherwise fail)
        if unit.op_type not in layer_handlers:
            register_onnx_layer_handler(unit.op_type, unit.load("hls_handler"))
        for backend in backends:
            for template in unit.load("hls_templates")():
                backend.register_template(template)
    for backend in backends:
        for header in sorted(TEMPLATES.glob("*.h")):
            backend.register_source(header)
    from eatt.hls import passes  # hls4ml's optimizer classes: loaded with it

    passes.register()
    _registered = True


try:
    register()
except ImportError:  # hls4ml not installed: eatt.hls.project.convert calls register() again
    pass
