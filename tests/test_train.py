"""Tests of eatt.model.train and eatt.model.evaluate on tiny models and tiny data."""

import json
import math
from pathlib import Path

import pytest
import torch

from eatt.config import ConfigError
from eatt.model.data import TaskConfig, encode_pairs, make_batches, synthetic_task
from eatt.model.evaluate import evaluate, format_evaluation, greedy_decode
from eatt.model.seq2seq import ModelConfig, load_checkpoint
from eatt.model.train import TrainConfig, learning_rate, load_run_config, train

TINY_DATA = TaskConfig(
    n_train=24, n_dev=8, n_test=8, seed=3, min_len=5, max_len=8, n_nouns=6, n_verbs=3, n_adjs=3
)
TINY_MODEL = ModelConfig(dim=32, heads=2, ffn_dim=64, enc_layers=1, dec_layers=1, dropout=0.0)


def _train_cfg(**kw):
    base = dict(
        seed=5,
        steps=8,
        max_tokens=128,
        warmup=4,
        decay=100,
        peak_lr=3e-3,
        eval_every=4,
        progress=False,
        data=TINY_DATA,
    )
    return TrainConfig(**{**base, **kw})


def test_learning_rate_schedule():
    cfg = TrainConfig(peak_lr=1e-3, warmup=8000, decay=20000)  # the paper's Sec. 4.2
    assert learning_rate(4000, cfg) == pytest.approx(0.5e-3)
    assert learning_rate(8000, cfg) == pytest.approx(1e-3)
    assert learning_rate(20000, cfg) == pytest.approx(1e-3)
    assert learning_rate(80000, cfg) == pytest.approx(0.5e-3)
    assert learning_rate(0, cfg) == learning_rate(1, cfg) > 0


def test_same_seed_same_model(tmp_path):
    a = train(TINY_MODEL, _train_cfg(), tmp_path / "a")
    b = train(TINY_MODEL, _train_cfg(), tmp_path / "b")
    c = train(TINY_MODEL, _train_cfg(seed=6), tmp_path / "c")
    sa, sb, sc = (load_checkpoint(s["last_checkpoint"])[0].state_dict() for s in (a, b, c))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    assert a["history"] == b["history"] and len(a["history"]) == 2
    summary = json.loads((tmp_path / "a" / "train.json").read_text())
    assert summary["steps"] == 8 and summary["device"] == "cpu"
    _, _, _, payload = load_checkpoint(a["checkpoint"])
    assert payload["train_config"]["seed"] == 5 and payload["data_config"]["n_train"] == 24


def test_a_ramped_lambda_picks_its_best_after_the_ramp(tmp_path):
    """L0Drop with l0drop_ramp: checkpoints before lambda reaches its value are not candidates
    for best.pt (less pruned, they would win on dev loss); the ramp scales the penalty."""
    model = TINY_MODEL.replace(l0drop=True, l0drop_lambda=0.5, l0drop_ramp=6)
    summary = train(model, _train_cfg(steps=8, eval_every=2), tmp_path)
    assert [h["step"] for h in summary["history"]] == [2, 4, 6, 8]
    assert summary["best_step"] in (6, 8)
    # a ramp longer than the run: the last step is the only candidate
    longer = train(
        model.replace(l0drop_ramp=100), _train_cfg(steps=4, eval_every=2), tmp_path / "b"
    )
    assert longer["best_step"] == 4


@pytest.mark.parametrize("arch", ["transformer", "lstm"])
def test_fixed_gates_for_the_last_steps(tmp_path, arch):
    """l0drop_fix: the last N steps train through the detached test-time gates (w stays as it
    was, no penalty), and best.pt comes from that phase."""
    model = TINY_MODEL.replace(arch=arch, l0drop=True, l0drop_lambda=0.5, l0drop_fix=4)
    summary = train(model, _train_cfg(steps=8, eval_every=2), tmp_path / "a")
    assert summary["best_step"] in (6, 8)
    # w is the same at step 4 (before the phase: the history's checkpoint is last.pt at 8, so
    # compare with a run that stops at 4) and at step 8
    four = train(model.replace(l0drop_fix=0), _train_cfg(steps=4, eval_every=0), tmp_path / "b")
    w4 = load_checkpoint(four["last_checkpoint"])[0].l0drop.w
    w8 = load_checkpoint(summary["last_checkpoint"])[0].l0drop.w
    assert torch.equal(w4, w8)
    free = train(model.replace(l0drop_fix=0), _train_cfg(steps=8, eval_every=0), tmp_path / "c")
    assert not torch.equal(w4, load_checkpoint(free["last_checkpoint"])[0].l0drop.w)
    # a ramp longer than the sampled phase does not hold back the fixed phase's checkpoints
    ramped = train(model.replace(l0drop_ramp=7), _train_cfg(steps=8, eval_every=2), tmp_path / "r")
    assert ramped["best_step"] in (6, 8)
    with pytest.raises(ConfigError, match="l0drop_fix: 8 fixed steps of 8"):
        train(model.replace(l0drop_fix=8), _train_cfg(steps=8), tmp_path / "d")
    assert not (tmp_path / "d").exists()
    with pytest.raises(ConfigError, match="l0drop_fix"):
        TINY_MODEL.replace(l0drop_fix=4)
    with pytest.raises(ConfigError, match="l0drop_fix"):
        TINY_MODEL.replace(l0drop=True, l0drop_rule="group", l0drop_fix=4)


@pytest.mark.parametrize("attention", ["vanilla", "eatt"])
def test_tiny_model_overfits_tiny_set(tmp_path, attention):
    cfg = TINY_MODEL.replace(attention=attention)
    summary = train(cfg, _train_cfg(steps=150, eval_every=0, label_smoothing=0.0), tmp_path)
    assert summary["train_loss"] < 0.3
    model, src_vocab, tgt_vocab, _ = load_checkpoint(summary["last_checkpoint"])
    data = synthetic_task(TINY_DATA)
    encoded = encode_pairs(data.train, src_vocab, tgt_vocab)
    (batch,) = make_batches(encoded, max_tokens=10**6)
    outputs = greedy_decode(model, batch.src)
    correct = sum(out == encoded[i][1] for i, out in zip(batch.index, outputs, strict=True))
    assert correct >= 0.75 * len(encoded)


def test_evaluate_a_checkpoint(tmp_path):
    summary = train(TINY_MODEL.replace(attention="eatt"), _train_cfg(), tmp_path)
    result = evaluate(summary["checkpoint"], beam=2, device="cpu")
    assert result["sentences"] == 8 and 0.0 <= result["bleu"] <= 100.0
    assert result["attention"] == {"enc_self": "eatt", "dec_self": "eatt", "cross": "eatt"}
    assert set(result["binarization"]) == {"enc_self", "dec_self", "cross_query", "cross_key"}
    assert 0 < result["energy"]["percent_of_vanilla"]["asic"] < 100
    json.dumps(result)  # JSON-ready
    assert "BLEU" in format_evaluation(result)
    greedy = evaluate(summary["checkpoint"], beam=1, split="dev", device="cpu")
    assert greedy["split"] == "dev" and math.isfinite(greedy["bleu"])


def test_run_config_files(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        "model: {dim: 32, heads: 2, attention: eatt}\n"
        "train: {steps: 10, peak_lr: 0.002}\n"
        "data: {n_train: 50, noise: 0.1}\n"
    )
    model_cfg, train_cfg = load_run_config(path)
    assert model_cfg.attention == "eatt" and train_cfg.steps == 10
    assert train_cfg.data == TaskConfig(n_train=50, noise=0.1)
    for text, match in (
        ("model: {dim: 32}\nextra: {}\n", "unknown section 'extra'"),
        ("train: {stepz: 3}\n", "train.stepz: unknown key"),
        ("train: {steps: 0}\n", "train.steps: must be in"),
        ("train: {device: tpu}\n", "train.device"),
        ("data: {kind: files, train_src: a.txt}\n", "data.train_tgt"),
        ("model: {heads: 3}\n", "model.heads"),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError, match=match) as err:
            load_run_config(path)
        assert "\n" not in str(err.value) and str(path) in str(err.value)
    with pytest.raises(ConfigError, match="no such config file"):
        load_run_config(tmp_path / "missing.yaml")


def test_missing_data_files_give_one_line(tmp_path):
    files = {
        f"{s}_{side}": str(tmp_path / f"{s}.{side}")
        for s in ("train", "dev", "test")
        for side in ("src", "tgt")
    }
    cfg = _train_cfg(data=TrainConfig.from_dict({"data": {"kind": "files", **files}}).data)
    with pytest.raises(ValueError, match="train.src: no such file") as err:
        train(TINY_MODEL, cfg, tmp_path / "out")
    assert "\n" not in str(err.value)


def test_quick_experiment_writes_its_table(tmp_path):
    from eatt.model.experiments import run_experiment

    report = run_experiment("eatt-vs-vanilla", quick=True, out_dir=tmp_path, quiet=True)
    folder = tmp_path / "eatt-vs-vanilla"
    saved = json.loads((folder / "results.json").read_text())
    assert saved["rows"] == report["rows"] and [r["label"] for r in saved["rows"]] == [
        "vanilla",
        "eatt",
    ]
    assert all(len(r["bleus"]) == 3 for r in saved["rows"])
    assert saved["rows"][0]["energy_asic_percent"] == 100.0
    assert saved["rows"][1]["energy_asic_percent"] < 50.0
    assert "| eatt |" in (folder / "results.md").read_text()
    if report["plot"] is not None:
        assert (folder / "eatt-vs-vanilla.png").stat().st_size > 0
    with pytest.raises(ValueError, match="unknown experiment"):
        run_experiment("table9", quick=True, out_dir=tmp_path)


def test_experiment_steps_and_seeds_override_the_plan(tmp_path):
    from eatt.model.experiments import run_experiment

    report = run_experiment(
        "eatt-vs-vanilla", quick=True, out_dir=tmp_path, quiet=True, steps=3, seeds=(7, 9)
    )
    assert report["seeds"] == [7, 9] and report["train"]["steps"] == 3
    assert [r["seed"] for r in report["runs"]] == [7, 9, 7, 9]
    assert all(len(r["bleus"]) == 2 for r in report["rows"])
    assert "3 steps" in (tmp_path / "eatt-vs-vanilla" / "results.md").read_text()
    with pytest.raises(ValueError, match="seeds: distinct"):
        run_experiment("ablation", quick=True, out_dir=tmp_path, seeds=(1, 1))
    with pytest.raises(ValueError, match="not for the staged experiment 'window'"):
        run_experiment("window", quick=True, out_dir=tmp_path, steps=5)
    _resume_of_a_seeded_experiment(tmp_path, report)


class _NotAWeight:
    pass


def _resume_of_a_seeded_experiment(tmp_path, report):
    """--resume: the finished runs are neither trained nor evaluated again, a new seed is
    trained alone, a run without its saved row is evaluated again (not trained), a planted
    last.pt stops the experiment before any training."""
    from eatt.model.experiments import run_experiment, seeded

    calls = {"train": 0, "evaluate": 0}

    def counted(name, fn):  # calls that train or evaluate (a finished run returned: none)
        def wrapper(*args, **kw):
            result = fn(*args, **kw)
            calls[name] += result.get("resumed") != "finished"
            return result

        return wrapper

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(seeded, "train", counted("train", seeded.train))
        mp.setattr(seeded, "evaluate", counted("evaluate", seeded.evaluate))
        kw = dict(quick=True, out_dir=tmp_path, quiet=True, steps=3, resume=True)
        again = run_experiment("eatt-vs-vanilla", seeds=(7, 9), **kw)
        assert calls == {"train": 0, "evaluate": 0}
        assert again["rows"] == report["rows"]
        runs = tmp_path / "eatt-vs-vanilla" / "runs"
        (runs / "eatt-seed9" / seeded.RUN_RESULT).unlink()
        more = run_experiment("eatt-vs-vanilla", seeds=(7, 9, 11), **kw)
        assert calls == {"train": 2, "evaluate": 3}  # seed 11 twice; eatt seed 9 evaluated
        assert [r["bleus"][:2] for r in more["rows"]] == [r["bleus"] for r in report["rows"]]
        torch.save({"step": 3, "x": _NotAWeight()}, runs / "vanilla-seed11" / "last.pt")
        with pytest.raises(ValueError, match="last.pt: holds objects"):
            run_experiment("eatt-vs-vanilla", seeds=(1, 9, 11), **kw)
        assert calls["train"] == 2 and not (runs / "vanilla-seed1").exists()
        (runs / "vanilla-seed11" / "last.pt").unlink()
        torch.save({"x": _NotAWeight()}, runs / "eatt-seed11" / "partial.pt")
        with pytest.raises(ValueError, match="partial.pt: holds objects"):
            run_experiment("eatt-vs-vanilla", seeds=(1, 9, 11), **kw)
        assert calls["train"] == 2 and not (runs / "vanilla-seed1").exists()


def test_train_from_a_config_file(tmp_path):
    from eatt.model.train import train_from_config

    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            {
                "model": TINY_MODEL.to_dict(),
                "train": {"steps": 2, "max_tokens": 128, "eval_every": 0},
                "data": {k: v for k, v in TINY_DATA.__dict__.items()},
            }
        )
    )
    summary = train_from_config(path, tmp_path / "out", progress=False)
    assert summary["steps"] == 2 and (tmp_path / "out" / "best.pt").is_file()


def test_evaluate_refuses_changed_data(tmp_path):
    summary = train(TINY_MODEL, _train_cfg(steps=1, eval_every=0), tmp_path)
    payload = torch.load(summary["checkpoint"], weights_only=True)
    assert payload["data_fingerprint"] == synthetic_task(TINY_DATA).fingerprint()
    payload["data_fingerprint"] = "0" * 64
    torch.save(payload, tmp_path / "changed.pt")
    with pytest.raises(ValueError, match="no longer gives the data") as err:
        evaluate(tmp_path / "changed.pt", beam=1, device="cpu")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["ablation", "hybrids", "energy-vs-quality"])
def test_other_experiments_smoke(tmp_path, monkeypatch, name):
    """The other experiments' plans, tables and files, with 2 training steps per run."""
    from eatt.model import experiments
    from eatt.model.experiments import base as sizes

    monkeypatch.setattr(sizes, "_QUICK_TRAIN", sizes._QUICK_TRAIN.replace(steps=2))
    report = experiments.run_experiment(name, quick=True, out_dir=tmp_path, quiet=True)
    table = (tmp_path / name / "results.md").read_text()
    rows = {r["label"]: r for r in report["rows"]}
    if name == "ablation":
        assert list(rows) == ["vanilla", "discrete selection only", "L1 distance only", "eatt"]
        assert rows["L1 distance only"]["energy_asic_percent"] is None
    if name == "hybrids":
        assert len(rows) == 16 and "| cross \\ self | vanilla | dense | randinit | eatt |" in table
        if report["plot"] is not None:  # the grid as heat maps
            assert (tmp_path / name / "hybrids.png").stat().st_size > 0
        assert rows["self=randinit cross=randinit"]["energy_asic_percent"] < 50.0
    if name == "energy-vs-quality":
        assert list(rows) == ["vanilla d=32", "vanilla d=16", "eatt d=32", "eatt d=16"]
        assert rows["vanilla d=32"]["energy_asic_percent"] == 100.0
        assert (
            rows["eatt d=16"]["energy_asic_percent"] < rows["vanilla d=16"]["energy_asic_percent"]
        )
        assert "widest vanilla model" in table
        # two worker processes give the same (deterministic) runs
        again = experiments.run_experiment(
            name, quick=True, out_dir=tmp_path / "w2", quiet=True, workers=2
        )
        assert [r["bleus"] for r in again["rows"]] == [r["bleus"] for r in report["rows"]]


def test_l0drop_scratch_experiment_smoke(tmp_path, monkeypatch):
    """l0drop-scratch: the plan (ramp 3/8, fixed gates the last quarter, scaled to --steps),
    the sparsity per row, the target line, the files."""
    from eatt.model import experiments
    from eatt.model.experiments import base as sizes

    monkeypatch.setattr(sizes, "_QUICK_TRAIN", sizes._QUICK_TRAIN.replace(steps=4))
    report = experiments.run_experiment("l0drop-scratch", quick=True, out_dir=tmp_path, quiet=True)
    rows = {r["label"]: r for r in report["rows"]}
    assert list(rows) == ["no L0Drop", "lambda 0.5", "lambda 0.5, gates fixed"]
    assert report["train"]["steps"] == 8 and report["data"]["redundant"]
    assert rows["no L0Drop"]["sparsity_mean"] == 0.0
    assert all(0.0 <= r["sparsity_mean"] <= 1.0 for r in rows.values())
    table = (tmp_path / "l0drop-scratch" / "results.md").read_text()
    assert "| lambda 0.5, gates fixed |" in table and "Target: >= 40%" in table
    assert "| model | subword pieces | case markers |" in table
    assert set(rows["no L0Drop"]["pruned_by_category"].values()) == {0.0}
    for run in report["runs"]:  # the categories add up to the run's sparsity rate
        counts = run["pruned_by_category"].values()
        rate = sum(c[1] for c in counts) / sum(c[0] for c in counts)
        assert rate == pytest.approx(run["sparsity_rate"] or 0.0)
    from eatt.model.experiments.l0drop_scratch import token_category

    assert [token_category(t) for t in ("n1@@", "@7", "ko", ",", "x", "and", "n4", "v2")] == [
        "subword pieces", "subword pieces", "case markers", *["auxiliary, punctuation, and"] * 3,
        "other words", "other words",
    ]  # fmt: skip
    assert report["target"]["bleu_reference"] == rows["no L0Drop"]["bleu_mean"]
    plan = experiments.REGISTRY["l0drop-scratch"].configured_plan(True, steps=16)
    fixed = plan.variants[2].model
    assert (fixed.l0drop_ramp, fixed.l0drop_fix) == (6, 4) and plan.train.steps == 16


def test_threads_are_set_for_training_and_restored(tmp_path, monkeypatch):
    seen = []
    from eatt.model import train as train_module

    real = train_module._train

    def spy(*args):
        seen.append(torch.get_num_threads())
        return real(*args)

    monkeypatch.setattr(train_module, "_train", spy)
    before = torch.get_num_threads()
    train(TINY_MODEL, _train_cfg(steps=1, eval_every=0, threads=2), tmp_path)
    assert seen == [2] and torch.get_num_threads() == before


def test_evaluate_with_hardware_arithmetic(tmp_path):
    """A quantized model's eval is its cores' integer arithmetic: decoding as the exported
    cores run it (max_len, masks) gives the same hypotheses; the surrogate's BLEU is reported
    beside it; a float model has nothing to compare."""
    summary = train(TINY_MODEL.replace(attention="quant-eatt"), _train_cfg(), tmp_path)
    result = evaluate(summary["checkpoint"], beam=2, device="cpu", hardware=True)
    hw = result["hardware"]
    assert hw["exported"]["hypotheses_differ"] == 0 and hw["exported"]["bleu"] == result["bleu"]
    assert 0 <= hw["surrogate"]["hypotheses_differ"] <= result["sentences"]
    assert "hypotheses differ from the model's" in format_evaluation(result)
    assert result["energy"]["energy_pj"] is not None  # the cores' own counts
    float_run = train(TINY_MODEL.replace(attention="eatt"), _train_cfg(), tmp_path / "float")
    with pytest.raises(ValueError, match="--hardware needs a model with quantized attention"):
        evaluate(float_run["checkpoint"], beam=1, device="cpu", hardware=True)


def test_a_full_disk_while_saving_leaves_the_last_checkpoint(tmp_path):
    """`eatt train` whose checkpoint cannot be written whole (here past a file size limit, as
    under `ulimit -f` or on a full disk): exit 2, one line naming the file, and the previous
    checkpoint of the folder as it was (issue 39 item 7)."""
    import hashlib
    import resource
    import subprocess
    import sys

    run = tmp_path / "run.yaml"
    run.write_text("model: {dim: 16, heads: 2}\ntrain: {steps: 2}\n")
    cmd = [sys.executable, "-m", "eatt.cli", "train", str(run), "-o", str(tmp_path / "out")]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    best = tmp_path / "out" / "best.pt"
    digest = hashlib.sha256(best.read_bytes()).hexdigest()

    def limit() -> None:  # in the child: files past 30 KB cannot be written
        resource.setrlimit(resource.RLIMIT_FSIZE, (30 * 1024, resource.RLIM_INFINITY))

    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, preexec_fn=limit)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("eatt: error:") and ".pt: could not write it whole" in line
    assert "Traceback" not in r.stderr
    assert hashlib.sha256(best.read_bytes()).hexdigest() == digest
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".best.pt.")]


class _Interrupted(Exception):
    pass


@pytest.mark.parametrize(
    "model",
    [
        TINY_MODEL.replace(dropout=0.2),
        TINY_MODEL.replace(l0drop=True, l0drop_lambda=0.5, l0drop_fix=4),  # fixed from step 5
    ],
    ids=["dropout", "l0drop-fix"],
)
def test_an_interrupted_run_resumes_bit_for_bit(tmp_path, monkeypatch, model):
    """train(resume=True) continues a run stopped after step 6 from its evaluation at step 6
    (partial.pt: the model, Adam's moments, the RNG, the batch stream's place): the same
    checkpoints, history and best as a run never stopped; a finished run is returned as it is;
    a state of other settings is not resumed."""
    from eatt.model import train as train_module
    from eatt.model.train_state import PARTIAL, partial_step

    cfg = _train_cfg(steps=10, eval_every=3)
    whole = train(model, cfg, tmp_path / "whole")
    assert not (tmp_path / "whole" / PARTIAL).exists()  # a finished run leaves no state
    calls, real_loss = {"n": 0}, train_module.token_loss

    def stopping(m, batch, *a):
        if m.training:
            calls["n"] += 1
            if calls["n"] == 8:  # step 8: after the evaluation at step 6
                raise _Interrupted
        return real_loss(m, batch, *a)

    with monkeypatch.context() as mp:
        mp.setattr(train_module, "token_loss", stopping)
        with pytest.raises(_Interrupted):
            train(model, cfg, tmp_path / "run")
    assert (tmp_path / "run" / PARTIAL).is_file() and not (tmp_path / "run" / "train.json").exists()
    assert partial_step(tmp_path / "run") == 6 and partial_step(tmp_path / "whole") is None
    resumed = train(model, cfg, tmp_path / "run", resume=True)
    assert resumed["resumed"] == 6 and not (tmp_path / "run" / PARTIAL).exists()
    for name in ("last_checkpoint", "checkpoint"):
        a, b = (load_checkpoint(s[name])[0].state_dict() for s in (whole, resumed))
        assert all(torch.equal(a[k], b[k]) for k in a), name
    keep = ("history", "best_step", "dev_loss", "train_loss", "steps")
    assert {k: resumed[k] for k in keep} == {k: whole[k] for k in keep}
    again = train(model, cfg, tmp_path / "run", resume=True)  # finished: nothing trained
    assert again["resumed"] == "finished" and again["history"] == whole["history"]
    # a state of other settings is not resumed: the run starts from step 0
    with monkeypatch.context() as mp:
        calls["n"] = 0
        mp.setattr(train_module, "token_loss", stopping)
        with pytest.raises(_Interrupted):
            train(model, cfg, tmp_path / "other")
    fresh = train(model, cfg.replace(peak_lr=1e-3), tmp_path / "other", resume=True)
    assert "resumed" not in fresh and fresh["history"][0]["step"] == 3


def test_an_interrupted_cli_run_says_where_resume_continues(tmp_path, monkeypatch, capsys):
    """Ctrl-C (or SIGTERM) in `eatt train`: exit 130, and a line naming the step a `--resume`
    of the same command continues from (the last evaluation's partial.pt)."""
    from eatt.cli import main
    from eatt.model import train as train_module
    from eatt.model.train_state import save_partial

    def interrupted(config, out, **kwargs):
        Path(out).mkdir(parents=True, exist_ok=True)
        save_partial(Path(out), {"step": 500})
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "train_from_config", interrupted)
    run = tmp_path / "run"
    assert main(["train", "run.yaml", "-o", str(run)]) == 130
    err = capsys.readouterr().err
    assert f"{run} holds step 500: `eatt train run.yaml -o {run} --resume`" in err
    assert err.strip().endswith("eatt: interrupted")


def test_pairs_longer_than_the_model_s_cores_are_refused_before_training(tmp_path):
    """A model whose quantized cores are sized by max_len, on data with longer sentences: one
    line naming the data's max_len, before any folder is made or any step trained (it was the
    first batch that held such a pair, some steps in)."""
    model = TINY_MODEL.replace(attention="quant-eatt", max_len=6)
    with pytest.raises(ValueError, match=r"^data: a training (source|target) has \d+ tokens: .*"
                       r"exceeds max_len=6.*the data section's max_len \(5 or less\)"):  # fmt: skip
        train(model, _train_cfg(), tmp_path / "run")
    assert not (tmp_path / "run").exists()
