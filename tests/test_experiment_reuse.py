"""``eatt experiment --reuse REPORT.json``: runs of an earlier report taken, not trained again
(eatt.model.experiments.reuse)."""

from __future__ import annotations

import json

import pytest

from eatt.model import experiments
from eatt.model.experiments import base as sizes
from eatt.model.experiments import seeded

KW = dict(quick=True, quiet=True, steps=2, seeds=(7,))


@pytest.fixture
def vanilla_report(tmp_path, monkeypatch):
    """eatt-vs-vanilla (quick, 2 steps, seed 7): its results.json."""
    report = experiments.run_experiment("eatt-vs-vanilla", out_dir=tmp_path / "first", **KW)
    return tmp_path / "first" / "eatt-vs-vanilla" / "results.json", report


def _counting(monkeypatch) -> list:
    trained = []

    def train(model, cfg, run_dir, **kw):
        trained.append(run_dir.name)
        return real(model, cfg, run_dir, **kw)

    real = seeded.train
    monkeypatch.setattr(seeded, "train", train)
    return trained


@pytest.mark.parametrize("workers", [1, 2])
def test_ablation_takes_the_shared_runs(tmp_path, monkeypatch, vanilla_report, workers):
    """The ablation's vanilla and E-ATT rows are eatt-vs-vanilla's runs: only its two other
    variants are trained; the reused rows are the report's, and equal to training them again."""
    path, first = vanilla_report
    trained = _counting(monkeypatch)
    out = tmp_path / f"w{workers}"
    report = experiments.run_experiment(
        "ablation", out_dir=out, workers=workers, reuse=(path,), **KW
    )
    if workers == 1:
        assert trained == ["discrete selection only-seed7", "L1 distance only-seed7"]
    runs = {r["label"]: r for r in report["runs"]}
    assert runs["vanilla"]["reused_from"] == str(path)
    assert "reused_from" not in runs["L1 distance only"]
    before = {r["label"]: r["bleu"] for r in first["runs"]}
    assert runs["vanilla"]["bleu"] == before["vanilla"] and runs["eatt"]["bleu"] == before["eatt"]
    table = (out / "ablation" / "results.md").read_text()
    assert f"Reused (not trained again) from {path}: vanilla seed 7, eatt seed 7." in table
    saved = json.loads((out / "ablation" / "results.json").read_text())
    assert saved["runs"][0]["reused_from"] == str(path)
    if workers == 1:  # the reused row is what training it again gives (every run deterministic)
        again = experiments.run_experiment("ablation", out_dir=tmp_path / "again", **KW)
        assert [r["bleus"] for r in again["rows"]] == [r["bleus"] for r in report["rows"]]


def test_other_settings_are_trained(tmp_path, monkeypatch, vanilla_report):
    """Another seed or another length: nothing of the report is taken."""
    path, _ = vanilla_report
    trained = _counting(monkeypatch)
    kw = {**KW, "seeds": (8,)}
    report = experiments.run_experiment("ablation", out_dir=tmp_path / "s8", reuse=(path,), **kw)
    assert len(trained) == 4 and not any(r.get("reused_from") for r in report["runs"])


def test_a_report_the_code_no_longer_plans_is_refused(tmp_path, monkeypatch, vanilla_report):
    path, _ = vanilla_report
    changed = json.loads(path.read_text())
    changed["model"]["ffn_dim"] += 1
    bad = tmp_path / "changed.json"
    bad.write_text(json.dumps(changed))
    with pytest.raises(ValueError, match=r"changed.json: its model is not what eatt-vs-vanilla"):
        experiments.run_experiment("ablation", out_dir=tmp_path / "x", reuse=(bad,), **KW)
    monkeypatch.setattr(sizes, "_QUICK_MODEL", sizes._QUICK_MODEL.replace(ffn_dim=7))
    with pytest.raises(ValueError, match="the code has changed since it was written"):
        experiments.run_experiment("ablation", out_dir=tmp_path / "x", reuse=(path,), **KW)
    staged = tmp_path / "staged.json"
    staged.write_text(json.dumps({**changed, "experiment": "l0drop"}))
    with pytest.raises(ValueError, match="not of an experiment of independent runs"):
        experiments.run_experiment("ablation", out_dir=tmp_path / "x", reuse=(staged,), **KW)
    assert not (tmp_path / "x").exists()


def test_a_stopped_experiment_leaves_its_finished_runs_to_reuse(tmp_path, monkeypatch):
    """partial.json holds the runs finished so far after each one: an experiment stopped part
    way (here by its third training) is taken up by --reuse from that file alone, its run
    folders gone, training only what was missing."""
    trained = _counting(monkeypatch)
    real = seeded.train

    def stop_at_third(model, cfg, run_dir, **kw):
        if len(trained) == 2:  # two runs trained: the third is stopped
            raise KeyboardInterrupt
        return real(model, cfg, run_dir, **kw)

    monkeypatch.setattr(seeded, "train", stop_at_third)
    with pytest.raises(KeyboardInterrupt):
        experiments.run_experiment("ablation", out_dir=tmp_path / "a", **KW)
    partial = tmp_path / "a" / "ablation" / seeded.PARTIAL
    saved = json.loads(partial.read_text())
    assert saved["partial"] and [r["label"] for r in saved["runs"]] == [
        "vanilla",
        "discrete selection only",
    ]
    kept = tmp_path / "ablation-partial.json"
    kept.write_text(partial.read_text())  # as committed; the run folders are not
    trained.clear()
    monkeypatch.setattr(seeded, "train", real)  # train again, counted
    report = experiments.run_experiment("ablation", out_dir=tmp_path / "b", reuse=(kept,), **KW)
    assert trained == ["L1 distance only-seed7", "eatt-seed7"]
    assert [bool(r.get("reused_from")) for r in report["runs"]] == [True, True, False, False]
    full = json.loads((tmp_path / "b" / "ablation" / seeded.PARTIAL).read_text())
    assert len(full["runs"]) == 4
    # its runs taken again from the new partial.json: each names the file it was measured in
    again = tmp_path / "again.json"
    again.write_text(json.dumps(full))
    trained.clear()
    third = experiments.run_experiment("ablation", out_dir=tmp_path / "c", reuse=(again,), **KW)
    assert (
        trained == []
        and [r["reused_from"] for r in third["runs"]] == [str(kept)] * 2 + [str(again)] * 2
    )
