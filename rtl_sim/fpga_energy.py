"""The primitive table and the proxy energy of ``eatt power --target fpga``
(rtl_sim/fpga_power.py): which class each ECP5 cell is, the transitions of its nets per call,
and those transitions x a coefficients file's per-transition energies (default
eatt/configs/fpga_energy.yaml: an academic 45 nm FPGA's, VTR's; every default cites its
source there). A proxy: it ranks designs, it is not any real part's energy."""

from __future__ import annotations

import math
import os
from pathlib import Path

import yaml

from eatt.config import CONFIGS_DIR

#: the primitive classes, in the table's order, and the ECP5 cell types of each ("other": the
#: rest: PFUMX, L6MUX21, TRELLIS_DPR16X4, ...)
CLASSES = ("LUT", "carry", "FF", "DSP", "BRAM", "other")
CLASS_OF = {
    "LUT4": "LUT",
    "CCU2C": "carry",
    "TRELLIS_FF": "FF",
    "MULT18X18D": "DSP",
    "ALU54B": "DSP",
    "DP16KD": "BRAM",
    "PDPW16KD": "BRAM",
}
#: the clock pins of the ECP5 primitives (each cell's clock nets: the "clock" basis)
CLOCK_PINS = frozenset({"CLK", "CLKA", "CLKB", "CLK0", "CLK1", "CLK2", "CLK3", "WCK"})
DEFAULT_COEFFICIENTS = CONFIGS_DIR / "fpga_energy.yaml"
BASES = ("output", "input", "clock", "enabled_clock")
#: a block RAM's ports: (clock pin, clock-enable pin); its port reads or writes only at a clock
#: edge with the enable high (the "enabled_clock" basis)
BRAM_PORTS = (("CLKA", "CEA"), ("CLKB", "CEB"))


# -- the primitive table -----------------------------------------------------------------------
def _high(bits: list, high: dict[int, float]) -> float:
    """The fraction of the run an enable pin's net was 1 (a constant: 0 or 1; a net with no
    trace: 1, the most it can be)."""
    bit = bits[0] if bits else "0"
    return high.get(bit, 1.0) if isinstance(bit, int) else float(bit == "1")


def primitive_table(
    module: dict, toggles: dict[int, int], calls: int, high: dict[int, float] | None = None
) -> dict:
    """{class: {cells, toggles_per_call (outputs), input_toggles_per_call, clock_toggles_per_call,
    enabled_clock_toggles_per_call, types}} of a mapped netlist (Yosys JSON module) and its
    toggles by bit. ``high``: each bit's fraction of the run at 1. A block RAM's clock
    transitions (each clock net once, as for "clock") count as enabled in the share of the run
    its ports on that clock had their clock enable high (a synchronous enable: the share of the
    edges; two ports: the sum, at most 1, since the coefficient is the block's); other cells'
    clocks all count."""
    high = high or {}
    rows = {
        c: {"cells": 0, "out": 0, "in": 0, "clock": 0, "enabled": 0.0, "types": {}} for c in CLASSES
    }
    for cell in module["cells"].values():
        kind = cell["type"]
        row = rows[CLASS_OF.get(kind, "other")]
        row["cells"] += 1
        row["types"][kind] = row["types"].get(kind, 0) + 1
        dirs = cell.get("port_directions", {})
        clocks = set()
        for pin, bits in cell["connections"].items():
            nets = [b for b in bits if isinstance(b, int)]
            if dirs.get(pin) == "output":
                row["out"] += sum(toggles.get(b, 0) for b in nets)
            elif pin in CLOCK_PINS:
                clocks.update(nets)
            elif dirs.get(pin) == "input":
                row["in"] += sum(toggles.get(b, 0) for b in nets)
        clock = sum(toggles.get(b, 0) for b in clocks)
        row["clock"] += clock
        conns = cell["connections"]
        if kind == "DP16KD":  # per clock net (once, as "clock"): the ports on it, enabled
            share: dict[int, float] = {}
            for clk, ce in BRAM_PORTS:
                for b in conns.get(clk, []):
                    if isinstance(b, int):
                        share[b] = share.get(b, 0.0) + _high(conns.get(ce, []), high)
            row["enabled"] += sum(toggles.get(b, 0) * min(1.0, f) for b, f in share.items())
        else:
            row["enabled"] += clock
    return {
        c: {
            "cells": r["cells"],
            "toggles_per_call": round(r["out"] / calls, 3),
            "input_toggles_per_call": round(r["in"] / calls, 3),
            "clock_toggles_per_call": round(r["clock"] / calls, 3),
            "enabled_clock_toggles_per_call": round(r["enabled"] / calls, 3),
            "types": dict(sorted(r["types"].items())),
        }
        for c, r in rows.items()
    }


# -- the proxy energy ----------------------------------------------------------------------------
def load_coefficients(path: str | os.PathLike | None = None) -> dict:
    """The coefficients file (YAML or JSON; default :data:`DEFAULT_COEFFICIENTS`), checked:
    {"file", "units", "summary", "pj": {class: float | None}, "basis": {class}, "source":
    {class}}. ValueError (one line naming the file) for anything malformed."""
    file = Path(path) if path is not None else DEFAULT_COEFFICIENTS
    flag = f"--fpga-coefficients {file}"
    try:
        data = yaml.safe_load(file.read_text())
    except OSError as err:
        raise ValueError(f"{flag}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else "syntax error"
        raise ValueError(f"{flag}: not valid YAML/JSON ({first})") from None
    if not isinstance(data, dict) or not isinstance(data.get("classes"), dict):
        raise ValueError(f"{flag}: needs a mapping 'classes' of {', '.join(CLASSES)}")
    out = {"file": str(file), "units": "pJ per transition", "summary": str(data.get("source", ""))}
    out.update(pj={}, basis={}, source={})
    for name, entry in data["classes"].items():
        if name not in CLASSES:
            raise ValueError(f"{flag}: unknown class {name!r} (one of {', '.join(CLASSES)})")
        if not isinstance(entry, dict):
            raise ValueError(f"{flag}: classes.{name} must be a mapping (pj, basis, source)")
        pj, basis = entry.get("pj"), entry.get("basis", "output")
        number = isinstance(pj, (int, float)) and not isinstance(pj, bool)
        if pj is not None and not (number and math.isfinite(pj) and pj >= 0):
            raise ValueError(f"{flag}: classes.{name}.pj must be a number >= 0 or null, got {pj!r}")
        if basis not in BASES:
            raise ValueError(f"{flag}: classes.{name}.basis must be one of {', '.join(BASES)}")
        if pj is not None and not str(entry.get("source") or "").strip():
            raise ValueError(f"{flag}: classes.{name}.source: say where {pj} comes from")
        out["pj"][name] = None if pj is None else float(pj)
        out["basis"][name] = basis
        out["source"][name] = str(entry.get("source") or "")
    for name in CLASSES:
        out["pj"].setdefault(name, None)
        out["basis"].setdefault(name, "output")
        out["source"].setdefault(name, "")
    return out


#: the primitive table's key of each basis (the transitions a coefficient multiplies)
BASIS_KEY = {
    "output": "toggles_per_call",
    "input": "input_toggles_per_call",
    "clock": "clock_toggles_per_call",
    "enabled_clock": "enabled_clock_toggles_per_call",
}


def proxy_energy(primitives: dict, coefficients: dict) -> tuple[dict | None, list[str]]:
    """({"total", class: pJ per call or None}, or None where no class has a coefficient; the
    classes with toggles but no coefficient, whose energy the total leaves out)."""
    by_class, without = {}, []
    for name in CLASSES:
        pj, row = coefficients["pj"][name], primitives[name]
        toggles = row.get(BASIS_KEY[coefficients["basis"][name]], 0)
        by_class[name] = None if pj is None else round(pj * toggles, 6)
        if pj is None and any(row.get(k) for k in BASIS_KEY.values()):
            without.append(name)
    known = [v for v in by_class.values() if v is not None]
    if not known:
        return None, without
    return {"total": round(sum(known), 6), **by_class}, without
