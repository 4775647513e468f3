"""QONNX export of the windowed unit (kind window): the WindowAttention node runs in qonnx
bit-exact to WindowGolden; golden_check covers kind window."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from qonnx.core.datatype import DataType
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.custom_op.registry import getCustomOp

from eatt.config import CoreConfig, default_config
from eatt.quant import window_export as window_export_mod
from eatt.quant.check import format_golden_check, golden_check
from eatt.quant.export import build_model, check_export, execute_core, export_core, load_core
from eatt.quant.golden import random_weights
from eatt.quant.ops import WindowAttention
from eatt.quant.window import (
    STEP_INPUTS,
    WindowGolden,
    compact_memory,
    derive_window_formats,
    random_window_inputs,
)
from eatt.quant.window_export import execute_window, window_edge_inputs

BASE = dict(kind="window", len_q=1, len_k=12, dim=8, heads=2)
CONFIGS = {
    "eatt-gaussian": dict(),
    "dot-flexible": dict(window_score="dot", position="flexible", window_d=3, g_levels=3),
    "eatt-none-d0": dict(position="none", window_d=0, count_bits=3),
    # the key LSB above 1 and narrow formats (a negative input fraction)
    "eatt-narrow": dict(
        len_k=5, dim=4, heads=1, tau=-4.0, in_bits=6, in_frac=-2, weight_bits=4, qk_bits=8,
        v_bits=8, out_bits=10, exp_table_size=64, exp_frac=8, recip_table_size=32,
        recip_frac=10, window_d=1, window_sigma=0.75,
    ),
}  # fmt: skip


def make(name: str) -> CoreConfig:
    return CoreConfig.from_dict({**BASE, **CONFIGS[name]})


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_export_round_trip_and_bit_exact(tmp_path, name):
    cfg = make(name)
    weights = random_weights(cfg, seed=3)
    path = tmp_path / "w.onnx"
    summary = export_core(cfg, weights, path)
    assert summary["nodes"] == ["qonnx.custom_op.general.Quant", "eatt.quant.ops.WindowAttention"]
    inputs = {"X": [1, cfg.dim], "P": [1, 1], "W": [1, 1], "K": [1, cfg.len_k, cfg.dim]}
    inputs.update(V=[1, cfg.len_k, cfg.dim], C=[1, cfg.len_k], L=[1, 1])
    if cfg.position == "flexible":
        inputs["G"] = [1, 1]
    assert summary["inputs"] == inputs
    outputs = {"O": [1, cfg.dim]}
    if cfg.position == "flexible":  # the focus F per head (Flexible Eq. 4)
        outputs["F"] = [1, cfg.heads]
    assert summary["outputs"] == outputs
    assert [p.name for p in tmp_path.iterdir()] == ["w.onnx"]
    cfg2, w2 = load_core(path)
    assert cfg2 == cfg
    np.testing.assert_array_equal(w2.wq, weights.wq)
    result = check_export(path, vectors=400, seed=7)
    assert result["first_mismatch"] is None and result["mismatches"] == 0 and result["ok"]
    assert result["vectors"] == 400 and result["edge_vectors"] == len(window_edge_inputs(cfg)["x"])


def test_edge_steps_cover_the_corners():
    cfg = make("eatt-gaussian")
    e = window_edge_inputs(cfg)
    lo, hi = np.maximum(e["p"] - e["w"], 0), np.minimum(e["p"] + e["w"], e["length"] - 1)
    assert ((e["p"] - e["w"] < 0) & (lo == 0)).any()  # clipped at the start
    assert ((e["p"] + e["w"] > e["length"] - 1) & (hi == e["length"] - 1)).any()  # at the end
    assert (e["w"] == 0).any() and (e["w"] == cfg.window_d).any()
    assert (e["length"] == 1).any() and (e["length"] < cfg.len_k).any()
    assert (e["counts"] > 1).any()  # compacted memories (a zero row with count N - N')
    WindowGolden(cfg, random_weights(cfg, 1)).check_inputs(*(e[k] for k in STEP_INPUTS))


def test_qonnx_registry_and_datatypes():
    cfg = make("eatt-gaussian")
    model = ModelWrapper(build_model(cfg, random_weights(cfg, 1)))
    node = model.graph.node[-1]
    op = getCustomOp(node)
    assert isinstance(op, WindowAttention)
    assert all(
        "valid" in m or "is eatt" in m or "inputs" in m or "1 output (O)" in m
        for m in op.verify_node()
    )
    f = derive_window_formats(cfg).core
    frac = -int(np.log2(f.v_lsb))
    assert model.get_tensor_datatype("O") == DataType[f"FIXED<{cfg.v_bits},{cfg.v_bits - frac}>"]
    assert model.get_tensor_datatype("C") == DataType[f"UINT{cfg.count_bits}"]
    flex = make("dot-flexible")
    model = ModelWrapper(build_model(flex, random_weights(flex, 1)))
    bits = derive_window_formats(flex).addr_bits
    assert [o.name for o in model.graph.output] == ["O", "F"]
    assert model.get_tensor_datatype("F") == DataType[f"UINT{bits}"]
    assert any("2 outputs (O, F)" in m for m in getCustomOp(model.graph.node[-1]).verify_node())


def test_execute_window_in_batches_matches_golden(tmp_path, monkeypatch):
    cfg = make("dot-flexible")
    weights = random_weights(cfg, seed=5)
    path = tmp_path / "w.onnx"
    export_core(cfg, weights, path)
    monkeypatch.setattr(window_export_mod, "_CHUNK", 64)  # several batch sizes, one remainder
    steps = random_window_inputs(cfg, 150, seed=2)
    got = execute_window(path, steps)
    assert got.shape == (150, cfg.dim + cfg.heads)  # O, then the focus F (flexible)
    out, focus = WindowGolden(cfg, weights).forward(**steps, with_focus=True)
    np.testing.assert_array_equal(got, np.concatenate([out, focus], axis=1))


def test_compacted_memory_equals_full_gated_memory_in_qonnx(tmp_path):
    """L0Drop Algorithm 1 through the file: N' kept rows + one zero row with count N - N' give
    the output of the whole gated memory when the window covers it."""
    cfg = CoreConfig.from_dict({**BASE, "len_k": 8, "window_d": 7, "position": "none"})
    weights = random_weights(cfg, seed=2)
    path = tmp_path / "w.onnx"
    export_core(cfg, weights, path)
    wf = derive_window_formats(cfg)
    rng = np.random.default_rng(0)
    full, compact = {k: [] for k in STEP_INPUTS}, {k: [] for k in STEP_INPUTS}
    for i in range(20):
        gates = (rng.random(cfg.len_k) < 0.5).astype(np.int64)
        gates[i % cfg.len_k] = 1
        keys = rng.integers(-50, 51, size=(cfg.len_k, cfg.dim)) * gates[:, None]
        values = rng.integers(-(2 ** (wf.v_code_bits - 1)), 2 ** (wf.v_code_bits - 1),
                              size=(cfg.len_k, cfg.dim)) * gates[:, None]  # fmt: skip
        x = rng.integers(-128, 128, size=cfg.dim)
        k, v, c, rows = compact_memory(keys, values, gates)
        for d, (kk, vv, cc, n, p) in (
            (full, (keys, values, np.ones(cfg.len_k), cfg.len_k, cfg.len_k // 2)),
            (compact, (k, v, c, rows, 0)),
        ):
            for name, val in zip(STEP_INPUTS, (x, p, cfg.window_d, kk, vv, cc, n, 0), strict=True):
                d[name].append(val)
    run = {
        name: execute_window(path, {k: np.asarray(v, dtype=np.int64) for k, v in d.items()})
        for name, d in (("full", full), ("compact", compact))
    }
    np.testing.assert_array_equal(run["full"], run["compact"])


def test_errors_are_one_line(tmp_path):
    cfg = make("eatt-gaussian")
    weights = random_weights(cfg, seed=1)
    path = tmp_path / "w.onnx"
    export_core(cfg, weights, path)
    with pytest.raises(ValueError, match="execute_window") as err:
        execute_core(path, np.zeros((1, 1, cfg.dim)), np.zeros((1, cfg.len_k, cfg.dim)))
    assert "\n" not in str(err.value)
    steps = random_window_inputs(cfg, 3, seed=1)
    steps["p"] = steps["length"]  # the centre outside the memory
    with pytest.raises(ValueError, match="p must lie"):
        execute_window(path, steps)
    with pytest.raises(ValueError, match="missing 'wq'"):
        export_core(cfg, {"wk": weights.wk}, tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()
    # an edited table is refused on load, naming the attribute
    model = onnx.load(path)
    node = model.graph.node[-1]
    for a in node.attribute:
        if a.name == "penalty_table":
            a.t.int32_data[1] += 1
    onnx.save(model, tmp_path / "edited.onnx")
    with pytest.raises(ValueError, match="'penalty_table' disagrees") as err:
        load_core(tmp_path / "edited.onnx")
    assert "\n" not in str(err.value)
    # a missing G input on a flexible node
    flex = make("dot-flexible")
    model = build_model(flex, random_weights(flex, 1))
    node = model.graph.node[-1]
    del node.input[-1]
    with pytest.raises(ValueError, match="has 7 inputs, expected 8"):
        load_core(model)
    # a node whose kind attribute is not window
    model = build_model(cfg, weights)
    for a in model.graph.node[-1].attribute:
        if a.name == "kind":
            a.CopyFrom(helper.make_attribute("kind", "eatt"))
    with pytest.raises(ValueError, match="no WindowAttention semantics"):
        load_core(model)


@pytest.mark.parametrize("name", ["eatt-gaussian", "dot-flexible"])
def test_golden_check_window(name):
    cfg = make(name)
    result = golden_check(cfg, random_weights(cfg, 1), vectors=300, seed=2)
    assert result["ok"], format_golden_check(result)
    assert result["width_violations"] == []
    assert result["float"]["max_abs_error"] <= result["float"]["bound"]
    assert "window: window_score=" in format_golden_check(result)


def test_golden_check_window_catches_a_wrong_model(monkeypatch):
    """The float comparison is not vacuous: an output off by many LSBs fails it."""
    cfg = default_config("window")
    real = WindowGolden.forward

    def off(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        out["attn"] = np.clip(out["attn"] + 400, None, 2 ** (cfg.v_bits - 1) - 1)
        return out

    monkeypatch.setattr(WindowGolden, "forward", off)
    result = golden_check(cfg, random_weights(cfg, 1), vectors=200, seed=2)
    assert not result["ok"] and not result["float"]["within_bound"]
