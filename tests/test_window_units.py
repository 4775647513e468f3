"""The window experiment's units (eatt.model.experiments.units): each Luong kind, Flexible per
score and each window-unit kind computed on its own, so ``--workers`` runs them at once,
partial.json keeps the finished ones and ``--reuse`` takes them from a report."""

from __future__ import annotations

import json

import pytest

from eatt.model import experiments
from eatt.model.data import TaskConfig
from eatt.model.experiments import base as sizes
from eatt.model.experiments import staged, units, window

KEEP = ("label", "bleu", "vision_span", "tau")


@pytest.fixture
def tiny(monkeypatch):
    """The quick window experiment at 3 steps on a tiny task, the unit's kinds cut to one."""
    monkeypatch.setattr(sizes, "_QUICK_TRAIN", sizes._QUICK_TRAIN.replace(steps=3))
    data = TaskConfig(n_train=60, n_dev=8, n_test=8, max_len=8, n_nouns=6, n_verbs=3, n_adjs=3)
    monkeypatch.setattr(sizes, "_QUICK_DATA", data)
    monkeypatch.setattr(window, "QUICK_QUANT_KINDS", ("quant-local-p",))
    monkeypatch.setattr(window, "UNIT_FLEXIBLE_SCORES", ())


def _rows(report: dict) -> list[dict]:
    return [{k: r.get(k) for k in KEEP} for r in report["rows"]]


def _wrap(real, trained: list):
    """staged.train counting the runs it trains (their folders' names)."""

    def train(model, cfg, run_dir, **kw):
        trained.append(run_dir.name)
        return real(model, cfg, run_dir, **kw)

    return train


def test_units_in_parallel_give_the_serial_rows(tmp_path, tiny):
    """Two Ray workers: the same rows in the same order, each unit with its settings."""
    serial = experiments.run_experiment("window", quick=True, out_dir=tmp_path / "1", quiet=True)
    both = experiments.run_experiment(
        "window", quick=True, out_dir=tmp_path / "2", quiet=True, workers=2
    )
    assert _rows(both) == _rows(serial) and both["target"] == serial["target"]
    assert [u["unit"] for u in both["units"]] == [
        ["luong", "global"], ["luong", "local-m"], ["luong", "local-p"],
        ["flexible", "general"], ["flexible", "eatt"], ["unit", "quant-local-p", "dot"],
    ]  # fmt: skip
    flexible = both["units"][4]["settings"]
    assert flexible["model"]["window_score"] == "eatt" and flexible["betas"] == [0.1, 1.0]


def test_a_stopped_window_experiment_is_taken_up_from_its_partial_json(tmp_path, tiny, monkeypatch):
    """Stopped in its second Flexible stage: partial.json holds the Luong kinds and the first
    Flexible stage; --reuse of that file alone (the run folders gone) trains only the rest,
    and the report equals an uninterrupted one's."""
    real = staged.train

    def stop(model, cfg, run_dir, **kw):
        if run_dir.name == "flexible_eatt":
            raise KeyboardInterrupt
        return real(model, cfg, run_dir, **kw)

    monkeypatch.setattr(staged, "train", stop)
    with pytest.raises(KeyboardInterrupt):
        experiments.run_experiment("window", quick=True, out_dir=tmp_path / "a", quiet=True)
    partial = json.loads((tmp_path / "a" / "window" / units.PARTIAL).read_text())
    assert partial["partial"] and [u["unit"][1] for u in partial["units"]] == [
        "global", "local-m", "local-p", "general",
    ]  # fmt: skip
    kept = tmp_path / "window-partial.json"
    kept.write_text(json.dumps(partial))
    trained = []
    monkeypatch.setattr(staged, "train", _wrap(real, trained))
    report = experiments.run_experiment(
        "window", quick=True, out_dir=tmp_path / "b", quiet=True, reuse=(kept,)
    )
    assert trained[0] == "flexible_eatt" and not any(
        t.startswith(("global", "local", "flexible-")) for t in trained
    )
    assert [bool(u.get("reused_from")) for u in report["units"]] == [True] * 4 + [False] * 2
    table = (tmp_path / "b" / "window" / "results.md").read_text()
    assert f"Reused (not computed again) from {kept}: luong global, luong local-m, " in table
    monkeypatch.setattr(staged, "train", real)
    whole = experiments.run_experiment("window", quick=True, out_dir=tmp_path / "c", quiet=True)
    assert _rows(report) == _rows(whole) and report["target"] == whole["target"]


def test_reuse_takes_only_reports_of_its_kind(tmp_path, tiny):
    """A window report given to a seeded experiment, or one without units, is refused in one
    line naming the file; an experiment whose stages start from each other takes none."""
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"experiment": "window", "rows": []}))
    with pytest.raises(ValueError, match=r"old.json: a report of window written before its units"):
        experiments.run_experiment("window", quick=True, out_dir=tmp_path / "x", reuse=(old,))
    seeded = tmp_path / "seeded.json"
    seeded.write_text(json.dumps({"experiment": "ablation", "runs": []}))
    with pytest.raises(ValueError, match=r"seeded.json: not a report of an experiment of indep"):
        experiments.run_experiment("window", quick=True, out_dir=tmp_path / "x", reuse=(seeded,))
    with pytest.raises(ValueError, match=r"old.json: a report of 'window', whose units only"):
        experiments.run_experiment("ablation", quick=True, out_dir=tmp_path / "x", reuse=(old,))
    with pytest.raises(ValueError, match=r"--reuse: l0drop is a staged experiment whose stages"):
        experiments.run_experiment("l0drop", quick=True, out_dir=tmp_path / "x", reuse=(old,))
    assert not (tmp_path / "x").exists()


def test_reports_name_paths_relative_to_the_working_folder(tmp_path):
    """A committed report names no machine's folders: paths under the working folder are
    written relative to it, others as they are."""
    from eatt.model.experiments.base import relative_paths

    report = {"plot": f"{tmp_path}/runs/w/window.png", "rows": [{"ckpt": "/elsewhere/best.pt"}]}
    assert relative_paths(report, tmp_path) == {
        "plot": "runs/w/window.png",
        "rows": [{"ckpt": "/elsewhere/best.pt"}],
    }
