"""QONNX export of an attention core: write, read back, execute with qonnx, compare with golden.

The file (docs/export.md describes it node by node):

    X (1, len_q, dim) float -> Quant(scale 2**-in_frac, zero point 0, in_bits, signed) -> X_quant
    Y (1, len_k, dim) float -> Quant(same format)                                       -> Y_quant
    AttentionCore (domain eatt.quant.ops; config, weights, formats, tables as attributes)
        (X_quant, Y_quant) -> Z (1, len_q, dim) float = integer output * 2**-out_frac

Kind window (the windowed cross-attention unit, eatt.quant.window; docs/export.md):

    X (1, dim) float -> Quant(input format) -> X_quant
    WindowAttention (X_quant, P, W, K, V, C, L[, G]) -> O (1, dim) = attention output codes *
        2**-value_frac[, F (1, heads) the focus rows, position flexible]; P, W, L, G (1, 1) and
        C (1, len_k) integers, K and V (1, len_k, dim) the projected memory on the Q/K and V
        grids

    export_core(cfg, weights, path)      validate, write atomically, read back; returns a summary
    load_core(path) -> (cfg, weights)    anything that is not one of our files: one-line ValueError
                                         (quant/reader.py)
    execute_core(path, x, y) -> codes    integer codes in, qonnx execution, integer codes out
                                         (quant/core_export.py)
    execute_window(path, steps) -> codes the same for a window file (quant/window_export.py;
                                         steps: STEP_INPUTS arrays;
                                         O, then F for position flexible)
    check_export(path, vectors, seed)    qonnx execution vs GoldenCore (WindowGolden for kind
                                         window) on random + edge vectors

Each unit's own pieces of the file (its graph, what it carries as float32, its output fraction,
its check) live in its module, named by the registry (eatt/units.py): quant/core_export.py,
quant/window_export.py. This module writes and checks a file of any unit through the registry,
and re-exports the core's public names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper
from qonnx.core.datatype import DataType
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.transformation.infer_datatypes import InferDataTypes
from qonnx.transformation.infer_shapes import InferShapes
from qonnx.util.basic import get_preferred_onnx_opset, get_preferred_qonnx_opset

from eatt.config import CoreConfig, WindowConfig, atomic_write
from eatt.quant.core_export import (  # noqa: F401 - re-exported: the core unit's file
    check_core_export,
    core_float32_carried,
    core_graph,
    core_output_frac,
    execute_core,
)
from eatt.quant.golden import CoreWeights, weight_shapes
from eatt.quant.ops import DOMAIN, FORMAT_VERSION
from eatt.quant.reader import (  # noqa: F401 - re-exported: reading a file back
    QONNX_DOMAIN,
    _load,
    _read_model,
    _shape,
    core_input_names,
    load_core,
    window_input_datatypes,
    window_input_shapes,
)
from eatt.quant.vectors import load_capture, load_window_capture, model_line
from eatt.units import UNITS, unit_for
from eatt.version import __version__


# -- validation -----------------------------------------------------------------------------------
def validate_exportable(cfg: CoreConfig, weights: CoreWeights | Mapping[str, Any]) -> CoreWeights:
    """Everything the file cannot represent, as a one-line ValueError naming the setting.

    Returns the weights as CoreWeights of int64.
    """
    if not isinstance(cfg, CoreConfig):
        raise ValueError(f"config: expected a CoreConfig, got {type(cfg).__name__}")
    try:
        unit = unit_for(cfg)
    except KeyError:
        supported = ", ".join(k for u in UNITS.values() for k in u.kinds)
        raise ValueError(
            f"kind: {cfg.kind!r} cannot be exported (supported: {supported})"
        ) from None
    if isinstance(weights, CoreWeights):
        arrays = weights.as_dict()
    elif isinstance(weights, Mapping):
        # the unit's own weights (the window unit holds only W_Q: the memory comes projected)
        shapes = weight_shapes(cfg)
        needed = unit.weight_names or tuple(shapes)
        missing = [n for n in needed if n not in weights]
        if missing:
            raise ValueError(f"weights: missing '{missing[0]}'")
        arrays = {
            n: weights[n] if n in weights else np.zeros(shape, dtype=np.int64)
            for n, shape in shapes.items()
        }
    else:
        raise ValueError(
            f"weights: expected CoreWeights or a mapping, got {type(weights).__name__}"
        )
    ints = {}
    for name, w in arrays.items():
        w = np.asarray(w)
        if w.dtype == bool or not (
            np.issubdtype(w.dtype, np.integer)
            or (np.issubdtype(w.dtype, np.floating) and np.array_equal(w, np.rint(w)))
        ):
            raise ValueError(
                f"weights: {name} must hold integers (fixed-point codes), got {w.dtype}"
            )
        ints[name] = w.astype(np.int64)
    core_weights = CoreWeights(**ints)
    core_weights.check(cfg)  # shape and narrow range, one-line ValueError
    # The file carries X, Y and Z as float32: every value must be exact there.
    carried = unit.load("float32_carried")(cfg)
    for what, frac, bits in carried:
        lo = np.float64(2.0**-frac)
        hi = lo * 2.0 ** (bits - 1)
        if bits > 24 or lo < np.finfo(np.float32).tiny or hi > np.finfo(np.float32).max:
            raise ValueError(
                f"{what}: a <{bits}, {frac}> fixed-point value is not exact in float32, the "
                "carrier type of QONNX tensors"
            )
    return core_weights


# -- building -------------------------------------------------------------------------------------
def build_model(
    cfg: CoreConfig, weights: CoreWeights | Mapping[str, Any], source: dict | None = None
) -> onnx.ModelProto:
    """The QONNX model of one core (validated, shapes and qonnx datatypes annotated).

    ``source`` (JSON-ready, e.g. {"checkpoint": ..., "layer": ...}) is kept in the model
    property ``eatt.source`` (:func:`core_source` reads it back)."""
    w = validate_exportable(cfg, weights)
    inputs: list = []
    inits: list = []
    # the unit's graph (eatt.units: core_graph or window_graph)
    nodes, outputs, graph_name, datatypes = unit_for(cfg).load("qonnx_graph")(cfg, w, inputs, inits)
    outputs = outputs if isinstance(outputs, list) else [outputs]
    graph = helper.make_graph(nodes, graph_name, inputs, outputs, initializer=inits)
    model = helper.make_model(
        graph,
        producer_name="eatt",
        producer_version=__version__,
        opset_imports=[
            helper.make_opsetid("", get_preferred_onnx_opset()),
            helper.make_opsetid(QONNX_DOMAIN, get_preferred_qonnx_opset()),
            helper.make_opsetid(DOMAIN, 1),
        ],
    )
    props = {"eatt.format_version": str(FORMAT_VERSION)}
    if source is not None:
        props["eatt.source"] = json.dumps(source, sort_keys=True)
    helper.set_model_props(model, props)
    wrapped = ModelWrapper(model)
    for name, dtype in datatypes.items():
        wrapped.set_tensor_datatype(name, DataType[dtype])
    wrapped = wrapped.transform(InferShapes())
    wrapped = wrapped.transform(InferDataTypes())
    onnx.checker.check_model(wrapped.model)
    return wrapped.model


def export_core(
    cfg: CoreConfig,
    weights: CoreWeights | Mapping[str, Any],
    path: str | os.PathLike,
    source: dict | None = None,
) -> dict:
    """Write the core's QONNX file to path (temp file + rename: never half a file).

    Validates first (ValueError naming the setting, nothing written) and reads the written file
    back with load_core before it replaces path. Returns a summary dict.
    """
    model = build_model(cfg, weights, source)
    path = Path(path)

    def write(tmp: str) -> None:
        onnx.save(model, tmp)
        load_core(tmp)  # what we wrote reads back as a valid core

    atomic_write(path, write, suffix=".onnx")
    unit = unit_for(cfg)
    formats = unit.load("formats")(cfg).to_dict()
    out_frac = unit.load("output_frac")(cfg)
    return {
        "path": str(path),
        "bytes": path.stat().st_size,
        "config": cfg.to_dict(),
        "formats": formats,
        "nodes": [f"{n.domain}.{n.op_type}" if n.domain else n.op_type for n in model.graph.node],
        "inputs": {i.name: _shape(i) for i in model.graph.input},
        "outputs": {o.name: _shape(o) for o in model.graph.output},
        "output_frac": out_frac,
        **({"source": source} if source is not None else {}),
    }


def core_source(path: str | os.PathLike | onnx.ModelProto) -> dict | None:
    """Where a file's core came from (``eatt export CHECKPOINT --layer NAME`` records the
    checkpoint and the layer), or None."""
    model, _ = _read_model(path)
    for prop in model.metadata_props:
        if prop.key == "eatt.source":
            try:
                return json.loads(prop.value)
            except ValueError:
                return None
    return None


# -- execution ------------------------------------------------------------------------------------
def check_export(
    path: str | os.PathLike,
    vectors: int = 1000,
    seed: int = 1,
    inputs: str | os.PathLike | None = None,
) -> dict:
    """Execute the file with qonnx on `vectors` random vectors plus the edge vectors and compare
    every output element with GoldenCore (the file's own config and weights). ``inputs``: a
    capture file (`eatt capture`): its first ``vectors`` vectors replace the random ones.

    Returns {"vectors", "edge_vectors", "mismatches" (vectors with any differing element),
    "first_mismatch" (one line or None), "qonnx_seconds", "vectors_per_s", "ok"}.
    """
    if isinstance(vectors, bool) or not isinstance(vectors, int) or vectors < 0:
        raise ValueError(f"vectors: must be a non-negative integer, got {vectors!r}")
    cfg, weights = load_core(path)
    if inputs is not None:
        if isinstance(cfg, WindowConfig):
            captured = load_window_capture(inputs, cfg, vectors)["steps"]
            check = unit_for(cfg).load("check_export")  # check_window_export
            return check(path, cfg, weights, vectors, seed, captured)
        capture = load_capture(inputs, cfg)
        return check_core_export(path, cfg, weights, vectors, seed, capture)
    # the file's unit (eatt.units): check_core_export or check_window_export
    return unit_for(cfg).load("check_export")(path, cfg, weights, vectors, seed)


def format_check(result: dict) -> str:
    """Human-readable lines for a check_export result (the CLI's non-JSON output)."""
    total = result["vectors"] + result["edge_vectors"]
    kind = "captured" if result.get("captured") else "random"
    line = (
        f"qonnx execution vs golden: {result['vectors']} {kind} + {result['edge_vectors']} edge "
        f"vectors, {result['mismatches']} mismatching ({result['vectors_per_s']} vectors/s)"
    )
    line += model_line(result.get("vs_model"), "qonnx execution")
    if result["first_mismatch"]:
        return line + "\n  " + result["first_mismatch"] + "\n  result: FAIL"
    if not result["ok"]:
        return line + "\n  result: FAIL"
    return line + f"\n  result: PASS ({total} vectors bit-exact)"
