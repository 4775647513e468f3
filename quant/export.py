"""QONNX export of an attention core: write, read back, execute with qonnx, compare with golden.

The file (docs/export.md describes it node by node):

    X (1, len_q, dim) float -> Quant(scale 2**-in_frac, zero point 0, in_bits, signed) -> X_quant
    Y (1, len_k, dim) float -> Quant(same format)                                       -> Y_quant
    AttentionCore (domain eatt.quant.ops; config, weights, formats, tables as attributes)
        (X_quant, Y_quant) -> Z (1, len_q, dim) float = integer output * 2**-out_frac

    export_core(cfg, weights, path)      validate, write atomically, read back; returns a summary
    load_core(path) -> (cfg, weights)    anything that is not one of our files: one-line ValueError
    execute_core(path, x, y) -> codes    integer codes in, qonnx execution, integer codes out
    check_export(path, vectors, seed)    qonnx execution vs GoldenCore on random + edge vectors
"""

from __future__ import annotations

import copy
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.transformation.infer_datatypes import InferDataTypes
from qonnx.transformation.infer_shapes import InferShapes
from qonnx.util.basic import get_preferred_onnx_opset, get_preferred_qonnx_opset

import eatt
from eatt.config import CoreConfig
from eatt.quant.golden import CoreWeights, GoldenCore, derive_formats, edge_inputs, random_inputs
from eatt.quant.ops import (
    DOMAIN,
    EXPORTABLE_KINDS,
    FORMAT_VERSION,
    OP_TYPE,
    core_from_node,
    lsb_frac,
    make_core_node,
)

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
    if cfg.kind not in EXPORTABLE_KINDS:
        raise ValueError(
            f"kind: {cfg.kind!r} cannot be exported (supported: {', '.join(EXPORTABLE_KINDS)})"
        )
    if isinstance(weights, CoreWeights):
        arrays = weights.as_dict()
    elif isinstance(weights, Mapping):
        missing = [n for n in CoreWeights.NAMES if n not in weights]
        if missing:
            raise ValueError(f"weights: missing '{missing[0]}'")
        arrays = {n: weights[n] for n in CoreWeights.NAMES}
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
    f = derive_formats(cfg)
    for what, frac, bits in (
        ("in_frac", cfg.in_frac, cfg.in_bits),
        ("out_bits", lsb_frac(f.out_lsb), cfg.out_bits),
    ):
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


def build_model(cfg: CoreConfig, weights: CoreWeights | Mapping[str, Any]) -> onnx.ModelProto:
    """The QONNX model of one core (validated, shapes and qonnx datatypes annotated)."""
    w = validate_exportable(cfg, weights)
    inputs: list = []
    inits: list = []
    nodes = [
        _quant_node(inputs, inits, "X", (1, cfg.len_q, cfg.dim), cfg),
        _quant_node(inputs, inits, "Y", (1, cfg.len_k, cfg.dim), cfg),
        make_core_node(cfg, w, ["X_quant", "Y_quant"], "Z", name=f"{OP_TYPE}_0"),
    ]
    output = helper.make_tensor_value_info("Z", TensorProto.FLOAT, [1, cfg.len_q, cfg.dim])
    graph = helper.make_graph(nodes, f"eatt_{cfg.kind}_core", inputs, [output], initializer=inits)
    model = helper.make_model(
        graph,
        producer_name="eatt",
        producer_version=eatt.__version__,
        opset_imports=[
            helper.make_opsetid("", get_preferred_onnx_opset()),
            helper.make_opsetid(QONNX_DOMAIN, get_preferred_qonnx_opset()),
            helper.make_opsetid(DOMAIN, 1),
        ],
    )
    helper.set_model_props(model, {"eatt.format_version": str(FORMAT_VERSION)})
    wrapped = ModelWrapper(model)
    wrapped = wrapped.transform(InferShapes())
    wrapped = wrapped.transform(InferDataTypes())
    onnx.checker.check_model(wrapped.model)
    return wrapped.model


def export_core(
    cfg: CoreConfig, weights: CoreWeights | Mapping[str, Any], path: str | os.PathLike
) -> dict:
    """Write the core's QONNX file to path (temp file + rename: never half a file).

    Validates first (ValueError naming the setting, nothing written) and reads the written file
    back with load_core before it replaces path. Returns a summary dict.
    """
    model = build_model(cfg, weights)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".onnx", dir=path.parent)
    os.close(fd)
    try:
        onnx.save(model, tmp)
        load_core(tmp)  # what we wrote reads back as a valid core
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {
        "path": str(path),
        "bytes": path.stat().st_size,
        "config": cfg.to_dict(),
        "formats": derive_formats(cfg).to_dict(),
        "nodes": [f"{n.domain}.{n.op_type}" if n.domain else n.op_type for n in model.graph.node],
        "inputs": {i.name: _shape(i) for i in model.graph.input},
        "outputs": {o.name: _shape(o) for o in model.graph.output},
        "output_frac": lsb_frac(derive_formats(cfg).out_lsb),
    }


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
    cores = [n for n in model.graph.node if n.domain == DOMAIN and n.op_type == OP_TYPE]
    if not cores:
        raise ValueError(f"{where}: not an eatt core file (no {DOMAIN} {OP_TYPE} node)")
    if len(cores) > 1:
        raise ValueError(f"{where}: holds {len(cores)} {OP_TYPE} nodes; one core per file")
    return cores[0]


def _input_quant(
    model: onnx.ModelProto, core: onnx.NodeProto, cfg: CoreConfig, where: str
) -> list[str]:
    """Check the Quant node in front of each core input; return the graph input names (X, Y)."""
    producers = {o: n for n in model.graph.node for o in n.output}
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    graph_inputs = {i.name: _shape(i) for i in model.graph.input}
    names = []
    if len(core.input) != 2:
        raise ValueError(f"{where}: {OP_TYPE} has {len(core.input)} inputs, expected 2 (X, Y)")
    for label, tensor, length in zip("XY", core.input, (cfg.len_q, cfg.len_k), strict=True):
        q = producers.get(tensor)
        if q is None or q.op_type != "Quant":
            raise ValueError(f"{where}: {OP_TYPE} input {label} does not come from a Quant node")
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
        if graph_inputs[source][1:] != [length, cfg.dim]:
            raise ValueError(
                f"{where}: input {label} '{source}' has shape {graph_inputs[source]}, "
                f"expected (batch, {length}, {cfg.dim})"
            )
        names.append(source)
    return names


def load_core(path: str | os.PathLike | onnx.ModelProto) -> tuple[CoreConfig, CoreWeights]:
    """(config, integer weights) of an exported core; a one-line ValueError for anything else."""
    model, where = _read_model(path)
    cfg, weights = _load(model, where)[:2]
    return cfg, weights


def _load(model: onnx.ModelProto, where: str) -> tuple[CoreConfig, CoreWeights, list[str], str]:
    core = _core_node(model, where)
    try:
        cfg, weights = core_from_node(core)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    inputs = _input_quant(model, core, cfg, where)
    outputs = [o.name for o in model.graph.output]
    if outputs != [core.output[0]]:
        raise ValueError(f"{where}: the graph's output is not the {OP_TYPE} output")
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
    source: str | os.PathLike | onnx.ModelProto, x: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """Run the file with qonnx's execute_onnx on integer input codes; return integer outputs.

    x: (n, len_q, dim), y: (n, len_k, dim) codes in the config's input range. The codes are
    turned into real values (code * 2**-in_frac), executed in batches, and the real outputs
    turned back into codes (output / out_lsb).
    """
    from qonnx.core.onnx_exec import execute_onnx

    model, where = _read_model(source)
    cfg, _, (x_name, y_name), out_name = _load(model, where)
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 3 or y.ndim != 3 or len(x) != len(y):
        raise ValueError(
            f"inputs: expected x (n, len_q, dim), y (n, len_k, dim); got {x.shape}, {y.shape}"
        )
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
        real = execute_onnx(models[n], feed)[out_name]
        parts.append(np.asarray(real, dtype=np.float64) * 2.0**out_frac)
    out = np.concatenate(parts) if parts else np.zeros((0, cfg.len_q, cfg.dim))
    codes = np.rint(out)
    if not np.array_equal(codes, out):
        raise ValueError(f"{where}: qonnx output is not on the 2**-{out_frac} grid")
    return codes.astype(np.int64)


def check_export(path: str | os.PathLike, vectors: int = 1000, seed: int = 1) -> dict:
    """Execute the file with qonnx on `vectors` random vectors plus the edge vectors and compare
    every output element with GoldenCore (the file's own config and weights).

    Returns {"vectors", "edge_vectors", "mismatches" (vectors with any differing element),
    "first_mismatch" (one line or None), "qonnx_seconds", "vectors_per_s", "ok"}.
    """
    if isinstance(vectors, bool) or not isinstance(vectors, int) or vectors < 0:
        raise ValueError(f"vectors: must be a non-negative integer, got {vectors!r}")
    cfg, weights = load_core(path)
    golden = GoldenCore(cfg, weights)
    x, y = random_inputs(cfg, vectors, seed=seed)
    ex, ey = edge_inputs(cfg)
    x, y = np.concatenate([x, ex]), np.concatenate([y, ey])
    expected = golden.forward(x, y)
    start = time.perf_counter()
    got = execute_core(path, x, y)
    seconds = time.perf_counter() - start
    bad = np.flatnonzero((expected != got).reshape(len(x), -1).any(axis=1))
    first = None
    if len(bad):
        i = int(bad[0])
        where = f"random vector {i} (seed {seed})" if i < vectors else f"edge vector {i - vectors}"
        diff = tuple(int(v) for v in np.argwhere(expected[i] != got[i])[0])
        first = (
            f"{len(bad)} of {len(x)} vectors differ; first: {where}, output index {diff}: "
            f"expected {int(expected[i][diff])}, got {int(got[i][diff])}"
        )
    return {
        "vectors": vectors,
        "edge_vectors": int(len(ex)),
        "mismatches": int(len(bad)),
        "first_mismatch": first,
        "qonnx_seconds": round(seconds, 4),
        "vectors_per_s": round(len(x) / seconds, 1) if seconds > 0 else None,
        "ok": not len(bad),
    }


def format_check(result: dict) -> str:
    """Human-readable lines for a check_export result (the CLI's non-JSON output)."""
    total = result["vectors"] + result["edge_vectors"]
    line = (
        f"qonnx execution vs golden: {result['vectors']} random + {result['edge_vectors']} edge "
        f"vectors, {result['mismatches']} mismatching ({result['vectors_per_s']} vectors/s)"
    )
    if result["first_mismatch"]:
        return line + "\n  " + result["first_mismatch"] + "\n  result: FAIL"
    return line + f"\n  result: PASS ({total} vectors bit-exact)"
