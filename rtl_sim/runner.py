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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from eatt.config import CoreConfig, atomic_write_text
from eatt.outdir import OutputError, check_result_dir, mark
from eatt.progress import step
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

# the names marked F401 moved out and are re-exported here (the window unit, the folded engine,
# eatt power and the leaves' testbenches import them from eatt.rtl_sim.runner)
from eatt.rtl_sim.cocotb_run import (
    _BUILD_ARGS,
    LABEL,
    PUBLIC_TOP_VLT,  # noqa: F401
    TB_DIR,  # noqa: F401
    _cocotb_build,
    _cocotb_test,
    _sim_environ,
    _tail,
)
from eatt.rtl_sim.procs import LockTimeout, file_lock, sigterm_as_interrupt
from eatt.rtl_sim.rtldir import RTL_DIR, load_metadata, load_weights
from eatt.rtl_sim.sim_build import (
    CACHE_FORMAT,
    CACHE_KEEP,
    SIMULATORS,
    STAMP,
    _built,
    _prune,
    _slim,
    build,
    build_key,  # noqa: F401
    cache_dir,
    check_simulator,
    sim_cache,
    simulator_version,
)
from eatt.units import unit_for_level

__all__ = [
    "SIMULATORS",
    "LockTimeout",
    "build",
    "cache_dir",
    "simulate",
]

#: vectors of the run with random gaps between starts (every testbench)
BUBBLE_VECTORS = 32
#: the run folder's name inside the RTL folder
RESULTS_DIR = "sim"
#: what eatt.outdir's marker of DIR/sim/<simulator> says
SIM_WHAT = "eatt sim"


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
