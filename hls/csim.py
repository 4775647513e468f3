"""The hls stage's check: the vectors a project's C simulation is checked on, and its run.

    core_check_data / window_check_data(model, cfg, weights, vectors, seed, capture)
        the real inputs (graph order) and the golden output codes of a core (GoldenCore) or of
        the window unit (WindowGolden): the unit's ``hls_check_data`` stage (eatt/units.py),
        which eatt.hls.project.check_data asks the registry for
    predict_codes / run_csim
        integer output codes of the compiled C simulation
    write_testbench_data / _write_tb
        tb_data/ for the project's own testbench (vendor C simulation, co-simulation)

eatt.hls.project.write_project runs them; it re-exports these names.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import onnx

from eatt.config import CoreConfig
from eatt.quant.golden import (
    CoreWeights,
    GoldenCore,
    check_masks,
    derive_formats,
    edge_inputs,
    random_inputs,
    vector_masks,
    vector_report,
)
from eatt.quant.ops import (
    MASK_INPUT_NAMES,
    core_node_inputs,
    lsb_frac,
    window_input_fracs,
    window_input_names,
)
from eatt.quant.reader import core_input_names
from eatt.quant.window import WindowGolden


def _vectors(cfg: CoreConfig, vectors: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = random_inputs(cfg, vectors, seed=seed)
    ex, ey = edge_inputs(cfg)
    return np.concatenate([x, ex]), np.concatenate([y, ey])


def run_csim(
    hls_model,
    cfg: CoreConfig,
    x: np.ndarray,
    y: np.ndarray,
    masks: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    """Integer output codes of the compiled C simulation for integer input codes x, y (and a
    masked core's length / offset per vector; a missing one hides nothing). The model's inputs
    are in graph order as an exported file has them: X, Y, then L, O."""
    scale = 2.0**-cfg.in_frac
    n = len(x)
    masks = check_masks(cfg, n, masks)
    feed = [
        np.ascontiguousarray((x.reshape(n, -1) * scale).astype(np.float64)),
        np.ascontiguousarray((y.reshape(n, -1) * scale).astype(np.float64)),
        *(np.ascontiguousarray(masks[m].reshape(n, 1).astype(np.float64)) for m in cfg.mask_inputs),
    ]
    out = np.asarray(hls_model.predict(feed), dtype=np.float64).reshape(n, cfg.len_q, cfg.dim)
    codes = out * 2.0 ** lsb_frac(derive_formats(cfg).out_lsb)
    rounded = np.rint(codes)
    if not np.array_equal(rounded, codes):
        raise RuntimeError("C simulation output is not on the core's output grid")
    return rounded.astype(np.int64)


def compare(
    expected: np.ndarray, got: np.ndarray, vectors: int, seed: int, captured: bool = False
) -> dict:
    """{"vectors", "edge_vectors", "mismatches", "first_mismatch"} (golden.vector_report)."""
    return vector_report(expected, got, vectors, seed, captured)


def write_testbench_data(
    project: Path,
    cfg: CoreConfig,
    x: np.ndarray,
    y: np.ndarray,
    expected: np.ndarray,
    n: int,
    masks: dict[str, np.ndarray] | None = None,
) -> None:
    """tb_data/tb_input_features.dat (X, Y, then a masked core's L, O per line) and
    tb_output_predictions.dat (golden outputs), real values, edge vectors first: the files
    hls4ml's myproject_test.cpp reads."""
    in_scale = 2.0**-cfg.in_frac
    out_frac = lsb_frac(derive_formats(cfg).out_lsb)
    edges = len(edge_inputs(cfg)[0])
    masks = check_masks(cfg, len(x), masks)
    reals = [x * in_scale, y * in_scale, *(masks[m].astype(np.float64) for m in cfg.mask_inputs)]
    _write_tb(project, reals, expected, out_frac, edges, n)


def core_check_data(
    model: onnx.ModelProto,
    cfg: CoreConfig,
    weights: CoreWeights,
    vectors: int,
    seed: int,
    capture: dict | None = None,
) -> tuple[list[np.ndarray], np.ndarray, int, int]:
    """check_data of a core: random plus edge (x, y) pairs against GoldenCore; a masked core's
    vectors carry their length / offset (golden.vector_masks: every length and offset among
    the first random vectors, the extremes on the edge ones), fed as integers. ``capture``
    (eatt.quant.vectors.load_capture): its first ``vectors`` vectors replace the random ones."""
    x, y = _vectors(cfg, vectors, seed)
    n_edge = len(edge_inputs(cfg)[0])
    masks = vector_masks(cfg, vectors, seed, n_edge)
    if capture is not None:
        ex, ey = x[vectors:], y[vectors:]
        cx, cy = capture["x"][:vectors], capture["y"][:vectors]
        x, y = np.concatenate([cx, ex]), np.concatenate([cy, ey])
        masks = {
            k: np.concatenate([capture["masks"][k][:vectors], m[vectors:]])
            for k, m in masks.items()
        }
    n, scale = len(x), 2.0**-cfg.in_frac
    by_label = {"X": x.reshape(n, -1) * scale, "Y": y.reshape(n, -1) * scale}
    for mask in cfg.mask_inputs:
        by_label[MASK_INPUT_NAMES[mask]] = masks[mask].reshape(n, 1).astype(np.float64)
    by_graph_name = dict(zip(core_input_names(model), core_node_inputs(cfg), strict=True))
    reals = [by_label[by_graph_name[vi.name]] for vi in model.graph.input]
    expected = GoldenCore(cfg, weights).forward(x, y, masks=masks)
    return reals, expected, lsb_frac(derive_formats(cfg).out_lsb), n_edge


def window_check_data(
    model: onnx.ModelProto,
    cfg: CoreConfig,
    weights: CoreWeights,
    vectors: int,
    seed: int,
    capture: dict | None = None,
) -> tuple[list[np.ndarray], np.ndarray, int, int]:
    """check_data of the window unit: random plus edge steps against WindowGolden.
    ``capture`` (eatt.quant.vectors.load_window_capture): its steps replace the random ones."""
    from eatt.quant.window_export import WINDOW_STEP_NAMES, window_expected, window_vectors

    captured = None if capture is None else capture["steps"]
    steps, n_edge = window_vectors(cfg, vectors, seed, captured)
    expected = window_expected(WindowGolden(cfg, weights), steps)  # O[, F]
    n = len(expected)
    fracs = window_input_fracs(cfg)
    by_graph_name = dict(zip(core_input_names(model), window_input_names(cfg), strict=True))
    reals = []
    for vi in model.graph.input:
        label = by_graph_name[vi.name]
        codes = steps[WINDOW_STEP_NAMES[label]].reshape(n, -1).astype(np.float64)
        reals.append(codes * 2.0 ** -fracs[label])
    # per output column: O on V's grid, F (position flexible) integer rows
    out_frac = np.r_[np.full(cfg.dim, fracs["V"]), np.zeros(expected.shape[1] - cfg.dim)]
    return reals, expected, out_frac, n_edge


def predict_codes(hls_model, reals: list[np.ndarray], shape: tuple, out_frac) -> np.ndarray:
    """Integer output codes of the compiled C simulation for real inputs (check_data);
    out_frac: one fraction, or one per output column (a model with several outputs gives them
    side by side, in the graph's order)."""
    feed = [np.ascontiguousarray(r, dtype=np.float64) for r in reals]
    out = hls_model.predict(feed if len(feed) > 1 else feed[0])
    if isinstance(out, list):  # several graph outputs: each (n, width)
        out = np.concatenate([np.asarray(o, np.float64).reshape(shape[0], -1) for o in out], 1)
    codes = np.asarray(out, dtype=np.float64).reshape(shape) * 2.0**out_frac
    rounded = np.rint(codes)
    if not np.array_equal(rounded, codes):
        raise RuntimeError("C simulation output is not on the core's output grid")
    return rounded.astype(np.int64)


def _write_tb(
    project: Path,
    reals: list[np.ndarray],
    expected: np.ndarray,
    out_frac: int,
    edges: int,
    n: int,
) -> None:
    """tb_data/tb_input_features.dat (every input of a vector, in graph order, per line) and
    tb_output_predictions.dat (golden outputs), real values, edge vectors first: the files
    hls4ml's myproject_test.cpp reads."""
    total = len(expected)
    order = np.r_[np.arange(total - edges, total), np.arange(total - edges)][:n]
    tb = project / "tb_data"
    tb.mkdir(exist_ok=True)
    with (
        open(tb / "tb_input_features.dat", "w") as fin,
        open(tb / "tb_output_predictions.dat", "w") as fpr,
    ):
        for i in order:
            row = np.concatenate([r[i].ravel() for r in reals])
            fin.write(" ".join(repr(float(v)) for v in row) + "\n")
            out = expected[i].ravel() * 2.0**-out_frac
            fpr.write(" ".join(repr(float(v)) for v in out) + "\n")


def folded_iterations(hls_model, reset: bool = False) -> int:
    """The pipelined-loop iterations the compiled C simulation of a folded layer has counted
    (templates/nnet_folded_attention.h eatt_folded_iterations); reset: start again at 0."""
    fn = hls_model._top_function_lib.eatt_folded_iterations
    fn.restype, fn.argtypes = ctypes.c_ulong, [ctypes.c_int]
    return int(fn(1 if reset else 0))
