"""The hls stage's conversion: a core's QONNX model -> an hls4ml ModelGraph, not yet written.

    convert(model, cfg, out_dir, backend, part, clock_ns, reuse_factor, folding, io_type)
        the ModelGraph, its inputs typed as the core's (after check_options)

asking the registry (eatt/units.py) for the unit's input types and model options (stage
``hls_ports``) and its last touches to the converted model (``hls_finish``; both in
eatt/hls/unit_types.py). eatt.hls.project writes, compiles and checks the project; it
re-exports these names.
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
from eatt.quant.ops import DOMAIN, OP_TYPE
from eatt.quant.reader import core_input_names
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
    # the ONNX model in the config is the converter's input only: hls4ml's writer would dump it
    # (weights and all) into hls4ml_config.yml as a pickled protobuf (8 MB and ~5 s a write at
    # the paper's size); its own serialization drops it too (ModelGraph.serialize)
    hls_model.config.config.pop("OnnxModel", None)
    unit.load("hls_finish")(cfg, hls_model)
    return hls_model


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
