"""One simulation run of an RTL directory, and a core's: what every unit's simulate stage
(eatt/units.py) builds on, below eatt.rtl_sim.runner.simulate (which dispatches to them and
re-exports these names; its docstring describes the run, its folders, locks and result).

    sim_run(out, meta, simulator, build_dir, lock_timeout) -> SimRun
        the frame of a run: out_dir locked, its run folder emptied, a build held
    write_job / write_vectors_job    run/job.json (and a core's vectors), what a testbench reads
    run_testbench                    one cocotb testbench on a build
    core_vectors / simulate_core     a core's vectors; the unrolled levels' simulate
    compare_runs                     the runs (stream, bubbles, latency) against the golden model
"""

from __future__ import annotations

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
from eatt.rtl_sim.cocotb_run import LABEL, _cocotb_test, _sim_environ, _tail
from eatt.rtl_sim.procs import file_lock, sigterm_as_interrupt
from eatt.rtl_sim.rtldir import load_metadata, load_weights
from eatt.rtl_sim.sim_build import _built, check_simulator, sim_cache

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
