"""`eatt flow` as a library: its output folder, its report files, missing tools up front.

The end-to-end runs through the CLI are in tests/test_cli.py; here one small windowed unit goes
through every stage (one g++ build, one Verilator build) and the report it leaves is checked.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from eatt.config import CoreConfig
from eatt.flow import compare, flow_folding, format_flow, format_markdown, run_flow
from eatt.outdir import MARKER, OutputError, check_output_dir
from eatt.quant.golden import random_weights
from eatt.rtl_sim.tools import ToolMissing
from eatt.steps import TIMES_FILE
from tests.cli import run_eatt

WINDOW = CoreConfig.from_dict(dict(kind="window", len_q=1, len_k=6, dim=4, heads=1, window_d=1))


@pytest.mark.rtl
@pytest.mark.hls
def test_flow_writes_its_report(tmp_path):
    out = tmp_path / "flow"
    result = run_flow(
        WINDOW, random_weights(WINDOW, 1), vectors=8, out_dir=out, resources=False, window=False
    )
    assert result["ok"], format_flow(result)
    report = result["report"]
    assert report == {
        "md": str(out / "report.md"),
        "json": str(out / "report.json"),
        "png": str(out / "report.png"),
    }
    # strict JSON (no NaN), the whole result
    saved = json.loads((out / "report.json").read_text(), parse_constant=pytest.fail)
    assert saved["ok"] is True and saved["report"] == report
    assert saved["window"]["sim"]["mismatches"] == 0
    md = (out / "report.md").read_text()
    assert md.startswith("# eatt flow: PASS")
    assert "| window rows | latency (cycles) | II (cycles) |" in md
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / MARKER).is_file() and (out / "window" / "hls" / MARKER).is_file()
    check_output_dir(out, "flow")  # a second run takes its own folder back


@pytest.mark.rtl
@pytest.mark.hls
def test_a_folded_flow(tmp_path):
    """reuse_factor > 1: both cores through the folded hls4ml layer and the folded RTL engine
    (the unrolled levels are not built), compared in the report."""
    cfg = CoreConfig.from_dict(
        dict(kind="eatt", len_q=2, len_k=2, dim=4, heads=1, reuse_factor=200)
    )
    result = run_flow(
        cfg, random_weights(cfg, 1), vectors=6, out_dir=tmp_path / "f", resources=False,
        window=False,
    )  # fmt: skip
    assert result["ok"], format_flow(result)
    for kind, core in result["cores"].items():
        assert list(core["sim"]) == ["folded"] and not core["sim"]["folded"]["mismatches"], kind
        assert core["hls"]["folding"] and core["hls"]["csim"]["mismatches"] == 0
        assert core["hls"]["csim"]["iterations_per_call"] == core["hls"]["iterations"]["total"]
        assert core["sim"]["folded"]["ii_cycles"] <= 200
    metrics = [row["metric"] for row in result["comparison"]]
    assert "folded RTL II (cycles)" in metrics and "folded HLS iterations per call" in metrics
    text = format_flow(result)
    assert "folded for reuse_factor 200 at equal cycles" in text
    assert "folded layer (io_parallel, given): lanes" in text
    # the pair: vanilla's folding for R, E-ATT at its lanes and simd, not slower
    e, v = (result["cores"][k]["rtl"]["folded"] for k in ("eatt", "vanilla"))
    assert e["folding"] == {**v["folding"], "pe": e["folding"]["pe"]}
    assert e["ii_cycles"] <= v["ii_cycles"]


def test_flow_folding_builds_both_kinds_at_equal_cycles():
    """reuse_factor 1: the unrolled core as it is; R > 1: each kind's folding of the pair
    (peer_foldings), handed to the builders with reuse_factor 1 (the folding is given)."""
    cfg = CoreConfig("eatt", 4, 4, 8, 2)
    assert flow_folding(cfg) == (cfg, None)
    folded = cfg.replace(reuse_factor=300)
    built = {k: flow_folding(folded.replace(kind=k)) for k in ("eatt", "vanilla")}
    assert {k: b[0].reuse_factor for k, b in built.items()} == {"eatt": 1, "vanilla": 1}
    assert built["eatt"][1] == {"lanes": 1, "simd": 2, "pe": 1}
    assert built["vanilla"][1] == {"lanes": 1, "simd": 2, "pe": 2}


def test_markdown_report_has_the_comparison_table():
    """report.md of a two-core result: the comparison as a Markdown table (no tools needed)."""
    rows = [
        {"metric": "alignment energy, asic (pJ, analytic)", "eatt": 691.2, "vanilla": 2944.0,
         "ratio": 0.2348},
        {"metric": "alignment DSP48E1 (Yosys xc7)", "eatt": 0, "vanilla": 596, "ratio": 0.0},
        {"metric": "mismatches, all levels", "eatt": 0, "vanilla": 0, "ratio": None},
    ]  # fmt: skip
    cfg = CoreConfig("eatt", 4, 4, 8, 2).to_dict()
    r = {"config": cfg, "seed": 1, "out_dir": "runs/flow", "cores": {}, "comparison": rows,
         "ok": False}  # fmt: skip
    md = format_markdown(r)
    assert md.startswith("# eatt flow: FAIL")
    assert "| metric | eatt | vanilla | eatt/vanilla |\n| --- | ---: | ---: | ---: |" in md
    assert "| alignment energy, asic (pJ, analytic) | 691.2 | 2944 | 0.2348 |" in md
    assert "| mismatches, all levels | 0 | 0 | - |" in md


def test_comparison_has_the_measured_energy_by_stage():
    """compare(): the measured energy per call, and by stage (eatt power's by_stage), as rows."""
    en = {"energy_pj": {"asic": 1.0, "fpga": 1.0}}
    core_en = {k: {"alignment": en, "attention": en} for k in ("eatt", "vanilla")}

    def core(scale):
        stages = {s: {"dynamic_pj": scale * i} for i, s in enumerate(
            ("projections", "scores", "softmax", "values", "control"), 1)}  # fmt: skip
        power = {"energy_per_call_pj": {"total": 10.0 * scale}, "area_um2": 5.0,
                 "sta": {"fmax_mhz": 80.0}, "by_stage": stages}  # fmt: skip
        return {"sim": {}, "hls": {}, "resources": {"folded": {}}, "power": {"folded": power}}

    rows = {r["metric"]: r for r in compare({"eatt": core(1.0), "vanilla": core(2.0)}, core_en)}
    assert rows["folded energy, measured (pJ/call, OSU)"]["ratio"] == 0.5
    scores = rows["folded scores energy, measured (pJ/call, dynamic)"]
    assert (scores["eatt"], scores["vanilla"], scores["ratio"]) == (2.0, 4.0, 0.5)
    assert "folded control energy, measured (pJ/call, dynamic)" not in rows


def test_refuses_a_users_folder_before_any_work(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    monkeypatch.setattr("eatt.flow.check_tools", lambda *a: pytest.fail("went on"))
    with pytest.raises(OutputError, match="not made by eatt"):
        run_flow(WINDOW, random_weights(WINDOW, 1), out_dir=mine)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_takes_back_a_flow_folder_written_before_the_marker(tmp_path, monkeypatch):
    """An earlier eatt's runs/flow (core sub-folders, no marker) is not refused."""
    old = tmp_path / "flow"
    (old / "eatt").mkdir(parents=True)
    (old / "eatt" / "core.onnx").write_bytes(b"")
    (old / "window").mkdir()

    def stop(*args):
        raise ToolMissing("stop here")

    monkeypatch.setattr("eatt.flow.check_tools", stop)
    with pytest.raises(ToolMissing, match="stop here; nothing was written"):
        run_flow(WINDOW, random_weights(WINDOW, 1), out_dir=old)
    (old / "eatt" / "notes.txt").write_text("")
    (old / "notes.txt").write_text("mine")
    with pytest.raises(OutputError):
        run_flow(WINDOW, random_weights(WINDOW, 1), out_dir=old)


def test_missing_compiler_is_reported_before_any_work(tmp_path, monkeypatch):
    """No g++ on PATH: ToolMissing in one line before the folder is made (the CLI's exit 3)."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CXX", raising=False)
    out = tmp_path / "flow"
    with pytest.raises(ToolMissing, match=r"^g\+\+ not found.*nothing was written") as err:
        run_flow(WINDOW, random_weights(WINDOW, 1), out_dir=out, resources=False)
    assert "\n" not in str(err.value)
    assert not out.exists()


@pytest.mark.rtl
@pytest.mark.hls
def test_a_flow_stops_at_a_step_and_starts_again_from_the_next(tmp_path):
    """`eatt flow --to-step rtl`: golden, export, hls and rtl only, each unit's wall time and
    peak memory per step in time_per_step.json; then `--from-step sim` simulates that RTL,
    reading the earlier steps' results from the folder (eatt/steps.py, issue 41 item 3)."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text("kind: eatt\nlen_q: 2\nlen_k: 2\ndim: 4\nheads: 1\n")
    out = tmp_path / "flow"
    common = ["flow", "--config", str(cfg), "--vectors", "6", "--no-resources", "--no-window"]
    first = cli(*common, "-o", str(out), "--to-step", "rtl", "--json")
    assert first.returncode == 0, first.stderr[-3000:]
    r = json.loads(first.stdout)
    steps = ["golden", "export", "hls", "rtl"]
    for kind in ("eatt", "vanilla"):
        assert r["cores"][kind]["steps"] == steps and "sim" not in r["cores"][kind], kind
    times = json.loads((out / TIMES_FILE).read_text())
    assert list(times["eatt"]) == steps and all(t["wall_s"] >= 0 for t in times["eatt"].values())
    second = cli(*common, "-o", str(out), "--from-step", "sim")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "flow: PASS (steps sim to last only)" in second.stdout
    assert list(json.loads((out / TIMES_FILE).read_text())["vanilla"]) == ["sim"]
    saved = json.loads((out / "report.json").read_text())
    assert saved["cores"]["eatt"]["golden"]["ok"]  # read back from the first run
    assert saved["cores"]["eatt"]["sim"]["attention"]["mismatches"] == 0
    bad = cli(*common, "-o", str(tmp_path / "other"), "--from-step", "sim")
    assert bad.returncode == 2 and "holds no earlier run's results" in bad.stderr
    wrong = cli(*common, "-o", str(out), "--to-step", "power")  # no power with --no-resources
    assert wrong.returncode == 2 and "--to-step: 'power' is not a step of this flow" in wrong.stderr


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_eatt(*args, timeout=900)


def test_a_capture_drives_the_peer_only_when_it_is_of_the_cores_kind(tmp_path):
    """eatt flow CORE.onnx --inputs: a capture of the core's kind drives its E-ATT / vanilla
    peer too (golden count only); one of the peer's kind does not (it would be compared with
    another layer's outputs), nor does any capture drive a Synthesizer's vanilla peer."""
    from eatt.config import default_config
    from eatt.flow import _drives_peer
    from eatt.quant.vectors import CAPTURE_FORMAT

    cfg = default_config()
    for kind in ("eatt", "vanilla"):
        meta = {"format": CAPTURE_FORMAT, "config": {"kind": kind}}
        np.savez(tmp_path / f"{kind}.npz", meta=np.array(json.dumps(meta)))
    assert _drives_peer(tmp_path / "eatt.npz", cfg, "vanilla")
    assert not _drives_peer(tmp_path / "vanilla.npz", cfg, "vanilla")
    assert not _drives_peer(None, cfg, "vanilla")
    assert not _drives_peer(tmp_path / "eatt.npz", cfg.replace(kind="dense"), "vanilla")
