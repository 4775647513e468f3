"""One point of a sweep (`eatt sweep`, eatt/sweep.py): a core config through the asked stages.

:func:`run_point` takes the point's spec (a JSON-ready dict that eatt.sweep makes) and a work
folder, runs the stages in their fixed order and returns the point's record: ``stages`` (each
stage's own report), ``metrics`` (the flat numbers the sweep report compares), ``status``
"done", or "failed" with ``failed_stage`` and a one-line ``error``: the first stage that
raises or fails its check ends the point, the stages after it do not run.

The sweep runs each point in its own process, ``python -m eatt.sweep_point SPEC.json
RESULT.json`` (see eatt.sweep.point_task): a timeout or an out-of-memory kill then ends that
process and its tools (Yosys, Verilator), never the sweep.

Stages (STAGES, in this order; each names the library function it calls):

=========  ===============================================================================
golden     eatt.quant.check.golden_check: the golden model's self-check
hls        eatt.hls.project.write_project: the hls4ml project (``backend``), C simulation
rtl        eatt.rtl_sim.generate.generate_rtl at the point's ``level`` (and ``folding``)
sim        eatt.rtl_sim.runner.simulate: Verilator + cocotb, every output vs the golden model
resources  eatt.rtl_sim.resources.resources: Yosys synth_xilinx (xc7) cell counts
nodsp      the same with -nodsp (every product in fabric)
power      eatt.rtl_sim.power.power: energy per call from the netlist's switching activity
pnr        eatt.rtl_sim.pnr.pnr: Yosys synth_ecp5 + nextpnr-ecp5, Fmax
da4ml      eatt.rtl_sim.da4ml_trace (alignment): da4ml's LUT estimate, check, Yosys on its RTL
energy     eatt.model.energy: the paper's analytic energy of the point's core (App. A)
=========  ===============================================================================

A model sweep's point (the sweep's ``run``: an `eatt train` run config) has MODEL_STAGES
instead: train (eatt.model.train.train_from_config) and bleu (eatt.model.evaluate.evaluate:
BLEU on the split, and the model's analytic attention energy).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import resource
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np
import yaml

from eatt.config import CoreConfig, atomic_write_text, first_line
from eatt.model import energy
from eatt.model.evaluate import evaluate
from eatt.model.train import train_from_config
from eatt.quant.check import golden_check
from eatt.quant.golden import CoreWeights, random_weights
from eatt.quant.vectors import capture_inputs
from eatt.rtl_sim import da4ml_trace
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.pnr import pnr
from eatt.rtl_sim.power import power
from eatt.rtl_sim.resources import resources
from eatt.rtl_sim.runner import simulate
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


class CheckFailed(Exception):
    """A stage ran and its check failed (simulation mismatches, golden self-check)."""


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


def _inputs(cfg: CoreConfig, spec: dict):
    """The captured vectors the point simulates (the sweep's ``inputs``), or None."""
    given = spec.get("inputs")
    if not given:
        return None
    if file_digest(given["path"]) != given["sha256"]:
        raise ValueError(f"{given['path']}: changed since the sweep was loaded")
    return capture_inputs(given["path"], cfg, spec["vectors"])


def _stage_golden(cfg, weights, spec, work, metrics) -> dict:
    r = golden_check(cfg, weights, vectors=spec["vectors"], seed=spec["seed"])
    metrics["golden_ok"] = bool(r["ok"])
    if not r["ok"]:
        raise CheckFailed("the golden model's self-check failed")
    return {k: v for k, v in r.items() if k != "summary"}


def _stage_hls(cfg, weights, spec, work, metrics) -> dict:
    """The core's hls4ml project for the point's ``backend`` and its C simulation, every
    output against the golden model (on the sweep's captured inputs where it has them)."""
    from eatt.hls.project import write_project  # hls4ml

    given = spec.get("inputs")
    # a folded point's project is the folded layer, folded as its RTL (eatt.hls.folding)
    folded = spec.get("level") == "folded"
    r = write_project(
        (cfg, weights),
        work / "hls",
        backend=spec.get("backend") or "vitis",
        vectors=spec["vectors"],
        inputs=given["path"] if given else None,
        folding=(spec.get("folding") or {}) if folded else None,
    )
    csim = r.get("csim") or {}
    metrics["hls_mismatches"] = csim.get("mismatches")
    if not r["ok"]:
        raise CheckFailed(f"C simulation: {csim.get('mismatches')} mismatching vectors")
    return r


def _stage_rtl(cfg, weights, spec, work, metrics) -> dict:
    meta = generate_rtl(
        cfg,
        weights,
        work / "rtl",
        level=spec["level"],
        adder_levels=spec["adder_levels"],
        folding=spec["folding"],
    )
    for key in ("latency_cycles", "ii_cycles"):
        if key in meta:
            metrics[key] = meta[key]
    if "ii_cycles" in meta:
        metrics["cycles"] = meta["ii_cycles"]
    keep = ("level", "top", "sources", "latency_cycles", "ii_cycles", "folding", "cycle_formula")
    return {k: meta[k] for k in keep if k in meta}


def _stage_sim(cfg, weights, spec, work, metrics) -> dict:
    inputs = _inputs(cfg, spec)
    r = simulate(work / "rtl", vectors=spec["vectors"], seed=spec["seed"], inputs=inputs)
    r["captured"] = inputs is not None
    metrics["mismatches"] = int(r["mismatches"])
    for key in ("latency_cycles", "ii_cycles"):
        if r.get(key) is not None:
            metrics[key] = r[key]
    if r.get("ii_cycles") is not None:
        metrics["cycles"] = r["ii_cycles"]
    if r["mismatches"]:
        first = (r.get("first_mismatch") or {}).get("message", "")
        raise CheckFailed(f"{r['mismatches']} of {r['vectors']} vectors mismatch ({first})")
    return r


def _yosys(nodsp: bool):
    def stage(cfg, weights, spec, work, metrics) -> dict:
        r = resources(work / "rtl", nodsp=nodsp, abc_verify=spec.get("abc_verify", True))
        suffix = "_nodsp" if nodsp else ""
        for key in ("LUT", "FF", "CARRY4", "DSP48E1", "BRAM"):
            metrics[key + suffix] = r[key]
        return r

    return stage


def _stage_power(cfg, weights, spec, work, metrics) -> dict:
    r = power(work / "rtl", vectors=min(spec["vectors"], POWER_VECTORS), seed=spec["seed"])
    metrics["energy_pj"] = r["energy_per_call_pj"]["total"]
    metrics["area_um2"] = r["area_um2"]
    metrics["fmax_mhz"] = r["sta"]["fmax_mhz"]
    return {k: v for k, v in r.items() if k not in ("by_type", "cells")}


def _stage_pnr(cfg, weights, spec, work, metrics) -> dict:
    r = pnr(work / "rtl")
    fmax = r.get("fmax_mhz") or {}
    if fmax:
        metrics["pnr_fmax_mhz"] = min(fmax.values())
    metrics["pnr_fits"] = bool(r.get("fits"))
    return r


def _stage_da4ml(cfg, weights, spec, work, metrics) -> dict:
    """da4ml's trace of the alignment (constant products as shift-add): its LUT estimate, its
    check against the golden model, and Yosys on the Verilog da4ml writes."""
    if spec["level"] != "alignment":
        raise ValueError(f"da4ml traces the alignment level, not {spec['level']}")
    r: dict = {"estimate": da4ml_trace.estimate(cfg, weights)}
    r["check"] = da4ml_trace.check(cfg, weights, vectors=spec["vectors"])
    metrics["da4ml_LUT_estimate"] = r["estimate"]["LUT_estimate"]
    metrics["da4ml_mismatches"] = r["check"]["mismatches"]
    if r["check"]["mismatches"]:
        raise CheckFailed(f"da4ml's trace differs from the golden model: {r['check']}")
    meta = da4ml_trace.write_rtl(cfg, weights, work / "rtl_da4ml")
    r["pipeline_stages"] = meta["latency_cycles"]
    y = resources(work / "rtl_da4ml", abc_verify=spec.get("abc_verify", True))
    for key in ("LUT", "FF", "CARRY4", "DSP48E1", "BRAM"):
        metrics[f"da4ml_{key}"] = y[key]
    r["yosys"] = y
    return r


def _stage_energy(cfg, weights, spec, work, metrics) -> dict:
    counts = energy.core_counts(cfg.kind, cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, "attention")
    pj = energy.energy_pj(counts, energy.DEFAULT_TABLE, "asic")
    metrics["energy_analytic_pj"] = pj
    return {"adds": counts.adds, "muls": counts.muls, "energy_pj_asic": pj}


def _stage_train(cfg, weights, spec, work, metrics) -> dict:
    """`eatt train` of the point's run config (the sweep's, with its overrides)."""
    path = work / "run.yaml"
    atomic_write_text(path, yaml.safe_dump(spec["run"], sort_keys=False))
    r = train_from_config(path, work / "train", progress=False)
    metrics["dev_loss"] = r["dev_loss"]
    metrics["train_steps"] = r["steps"]
    return r


def _stage_bleu(cfg, weights, spec, work, metrics) -> dict:
    """`eatt evaluate` of the trained checkpoint: BLEU and the model's attention energy."""
    checkpoint = work / "train" / "best.pt"
    r = evaluate(checkpoint, beam=spec["beam"], split=spec["split"])
    metrics["bleu"] = r["bleu"]
    energy_pj = (r["energy"].get("energy_pj") or {}).get("asic")
    if energy_pj is not None:
        metrics["energy_analytic_pj"] = energy_pj
    return {k: v for k, v in r.items() if k != "examples"}


RUN = {
    "golden": _stage_golden,
    "hls": _stage_hls,
    "rtl": _stage_rtl,
    "sim": _stage_sim,
    "resources": _yosys(nodsp=False),
    "nodsp": _yosys(nodsp=True),
    "power": _stage_power,
    "pnr": _stage_pnr,
    "da4ml": _stage_da4ml,
    "energy": _stage_energy,
    "train": _stage_train,
    "bleu": _stage_bleu,
}


def split_volatile(report: dict) -> tuple[dict, dict]:
    """(stable, volatile) parts of a stage's report: VOLATILE keys and absolute paths apart."""
    stable, volatile = {}, {}
    for key, value in report.items():
        is_path = isinstance(value, str) and value.startswith(os.sep)
        (volatile if key in VOLATILE or is_path else stable)[key] = value
    return stable, volatile


def peak_mb() -> float:
    """Peak resident memory of this process and of the largest tool it waited for, in MB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tools = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, tools) / 1024, 1)  # Linux: kB


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
    metrics: dict = {}
    status, failed, error = "done", None, None
    stage = "config"

    def record() -> dict:
        run = {"wall_s": round(time.perf_counter() - start, 3), "peak_mb": peak_mb()}
        return _json_ready(
            point_record(spec, status, failed, error, stages, metrics, {**run, "stages": volatile})
        )

    try:
        cfg, weights = point_core(spec) if not spec.get("run") else (None, None)
        for stage in spec["stages"]:
            atomic_write_text(work / STAGE_FILE, stage + "\n")
            print(f"eatt: sweep point {spec['id']}: {stage} ...", file=sys.stderr, flush=True)
            stages[stage], volatile[stage] = split_volatile(
                RUN[stage](cfg, weights, spec, work, metrics)
            )
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
