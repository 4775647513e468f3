"""One point of a sweep (`eatt sweep`, eatt/sweep.py): a core config through the asked stages.

:func:`run_point` takes the point's spec (a JSON-ready dict that eatt.sweep makes) and a work
folder, runs the stages in their fixed order and returns the point's record: ``stages`` (each
stage's own report), ``metrics`` (the flat numbers the sweep report compares), ``status``
"done", or "failed" with ``failed_stage`` and a one-line ``error``: the first stage that
raises or fails its check ends the point, the stages after it do not run.

The sweep runs each point in its own process, ``python -m eatt.sweep_point SPEC.json
RESULT.json`` (see eatt.sweep.point_task): a timeout or an out-of-memory kill then ends that
process and its tools (Yosys, Verilator), never the sweep.

Stages (STAGES, in this order): the build steps of eatt.steps (its table says what each
runs), on a BuildContext made from the spec (point_context); a step's failed check ends the
point (CheckFailed). The record keeps each step's result, less RECORD_KEEP / RECORD_DROP.

A model sweep's point (the sweep's ``run``: an `eatt train` run config) has MODEL_STAGES
instead: train (eatt.model.train.train_from_config) and bleu (eatt.model.evaluate.evaluate:
BLEU on the split, and the model's analytic attention energy).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

from eatt.builder import peak_mb, run_step
from eatt.config import CoreConfig, atomic_write_text, first_line
from eatt.quant.golden import CoreWeights, random_weights
from eatt.steps import STEPS, BuildContext, BuildOptions
from eatt.version import __version__

STAGES = (
    "golden",
    "hls",
    "rtl",
    "sim",
    "resources",
    "nodsp",
    "power",
    "pnr",
    "da4ml",
    "energy",
)
#: the stages of a model sweep's point (a run config of `eatt train`, not a core)
MODEL_STAGES = ("train", "bleu")
#: stages that read the point's RTL folder (the rtl stage runs first when any is asked)
NEEDS_RTL = ("sim", "resources", "nodsp", "power", "pnr")
#: at most this many vectors in the power stage's netlist simulation (minutes per 100)
POWER_VECTORS = 100
#: stage report keys that differ from run to run (times, caches, paths): kept in the record's
#: "run" part, so the rest of a record is identical wherever and whenever the point runs
VOLATILE = {
    "seconds",
    "build_seconds",
    "sim_seconds",
    "cached_build",
    "peak_mb",
    "wall_s",
    "tokens_per_second",
}
#: the record of the stages finished so far (what a stopped point's record keeps)
PARTIAL_FILE = "partial.json"
#: the file each point writes its running stage to (the sweep names it in a timeout's record)
STAGE_FILE = "stage"
#: what a point's record keeps of a step's result: only these keys ...
RECORD_KEEP = {
    "rtl": ("level", "top", "sources", "latency_cycles", "ii_cycles", "folding", "cycle_formula")
}
#: ... or all but these
RECORD_DROP = {"golden": ("summary",), "power": ("by_type", "cells"), "bleu": ("examples",)}


def _json_ready(value):
    """value with numpy scalars/arrays and Paths made plain, for json.dumps."""
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def point_record(
    spec: dict,
    status: str,
    failed_stage: str | None,
    error: str | None,
    stages: dict | None = None,
    metrics: dict | None = None,
    run: dict | None = None,
) -> dict:
    """A point's record (docs/sweep.md): what the point was, how it ended, what it measured."""
    return {
        "id": spec["id"],
        "index": spec["index"],
        "key": spec["key"],
        "status": status,
        "failed_stage": failed_stage,
        "error": error,
        "overrides": spec["overrides"],
        "config": spec["run"] if spec.get("run") else {**spec["base"], **spec["config"]},
        "level": spec["level"],
        "folding": spec["folding"],
        "stages": stages or {},
        "metrics": metrics or {},
        "tools": tools(),
        "run": run or {},
    }


def file_digest(path: str | os.PathLike) -> str:
    """The first 16 hex digits of a file's SHA-256: a sweep's files in its points' keys."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def point_config(spec: dict) -> CoreConfig:
    """The point's core config: the sweep's base with the point's config overrides."""
    return CoreConfig.from_dict({**spec["base"], **spec["config"]}, source=f"point {spec['id']}")


def point_core(spec: dict) -> tuple[CoreConfig, CoreWeights]:
    """(config, integer weights) of the point: a trained layer's (its file, with the point's
    reuse_factor), or the base config with the point's overrides and random weights."""
    layer = spec.get("layer")
    if layer:
        from eatt.quant.export import load_core  # onnx, qonnx

        if file_digest(layer["onnx"]) != layer["sha256"]:
            raise ValueError(f"{layer['onnx']}: changed since the sweep was loaded")
        cfg, weights = load_core(layer["onnx"])
        return (cfg.replace(**spec["config"]) if spec["config"] else cfg), weights
    cfg = point_config(spec)
    return cfg, random_weights(cfg, spec["weights_seed"])


def _check_inputs(spec: dict):
    """A check that the sweep's captured vectors (its ``inputs``) have not changed since the
    sweep was loaded, run before a step loads them."""
    given = spec["inputs"]

    def check() -> None:
        if file_digest(given["path"]) != given["sha256"]:
            raise ValueError(f"{given['path']}: changed since the sweep was loaded")

    return check


def point_context(spec: dict, work: Path) -> BuildContext:
    """The build context of a point: its core (none for a model point), level, folding and
    options, the sweep's captured vectors where it has them."""
    cfg, weights = point_core(spec) if not spec.get("run") else (None, None)
    given = spec.get("inputs")
    options = BuildOptions(  # a model point has none of the core's keys
        levels=(spec.get("level") or "alignment",),
        folding=spec.get("folding"),
        adder_levels=spec.get("adder_levels") or 0,
        backend=spec.get("backend") or "vitis",
        abc_verify=spec.get("abc_verify", True),
        power_vectors=POWER_VECTORS,
    )
    return BuildContext(
        cfg,
        weights,
        work,
        seed=spec.get("seed", 1),
        vectors=spec.get("vectors", 1),
        options=options,
        inputs=given["path"] if given else None,
        check_inputs=_check_inputs(spec) if given else None,
        tag=f"sweep point {spec['id']}",
        extra=spec,
    )


def record_of(step: str, result: dict) -> dict:
    """What a point's record keeps of a step's result (RECORD_KEEP, RECORD_DROP)."""
    if step in RECORD_KEEP:
        return {k: result[k] for k in RECORD_KEEP[step] if k in result}
    return {k: v for k, v in result.items() if k not in RECORD_DROP.get(step, ())}


def split_volatile(report: dict) -> tuple[dict, dict]:
    """(stable, volatile) parts of a stage's report: VOLATILE keys and absolute paths apart."""
    stable, volatile = {}, {}
    for key, value in report.items():
        is_path = isinstance(value, str) and value.startswith(os.sep)
        (volatile if key in VOLATILE or is_path else stable)[key] = value
    return stable, volatile


def tools() -> dict:
    """Versions that make a record reproducible (the tools' own lines are in each stage)."""
    return {
        "eatt": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def run_point(spec: dict, work: str | Path) -> dict:
    """The record of one point (module doc); never raises for a stage's failure."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    stages: dict = {}
    volatile: dict = {}
    ctx: BuildContext | None = None
    status, failed, error = "done", None, None
    stage = "config"

    def record() -> dict:
        run = {"wall_s": round(time.perf_counter() - start, 3), "peak_mb": peak_mb()}
        measured = ctx.metrics if ctx is not None else {}
        return _json_ready(
            point_record(spec, status, failed, error, stages, measured, {**run, "stages": volatile})
        )

    try:
        ctx = point_context(spec, work)
        for stage in spec["stages"]:
            atomic_write_text(work / STAGE_FILE, stage + "\n")
            run_step(STEPS[stage], ctx, strict=True)
            stages[stage], volatile[stage] = split_volatile(record_of(stage, ctx.results[stage]))
            # the stages so far: a point stopped later (timeout, kill) keeps them
            atomic_write_text(work / PARTIAL_FILE, json.dumps(record()) + "\n")
    except Exception as err:  # noqa: BLE001 - a point's failure is its record, not the sweep's
        status, failed = "failed", stage
        error = f"{stage}: {first_line(err)}"
        (work / "traceback.txt").write_text(traceback.format_exc())
    return record()


def _watch_parent(every: float = 1.0) -> None:
    """End this point (its process group: the tools too) when the Ray worker that started it
    is gone (a killed driver or worker): no orphan Yosys runs on after a sweep."""
    parent = os.getppid()
    if os.getpgid(0) != os.getpid():  # not started by point_task (its own process group)
        return

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    """``python -m eatt.sweep_point SPEC.json RESULT.json WORK_DIR``: the point's record."""
    spec_path, result_path, work = argv if argv is not None else sys.argv[1:]
    _watch_parent()
    spec = json.loads(Path(spec_path).read_text())
    record = run_point(spec, work)
    atomic_write_text(result_path, json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
