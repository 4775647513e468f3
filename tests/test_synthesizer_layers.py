"""The Synthesizer's quantized seq2seq kinds (quant-dense, quant-randinit; issue 41): a trained
model's Dense and RandInit layers are hardware cores that run each call at their own max_len
rows with the queries at their absolute positions (docs/models.md), captured as they ran and
taken through the trained-layer flow against the vanilla peer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eatt.model.layers import capture_layer, checkpoint_layer_core
from eatt.model.train import train_from_config
from tests.cli import run_eatt

RUN = (
    "model: {dim: 8, heads: 2, ffn_dim: 32, enc_layers: 1, dec_layers: 1, attention: eatt,\n"
    "        cross: quant-dense, dec_self: quant-randinit, max_len: 12}\n"
    "train: {steps: 4, max_tokens: 256, eval_every: 4, progress: false}\n"
    "data: {n_train: 40, n_dev: 8, n_test: 8, max_len: 8}\n"
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("synthesizer_layers")
    (root / "run.yaml").write_text(RUN)
    return train_from_config(root / "run.yaml", root / "run", progress=False)["checkpoint"]


@pytest.mark.parametrize(("name", "kind"), [("decoder.0.self", "randinit"),
                                            ("decoder.0.cross", "dense")])  # fmt: skip
def test_captured_calls_are_whole_cores_with_the_queries_at_their_rows(checkpoint, name, kind):
    capture = capture_layer(checkpoint, name, "dev", 40)
    cfg, _ = checkpoint_layer_core(checkpoint, name)
    arrays, report = capture["arrays"], capture["report"]
    assert cfg.kind == kind and report["golden_vs_model"]["mismatches"] == 0
    assert set(arrays["queries"]) == {cfg.len_q}  # every row of the core computed
    # greedy decoding with a cache: one query row a call, at the step's position
    rows = [np.flatnonzero(np.abs(x).sum(axis=1)) for x in arrays["x"]]
    assert all(len(r) <= 1 for r in rows)
    steps = [int(r[0]) for r in rows if len(r)]
    assert 0 in steps and max(steps) >= 2
    if cfg.causal:  # row r sees keys 0..r: offset 0, and the keys so far are the valid ones
        assert set(arrays["offset"]) == {0}
        for r, length in zip(rows, arrays["length"], strict=True):
            assert not len(r) or length == r[0] + 1


@pytest.mark.parametrize("kind", ["dense", "randinit", "vanilla"])
def test_the_default_size_examples_load(kind):
    from pathlib import Path

    from eatt.model.train import load_run_config

    root = Path(__file__).resolve().parents[1]
    model, _ = load_run_config(root / "examples" / f"{kind}_quant.yaml")
    core = model.quant_core(f"quant-{kind}")
    assert (core.kind, core.len_q, core.dim, core.heads) == (kind, 64, 128, 4)


def test_a_synthesizer_layer_has_no_step_core(checkpoint):
    with pytest.raises(ValueError, match="--step: decoder.0.self is quant-randinit"):
        checkpoint_layer_core(checkpoint, "decoder.0.self", step=True)


@pytest.mark.hls
@pytest.mark.slow
def test_a_trained_randinit_layer_through_the_flow(checkpoint, tmp_path):
    """Captured calls, QONNX, hls4ml C-sim, RTL on Verilator, the vanilla peer on the same
    calls (its own alignment weights beside the layer's W_V, W_O), BLEU on the exported cores."""
    r = run_eatt(
        "flow", str(checkpoint), "--layer", "decoder.0.self", "--split", "dev", "--vectors", "20",
        "--no-resources", "-o", str(tmp_path / "flow"), "--json", timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout)
    assert result["ok"] and result["config"]["kind"] == "randinit"
    assert result["capture"]["golden_vs_model"]["mismatches"] == 0
    assert result["export"]["check"]["mismatches"] == 0 and result["hls"]["csim"]["mismatches"] == 0
    for kind in ("randinit", "vanilla"):
        sim = result["cores"][kind]["sim"]
        assert sim["captured"]["mismatches"] == 0 and sim["captured"]["vectors"] == 20
    assert result["bleu"]["exported"]["hypotheses_differ"] == 0
    assert result["energy"]["randinit"]["alignment"]["adds"] == 0
