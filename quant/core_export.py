"""The attention core's QONNX file (kinds of the core unit, eatt/units.py): its graph (Quant
nodes on X and Y, the AttentionCore node), the values it carries as float32, its output
fraction, and executing and checking a file with qonnx against GoldenCore on random and edge
vectors. The window unit's are in quant/window_export.py, which builds on the pieces here
(_quant_node, _batched, _mismatch_report). eatt.quant.export writes and checks a file of any
unit through the registry and re-exports these names.
"""

from __future__ import annotations

import copy
import os
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.transformation.infer_shapes import InferShapes

from eatt.config import CoreConfig, WindowConfig
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
)
from eatt.quant.ops import OP_TYPE, core_node_inputs, lsb_frac, make_core_node, mask_datatypes
from eatt.quant.reader import QONNX_DOMAIN, _load, _read_model
from eatt.quant.vectors import compare_model, model_outputs

#: vectors per qonnx execution call (bounds the float tensors of one batched run)
_CHUNK = 2048


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


def core_float32_carried(cfg: CoreConfig) -> tuple[tuple[str, int, int], ...]:
    """(setting, fraction, bits) of every value a core file carries as float32."""
    f = derive_formats(cfg)
    return (
        ("in_frac", cfg.in_frac, cfg.in_bits),
        ("out_bits", lsb_frac(f.out_lsb), cfg.out_bits),
    )


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
