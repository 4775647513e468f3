"""The hls stage's conversion: a core's QONNX model -> an hls4ml ModelGraph, not yet written.

    convert(model, cfg, out_dir, backend, part, clock_ns, reuse_factor, folding, io_type)
        the ModelGraph, its inputs typed as the core's (after check_options)

and the per-unit hooks convert calls through eatt.units: the input types and model options
(core_hls_ports, window_hls_ports) and the last touches to the converted model
(core_hls_finish, window_hls_finish). eatt.hls.project writes, compiles and checks the project;
it re-exports these names.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
from typing import Any

import numpy as np
import onnx

from eatt.config import CoreConfig
from eatt.hls import register
from eatt.hls.layers import WEIGHT_NAMES
from eatt.quant.ops import DOMAIN, OP_TYPE, window_derived_attributes, window_input_fracs
from eatt.units import unit_for

#: backend name (ours, lower case) -> hls4ml backend name
BACKENDS = {"vitis": "Vitis", "vivado": "Vivado"}
PROJECT_NAME = "myproject"
#: Xilinx part names (letters, digits, "-", "_", "."): written into project.tcl between quotes
PART_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


# -- conversion --------------------------------------------------------------------------------
@contextlib.contextmanager
def stdout_to_stderr():
    """Send fd 1 (hls4ml's prints, g++ output) to stderr: --json keeps stdout for the result."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def convert(
    model: onnx.ModelProto,
    cfg: CoreConfig,
    out_dir: str | os.PathLike,
    backend: str = "vitis",
    part: str | None = None,
    clock_ns: float = 5.0,
    reuse_factor: int = 1,
    folding: dict | None = None,
    io_type: str = "io_parallel",
):
    """hls4ml ModelGraph of the core (not yet written): inputs typed exactly as the core's.

    ``folding`` ({lanes, simd, pe}, eatt.hls.folding.resolve_folding) makes the layer the folded
    core: the layer's config carries the folding, and the top is not pipelined as a whole
    (which would unroll the folded loops) but a dataflow region whose loops pipeline.
    ``io_type`` "io_stream" (the folded layer only): one token a beat on every port, hls4ml's
    streams (AXI4-Stream at the top)."""
    import hls4ml

    register()
    check_options(backend, part, clock_ns, reuse_factor, io_type)
    from eatt.quant.export import core_input_names

    unit = unit_for(cfg)
    inputs = core_input_names(model)  # in the node's order: X, Y, then a core's masks L, O
    # hls4ml's default input type is fixed<16,6>: give the inputs the unit's own grid
    types, model_options = unit.load("hls_ports")(cfg, inputs)
    hls_config = {
        "Model": {"Precision": "fixed<16,6>", "ReuseFactor": reuse_factor, "Strategy": "Latency"},
        "LayerName": {name: {"Precision": {"result": types[name]}} for name in inputs},
    }
    hls_config["Model"].update(model_options)
    if folding:
        hls_config["Model"]["PipelineStyle"] = "dataflow"
        for node in model.graph.node:
            if node.domain == DOMAIN and node.op_type == OP_TYPE:
                hls_config["LayerName"][node.name] = {k.capitalize(): v for k, v in folding.items()}
    kwargs: dict[str, Any] = {"clock_period": clock_ns}
    if part:
        kwargs["part"] = part
    hls_model = hls4ml.converters.convert_from_onnx_model(
        model,
        output_dir=str(out_dir),
        project_name=PROJECT_NAME,
        backend=BACKENDS[backend],
        io_type=io_type,
        hls_config=hls_config,
        # weights as initialized C arrays, not .txt files read at run time from an absolute
        # path: the compiled library does not depend on where the project lies
        write_weights_txt=False,
        **kwargs,
    )
    unit.load("hls_finish")(cfg, hls_model)
    return hls_model


def core_hls_ports(cfg: CoreConfig, inputs: list[str]) -> tuple[dict[str, str], dict]:
    """convert's settings for a core: X and Y on the core's input grid, the mask inputs (L, O,
    after them in the node's order) unsigned integers (eatt.hls.layers.mask_widths: the QONNX
    UINT datatypes), hls4ml's defaults."""
    from eatt.hls.layers import mask_widths

    in_type = f"fixed<{cfg.in_bits},{cfg.in_bits - cfg.in_frac}>"
    types = dict.fromkeys(inputs[:2], in_type)
    widths = mask_widths(cfg.len_k)
    for mask, name in zip(cfg.mask_inputs, inputs[2:], strict=True):
        types[name] = f"uint<{widths[mask + '_t']}>"
    return types, {}


def window_hls_ports(cfg: CoreConfig, inputs: list[str]) -> tuple[dict[str, str], dict]:
    """convert's settings for the window unit: each input's own grid (window_port_types), and
    not a pipelined top (which would unroll the window loops): the loops carry their own
    PIPELINE II=1 (templates/nnet_window_attention.h)."""
    return window_port_types(cfg), {"PipelineStyle": "dataflow"}


def core_hls_finish(cfg: CoreConfig, hls_model) -> None:
    """A folded layer's weight types: ``ap_int<weight_bits>`` under ``__SYNTHESIS__``, and for
    g++ (the C simulation) a plain integer of the same values (signed char, short or int).
    A dim x dim ``ap_int`` array is initialized element by element at run time, which g++
    compiles with -O3 into more than 10 minutes and 6 GB for each 512 x 512 matrix (the
    paper's size); a plain array is static data, compiled in seconds. The values, and so the
    C simulation's outputs, are the same; the synthesized ROMs stay weight_bits wide."""
    for layer in hls_model.get_layers():
        if layer.class_name != "AttentionCore" or not layer.get_attr("lanes", 0):
            continue
        names = {layer.get_weights(w).type.name for w in WEIGHT_NAMES}
        for type_var in layer.get_layer_precision().values():
            if type_var.name in names:
                type_var.definition_cpp = _csim_plain_type(type_var, cfg.weight_bits)


def _csim_plain_type(type_var, bits: int):
    """A definition_cpp for type_var: its own typedef for synthesis, a plain integer of the
    same signed range (bits <= 32) for the C simulation."""
    plain = "signed char" if bits <= 8 else "short" if bits <= 16 else "int"
    synthesis = type_var.definition_cpp()

    def definition_cpp(*args, **kwargs) -> str:
        return (
            f"#ifdef __SYNTHESIS__\n{synthesis}#else  // C simulation (eatt.hls.project."
            f"core_hls_finish)\ntypedef {plain} {type_var.name};\n#endif\n"
        )

    return definition_cpp


def window_hls_finish(cfg: CoreConfig, hls_model) -> None:
    """The memory arrays: one row (dim codes) per word, so a window row is read per cycle."""
    for var in hls_model.get_input_variables():
        if var.name in ("K", "V"):
            var.pragma = ("reshape", "cyclic", cfg.dim)


def window_port_types(cfg: CoreConfig) -> dict[str, str]:
    """hls4ml precision of each graph input of a window file (the grids of window_input_fracs)."""
    from eatt.hls.handlers import window_layer_attributes
    from eatt.hls.layers import fixed_port

    d = window_derived_attributes(cfg)
    ib = window_layer_attributes(cfg)["int_bits"]
    bits = {"X": cfg.in_bits, "K": d["qk_code_bits"], "V": d["v_code_bits"]}
    types = {}
    for name, frac in window_input_fracs(cfg).items():
        t = fixed_port(bits[name], frac) if name in bits else fixed_port(ib, 0)
        types[name] = f"fixed<{t.width},{t.integer}>"
    return types


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


#: hls4ml's io types this extension writes (io_stream: the folded layer only)
IO_TYPES = ("io_parallel", "io_stream")


def check_options(
    backend: str, part: str | None, clock_ns: float, reuse_factor: int, io_type: str = "io_parallel"
) -> None:
    """One-line ValueError naming the option (as the CLI spells it) for a value hls4ml would
    write into the project as given (a NaN or negative clock period, a part with quotes)."""
    if backend not in BACKENDS:
        raise ValueError(f"--backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    if part is not None and (not isinstance(part, str) or not PART_PATTERN.fullmatch(part)):
        raise ValueError(
            f"--part: {part!r} is not a part name (letters, digits, '-', '_', '.'; "
            "e.g. xcvu13p-flga2577-2-e)"
        )
    if (
        isinstance(clock_ns, bool)
        or not isinstance(clock_ns, (int, float, np.integer, np.floating))
        or not math.isfinite(clock_ns)
        or clock_ns <= 0
    ):
        raise ValueError(
            f"--clock: the clock period must be a finite number of ns > 0, got {clock_ns!r}"
        )
    if not _is_int(reuse_factor) or reuse_factor < 1:
        raise ValueError(f"reuse_factor: must be an integer >= 1, got {reuse_factor!r}")
    if io_type not in IO_TYPES:
        raise ValueError(f"--io-type: {io_type!r} is not one of {', '.join(IO_TYPES)}")
