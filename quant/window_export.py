"""The windowed unit's QONNX file (kind window): its graph (a Quant node on X, the
WindowAttention node), its float32 carriers, and executing and checking a file with qonnx
against WindowGolden on random and edge decoding steps (docs/export.md, "Kind window"). The
core's pieces it builds on are eatt.quant.core_export's and eatt.quant.reader's."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper
from qonnx.core.modelwrapper import ModelWrapper

from eatt.config import CoreConfig, WindowConfig
from eatt.quant.core_export import _CHUNK, _batched, _mismatch_report, _quant_node
from eatt.quant.golden import CoreWeights
from eatt.quant.ops import (
    WINDOW_OP_TYPE,
    make_window_node,
    window_derived_attributes,
    window_focus_datatype,
    window_input_fracs,
    window_input_names,
    window_output_names,
)
from eatt.quant.reader import _load, _read_model, window_input_datatypes, window_input_shapes
from eatt.quant.vectors import window_step_inputs
from eatt.quant.window import (
    STEP_INPUTS,
    WindowGolden,
    compact_memory,
    derive_window_formats,
    has_focus,
    random_window_inputs,
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


def window_output_frac(cfg: CoreConfig) -> int:
    """Fraction bits of the window unit's output codes (O is on V's grid)."""
    return window_derived_attributes(cfg)["value_frac"]


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
