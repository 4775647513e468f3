"""bench/energy_compare.py --quick on the alignment: the JSON, Markdown (with the table by stage)
and plot it writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eatt.rtl_sim.power import check_tools
from eatt.rtl_sim.tools import ToolMissing

BENCH = Path(__file__).resolve().parents[1] / "bench" / "energy_compare.py"


def _measured(out: Path, *args: str) -> dict:
    """bench/energy_compare.py --quick with ``args`` into ``out`` (skipped without the tools):
    its report."""
    try:
        check_tools()
    except ToolMissing as err:
        pytest.skip(str(err))
    run = subprocess.run(
        [sys.executable, str(BENCH), "--quick", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(out.read_text())


@pytest.mark.rtl
def test_quick_alignment_writes_its_report(tmp_path):
    out = tmp_path / "energy_compare_quick.json"
    report = _measured(out, "--levels", "alignment", "--vectors", "6")
    for kind in ("eatt", "vanilla", "dense", "randinit"):  # the paper's four methods
        r = report["levels"]["alignment"][kind]
        assert r["mismatches"] == 0 and r["vectors"] == 6
        dynamic = sum(s["dynamic_pj"] for s in r["by_stage"].values())
        assert dynamic == pytest.approx(r["energy_per_call_pj"]["dynamic"], rel=1e-5)
    assert report["ratios"]["alignment"]["energy"] < 1.0
    rows = report["methods"]["alignment"]  # Table 7's rows, each over vanilla
    assert set(rows) == {"dense", "randinit", "eatt"}
    assert rows["randinit"]["paper_analytic"] == 0.0 and rows["randinit"]["energy"] < 0.1
    md = out.with_suffix(".md").read_text()
    assert "alignment: dynamic pJ/call by stage" in md and "| E-ATT / vanilla |" in md
    assert "| alignment | RandInit |" in md
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.rtl
def test_quick_attention_pipelined_two_methods(tmp_path):
    """--methods picks the kinds measured, --adder-levels the unrolled pipelining (the
    reciprocal register among the cuts); the record carries the clock and the calls/s."""
    report = _measured(
        tmp_path / "pipelined.json", "--levels", "attention", "--vectors", "4",
        "--methods", "eatt,vanilla", "--adder-levels", "1",
    )  # fmt: skip
    assert report["adder_levels"] == 1 and set(report["levels"]["attention"]) == {"eatt", "vanilla"}
    for r in report["levels"]["attention"].values():
        assert r["mismatches"] == 0 and r["calls_per_s"] == pytest.approx(r["fmax_mhz"] * 1e6)
    bad = subprocess.run(
        [sys.executable, str(BENCH), "--methods", "bogus", "--out", str(tmp_path / "b.json")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--methods" in bad.stderr
    assert not (tmp_path / "b.json").exists()
