"""QONNX export: the file runs in qonnx (execute_onnx, qonnx-exec, cleanup) bit-exact to golden."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.custom_op.registry import getCustomOp
from qonnx.transformation.infer_datatypes import InferDataTypes
from qonnx.util.cleanup import cleanup_model

from eatt.config import CoreConfig
from eatt.quant import ops
from eatt.quant.export import (
    build_model,
    check_export,
    execute_core,
    export_core,
    format_check,
    load_core,
)
from eatt.quant.golden import CoreWeights, GoldenCore, derive_formats, random_inputs, random_weights

CONFIGS = {
    "eatt-default": dict(kind="eatt", len_q=8, len_k=8, dim=16, heads=2),
    "dot-default": dict(kind="vanilla", len_q=8, len_k=8, dim=16, heads=2),
    "eatt-tiny-w4": dict(kind="eatt", len_q=1, len_k=16, dim=4, heads=1, tau=0.0, weight_bits=4),
    "dot-wide-w4": dict(
        kind="vanilla", len_q=16, len_k=3, dim=64, heads=4, tau=0.5, weight_bits=4, in_bits=6,
        in_frac=2,
    ),
    "eatt-4heads-out16": dict(
        kind="eatt", len_q=5, len_k=7, dim=32, heads=4, tau=0.5, out_bits=16, qk_bits=10,
        exp_table_size=64, recip_table_size=32,
    ),
    "eatt-tau-0.1": dict(kind="eatt", len_q=4, len_k=4, dim=8, heads=2, tau=0.1, in_frac=6),
}  # fmt: skip


def make(name: str) -> CoreConfig:
    return CoreConfig.from_dict(CONFIGS[name])


def assert_one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert text and "\n" not in text
    return text


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_export_round_trip_and_bit_exact(tmp_path, name):
    cfg = make(name)
    weights = random_weights(cfg, seed=3)
    path = tmp_path / "core.onnx"
    summary = export_core(cfg, weights, path)
    assert summary["nodes"] == [
        "qonnx.custom_op.general.Quant",
        "qonnx.custom_op.general.Quant",
        "eatt.quant.ops.AttentionCore",
    ]
    assert summary["inputs"] == {"X": [1, cfg.len_q, cfg.dim], "Y": [1, cfg.len_k, cfg.dim]}
    assert [p.name for p in tmp_path.iterdir()] == ["core.onnx"]  # no temp file left
    cfg2, w2 = load_core(path)
    assert cfg2 == cfg and cfg2.tau == cfg.tau
    for key, w in weights.as_dict().items():
        np.testing.assert_array_equal(getattr(w2, key), w)
    result = check_export(path, vectors=1000, seed=7)
    assert result["first_mismatch"] is None
    assert result["mismatches"] == 0 and result["ok"]
    assert result["vectors"] == 1000 and result["edge_vectors"] == 36
    assert "PASS" in format_check(result)


@pytest.mark.parametrize("kind", ["eatt", "vanilla"])
@pytest.mark.parametrize("sign", [1, -1])
def test_extreme_weights(tmp_path, kind, sign):
    cfg = CoreConfig(kind=kind, len_q=4, len_k=6, dim=8, heads=2, weight_bits=4)
    w = np.full((cfg.dim, cfg.dim), sign * cfg.weight_max, dtype=np.int64)
    export_core(cfg, CoreWeights(w, w, w, -w), tmp_path / "x.onnx")
    assert check_export(tmp_path / "x.onnx", vectors=200, seed=1)["mismatches"] == 0


def test_quant_nodes_define_the_input_format():
    """Real inputs off the grid or out of range are rounded (half to even) and clipped by the
    Quant nodes; the core sees exactly those codes."""
    cfg = make("eatt-default")
    weights = random_weights(cfg, seed=1)
    model = ModelWrapper(build_model(cfg, weights))
    rng = np.random.default_rng(0)
    n, lsb = 64, 2.0**-cfg.in_frac
    top = 2 ** (cfg.in_bits - 1)
    x = rng.uniform(-1.5 * top, 1.5 * top, (n, cfg.len_q, cfg.dim)) * lsb
    y = np.round(rng.uniform(-top, top, (n, cfg.len_k, cfg.dim))) * lsb + lsb / 2  # ties
    x, y = x.astype(np.float32), y.astype(np.float32)

    def codes(t):
        return np.clip(np.round(t.astype(np.float64) / lsb), -top, top - 1).astype(np.int64)

    expected = GoldenCore(cfg, weights).forward(codes(x), codes(y))
    out_lsb = derive_formats(cfg).out_lsb
    for i in range(n):
        got = execute_onnx(model, {"X": x[i : i + 1], "Y": y[i : i + 1]})["Z"]
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got / out_lsb, expected[i : i + 1])


def test_execute_core_matches_golden_in_batches(tmp_path, monkeypatch):
    import eatt.quant.core_export as core_export

    monkeypatch.setattr(core_export, "_CHUNK", 300)  # several chunks and a partial one
    cfg = make("dot-default")
    weights = random_weights(cfg, seed=2)
    export_core(cfg, weights, tmp_path / "d.onnx")
    x, y = random_inputs(cfg, 1000, seed=4)
    got = execute_core(tmp_path / "d.onnx", x, y)
    np.testing.assert_array_equal(got, GoldenCore(cfg, weights).forward(x, y))
    with pytest.raises(ValueError) as err:
        execute_core(tmp_path / "d.onnx", x[:3], y[:2])
    assert_one_line(err)


def test_qonnx_registry_and_datatypes():
    cfg = make("eatt-default")
    model = ModelWrapper(build_model(cfg, random_weights(cfg)))
    node = model.get_nodes_by_op_type("AttentionCore")[0]
    inst = getCustomOp(node)
    assert isinstance(inst, ops.AttentionCore)
    assert "attributes describe a valid core" in inst.verify_node()
    assert inst.get_nodeattr("heads") == 2 and inst.get_nodeattr("kind") == "eatt"
    # default core: out_lsb = 4 (2**2) -> no fraction bits -> qonnx's SCALEDINT annotation,
    # which InferDataTypes turns into FLOAT32 unless scaled-int annotations are allowed
    scaled = model.transform(InferDataTypes(allow_scaledint_dtypes=True))
    assert scaled.get_tensor_datatype("Z").name == "SCALEDINT<12>"
    assert model.transform(InferDataTypes()).get_tensor_datatype("Z").name == "FLOAT32"
    fine = cfg.replace(out_bits=24)  # no output shift: out_lsb = 2**-9 -> 15 integer bits
    assert ops.output_datatype(fine).name == "FIXED<24,15>"


def test_cleanup_keeps_the_core(tmp_path):
    cfg = make("eatt-4heads-out16")
    weights = random_weights(cfg, seed=5)
    export_core(cfg, weights, tmp_path / "c.onnx")
    before = onnx.load(str(tmp_path / "c.onnx"))
    clean = cleanup_model(ModelWrapper(str(tmp_path / "c.onnx")))
    cores = clean.get_nodes_by_op_type("AttentionCore")
    assert len(cores) == 1 and cores[0].domain == "eatt.quant.ops"
    old = {a.name: a for a in before.graph.node[-1].attribute}
    assert {a.name: a for a in cores[0].attribute} == old
    assert len(clean.get_nodes_by_op_type("Quant")) == 2
    clean.save(str(tmp_path / "clean.onnx"))
    cfg2, w2 = load_core(tmp_path / "clean.onnx")
    assert cfg2 == cfg and np.array_equal(w2.wo, weights.wo)
    assert check_export(tmp_path / "clean.onnx", vectors=1000, seed=2)["mismatches"] == 0


def test_qonnx_exec_cli(tmp_path):
    exe = Path(sys.executable).parent / "qonnx-exec"
    if not exe.exists():
        pytest.skip("qonnx-exec is not installed next to this Python")
    cfg = make("eatt-default")
    weights = random_weights(cfg, seed=6)
    export_core(cfg, weights, tmp_path / "core.onnx")
    x, y = random_inputs(cfg, 4, seed=9)
    lsb = 2.0**-cfg.in_frac
    np.save(tmp_path / "X.npy", (x * lsb).astype(np.float32))
    np.save(tmp_path / "Y.npy", (y * lsb).astype(np.float32))
    (tmp_path / "out").mkdir()
    run = subprocess.run(
        [str(exe), "core.onnx", "X.npy", "Y.npy", "--output-prefix", "out/z_"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    expected = GoldenCore(cfg, weights).forward(x, y)
    out_lsb = derive_formats(cfg).out_lsb
    for i in range(4):
        got = np.load(tmp_path / "out" / f"z_Z_batch{i}.npy")
        np.testing.assert_array_equal(got / out_lsb, expected[i : i + 1])


def test_check_reports_first_mismatch(tmp_path, monkeypatch):
    cfg = make("eatt-default")
    export_core(cfg, random_weights(cfg), tmp_path / "m.onnx")

    class Broken(GoldenCore):
        def forward(self, x, y, intermediates=False, masks=None):
            out = super().forward(x, y, masks=masks).copy()
            out[3:5, 1, 2] += 1
            return out

    monkeypatch.setattr(ops, "GoldenCore", Broken)
    r = check_export(tmp_path / "m.onnx", vectors=10, seed=1)
    assert r["mismatches"] == 2 and not r["ok"]
    assert r["first_mismatch"].startswith("2 of 46 vectors differ; first: random vector 3 (seed 1)")
    assert "output index (1, 2)" in r["first_mismatch"]
    assert "FAIL" in format_check(r)


# -- bad input ------------------------------------------------------------------------------------
def test_unrepresentable_settings_write_nothing(tmp_path):
    cfg = make("eatt-default")
    good = random_weights(cfg)
    path = tmp_path / "sub" / "core.onnx"
    too_big = CoreWeights(good.wq, good.wk, good.wv, good.wo.copy())
    too_big.wo[0, 0] = cfg.weight_max + 1
    fractional = {**good.as_dict(), "wk": good.wk + 0.5}
    window = CoreConfig(**CONFIGS["eatt-default"])
    object.__setattr__(window, "kind", "window")  # a kind the golden model may gain later
    cases = [
        (cfg, too_big, "wo"),
        (cfg, fractional, "wk"),
        (cfg, {**good.as_dict(), "wv": good.wv[:, :3]}, "wv"),
        (cfg, {"wq": good.wq}, "wk"),
        (window, good, "kind"),
        (cfg.to_dict(), good, "config"),
    ]
    for c, w, named in cases:
        with pytest.raises(ValueError) as err:
            export_core(c, w, path)
        assert named in assert_one_line(err)
        assert not path.exists() and not list(tmp_path.rglob("*.onnx"))
    # a failed export leaves an existing file alone
    export_core(cfg, good, path)
    before = path.read_bytes()
    with pytest.raises(ValueError):
        export_core(cfg, too_big, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["core.onnx"]


def test_not_our_file(tmp_path):
    (tmp_path / "text.onnx").write_text("hello\n")
    with pytest.raises(ValueError) as err:
        load_core(tmp_path / "text.onnx")
    assert assert_one_line(err).startswith(str(tmp_path / "text.onnx"))

    with pytest.raises(ValueError) as err:
        load_core(tmp_path / "missing.onnx")
    assert "no such file" in assert_one_line(err)

    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])
    relu = helper.make_node("Relu", ["x"], ["y"])
    other = helper.make_model(helper.make_graph([relu], "g", [x], [y]))
    onnx.save(other, tmp_path / "relu.onnx")
    with pytest.raises(ValueError) as err:
        load_core(tmp_path / "relu.onnx")
    assert "not an eatt core file" in assert_one_line(err)
    with pytest.raises(ValueError) as err:
        check_export(tmp_path / "relu.onnx", vectors=5)
    assert "not an eatt core file" in assert_one_line(err)


def _edited(tmp_path, edit) -> Path:
    cfg = make("dot-default")
    model = build_model(cfg, random_weights(cfg))
    edit(model)
    path = tmp_path / "edited.onnx"
    onnx.save(model, path)
    return path


def _core(model):
    return next(n for n in model.graph.node if n.op_type == "AttentionCore")


def _drop(node, name):
    keep = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(keep)


@pytest.mark.parametrize("attr", ["heads", "tau", "wv", "exp_table", "format_version"])
def test_missing_attribute(tmp_path, attr):
    path = _edited(tmp_path, lambda m: _drop(_core(m), attr))
    with pytest.raises(ValueError) as err:
        load_core(path)
    assert f"'{attr}'" in assert_one_line(err) or "format_version" in str(err.value)


def test_edited_attributes_and_quant(tmp_path):
    def bump_shift(m):
        core = _core(m)
        a = next(a for a in core.attribute if a.name == "q_shift")
        a.i += 1

    with pytest.raises(ValueError) as err:
        load_core(_edited(tmp_path, bump_shift))
    assert "'q_shift'" in assert_one_line(err)

    def bad_heads(m):
        a = next(a for a in _core(m).attribute if a.name == "heads")
        a.i = 3

    with pytest.raises(ValueError) as err:
        load_core(_edited(tmp_path, bad_heads))
    assert "heads" in assert_one_line(err)

    def wrong_input_bits(m):
        t = next(t for t in m.graph.initializer if t.name == "Y_bitwidth")
        t.CopyFrom(numpy_helper.from_array(np.array(4.0, dtype=np.float32), "Y_bitwidth"))

    with pytest.raises(ValueError) as err:
        load_core(_edited(tmp_path, wrong_input_bits))
    assert "input Y" in assert_one_line(err)


# -- many formats ---------------------------------------------------------------------------------
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kind=st.sampled_from(["eatt", "vanilla"]),
    len_q=st.integers(1, 16),
    len_k=st.integers(1, 16),
    heads=st.integers(1, 4),
    d_head=st.integers(1, 8),
    tau=st.sampled_from([0.0, 0.5, 1.0]),
    weight_bits=st.sampled_from([4, 8]),
    in_bits=st.integers(4, 10),
    out_bits=st.integers(6, 16),
    seed=st.integers(0, 1000),
)
def test_hypothesis_configs(
    tmp_path, kind, len_q, len_k, heads, d_head, tau, weight_bits, in_bits, out_bits, seed
):
    cfg = CoreConfig(
        kind=kind,
        len_q=len_q,
        len_k=len_k,
        dim=heads * d_head,
        heads=heads,
        tau=tau,
        in_bits=in_bits,
        in_frac=in_bits - 4,
        weight_bits=weight_bits,
        out_bits=out_bits,
    )
    weights = random_weights(cfg, seed=seed)
    path = tmp_path / f"h{seed}.onnx"
    export_core(cfg, weights, path)
    assert load_core(path)[0] == cfg
    assert check_export(path, vectors=100, seed=seed)["first_mismatch"] is None
