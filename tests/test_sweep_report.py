"""eatt.sweep_report: Pareto fronts, LUT equivalents, the summary, the Markdown table and the
written report files, on hand-made sweep records (no tools)."""

from __future__ import annotations

import json

import pytest

from eatt.sweep_report import (
    AXES,
    DSP_LUTS,
    format_markdown,
    lut_equivalents,
    pareto_front,
    summarize,
    write_report,
)


def _record(index, kind, lanes, metrics, status="done", error=None, stage=None):
    overrides = {"kind": kind, "dim": 8, "folding": {"lanes": lanes, "simd": 2}}
    return {
        "id": f"p{index:03d}-{kind}-l{lanes}",
        "index": index,
        "status": status,
        "error": error,
        "failed_stage": stage,
        "overrides": overrides,
        "config": {"kind": kind, "dim": 8},
        "metrics": metrics,
        "wall_s": 1.0,
        "peak_mb": 100.0,
    }


def _m(cycles, lut, dsp, energy, bleu):
    return {"cycles": cycles, "LUT": lut, "DSP48E1": dsp, "energy_pj": energy, "bleu": bleu}


RECORDS = [  # given out of order: the summary sorts by id
    _record(3, "vanilla", 2, _m(50, 900, 8, 250.0, 83.0)),  # LUT_equiv 1,940
    _record(0, "eatt", 1, _m(100, 1000, 0, 50.0, 80.0)),  # 1,000
    _record(1, "eatt", 2, _m(60, 1500, 0, 60.5, 80.0)),  # 1,500
    _record(2, "vanilla", 1, _m(100, 800, 4, 200.0, 83.0)),  # 1,320
    _record(4, "vanilla", 2, {"cycles": 40}, "failed", "yosys ran out of memory", "resources"),
]


def test_pareto_front_min_min_with_ties():
    points = [(1, 5), (2, 2), (2, 2), (3, 1), (3, 3), (1, 6)]
    assert pareto_front(points) == [True, True, True, True, False, False]


def test_pareto_front_max_direction():
    points = [(1, 80), (2, 80), (3, 90), (3, 85)]  # energy down, BLEU up
    assert pareto_front(points, "min", "max") == [True, False, True, False]
    assert pareto_front(points, "max", "max") == [False, False, True, False]
    assert pareto_front([]) == []
    with pytest.raises(ValueError):
        pareto_front(points, "lower")


def test_lut_equivalents():
    assert lut_equivalents({"LUT": 100, "DSP48E1": 2}) == 100 + 2 * DSP_LUTS
    assert lut_equivalents({"LUT": 100, "DSP48E1": 2}, dsp_luts=10) == 120
    assert lut_equivalents({"LUT": 100}) == 100
    assert lut_equivalents({"DSP48E1": 2}) is None
    assert DSP_LUTS == 130


def test_summarize_counts_rows_fronts_failures():
    s = summarize(RECORDS)
    assert (s["points"], s["done"], s["failed"], s["dsp_luts"]) == (5, 4, 1, DSP_LUTS)
    ids = [row["id"] for row in s["rows"]]
    assert ids == sorted(ids)
    row = s["rows"][0]
    assert row["kind"] == "eatt" and row["folding.lanes"] == 1 and row["folding.simd"] == 2
    assert s["rows"][2]["LUT_equiv"] == 800 + 4 * DSP_LUTS
    assert s["fronts"]["cycles_vs_LUT_equiv"] == {
        "all": ["p000-eatt-l1", "p001-eatt-l2", "p003-vanilla-l2"],
        "eatt": ["p000-eatt-l1", "p001-eatt-l2"],
        "vanilla": ["p002-vanilla-l1", "p003-vanilla-l2"],
    }
    assert s["fronts"]["energy_pj_vs_bleu"] == {
        "all": ["p000-eatt-l1", "p002-vanilla-l1"],
        "eatt": ["p000-eatt-l1"],
        "vanilla": ["p002-vanilla-l1"],
    }
    assert "cycles_vs_LUT_nodsp" not in s["fronts"]  # no record has LUT_nodsp
    assert set(s["fronts"]) == {"cycles_vs_LUT_equiv", "cycles_vs_energy_pj", "energy_pj_vs_bleu"}
    assert s["failures"] == [
        {"id": "p004-vanilla-l2", "failed_stage": "resources", "error": "yosys ran out of memory"}
    ]
    assert len(AXES) == 5


def test_markdown_table():
    md = format_markdown(summarize(RECORDS))
    header = next(line for line in md.splitlines() if line.startswith("| id"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[:4] == ["id", "status", "kind", "folding.lanes"]
    assert "folding.simd" not in columns and "dim" not in columns  # constant: not shown
    assert columns[4:] == ["cycles", "LUT", "DSP48E1", "LUT_equiv", "energy_pj", "bleu"]
    assert "| p000-eatt-l1* | done |" in md
    assert "| p002-vanilla-l1 | done |" in md  # dominated in cycles vs LUT equivalents
    assert "1,320" in md and "60.5" in md
    assert f"LUT + {DSP_LUTS} x DSP48E1" in md
    assert "5 points: 4 done, 1 failed." in md
    # the pnr stage's Fmax is a column where a point measured it (issue 39 item 10)
    placed = [{**RECORDS[0], "metrics": {**RECORDS[0]["metrics"], "pnr_fmax_mhz": 123.4}}]
    md = format_markdown(summarize(placed + RECORDS[1:]))
    header = next(line for line in md.splitlines() if line.startswith("| id"))
    assert header.rstrip(" |").endswith("pnr_fmax_mhz | bleu") and "123" in md
    assert "## Failures" in md and "`p004-vanilla-l2` (stage: resources)" in md


def test_write_report(tmp_path):
    out = write_report(RECORDS, tmp_path / "report")
    for key in ("md", "json", "png"):
        assert (tmp_path / "report").joinpath(out[key].rsplit("/", 1)[-1]).is_file()
    with open(out["png"], "rb") as f:
        assert f.read(8).startswith(b"\x89PNG")
    with open(out["json"]) as f:
        assert json.load(f) == out["summary"]
    assert not [p for p in (tmp_path / "report").iterdir() if p.name.startswith(".")]


def test_write_report_nothing_to_plot(tmp_path):
    records = [
        _record(0, "eatt", 1, {"cycles": 10}),  # no second key
        _record(1, "vanilla", 1, _m(20, 100, 1, 5.0, 80.0)),  # one point per view only
        _record(2, "vanilla", 2, {}, "failed", "timeout", None),
    ]
    out = write_report(records, tmp_path)
    assert out["png"] is None and not (tmp_path / "pareto.png").exists()
    assert out["summary"]["fronts"] == {}
    md = (tmp_path / "report.md").read_text()
    assert "*" not in md.split("| id")[1].split("## Failures")[0]  # no front marked
    assert "`p002-vanilla-l2` (stage: -): timeout" in md
