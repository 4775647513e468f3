"""Output folders: eatt writes only into folders it made, and never leaves half of one behind.

Every folder a command writes (an RTL folder, an hls4ml project, a flow, a training run, an
experiment) carries a marker file, :data:`MARKER`. A command refuses, before any work, an
output path that is a file, lies under a file, is the current folder (or holds it), or is a
folder that is not empty and has no marker: a user's notes, a source tree or another tool's
project are never deleted. Refusals are :class:`OutputError` (a ValueError, one line naming the
path; the CLI's exit code 2).

Two ways to write:

- :func:`replaced_dir` for folders written whole (RTL, hls4ml projects): the content goes to a
  temporary folder beside the target, which replaces the target only when complete. A failure
  or an interrupt leaves the old folder as it was and nothing else behind.
- :func:`claim_dir` for folders filled step by step (flow, training, experiments): creates the
  folder (or takes back one of ours) and marks it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

#: the marker file in every folder eatt writes
MARKER = ".eatt-output"

Legacy = Callable[[Path], bool] | None


class OutputError(ValueError):
    """An output path eatt will not write to; the message is one line naming it."""


def _marker_text(what: str) -> str:
    return json.dumps({"made_by": "eatt", "what": what}) + "\n"


def marker_what(path: Path) -> str | None:
    """What eatt wrote into `path` (the marker's "what"); None without a marker."""
    marker = path / MARKER
    if not marker.is_file():
        return None
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return ""
    return str(data.get("what", "")) if isinstance(data, dict) else ""


def is_ours(path: Path, what: str, legacy: Legacy = None) -> bool:
    """True when `path` is a `what` folder eatt made: its marker says so (or, without a marker,
    it passes `legacy`, the test for folders written before the marker existed)."""
    made = marker_what(path)
    if made is not None:
        return made == what
    return bool(legacy is not None and legacy(path))


def check_output_dir(path: str | os.PathLike, what: str, legacy: Legacy = None) -> Path:
    """The real (absolute, symlinks resolved) output folder, or OutputError when eatt must not
    write a `what` there: a file, a path under a file, the current folder or one holding it,
    an eatt folder written by another command, or a non-empty folder eatt did not make."""
    raw = Path(path)
    if str(path) == "":
        raise OutputError("-o: an empty path; give a folder")
    out = Path(os.path.realpath(raw))
    for parent in out.parents:
        if parent.exists() and not parent.is_dir():
            raise OutputError(f"{raw}: {parent} is a file, not a folder")
        if parent.is_dir():
            break
    if out.exists():
        if not out.is_dir():
            raise OutputError(f"{raw}: exists and is not a folder; give a folder for the {what}")
        cwd = Path.cwd().resolve()
        if out == cwd or out in cwd.parents:
            raise OutputError(f"{raw}: is the current folder (or holds it); give a new folder")
        made = marker_what(out)
        if made is not None and made != what:
            raise OutputError(
                f"{raw}: holds an eatt {made or 'output'}, not a {what}; give another folder"
            )
        if made is None and any(out.iterdir()) and not (legacy is not None and legacy(out)):
            raise OutputError(
                f"{raw}: folder is not empty and was not made by eatt ({MARKER} missing); "
                "refusing to write into it: give a new or empty folder"
            )
    return out


@contextmanager
def replaced_dir(path: str | os.PathLike, what: str, legacy: Legacy = None) -> Iterator[Path]:
    """Yield an empty temporary folder beside `path`; when the block ends without an error it
    replaces `path` (an earlier `what` folder of ours there is removed). On any error or
    interrupt the temporary folder is removed and `path` is left as it was."""
    out = check_output_dir(path, what, legacy)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        tmp.chmod(0o777 & ~_umask())  # mkdtemp makes 0700; a folder gets the usual mode
        (tmp / MARKER).write_text(_marker_text(what))
        yield tmp
        _swap_in(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


#: signals held back while a folder is swapped, so an interrupt lands before or after it
_HELD = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _swap_in(tmp: Path, out: Path) -> None:
    """Move tmp onto out; the old out goes aside first and comes back if the move fails. Ctrl-C,
    SIGTERM and SIGHUP wait until the swap is over (they are delivered right after it)."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        if not out.exists():
            os.replace(tmp, out)
            return
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.replace(out, old / "d")
        try:
            os.replace(tmp, out)
        except BaseException:
            try:
                os.replace(old / "d", out)
            except OSError as err:
                raise OSError(
                    err.errno, f"could not put the old folder back; it is kept at {old / 'd'}"
                ) from None
            old.rmdir()
            raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def mark(path: Path, what: str) -> None:
    """Write the marker of a `what` folder eatt made into `path`."""
    (Path(path) / MARKER).write_text(_marker_text(what))


def check_result_dir(parent: Path, name: str, what: str, legacy: Legacy = None) -> Path:
    """``parent/name``, a folder a command writes inside a folder of eatt's (DIR/power,
    DIR/pnr): OutputError before any work where it, or ``name.failed``, is a file or a folder
    that ``what`` did not write."""
    final = Path(parent) / name
    for path in (final, final.with_name(f"{name}.failed")):
        if path.exists() and not (path.is_dir() and is_ours(path, what, legacy)):
            raise OutputError(f"{path}: exists and was not written by {what}; move it away")
    return final


@contextmanager
def result_dir(parent: Path, name: str, what: str, legacy: Legacy = None) -> Iterator[Path]:
    """Yield an empty, marked temporary folder inside ``parent`` for a run that writes
    ``parent/name`` (checked first: check_result_dir).

    - The run ends well: the folder replaces ``parent/name`` whole; an earlier failed run's
      ``name.failed`` goes.
    - A tool fails (RuntimeError, ToolMissing among them): the folder, with its logs, becomes
      ``parent/name.failed``, the message names the logs there, and ``parent/name`` (the last
      good result) stays as it was.
    - Anything else (bad input, an interrupt): the folder is removed, nothing else changes.
    """
    final = check_result_dir(parent, name, what, legacy)
    failed = final.with_name(f"{name}.failed")
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
    try:
        tmp.chmod(0o777 & ~_umask())  # mkdtemp makes 0700; a folder gets the usual mode
        (tmp / MARKER).write_text(_marker_text(what))
        yield tmp
    except RuntimeError as err:
        _swap_in(tmp, failed)
        err.args = tuple(a.replace(str(tmp), str(failed)) if isinstance(a, str) else a
                         for a in err.args)  # fmt: skip
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _swap_in(tmp, final)
    if failed.exists():
        shutil.rmtree(failed, ignore_errors=True)


def claim_dir(path: str | os.PathLike, what: str, legacy: Legacy = None) -> Path:
    """Create `path` (or take back a `what` folder of ours, or an empty one) for writing step
    by step; marks it."""
    out = check_output_dir(path, what, legacy)
    out.mkdir(parents=True, exist_ok=True)
    marker = out / MARKER
    if not marker.is_file():
        marker.write_text(_marker_text(what))
    return out


def check_output_file(
    path: str | os.PathLike, flag: str = "-o", ours: Callable[[Path], object] | None = None
) -> Path:
    """An output file path: refuse a folder, or a path under a file, before any work; with
    ``ours`` (a reader that raises on anything eatt did not write, e.g. load_core), an existing
    file it cannot read is refused too (eatt replaces only its own files)."""
    raw = Path(path)
    out = Path(os.path.abspath(raw))
    if out.is_dir():
        raise OutputError(f"{flag} {raw}: is a folder; give a file name")
    if ours is not None and out.exists():
        try:
            ours(out)
        except Exception:  # noqa: BLE001 - whatever it is, eatt did not write it
            raise OutputError(
                f"{flag} {raw}: exists and is not a file eatt wrote; not replaced (remove it "
                "or give another name)"
            ) from None
    for parent in out.parents:
        if parent.exists() and not parent.is_dir():
            raise OutputError(f"{flag} {raw}: {parent} is a file, not a folder")
        if parent.is_dir():
            break
    return out


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
