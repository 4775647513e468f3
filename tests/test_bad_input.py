"""Bad input and faults, as a new user meets them (issue 16): each case asserts its exit code (2
bad input, 3 missing tool, 141 closed pipe), one line on stderr without a traceback, nothing on
stdout, and that the file system is as it was (a snapshot of the folder before and after)."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from eatt.cli import main
from eatt.outdir import MARKER
from tests.cli import run_eatt


def snapshot(root: Path) -> dict[str, tuple]:
    """Every file and folder under root (hidden ones too): kind, mode and content hash."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        st = path.lstat()
        if path.is_file():
            out[rel] = ("f", st.st_mode, hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            out[rel] = ("d" if path.is_dir() else "l", st.st_mode, None)
    return out


def eatt(*args: str, cwd: Path, env: dict | None = None, timeout: int = 300):
    return run_eatt(*args, cwd=cwd, env=env, timeout=timeout)


class _NotAWeight:
    """An object no checkpoint holds (torch.load weights_only refuses it)."""


@pytest.fixture
def user_tree(tmp_path: Path) -> Path:
    """A folder as a user has one: notes, a source tree, a regular file, configs."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("call Bob\n")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "main.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "afile").write_text("not a folder\n")
    (tmp_path / "afile.onnx").write_text("an exported core, as far as the name says\n")
    (tmp_path / "dup.yaml").write_text(
        "kind: eatt\nlen_q: 4\nlen_k: 4\ndim: 8\nheads: 2\nlen_q: 8\n"
    )
    (tmp_path / "syntax.yaml").write_text("kind: eatt\n  len_q: [4\n")
    (tmp_path / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "huge.yaml").write_text(
        "kind: eatt\nlen_q: 4096\nlen_k: 4096\ndim: 4096\nheads: 1\n"
    )
    (tmp_path / "big_rtl.yaml").write_text("kind: eatt\nlen_q: 64\nlen_k: 64\ndim: 256\nheads: 2\n")
    (tmp_path / "big_model.yaml").write_text("model: {dim: 65536, heads: 8, enc_layers: 64}\n")
    (tmp_path / "run.yaml").write_text("model: {dim: 16, heads: 2}\ntrain: {steps: 2}\n")
    (tmp_path / "cuda.yaml").write_text("model: {dim: 16, heads: 2}\ntrain: {device: cuda}\n")
    (tmp_path / "date.yaml").write_text("kind: eatt\ndate: 2020-13-45\n")
    # eatt's own folders of other kinds: a training run and an RTL folder
    run = tmp_path / "ourrun"
    run.mkdir()
    (run / MARKER).write_text('{"made_by": "eatt", "what": "training run"}\n')
    (run / "last.pt").write_bytes(b"weights")
    planted = tmp_path / "plantedrun"  # a run whose resume state holds other objects
    planted.mkdir()
    (planted / MARKER).write_text('{"made_by": "eatt", "what": "training run"}\n')
    torch.save({"format": 1, "x": _NotAWeight()}, planted / "partial.pt")
    rtl = tmp_path / "ourrtl"
    rtl.mkdir()
    (rtl / MARKER).write_text('{"made_by": "eatt", "what": "RTL"}\n')
    (rtl / "top.sv").write_text("module top; endmodule\n")
    # an RTL folder from before the marker, copied into a user's project with their files
    copied = tmp_path / "copied"
    copied.mkdir()
    (copied / "metadata.json").write_text('{"generator": "eatt.rtl_sim.generate", "sources": []}')
    (copied / "NOTES.md").write_text("mine\n")
    return tmp_path


# (id, argv, exit code, words the one line must hold); {t} is the user tree
CASES = [
    ("rtl into a user's folder", ["rtl", "-o", "notes"], 2, "not made by eatt"),
    ("rtl into a source tree", ["rtl", "-o", "src"], 2, "not made by eatt"),
    ("rtl into the current folder", ["rtl", "-o", "."], 2, "current folder"),
    ("rtl onto a file", ["rtl", "-o", "afile"], 2, "not a folder"),
    ("rtl under a file", ["rtl", "-o", "afile/x"], 2, "is a file"),
    ("hls into a user's folder", ["hls", "-o", "notes"], 2, "not made by eatt"),
    ("flow into a user's folder", ["flow", "-o", "src", "--no-resources"], 2, "not made by eatt"),
    ("train -o a file", ["train", "run.yaml", "-o", "afile"], 2, "not a folder"),
    ("train into a user's folder", ["train", "run.yaml", "-o", "notes"], 2, "not made by eatt"),
    ("experiment into a user's folder", ["experiment", "qat", "--quick", "-o", "."], 2, None),
    ("sim --dsp-registers of RTL", ["sim", "ourrtl", "--dsp-registers"], 2, "--dsp-registers"),
    (
        "export of an exported core",
        ["export", "afile.onnx", "--check", "10", "-o", "again.onnx"],
        2,
        "afile.onnx: an ONNX file, not a checkpoint: a core exported already",
    ),
    (
        "experiment --reuse a missing report",
        ["experiment", "ablation", "--quick", "--reuse", "none.json", "-o", "x"],
        2,
        "--reuse none.json: no such file",
    ),
    (
        "experiment --reuse a config",
        ["experiment", "ablation", "--quick", "--reuse", "run.yaml", "-o", "x"],
        2,
        "--reuse run.yaml: not a JSON experiment report",
    ),
    (
        "experiment --reuse into a staged experiment",
        ["experiment", "qat", "--quick", "--reuse", "run.yaml", "-o", "x"],
        2,
        "qat is a staged experiment",
    ),
    (
        "experiment into an RTL folder",
        ["experiment", "qat", "--quick", "-o", "ourrtl"],
        2,
        "eatt RTL",
    ),  # fmt: skip
    (
        "experiment into notes",
        ["experiment", "qat", "--quick", "-o", "notes"],
        2,
        "not made by eatt",
    ),  # fmt: skip
    ("export onto a folder", ["export", "-o", "notes"], 2, "is a folder"),
    ("export under a file", ["export", "-o", "afile/core.onnx"], 2, "is a file"),
    ("export over a user's file", ["export", "-o", "afile"], 2, "not a file eatt wrote"),
    ("hls --clock nan", ["hls", "-o", "p", "--clock", "nan"], 2, "--clock"),
    (
        "hls --reuse-factor past int32",
        ["hls", "-o", "p", "--reuse-factor", "99999999999999"],
        2,
        "at most 2147483647",
    ),  # fmt: skip
    ("hls --clock -5", ["hls", "-o", "p", "--clock", "-5"], 2, "--clock"),
    ("hls --clock 0", ["hls", "-o", "p", "--clock", "0"], 2, "--clock"),
    ("hls --clock inf", ["hls", "-o", "p", "--clock", "inf"], 2, "--clock"),
    ("evaluate --alpha nan", ["evaluate", "best.pt", "--alpha", "nan"], 2, "--alpha"),
    ("evaluate --device tpu", ["evaluate", "best.pt", "--device", "tpu"], 2, "--device"),
    ("duplicate YAML key", ["golden", "--config", "dup.yaml"], 2, "line 6, column 1"),
    ("YAML syntax error", ["golden", "--config", "syntax.yaml"], 2, "line 2, column"),
    ("binary config", ["golden", "--config", "binary.yaml"], 2, "binary.yaml"),
    ("config given as a folder", ["golden", "--config", "notes"], 2, "notes"),
    ("core too big for golden", ["golden", "--config", "huge.yaml"], 2, "GB"),
    ("core too big for RTL", ["rtl", "--config", "big_rtl.yaml", "-o", "r"], 2, "MB"),
    ("model too big", ["train", "big_model.yaml", "-o", "m"], 2, "parameters"),
    ("too many vectors", ["golden", "--vectors", "100000000"], 2, "at most"),
    ("rtl into a training run", ["rtl", "-o", "ourrun"], 2, "eatt training run"),
    ("hls into an RTL folder", ["hls", "-o", "ourrtl"], 2, "eatt RTL"),
    ("train into an RTL folder", ["train", "run.yaml", "-o", "ourrtl"], 2, "eatt RTL"),
    (
        "train --resume of a planted state",
        ["train", "run.yaml", "-o", "plantedrun", "--resume"],
        2,
        "partial.pt: holds objects",
    ),  # fmt: skip
    ("rtl into a copied RTL folder", ["rtl", "-o", "copied"], 2, "not made by eatt"),
    ("train on a missing GPU", ["train", "cuda.yaml", "-o", "newrun"], 2, "CUDA"),
    ("energy --length huge", ["energy", "--length", "1" + "0" * 30, "--dim", "8"], 2, "--length"),
    ("evaluate --beam huge", ["evaluate", "best.pt", "--beam", "100000"], 2, "--beam"),
    ("evaluate a folder", ["evaluate", "notes"], 2, "is a folder"),
    ("YAML bad date", ["golden", "--config", "date.yaml"], 2, "date.yaml"),
    ("export --check too many", ["export", "-o", "c.onnx", "--check", "100000000"], 2, "--check"),
    ("not a checkpoint", ["evaluate", "afile"], 2, "not a checkpoint"),
    ("not an ONNX file", ["hls", "afile", "-o", "p"], 2, "afile"),
    ("sim of a user's folder", ["sim", "notes"], 2, "not an RTL directory"),
    ("resources of a user's folder", ["resources", "notes"], 2, "not an RTL directory"),
    # captures a stage cannot take (issue 39 item 9, issue 40 item 4): before any work
    (
        "--inputs a plain .npy",
        ["hls", "core.onnx", "-o", "p", "--inputs", "plain.npy"],
        2,
        "not a capture file",
    ),  # fmt: skip
    (
        "--inputs meta a list",
        ["hls", "core.onnx", "-o", "p", "--inputs", "list.npz"],
        2,
        "not a JSON object",
    ),  # fmt: skip
    (
        "--inputs without config",
        ["hls", "core.onnx", "-o", "p", "--inputs", "bare.npz"],
        2,
        "no layer config",
    ),  # fmt: skip
    (
        "--inputs config a string",
        ["hls", "core.onnx", "-o", "p", "--inputs", "strcfg.npz"],
        2,
        "no layer config",
    ),  # fmt: skip
    (
        "--inputs of 0 vectors",
        ["hls", "core.onnx", "-o", "p", "--inputs", "empty.npz"],
        2,
        "no vector",
    ),  # fmt: skip
    (
        "--inputs rows differ",
        ["hls", "core.onnx", "-o", "p", "--inputs", "rows.npz"],
        2,
        "y has 3 rows, x has 2",
    ),  # fmt: skip
    (
        "--layer of a foreign checkpoint",
        ["export", "foreign.pt", "--layer", "a", "-o", "l.onnx"],
        2,
        "docs/own_model.md",
    ),  # fmt: skip
]


def _user_qat(t: Path) -> None:
    """experiment -o . writes into ./qat: make that a user's folder."""
    (t / "qat").mkdir()
    (t / "qat" / "mine.txt").write_text("mine\n")


def _captures(t: Path) -> None:
    """A core file of the default core and captures of it that no stage may take."""
    import json

    import numpy as np
    import torch

    from eatt.config import default_config
    from eatt.quant.export import export_core
    from eatt.quant.golden import random_weights

    cfg = default_config()
    export_core(cfg, random_weights(cfg, 1), t / "core.onnx")
    n, shape = 2, (cfg.len_q, cfg.dim)
    good = {
        "x": np.zeros((n, *shape), np.int64),
        "y": np.zeros((n, cfg.len_k, cfg.dim), np.int64),
        "queries": np.full(n, cfg.len_q),
        "model_out": np.zeros((n, *shape), np.int64),
    }
    meta = {"format": "eatt.capture/1", "config": cfg.to_dict()}
    files = {
        "list.npz": ([1, 2], good),
        "bare.npz": ({"format": "eatt.capture/1"}, good),
        "strcfg.npz": ({**meta, "config": "eatt"}, good),
        "empty.npz": (meta, {k: v[:0] for k, v in good.items()}),
        "rows.npz": (meta, {**good, "y": np.zeros((3, cfg.len_k, cfg.dim), np.int64)}),
    }
    for name, (m, arrays) in files.items():
        np.savez(t / name, meta=np.array(json.dumps(m)), **arrays)
    np.save(t / "plain.npy", good["x"])
    torch.save({"state_dict": {"w": torch.zeros(2)}}, t / "foreign.pt")


PREPARE = {"experiment into a user's folder": _user_qat}
PREPARE.update({c[0]: _captures for c in CASES if c[0].startswith(("--inputs", "--layer"))})


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_table(user_tree, case):
    name, argv, code, words = case
    if name in PREPARE:
        PREPARE[name](user_tree)
    before = snapshot(user_tree)
    r = eatt(*argv, cwd=user_tree)
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr
    assert lines and lines[-1].startswith("eatt: error:"), r.stderr
    assert all(line.startswith("eatt: ") for line in lines), r.stderr  # progress or the error
    assert words is None or words in lines[-1], lines[-1]
    assert r.stdout == ""
    assert snapshot(user_tree) == before, "the file system changed"


def test_closed_pipe_exits_quietly(tmp_path):
    """`eatt energy | head -3` where head has gone before eatt writes: no traceback, the exit
    of a tool whose reader went away (141, as if killed by SIGPIPE)."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before eatt has even started
    proc = subprocess.run(
        [sys.executable, "-m", "eatt.cli", "energy", "--length", "22", "--dim", "512"],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    os.close(write)
    assert proc.returncode == 141 and proc.stderr == "", proc.stderr


def test_read_only_output_exits_2_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    """A folder the user cannot write to (root ignores modes, so the fault is injected where
    the temporary folder is made): one line, exit 2, nothing left behind."""
    import tempfile

    def denied(*args, dir=None, **kwargs):
        raise PermissionError(13, "Permission denied", str(dir))

    monkeypatch.setattr(tempfile, "mkdtemp", denied)
    before = snapshot(tmp_path)
    assert main(["rtl", "-o", str(tmp_path / "ro" / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Permission denied" in err[0] and str(tmp_path) in err[0]
    after = snapshot(tmp_path)
    assert {k for k in after if ".tmp-" in k or ".old-" in k} == set()
    assert set(after) - set(before) <= {"ro"}  # at most the parent folder the user asked for


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_really(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        r = eatt("rtl", "-o", "ro/x", cwd=tmp_path)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)


def test_failed_rtl_keeps_the_old_folder(tmp_path, monkeypatch):
    """A failure while an RTL folder is rewritten leaves the earlier one as it was."""
    from eatt.config import default_config
    from eatt.quant.golden import random_weights
    from eatt.rtl_sim import generate, rtldir

    cfg = default_config()
    out = tmp_path / "rtl"
    generate.generate_rtl(cfg, random_weights(cfg, 1), out)
    before = snapshot(tmp_path)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rtldir.np, "savez", broken)
    with pytest.raises(OSError):
        generate.generate_rtl(cfg, random_weights(cfg, 2), out)
    assert snapshot(tmp_path) == before


def test_rtl_rewrites_its_own_folder(tmp_path):
    r = eatt("rtl", "-o", "r", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (tmp_path / "r" / "stale.sv").write_text("// old\n")
    r = eatt("rtl", "-o", "r", "--level", "attention", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "r" / "stale.sv").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def _ctrl_c_default() -> None:
    """In the child: Ctrl-C as in a terminal. A shell that starts a job in the background
    (`make test &`) has it ignore SIGINT, and Python keeps an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _signal_golden(tmp_path, sig) -> tuple[int, str]:
    """Send `sig` to a long `eatt golden` run once it is working (its progress line is on
    stderr: a loaded machine may take seconds just to import); (exit code, stderr)."""
    import threading
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "eatt.cli", "golden", "--vectors", "1000000"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_default,
    )
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            if "golden model check" in line:
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert started.wait(120), "".join(lines)
    time.sleep(1)  # inside the check, past the progress line
    proc.send_signal(sig)
    try:  # the signal acts between two numpy/torch operations: seconds on a loaded machine
        proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("no exit 300 s after the signal:\n" + "".join(lines)) from None
    reader.join(timeout=10)
    err = "".join(lines)
    assert "Traceback" not in err, err
    return proc.returncode, err


def test_sigint_exits_130(tmp_path):
    """Ctrl-C during a command: exit 130, one line, no traceback."""
    import signal

    code, err = _signal_golden(tmp_path, signal.SIGINT)
    assert code == 130 and err.strip().splitlines()[-1] == "eatt: interrupted", err


def test_bad_weights_file_is_named(tmp_path):
    r = eatt("rtl", "-o", "r", cwd=tmp_path)
    assert r.returncode == 0
    (tmp_path / "r" / "weights.npz").write_text("garbage")
    r = eatt("sim", "r", "--vectors", "3", cwd=tmp_path)
    assert r.returncode == 2 and "weights.npz" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.hls
def test_missing_compiler_exits_3(tmp_path):
    """No g++ on PATH: `eatt hls` says which tool is missing, exit 3."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("make", "sh"):  # keep what is not the compiler
        if shutil.which(tool):
            os.symlink(shutil.which(tool), bin_dir / tool)
    env = {**os.environ, "PATH": str(bin_dir)}
    env.pop("CXX", None)
    r = eatt("hls", "-o", "p", "--vectors", "5", cwd=tmp_path, env=env)
    assert r.returncode == 3, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert "Traceback" not in r.stderr and "g++" in last


def test_sighup_ends_like_an_interrupt(tmp_path):
    """The terminal closed: cleanups run, exit 128 + SIGHUP, one line."""
    import signal

    code, err = _signal_golden(tmp_path, signal.SIGHUP)
    assert code == 128 + signal.SIGHUP and err.strip().splitlines()[-1] == "eatt: terminated"


def test_a_bug_is_one_line_with_exit_70(monkeypatch, capsys):
    """An unexpected exception (a bug) is still one line, never exit 1 ('a check failed')."""
    import eatt.cli as cli

    def broken(args):
        raise TypeError("unsupported operand")

    monkeypatch.setattr(cli.energy, "run", broken)
    monkeypatch.delenv("EATT_DEBUG", raising=False)
    assert cli.main(["energy", "--length", "4", "--dim", "8"]) == 70
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "internal error: TypeError: unsupported operand" in err[0]


def test_rtl_refuses_a_folder_being_simulated(tmp_path):
    """`eatt rtl -o DIR` while `eatt sim DIR` runs (it holds DIR/sim/.lock): refused, kept."""
    from eatt.config import default_config
    from eatt.outdir import OutputError
    from eatt.quant.golden import random_weights
    from eatt.rtl_sim.generate import generate_rtl
    from eatt.rtl_sim.procs import try_lock

    cfg = default_config()
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, 1), out)
    (out / "sim").mkdir()
    fd = try_lock(out / "sim" / ".lock")  # what a running simulation holds
    try:
        before = snapshot(tmp_path)
        with pytest.raises(OutputError, match="eatt sim of this folder is running"):
            generate_rtl(cfg, random_weights(cfg, 2), out)
        assert snapshot(tmp_path) == before
    finally:
        os.close(fd)
    generate_rtl(cfg, random_weights(cfg, 2), out)  # free again: replaced
