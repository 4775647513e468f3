"""Tests of the quantized windowed cross-attention's loop (eatt.quant.window_cross): a trained
layer -> its window unit file -> the steps captured while the model decoded -> RTL, hls and
`eatt flow` on them (the unit bit for bit at every step: tests/test_window_cross.py)."""

import json

import numpy as np
import pytest
import torch

from eatt.model.layers import checkpoint_layer_core
from eatt.model.seq2seq import ModelConfig
from eatt.quant.window import WindowGolden
from tests.cli import run_eatt


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# -- the loop: trained layer -> window unit file -> captured steps -> RTL ----------------------
def _eatt(*args):

    return run_eatt(*args, timeout=900)


def _train_tiny(folder, redundant: bool = False, **model):
    from eatt.model.data import TaskConfig
    from eatt.model.train import TrainConfig, train

    data = TaskConfig(
        n_train=24, n_dev=8, n_test=8, seed=3, min_len=5, max_len=6, n_nouns=6, n_verbs=3,
        n_adjs=3, redundant=redundant,
    )  # fmt: skip
    model = ModelConfig(
        **{"dim": 8, "heads": 2, "ffn_dim": 16, "enc_layers": 1, "dec_layers": 1,
           "dropout": 0.0, "max_len": 10, "window_score": "eatt", "tau": 0.5,
           "quant_weight_frac": 5, **model}
    )  # fmt: skip
    cfg = TrainConfig(seed=5, steps=4, max_tokens=128, warmup=2, decay=100, peak_lr=3e-3,
                      eval_every=0, progress=False, data=data)  # fmt: skip
    return train(model, cfg, folder)["checkpoint"]


def _rtl_on_captured(unit, rtl, acts, n: int = 40) -> None:
    """`eatt rtl` of a unit file, then `eatt sim --inputs` on n captured steps: 0 mismatches
    and the cycle rule."""
    r = _eatt("rtl", str(unit), "-o", str(rtl), "--json")
    assert r.returncode == 0, r.stderr
    r = _eatt("sim", str(rtl), "--inputs", str(acts), "--vectors", str(n), "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["captured"] and result["mismatches"] == 0 and result["cycles_rule_holds"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny quant-local-p model (E-ATT scores) trained a few steps on tiny bundled data."""
    return _train_tiny(tmp_path_factory.mktemp("run"), cross="quant-local-p", window_d=2)


@pytest.fixture(scope="module")
def trained_pruned(tmp_path_factory):
    """A tiny quant-global model with L0Drop's Group pattern (every other source position
    pruned) on the redundant task: the unit decodes on the compacted memory."""
    return _train_tiny(
        tmp_path_factory.mktemp("run"), redundant=True, cross="quant-global", max_len=16,
        l0drop=True, l0drop_rule="group",
    )  # fmt: skip


@pytest.fixture(scope="module")
def trained_flexible(tmp_path_factory):
    """A tiny quant-flexible model (E-ATT scores, tau 0.5: the window follows g(t))."""
    return _train_tiny(tmp_path_factory.mktemp("run"), cross="quant-flexible", flexible_tau=0.5)


@pytest.mark.rtl
def test_a_trained_flexible_layer_through_the_loop(trained_flexible, tmp_path):
    """quant-flexible from training to RTL: capture (each step's p is the unit's focus of the
    step before), export checked on the captured steps, the RTL on them with O and F compared
    (0 mismatches, the cycle rule), and evaluate --hardware with the same hypotheses."""
    from eatt.model.evaluate import evaluate
    from eatt.quant.vectors import load_window_capture

    acts, unit, rtl = tmp_path / "acts.npz", tmp_path / "cross.onnx", tmp_path / "rtl"
    r = _eatt("capture", str(trained_flexible), "--layer", "decoder.0.cross", "--max", "40",
              "-o", str(acts), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["golden_vs_model"]["mismatches"] == 0
    cfg, weights = checkpoint_layer_core(trained_flexible, "decoder.0.cross")
    steps = load_window_capture(acts, cfg)["steps"]
    g = steps["group"]
    assert cfg.position == "flexible" and steps["w"].max() < cfg.window_d  # tau bounds w
    _, focus = WindowGolden(cfg, weights).forward(
        steps["x"], steps["p"], steps["w"], steps["keys"][g], steps["values"][g],
        steps["counts"][g], steps["length"][g], steps["g"], with_focus=True,
    )  # fmt: skip
    # a sentence's steps follow each other (greedy capture): the next p is this step's F
    same = g[1:] == g[:-1]
    assert same.any() and np.array_equal(steps["p"][1:][same], focus[:-1, 0][same])
    r = _eatt("export", str(trained_flexible), "--layer", "decoder.0.cross", "-o", str(unit),
              "--check", "40", "--inputs", str(acts), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["config"]["position"] == "flexible"
    _rtl_on_captured(unit, rtl, acts)
    result = evaluate(trained_flexible, beam=2, device="cpu", hardware=True)
    assert result["hardware"]["exported"]["hypotheses_differ"] == 0


def test_capture_of_a_window_layer_is_the_unit(trained, tmp_path):
    """The captured steps, grouped by memory, are what the model computed, and the unit's
    golden model on them agrees; the evaluation's hardware check sees no difference."""
    from eatt.model.evaluate import evaluate
    from eatt.model.layers import capture_layer, checkpoint_layer_core, save_capture
    from eatt.quant.vectors import load_capture, load_window_capture

    capture = capture_layer(trained, "decoder.0.cross", max_vectors=60)
    report, arrays = capture["report"], capture["arrays"]
    assert report["unit"] == "window" and report["golden_vs_model"]["mismatches"] == 0
    assert report["vectors"] == 60 and report["memories"] == len(arrays["keys"]) > 1
    assert (np.diff(arrays["group"]) >= 0).all()  # a memory's steps together
    cfg, weights = checkpoint_layer_core(trained, "decoder.0.cross")
    assert cfg.kind == "window" and not weights.wk.any()
    path = tmp_path / "acts.npz"
    save_capture(capture, path)
    steps = load_window_capture(path, cfg, 25)["steps"]
    g = steps["group"]
    got = WindowGolden(cfg, weights).forward(
        steps["x"], steps["p"], steps["w"], steps["keys"][g], steps["values"][g],
        steps["counts"][g], steps["length"][g], steps["g"],
    )  # fmt: skip
    assert np.array_equal(got, steps["model_out"]) and len(steps["keys"]) == g.max() + 1
    with pytest.raises(ValueError, match="steps of a window unit"):
        load_capture(path)
    with pytest.raises(ValueError, match="captured for another unit \\(tau differ"):
        load_window_capture(path, cfg.replace(tau=1.0))
    result = evaluate(trained, beam=2, device="cpu", hardware=True)
    assert result["hardware"]["exported"]["hypotheses_differ"] == 0
    assert 1 <= result["vision_span"] <= 5


@pytest.mark.rtl
def test_a_trained_window_layer_in_rtl_on_its_captured_steps(trained, tmp_path):
    """Train -> export the layer (a window unit file) -> RTL -> Verilator + cocotb on the steps
    the layer took while the model decoded: 0 mismatches, cycles as the unit's rule."""
    acts, unit, rtl = tmp_path / "acts.npz", tmp_path / "cross.onnx", tmp_path / "rtl"
    r = _eatt("capture", str(trained), "--layer", "decoder.0.cross", "--max", "48", "-o",
              str(acts), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["golden_vs_model"]["mismatches"] == 0
    r = _eatt("export", str(trained), "--layer", "decoder.0.cross", "-o", str(unit), "--check",
              "50", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["config"]["kind"] == "window"
    r = _eatt("rtl", str(unit), "-o", str(rtl), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["source"]["layer"] == "decoder.0.cross"
    r = _eatt("sim", str(rtl), "--inputs", str(acts), "--vectors", "40", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["captured"] and result["vectors"] == 40 and result["mismatches"] == 0
    assert result["cycles_rule_holds"]
    r = _eatt("sim", str(rtl), "--inputs", str(acts), "--vectors", "40")
    assert r.returncode == 0 and "40 captured vectors, 0 mismatching" in r.stdout, r.stderr


@pytest.mark.rtl
def test_the_unit_on_a_pruned_memory_in_rtl(trained_pruned, tmp_path):
    """quant-global with L0Drop: the captured steps carry the compacted memory (kept rows,
    then the zero row counting the pruned ones); export checks them, the RTL runs them with
    0 mismatches, and a step takes as many cycles as the rows it reads: the kept ones + 1."""
    from eatt.quant.vectors import load_window_capture

    acts, unit, rtl = tmp_path / "acts.npz", tmp_path / "cross.onnx", tmp_path / "rtl"
    r = _eatt("capture", str(trained_pruned), "--layer", "decoder.0.cross", "--max", "40",
              "-o", str(acts), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["golden_vs_model"]["mismatches"] == 0
    r = _eatt("export", str(trained_pruned), "--layer", "decoder.0.cross", "-o", str(unit),
              "--check", "40", "--inputs", str(acts), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    config = json.loads(r.stdout)["config"]
    assert (config["position"], config["window_d"], config["len_k"]) == ("none", 15, 16)
    cfg = checkpoint_layer_core(trained_pruned, "decoder.0.cross")[0]
    steps = load_window_capture(acts, cfg)["steps"]
    g = steps["group"]
    lengths, counts = steps["length"][g], steps["counts"][g]
    assert (steps["p"] == 0).all() and (steps["w"] == 15).all()
    # the zero row counts the pruned positions: Group keeps every other one
    for length, count in zip(lengths, counts, strict=True):
        assert count[length - 1] >= 1 and count[: length - 1].tolist() == [1] * (length - 1)
    assert (counts[np.arange(len(g)), lengths - 1] > 1).any()
    _rtl_on_captured(unit, rtl, acts)


@pytest.mark.rtl
@pytest.mark.hls
def test_flow_of_a_trained_window_layer(trained, tmp_path):
    """`eatt flow MODEL.pt --layer decoder.0.cross` on a windowed layer: every stage on its
    captured steps, the dot peer on the same steps, BLEU, the report files."""
    out = tmp_path / "flow"
    r = _eatt("flow", str(trained), "--layer", "decoder.0.cross", "--vectors", "40",
              "--no-resources", "-o", str(out), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout)
    assert result["ok"] and result["capture"]["unit"] == "window"
    assert set(result["cores"]) == {"window eatt", "window dot"}
    for core in result["cores"].values():
        assert core["sim"]["captured"]["vectors"] == 40 and core["ok"]
    assert result["hls"]["csim"]["captured"] and result["export"]["check"]["captured"]
    assert result["bleu"]["exported"]["hypotheses_differ"] == 0
    assert (out / "report.png").is_file() and "window eatt" in (out / "report.md").read_text()
    vision = result["vision"]  # the unit's rows per step and the RTL's cycles per step
    assert 1 <= vision["rows_per_step"] <= 2 * 2 + 1
    assert vision["cycles_per_step"] == pytest.approx(vision["rows_per_step"])
    assert vision["model_vision_span"] > 0


def test_export_refuses_a_bad_capture_before_writing(trained, tmp_path):
    """`eatt export --check N --inputs FILE`: a missing capture, or a core's capture for a
    window unit, is one line and exit 2, and no file is written."""
    out = tmp_path / "cross.onnx"
    r = _eatt("export", str(trained), "--layer", "decoder.0.cross", "-o", str(out), "--check",
              "10", "--inputs", str(tmp_path / "missing.npz"))  # fmt: skip
    assert r.returncode == 2 and "no such capture file" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
