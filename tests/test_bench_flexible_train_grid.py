"""bench/flexible_train_grid.py --quick: the bases, the points (with and without the window in
training), each point's pick on dev and target line; one point alone and --merge."""

from __future__ import annotations

import json

from bench_module import load_bench


def _bench():
    return load_bench("flexible_train_grid")


def test_quick_grid_and_one_point_merged(tmp_path, monkeypatch, capsys):
    from eatt.model.experiments import base as sizes

    monkeypatch.setattr(sizes, "_QUICK_TRAIN", sizes._QUICK_TRAIN.replace(steps=3))
    bench = _bench()
    assert bench.parse_point(bench.point_name("eatt", 0.3, None, 500, 2)) == (
        "eatt", 0.3, None, 500, 2,
    )  # fmt: skip
    out = tmp_path / "grid.json"
    assert bench.main(["--quick", "--work", str(tmp_path / "w"), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [r["name"] for r in result["rows"]] == ["eatt-b0.3-tt1.6-2-s1", "eatt-b1-ttnone-2-s1"]
    for row in result["rows"]:
        assert [c["tau"] for c in row["curve"]] == list(bench.TAUS) * 2
        assert row["tau_on_dev"] in bench.TAUS
        assert row["met"] == (row["window_reduction"] >= 0.5 and row["bleu_drop"] <= 0.5)
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["points"] == 2
    # one point alone, appended to a JSON-lines file, then merged
    lines = tmp_path / "points.jsonl"
    base = str(tmp_path / "w" / "base-eatt" / "best.pt")
    args = ["--quick", "--base", base, "--work", str(tmp_path / "p"), "--jsonl", str(lines)]
    assert bench.main(["--point", "eatt-b0.1-tt2-2-s1", *args]) == 0
    merged = tmp_path / "merged.json"
    assert bench.main(["--merge", str(lines), "--out", str(merged)]) == 0
    rows = json.loads(merged.read_text())["rows"]
    assert [(r["beta"], r["train_tau"]) for r in rows] == [(0.1, 2.0)]
