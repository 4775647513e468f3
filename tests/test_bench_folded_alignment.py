"""bench/folded_alignment.py: the folded engine's alignment leaves of both kinds synthesized at
one small folding (E-ATT without a DSP48E1, the ratio and the files), and a bad --out."""

from __future__ import annotations

import json

from bench_module import load_bench


def _bench():
    return load_bench("folded_alignment")


def test_small_point_and_files(tmp_path, monkeypatch, capsys):
    bench = _bench()
    monkeypatch.setitem(bench.POINTS, "small", [(4, 8, 2, 2, 2, 1, True)])
    out = tmp_path / "align.json"
    assert bench.main(["--points", "small", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    (row,) = result["rows"]
    e, v = row["eatt"], row["vanilla"]
    assert e["DSP48E1"] == 0 and v["DSP48E1"] > 0  # E-ATT's Q/K and scores: no multiplier
    assert e["LUT_equiv"] == e["LUT"] and v["LUT_equiv"] == v["LUT"] + 130 * v["DSP48E1"]
    assert row["ratios"]["LUT_equiv"] == round(e["LUT_equiv"] / v["LUT_equiv"], 4) < 0.5
    assert v["LUT_nodsp"] > e["LUT_nodsp"]
    assert 0 < row["paper_alignment_energy_ratio"] < 0.1
    assert "**" in out.with_suffix(".md").read_text() and out.with_suffix(".png").is_file()
    assert "| 4, 8, 2 | 2, 2 |" in capsys.readouterr().out


def test_out_must_be_json(tmp_path, capsys):
    assert _bench().main(["--out", str(tmp_path / "x.txt")]) == 2
    assert "expected a .json path" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
