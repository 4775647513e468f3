"""What ``eatt power --target fpga`` hands a Vivado user: the simulated activity as SAIF and a
Tcl script that turns it into Vivado's own power report (rtl_sim/fpga_power.py).

- :func:`write_saif`: IEEE 1801 SAIF 2.0 text (``SAIFILE``, ``DURATION``, ``TIMESCALE``, one
  ``INSTANCE`` of the top with a ``NET`` entry (T0 T1 TX TC IG) for every bit the VCD dumped).
  T0 / T1 / TX are the time each net spent at 0 / 1 / x-or-z, TC its 0<->1 transitions (those
  of rtl_sim/power.py's parse_vcd: a transition from or to x is not counted), IG 0. The times
  are scaled from the testbench's clock period to the user's, so the rates Vivado derives are
  those of a run at that clock; T0 + T1 + TX == DURATION for every net.
- :func:`vivado_script`: ``vivado -mode batch -source vivado_power.tcl``: reads the RTL sources
  of metadata.json, ``synth_design`` for a part (a variable at the top, default
  :data:`DEFAULT_PART`), the clock at the period, ``read_saif``, ``report_power``.
"""

from __future__ import annotations

import re
from pathlib import Path

from eatt.rtl_sim.gate_activity import VCD_VAR
from eatt.version import __version__

#: the Xilinx part of the Vivado script (a Zynq-7020, as on the PYNQ-Z2 and Zybo Z7-20 boards)
DEFAULT_PART = "xc7z020clg400-1"
_STATE = {"0": 0, "1": 1}  # anything else (x, z) is TX


def vcd_durations(text: str) -> tuple[list[tuple[str, int | None, list[int]]], int, str]:
    """Per dumped net bit of a VCD: (name without an escaping backslash, bus index or None,
    [time at 0, at 1, at x/z]) in the VCD's time unit; the end time; the timescale ("1 ps")."""
    scale = re.search(r"\$timescale\s+(\d+)\s*(\w+)\s+\$end", text)
    timescale = f"{scale[1]} {scale[2]}" if scale else "1 ns"
    decls: dict[str, list[tuple[str, int | None, int]]] = {}
    widths: dict[str, int] = {}
    for m in VCD_VAR.finditer(text):
        width, code, name, msb, lsb = int(m[1]), m[2], m[3], m[4], m[5]
        widths[code] = width
        name = name[1:] if name.startswith("\\") else name
        hi = None if msb is None else int(msb)
        lo = hi if lsb is None else int(lsb)
        decls.setdefault(code, []).append((name, hi, 0 if lo is None else lo))
    value = {code: "x" * w for code, w in widths.items()}
    since = dict.fromkeys(widths, 0)
    spent = {code: [[0, 0, 0] for _ in range(w)] for code, w in widths.items()}
    now = 0

    def settle(code: str) -> None:
        dt = now - since[code]
        if dt:
            for row, c in zip(spent[code], value[code], strict=True):
                row[_STATE.get(c, 2)] += dt
        since[code] = now

    for line in text[text.index("$enddefinitions") :].splitlines()[1:]:
        c = line[:1]
        if c == "#":
            now = int(line[1:])
        elif c and c in "01xzXZ":
            code = line[1:]
            settle(code)
            value[code] = c.lower()
        elif c and c in "bB":
            bits, code = line[1:].split()
            settle(code)
            bits = bits.lower()
            value[code] = bits.rjust(widths[code], "0" if bits[0] == "1" else bits[0])[
                -widths[code] :
            ]
    for code in widths:
        settle(code)
    out = []
    for code, names in decls.items():
        for name, hi, lo in names:
            if hi is None:
                out.append((name, None, spent[code][0]))
                continue
            step = -1 if hi >= lo else 1
            for j, index in enumerate(range(hi, lo + step, step)):
                out.append((name, index, spent[code][j]))
    return out, now, timescale


def saif_name(name: str, index: int | None) -> str:
    """A SAIF identifier: every character but letters, digits and _ escaped with a backslash
    (Yosys' flattened names hold dots and brackets), a bus bit as name[index]."""
    escaped = re.sub(r"([^A-Za-z0-9_])", r"\\\1", name)
    return escaped if index is None else f"{escaped}[{index}]"


def write_saif(
    path: Path, vcd_text: str, top: str, scale: float = 1.0, toggles: dict[str, int] | None = None
) -> int:
    """The VCD's activity as SAIF at ``path`` (times x ``scale``); ``toggles``: parse_vcd's
    transitions by "name" / "name[i]" (the TC entries; missing: 0). Returns the nets written."""
    bits, end, timescale = vcd_durations(vcd_text)
    toggles = toggles or {}
    duration = round(end * scale)
    lines = [
        "(SAIFILE",
        '(SAIFVERSION "2.0")',
        '(DIRECTION "backward")',
        f'(DESIGN "{top}")',
        '(VENDOR "eatt")',
        '(PROGRAM_NAME "eatt power --target fpga")',
        f'(VERSION "{__version__}")',
        "(DIVIDER / )",
        f"(TIMESCALE {timescale})",
        f"(DURATION {duration})",
        f"(INSTANCE {saif_name(top, None)}",
        "  (NET",
    ]
    seen = set()
    for name, index, (_t0, t1, tx) in bits:
        key = name if index is None else f"{name}[{index}]"
        if key in seen:
            continue
        seen.add(key)
        one = round(t1 * scale)
        unknown = round((t1 + tx) * scale) - one
        zero = duration - one - unknown
        tc = toggles.get(key, 0)
        lines.append(
            f"    ({saif_name(name, index)} (T0 {zero}) (T1 {one}) (TX {unknown}) (TC {tc}) (IG 0))"
        )
    lines += ["  )", ")", ")"]
    path.write_text("\n".join(lines) + "\n")
    return len(seen)


_SAIF_TIME = re.compile(r"\((DURATION|T0|T1|TZ|TX|TB) (\d+)\)")


def rescale_saif(text: str, scale: float) -> str:
    """A SAIF's times (DURATION and each net's T0, T1, TZ, TX, TB) x ``scale``, its toggle
    counts as they are: Verilator's trace, taken at the testbench's clock, at the clock the
    Vivado script constrains."""
    if scale == 1:
        return text
    return _SAIF_TIME.sub(lambda m: f"({m[1]} {round(int(m[2]) * scale)})", text)


def vivado_script(meta: dict, clock_ns: float, saif: str, clock: str = "ap_clk") -> str:
    """The Tcl script a Vivado user runs in DIR/power_fpga as is (the module doc)."""
    top = meta["top"]
    sources = " ".join(meta["sources"])
    return f"""\
# vivado_power.tcl: Vivado's power estimate of {top} from the activity eatt simulated
# (written by `eatt power DIR --target fpga`; docs/power.md, "FPGA energy (--target fpga)").
#
#   cd DIR/power_fpga && vivado -mode batch -source vivado_power.tcl
#
# It synthesizes the core's RTL (the sources listed in ../metadata.json) for a Xilinx part out
# of context (no I/O buffers: the core's ports are not the part's pins), constrains the clock,
# reads the switching activity of eatt's simulation ({saif}) and writes power.rpt beside
# this script. The part: any your Vivado has.
set part {DEFAULT_PART}
set top {top}
set clock_port {clock}
set clock_ns {clock_ns:g}
set here [file dirname [file normalize [info script]]]
set rtl [file dirname $here]
# $readmemh files (the folded engine's weights and tables) are read by relative name, as Yosys
# read them: from the RTL folder
cd $rtl
foreach src {{{sources}}} {{
    read_verilog -sv [file join $rtl $src]
}}
synth_design -top $top -part $part -mode out_of_context
create_clock -name $clock_port -period $clock_ns [get_ports $clock_port]
# {saif} holds the simulation's names: the nets of the netlist eatt simulated (Yosys' ECP5
# mapping of this RTL, bit for bit equal to the golden model) under one instance, {top}.
# -strip_path {top} takes that instance away, so the names start at this design's top. The
# ports match Vivado's netlist by name, RTL registers often do; from the matched nets Vivado
# propagates activity to the rest (read_saif reports how many nets matched, report_power's
# confidence level how much of the estimate rests on them). The times are at clock_ns.
read_saif -strip_path $top [file join $here {saif}]
report_power -file [file join $here power.rpt]
"""
