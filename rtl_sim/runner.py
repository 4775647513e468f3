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

This module is the entry point (simulate, which asks the registry eatt/units.py for the level's
unit) and runs the hand-written leaves' testbenches (run_leaf); the run itself (its folder,
locks and build: sim_run) and a core's simulate are in rtl_sim/sim_run.py, which the units'
simulate stages import without this dispatcher.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from eatt.config import atomic_write_text
from eatt.quant.vectors import model_mismatches

# the names marked F401 moved out and are re-exported here (eatt power, the gate-activity run,
# the leaves' testbenches and the tests import them from eatt.rtl_sim.runner)
from eatt.rtl_sim.cocotb_run import (
    _BUILD_ARGS,
    PUBLIC_TOP_VLT,  # noqa: F401
    TB_DIR,  # noqa: F401
    _cocotb_build,
    _cocotb_test,
    _sim_environ,
    _tail,
)
from eatt.rtl_sim.procs import LockTimeout, file_lock, sigterm_as_interrupt
from eatt.rtl_sim.rtldir import RTL_DIR, load_metadata
from eatt.rtl_sim.sim_build import (
    CACHE_FORMAT,
    CACHE_KEEP,
    SIMULATORS,
    STAMP,
    _prune,
    _slim,
    _usable,
    build,
    build_key,  # noqa: F401
    cache_dir,
    check_simulator,
    cocotb_key,
    cocotb_libs,
    sim_cache,
    simulator_version,
)
from eatt.rtl_sim.sim_run import (  # noqa: F401 - the run and the core's simulate
    BUBBLE_VECTORS,
    RESULTS_DIR,
    SIM_WHAT,
    SimRun,
    _clear,
    compare_runs,
    core_vectors,
    run_testbench,
    sim_run,
    simulate_core,
    write_job,
    write_vectors_job,
)
from eatt.units import unit_for_level

__all__ = [
    "SIMULATORS",
    "LockTimeout",
    "build",
    "cache_dir",
    "simulate",
]


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

    Dispatches on the directory's level to its unit's simulate (eatt.units:
    rtl_sim.folded.simulate_core_levels for the core's levels, which hands the unrolled ones to
    rtl_sim.sim_run.simulate_core; rtl_sim.window.simulate_window for the window unit)."""
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
        cocotb_key(),
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
        cached = _usable(stamp, simulator) and product.is_file()
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
            info = {"top": top, "parameters": parameters, "cocotb_libs": cocotb_libs()}
            atomic_write_text(stamp, json.dumps(info) + "\n")
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
