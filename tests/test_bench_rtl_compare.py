"""bench/rtl_compare.py's own plumbing: job order, --only, --resume, bad arguments.

The benchmark itself runs Yosys for minutes to hours, so here generate/simulate/synthesize are
replaced by stand-ins that record what was asked; the real runs are bench/results/rtl_compare.json.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "rtl_compare.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("rtl_compare_bench", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def fake_tools(bench, monkeypatch):
    """Stand-ins for the RTL generator and Yosys: a LUT count from the job, and a call log."""
    calls: list[tuple[str, bool]] = []

    def generate_rtl(cfg, weights, rtl, level):
        rtl.mkdir(parents=True)
        return {"latency_cycles": 2 if level == "alignment" else 6}

    def resources(rtl, nodsp, timeout, abc_verify=True):
        calls.append((rtl.name, nodsp))
        lut = 1000 if "eatt" in rtl.name else 2000
        return {
            "LUT": lut * (3 if nodsp else 1),
            "FF": 10,
            "CARRY4": 5,
            "DSP48E1": 0 if nodsp or "eatt" in rtl.name else 7,
            "BRAM": 0,
            "seconds": 0.1,
            "peak_mb": 50,
            "tool": "fake",
            "logic_depth": 3,
            "abc_verify": abc_verify,
            "cells": {},
        }

    monkeypatch.setattr(bench, "generate_rtl", generate_rtl)
    monkeypatch.setattr(bench, "resources", resources)
    return calls


def test_jobs_smallest_first_nodsp_last(bench):
    jobs = list(bench._jobs([(4, 8), (6, 12)], ["alignment", "attention"]))
    names = [f"{lvl}/{n}x{d}/{k}{'_' + v if v else ''}" for lvl, (n, d), k, v in jobs]
    first_nodsp = next(i for i, j in enumerate(jobs) if j[3] == "nodsp")
    assert all(j[3] == "nodsp" for j in jobs[first_nodsp:])
    assert names.index("alignment/4x8/vanilla_nodsp") < names.index("alignment/6x12/vanilla_nodsp")
    # E-ATT has its own all-fabric run only where it has products (the attention level)
    assert "attention/4x8/eatt_nodsp" in names and "alignment/4x8/eatt_nodsp" not in names


def test_only_and_resume(bench, fake_tools, tmp_path):
    out = tmp_path / "r.json"
    run = dict(vectors=1, sim=False, timeout=None, out_path=out)
    result = bench.run([(2, 4)], ["attention"], resume=False, only=("eatt", "vanilla"), **run)
    entry = result["entries"]["attention/2x4"]
    assert set(entry) >= {"eatt", "vanilla"} and "vanilla_nodsp" not in entry
    assert entry["ratios"]["vs_vanilla"]["LUT"] == 0.5
    assert fake_tools == [("attention_eatt_2x4", False), ("attention_vanilla_2x4", False)]
    assert json.loads(out.read_text()) == result  # written as it goes
    assert not list(tmp_path.glob(".r.json.*"))  # through a temporary file, none left over

    fake_tools.clear()  # resume: finished records are kept, only the new ones run
    result = bench.run([(2, 4)], ["attention"], resume=True, only=bench.NAMES, **run)
    assert fake_tools == [("attention_vanilla_2x4", True), ("attention_eatt_2x4", True)]
    entry = result["entries"]["attention/2x4"]
    # fabric over fabric at the attention level: eatt_nodsp / vanilla_nodsp
    assert entry["ratios"]["vs_vanilla_nodsp"]["LUT"] == 0.5
    assert entry["eatt"]["LUT"] == 1000 and entry["vanilla_nodsp"]["DSP48E1"] == 0
    assert entry["eatt"]["abc_verify"] is True and entry["eatt"]["yosys_peak_mb"] == 50


def test_merge_reruns_the_asked_records_and_keeps_the_rest(bench, fake_tools, tmp_path):
    out = tmp_path / "r.json"
    run = dict(vectors=1, sim=False, timeout=None, out_path=out)
    bench.run([(2, 4)], ["attention"], resume=False, only=("eatt", "vanilla"), **run)
    fake_tools.clear()
    result = bench.run([(2, 4)], ["attention"], resume=False, only=("eatt",), merge=True, **run)
    assert fake_tools == [("attention_eatt_2x4", False)]  # run again although it was there
    assert set(result["entries"]["attention/2x4"]) >= {"eatt", "vanilla", "ratios"}
    assert json.loads(out.read_text()) == result


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


def test_a_failed_job_is_recorded_without_the_work_folder(bench, fake_tools, monkeypatch, tmp_path):
    def failing(rtl, nodsp, timeout, abc_verify=True):
        raise RuntimeError(f"yosys: synthesis failed; see {rtl}/synth/yosys.log:\nlast lines")

    monkeypatch.setattr(bench, "resources", failing)
    out = tmp_path / "r.json"
    result = bench.run(
        [(2, 4)], ["alignment"], 1, False, None, out, resume=False, only=("vanilla",)
    )
    error = result["entries"]["alignment/2x4"]["vanilla"]["error"]
    assert error == (
        "RuntimeError: yosys: synthesis failed; see <work>/alignment_vanilla_2x4/synth/yosys.log:"
    )
    assert "rtl_compare." not in out.read_text()
