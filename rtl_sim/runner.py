"""Simulate an RTL directory (written by generate_rtl) against the golden model.

``simulate(out_dir, vectors=N, seed=S)`` builds the RTL with Verilator through cocotb's runner
(once per build directory; later calls only rebuild what changed), runs the cocotb testbench of
the directory's level (rtl_sim/tb/test_<level>.py) on N input pairs (the edge vectors of
eatt.quant.golden.edge_inputs first, then random ones; or the pairs given), and compares every
output element with the golden model: ``GoldenCore(cfg, weights).alignment(x, y)`` for the
alignment level, ``.forward(x, y)`` for the attention level (tb/test_attention.py runs the same
tests on the ``z`` port).

The result (also written to <build_dir>/results.json):

    vectors, mismatches (vectors wrong in any run: the back-to-back stream of all vectors, the
    first 32 again with random idle cycles between starts, the single start that measures the
    latency), mismatched_elements (of the stream), first_mismatch (None, or {run, vector, index,
    expected, got, message}),
    latency_cycles (ap_start accepted -> ap_done), ii_cycles (back-to-back starts),
    stream_cycles, build_seconds, sim_seconds, metadata_latency_cycles, reset_ok, ...

Errors: a directory without metadata.json (or whose files do not match it) -> ValueError with one
line; a missing tool -> eatt.rtl_sim.tools.ToolMissing; a testbench failure (handshake) ->
RuntimeError naming the log file.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from eatt.config import CoreConfig
from eatt.quant.golden import GoldenCore, edge_inputs, random_inputs
from eatt.rtl_sim.generate import load_metadata, load_weights
from eatt.rtl_sim.tools import ToolMissing, check_build_tools, patched_environ

TB_DIR = Path(__file__).parent / "tb"


@contextmanager
def _on_sys_path(path: Path):
    """cocotb's runner hands sys.path to the simulator as PYTHONPATH: put the tb folder on it."""
    sys.path.insert(0, str(path))
    try:
        yield
    finally:
        try:
            sys.path.remove(str(path))
        except ValueError:
            pass


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def build(out_dir: str | os.PathLike, build_dir: str | os.PathLike | None = None) -> Path:
    """Verilate and compile the RTL of out_dir into build_dir (default out_dir/sim_build)."""
    out = Path(out_dir).resolve()
    meta = load_metadata(out)
    bdir = Path(build_dir).resolve() if build_dir is not None else out / "sim_build"
    bdir.mkdir(parents=True, exist_ok=True)
    check_build_tools()
    try:
        from cocotb_tools.runner import get_runner
    except ImportError:
        raise ToolMissing("cocotb not found: pip install 'cocotb>=2'") from None
    log = bdir / "build.log"
    with patched_environ():
        runner = get_runner("verilator")
        try:
            runner.build(
                sources=[out / rel for rel in meta["sources"]],
                hdl_toplevel=meta["top"],
                build_dir=bdir,
                build_args=["-Wno-fatal"],
                timescale=("1ns", "1ps"),
                log_file=log,
            )
        except (RuntimeError, SystemExit) as err:
            message = f"Verilator build failed ({err}); see {log}:\n{_tail(log)}"
            raise RuntimeError(message) from None
    return bdir


#: vectors of the run with random gaps between starts (every testbench)
BUBBLE_VECTORS = 32


def simulate(
    out_dir: str | os.PathLike,
    vectors: int = 1000,
    seed: int = 0,
    build_dir: str | os.PathLike | None = None,
    inputs: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict:
    """Simulate out_dir's RTL on `vectors` input pairs (edge vectors first, then random ones,
    or the given `inputs` (x, y)) and compare every output with the golden model."""
    out = Path(out_dir).resolve()
    meta = load_metadata(out)
    if meta["level"] == "window":  # the windowed unit: steps over a loaded memory
        from eatt.rtl_sim.window import simulate_window

        return simulate_window(out, vectors=vectors, seed=seed, build_dir=build_dir)
    if meta["level"] not in ("alignment", "attention"):
        raise ValueError(f"{out}: level {meta['level']!r} has no testbench")
    cfg = CoreConfig.from_dict(meta["config"], source=str(out / "metadata.json"))
    golden = GoldenCore(cfg, load_weights(out, meta))

    if inputs is not None:
        x, y = (np.asarray(t) for t in inputs)
        x, y = (t[None] if t.ndim == 2 else t for t in (x, y))
    else:
        if vectors < 1:
            raise ValueError(f"vectors: must be at least 1, got {vectors}")
        ex, ey = edge_inputs(cfg)
        rx, ry = random_inputs(cfg, max(0, vectors - len(ex)), seed=seed)
        x, y = np.concatenate([ex, rx])[:vectors], np.concatenate([ey, ry])[:vectors]
    expected = golden.alignment(x, y) if meta["level"] == "alignment" else golden.forward(x, y)

    t0 = time.perf_counter()
    bdir = build(out, build_dir)
    build_seconds = time.perf_counter() - t0

    run = new_run(bdir)
    np.save(run / "x.npy", x)
    np.save(run / "y.npy", y)
    job = write_job(
        run,
        seed,
        interface=meta["interface"],
        latency_cycles=meta.get("latency_cycles", 0),
        x=str(run / "x.npy"),
        y=str(run / "y.npy"),
    )

    tb, sim_seconds = run_testbench(run, meta["top"], f"test_{meta['level']}", bdir, seed)
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
        "build_seconds": round(build_seconds, 3),
        "sim_seconds": round(sim_seconds, 3),
        "build_dir": str(bdir),
    }
    (run / "summary.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def new_run(bdir: Path) -> Path:
    """The run folder of a build, without the outputs of an earlier run."""
    run = bdir / "run"
    run.mkdir(exist_ok=True)
    for stale in ("results.json", "got.npy", "got_bubbles.npy"):
        (run / stale).unlink(missing_ok=True)
    return run


def write_job(run: Path, seed: int, **fields) -> dict:
    """run/job.json, what a testbench reads: the caller's fields (interface, data files) plus
    where to write outputs and results, the seed and the bubble-run length."""
    job = {
        **fields,
        "got": str(run / "got.npy"),
        "got_bubbles": str(run / "got_bubbles.npy"),
        "results": str(run / "results.json"),
        "seed": seed,
        "bubble_vectors": BUBBLE_VECTORS,
    }
    (run / "job.json").write_text(json.dumps(job))
    return job


def run_testbench(run: Path, top: str, test_module: str, bdir: Path, seed: int):
    """Run cocotb testbench `test_module` (rtl_sim/tb/) on the built `top`; the job it reads
    is run/job.json (passed through EATT_TB_JOB). Returns (run/results.json, seconds)."""
    from cocotb_tools.runner import get_results, get_runner

    log = run / "sim.log"
    t0 = time.perf_counter()
    with patched_environ(), _on_sys_path(TB_DIR):
        os.environ["EATT_TB_JOB"] = str(run / "job.json")
        try:
            xml = get_runner("verilator").test(
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
    from eatt.quant.golden import first_mismatch

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
