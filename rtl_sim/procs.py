"""Child processes that end with their caller, and folder locks (the RTL simulation and Yosys).

- :func:`run_group` runs a command in a session (process group) of its own and waits for it.
  On any exception while it waits (Ctrl-C's KeyboardInterrupt, or SIGTERM under
  :func:`sigterm_as_interrupt`) the whole group ends (SIGTERM, then SIGKILL after a grace
  period), so no ``make``, ``g++``/``cc1plus`` or simulator keeps running or writing files.
  A group of its own also means a Ctrl-C on the terminal reaches only Python, which then ends
  the group: the children never see half an interrupt.
- :func:`sigterm_as_interrupt`: while it is active (main thread only), SIGTERM raises
  KeyboardInterrupt, so the cleanup above runs for ``kill PID`` too (by default SIGTERM ends
  Python at once and leaves the children behind). The CLI has its own handler (exit 143).
- :func:`file_lock`: an exclusive ``fcntl.flock`` lock on a file; waits for another holder
  with a progress line on stderr (``eatt: waiting for ...``), up to `timeout` seconds
  (None: as long as it takes), then :class:`LockTimeout`. The kernel releases a lock when its
  process ends, however it ends, so no lock outlives its holder.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

#: seconds a group gets to end after SIGTERM before SIGKILL
GRACE_SECONDS = 1.0


class LockTimeout(RuntimeError):
    """Another process held a lock for longer than the caller would wait (one line)."""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a reused id of someone else's group: not ours any more
        return False
    return True


def kill_group(proc: subprocess.Popen, grace: float = GRACE_SECONDS) -> None:
    """End proc's process group (proc was started with start_new_session=True): SIGTERM, up
    to `grace` seconds for the leader, SIGKILL to whatever is left, then wait until the group
    is gone (up to 5 s). A second Ctrl-C meanwhile is ignored, so the cleanup completes."""
    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        pgid = proc.pid
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                break
            if sig == signal.SIGTERM and proc.returncode is None:
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    pass
        if proc.returncode is None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 5
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.02)  # grandchildren are reaped by init: wait until they are gone
    finally:
        if main:
            signal.signal(signal.SIGINT, old)


def run_group(
    cmd: Sequence[str],
    *,
    cwd: str | os.PathLike | None = None,
    env: dict[str, str] | None = None,
    stdout=None,
    stderr=None,
) -> int:
    """Run cmd in a session of its own, wait, return its exit code; on an interrupt or any
    other exception while waiting, end its whole process group first."""
    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
    )
    try:
        return proc.wait()
    except BaseException:
        kill_group(proc)
        raise


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt where it would otherwise end Python
    at once (the default handler, main thread only); an ignored SIGTERM or a caller's own
    handler (the CLI's, which exits 143) stays as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.getsignal(signal.SIGTERM)
    if old is not signal.SIG_DFL:  # ignored, or a caller's handler (the CLI's: exit 143)
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _open_locked(path: Path, block: bool) -> int | None:
    """Open and flock `path` (created if missing); None when block is False and it is held.
    Retries when the file was removed or replaced while we waited (a pruned cache entry)."""
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # locked a file that is no longer at `path`: lock the new one


@contextmanager
def file_lock(path: str | os.PathLike, waiting_for: str, timeout: float | None = None):
    """Hold an exclusive lock on `path` for the block. If another process holds it, say
    ``waiting for <waiting_for>`` on stderr and wait (polling) up to `timeout` seconds."""
    from eatt.progress import step

    path = Path(path)
    fd = _open_locked(path, block=False)
    if fd is None:
        if timeout is not None and timeout <= 0:
            raise LockTimeout(f"busy: {waiting_for} holds {path}")
        deadline = None if timeout is None else time.monotonic() + timeout
        with step(f"waiting for {waiting_for}"):
            while fd is None:
                if deadline is not None and time.monotonic() >= deadline:
                    raise LockTimeout(f"busy: {waiting_for} still holds {path} after {timeout:g} s")
                time.sleep(0.2)
                fd = _open_locked(path, block=False)
    try:
        yield path
    finally:
        os.close(fd)


def try_lock(path: str | os.PathLike) -> int | None:
    """The fd of an exclusive lock on `path` if nobody holds it now, else None (no wait)."""
    return _open_locked(Path(path), block=False)
