"""bench/hls_folded.py at its small size: the JSON, Markdown and plot it writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "hls_folded.py"


@pytest.mark.hls
def test_small_size_writes_its_report(tmp_path):
    out = tmp_path / "hls_folded_small.json"
    run = subprocess.run(
        [sys.executable, str(BENCH), "--size", "small", "--vectors", "5", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1])["ok"] is True
    result = json.loads(out.read_text())
    for kind in ("eatt", "vanilla"):
        row = result["kinds"][kind]
        assert row["mismatches"] == 0 and row["iterations_counted"] == row["iterations_per_call"]
        assert row["ii_iterations"] <= 300  # the size's reuse_factor bounds the interval
    assert "iterations_per_call" in result["ratios"]
    assert "| iterations_per_call |" in out.with_suffix(".md").read_text()
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
