"""hls stage: an hls4ml extension that turns our QONNX cores into HLS C++ projects.

Importing eatt.hls registers, once per process (importing or calling register() again is
harmless):

- the layer classes ``AttentionCore`` and ``WindowAttention`` (eatt.hls.layers) with hls4ml's
  layer map,
- the ONNX handlers for op_types ``AttentionCore`` and ``WindowAttention`` (eatt.hls.handlers),
- the config and function templates and the headers templates/nnet_attention_core.h and
  templates/nnet_window_attention.h (which includes the core's) for the Vivado and Vitis
  backends.

eatt.hls.project has the library API (write_project, synth, parse_csynth_report); docs/hls.md
describes the generated project.
"""

from __future__ import annotations

from pathlib import Path

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

    from eatt.hls.handlers import (
        AttentionCoreConfigTemplate,
        AttentionCoreFunctionTemplate,
        WindowAttentionConfigTemplate,
        WindowAttentionFunctionTemplate,
        parse_attention_core,
        parse_window_attention,
    )
    from eatt.hls.layers import AttentionCore, WindowAttention

    hls4ml.model.layers.register_layer("AttentionCore", AttentionCore)
    hls4ml.model.layers.register_layer("WindowAttention", WindowAttention)
    # register_onnx_layer_handler refuses a second registration: check first (a re-imported
    # module would otherwise fail)
    if "AttentionCore" not in layer_handlers:
        register_onnx_layer_handler("AttentionCore", parse_attention_core)
    if "WindowAttention" not in layer_handlers:
        register_onnx_layer_handler("WindowAttention", parse_window_attention)
    for name in BACKENDS:
        backend = hls4ml.backends.get_backend(name)
        backend.register_template(AttentionCoreConfigTemplate)
        backend.register_template(AttentionCoreFunctionTemplate)
        backend.register_template(WindowAttentionConfigTemplate)
        backend.register_template(WindowAttentionFunctionTemplate)
        for header in sorted(TEMPLATES.glob("*.h")):
            backend.register_source(header)
    _registered = True


try:
    register()
except ImportError:  # hls4ml not installed: eatt.hls.project.convert calls register() again
    pass
