"""Taking a trained model's attention layer out as a hardware core (issue 18, item 3).

`eatt export CHECKPOINT --list-layers` names every attention sub-layer; `--layer NAME` writes
the quantized layer's core (the model's formats, len max_len, key_padding, causal for the
decoder's self-attention) as a QONNX file that records where it came from. The file computes
what the layer computes inside the model: the layer's inputs in a padded batch, padded to
max_len and fed with their valid length and offset, give the model's outputs bit for bit.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from eatt.build_options import BuildOptions
from eatt.model.config import ModelConfig
from eatt.model.data import Vocab
from eatt.model.layers import checkpoint_layer_core, checkpoint_layers, layer_core, layers
from eatt.model.seq2seq import RoleAttention, Seq2Seq, save_checkpoint
from eatt.quant.export import check_export, core_source, execute_core, export_core
from tests.cli import run_eatt

CFG = ModelConfig(
    dim=16, heads=2, ffn_dim=32, enc_layers=1, dec_layers=1, dropout=0.0, max_len=10,
    attention="quant-eatt", dec_self="quant-vanilla", cross="quant-eatt", enc_self="eatt", tau=0.5,
)  # fmt: skip


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(3)
    vocab = Vocab([f"w{i}" for i in range(12)])
    model = Seq2Seq(CFG, len(vocab), len(vocab))
    path = tmp_path_factory.mktemp("model") / "best.pt"
    save_checkpoint(path, model, vocab, vocab)
    return path


def test_list_layers(checkpoint):
    found = checkpoint_layers(checkpoint)
    assert [(x.name, x.kind, x.hardware) for x in found] == [
        ("encoder.0.self", "eatt", False),
        ("decoder.0.self", "quant-vanilla", True),
        ("decoder.0.cross", "quant-eatt", True),
    ]


def test_a_float_layer_or_a_wrong_name_is_one_line(checkpoint):
    with pytest.raises(ValueError, match=r"encoder.0.self is eatt \(float\)"):
        checkpoint_layer_core(checkpoint, "encoder.0.self")
    with pytest.raises(
        ValueError, match="no layer 'decoder.3.cross'; the model has encoder.0.self"
    ):
        checkpoint_layer_core(checkpoint, "decoder.3.cross")


@pytest.mark.parametrize("name", ["decoder.0.self", "decoder.0.cross"])
def test_the_exported_layer_computes_what_the_model_computes(checkpoint, tmp_path, name):
    from eatt.model.seq2seq import load_checkpoint

    model, *_ = load_checkpoint(checkpoint)
    cfg, weights = layer_core(model, name)
    assert cfg.key_padding and cfg.causal == name.endswith(".self")
    assert (cfg.len_q, cfg.len_k, cfg.qk_bits) == (CFG.max_len, CFG.max_len, CFG.quant_acc_bits)
    path = tmp_path / "layer.onnx"
    report = export_core(cfg, weights, path, {"checkpoint": str(checkpoint), "layer": name})
    assert core_source(path) == {"checkpoint": str(checkpoint), "layer": name}
    assert report["source"]["layer"] == name
    assert check_export(path, vectors=40, seed=2)["mismatches"] == 0

    # the layer's calls in a padded teacher-forced batch, through the file
    (layer,) = [x for x in layers(model) if x.name == name]
    module = dict(((r, i), m) for r, i, m in model.attention_modules())[(layer.role, layer.index)]
    calls = []
    original = RoleAttention._hardware

    def spy(self, x, memory, kpm, causal, cache, qpm, offset=0):
        out = original(self, x, memory, kpm, causal, cache, qpm, offset)
        if self is module:
            calls.append((x, memory, kpm, causal, out))
        return out

    RoleAttention._hardware = spy
    try:
        src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
        tgt = torch.tensor([[1, 5, 6, 7], [1, 8, 0, 0]])
        with torch.no_grad():
            model(src, tgt)
    finally:
        RoleAttention._hardware = original
    ((x, memory, kpm, causal, out),) = calls
    core = module.core
    n, len_q, _ = x.shape
    y = x if memory is None else memory
    len_k = y.shape[1]
    xp = np.zeros((n, cfg.len_q, cfg.dim), dtype=np.int64)
    yp = np.zeros((n, cfg.len_k, cfg.dim), dtype=np.int64)
    xp[:, :len_q] = core.input_codes(x).numpy()
    yp[:, :len_k] = core.input_codes(y).numpy()
    length = np.full(n, len_k) if kpm is None else (~kpm).sum(1).numpy()
    masks = {"length": length}
    if cfg.causal:
        masks["offset"] = np.full(n, len_k - len_q)
    got = execute_core(path, xp, yp, masks)[:, :len_q]
    expect = torch.round(out.double() / core.formats.out_lsb).to(torch.int64).numpy()
    np.testing.assert_array_equal(got, expect)


def _eatt(*args):
    return run_eatt(*args, timeout=600)


def test_cli_list_and_export_a_layer(checkpoint, tmp_path):
    r = _eatt("export", str(checkpoint), "--list-layers")
    assert r.returncode == 0 and "decoder.0.cross" in r.stdout and "float" in r.stdout, r.stderr
    r = _eatt("export", str(checkpoint), "--list-layers", "--json")
    assert [x["name"] for x in json.loads(r.stdout)["layers"]][-1] == "decoder.0.cross"
    out = tmp_path / "cross.onnx"
    r = _eatt("export", str(checkpoint), "--layer", "decoder.0.cross", "-o", str(out), "--check",
              "30", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["source"]["layer"] == "decoder.0.cross" and result["check"]["mismatches"] == 0
    for args, message in [
        ([str(checkpoint), "-o", str(tmp_path / "a.onnx")], "give --layer NAME"),
        ([str(checkpoint), "--layer", "encoder.0.self", "-o", str(tmp_path / "b.onnx")], "float"),
        (["--layer", "decoder.0.cross", "-o", str(tmp_path / "c.onnx")], "give the model's"),
        ([str(checkpoint)], "-o/--output"),
    ]:
        r = _eatt("export", *args)
        assert r.returncode == 2 and message in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "a.onnx").exists() and not (tmp_path / "b.onnx").exists()


# -- captured vectors (issue 18, item 4) -------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny quantized model trained a few steps on tiny bundled data (its data config kept)."""
    from eatt.model.data import TaskConfig
    from eatt.model.train import TrainConfig, train

    data = TaskConfig(
        n_train=24, n_dev=8, n_test=8, seed=3, min_len=5, max_len=8, n_nouns=6, n_verbs=3, n_adjs=3
    )
    model = ModelConfig(
        dim=16, heads=2, ffn_dim=32, enc_layers=1, dec_layers=1, dropout=0.0, max_len=16,
        attention="quant-eatt", dec_self="quant-vanilla", tau=0.5,
    )  # fmt: skip
    cfg = TrainConfig(seed=5, steps=6, max_tokens=128, warmup=3, decay=100, peak_lr=3e-3,
                      eval_every=0, progress=False, data=data)  # fmt: skip
    return train(model, cfg, tmp_path_factory.mktemp("run"))["checkpoint"]


@pytest.mark.parametrize("name", ["encoder.0.self", "decoder.0.self", "decoder.0.cross"])
def test_capture_is_what_the_model_computed_and_the_file_agrees(trained, tmp_path, name):
    from eatt.model.layers import capture_layer, save_capture
    from eatt.quant.vectors import load_capture

    capture = capture_layer(trained, name, split="test", max_vectors=200)
    r = capture["report"]
    assert r["golden_vs_model"]["mismatches"] == 0, r["golden_vs_model"]["first_mismatch"]
    assert 8 <= r["vectors"] <= 200 and r["layer"] == name
    if name != "decoder.0.self":  # padded source sentences: several valid lengths
        assert len(r["lengths"]) > 1
    path = tmp_path / "acts.npz"
    save_capture(capture, path)
    cfg, weights = checkpoint_layer_core(trained, name)
    loaded = load_capture(path, cfg)
    assert np.array_equal(loaded["x"], capture["arrays"]["x"])
    onnx_path = tmp_path / "layer.onnx"
    export_core(cfg, weights, onnx_path)
    check = check_export(onnx_path, vectors=10**6, seed=1, inputs=path)
    assert check["captured"] and check["vectors"] == r["vectors"] and check["mismatches"] == 0


def test_a_capture_of_another_core_is_refused(trained, tmp_path):
    from eatt.model.layers import capture_layer, save_capture

    path = tmp_path / "acts.npz"
    save_capture(capture_layer(trained, "decoder.0.cross", max_vectors=20), path)
    cfg, weights = checkpoint_layer_core(trained, "decoder.0.self")  # causal: other masks
    export_core(cfg, weights, tmp_path / "self.onnx")
    with pytest.raises(ValueError, match="acts.npz: masks"):
        check_export(tmp_path / "self.onnx", vectors=5, inputs=path)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="junk.npz: not a capture file"):
        check_export(tmp_path / "self.onnx", vectors=5, inputs=tmp_path / "junk.npz")
    # the layer's peer (the other kind, the same formats) takes the same activations; another
    # format does not
    from eatt.quant.vectors import load_capture

    cross, _ = checkpoint_layer_core(trained, "decoder.0.cross")
    peer = cross.replace(kind="vanilla" if cross.kind == "eatt" else "eatt")
    assert len(load_capture(path, peer)["x"]) == 20
    with pytest.raises(ValueError, match="captured for another core \\(tau differ"):
        load_capture(path, cross.replace(tau=cross.tau * 2))


def test_cli_capture(trained, tmp_path):
    out = tmp_path / "acts.npz"
    r = _eatt("capture", str(trained), "--layer", "decoder.0.cross", "--max", "50", "-o",
              str(out), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["vectors"] == 50 and result["golden_vs_model"]["mismatches"] == 0
    r = _eatt("capture", str(trained), "--layer", "encoder.9.self", "-o", str(tmp_path / "b.npz"))
    assert r.returncode == 2 and "no layer 'encoder.9.self'" in r.stderr
    assert not (tmp_path / "b.npz").exists()


@pytest.mark.hls
def test_hls_csim_on_captured_vectors(trained, tmp_path):
    """A trained layer's hls4ml C simulation on its captured vectors: 0 mismatches."""
    from eatt.hls.project import write_project
    from eatt.model.layers import capture_layer, save_capture

    acts = tmp_path / "acts.npz"
    save_capture(capture_layer(trained, "decoder.0.self", max_vectors=120), acts)
    cfg, weights = checkpoint_layer_core(trained, "decoder.0.self")
    export_core(cfg, weights, tmp_path / "layer.onnx")
    r = write_project(tmp_path / "layer.onnx", tmp_path / "hls", vectors=1000, inputs=acts)
    assert r["ok"] and r["csim"]["captured"] and r["csim"]["vectors"] == 120, r["csim"]
    # the folded layer (docs/hls.md "Folded") on the same captured vectors, masks included
    r = write_project(
        tmp_path / "layer.onnx",
        tmp_path / "hls_folded",
        vectors=1000,
        inputs=acts,
        options=BuildOptions(folding={}),
    )
    assert r["ok"] and r["csim"]["captured"] and r["csim"]["mismatches"] == 0, r["csim"]
    assert r["folding"] and r["csim"]["iterations_per_call"] == r["iterations"]["total"]


@pytest.mark.rtl
def test_a_trained_layer_in_rtl_on_its_captured_vectors(tmp_path):
    """Train -> export the layer -> RTL (the folder records the checkpoint and the layer) ->
    Verilator + cocotb on the vectors the layer saw while the model decoded: 0 mismatches."""
    from eatt.model.data import TaskConfig
    from eatt.model.train import TrainConfig, train

    data = TaskConfig(
        n_train=24, n_dev=8, n_test=8, seed=3, min_len=5, max_len=6, n_nouns=6, n_verbs=3, n_adjs=3
    )
    model = ModelConfig(
        dim=8, heads=2, ffn_dim=16, enc_layers=1, dec_layers=1, dropout=0.0, max_len=10,
        attention="quant-eatt", tau=0.5,
    )  # fmt: skip
    cfg = TrainConfig(seed=5, steps=4, max_tokens=128, warmup=2, decay=100, peak_lr=3e-3,
                      eval_every=0, progress=False, data=data)  # fmt: skip
    ckpt = train(model, cfg, tmp_path / "run")["checkpoint"]
    acts, onnx_file, rtl = tmp_path / "acts.npz", tmp_path / "cross.onnx", tmp_path / "rtl"
    r = _eatt("capture", ckpt, "--layer", "decoder.0.cross", "--max", "40", "-o", str(acts))
    assert r.returncode == 0, r.stderr
    r = _eatt("export", ckpt, "--layer", "decoder.0.cross", "-o", str(onnx_file))
    assert r.returncode == 0, r.stderr
    r = _eatt("rtl", str(onnx_file), "--level", "attention", "-o", str(rtl), "--json")
    assert r.returncode == 0, r.stderr
    meta = json.loads(r.stdout)
    assert meta["source"]["layer"] == "decoder.0.cross" and meta["source"]["checkpoint"]
    assert json.loads((rtl / "metadata.json").read_text())["source"] == meta["source"]
    r = _eatt("sim", str(rtl), "--inputs", str(acts), "--vectors", "40", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["captured"] and result["vectors"] == 40 and result["mismatches"] == 0
