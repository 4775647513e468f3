"""Progress of long steps on stderr (never stdout, so ``--json`` output stays one object).

Every step that can take more than a few seconds (a Verilator or g++ build, a simulation, a
Yosys run) runs inside :func:`step`: it says what runs when it starts, repeats the elapsed time
while it runs (a spinner on a terminal, a line every ``every`` seconds otherwise, so CI logs
show it too), and says how long it took when it ends::

    with step("Verilator build of runs/x") as s:
        build()
    print(s.seconds)

:func:`track` is the bar for countable work (rich's bar on a terminal, a line per tenth
otherwise). ``EATT_PROGRESS=0`` silences both.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from rich.console import Console
from rich.progress import track as rich_track

T = TypeVar("T")


def enabled() -> bool:
    return os.environ.get("EATT_PROGRESS", "1") not in ("0", "false", "no", "")


def _tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def say(message: str) -> None:
    """One progress line on stderr."""
    if enabled():
        print(f"eatt: {message}", file=sys.stderr, flush=True)


class Step:
    """What :func:`step` yields: the running step's elapsed time, then its total."""

    def __init__(self, what: str):
        self.what = what
        self.start = time.perf_counter()
        self.seconds: float | None = None

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start if self.seconds is None else self.seconds


@contextmanager
def step(what: str, *, every: float = 15.0) -> Iterator[Step]:
    """Report `what` on stderr while it runs: start, elapsed time, end (or failure)."""
    s = Step(what)
    if not enabled():
        try:
            yield s
        finally:
            s.seconds = time.perf_counter() - s.start
        return
    status = None
    stop = threading.Event()
    ticker = None
    if _tty():
        console = Console(stderr=True)
        status = console.status(f"{what} (0 s)")
        status.start()

        def tick() -> None:
            while not stop.wait(1.0):
                status.update(f"{what} ({s.elapsed:.0f} s)")

    else:
        say(f"{what} ...")

        def tick() -> None:
            while not stop.wait(every):
                say(f"{what}: {s.elapsed:.0f} s so far")

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    ok = False
    try:
        yield s
        ok = True
    finally:
        s.seconds = time.perf_counter() - s.start
        stop.set()
        ticker.join(timeout=2)
        if status is not None:
            status.stop()
        say(f"{what}: {'done in' if ok else 'stopped after'} {s.seconds:.1f} s")


def track(items: Iterable[T], total: int, what: str) -> Iterator[T]:
    """Iterate over items with a progress bar (terminal) or a line per tenth (logs)."""
    if not enabled() or total <= 0:
        yield from items
        return
    if _tty():
        console = Console(stderr=True)
        yield from rich_track(items, total=total, description=what, transient=True, console=console)
        return
    start = time.perf_counter()
    tenth = max(1, total // 10)
    for i, item in enumerate(items, 1):
        yield item
        if i % tenth == 0 or i == total:
            say(f"{what}: {i}/{total} ({time.perf_counter() - start:.0f} s)")
