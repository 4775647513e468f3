"""bench/rtl_compare.py's own plumbing: job order, the sweep points it asks for, its records
from the sweep's, --only, --resume, a forced timeout, bad arguments.

The benchmark itself runs Yosys for minutes to hours; here the plumbing is checked on synthetic
records and one real run of the tiny alignment (seconds). The real runs are
bench/results/rtl_compare.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench_module import load_bench

BENCH = Path(__file__).resolve().parents[1] / "bench" / "rtl_compare.py"


@pytest.fixture(scope="module")
def bench():
    return load_bench("rtl_compare")


def test_jobs_smallest_first_nodsp_last(bench):
    jobs = list(bench._jobs([(4, 8), (6, 12)], ["alignment", "attention"]))
    names = [f"{lvl}/{n}x{d}/{k}{'_' + v if v else ''}" for lvl, (n, d), k, v in jobs]
    first_nodsp = next(i for i, j in enumerate(jobs) if j[3] == "nodsp")
    assert all(j[3] == "nodsp" for j in jobs[first_nodsp:])
    assert names.index("alignment/4x8/vanilla_nodsp") < names.index("alignment/6x12/vanilla_nodsp")
    # E-ATT has its own all-fabric run only where it has products (the attention level)
    assert "attention/4x8/eatt_nodsp" in names and "alignment/4x8/eatt_nodsp" not in names


def test_points_are_the_asked_records_in_job_order(bench):
    pts = bench.points([(2, 4)], ["alignment", "attention"], sim=True, timeout=60.0,
                       only=("eatt", "vanilla_nodsp", "vanilla_da4ml"))  # fmt: skip
    names = [p["name"] for p in pts]
    assert names == [
        "alignment-2x4-eatt",
        "attention-2x4-eatt",
        "alignment-2x4-vanilla_da4ml",
        "alignment-2x4-vanilla_nodsp",
        "attention-2x4-vanilla_nodsp",
    ]
    by = {p["name"]: p for p in pts}
    assert by["alignment-2x4-eatt"]["stages"] == ["rtl", "sim", "resources"]
    assert by["attention-2x4-vanilla_nodsp"]["stages"] == ["rtl", "nodsp"]
    assert by["attention-2x4-vanilla_nodsp"]["memory_gb"] == 12.0
    assert by["alignment-2x4-vanilla_da4ml"]["stages"] == ["da4ml"]
    assert all(p["timeout_s"] == 60.0 and p["heads"] == 1 for p in pts)


def _done(stages: dict, timing: dict) -> dict:
    return {"status": "done", "stages": stages, "run": {"stages": timing}}


def test_entry_records_from_sweep_records(bench):
    yosys = {"LUT": 10, "FF": 2, "CARRY4": 1, "DSP48E1": 3, "BRAM": 0, "tool": "pyosys 0.70",
             "logic_depth": 5, "abc_verify": True, "cells": {"LUT6": 10}}  # fmt: skip
    timing = {"seconds": 1.5, "peak_mb": 80.0}
    rtl = {"latency_cycles": 2, "ii_cycles": 1}
    sim = {"vectors": 4, "mismatches": 0, "latency_cycles": 2, "ii_cycles": 1}
    r = bench.entry_record(
        _done(
            {"rtl": rtl, "sim": sim, "resources": yosys},
            {"sim": {"build_seconds": 3.0, "sim_seconds": 0.5}, "resources": timing},
        )
    )
    assert r["LUT"] == 10 and r["yosys_seconds"] == 1.5 and r["yosys_peak_mb"] == 80.0
    assert r["metadata_latency_cycles"] == 2 and r["ii_cycles"] == 1 and r["build_seconds"] == 3
    nodsp = bench.entry_record(_done({"rtl": rtl, "nodsp": yosys}, {"nodsp": timing}))
    assert nodsp["LUT"] == 10 and "mismatches" not in nodsp
    d = {"estimate": {"LUT_estimate": 9}, "check": {"mismatches": 0}, "pipeline_stages": 3,
         "yosys": {**yosys, **timing}}  # fmt: skip
    da4ml = bench.entry_record(_done({"da4ml": d}, {}))
    assert da4ml["pipeline_stages"] == 3 and da4ml["estimate"]["LUT_estimate"] == 9
    failed = {"status": "failed", "error": "resources: yosys: synthesis failed"}
    assert bench.entry_record(failed) == {"error": "resources: yosys: synthesis failed"}


@pytest.mark.rtl
def test_a_tiny_run_merges_resumes_and_records_a_timeout(bench, tmp_path):
    """Real tools on the tiny alignment: a record, another merged beside it (a forced timeout:
    its one-line error, no work folder), then --resume keeps the finished point."""
    out = tmp_path / "r.json"
    args = ["--sizes", "2x4", "--levels", "alignment", "--no-sim", "--out", str(out)]
    first = subprocess.run(
        [sys.executable, str(BENCH), *args, "--only", "eatt", "-o", str(tmp_path / "s1")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    entry = json.loads(out.read_text())["entries"]["alignment/2x4"]
    assert entry["eatt"]["LUT"] > 0 and entry["eatt"]["DSP48E1"] == 0
    second = subprocess.run(
        [sys.executable, str(BENCH), *args, "--only", "vanilla", "--timeout", "0.01",
         "-o", str(tmp_path / "s2")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr[-3000:]
    entry = json.loads(out.read_text())["entries"]["alignment/2x4"]
    assert entry["eatt"]["LUT"] > 0  # kept
    assert entry["vanilla"]["error"].endswith("timeout after 0.01 s")
    assert str(tmp_path) not in entry["vanilla"]["error"]
    before = out.read_text()
    again = subprocess.run(
        [sys.executable, str(BENCH), *args, "--only", "eatt", "-o", str(tmp_path / "s1"),
         "--resume"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1 finished before, 0 to run" in again.stderr
    assert json.loads(out.read_text())["entries"] == json.loads(before)["entries"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--only", "vanilla,foo"], "--only: unknown record 'foo'"),
        (["--sizes", "8"], "--sizes: '8' is not a list of LENxDIM"),
        (["--sizes", "4x0"], "--sizes: '4x0' is not a list of LENxDIM"),
        (["--levels", "scores"], "--levels: unknown level 'scores'"),
    ],
)
def test_bad_arguments_exit_2(args, message, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(BENCH), *args, "--out", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert message in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "r.json").exists()
