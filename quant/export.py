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
    execute_core(path, x, y) -> codes    integer codes in, qonnx execution, integer codes out
    execute_window(path, steps) -> codes the same for a window file (steps: STEP_INPUTS arrays;
                                         O, then F for position flexible)
    check_export(path, vectors, seed)    qonnx execution vs GoldenCore (WindowGolden for kind
                                         window) on random + edge vectors
"""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from qonnx.core.datatype import DataType
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.transformation.infer_datatypes import InferDataTypes
from qonnx.transformation.infer_shapes import InferShapes
from qonnx.util.basic import get_preferred_onnx_opset, get_preferred_qonnx_opset

from eatt.config import CoreConfig, WindowConfig, atomic_write
from eatt.quant.golden import (
    CoreWeights,
    GoldenCore,
    check_masks,
    derive_formats,
    edge_inputs,
    edge_masks,
    random_inputs,
    random_masks,
    vector_report,
    weight_shapes,
)
from eatt.quant.ops import (
    DOMAIN,
    FORMAT_VERSION,
    OP_TYPE,
    WINDOW_OP_TYPE,
    core_from_node,
    core_node_inputs,
    lsb_frac,
    make_core_node,
    make_window_node,
    mask_datatypes,
    window_derived_attributes,
    window_focus_datatype,
    window_from_node,
    window_input_fracs,
    window_input_names,
    window_output_names,
)
from eatt.quant.vectors import (
    compare_model,
    load_capture,
    load_window_capture,
    model_line,
    model_outputs,
    window_step_inputs,
)
from eatt.quant.window import (
    STEP_INPUTS,
    WindowGolden,
    compact_memory,
    derive_window_formats,
    has_focus,
    random_window_inputs,
)
from eatt.units import UNITS, unit_for
from eatt.version import __version__

QONNX_DOMAIN = "qonnx.custom_op.general"
#: vectors per qonnx execution call (bounds the float tensors of one batched run)
_CHUNK = 2048


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
def _quant_node(
    model_inputs: list, inits: list, name: str, shape: tuple, cfg: CoreConfig
) -> onnx.NodeProto:
    model_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
    for suffix, value in (
        ("scale", 2.0**-cfg.in_frac),
        ("zeropt", 0.0),
        ("bitwidth", float(cfg.in_bits)),
    ):
        inits.append(numpy_helper.from_array(np.array(value, dtype=np.float32), f"{name}_{suffix}"))
    return helper.make_node(
        "Quant",
        [name, f"{name}_scale", f"{name}_zeropt", f"{name}_bitwidth"],
        [f"{name}_quant"],
        name=f"Quant_{name}",
        domain=QONNX_DOMAIN,
        signed=1,
        narrow=0,
        rounding_mode="ROUND",
    )


#: graph input of a window file -> its name in window.STEP_INPUTS
WINDOW_STEP_NAMES = {
    "X": "x",
    "P": "p",
    "W": "w",
    "K": "keys",
    "V": "values",
    "C": "counts",
    "L": "length",
    "G": "g",
}


def window_input_shapes(cfg: CoreConfig) -> dict[str, list[int]]:
    """Graph input name -> shape (batch 1) of a window file."""
    shapes = {
        "X": [1, cfg.dim],
        "P": [1, 1],
        "W": [1, 1],
        "K": [1, cfg.len_k, cfg.dim],
        "V": [1, cfg.len_k, cfg.dim],
        "C": [1, cfg.len_k],
        "L": [1, 1],
        "G": [1, 1],
    }
    return {name: shapes[name] for name in window_input_names(cfg)}


def window_input_datatypes(cfg: CoreConfig) -> dict[str, str]:
    """qonnx datatype of each integer-coded graph input of a window file (X goes through Quant)."""
    d = window_derived_attributes(cfg)
    wf = derive_window_formats(cfg)

    def fixed(bits: int, frac: int) -> str:
        return f"FIXED<{bits},{bits - frac}>" if frac >= 1 else f"SCALEDINT<{bits}>"

    types = {
        "P": f"UINT{max(1, (cfg.len_k - 1).bit_length())}",
        "W": f"UINT{max(1, cfg.window_d.bit_length())}",
        "K": fixed(wf.qk_code_bits, d["key_frac"]),
        "V": fixed(wf.v_code_bits, d["value_frac"]),
        "C": f"UINT{cfg.count_bits}",
        "L": f"UINT{cfg.len_k.bit_length()}",
        "G": f"UINT{max(1, cfg.g_levels.bit_length())}",
    }
    return {name: types[name] for name in window_input_names(cfg) if name != "X"}


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


def core_float32_carried(cfg: CoreConfig) -> tuple[tuple[str, int, int], ...]:
    """(setting, fraction, bits) of every value a core file carries as float32."""
    f = derive_formats(cfg)
    return (
        ("in_frac", cfg.in_frac, cfg.in_bits),
        ("out_bits", lsb_frac(f.out_lsb), cfg.out_bits),
    )


def window_float32_carried(cfg: CoreConfig) -> tuple[tuple[str, int, int], ...]:
    """(setting, fraction, bits) of every value a window file carries as float32."""
    d = window_derived_attributes(cfg)
    return (
        ("in_frac", cfg.in_frac, cfg.in_bits),
        ("qk_bits", d["key_frac"], d["qk_code_bits"]),
        ("v_bits", d["value_frac"], max(d["v_code_bits"], cfg.v_bits)),
        ("count_bits", 0, cfg.count_bits + 1),
    )


def window_graph(cfg: CoreConfig, w: CoreWeights, inputs: list, inits: list) -> tuple:
    """build_model's graph of the window unit: (nodes, outputs, graph name, input datatypes);
    fills the graph inputs and initializers. Outputs: O, and F for position flexible."""
    nodes = [_quant_node(inputs, inits, "X", (1, cfg.dim), cfg)]
    names = window_input_names(cfg)
    for name, shape in window_input_shapes(cfg).items():
        if name != "X":
            inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
    node_inputs = ["X_quant", *names[1:]]
    outs = list(window_output_names(cfg))
    nodes.append(make_window_node(cfg, w, node_inputs, outs, name=f"{WINDOW_OP_TYPE}_0"))
    shapes = {"O": [1, cfg.dim], "F": [1, cfg.heads]}
    outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outs]
    datatypes = window_input_datatypes(cfg)
    if "F" in outs:
        datatypes["F"] = window_focus_datatype(cfg).name
    return nodes, outputs, "eatt_window_unit", datatypes


def core_graph(cfg: CoreConfig, w: CoreWeights, inputs: list, inits: list) -> tuple:
    """build_model's graph of a core: (nodes, output, graph name, input datatypes: none, the
    Quant nodes carry them); fills the graph inputs and initializers."""
    nodes = [
        _quant_node(inputs, inits, "X", (1, cfg.len_q, cfg.dim), cfg),
        _quant_node(inputs, inits, "Y", (1, cfg.len_k, cfg.dim), cfg),
    ]
    masks = core_node_inputs(cfg)[2:]  # L, O: integers, fed directly
    for name in masks:
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 1]))
    nodes.append(make_core_node(cfg, w, ["X_quant", "Y_quant", *masks], "Z", name=f"{OP_TYPE}_0"))
    output = helper.make_tensor_value_info("Z", TensorProto.FLOAT, [1, cfg.len_q, cfg.dim])
    return nodes, output, f"eatt_{cfg.kind}_core", mask_datatypes(cfg)


def core_output_frac(cfg: CoreConfig) -> int:
    """Fraction bits of a core's output codes."""
    return lsb_frac(derive_formats(cfg).out_lsb)


def window_output_frac(cfg: CoreConfig) -> int:
    """Fraction bits of the window unit's output codes (O is on V's grid)."""
    return window_derived_attributes(cfg)["value_frac"]


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


def _shape(value_info: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in value_info.type.tensor_type.shape.dim]


# -- reading --------------------------------------------------------------------------------------
def _read_model(source: str | os.PathLike | onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    if isinstance(source, onnx.ModelProto):
        return source, "model"
    where = str(source)
    if not Path(source).is_file():
        raise ValueError(f"{where}: no such file")
    try:
        return onnx.load(str(source)), where
    except Exception as err:  # protobuf decode errors are long: keep the first line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{where}: not an ONNX file ({first})") from None


def _core_node(model: onnx.ModelProto, where: str) -> onnx.NodeProto:
    ours = (OP_TYPE, WINDOW_OP_TYPE)
    cores = [n for n in model.graph.node if n.domain == DOMAIN and n.op_type in ours]
    if not cores:
        raise ValueError(
            f"{where}: not an eatt core file (no {DOMAIN} {OP_TYPE} or {WINDOW_OP_TYPE} node)"
        )
    if len(cores) > 1:
        raise ValueError(f"{where}: holds {len(cores)} eatt nodes; one core per file")
    return cores[0]


def _input_quant(
    model: onnx.ModelProto, core: onnx.NodeProto, cfg: CoreConfig, where: str
) -> list[str]:
    """Check the Quant node in front of each core input; return the graph input names (X, Y)."""
    producers = {o: n for n in model.graph.node for o in n.output}
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    graph_inputs = {i.name: _shape(i) for i in model.graph.input}
    names = []
    if core.op_type == WINDOW_OP_TYPE:
        return _window_inputs(core, cfg, where, producers, graph_inputs, inits)
    labels = core_node_inputs(cfg)
    if len(core.input) != len(labels):
        raise ValueError(
            f"{where}: {OP_TYPE} has {len(core.input)} inputs, expected {len(labels)} "
            f"({', '.join(labels)})"
        )
    quants = zip("XY", core.input[:2], (cfg.len_q, cfg.len_k), strict=True)
    for label, tensor, length in quants:
        source = _check_quant(label, tensor, cfg, where, producers, inits, graph_inputs)
        if graph_inputs[source][1:] != [length, cfg.dim]:
            raise ValueError(
                f"{where}: input {label} '{source}' has shape {graph_inputs[source]}, "
                f"expected (batch, {length}, {cfg.dim})"
            )
        names.append(source)
    for label, source in zip(labels[2:], core.input[2:], strict=True):  # the masks: direct
        if source not in graph_inputs or graph_inputs[source][1:] != [1]:
            raise ValueError(f"{where}: {OP_TYPE} input {label} is not a (batch, 1) graph input")
        names.append(source)
    return names


def _window_inputs(core, cfg, where, producers, graph_inputs, inits) -> list[str]:
    """Graph input names of a window file, in node order: X behind its Quant, the rest direct."""
    labels = window_input_names(cfg)
    if len(core.input) != len(labels):
        raise ValueError(
            f"{where}: {WINDOW_OP_TYPE} has {len(core.input)} inputs, expected {len(labels)} "
            f"({', '.join(labels)})"
        )
    shapes = window_input_shapes(cfg)
    names = []
    for label, tensor in zip(labels, core.input, strict=True):
        if label == "X":
            source = _check_quant(label, tensor, cfg, where, producers, inits, graph_inputs)
        else:
            source = tensor
            if source not in graph_inputs:
                raise ValueError(f"{where}: {WINDOW_OP_TYPE} input {label} is not a graph input")
        if graph_inputs[source][1:] != shapes[label][1:]:
            raise ValueError(
                f"{where}: input {label} '{source}' has shape {graph_inputs[source]}, "
                f"expected (batch, {', '.join(map(str, shapes[label][1:]))})"
            )
        names.append(source)
    return names


def _check_quant(label, tensor, cfg, where, producers, inits, graph_inputs) -> str:
    """The graph input behind the Quant node feeding `tensor` (checked: the input format)."""
    q = producers.get(tensor)
    if q is None or q.op_type != "Quant":
        op = unit_for(cfg).op_type
        raise ValueError(f"{where}: {op} input {label} does not come from a Quant node")
    attrs = {a.name: helper.get_attribute_value(a) for a in q.attribute}
    rounding = attrs.get("rounding_mode", b"ROUND")
    params = [inits.get(name) for name in q.input[1:4]]
    expected = (2.0**-cfg.in_frac, 0.0, float(cfg.in_bits))
    ok = (
        len(q.input) == 4
        and all(p is not None and p.size == 1 for p in params)
        and all(float(p.reshape(())) == e for p, e in zip(params, expected, strict=True))
        and attrs.get("signed") == 1
        and attrs.get("narrow") == 0
        and (rounding.decode() if isinstance(rounding, bytes) else rounding).upper() == "ROUND"
    )
    if not ok:
        raise ValueError(
            f"{where}: Quant node '{q.name}' in front of input {label} is not the config's "
            f"input format (signed <{cfg.in_bits}, {cfg.in_frac}>, zero point 0, ROUND)"
        )
    source = q.input[0]
    if source not in graph_inputs:
        raise ValueError(f"{where}: Quant node '{q.name}' is not fed by a graph input")
    return source


def load_core(path: str | os.PathLike | onnx.ModelProto) -> tuple[CoreConfig, CoreWeights]:
    """(config, integer weights) of an exported core; a one-line ValueError for anything else."""
    model, where = _read_model(path)
    cfg, weights = _load(model, where)[:2]
    return cfg, weights


def core_input_names(source: str | os.PathLike | onnx.ModelProto) -> list[str]:
    """The graph inputs feeding the core's node, in the node's input order (X, Y for a core;
    X, P, W, K, V, C, L[, G] for a window unit)."""
    model, where = _read_model(source)
    return _load(model, where)[2]


def _load(model: onnx.ModelProto, where: str) -> tuple[CoreConfig, CoreWeights, list[str], str]:
    core = _core_node(model, where)
    try:
        read = window_from_node if core.op_type == WINDOW_OP_TYPE else core_from_node
        cfg, weights = read(core)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    inputs = _input_quant(model, core, cfg, where)
    outputs = [o.name for o in model.graph.output]
    want = len(window_output_names(cfg)) if core.op_type == WINDOW_OP_TYPE else 1
    if want == 2 and len(core.output) == 1:
        raise ValueError(
            f"{where}: a flexible window unit without the focus output F (written before eatt "
            "had it); export it again"
        )
    if len(core.output) != want or outputs != list(core.output):
        what = "outputs are not" if want > 1 else "output is not"
        raise ValueError(f"{where}: the graph's {what} the {core.op_type} output{'s' * (want > 1)}")
    return cfg, weights, inputs, outputs[0]


# -- execution ------------------------------------------------------------------------------------
def _batched(model: onnx.ModelProto, batch: int) -> ModelWrapper:
    """A copy of model whose inputs and outputs have batch size `batch` (shapes re-inferred)."""
    m = copy.deepcopy(model)
    for vi in (*m.graph.input, *m.graph.output):
        vi.type.tensor_type.shape.dim[0].dim_value = batch
    del m.graph.value_info[:]
    return ModelWrapper(m).transform(InferShapes())


def execute_core(
    source: str | os.PathLike | onnx.ModelProto,
    x: np.ndarray,
    y: np.ndarray,
    masks: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    """Run the file with qonnx's execute_onnx on integer input codes; return integer outputs.

    x: (n, len_q, dim), y: (n, len_k, dim) codes in the config's input range; masks: the
    core's mask inputs (length, offset: (n,) integers; a missing one hides nothing). The codes
    are turned into real values (code * 2**-in_frac), executed in batches, and the real outputs
    turned back into codes (output / out_lsb).
    """
    from qonnx.core.onnx_exec import execute_onnx  # loads onnxruntime: only to execute

    model, where = _read_model(source)
    cfg, _, names, out_name = _load(model, where)
    if isinstance(cfg, WindowConfig):
        raise ValueError(f"{where}: a window unit file; run it with execute_window")
    x_name, y_name, *mask_names = names
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 3 or y.ndim != 3 or len(x) != len(y):
        raise ValueError(
            f"inputs: expected x (n, len_q, dim), y (n, len_k, dim); got {x.shape}, {y.shape}"
        )
    masks = check_masks(cfg, len(x), masks)
    out_frac = lsb_frac(derive_formats(cfg).out_lsb)
    scale = 2.0**-cfg.in_frac
    parts = []
    models: dict[int, ModelWrapper] = {}
    for start in range(0, len(x), _CHUNK):
        xs, ys = x[start : start + _CHUNK], y[start : start + _CHUNK]
        n = len(xs)
        if n not in models:
            models[n] = _batched(model, n)
        feed = {
            x_name: (xs.astype(np.float64) * scale).astype(np.float32),
            y_name: (ys.astype(np.float64) * scale).astype(np.float32),
        }
        for mask, name in zip(cfg.mask_inputs, mask_names, strict=True):
            feed[name] = masks[mask][start : start + _CHUNK, None].astype(np.float32)
        real = execute_onnx(models[n], feed)[out_name]
        parts.append(np.asarray(real, dtype=np.float64) * 2.0**out_frac)
    out = np.concatenate(parts) if parts else np.zeros((0, cfg.len_q, cfg.dim))
    codes = np.rint(out)
    if not np.array_equal(codes, out):
        raise ValueError(f"{where}: qonnx output is not on the 2**-{out_frac} grid")
    return codes.astype(np.int64)


def window_edge_inputs(cfg: CoreConfig) -> dict[str, np.ndarray]:
    """Deterministic window steps at the corners (a dict of STEP_INPUTS arrays).

    Windows clipped at both sequence edges and inside, w = 0 and w = D, a one-row memory, the
    largest codes everywhere with the largest counts (the widest sums), and L0Drop compacted
    memories (Algorithm 1) with every gate open, one gate open and none but the first.
    """
    wf = derive_window_formats(cfg)
    lk, dim, d = cfg.len_k, cfg.dim, cfg.window_d
    rng = np.random.default_rng(12345)
    kmax, vmax = 2 ** (wf.qk_code_bits - 1) - 1, 2 ** (wf.v_code_bits - 1) - 1
    ilo, ihi = -(2 ** (cfg.in_bits - 1)), 2 ** (cfg.in_bits - 1) - 1
    steps: list[dict] = []

    def step(p, w, length=lk, keys=None, values=None, counts=None, x=None, g=None):
        steps.append(
            {
                "x": rng.integers(ilo, ihi + 1, size=dim) if x is None else x,
                "p": p,
                "w": w,
                "keys": rng.integers(-kmax - 1, kmax + 1, size=(lk, dim)) if keys is None else keys,
                "values": rng.integers(-vmax - 1, vmax + 1, size=(lk, dim))
                if values is None
                else values,
                "counts": np.ones(lk, dtype=np.int64) if counts is None else counts,
                "length": length,
                "g": cfg.g_levels if g is None else g,
            }
        )

    for p in (0, lk - 1, lk // 2):
        for w in sorted({0, d, max(d - 1, 0)}):
            step(p, w)
    step(0, d, length=1)
    step(lk - 1, d, g=0)
    full = np.full((lk, dim), kmax)
    step(lk // 2, d, keys=full, values=np.full((lk, dim), vmax), counts=np.full(lk, wf.count_max))
    step(lk // 2, d, keys=-full - 1, values=np.full((lk, dim), -vmax - 1), x=np.full(dim, ilo))
    step(0, d, x=np.full(dim, ihi), counts=np.full(lk, wf.count_max))
    # L0Drop compaction of a random gated memory: all kept, one kept, only row 0 kept
    for kept in (lk, 1, 0):
        gates = np.zeros(lk, dtype=np.int64)
        gates[rng.permutation(lk)[: max(kept, 1)] if kept else [0]] = 1
        keys = rng.integers(-kmax - 1, kmax + 1, size=(lk, dim))
        values = rng.integers(-vmax - 1, vmax + 1, size=(lk, dim))
        # the count of the zero row, N - N', must fit count_bits: N = the memory size
        k, v, c, rows = compact_memory(keys * gates[:, None], values * gates[:, None], gates)
        c = np.minimum(c, wf.count_max)
        step(rows - 1, d, length=rows, keys=k, values=v, counts=c)
    return {name: np.asarray([s[name] for s in steps], dtype=np.int64) for name in STEP_INPUTS}


def window_vectors(
    cfg: CoreConfig, vectors: int, seed: int, captured: dict | None = None
) -> tuple[dict[str, np.ndarray], int]:
    """random_window_inputs(vectors, seed) followed by window_edge_inputs; (steps, edge count).
    ``captured``: a window capture's grouped steps (load_window_capture), its first ``vectors``
    replace the random ones."""
    if captured is not None:
        rand = {k: v[:vectors] for k, v in window_step_inputs(captured).items()}
    else:
        rand = random_window_inputs(cfg, vectors, seed=seed)
    edge = window_edge_inputs(cfg)
    steps = {name: np.concatenate([rand[name], edge[name]]) for name in STEP_INPUTS}
    return steps, len(edge["x"])


def window_expected(golden: WindowGolden, steps: Mapping[str, np.ndarray]) -> np.ndarray:
    """The golden outputs of steps (STEP_INPUTS arrays) as every level reports them: O (n, dim),
    with position flexible followed by the focus F (n, dim + heads)."""
    if not has_focus(golden.cfg):
        return golden.forward(**steps)
    return np.concatenate(golden.forward(**steps, with_focus=True), axis=1)


def execute_window(
    source: str | os.PathLike | onnx.ModelProto, steps: Mapping[str, np.ndarray]
) -> np.ndarray:
    """Run a window file with qonnx's execute_onnx on integer step inputs; integer outputs.

    steps: arrays named as window.STEP_INPUTS (x (n, dim); p, w, length, g (n,); keys, values
    (n, len_k, dim); counts (n, len_k)), g only read for position flexible. Returns O (n, dim),
    with position flexible followed by the focus F: (n, dim + heads) (window_expected's layout).
    """
    from qonnx.core.onnx_exec import execute_onnx  # loads onnxruntime: only to execute

    model, where = _read_model(source)
    cfg, _, names, out_name = _load(model, where)
    if not isinstance(cfg, WindowConfig):
        raise ValueError(f"{where}: not a window unit file; run it with execute_core")
    labels = window_input_names(cfg)
    fracs = window_input_fracs(cfg)
    shapes = window_input_shapes(cfg)
    source_of = WINDOW_STEP_NAMES
    missing = [source_of[label] for label in labels if source_of[label] not in steps]
    if missing:
        raise ValueError(f"inputs: missing '{missing[0]}'")
    arrays = {label: np.asarray(steps[source_of[label]]) for label in labels}
    n = len(arrays["X"])
    for label, a in arrays.items():
        want = (n, *shapes[label][1:])
        if a.size != int(np.prod(want)):
            raise ValueError(f"inputs: {source_of[label]} has shape {a.shape}, expected {want}")
    parts = []
    models: dict[int, ModelWrapper] = {}
    for start in range(0, n, _CHUNK):
        m = min(_CHUNK, n - start)
        if m not in models:
            models[m] = _batched(model, m)
        feed = {}
        for label, name in zip(labels, names, strict=True):
            a = arrays[label].reshape(n, *shapes[label][1:])[start : start + m]
            feed[name] = (a.astype(np.float64) * 2.0 ** -fracs[label]).astype(np.float32)
        result = execute_onnx(models[m], feed)
        real = np.asarray(result[out_name], dtype=np.float64).reshape(m, cfg.dim)
        part = [real * 2.0 ** fracs["V"]]
        if has_focus(cfg):  # F: integer rows, after O's elements
            part.append(np.asarray(result[model.graph.output[1].name], np.float64).reshape(m, -1))
        parts.append(np.concatenate(part, axis=1))
    width = cfg.dim + (cfg.heads if has_focus(cfg) else 0)
    out = np.concatenate(parts) if parts else np.zeros((0, width))
    codes = np.rint(out)
    if not np.array_equal(codes, out):
        raise ValueError(f"{where}: qonnx output is not on the 2**-{fracs['V']} grid")
    return codes.astype(np.int64)


def _mismatch_report(expected, got, vectors, seed, seconds, captured: bool = False) -> dict:
    """golden.vector_report (random vectors first, then the edge ones) plus qonnx's speed."""
    report = vector_report(expected, got, vectors, seed, captured)
    n = len(expected)
    return {
        **report,
        "qonnx_seconds": round(seconds, 4),
        "vectors_per_s": round(n / seconds, 1) if seconds > 0 else None,
        "ok": not report["mismatches"],
    }


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
            return check_window_export(path, cfg, weights, vectors, seed, captured)
        capture = load_capture(inputs, cfg)
        return check_core_export(path, cfg, weights, vectors, seed, capture)
    # the file's unit (eatt.units): check_core_export or check_window_export
    return unit_for(cfg).load("check_export")(path, cfg, weights, vectors, seed)


def check_window_export(
    path: str | os.PathLike,
    cfg: CoreConfig,
    weights: CoreWeights,
    vectors: int,
    seed: int,
    captured: dict | None = None,
) -> dict:
    """check_export of a window unit file (cfg, weights: read from it): random steps (or a
    capture's, ``captured``) plus the edge steps (window_vectors) against WindowGolden."""
    steps, n_edge = window_vectors(cfg, vectors, seed, captured)
    expected = window_expected(WindowGolden(cfg, weights), steps)
    start = time.perf_counter()
    got = execute_window(path, steps)
    seconds = time.perf_counter() - start
    n = len(expected) - n_edge  # a capture may hold fewer steps than asked
    return _mismatch_report(expected, got, n, seed, seconds, captured is not None)


def check_core_export(
    path: str | os.PathLike,
    cfg: CoreConfig,
    weights: CoreWeights,
    vectors: int,
    seed: int,
    capture: dict | None = None,
) -> dict:
    """check_export of a core file (cfg, weights: read from it): random (or the capture's
    first ``vectors``) plus edge vectors against GoldenCore."""
    golden = GoldenCore(cfg, weights)
    if capture is None:
        x, y = random_inputs(cfg, vectors, seed=seed)
        masks = random_masks(cfg, vectors, seed)
    else:
        x, y = capture["x"][:vectors], capture["y"][:vectors]
        masks = {k: v[:vectors] for k, v in capture["masks"].items()}
        vectors = len(x)
    ex, ey = edge_inputs(cfg)
    edge = edge_masks(cfg, len(ex))
    x, y = np.concatenate([x, ex]), np.concatenate([y, ey])
    masks = {k: np.concatenate([masks[k], edge[k]]) for k in edge}
    expected = golden.forward(x, y, masks=masks)
    start = time.perf_counter()
    got = execute_core(path, x, y, masks)
    seconds = time.perf_counter() - start
    report = _mismatch_report(expected, got, vectors, seed, seconds, capture is not None)
    if capture is not None:
        report["inputs"] = {k: capture["meta"].get(k) for k in ("checkpoint", "layer", "split")}
        report["vs_model"] = compare_model(model_outputs(capture, cfg, vectors), got[:vectors])
        if report["vs_model"] and report["vs_model"]["mismatches"]:
            report["ok"] = False
    return report


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
