"""A cache of Yosys runs: the same script over the same files with the same Yosys writes the
same files, so a second ``eatt power``, ``eatt power --target fpga`` or ``eatt pnr`` of an
unchanged RTL folder (other vectors, another simulator, ``--json`` after a text run, another
clock) copies its netlist instead of synthesizing again.

Used where Yosys writes into a fresh work folder (a result folder of eatt.outdir.result_dir).
The key is a hash of the Yosys command's name and version, the script (the work folder's path
in it replaced by a placeholder, so the folder's random name does not matter), the RTL sources
the script reads (names and contents) and every file already in the work folder when Yosys
starts, hidden ones aside (the Liberty, ABC's script, a clock gate's cells). The entry holds
every file the run added to the work folder, its log included, and is written only when Yosys
exits 0 with the files the caller expects. Entries live in ``cache_dir()/yosys/<key>/``
(``rm -rf ~/.cache/eatt/yosys`` cleans them; a user's ``$EATT_CACHE`` moves them), each
written into a temporary folder and renamed, so a reader sees a whole entry or none; the least
recently used beyond :data:`KEEP` are removed. ``EATT_YOSYS_CACHE=0`` turns the cache off.
A cache that cannot be read or written is no error: Yosys runs.

Why our own: Yosys has no result cache, and the simulation builds' cache (rtl_sim/sim_build.py)
keys compiled models, not netlists; this one is the same idea, small.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from eatt.progress import say
from eatt.rtl_sim.resources import run_yosys, tool_name
from eatt.rtl_sim.tools import cache_dir

#: entries kept (the least recently used beyond are removed)
KEEP = 160
#: bumped when an entry's layout changes
FORMAT = 1
STAMP = ".complete"
PLACEHOLDER = "@WORK@"


def enabled() -> bool:
    return os.environ.get("EATT_YOSYS_CACHE", "1") != "0"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cache_key(yosys: list[str], script: str, cwd: Path, work: Path, sources: list[str]) -> str:
    """The run's key: Yosys, the script, the sources (relative to cwd), the work folder's files."""
    rel = work.relative_to(cwd).as_posix()
    h = hashlib.sha256()
    for part in (f"eatt-yosys {FORMAT}", tool_name(yosys), script.replace(rel, PLACEHOLDER)):
        h.update(part.encode() + b"\0")
    for src in sources:
        name = src.replace(rel, PLACEHOLDER)
        h.update(f"{name}\0{_digest(cwd / src)}\0".encode())
    for path in sorted(work.iterdir()):
        if path.is_file() and not path.name.startswith("."):  # not the folder's marker
            h.update(f"{path.name}\0{_digest(path)}\0".encode())
    return h.hexdigest()[:24]


def _fetch(entry: Path, work: Path) -> dict | None:
    """Copy a finished entry's files into work; its record, or None (no entry, or unreadable)."""
    stamp = entry / STAMP
    try:
        info = json.loads(stamp.read_text())
        for name in info["files"]:
            shutil.copyfile(entry / name, work / name)
        os.utime(stamp)  # recently used: pruned last
        return info
    except (OSError, ValueError, KeyError):
        return None


def _store(root: Path, key: str, work: Path, files: list[str], info: dict) -> None:
    """Write the entry (a temporary folder renamed into place), then prune; errors ignored."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
        for name in files:
            shutil.copyfile(work / name, tmp / name)
        (tmp / STAMP).write_text(json.dumps({**info, "files": files}, indent=1) + "\n")
        try:
            tmp.rename(root / key)
        except OSError:  # another run stored it first
            shutil.rmtree(tmp, ignore_errors=True)
        entries = [p for p in root.iterdir() if (p / STAMP).is_file()]
        entries.sort(key=lambda p: (p / STAMP).stat().st_mtime, reverse=True)
        for old in entries[KEEP:]:
            shutil.rmtree(old, ignore_errors=True)
    except OSError:
        pass


def run_cached(
    yosys: list[str],
    script: str,
    cwd: Path,
    work: Path,
    log: Path,
    what: str,
    timeout: float | None,
    sources: list[str],
    expect: tuple[str, ...],
    shown: Path | None = None,
) -> tuple[int, float, int, bool]:
    """:func:`run_yosys` of script in cwd writing into work (a folder inside cwd), or the files
    of an earlier identical run: (exit code, seconds, peak MiB, from the cache). ``sources``:
    the files the script reads, relative to cwd; ``expect``: the files (in work) a good run
    writes, all of them needed for an entry."""
    if not enabled():
        return (*run_yosys(yosys, script, cwd, log, what, timeout, shown), False)
    root = cache_dir() / "yosys"
    try:
        key = cache_key(yosys, script, cwd, work, sources)
    except OSError:  # a source that cannot be read: Yosys says so
        return (*run_yosys(yosys, script, cwd, log, what, timeout, shown), False)
    info = _fetch(root / key, work)
    if info is not None:
        say(f"{what}: cached ({root / key})")
        return 0, float(info["seconds"]), int(info["peak_mb"]), True
    before = {p.name for p in work.iterdir()}
    code, seconds, peak_mb = run_yosys(yosys, script, cwd, log, what, timeout, shown)
    files = sorted(
        p.name for p in work.iterdir()
        if p.is_file() and p.name not in before and not p.name.startswith(".")
    )  # fmt: skip
    if code == 0 and all(name in files for name in expect):
        record = {"seconds": seconds, "peak_mb": peak_mb, "tool": tool_name(yosys)}
        _store(root, key, work, files, record | {"built_from": str(cwd)})
    return code, seconds, peak_mb, False
