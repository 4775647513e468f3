"""README's commands on trained models (train, evaluate, export and capture of a layer, the
trained-layer flow, the windowed and flexible units, data, experiments), as a user runs them, in
text mode and --json mode: test_readme_commands.py's other half, a file of its own so that
`make test`'s two workers (one file at a time) run the halves side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_readme_commands import ROOT, TINY_RUN, both_modes, eatt, train_tiny


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("readme_trained")
    (root / "run.yaml").write_text(TINY_RUN)
    return root


@pytest.fixture(scope="module")
def checkpoint(work) -> Path:
    r = eatt("train", str(work / "run.yaml"), "-o", str(work / "run"), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    return Path(json.loads(r.stdout)["checkpoint"])


def test_train(work, checkpoint):
    r = both_modes(["train", str(work / "run.yaml"), "-o", str(work / "run2")], "trained 4 steps")
    assert Path(r["checkpoint"]).is_file()
    # --resume on a finished run of the same config: nothing trained, the checkpoint kept
    stamp = Path(r["checkpoint"]).stat().st_mtime_ns
    args = ["train", str(work / "run.yaml"), "-o", str(work / "run2"), "--resume"]
    again = both_modes(args, "already trained 4 steps")
    assert again["resumed"] == "finished" and again["checkpoint"] == r["checkpoint"]
    assert Path(r["checkpoint"]).stat().st_mtime_ns == stamp


def test_evaluate(checkpoint):
    r = both_modes(["evaluate", str(checkpoint), "--beam", "2", "--split", "dev"], "BLEU")
    assert "bleu" in r


def test_export_layers_of_a_model(work, checkpoint):
    r = both_modes(["export", str(checkpoint), "--list-layers"], "decoder.0.cross")
    assert [x["name"] for x in r["layers"] if x["hardware"]] == ["decoder.0.cross"]
    out = work / "layer.onnx"
    r = both_modes(
        ["export", str(checkpoint), "--layer", "decoder.0.cross", "-o", str(out), "--check", "40"],
        "layer decoder.0.cross of",
    )
    assert r["source"]["layer"] == "decoder.0.cross" and r["check"]["ok"]
    acts = work / "acts.npz"
    r = both_modes(
        ["capture", str(checkpoint), "--layer", "decoder.0.cross", "--split", "dev", "--max",
         "60", "-o", str(acts)],
        "golden model of the exported core vs the model: 0 mismatching",
    )  # fmt: skip
    assert r["vectors"] == 60
    r = both_modes(
        ["export", str(checkpoint), "--layer", "decoder.0.cross", "-o", str(out), "--check", "60",
         "--inputs", str(acts)],
        "60 captured",
    )  # fmt: skip
    assert r["check"]["captured"] and r["check"]["mismatches"] == 0
    r = both_modes(
        ["hls", str(out), "-o", str(work / "hls_layer"), "--vectors", "60", "--inputs", str(acts)],
        "60 captured",
    )
    assert r["csim"]["captured"] and r["csim"]["mismatches"] == 0
    rtl = work / "rtl_layer"
    r = both_modes(["rtl", str(out), "--level", "attention", "-o", str(rtl)], "wrote attention RTL")
    assert r["source"]["layer"] == "decoder.0.cross"
    r = both_modes(
        ["sim", str(rtl), "--inputs", str(acts), "--vectors", "60"], "60 captured vectors"
    )
    assert r["captured"] and r["mismatches"] == 0


@pytest.mark.hls
@pytest.mark.slow
def test_flow_a_trained_layer(work, checkpoint):
    """`eatt flow MODEL.pt --layer NAME --step`: the layer through every stage, PASS."""
    r = both_modes(
        ["flow", str(checkpoint), "--layer", "decoder.0.cross", "--step", "--split", "dev",
         "--vectors", "40", "--no-resources", "-o", str(work / "flow_layer")],
        "flow: PASS",
    )  # fmt: skip
    assert r["ok"] and r["capture"]["vectors"] == 40 and r["step"]
    assert r["bleu"]["exported"]["hypotheses_differ"] == 0
    assert (work / "flow_layer" / "report.png").is_file()


def test_evaluate_hardware(checkpoint):
    """The quantized cross-attention decoded as the exported core runs it: same hypotheses."""
    r = both_modes(
        ["evaluate", str(checkpoint), "--beam", "2", "--split", "dev", "--hardware"],
        "hypotheses differ",
    )
    assert r["hardware"]["exported"]["hypotheses_differ"] == 0
    assert r["hardware"]["exported"]["bleu"] == r["bleu"]


@pytest.mark.rtl
@pytest.mark.hls
def test_a_trained_windowed_model_on_the_unit(work):
    """README, "A trained windowed model on the unit": train a quant-local-p model, take its
    cross-attention out as the window unit, capture its steps, RTL on them, evaluate."""
    ckpt = train_tiny(work, "window_run", "cross: quant-local-p, window_score: eatt, window_d: 2")
    out, steps, rtl = work / "cross_window.onnx", work / "steps.npz", work / "rtl_window"
    r = both_modes(
        ["export", ckpt, "--layer", "decoder.0.cross", "-o", str(out), "--check", "40"],
        "exported window core",
    )
    assert r["check"]["ok"] and r["config"]["kind"] == "window"
    r = both_modes(
        ["capture", ckpt, "--layer", "decoder.0.cross", "--split", "dev", "--max", "50", "-o",
         str(steps)],
        "golden model of the exported core vs the model: 0 mismatching",
    )  # fmt: skip
    assert r["vectors"] == 50 and r["unit"] == "window"
    r = both_modes(
        ["export", ckpt, "--layer", "decoder.0.cross", "-o", str(out), "--check", "50",
         "--inputs", str(steps)],
        "50 captured",
    )  # fmt: skip
    assert r["check"]["captured"] and r["check"]["mismatches"] == 0
    r = both_modes(
        ["hls", str(out), "-o", str(work / "hls_window"), "--vectors", "50", "--inputs",
         str(steps)],
        "50 captured",
    )  # fmt: skip
    assert r["csim"]["captured"] and r["csim"]["mismatches"] == 0
    r = both_modes(["rtl", str(out), "-o", str(rtl)], "wrote window RTL")
    assert r["source"]["layer"] == "decoder.0.cross"
    r = both_modes(["sim", str(rtl), "--inputs", str(steps), "--vectors", "50"], "50 captured")
    assert r["captured"] and r["mismatches"] == 0
    r = both_modes(["evaluate", ckpt, "--beam", "2", "--split", "dev", "--hardware"], "differ")
    assert r["hardware"]["exported"]["hypotheses_differ"] == 0 and r["vision_span"] <= 5


@pytest.mark.rtl
@pytest.mark.hls
@pytest.mark.slow
def test_a_trained_flexible_model_on_the_unit(work):
    """README: `eatt train examples/window_flexible.yaml` (its config, at a tiny size here) and
    `eatt flow MODEL.pt --layer decoder.0.cross`: quant-flexible through every level, PASS."""
    from eatt.model.train import load_run_config

    model, _ = load_run_config(ROOT / "examples" / "window_flexible.yaml")
    assert model.cross == "quant-flexible" and model.quant_window().position == "flexible"
    ckpt = train_tiny(
        work, "flexible_run", "cross: quant-flexible, window_score: eatt, flexible_tau: 1.0"
    )
    r = both_modes(
        ["flow", ckpt, "--layer", "decoder.0.cross", "--split", "dev", "--vectors", "40",
         "--no-resources", "-o", str(work / "flow_flexible")],
        "flow: PASS",
    )  # fmt: skip
    assert r["ok"] and r["capture"]["unit"] == "window"
    assert r["bleu"]["exported"]["hypotheses_differ"] == 0


def test_data(work):
    """`eatt data -o DIR`: the Ding task's pinned splits, written as text (tests/test_ding.py
    checks the rules)."""
    r = both_modes(["data", "-o", str(work / "ding")], "sentence pairs")
    assert r["pinned"] == "same" and r["written"] == str(work / "ding")
    lines = (work / "ding" / "test.de").read_text(encoding="utf-8").splitlines()
    assert len(lines) == r["splits"]["test"]["pairs"] == 1234


def test_experiment_quick(work):
    r = both_modes(
        ["experiment", "eatt-vs-vanilla", "--quick", "-o", str(work / "results")], "vanilla"
    )
    assert (work / "results" / "eatt-vs-vanilla" / "results.json").is_file()
    assert r["rows"] if "rows" in r else r
    # --resume of a seeded experiment: its runs neither trained nor evaluated again
    runs = work / "results" / "eatt-vs-vanilla" / "runs"
    checkpoints = sorted(runs.glob("*/best.pt"))
    stamps = [p.stat().st_mtime_ns for p in [*checkpoints, *runs.glob("*/experiment_run.json")]]
    again = both_modes(
        ["experiment", "eatt-vs-vanilla", "--quick", "--resume", "-o", str(work / "results")],
        "vanilla",
    )
    assert again["rows"] == r["rows"] and len(checkpoints) == 6
    assert [p.stat().st_mtime_ns for p in [*checkpoints, *runs.glob("*/experiment_run.json")]] == (
        stamps
    )
    # --resume: a staged experiment run again reuses its finished runs (none trained again)
    out = ["-o", str(work / "staged")]
    first = eatt("experiment", "window-unit", "--quick", *out, "--json")
    assert first.returncode == 0, first.stderr[-3000:]
    checkpoints = sorted((work / "staged" / "window-unit" / "runs").glob("*/best.pt"))
    stamps = [p.stat().st_mtime_ns for p in checkpoints]
    r = both_modes(["experiment", "window-unit", "--quick", "--resume", *out], "local-p")
    assert [p.stat().st_mtime_ns for p in checkpoints] == stamps and checkpoints
    assert [row["bleu"] for row in r["rows"]] == [
        row["bleu"] for row in json.loads(first.stdout)["rows"]
    ]
    # a moved folder resumes too: a fine-tuned run's init_checkpoint is stored relative to it
    (work / "staged").rename(work / "moved")
    moved = sorted((work / "moved" / "window-unit" / "runs").glob("*/best.pt"))
    stamps = [p.stat().st_mtime_ns for p in moved]
    again = eatt("experiment", "window-unit", "--quick", "--resume", "-o", str(work / "moved"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert [p.stat().st_mtime_ns for p in moved] == stamps
