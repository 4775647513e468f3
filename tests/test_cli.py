"""The `eatt` command: JSON contract, exit codes, one-line errors without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import eatt.cli
from eatt.cli import COMMANDS, build_parser, main
from eatt.model.experiments import REGISTRY
from tests.cli import run_eatt


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """Through a real process, as a user runs it (the console script's module)."""
    return run_eatt(*args, timeout=300)


def test_energy_json_gives_the_papers_percentages():
    r = run_cli("energy", "--length", "22", "--dim", "512", "--json")
    assert r.returncode == 0, r.stderr
    ratios = json.loads(r.stdout)["ratios"]
    assert round(ratios["eatt"]["attention"]["asic"], 2) == 34.09
    assert round(ratios["eatt"]["attention"]["fpga"], 2) == 33.83
    assert round(ratios["eatt"]["alignment"]["asic"], 2) == 0.45
    assert round(ratios["eatt"]["block"]["fpga"], 2) == 83.10
    assert ratios["vanilla"]["block"]["asic"] == pytest.approx(100.0)
    assert set(ratios) == {"vanilla", "dense", "randinit", "eatt"}


def test_energy_table_text(capsys):
    assert main(["energy", "--length", "22", "--dim", "512"]) == 0
    out = capsys.readouterr().out
    assert "34.09" in out and "83.17" in out


def test_golden_json(tmp_path, capsys):
    cfg = tmp_path / "core.yaml"
    cfg.write_text("kind: vanilla\nlen_q: 3\nlen_k: 4\ndim: 8\nheads: 2\n")
    assert main(["golden", "--config", str(cfg), "--vectors", "50", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["vectors"] == 50 and out["config"]["kind"] == "vanilla"


BAD = [
    (["energy", "--length", "0", "--dim", "8"], "length"),
    (["energy", "--length", "4", "--dim", "8", "--table", "nope"], "unknown table 'nope'"),
    (["energy", "--length", "x", "--dim", "8"], "--length"),
    (["golden", "--config", "/nonexistent/core.yaml"], "no such config file"),
    (["golden", "--vectors", "0"], "--vectors"),
    (["golden", "--seed", "-1"], "--seed"),
    (["frobnicate"], "invalid choice"),
    (["experiment", "nope"], "unknown experiment 'nope'"),
    (["evaluate", "/nonexistent/best.pt"], "best.pt"),
    (["train", "/nonexistent/run.yaml"], "run.yaml"),
    ([], "required"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[m for _, m in BAD])
def test_bad_input_exits_2_with_one_line(argv, message):
    r = run_cli(*argv)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert r.stdout == ""


def test_bad_config_file_exits_2(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("kind: eatt\nlen_q: 4\nlen_k: 4\ndim: 10\nheads: 3\n")
    r = run_cli("golden", "--config", str(cfg), "--json")
    assert r.returncode == 2
    assert "heads: dim=10 is not divisible by heads=3" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""


@pytest.mark.hls
def test_hls_synth_without_vendor_tool_exits_3_and_keeps_the_project(tmp_path):
    r = run_cli("hls", "-o", str(tmp_path / "prj"), "--vectors", "20", "--synth", "--json")
    assert r.returncode == 3, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("eatt: error:") and "not found on PATH" in last and "prj" in last
    assert (tmp_path / "prj" / "build_prj.tcl").is_file()


def test_hls_rejects_config_and_onnx_together(tmp_path):
    r = run_cli("hls", "x.onnx", "--config", "c.yaml", "-o", str(tmp_path / "p"))
    assert r.returncode == 2 and "not both" in r.stderr


def test_export_from_checkpoint(tmp_path):
    from eatt.config import CoreConfig
    from eatt.quant.golden import random_weights
    from eatt.quant.modules import from_integer, save_checkpoint

    cfg = CoreConfig("eatt", 3, 4, 8, 2)
    save_checkpoint(from_integer(cfg, random_weights(cfg, 5)), tmp_path / "core.pt")
    out = tmp_path / "core.onnx"
    r = run_cli("export", str(tmp_path / "core.pt"), "-o", str(out), "--check", "200", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["check"]["mismatches"] == 0 and result["config"]["len_q"] == 3
    # not a checkpoint: one line, exit 2, nothing written
    bad = tmp_path / "bad.pt"
    bad.write_text("kind: eatt\n")
    r = run_cli("export", str(bad), "-o", str(tmp_path / "no.onnx"))
    assert r.returncode == 2 and "not an eatt checkpoint" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "no.onnx").exists()


@pytest.mark.rtl
@pytest.mark.hls
def test_flow_runs_both_cores_through_every_stage(tmp_path):
    """`make flow` in small: both cores, every stage, 0 mismatches, one comparison report."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text("kind: eatt\nlen_q: 2\nlen_k: 3\ndim: 4\nheads: 1\n")
    out = tmp_path / "flow"
    r = run_cli(
        "flow", "--config", str(cfg), "-o", str(out), "--vectors", "60", "--no-resources",
        "--no-window", "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["ok"] and set(result["cores"]) == {"eatt", "vanilla"} and "window" not in result
    for core in result["cores"].values():
        assert core["export"]["check"]["mismatches"] == 0
        assert core["hls"]["csim"]["mismatches"] == 0
        assert all(s["mismatches"] == 0 and s["vectors"] == 60 for s in core["sim"].values())
    rows = {row["metric"]: row for row in result["comparison"]}
    assert rows["mismatches, all levels"]["eatt"] == 0
    assert rows["alignment energy, asic (pJ, analytic)"]["ratio"] < 1
    assert (out / "eatt" / "core.onnx").is_file() and (out / "vanilla" / "rtl_attention").is_dir()


@pytest.mark.rtl
@pytest.mark.hls
def test_flow_runs_a_window_unit_through_every_stage(tmp_path):
    """A window config: the windowed unit alone, golden -> QONNX -> hls4ml -> RTL, 0 mismatches."""
    cfg = tmp_path / "window.yaml"
    cfg.write_text("kind: window\nlen_q: 1\nlen_k: 6\ndim: 4\nheads: 1\nwindow_d: 1\n")
    out = tmp_path / "flow"
    r = run_cli(
        "flow", "--config", str(cfg), "-o", str(out), "--vectors", "40", "--no-resources", "--json"
    )
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    w = result["window"]
    assert result["ok"] and result["cores"] == {} and w["ok"]
    assert w["export"]["check"]["mismatches"] == 0 and w["hls"]["csim"]["mismatches"] == 0
    assert w["sim"]["mismatches"] == 0 and w["sim"]["vectors"] == 40
    assert w["sim"]["cycles_rule_holds"]
    text = run_cli("flow", "--config", str(cfg), "-o", str(out), "--vectors", "5", "--no-resources")
    assert text.returncode == 0 and "windowed unit: eatt scores, l_k 6, D 1" in text.stdout


def test_experiment_help_names_every_registered_experiment():
    sub = next(a for a in build_parser()._actions if a.dest == "command" or a.choices)
    helptext = sub.choices["experiment"]._positionals._group_actions[0].help
    assert set(helptext.replace(",", " ").split()) == set(REGISTRY)


def test_every_command_module_has_help_add_arguments_and_run():
    """The package's layout (eatt/cli/__init__.py): a module per sub-command, each with HELP,
    add_arguments(parser) and run(args); every module of the package short enough to read."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert list(sub.choices) == [m.__name__.rpartition(".")[2] for m in COMMANDS]
    for module in COMMANDS:
        assert isinstance(module.HELP, str) and module.HELP, module.__name__
        assert callable(module.add_arguments) and callable(module.run), module.__name__
    folder = Path(eatt.cli.__file__).parent
    lengths = {p.name: len(p.read_text().splitlines()) for p in folder.glob("*.py")}
    assert {f"{m.__name__.rpartition('.')[2]}.py" for m in COMMANDS} <= set(lengths)
    long = {name: n for name, n in lengths.items() if n > 500}
    assert not long, f"modules of eatt/cli over 500 lines: {long}"


def test_a_bad_flag_value_stops_before_the_command_runs(monkeypatch, capsys):
    """The checked argument types (eatt/cli/common.py) refuse a value while parsing: one line
    naming the flag, exit 2, the command never runs."""
    import eatt.cli.golden

    def never(args):
        raise AssertionError("ran")

    monkeypatch.setattr(eatt.cli.golden, "run", never)
    cases = [
        (["golden", "--vectors", "0"], "--vectors: must be >= 1, got 0"),
        (["golden", "--seed", "-1"], "--seed: must be >= 0, got -1"),
        (["energy", "--length", "0", "--dim", "8"], "--length: must be in [1, 1000000000], got 0"),
        (["hls", "-o", "p", "--pe", str(2**31)], "--pe: must be at most 2147483647 (int32)"),
        (["hls", "-o", "p", "--clock", "nan"], "--clock: must be a period in ns > 0, got nan"),
        (["evaluate", "x.pt", "--alpha", "11"], "--alpha: must be a number in [0, 10], got 11.0"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(f"eatt: error: {message}"), err
        assert err.count("\n") == 1, err


def test_the_tests_command_runner_gives_what_a_plain_process_gives(tmp_path):
    """tests/cli.py: a command forked from the preloading server and the same command as a
    plain `python -m eatt.cli` process: the same exit code, stdout and stderr, in the caller's
    folder and environment; a timeout ends the command."""
    from tests.cli import _subprocess

    (tmp_path / "core.yaml").write_text("kind: eatt\nlen_q: 2\nlen_k: 3\ndim: 4\nheads: 1\n")
    env = {**os.environ, "EATT_PROGRESS": "0"}
    cases = [
        ["golden", "--config", "core.yaml", "--vectors", "5", "--json"],  # relative: the cwd
        ["golden", "--config", "missing.yaml"],  # exit 2, one line
        ["golden", "--bogus"],  # argparse's exit 2
        ["energy", "--length", "4", "--dim", "8"],
    ]
    for argv in cases:
        forked = run_eatt(*argv, cwd=tmp_path, env=env)
        plain = _subprocess(argv, str(tmp_path), env, 300)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            plain.returncode, plain.stdout, plain.stderr
        ), argv  # fmt: skip
    assert json.loads(run_eatt(*cases[0], cwd=tmp_path, env=env).stdout)["ok"]
    with pytest.raises(subprocess.TimeoutExpired):
        run_eatt("golden", "--config", str(tmp_path / "core.yaml"), "--vectors", "1000000",
                 timeout=1)  # fmt: skip
    assert run_eatt("golden", "--config", str(tmp_path / "core.yaml")).returncode == 0


def test_the_runner_reads_an_exit_code_that_came_with_the_pid(tmp_path):
    """tests/cli.py's answers: a command that ends before its pid is read leaves both lines in
    the pipe; the exit code is still read at once (no timeout)."""
    import time

    from tests import cli

    request = dict(argv=["golden", "--bogus"], cwd=str(tmp_path), env=dict(os.environ),
                   stdout=str(tmp_path / "o"), stderr=str(tmp_path / "e"), prog="eatt")  # fmt: skip
    with cli._lock:
        server = cli._start()
        server.stdin.write((json.dumps(request) + "\n").encode())
        server.stdin.flush()
        time.sleep(3)  # the command has ended: its pid and its exit code wait in the pipe
        assert cli._answer(server, None) > 0
        assert cli._answer(server, 5) == 2
    assert "unrecognized arguments: --bogus" in (tmp_path / "e").read_text()
