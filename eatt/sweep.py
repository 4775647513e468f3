"""`eatt sweep`: many design points on Ray, resumable, each point's failure its own record.

A sweep file (YAML, docs/sweep.md) names a base core, the points (a grid of overrides and/or a
list of them) and the stages each point runs (eatt.sweep_point.STAGES). :func:`load_sweep`
turns it into one spec per point; :func:`run_sweep` runs them as Ray tasks, on a local Ray
instance or on the cluster at ``address``, and writes into the sweep folder:

    .eatt-output         the marker (what = "sweep"): eatt writes only into folders it made
    sweep.json           the points as run (their overrides, configs, stages)
    records/ID.json      one record per point, written atomically when the point ends
    points/ID/           the point's work folder: rtl/, point.log, traceback.txt on a failure
    report.md, report.json, pareto.png   eatt.sweep_report over the records

Each point is a Ray task (:func:`point_task`) asking for the point's ``cpus`` and
``memory_gb``, so Ray places it where it fits; the task runs the point in its own process
(``python -m eatt.sweep_point``) so a timeout or an out-of-memory kill ends that process and its
tools, records the reason in one line, and the other points go on. A record holds everything
but the artifacts; where a cluster node cannot see the sweep folder (no shared file system)
the point works in a temporary folder there and the record says ``artifacts: null``.

``resume``: points whose record says done, with the same key (a hash of everything that
decides the result), are kept; failed and missing ones run again. A driver killed mid-sweep
loses only the points that were running. Without ``resume`` a folder that already holds records
is refused: nothing finished is ever overwritten by accident.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path

from eatt.config import (
    ConfigError,
    CoreConfig,
    atomic_write_text,
    config_class,
    default_config,
    first_line,
    kinds,
    load_config,
    read_mapping,
)
from eatt.jobs import ClusterError, Job, run_jobs
from eatt.model.train import load_run_config
from eatt.outdir import MARKER, check_output_dir, claim_dir
from eatt.progress import say
from eatt.rtl_sim.procs import try_lock
from eatt.sweep_point import (
    MODEL_STAGES,
    NEEDS_RTL,
    PARTIAL_FILE,
    STAGE_FILE,
    STAGES,
    file_digest,
    point_record,
)
from eatt.sweep_report import DSP_LUTS, write_report

#: held (fcntl.flock) by the sweep running in a folder: a second one is refused
LOCK_FILE = ".lock"
#: per-point keys besides the core config's: where and how the point runs
POINT_KEYS = (
    "backend",
    "level",
    "folding",
    "adder_levels",
    "stages",
    "abc_verify",
    "name",
    "cpus",
    "memory_gb",
    "timeout_s",
)
#: keys of a sweep file
SWEEP_KEYS = (
    "base",
    "run",
    "beam",
    "split",
    "inputs",
    "grid",
    "points",
    "vectors",
    "seed",
    "weights_seed",
    "dsp_luts",
    *POINT_KEYS,
)
LEVELS = ("alignment", "attention", "folded")
#: hls4ml backends of the hls stage (eatt.hls.project.BACKENDS)
HLS_BACKENDS = ("vitis", "vivado")
DEFAULTS = {
    "backend": "vitis",
    "level": None,  # folded where the point's reuse_factor > 1, else attention
    "folding": None,
    "adder_levels": 0,
    "abc_verify": True,
    "name": None,
    "cpus": 1,
    "memory_gb": 2.0,
    "timeout_s": None,
    "stages": ["golden", "rtl", "sim"],
    "vectors": 100,
    "seed": 1,
    "weights_seed": 1,
}
#: seconds between progress lines while nothing finishes
PROGRESS_EVERY = 15.0
#: seconds a point's process gets to end after SIGTERM before SIGKILL
KILL_GRACE = 5.0
WHAT = "sweep"


class SweepError(ValueError):
    """A sweep file or option eatt cannot run; one line naming the file or flag."""


# -- the sweep file ---------------------------------------------------------------------------
def _check_point_keys(where: str, over: dict) -> None:
    known = set(POINT_KEYS) | _config_keys()
    for key in over:
        if key not in known:
            raise SweepError(
                f"{where}: unknown key '{key}' (a core config key or one of "
                f"{', '.join(POINT_KEYS)})"
            )
    if "backend" in over and over["backend"] not in HLS_BACKENDS:
        raise SweepError(
            f"{where}: backend: one of {', '.join(HLS_BACKENDS)} (hls4ml), got {over['backend']!r}"
        )
    if "level" in over and over["level"] not in LEVELS:
        raise SweepError(f"{where}: level: one of {', '.join(LEVELS)}, got {over['level']!r}")
    if over.get("folding") is not None:
        f = over["folding"]
        if not isinstance(f, dict) or set(f) - {"lanes", "simd", "pe"}:
            raise SweepError(f"{where}: folding: a mapping of lanes, simd and pe, got {f!r}")
        for k, v in f.items():
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 2**31 - 1:
                raise SweepError(f"{where}: folding.{k}: an integer >= 1, got {v!r}")
    if "abc_verify" in over and not isinstance(over["abc_verify"], bool):
        raise SweepError(f"{where}: abc_verify: true or false, got {over['abc_verify']!r}")
    name = over.get("name")
    if name is not None and not (isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9._+-]+", name)):
        raise SweepError(f"{where}: name: letters, digits and . _ + - only, got {name!r}")
    for key in ("cpus", "memory_gb", "timeout_s"):
        v = over.get(key)
        if v is not None and (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not math.isfinite(v)  # NaN passes `v <= 0` and reaches Ray
            or v <= 0
        ):
            raise SweepError(f"{where}: {key}: a positive finite number, got {v!r}")


def _config_keys() -> set[str]:
    """Every core config key of any kind (a point's kind decides which are valid)."""
    return {f.name for k in kinds() for f in fields(config_class(k))}


def _grid(where: str, grid, known: set | None = None, dotted: bool = False) -> list[dict]:
    """Every combination of the grid's axes, in file order (the last axis varies fastest). An
    axis named by an override key lists that key's values; any other name lists mappings of
    overrides (one axis that sets several keys, like a size)."""
    if grid is None:
        return []
    if not isinstance(grid, dict) or not grid:
        raise SweepError(f"{where}: grid: a mapping of axis names to lists of values")
    combos: list[dict] = [{}]
    known = set(POINT_KEYS) | _config_keys() if known is None else known
    for axis, values in grid.items():
        if not isinstance(values, list) or not values:
            raise SweepError(f"{where}: grid.{axis}: a non-empty list of values")
        options = []
        for v in values:
            if axis in known or (dotted and "." in axis):
                options.append({axis: v})
            elif isinstance(v, dict):
                options.append(dict(v))
            else:
                raise SweepError(
                    f"{where}: grid.{axis}: '{axis}' is not a config key, so its values must be "
                    f"mappings of keys (like {{len_q: 4, dim: 8}}), got {v!r}"
                )
        combos = [{**c, **o} for c in combos for o in options]
    return combos


def _slug(over: dict) -> str:
    parts = []
    if "kind" in over:
        parts.append(str(over["kind"]))
    if "len_q" in over or "len_k" in over:
        parts.append(f"l{over.get('len_q', '')}x{over.get('len_k', '')}")
    if "dim" in over:
        parts.append(f"d{over['dim']}")
    if "heads" in over:
        parts.append(f"h{over['heads']}")
    if "level" in over:
        parts.append(str(over["level"]))
    if over.get("folding"):
        f = over["folding"]
        parts.append(f"p{f.get('lanes', '')}s{f.get('simd', '')}")
        if f.get("pe") is not None:
            parts[-1] += f"pe{f['pe']}"
    skip = {"kind", "len_q", "len_k", "dim", "heads", "level", "folding", "stages", "name"}
    parts += [f"{k}{v}" for k, v in over.items() if k not in skip]
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", "-".join(parts))[:60]


def _file(where: str, key: str, name: str, folder: Path, what: str) -> Path:
    path = (folder / name) if not Path(name).is_absolute() else Path(name)
    if not path.is_file():
        raise SweepError(f"{where}: {key}: {name}: no such {what}")
    return path.resolve()


def _base(where: str, base, folder: Path) -> tuple[dict, dict]:
    """(the base config, the trained layer it comes from: {"onnx", "sha256"} or {})."""
    if base is None:
        return default_config().to_dict(), {}
    if isinstance(base, dict):
        try:
            return CoreConfig.from_dict(base, source=f"{where}: base").to_dict(), {}
        except ConfigError as err:
            raise SweepError(str(err)) from None
    if isinstance(base, str) and base.endswith(".onnx"):  # a trained layer (eatt export --layer)
        path = _file(where, "base", base, folder, "layer file (eatt export --layer writes one)")
        from eatt.quant.export import load_core  # onnx, qonnx

        try:
            cfg, _ = load_core(path)
        except ValueError as err:
            raise SweepError(f"{where}: base: {first_line(err)}") from None
        return cfg.to_dict(), {"onnx": str(path), "sha256": file_digest(path)}
    if isinstance(base, str):
        path = _file(where, "base", base, folder, "config file")
        try:
            return load_config(path).to_dict(), {}
        except (ConfigError, ValueError) as err:
            raise SweepError(f"{where}: base: {first_line(err)}") from None
    raise SweepError(f"{where}: base: a config file, a layer's .onnx or a mapping, got {base!r}")


#: the config keys a trained layer's point may change: its weights fix the function
LAYER_KEYS = CoreConfig.HARDWARE_KEYS


def _stages(where: str, stages) -> list[str]:
    """The stages in their fixed order, with rtl where a stage reads the RTL."""
    if not isinstance(stages, list) or not stages or any(s not in STAGES for s in stages):
        raise SweepError(f"{where}: stages: a list of {', '.join(STAGES)}, got {stages!r}")
    if any(s in NEEDS_RTL for s in stages) and "rtl" not in stages:
        stages = [*stages, "rtl"]
    return [s for s in STAGES if s in stages]


def _default_level(config: dict) -> str:
    reuse = config.get("reuse_factor", 1)
    return "folded" if isinstance(reuse, int) and reuse > 1 else "attention"


def load_sweep(path: str | os.PathLike) -> dict:
    """The sweep file as :func:`make_sweep` gives it; SweepError names the file and the key."""
    path = Path(path)
    try:
        data = read_mapping(path)
    except (ConfigError, ValueError, OSError) as err:
        raise SweepError(first_line(err)) from None
    return make_sweep(data, str(path), path.parent, file=str(path.resolve()))


#: a model sweep's sections of the run config (`eatt train`) its points override as
#: "section.key"
RUN_SECTIONS = ("model", "train", "data")
#: the keys of a point of a model sweep besides "section.key"
RUN_POINT_KEYS = ("stages", "name", "cpus", "memory_gb", "timeout_s")
SPLITS = ("test", "dev", "train")


def _run_overrides(where: str, over: dict) -> dict:
    """A model sweep's point: its "section.key" overrides as nested sections."""
    nested: dict = {}
    for key, value in over.items():
        if key in RUN_POINT_KEYS:
            continue
        section, _, name = key.partition(".")
        if section not in RUN_SECTIONS or not name:
            raise SweepError(
                f"{where}: unknown key '{key}' (a model sweep changes model.KEY, train.KEY or "
                f"data.KEY of its run config, or one of {', '.join(RUN_POINT_KEYS)})"
            )
        nested.setdefault(section, {})[name] = value
    return nested


def _finish(spec: dict, merged: dict, slug: str, at: str, seen: dict) -> dict:
    """A point's spec made whole: its key (a hash of everything that decides the result, so
    before the keys that only say where it runs), its unique ID, and its Ray resources."""
    spec["key"] = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    index = spec["index"]
    spec["id"] = merged["name"] or f"p{index:03d}" + (f"-{slug}" if slug else "")
    if spec["id"] in seen:
        raise SweepError(f"{at}: name: {spec['id']!r} is taken by point {seen[spec['id']]}")
    seen[spec["id"]] = index
    spec.update(cpus=merged["cpus"], memory_gb=merged["memory_gb"], timeout_s=merged["timeout_s"])
    return spec


def _dsp_luts(where: str, data: dict) -> float:
    dsp_luts = data.get("dsp_luts", DSP_LUTS)
    if isinstance(dsp_luts, bool) or not isinstance(dsp_luts, (int, float)) or dsp_luts < 0:
        raise SweepError(f"{where}: dsp_luts: a number >= 0, got {dsp_luts!r}")
    return dsp_luts


def _model_sweep(data: dict, where: str, folder: Path, file: str | None) -> dict:
    """make_sweep of a model sweep (``run``: an `eatt train` run config; stages train, bleu)."""
    if "base" in data or "inputs" in data:
        raise SweepError(f"{where}: run: a model sweep has no base or inputs (a core sweep does)")
    path = _file(where, "run", data["run"], folder, "run config (eatt train takes one)")
    try:
        run = read_mapping(path)
        load_run_config(path)  # the base run must be valid; a point's is checked when it runs
    except (ConfigError, ValueError) as err:
        raise SweepError(f"{where}: run: {first_line(err)}") from None
    beam, split = data.get("beam", 4), data.get("split", "test")
    if isinstance(beam, bool) or not isinstance(beam, int) or not 1 <= beam <= 256:
        raise SweepError(f"{where}: beam: an integer in [1, 256], got {beam!r}")
    if split not in SPLITS:
        raise SweepError(f"{where}: split: one of {', '.join(SPLITS)}, got {split!r}")
    overs = _grid(where, data.get("grid"), known=set(RUN_POINT_KEYS), dotted=True)
    overs += [dict(p) for p in (data.get("points") or [])] or ([] if overs else [{}])
    points, seen = [], {}
    for index, over in enumerate(overs):
        at = f"{where}: point {index}"
        nested = _run_overrides(at, over)
        _check_point_keys(at, {k: v for k, v in over.items() if k in RUN_POINT_KEYS})
        merged = {**DEFAULTS, "stages": ["train", "bleu"], **data, **over}
        stages = merged["stages"]
        if not isinstance(stages, list) or not stages or set(stages) - set(MODEL_STAGES):
            raise SweepError(f"{at}: stages: a model sweep's are {', '.join(MODEL_STAGES)}")
        spec = {
            "index": index,
            "overrides": over,
            "run": {sec: {**(run.get(sec) or {}), **nested.get(sec, {})} for sec in RUN_SECTIONS},
            "base": {},
            "config": {},
            "level": None,
            "folding": None,
            "stages": [s for s in MODEL_STAGES if s in stages or s == "train"],
            "beam": beam,
            "split": split,
        }
        slug = re.sub(r"[^A-Za-z0-9._+-]+", "_", "-".join(f"{v}" for v in over.values()))[:60]
        points.append(_finish(spec, merged, slug, at, seen))
    dsp_luts = data.get("dsp_luts", DSP_LUTS)
    return {"file": file, "dsp_luts": dsp_luts, "points": points}


def make_sweep(data: dict, where: str, folder: Path, file: str | None = None) -> dict:
    """{"file", "dsp_luts", "points": [point spec, ...]} of a sweep file's mapping (``where``
    names it in errors, ``folder`` is where a base config file is looked for). A point's core
    config is checked when it runs: an impossible point is a failed record, not a refused
    sweep."""
    for key in data:
        if key not in SWEEP_KEYS:
            raise SweepError(f"{where}: unknown key '{key}' (known: {', '.join(SWEEP_KEYS)})")
    if "run" in data:
        return _model_sweep(data, where, folder, file)
    for key in ("beam", "split"):
        if key in data:
            raise SweepError(f"{where}: {key}: for a model sweep (run: RUN.yaml) only")
    base, layer = _base(where, data.get("base"), folder)
    inputs = None
    if data.get("inputs") is not None:
        if not isinstance(data["inputs"], str):
            got = data["inputs"]
            raise SweepError(f"{where}: inputs: a capture file (eatt capture), got {got!r}")
        path = _file(where, "inputs", data["inputs"], folder, "capture file (eatt capture)")
        inputs = {"path": str(path), "sha256": file_digest(path)}
    for key in ("vectors", "seed", "weights_seed"):
        v = data.get(key, DEFAULTS[key])
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if key == "vectors" else 0):
            raise SweepError(f"{where}: {key}: an integer >= {1 if key == 'vectors' else 0}")
    dsp_luts = _dsp_luts(where, data)
    common = {k: data[k] for k in POINT_KEYS if k in data}
    _check_point_keys(where, common)
    overs = _grid(where, data.get("grid"))
    extra = data.get("points") or []
    if not isinstance(extra, list) or any(not isinstance(p, dict) for p in extra):
        raise SweepError(f"{where}: points: a list of mappings of overrides")
    overs += [dict(p) for p in extra]
    if not overs:
        overs = [{}]
    points, seen = [], {}
    for index, over in enumerate(overs):
        at = f"{where}: point {index}"
        _check_point_keys(at, over)
        fixed = [k for k in over if k not in POINT_KEYS and k not in LAYER_KEYS]
        if layer and fixed:
            raise SweepError(
                f"{at}: {fixed[0]}: the base is a trained layer, whose weights fix its config; "
                f"a point may change {', '.join(LAYER_KEYS)} and {', '.join(POINT_KEYS)}"
            )
        merged = {**DEFAULTS, **common, **over}
        spec = {
            "index": index,
            "overrides": over,
            "base": base,
            "config": {k: v for k, v in over.items() if k not in POINT_KEYS},
            "level": merged["level"] or _default_level({**base, **over}),
            "folding": merged["folding"],
            "adder_levels": merged["adder_levels"],
            "abc_verify": merged["abc_verify"],
            "backend": merged["backend"],
            "stages": _stages(at if "stages" in over else where, merged["stages"]),
            "vectors": data.get("vectors", DEFAULTS["vectors"]),
            "seed": data.get("seed", DEFAULTS["seed"]),
            "weights_seed": data.get("weights_seed", DEFAULTS["weights_seed"]),
            "layer": layer or None,
            "inputs": inputs,
        }
        points.append(_finish(spec, merged, _slug(over), at, seen))
    return {"file": file, "dsp_luts": dsp_luts, "points": points}


# -- one point, as a Ray task -----------------------------------------------------------------
def failed_record(spec: dict, stage: str, error: str, run: dict | None = None) -> dict:
    """The record of a point that ended without its own (timeout, kill, a lost worker)."""
    return point_record(spec, "failed", stage, error, run=run)


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _stopped(spec: dict, work: Path, stage: str, error: str, run: dict) -> dict:
    """The record of a point stopped from outside: failed at ``stage``, with the stages it
    finished before (the point's partial record) kept."""
    record = failed_record(spec, stage, error, run)
    try:
        partial = json.loads((work / PARTIAL_FILE).read_text())
    except (OSError, ValueError):
        return record
    for key in ("stages", "metrics"):
        record[key] = partial.get(key, record[key])
    record["run"] = {**partial.get("run", {}), **run}
    return record


def _kill(pid: int) -> tuple[int, object]:
    """SIGTERM the point's process group, SIGKILL after KILL_GRACE; (status, rusage)."""
    for sig, grace in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, 60.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
        end = time.monotonic() + grace
        while time.monotonic() < end:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                return status, usage
            time.sleep(0.1)
    _, status, usage = os.wait4(pid, 0)
    return status, usage


def point_task(spec: dict, sweep_dir: str) -> dict:
    """Run one point in its own process under the point's timeout; its record (module doc)."""
    root = Path(sweep_dir)
    shared = (root / MARKER).is_file()
    if shared:
        work = root / "points" / spec["id"]
        if work.exists():  # ours: an earlier try of this point
            shutil.rmtree(work)
        work.mkdir(parents=True)
    else:
        work = Path(tempfile.mkdtemp(prefix=f"eatt-sweep-{spec['id']}-"))
    spec_path, result_path, log_path = work / "spec.json", work / "result.json", work / "point.log"
    atomic_write_text(spec_path, json.dumps(spec, indent=1) + "\n")
    start = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "eatt.sweep_point", spec_path, result_path, work],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: a timeout ends its tools too
        )
    timeout = spec.get("timeout_s")
    timed_out = False
    try:
        while True:
            done, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if done:
                break
            if timeout is not None and time.monotonic() - start > timeout:
                timed_out = True
                status, usage = _kill(proc.pid)
                break
            time.sleep(0.2)
    except BaseException:  # the task cancelled or the worker stopping: take the tools along
        _kill(proc.pid)
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    run = {
        "wall_s": round(time.monotonic() - start, 3),
        "peak_mb": round(usage.ru_maxrss / 1024, 1),
        "host": platform.node(),
        "artifacts": str(work) if shared else None,
    }
    stage = (work / STAGE_FILE).read_text().strip() if (work / STAGE_FILE).is_file() else "start"
    if timed_out:
        record = _stopped(spec, work, stage, f"{stage}: timeout after {timeout:g} s", run)
    elif result_path.is_file():
        record = json.loads(result_path.read_text())
        record["run"] = {**record.get("run", {}), **run}
    elif proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        why = " (out of memory?)" if -proc.returncode == signal.SIGKILL else ""
        record = _stopped(spec, work, stage, f"{stage}: killed by {name}{why}", run)
    else:
        tail = _last_line(log_path)
        record = _stopped(spec, work, stage, f"{stage}: exit {proc.returncode}: {tail}", run)
    if not shared:
        shutil.rmtree(work, ignore_errors=True)
    return record


# -- the driver -------------------------------------------------------------------------------
def _record_path(out: Path, point_id: str) -> Path:
    return out / "records" / f"{point_id}.json"


def read_record(out: Path, spec: dict) -> dict | None:
    path = _record_path(out, spec["id"])
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _finished(out: Path, spec: dict) -> bool:
    r = read_record(out, spec)
    return bool(r and r.get("status") == "done" and r.get("key") == spec["key"])


def check_sweep_dir(out_dir: str | os.PathLike, resume: bool) -> Path:
    """The sweep folder, refused (SweepError / OutputError) before any work when eatt must not
    write there: another tool's folder, or one holding records without ``resume``."""
    out = check_output_dir(out_dir, WHAT)
    if not resume and out.is_dir() and any((out / "records").glob("*.json")):
        raise SweepError(
            f"{out_dir}: holds the records of an earlier sweep; --resume continues it, or give a "
            "new folder"
        )
    return out


def run_sweep(
    sweep: dict,
    out_dir: str | os.PathLike,
    address: str | None = None,
    resume: bool = False,
    max_parallel: int | None = None,
) -> dict:
    """Run every point of ``sweep`` (load_sweep) not finished yet; the report's summary with
    "dir", "ran" (points run now), "kept" (finished ones resume kept) and "report" paths."""
    if max_parallel is not None and max_parallel < 1:
        raise SweepError(f"--max-parallel: at least 1, got {max_parallel}")
    check_sweep_dir(out_dir, resume)
    out = claim_dir(out_dir, WHAT)
    lock = try_lock(out / LOCK_FILE)  # one sweep at a time in a folder (as eatt sim's RTL folder)
    if lock is None:
        raise SweepError(
            f"{out_dir}: another eatt sweep is running in this folder (it holds {LOCK_FILE}); "
            "wait for it, or give a new folder"
        )
    try:
        return _run_locked(sweep, out, address, resume, max_parallel)
    finally:
        os.close(lock)


def _run_locked(sweep: dict, out: Path, address, resume: bool, max_parallel) -> dict:
    points = sweep["points"]
    atomic_write_text(out / "sweep.json", json.dumps(sweep, indent=1) + "\n")
    todo = [p for p in points if not (resume and _finished(out, p))]
    kept = len(points) - len(todo)
    say(f"sweep: {len(points)} points, {kept} finished before, {len(todo)} to run")
    start = time.monotonic()
    counts = {"done": 0, "failed": 0}

    def on_done(index: int, record, error: BaseException | None) -> bool:
        spec = todo[index]
        if error is not None:  # a job no node can take, a lost worker, Ray's OOM killer
            if isinstance(error, ClusterError):
                stage, why = "schedule", first_line(error)
            else:
                stage, why = "ray", f"{type(error).__name__}: {first_line(error)}"
            record = failed_record(spec, stage, f"{stage}: {why}")
        _write_record(out, record)
        ok = record["status"] == "done"
        counts["done" if ok else "failed"] += 1
        if not ok:
            say(f"sweep: {record['id']} failed: {record['error']}")
        return not ok

    jobs = [Job((spec, str(out)), spec["cpus"], spec["memory_gb"]) for spec in todo]
    run_jobs(
        point_task,
        jobs,
        on_done,
        address=address,
        max_parallel=max_parallel,
        what="sweep",
        every=PROGRESS_EVERY,
    )
    records = [read_record(out, p) or failed_record(p, "lost", "lost: no record") for p in points]
    report = write_report(records, out, dsp_luts=sweep["dsp_luts"])
    summary = report["summary"]
    return {
        **summary,
        "dir": str(out),
        "ran": counts["done"] + counts["failed"],
        "kept": kept,
        "seconds": round(time.monotonic() - start, 1),
        "report": {k: (str(v) if v else None) for k, v in report.items() if k != "summary"},
    }


def _write_record(out: Path, record: dict) -> None:
    atomic_write_text(_record_path(out, record["id"]), json.dumps(record, indent=1) + "\n")


def format_sweep(r: dict) -> str:
    lines = [
        f"sweep: {r['points']} points, {r['done']} done, {r['failed']} failed "
        f"({r['ran']} run now, {r['kept']} kept from before; {r['seconds']:.0f} s)",
    ]
    for f in r.get("failures", []):
        lines.append(f"  {f['id']}: {f['error']}")
    png = r["report"].get("png")
    lines.append(f"report: {r['report']['md']}" + (f", {png}" if png else ""))
    return "\n".join(lines)
