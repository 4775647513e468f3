"""Step 2 of ``eatt power`` (rtl_sim/power.py): the switching activity of a synthesized netlist.

The netlist (with its cells' models from the Liberty, and the memory macros' behavioural models
counting their accesses) is simulated in Icarus Verilog by the core's own cocotb stream
(tb/test_activity.py, tb/test_activity_folded.py) on the vectors the caller gives, with a second
top-level module dumping the top's nets to a VCD; the outputs are compared with the expected
ones bit for bit, and :func:`parse_vcd` turns the VCD into toggles per net.
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
from eatt.rtl_sim.runner import compare_runs, sim_run, write_vectors_job

#: defined in the gate-level simulation's copy of folded_macro.sv: it counts its accesses
COUNT_DEFINE = "EATT_MEMORY_COUNT"
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


def gate_folder(work: Path, meta: dict, rtl: Path | None = None) -> tuple[Path, dict]:
    """work/gate: the netlist as an RTL folder the runner builds for Icarus, with a second
    top-level module that dumps the top's nets (depth 1: the netlist's nets, not the cells'
    insides) to dump.vcd in the run folder; with the RTL folder ``rtl``, the memory macros'
    models (its folded_macro.sv, counting their accesses into memories.txt)."""
    gate = work / "gate"
    gate.mkdir()
    for name in ("netlist.v", "cells.v"):
        shutil.copyfile(work / name, gate / name)
    models = []
    macro_file = f"{MACRO}.sv"
    if rtl is not None and macro_file in meta["sources"]:  # the macros' models, counting
        text = (rtl / macro_file).read_text()
        (gate / macro_file).write_text(f"`define {COUNT_DEFINE}\n{text}")
        models.append(macro_file)
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
    """Simulate the netlist on the vectors (Icarus, 4-state: an x reaching an output is a
    mismatch); compare every output with `expected`; the VCD of its nets, and the reads and
    writes of the memory macros named in ``macros`` (their ROMs read the RTL folder ``rtl``'s
    $readmemh files)."""
    folded = gmeta["level"] == "folded"  # the AXI4-Stream engine (rtl_sim/folded.py)
    with sim_run(gate, gmeta, simulator="icarus") as sr:
        run = sr.dir
        for name in gmeta.get("memory_files", []) if rtl is not None else ():
            shutil.copyfile(rtl / name, run / name)
        extra = {"parameters": gmeta["parameters"], "macros": list(macros)} if folded else {}
        write_vectors_job(run, 0, gmeta, x, y, masks, **extra)
        test = "test_activity_folded" if folded else "test_activity"
        tb = sr.test(gmeta["top"], test, 0, f"netlist, {len(x)} vectors", vcd=True)
        got = np.load(run / "got.npy").reshape(expected.shape)
        compared, wrong, first = compare_runs({"netlist": (expected, got)}, len(x))
        vcd = run / "dump.vcd"
        if not vcd.is_file():
            raise RuntimeError(f"the netlist simulation wrote no VCD; see {run}/sim.log")
        return {
            "mismatches": int(wrong.sum()),
            "first_mismatch": first,
            "cycles": tb.get("cycles"),
            "vcd": vcd,
            "macro_counts": tb.get("macros", {}),
            **sr.fields(),
        }
