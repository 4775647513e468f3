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

The sweep file is read by eatt.sweep_file (load_sweep, make_sweep, SweepError: importable from
here too).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eatt.config import atomic_write_text, first_line
from eatt.jobs import ClusterError, Job, run_jobs
from eatt.outdir import MARKER, check_output_dir, claim_dir
from eatt.progress import say
from eatt.rtl_sim.procs import try_lock

# the names marked F401 live in eatt.sweep_file and are re-exported here, their first home
# (the CLI and the tests import them from eatt.sweep)
from eatt.sweep_file import (
    DEFAULTS,  # noqa: F401
    HLS_BACKENDS,  # noqa: F401
    LAYER_KEYS,  # noqa: F401
    LEVELS,  # noqa: F401
    POINT_KEYS,  # noqa: F401
    RUN_POINT_KEYS,  # noqa: F401
    RUN_SECTIONS,  # noqa: F401
    SPLITS,  # noqa: F401
    SWEEP_KEYS,  # noqa: F401
    SweepError,
    load_sweep,  # noqa: F401
    make_sweep,  # noqa: F401
)
from eatt.sweep_point import PARTIAL_FILE, STAGE_FILE, point_record
from eatt.sweep_report import write_report

#: held (fcntl.flock) by the sweep running in a folder: a second one is refused
LOCK_FILE = ".lock"
#: seconds between progress lines while nothing finishes
PROGRESS_EVERY = 15.0
#: seconds a point's process gets to end after SIGTERM before SIGKILL
KILL_GRACE = 5.0
WHAT = "sweep"


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
