"""The simulation runner under faults (rtl_sim/runner.py, rtl_sim/sim_run.py,
rtl_sim/procs.py): builds in a cache outside the RTL folder, a folder path with a space, run
results that never describe another run, a lock for two simulations of one folder, interrupts
that end every child, progress on stderr only.

One Verilator build in a fresh cache (the `fresh` fixture, 15-30 s), two builds interrupted
after a few seconds, the rest reuses the build.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import eatt.rtl_sim.sim_build as sim_build
import eatt.rtl_sim.sim_run as sim_run
from eatt.config import CoreConfig
from eatt.outdir import MARKER
from eatt.quant.golden import random_weights
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.procs import LockTimeout, file_lock, run_group
from eatt.rtl_sim.runner import cache_dir, simulate
from tests.cli import run_eatt

pytestmark = pytest.mark.rtl

CONFIG = dict(kind="eatt", len_q=2, len_k=2, dim=4, heads=1)
ROOT = Path(__file__).resolve().parents[1]


def _rtl(path: Path, seed: int = 11) -> Path:
    cfg = CoreConfig.from_dict(CONFIG)
    generate_rtl(cfg, random_weights(cfg, seed=seed), path)
    return path


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A fresh build cache and an RTL folder whose path has a space: one Verilator build."""
    tmp = tmp_path_factory.mktemp("fresh")
    cache, out = tmp / "cache", _rtl(tmp / "my rtl")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EATT_CACHE", str(cache))
        result = simulate(out, vectors=50, seed=1)
    return cache, out, result


def _env(cache: Path) -> dict:
    return {**os.environ, "EATT_CACHE": str(cache), "EATT_PROGRESS": "1"}


def test_build_in_cache_and_space_in_rtl_path(fresh, monkeypatch, capfd):
    cache, out, result = fresh
    monkeypatch.setenv("EATT_CACHE", str(cache))
    assert result["mismatches"] == 0 and result["simulator"] == "verilator"
    assert result["cached_build"] is False and result["build_seconds"] > 0
    bdir = Path(result["build_dir"])
    assert bdir.parent == cache / "sim" / "verilator" and (bdir / ".complete").is_file()
    assert not list(bdir.glob("*.gch")) and not list(bdir.glob("*.o"))  # slimmed
    # the RTL folder: what generate_rtl wrote, and the small run folder
    names = {p.name for p in out.iterdir()}
    assert names == {"eatt_alignment.sv", "ap_pipe_ctrl.sv", "metadata.json", "weights.npz"} | {
        "l1_score_row.sv",
        MARKER,
        "sim",
    }
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert size < 1_000_000, size
    summary = out / "sim" / "verilator" / "summary.json"
    assert json.loads(summary.read_text()) == result
    assert Path(result["results_dir"]) == summary.parent
    assert (summary.parent / "sim.log").is_file()

    capfd.readouterr()
    again = simulate(out, vectors=50, seed=1)
    captured = capfd.readouterr()
    assert again["cached_build"] is True and again["build_seconds"] < 1
    assert again["build_dir"] == result["build_dir"]
    assert {k: v for k, v in again.items() if k not in runner_keys()} == {
        k: v for k, v in result.items() if k not in runner_keys()
    }
    assert captured.out == ""  # progress goes to stderr only
    assert "cached" in captured.err and "Verilator simulation of" in captured.err


def test_builds_are_shared_by_venvs_with_the_same_tools(fresh, tmp_path, monkeypatch):
    """The cache key names the tools by version and contents, never this venv's folders, so
    another clone's venv reuses the builds; a Verilator build links cocotb's libraries by their
    folder, which its stamp records: reused while that folder holds the same files."""
    import cocotb_tools.config

    cache, out, result = fresh
    monkeypatch.setenv("EATT_CACHE", str(cache))
    for simulator in ("verilator", "icarus"):
        assert sys.prefix not in sim_build.simulator_version(simulator)
    assert sys.prefix not in sim_build.cocotb_key()
    stamp = Path(result["build_dir"]) / ".complete"
    info = json.loads(stamp.read_text())
    assert info["cocotb_libs"] == str(cocotb_tools.config.libs_dir)
    assert sim_build._usable(stamp, "verilator")
    other = tmp_path / "other-venv" / "libs"
    shutil.copytree(cocotb_tools.config.libs_dir, other)
    planted = tmp_path / "stamp"
    planted.write_text(json.dumps({**info, "cocotb_libs": str(other)}))
    assert sim_build._usable(planted, "verilator")  # another venv's, the same files
    (other / "extra.so").write_bytes(b"not the same\n")
    assert not sim_build._usable(planted, "verilator")
    shutil.rmtree(other)
    assert not sim_build._usable(planted, "verilator")  # that venv is gone: build again
    # Icarus: vvp loads cocotb at run time, but sim.vvp names Icarus' own VPI modules by the
    # folder of the venv that built it: usable while they are there
    vvp = tmp_path / "sim.vvp"
    module = tmp_path / "ivl" / "system.vpi"
    module.parent.mkdir()
    module.write_bytes(b"")
    vvp.write_text(f':ivl_version "11.0 (stable)";\n:vpi_module "{module}";\nS_0 .scope;\n')
    assert sim_build._usable(planted, "icarus")
    module.unlink()  # that venv is gone: build again
    assert not sim_build._usable(planted, "icarus")
    vvp.unlink()
    assert not sim_build._usable(planted, "icarus")
    planted.write_text(json.dumps({"top": "x"}))  # a stamp from before the record
    assert not sim_build._usable(planted, "verilator")


def runner_keys() -> set[str]:
    return {"cached_build", "build_seconds", "sim_seconds"}


def test_interrupted_or_failed_run_leaves_no_summary(fresh, monkeypatch):
    cache, out, _ = fresh
    monkeypatch.setenv("EATT_CACHE", str(cache))
    run = out / "sim" / "verilator"
    simulate(out, vectors=10, seed=1)
    assert (run / "summary.json").is_file()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as mp:
        mp.setattr(sim_run, "run_testbench", interrupted)
        with pytest.raises(KeyboardInterrupt):
            simulate(out, vectors=10, seed=1)
    assert run.is_dir() and not (run / "summary.json").exists()
    assert not (run / "sim.log").exists() and not (run / "got.npy").exists()

    # a testbench failure (metadata latency off by one): no summary either
    simulate(out, vectors=10, seed=1)
    meta_path = out / "metadata.json"
    good = meta_path.read_text()
    meta = json.loads(good)
    meta_path.write_text(json.dumps({**meta, "latency_cycles": meta["latency_cycles"] + 1}))
    try:
        with pytest.raises(RuntimeError, match="metadata says"):
            simulate(out, vectors=10, seed=1)
        assert not (run / "summary.json").exists() and (run / "sim.log").is_file()
    finally:
        meta_path.write_text(good)


def test_cache_location_and_space_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("EATT_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "eatt"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "eatt"
    monkeypatch.setenv("EATT_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"

    out = _rtl(tmp_path / "rtl")
    monkeypatch.setenv("EATT_CACHE", str(tmp_path / "a b"))
    with pytest.raises(ValueError, match="EATT_CACHE") as err:
        simulate(out, vectors=4)
    assert "\n" not in str(err.value)
    assert not (out / "sim").exists() and not (tmp_path / "a b").exists()


def test_lock_waits_for_another_sim(fresh, monkeypatch, capfd):
    cache, out, _ = fresh
    monkeypatch.setenv("EATT_CACHE", str(cache))
    with file_lock(out / "sim" / ".lock", "the test"):
        with pytest.raises(LockTimeout, match="another eatt sim of") as err:
            simulate(out, vectors=4, lock_timeout=0)
        assert "\n" not in str(err.value)
        t0 = time.perf_counter()
        with pytest.raises(LockTimeout, match="after 0.5 s"):
            simulate(out, vectors=4, lock_timeout=0.5)
        assert time.perf_counter() - t0 >= 0.5
        results = []
        worker = threading.Thread(target=lambda: results.append(simulate(out, vectors=4)))
        worker.start()
        time.sleep(1.5)
        assert worker.is_alive() and not results  # waiting for the lock
    worker.join(timeout=300)
    assert results and results[0]["mismatches"] == 0
    assert "waiting for another eatt sim of" in capfd.readouterr().err


def test_two_cli_sims_on_one_folder(fresh):
    """The issue's case: two `eatt sim` of one folder at once. Both wait for the lock the test
    holds, then run one after the other; both pass, the summary matches its log."""
    cache, out, _ = fresh
    cmd = [sys.executable, "-m", "eatt.cli", "sim", str(out), "--vectors", "40", "--json"]
    waiting = []
    with file_lock(out / "sim" / ".lock", "the test"):
        procs = [
            subprocess.Popen(
                cmd, env=_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        errs: list[list[str]] = [[], []]

        def read(i: int) -> None:
            for line in procs[i].stderr:
                errs[i].append(line)
                if "waiting for another eatt sim" in line:
                    waiting.append(i)

        readers = [threading.Thread(target=read, args=(i,)) for i in range(2)]
        for r in readers:
            r.start()
        deadline = time.monotonic() + 120
        while len(set(waiting)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    outs = [p.stdout.read() for p in procs]
    codes = [p.wait(timeout=300) for p in procs]
    for r in readers:
        r.join()
    assert sorted(set(waiting)) == [0, 1], errs
    assert codes == [0, 0], errs
    for text in outs:
        result = json.loads(text)
        assert result["mismatches"] == 0 and result["vectors"] == 40
    summary = json.loads((out / "sim" / "verilator" / "summary.json").read_text())
    assert summary["vectors"] == 40


def _cwd_under(root: Path) -> list[tuple[int, str]]:
    """(pid, name) of every process whose working directory is inside root."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if cwd == str(root) or cwd.startswith(f"{root}/"):
            found.append((int(entry.name), name))
    return found


def _snapshot(root: Path) -> dict:
    return {str(p): p.stat().st_size for p in root.rglob("*") if p.is_file()}


needs_proc = pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs Linux /proc")


def _ctrl_c_default() -> None:
    """In the child: Ctrl-C as in a terminal. A shell that starts a job in the background
    (`make test &`) has it ignore SIGINT, and Python keeps an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@needs_proc
def test_run_group_ends_grandchildren(tmp_path):
    """Ctrl-C while a command with children of its own runs: the whole group ends."""
    script = (
        "import sys; from eatt.rtl_sim.procs import run_group\n"
        "run_group(['sh', '-c', 'sleep 300 & sleep 300 & wait'], cwd=sys.argv[1])\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], preexec_fn=_ctrl_c_default
    )
    deadline = time.monotonic() + 30
    while len([n for _, n in _cwd_under(tmp_path) if n == "sleep"]) < 2:
        assert time.monotonic() < deadline, "sleep children did not start"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) != 0
    assert _cwd_under(tmp_path) == []
    assert run_group(["true"]) == 0 and run_group(["false"]) == 1


@needs_proc
@pytest.mark.parametrize("how", ["cli-sigint", "library-sigterm"])
def test_interrupt_ends_the_build(how, tmp_path):
    """An interrupt during the Verilator build: no make, g++ or cc1plus survives, nothing
    writes into the cache afterwards, no finished build is recorded, exit 130 (CLI, Ctrl-C)."""
    cache = tmp_path / "cache"
    out = _rtl(tmp_path / "rtl", seed=12)  # not built anywhere else
    if how == "cli-sigint":
        cmd = [sys.executable, "-m", "eatt.cli", "sim", str(out), "--vectors", "4"]
    else:
        code = "import sys; from eatt.rtl_sim.runner import simulate; simulate(sys.argv[1])"
        cmd = [sys.executable, "-c", code, str(out)]
    proc = subprocess.Popen(
        cmd, env=_env(cache), stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_default
    )
    deadline = time.monotonic() + 120
    while not any(n in ("cc1plus", "g++", "c++") for _, n in _cwd_under(cache)):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the C++ build did not start"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT if how == "cli-sigint" else signal.SIGTERM)
    code = proc.wait(timeout=30)
    err = proc.stderr.read()
    assert code == (130 if how == "cli-sigint" else -signal.SIGINT), err
    assert _cwd_under(cache) == []
    before = _snapshot(cache)
    time.sleep(1.0)
    assert _snapshot(cache) == before, "something still writes into the cache"
    assert not list(cache.rglob(".complete"))
    assert "Verilator build of" in err and "stopped after" in err


@pytest.mark.parametrize("where", ["sim folder", "sim file", "run folder"])
def test_a_sim_folder_it_did_not_write_is_left_alone(tmp_path, where):
    """A user's DIR/sim (a file), or DIR/sim/verilator with their files in it: one line, exit 2,
    before any build, and left as it was (issue 39 item 2: one mechanism for DIR/pnr,
    DIR/power and DIR/sim)."""
    out = _rtl(tmp_path / "rtl")
    if where == "sim file":
        (out / "sim").write_text("mine\n")
    else:
        run = out / "sim" / ("verilator" if where == "run folder" else "")
        run.mkdir(parents=True, exist_ok=True)
        (run / "mine.txt").write_text("mine\n")
    before = _snapshot(out)
    r = run_eatt("sim", str(out), "--vectors", "4", timeout=600, env=_env(tmp_path / "c"))
    if where == "sim folder":  # DIR/sim with a user's file beside the run folders: untouched
        assert r.returncode == 0, r.stderr
        assert (out / "sim" / "mine.txt").read_text() == "mine\n"
        return
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "move it away" in r.stderr and r.stdout == ""
    assert _snapshot(out) == before
