"""The C simulation's library (hls4ml's ``compile()``: g++ at -O3, build_lib.sh) through a cache
shared by every build of the same C++: a re-run of ``eatt hls`` / ``eatt flow`` on the same core,
or the peer a flow built before, links the library again instead of compiling it.

    compile_csim(hls_model)
        the project's library built or taken from the cache and loaded, as hls_model.compile()
        leaves it after write(); True when it came from the cache
    library_key(project_dir, stamp)
        the cache key: every file of firmware/ (the layer's C++, its weights headers, the
        ap_types and nnet_utils copies), the bridge and build_lib.sh (the project's random
        stamp left out), g++'s version

The cache is ``csim/<key>`` in eatt's cache folder (eatt.rtl_sim.tools.cache_dir, beside the
simulator builds): ``lib.so`` and a ``.complete`` marker, the least recently used beyond
:data:`CACHE_KEEP` removed, a lock per key while one is made or used. The weights are compiled
in (eatt writes no weights text files, ``write_weights_txt`` off), so the library does not depend
on the folder it was built in. A cache that cannot be written (read-only, full) only costs the
compile: the library is then built in the project as without it. ``EATT_CSIM_CACHE=0`` turns the
cache off.

Written here, not taken from hls4ml: hls4ml compiles every project afresh (its stamp makes each
library name unique so one process can load several); ccache would miss on the absolute
WEIGHTS_DIR build_lib.sh passes to g++.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from contextlib import ExitStack
from functools import lru_cache
from pathlib import Path

from eatt.rtl_sim.procs import file_lock
from eatt.rtl_sim.sim_build import _prune
from eatt.rtl_sim.tools import cache_dir

#: libraries kept in the cache (least recently used go first)
CACHE_KEEP = 400
#: the marker of a finished entry
STAMP = ".complete"
#: bump when what an entry holds, or how the key is made, changes
CACHE_FORMAT = 1
#: the files of a written project that go into the library (firmware/ whole, minus libraries)
KEY_FILES = ("build_lib.sh", "{project}_bridge.cpp")


def compiler_version() -> str:
    """The g++ on PATH and the first line of its ``--version`` (part of the key)."""
    compiler = shutil.which("g++") or "g++"
    return f"{compiler} {_version(compiler)}"


@lru_cache(maxsize=8)
def _version(compiler: str) -> str:
    try:
        done = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (done.stdout.splitlines() or [""])[0]


def library_key(project_dir: str | os.PathLike, project: str, stamp: str) -> str:
    """The cache key of a written project's C simulation library."""
    root = Path(project_dir)
    h = hashlib.sha256(f"eatt-csim {CACHE_FORMAT}\0{compiler_version()}\0{project}\0".encode())
    files = [root / name.format(project=project) for name in KEY_FILES]
    files += sorted(p for p in (root / "firmware").rglob("*") if p.is_file() and p.suffix != ".so")
    for path in files:
        data = path.read_bytes()
        if stamp:
            data = data.replace(stamp.encode(), b"")
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(data).digest())
    return h.hexdigest()[:20]


def _library(hls_model) -> tuple[Path, str, str]:
    """(the library's path as hls4ml names it, the project name, its stamp)."""
    config = hls_model.config
    project, stamp = config.get_project_name(), str(config.get_config_value("Stamp"))
    return Path(config.get_output_dir()) / "firmware" / f"{project}-{stamp}.so", project, stamp


def compile_csim(hls_model) -> bool:
    """Build (g++, hls4ml's build_lib.sh) or take from the cache the C simulation library of a
    written project and load it into ``hls_model`` (``predict`` works after); True when the
    library came from the cache. A failed g++ build raises hls4ml's bare Exception, as
    ``compile()`` does."""
    off = os.environ.get("EATT_CSIM_CACHE", "1") == "0"
    if off or hls_model._top_function_lib is not None:  # hls4ml's own path
        hls_model._compile()
        return False
    lib, project, stamp = _library(hls_model)
    key = library_key(lib.parent.parent, project, stamp)
    root = cache_dir() / "csim"
    with ExitStack() as held:
        try:
            root.mkdir(parents=True, exist_ok=True)
            held.enter_context(file_lock(root / f"{key}.lock", "an eatt build of the same C++"))
        except OSError:  # no cache here: compile in the project as hls4ml does
            hls_model._compile()
            return False
        entry = root / key
        hit = (entry / STAMP).is_file() and (entry / "lib.so").is_file()
        if hit:
            shutil.copyfile(entry / "lib.so", lib)
            os.utime(entry / STAMP)  # most recently used
        else:
            hls_model.config.backend.compile(hls_model)
            _store(lib, entry)
            _prune(root, CACHE_KEEP, key)
    hls_model._top_function_lib = ctypes.cdll.LoadLibrary(str(lib))
    return hit


def _store(lib: Path, entry: Path) -> None:
    """Copy a freshly built library into the cache entry (beside, then renamed); a cache that
    cannot be written is left as it was."""
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
    try:
        shutil.rmtree(entry, ignore_errors=True)
        tmp.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lib, tmp / "lib.so")
        (tmp / STAMP).write_text("")
        os.replace(tmp, entry)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
