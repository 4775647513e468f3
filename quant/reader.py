"""Reading a QONNX file of ours back: the core or window node, its Quant nodes checked against
the config (the input format), and the graph inputs in node order; anything that is not one of
our files is a one-line ValueError naming what is wrong. Also the window file's input shapes and
datatypes (what its graph declares). eatt.quant.export re-exports it."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from onnx import helper, numpy_helper

from eatt.config import CoreConfig
from eatt.quant.golden import (
    CoreWeights,
)
from eatt.quant.ops import (
    DOMAIN,
    OP_TYPE,
    WINDOW_OP_TYPE,
    core_from_node,
    core_node_inputs,
    window_derived_attributes,
    window_from_node,
    window_input_names,
    window_output_names,
)
from eatt.quant.window import (
    derive_window_formats,
)

QONNX_DOMAIN = "qonnx.custom_op.general"


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


def _shape(value_info: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in value_info.type.tensor_type.shape.dim]


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
        source = _check_quant(OP_TYPE, label, tensor, cfg, where, producers, inits, graph_inputs)
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
            source = _check_quant(
                WINDOW_OP_TYPE, label, tensor, cfg, where, producers, inits, graph_inputs
            )
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


def _check_quant(op, label, tensor, cfg, where, producers, inits, graph_inputs) -> str:
    """The graph input behind the Quant node feeding `tensor`, input `label` of the `op` node
    (checked: the input format)."""
    q = producers.get(tensor)
    if q is None or q.op_type != "Quant":
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
        raise ValueError(
            f"{where}: the core's input {label} is computed in the graph (Quant node "
            f"'{q.name}' is not fed by a graph input): a whole model? `eatt hls` takes one; "
            "flow, rtl, sim and power take one core's file (eatt.export_layer)"
        )
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
