"""Step 2 of ``eatt power`` (rtl_sim/power.py): the switching activity of a synthesized netlist.

The netlist (with its cells' models from the Liberty, and the memory macros' behavioural models
counting their accesses) is simulated by the core's own cocotb stream (tb/test_activity.py,
tb/test_activity_folded.py) on the vectors the caller gives; the outputs are compared with the
expected ones bit for bit. Two simulators:

- Icarus Verilog (4-state: an x reaching an output is a mismatch): a second top-level module
  dumps the top's nets to a VCD, which :func:`parse_vcd` turns into toggles per net. It runs a
  folded engine's netlist at about 200 cycles a second (24k cells), so it suits short runs.
- Verilator (2-state; ``trace="saif"`` builds, rtl_sim/cocotb_run.py): the build's own SAIF
  trace of the top's nets, read by :func:`parse_saif`; the C++ build takes minutes (2.5 for
  24k cells), the run thousands of cycles a second (the cocotb stream's pace), so it measures
  the trained layer's and the paper's sizes. Every net starts at 0 there and its first rise is
  counted, where Icarus starts at x and counts none: the two differ by at most one toggle a net
  (1 % of the default folded engine's toggles over 4 calls, less as runs grow).

:func:`read_counts` reads the macros' reads and writes, which their models append to
memories.txt when the simulation ends (rtl_sim/rtl/folded_macro.sv).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np

from eatt.config import atomic_write_text
from eatt.rtl_sim import liberty as lib_mod
from eatt.rtl_sim.memory_energy import MACRO
from eatt.rtl_sim.rtldir import RTL_DIR
from eatt.rtl_sim.runner import compare_runs, sim_run, write_vectors_job

#: defined in the gate-level simulation's copy of folded_macro.sv: it counts its accesses
COUNT_DEFINE = "EATT_MEMORY_COUNT"
#: where the macros' models write their counts, in the run folder
COUNTS_FILE = "memories.txt"
GATE_SIMULATORS = ("icarus", "verilator")
# "$var wire 8 # x [7:0] $end", "$var wire 1 ! _12_ $end"
VCD_VAR = re.compile(r"\$var\s+\w+\s+(\d+)\s+(\S+)\s+(\S+?)(?:\s*\[(\d+)(?::(\d+))?\])?\s+\$end")


def parse_vcd(text: str) -> tuple[dict[str, int], float]:
    """Toggle counts of a VCD (the dump of the top's nets): ({net: 0<->1 transitions}, duration
    in ns). A bus bit is "name[i]"; a transition from or to x/z is not counted (a flip-flop's
    first value after power-up is not switching)."""
    scale_m = re.search(r"\$timescale\s+(\d+)\s*(\w+)\s+\$end", text)
    units = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0, "ps": 1e-3, "fs": 1e-6}
    scale = float(scale_m[1]) * units[scale_m[2]] if scale_m else 1.0
    names: dict[str, list[tuple[str, int | None, int]]] = {}  # code -> [(name, msb, lsb)]
    widths: dict[str, int] = {}
    for m in VCD_VAR.finditer(text):
        width, code, name, msb, lsb = int(m[1]), m[2], m[3], m[4], m[5]
        widths[code] = width
        if msb is None:  # a scalar net: no index
            names.setdefault(code, []).append((name, None, 0))
        else:
            lo = int(lsb) if lsb is not None else int(msb)
            names.setdefault(code, []).append((name, int(msb), lo))
    body = text[text.index("$enddefinitions") :]
    value: dict[str, str] = {}
    counts: dict[str, list[int]] = {code: [0] * w for code, w in widths.items()}
    last_time = "0"
    for line in body.splitlines()[1:]:
        c = line[:1]
        if c == "0" or c == "1":  # most lines: a scalar net's new value
            code = line[1:]
            if value.get(code, c) != c and value[code] in "01":
                counts[code][0] += 1
            value[code] = c
        elif c and c in "xzXZ":
            value[line[1:]] = "x"
        elif c == "#":
            last_time = line[1:]
        elif c and c in "bB":
            bits, code = line[1:].split()
            width = widths[code]
            new = bits.lower().rjust(width, "0" if bits[0] == "1" else bits[0].lower())
            old = value.get(code)
            value[code] = new
            if old is not None and old != new:
                row = counts[code]
                for k, (a, b) in enumerate(zip(old, new, strict=False)):
                    if a != b and a in "01" and b in "01":
                        row[k] += 1
    nets: dict[str, int] = {}
    for code, decls in names.items():
        got = counts[code]
        for name, hi, lo in decls:
            if hi is None:
                nets[name] = got[0]
                continue
            step = -1 if hi >= lo else 1
            for j, index in enumerate(range(hi, lo + step, step)):
                nets[f"{name}[{index}]"] = got[j]
    return nets, int(last_time) * scale


# "(name\\[3\\] (T0 10) (T1 5) (TZ 0) (TX 0) (TB 0) (TC 2))": a SAIF net (its name escaped)
SAIF_NET = re.compile(
    r"\(\s*((?:\\.|[^\s()\\])+)\s+\(T0 \d+\)\s*\(T1 \d+\)\s*(?:\(T[ZXB] \d+\)\s*)*"
    r"\(TC (\d+)\)"
)
SAIF_UNITS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0, "ps": 1e-3, "fs": 1e-6}


def _saif_block(text: str, instance: str) -> str:
    """The text of ``instance``'s own NET block (its children, if traced, are other instances)."""
    start = re.search(r"\(INSTANCE\s+" + re.escape(instance) + r"\s", text)
    if start is None:
        raise RuntimeError(f"the SAIF trace has no instance {instance}")
    block = text[start.end() :]
    nested = re.search(r"\(INSTANCE\s", block)  # the next instance's nets are not ours
    return block[: nested.start()] if nested else block


def parse_saif(text: str, instance: str) -> tuple[dict[str, int], float]:
    """Toggle counts of the nets of ``instance`` (the netlist's top) in a SAIF file (Verilator's
    trace): ({net: TC}, duration in ns), a bus bit named "name[i]" as :func:`parse_vcd` names
    it. The instance's own NET block only (its children, if traced, are other instances)."""
    m = re.search(r"\(TIMESCALE\s+(\d+)\s*(\w+)\)", text)
    scale = float(m[1]) * SAIF_UNITS[m[2]] if m else 1.0
    dur = re.search(r"\(DURATION\s+(\d+)\)", text)
    block = _saif_block(text, instance)
    nets = {re.sub(r"\\(.)", r"\1", n[1]): int(n[2]) for n in SAIF_NET.finditer(block)}
    return nets, (int(dur[1]) * scale if dur else 0.0)


#: a SAIF net's name and its time at 1
SAIF_HIGH = re.compile(r"\(\s*((?:\\.|[^\s()\\])+)\s+\(T0 \d+\)\s*\(T1 (\d+)\)")


def saif_high(text: str, instance: str) -> dict[str, int]:
    """{net: time at 1 (T1)} of the nets of ``instance`` in a SAIF file, named as
    :func:`parse_saif` names them."""
    block = _saif_block(text, instance)
    return {re.sub(r"\\(.)", r"\1", n[1]): int(n[2]) for n in SAIF_HIGH.finditer(block)}


def read_toggles(path: Path, top: str) -> tuple[dict[str, int], float]:
    """The toggles per net of a netlist simulation's trace: VCD (Icarus) or SAIF (Verilator)."""
    text = path.read_text()
    return parse_saif(text, top) if path.suffix == ".saif" else parse_vcd(text)


def read_counts(path: Path, macros) -> dict[str, list[int]]:
    """{macro: [reads, writes]} from the models' memories.txt ("<instance path> <reads>
    <writes>" a line; the path as the simulator prints %m: Icarus keeps the flattened
    netlist's escaped names, "top.\\u_engine.rom.u_macro "), each line matched to the macro
    whose name ends it."""
    if not macros:
        return {}
    if not path.is_file():
        raise RuntimeError(f"the memory macros' models wrote no counts ({path})")
    got: dict[str, list[int]] = {}
    for line in path.read_text().splitlines():
        where, reads, writes = line.rsplit(maxsplit=2)
        where = "." + re.sub(r"[\\\s]", "", where)
        for name in macros:
            if where.endswith("." + name.lstrip("\\")):
                got[name] = [int(reads), int(writes)]
    missing = [name for name in macros if name not in got]
    if missing:
        raise RuntimeError(f"{path}: no counts for the memory macros {', '.join(missing)}")
    return got


def toggles_by_bit(module: dict, nets: dict[str, int]) -> dict[int, int]:
    """Yosys JSON bit -> toggles, from the VCD's net names (a bus bit is "name[i]"); a bit with
    no entry is left out."""
    out: dict[int, int] = {}
    for name, net in module["netnames"].items():
        for bit, index in lib_mod.net_bits(net):
            if bit in out:
                continue
            key = f"{name}[{index}]"
            if len(net["bits"]) == 1 and key not in nets:
                key = name
            if key in nets:
                out[bit] = nets[key]
    return out


DUMP_MODULE = "eatt_activity_dump"
#: the C++ optimization of a netlist's Verilator build (rtl_sim/cocotb_run.py, CXX_OPTS)
NETLIST_CXX_OPT = "-O1"
_PORTS = r"^module\s+\\?{top}\s*\(([^)]*)\)\s*;"


def top_ports(netlist: Path, top: str) -> list[str]:
    """The port names of ``top`` in a Yosys-written netlist (``module top(a, b, ...);``): the
    only signals its Verilator build makes public (rtl_sim/cocotb_run.py)."""
    m = re.search(_PORTS.format(top=re.escape(top)), netlist.read_text(), re.M)
    if not m:
        raise RuntimeError(f"{netlist}: no module {top}(...) header")
    return [name.strip().lstrip("\\").strip() for name in m[1].split(",") if name.strip()]


def gate_folder(
    work: Path, meta: dict, rtl: Path | None = None, simulator: str = "icarus", trace: bool = True
) -> tuple[Path, dict]:
    """work/gate: the netlist as an RTL folder the runner builds. Icarus: with a second
    top-level module that dumps the top's nets (depth 1: the netlist's nets, not the cells'
    insides) to dump.vcd in the run folder; Verilator: a build that traces them to dump.saif.
    With the RTL folder ``rtl`` (when its sources have folded_macro.sv), the memory macros'
    models counting their accesses into memories.txt: this eatt's rtl_sim/rtl/folded_macro.sv
    (the counting is eatt power's; an RTL folder from before it has none). ``trace=False``:
    no activity dump (a check of the netlist's outputs only: Verilator's build without its
    trace runs many times faster)."""
    if simulator not in GATE_SIMULATORS:
        raise ValueError(f"simulator: {' or '.join(GATE_SIMULATORS)}, got {simulator!r}")
    gate = work / "gate"
    gate.mkdir()
    for name in ("netlist.v", "cells.v"):
        shutil.copyfile(work / name, gate / name)
    models = []
    macro_file = f"{MACRO}.sv"
    if rtl is not None and macro_file in meta["sources"]:  # the macros' models, counting
        text = (RTL_DIR / macro_file).read_text()
        (gate / macro_file).write_text(f"`define {COUNT_DEFINE}\n{text}")
        models.append(macro_file)
    if not trace:
        gmeta = {
            **meta,
            "sources": ["netlist.v", "cells.v", *models],
            "gate_simulator": simulator,
            "public": top_ports(gate / "netlist.v", meta["top"]),
            **({"cxx_opt": NETLIST_CXX_OPT} if simulator == "verilator" else {}),
        }
    elif simulator == "verilator":
        gmeta = {
            **meta,
            "sources": ["netlist.v", "cells.v", *models],
            "trace": "saif",
            "public": top_ports(gate / "netlist.v", meta["top"]),
            "cxx_opt": NETLIST_CXX_OPT,
        }
    else:
        (gate / "dump.v").write_text(
            f'module {DUMP_MODULE};\n  initial begin\n    $dumpfile("dump.vcd");\n'
            f"    $dumpvars(1, {meta['top']});\n  end\nendmodule\n"
        )
        gmeta = {
            **meta,
            "sources": ["netlist.v", "cells.v", *models, "dump.v"],
            "roots": [DUMP_MODULE],
        }
    atomic_write_text(gate / "metadata.json", json.dumps(gmeta, indent=1) + "\n")
    return gate, gmeta


def activity(
    gate: Path, gmeta: dict, x, y, masks, expected, rtl: Path | None = None, macros=()
) -> dict:
    """Simulate the netlist on the vectors (the simulator gate_folder built it for: Icarus
    when gmeta has no "trace"); compare every output with `expected`; the trace of its nets
    (``trace``: dump.vcd or dump.saif, :func:`read_toggles`; None for a folder built without
    one), and the reads and writes of the
    memory macros named in ``macros`` (their ROMs read the RTL folder ``rtl``'s $readmemh
    files)."""
    folded = gmeta["level"] == "folded"  # the AXI4-Stream engine (rtl_sim/folded.py)
    traced = "gate_simulator" not in gmeta
    simulator = gmeta.get("gate_simulator") or ("verilator" if gmeta.get("trace") else "icarus")
    with sim_run(gate, gmeta, simulator=simulator) as sr:
        run = sr.dir
        for name in gmeta.get("memory_files", []) if rtl is not None else ():
            shutil.copyfile(rtl / name, run / name)
        extra = {"parameters": gmeta["parameters"], "macros": list(macros)} if folded else {}
        write_vectors_job(run, 0, gmeta, x, y, masks, **extra)
        test = "test_activity_folded" if folded else "test_activity"
        tb = sr.test(gmeta["top"], test, 0, f"netlist, {len(x)} vectors", vcd=traced)
        got = np.load(run / "got.npy").reshape(expected.shape)
        compared, wrong, first = compare_runs({"netlist": (expected, got)}, len(x))
        trace = run / ("dump.saif" if simulator == "verilator" else "dump.vcd")
        if not traced:
            trace = None
        elif not trace.is_file():
            raise RuntimeError(f"the netlist simulation wrote no {trace.name}; see {run}/sim.log")
        return {
            "mismatches": int(wrong.sum()),
            "first_mismatch": first,
            "got": got,
            "cycles": tb.get("cycles"),
            "trace": trace,
            "macro_counts": read_counts(run / COUNTS_FILE, macros),
            **sr.fields(),
        }
