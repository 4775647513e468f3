"""OpenSTA on a Liberty netlist, step 4 of ``eatt power`` (rtl_sim/power.py): the worst
setup slack at the clock, the clock the netlist closes (ideal clock, no wire load), the worst
path's ends, and OpenSTA's own vectorless power.

The OpenSTA is Debian's 2019 build (``make install`` unpacks it into .venv/debian); it reads no
SAIF or VCD, so its power is a cross-check of scale only (docs/power.md).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from eatt.rtl_sim.resources import run_logged
from eatt.rtl_sim.tools import ToolMissing, debian_root


def find_sta() -> Path:
    """OpenSTA: .venv/debian's (make install), else ``sta`` on PATH."""
    local = debian_root() / "usr/bin/sta"
    found = local if local.is_file() else shutil.which("sta")
    if not found:
        raise ToolMissing(
            "OpenSTA (sta) is missing: Debian package opensta (make install fetches it "
            "into .venv/debian)"
        )
    return Path(found)


# -- timing and vectorless power ------------------------------------------------------------------
def sta_script(top: str, clock_ns: float, input_activity: float, clock: str = "ap_clk") -> str:
    """Timing at the clock (port `clock`), then OpenSTA's own vectorless power: the inputs'
    mean measured activity propagated through the cells' functions (this OpenSTA takes no
    per-pin activity: set_power_activity -pins calls a get_pins_error it lacks, and
    sta::set_power_pin_activity reaches only flip-flop outputs, after a first report_power;
    docs/power.md)."""
    return (
        "read_liberty cells.lib\nread_verilog sta_netlist.v\n"
        f"link_design {top}\n"
        f"create_clock -name {clock} -period {clock_ns:g} [get_ports {clock}]\n"
        f"set_input_delay 0 -clock {clock} [delete_from_list [all_inputs] [get_ports {clock}]]\n"
        f"set_output_delay 0 -clock {clock} [all_outputs]\n"
        # the worst path and its slack (report_worst_slack of this build crashed, signal 11, on
        # the default folded E-ATT netlist; report_checks gives the same number)
        "report_checks -path_delay max -digits 3 > timing.txt\n"
        f"set_power_activity -input -activity {input_activity:.6g} -duty 0.5\n"
        "report_power -digits 6 > power.txt\n"
        "exit\n"
    )


def parse_slack(text: str) -> float | None:
    """The worst slack (ns) in a report_checks output: the least of its paths' "X slack" lines
    (one per path group), or None where it has none."""
    found = re.findall(r"^\s*(-?\d+(?:\.\d+)?)\s+slack\b", text, re.M)
    return min(map(float, found)) if found else None


def parse_worst_path(text: str) -> dict:
    """The worst path of a report_checks output: its startpoint and endpoint (instance or port
    names, Yosys' escaped names as OpenSTA prints them), {} where it has none."""
    ends = {}
    for key in ("startpoint", "endpoint"):
        m = re.search(rf"^\s*{key.capitalize()}:\s*(\S+)", text, re.M)
        if m:
            ends[key] = m.group(1)
    return ends


def parse_sta_power(text: str) -> dict:
    """OpenSTA's report_power Total line: {internal, switching, leakage, total} in W."""
    m = re.search(r"^Total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", text, re.M)
    if not m:
        return {}
    return dict(
        zip(("internal", "switching", "leakage", "total"), map(float, m.groups()), strict=True)
    )


def run_sta(
    work: Path,
    top: str,
    clock_ns: float,
    input_activity: float,
    timeout: float | None,
    clock: str = "ap_clk",
) -> dict:
    """OpenSTA in work/: worst slack at the clock, the clock the netlist closes, vectorless
    power."""
    sta = find_sta()
    (work / "sta.tcl").write_text(sta_script(top, clock_ns, input_activity, clock))
    code, seconds, _ = run_logged(
        [str(sta), "-no_splash", "-exit", "sta.tcl"], work, work / "sta.log", "OpenSTA", timeout
    )
    timing = read_text(work / "timing.txt")
    if code != 0:
        raise RuntimeError(f"OpenSTA failed (exit {code}); see {work / 'sta.log'}")
    wns = parse_slack(timing)
    if wns is None:
        why = "it found no timing path" if "No paths found" in timing else "no slack in its report"
        raise RuntimeError(f"OpenSTA: {why} at clock {clock}; see {work / 'timing.txt'}")
    return {
        "worst_slack_ns": wns,
        "fmax_mhz": round(1000.0 / (clock_ns - wns), 2),  # the period the worst path needs
        "worst_path": parse_worst_path(timing),
        "power_w": parse_sta_power(read_text(work / "power.txt")),
        "seconds": seconds,
    }


def read_text(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""
