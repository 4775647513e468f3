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


def is_ours(path: Path, legacy: Legacy = None) -> bool:
    """True when `path` is a folder eatt made: it has the marker (or passes `legacy`, the test
    for folders written before the marker existed)."""
    if (path / MARKER).is_file():
        return True
    return bool(legacy is not None and legacy(path))


def check_output_dir(path: str | os.PathLike, what: str, legacy: Legacy = None) -> Path:
    """The absolute output folder, or OutputError when eatt must not write there."""
    raw = Path(path)
    out = Path(os.path.abspath(raw))
    for parent in out.parents:
        if parent.exists() and not parent.is_dir():
            raise OutputError(f"{raw}: {parent} is a file, not a folder")
        if parent.is_dir():
            break
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise OutputError(f"{raw}: exists and is not a folder; give a folder for the {what}")
        cwd = Path.cwd().resolve()
        real = out.resolve()
        if real == cwd or real in cwd.parents:
            raise OutputError(f"{raw}: is the current folder (or holds it); give a new folder")
        if any(out.iterdir()) and not is_ours(out, legacy):
            raise OutputError(
                f"{raw}: folder is not empty and was not made by eatt ({MARKER} missing); "
                "refusing to replace it: give a new or empty folder"
            )
    return out


@contextmanager
def replaced_dir(path: str | os.PathLike, what: str, legacy: Legacy = None) -> Iterator[Path]:
    """Yield an empty temporary folder beside `path`; when the block ends without an error it
    replaces `path` (an earlier folder of ours there is removed). On any error or interrupt the
    temporary folder is removed and `path` is left as it was."""
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


def _swap_in(tmp: Path, out: Path) -> None:
    """Move tmp onto out; the old out goes aside first and is restored if the move fails."""
    if not out.exists():
        os.replace(tmp, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    try:
        os.replace(out, old / "d")
        try:
            os.replace(tmp, out)
        except BaseException:
            os.replace(old / "d", out)
            raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def claim_dir(path: str | os.PathLike, what: str, legacy: Legacy = None) -> Path:
    """Create `path` (or take back a folder of ours) for writing step by step; marks it."""
    out = check_output_dir(path, what, legacy)
    out.mkdir(parents=True, exist_ok=True)
    marker = out / MARKER
    if not marker.is_file():
        marker.write_text(_marker_text(what))
    return out


def check_output_file(path: str | os.PathLike, flag: str = "-o") -> Path:
    """An output file path: refuse a folder, or a path under a file, before any work."""
    raw = Path(path)
    out = Path(os.path.abspath(raw))
    if out.is_dir():
        raise OutputError(f"{flag} {raw}: is a folder; give a file name")
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
