"""Many independent jobs on Ray: the one engine behind `eatt sweep` and the experiments' runs.

:func:`connect` starts a local Ray instance (loopback only, no usage statistics) or joins the
cluster at ``address``; :func:`run_jobs` submits a function once per job with the job's CPUs
and memory, at most ``max_parallel`` at once, hands every result (or the exception that ended
the job) to ``on_done`` as soon as it arrives, and says on stderr how far it is (finished,
failed, running or queued, elapsed, ETA) after every job and every ``every`` seconds.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from eatt.config import first_line
from eatt.progress import say
from eatt.rtl_sim.tools import ToolMissing


class ClusterError(ValueError):
    """Ray could not be reached at the address given; one line naming it."""


@dataclass(frozen=True)
class Job:
    """One call ``fn(*args)``: ``cpus`` and ``memory_gb`` are what Ray reserves for it."""

    args: tuple
    cpus: float = 1
    memory_gb: float = 1.0


def _loopback(address: str) -> bool:
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


#: the logger of Ray's "Token authentication is enabled for this Ray cluster" warning
RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


def _not_token_default(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Token authentication is enabled for this Ray")


#: the signals a command handles itself (eatt.cli.main), kept through ray.init
HELD_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def connect(address: str | None = None):
    """ray, initialized: a new local instance (``address`` None) or the cluster there."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # never report usage anywhere
    if address is None or _loopback(address):
        # A local instance binds loopback only, and a loopback address stays loopback (Ray's
        # setting for single-machine use; without it Ray swaps 127.0.0.1 for the machine's
        # outside address). Ray reads it at import, so it is set before.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    # Ray's C++ failure handler catches SIGTERM too (a stack dump, then abort: exit 134): the
    # command handles its signals itself. Read when ray is imported, so set before.
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    try:
        import ray
    except ImportError as err:
        raise ToolMissing(f"ray is not installed ({err}); make install installs it") from None
    # ray.init installs its own SIGTERM handler (a C++ stack dump, exit 134 or 15): the
    # command's handlers (eatt.cli: SIGTERM, SIGHUP end it like Ctrl-C, 143 / 129 / 130) are put
    # back, so a signal ends the command through its cleanups, run_jobs' ray.shutdown included
    handlers = {sig: signal.getsignal(sig) for sig in HELD_SIGNALS}
    # Ray's default for a new local instance, token authentication on, is not news on every
    # sweep: its warning saying so is dropped (any other of its warnings still shows)
    logging.getLogger(RAY_AUTH_LOGGER).addFilter(_not_token_default)
    # While Ray starts, a signal is only noted: raised there, it can land in an at-fork hook
    # of the processes Ray starts, where Python drops the exception ("Exception ignored") and
    # the command would go on. Ray's own handler (sys.exit(signum)) is not installed at all.
    pending: list[int] = []
    own = threading.current_thread() is threading.main_thread()
    if own:
        for sig in HELD_SIGNALS:
            signal.signal(sig, lambda signum, frame: pending.append(signum))
    utils = ray._private.utils  # ray.init calls utils.set_sigterm_handler(sys.exit(signum))
    set_handler = utils.set_sigterm_handler
    utils.set_sigterm_handler = lambda handler: None
    try:
        if address is None:
            ray.init(include_dashboard=False, log_to_driver=False, logging_level="warning")
        else:
            ray.init(address=address, log_to_driver=False, logging_level="warning")
    except (ConnectionError, RuntimeError, ValueError) as err:
        if pending:
            raise KeyboardInterrupt from None  # the signal, below
        raise ClusterError(f"--address {address}: {first_line(err)}") from None
    except BaseException:  # Ctrl-C while Ray starts: the processes it started go too
        ray.shutdown()
        raise
    finally:
        utils.set_sigterm_handler = set_handler
        if own:
            _restore(handlers)
        if pending:  # a signal while Ray started: Ray goes, then the command's handler
            ray.shutdown()
            handler = handlers.get(pending[-1])
            if callable(handler):
                handler(pending[-1], None)
            raise KeyboardInterrupt
    return ray


def _restore(handlers: dict) -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread sets handlers (and a command runs there)
    for sig, handler in handlers.items():
        if handler is not None:
            signal.signal(sig, handler)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def infeasible(job: Job, total: dict) -> str | None:
    """Why no node of the cluster (``ray.cluster_resources()``) can ever take the job."""
    cpus, mem = total.get("CPU", 0), total.get("memory", 0) / 2**30
    if job.cpus > cpus:
        return f"asks for {job.cpus:g} CPUs; the cluster has {cpus:g}"
    if job.memory_gb > mem:
        return f"asks for {job.memory_gb:g} GB of memory; the cluster has {mem:.1f} GB"
    return None


def run_jobs(
    fn: Callable,
    jobs: list[Job],
    on_done: Callable[[int, object, BaseException | None], bool],
    address: str | None = None,
    max_parallel: int | None = None,
    what: str = "jobs",
    every: float = 15.0,
) -> None:
    """Run ``fn(*job.args)`` for every job as a Ray task; ``on_done(index, result, error)``
    for each as it ends (``error``: the exception, or a job no node can take as a
    ClusterError) returns whether the job counts as failed. Ray is shut down at the end."""
    if not jobs:
        return
    ray = connect(address)
    try:
        total = ray.cluster_resources()
        task = ray.remote(fn)
        todo = list(enumerate(jobs))
        running: dict = {}
        start = last = time.monotonic()
        finished = failed = 0
        while todo or running:
            while todo and (max_parallel is None or len(running) < max_parallel):
                index, job = todo.pop(0)
                why = infeasible(job, total)
                if why:
                    failed += bool(on_done(index, None, ClusterError(why)))
                    finished += 1
                    continue
                ref = task.options(
                    num_cpus=job.cpus, memory=int(job.memory_gb * 2**30), max_retries=0
                ).remote(*job.args)
                running[ref] = index
            if not running:
                break
            ready, _ = ray.wait(list(running), num_returns=1, timeout=every)
            for ref in ready:
                index = running.pop(ref)
                try:
                    result, error = ray.get(ref), None
                except Exception as err:  # noqa: BLE001 - the job's failure, or a lost worker
                    result, error = None, err
                failed += bool(on_done(index, result, error))
                finished += 1
            if ready or time.monotonic() - last >= every:
                last = time.monotonic()
                elapsed, left = last - start, len(todo) + len(running)
                eta = f", ETA {_duration(elapsed / finished * left)}" if finished and left else ""
                say(
                    f"{what}: {finished}/{len(jobs)} finished ({failed} failed), "
                    f"{len(running)} running or queued in Ray, {len(todo)} to submit; "
                    f"{_duration(elapsed)}{eta}"
                )
    finally:
        ray.shutdown()
