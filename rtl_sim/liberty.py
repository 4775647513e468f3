"""Liberty (.lib) standard-cell libraries, and gate-level energy from net toggle counts.

:func:`read_liberty` reads a library (a small tokenizer and parser of our own: groups
``name (args) { ... }``, simple attributes ``name : value ;``, complex attributes
``name ("a, b", ...) ;``, ``/* */`` comments, ``\\`` line continuations) and keeps what the energy
model needs: units, voltage, and per cell its area, leakage and pins (capacitance, direction,
``internal_power`` tables). Everything is converted to pF, ns, nW, V and pJ.

:func:`netlist_energy` turns a Yosys-mapped netlist (one module of ``write_json``) and the number
of value changes of every net (``toggles``) into energy, the way a simple power tool does:

- load of a net: ``C = sum of the capacitances of the input pins it drives``
  (+ ``output_load_pf`` for each top-level output port bit it reaches);
- switching: ``E_sw = 0.5 * C * V**2 * toggles`` (pF x V^2 = pJ);
- internal, output pins: ``E_int = toggles * mean over the pin's internal_power groups of
  (rise(C, slew) + fall(C, slew)) / 2``: we do not know which input caused an output change, nor
  its direction, so every related pin and both directions weigh the same (``when`` conditions are
  ignored too);
- internal, input pins with their own tables (flip-flop clocks, data pins): ``toggles of the net
  at the pin * mean of (rise + fall) / 2`` looked up at the input transition only;
- a net's switching energy counts for the type of the cell driving it ("input ports" for top-level
  inputs, "undriven" otherwise), internal energy for the cell it is spent in;
- a ``power`` table (no rise/fall split) serves both directions;
- leakage: ``E_leak = sum of cell_leakage_power * cycles * period_ns``, and since
  1 nW x 1 ns = 1e-9 W x 1e-9 s = 1e-18 J = 1e-6 pJ, ``E_leak[pJ] = P[nW] * t[ns] * 1e-6``.

Tables are looked up at an assumed input transition :data:`DEFAULT_SLEW_NS` (no timing analysis
here) and interpolated bilinearly, extrapolated linearly from the two edge points (as OpenSTA
does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: assumed input transition (ns) for the internal-power tables: not computed from the netlist
DEFAULT_SLEW_NS = 0.1

# --- parsing: text -> nested _Group ----------------------------------------------------------

_TOKEN = re.compile(
    r"""(?P<skip>[ \t\r\f\n]+|\\[ \t]*\r?\n|/\*.*?\*/|//[^\n]*)
      |(?P<string>"(?:[^"\\]|\\.)*")
      |(?P<punct>[{}();:,])
      |(?P<word>(?:[^\s{}();:,"\\]|\\(?![ \t]*\r?\n))+)""",
    re.X | re.S,
)


class _LibError(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class _Group:
    kind: str
    args: list[str]
    line: int
    attrs: dict[str, str | list[str]] = field(default_factory=dict)
    groups: list[_Group] = field(default_factory=list)

    def children(self, *kinds: str) -> list[_Group]:
        return [g for g in self.groups if g.kind in kinds]


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, line) for every token, strings without their quotes, then ("punct",
    "end of file", last line)."""
    tokens, pos, line = [], 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _LibError(line, f"unexpected character {text[pos]!r}")
        kind, tok = m.lastgroup, m.group()
        if tok.startswith("/*") and kind == "word":
            raise _LibError(line, "unterminated comment")
        if kind != "skip":  # a string may hold line continuations too
            value = re.sub(r"\\[ \t]*\r?\n", "", tok[1:-1]) if kind == "string" else tok
            tokens.append((kind, value, line))
        line += tok.count("\n")
        pos = m.end()
    return tokens + [("punct", "end of file", line)]


def _parse(tokens: list[tuple[str, str, int]]) -> _Group:
    root, stack, pos = _Group("<file>", [], 1), [], 0
    group, end = root, tokens[-1]
    tok = lambda i: tokens[min(i, len(tokens) - 1)]  # noqa: E731
    while pos < len(tokens) - 1:
        kind, name, line = tokens[pos]
        if (kind, name) == ("punct", "}"):
            if not stack:
                raise _LibError(line, "unmatched '}'")
            group, pos = stack.pop(), pos + 1
            continue
        if kind == "punct":
            raise _LibError(line, f"unexpected {name!r}")
        sep = tok(pos + 1)
        if sep[1] == ":":  # simple attribute; a missing ';' at the end of the line is tolerated
            pos, value = pos + 2, []
            while tok(pos)[0] != "punct" and (not value or tok(pos)[2] == tok(pos - 1)[2]):
                value.append(tok(pos)[1])
                pos += 1
            if not value:
                raise _LibError(line, f"{name}: missing value")
            group.attrs[name] = " ".join(value)
            pos += tok(pos)[1] == ";"
        elif sep[1] == "(":  # group or complex attribute
            pos, args, cur = pos + 2, [], []
            while tok(pos)[1] != ")":
                k, t, ln = tok(pos)
                if k == "punct" and t != ",":
                    raise _LibError(ln, f"{name}: unexpected {t!r} in (...)")
                if t == ",":
                    args, cur = args + [" ".join(cur)], []
                else:
                    cur.append(t)
                pos += 1
            args += [" ".join(cur)] if cur or args else []
            pos += 1
            if tok(pos)[1] == "{":
                child = _Group(name, args, line)
                group.groups.append(child)
                stack.append(group)
                group, pos = child, pos + 1
            else:
                group.attrs[name] = args
                pos += tok(pos)[1] == ";"
        else:
            raise _LibError(sep[2], f"expected ':' or '(' after {name!r}, got {sep[1]!r}")
    if stack:
        raise _LibError(end[2], f"unexpected end of file: {group.kind} (line {group.line}) open")
    return root


# --- the library model -----------------------------------------------------------------------


def _locate(index: tuple[float, ...], x: float) -> tuple[int, int, float]:
    """Two neighbouring points of ``index`` and the fraction of the way from one to the other
    (below 0 or above 1 outside the table: linear extrapolation from the edge pair)."""
    if len(index) == 1:
        return 0, 0, 0.0
    i = int(np.clip(np.searchsorted(index, x, side="right") - 1, 0, len(index) - 2))
    return i, i + 1, (x - index[i]) / (index[i + 1] - index[i])


@dataclass(frozen=True)
class PowerTable:
    """One ``rise_power``/``fall_power``/``power`` table; indices in pF and ns, values in pJ."""

    index_1: tuple[float, ...]
    index_2: tuple[float, ...]
    values: np.ndarray
    variables: tuple[str, ...]

    def lookup(self, load_pf: float, slew_ns: float) -> float:
        """Energy (pJ) at an output load and input transition; each axis picks by its variable."""
        if not self.variables:  # scalar table
            return float(self.values)
        points = []
        for var in self.variables:
            if "capacitance" in var:
                points.append(load_pf)
            elif "transition" in var:
                points.append(slew_ns)
            else:
                raise ValueError(f"power table variable {var!r} is not supported")
        i0, i1, t = _locate(self.index_1, points[0])
        row = self.values[i0] + t * (self.values[i1] - self.values[i0])
        if len(self.variables) == 1:
            return float(row)
        j0, j1, u = _locate(self.index_2, points[1])
        return float(row[j0] + u * (row[j1] - row[j0]))


@dataclass(frozen=True)
class InternalPower:
    related_pin: str | None
    rise: PowerTable | None
    fall: PowerTable | None

    def energy(self, load_pf: float, slew_ns: float) -> float:
        """Mean of the rise and fall energies (pJ), or the one that exists."""
        found = [t.lookup(load_pf, slew_ns) for t in (self.rise, self.fall) if t is not None]
        return sum(found) / len(found) if found else 0.0


@dataclass(frozen=True)
class Pin:
    name: str
    direction: str
    capacitance_pf: float
    function: str | None
    clock: bool
    internal_power: tuple[InternalPower, ...]

    def internal_energy(self, load_pf: float, slew_ns: float) -> float:
        """Mean over the internal_power groups of :meth:`InternalPower.energy` (pJ per toggle)."""
        groups = self.internal_power
        return sum(g.energy(load_pf, slew_ns) for g in groups) / len(groups) if groups else 0.0


@dataclass(frozen=True)
class Cell:
    name: str
    area: float
    leakage_nw: float
    pins: dict[str, Pin]
    sequential: bool


@dataclass(frozen=True)
class Library:
    """A library in pF, ns, nW, V and pJ; the ``*_unit_*`` fields are the file's own units."""

    name: str
    voltage: float
    cells: dict[str, Cell]
    cap_unit_pf: float = 1.0
    time_unit_ns: float = 1.0
    leakage_unit_nw: float = 1.0

    def cell(self, name: str) -> Cell:
        if name not in self.cells:
            raise ValueError(f"{name}: not a cell of library {self.name}")
        return self.cells[name]


_UNITS = {
    "time_unit": {"ps": 1e-3, "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9},
    "leakage_power_unit": {"fw": 1e-6, "pw": 1e-3, "nw": 1.0, "uw": 1e3, "mw": 1e6, "w": 1e9},
    "capacitive_load_unit": {"ff": 1e-3, "pf": 1.0, "nf": 1e3},
    "voltage_unit": {"mv": 1e-3, "v": 1.0},
}


def _float(value: str | list[str], line: int) -> float:
    try:
        return float(value if isinstance(value, str) else ",".join(value))
    except ValueError:
        raise _LibError(line, f"not a number: {value!r}") from None


def _unit(lib: _Group, name: str) -> float:
    """A unit attribute ("1ns", or (1,ff) for capacitance) as a factor to ns, nW, pF or V."""
    value = lib.attrs.get(name)
    if value is None:
        return 1.0
    text = "".join(value) if isinstance(value, list) else value
    m = re.fullmatch(r"\s*([0-9.eE+-]*)\s*([A-Za-z]+)\s*", text.replace(",", " "))
    if m is None or m.group(2).lower() not in _UNITS[name]:
        raise _LibError(lib.line, f"{name}: unknown unit {text!r}")
    return _float(m.group(1) or "1", lib.line) * _UNITS[name][m.group(2).lower()]


def _table(g: _Group, templates: dict[str, _Group], units: dict[str, float]) -> PowerTable:
    name = g.args[0] if g.args else "scalar"
    if name not in templates and name != "scalar":
        raise _LibError(g.line, f"{g.kind}: unknown template {name!r}")
    tattrs = templates[name].attrs if name in templates else {}
    variables = tuple(str(tattrs[f"variable_{k}"]) for k in (1, 2, 3) if f"variable_{k}" in tattrs)
    if len(variables) > 2:
        raise _LibError(g.line, f"{g.kind}: 3-D power tables are not supported")
    indices = []
    for k, var in enumerate(variables[:2], 1):
        raw = g.attrs.get(f"index_{k}", tattrs.get(f"index_{k}"))
        scale = units["cap"] if "capacitance" in var else 1.0
        scale = units["time"] if "transition" in var else scale
        nums = ",".join(raw or []).split(",")
        indices.append(tuple(_float(x, g.line) * scale for x in nums if x.strip()))
    if not isinstance(g.attrs.get("values"), list):
        raise _LibError(g.line, f"{g.kind}: no values (...)")
    rows = [[_float(x, g.line) for x in s.split(",") if x.strip()] for s in g.attrs["values"]]
    try:
        values = np.array(rows[0] if len(variables) <= 1 else rows, dtype=float)
        values = values * units["energy"]
    except ValueError:
        raise _LibError(g.line, f"{g.kind}: ragged values") from None
    if values.shape != tuple(len(ix) for ix in indices) and variables:
        raise _LibError(g.line, f"{g.kind}: values {values.shape} do not match the indices")
    indices += [(), ()]
    return PowerTable(
        indices[0], indices[1], values.reshape(()) if not variables else values, variables
    )


def _cell(g: _Group, templates: dict[str, _Group], units: dict[str, float]) -> Cell:
    pins = {}
    for p in g.children("pin"):
        groups = []
        for ip in p.children("internal_power"):
            tables = {
                t.kind: _table(t, templates, units)
                for t in ip.groups
                if t.kind in ("rise_power", "fall_power", "power")
            }
            both = tables.get("power")  # one table for both directions
            related = ip.attrs.get("related_pin")
            groups.append(
                InternalPower(
                    related if isinstance(related, str) else None,
                    tables.get("rise_power", both),
                    tables.get("fall_power", both),
                )
            )
        function = p.attrs.get("function")
        cap = p.attrs.get("capacitance", p.attrs.get("rise_capacitance", "0"))
        for name in p.args:
            pins[name] = Pin(
                name=name,
                direction=str(p.attrs.get("direction", "input")),
                capacitance_pf=_float(cap, p.line) * units["cap"],
                function=function if isinstance(function, str) else None,
                clock=p.attrs.get("clock") == "true",
                internal_power=tuple(groups),
            )
    return Cell(
        name=g.args[0],
        area=_float(g.attrs.get("area", "0"), g.line),
        leakage_nw=_float(g.attrs.get("cell_leakage_power", "0"), g.line) * units["leak"],
        pins=pins,
        sequential=bool(g.children("ff", "latch", "ff_bank", "latch_bank", "statetable")),
    )


def read_liberty(path: str | Path) -> Library:
    """Read a Liberty file; a syntax error raises ValueError("FILE:LINE: what")."""
    path = Path(path)
    try:
        root = _parse(_tokenize(path.read_text(errors="replace")))
        libs = root.children("library")
        if not libs:
            raise _LibError(1, "no library group")
        lib = libs[0]
        cap, time = _unit(lib, "capacitive_load_unit"), _unit(lib, "time_unit")
        leak, volt = _unit(lib, "leakage_power_unit"), _unit(lib, "voltage_unit")
        conditions = {g.args[0] if g.args else "": g for g in lib.children("operating_conditions")}
        default = conditions.get(str(lib.attrs.get("default_operating_conditions")))
        default = default or next(iter(conditions.values()), None)
        voltage = lib.attrs.get("nom_voltage") or (default and default.attrs.get("voltage"))
        if voltage is None:
            raise _LibError(lib.line, "no nom_voltage nor operating_conditions voltage")
        templates = {g.args[0]: g for g in lib.groups if g.kind.endswith("_template") and g.args}
        # internal-power table values are in capacitance unit x voltage unit^2
        units = {"cap": cap, "time": time, "leak": leak, "energy": cap * volt**2}
        cells = {g.args[0]: _cell(g, templates, units) for g in lib.children("cell")}
        return Library(
            lib.args[0] if lib.args else "",
            _float(voltage, lib.line) * volt,
            cells,
            cap,
            time,
            leak,
        )
    except _LibError as e:
        raise ValueError(f"{path}:{e.line}: {e}") from None


# --- energy of a mapped netlist ---------------------------------------------------------------


def _bits(bits: list) -> list[int]:
    return [b for b in bits if isinstance(b, int)]  # "0"/"1"/"x"/"z" never toggle


def net_bits(net: dict) -> list[tuple[int, int]]:
    """(bit, index) of each signal bit of a Yosys JSON netname, the index as the RTL numbers it
    (``offset``, ``upto``); constant bits left out."""
    bits = net["bits"]
    offset, upto = int(net.get("offset", 0)), bool(net.get("upto", 0))
    return [
        (bit, offset + (len(bits) - 1 - i if upto else i))
        for i, bit in enumerate(bits)
        if isinstance(bit, int)
    ]


def netlist_energy(
    module: dict,
    toggles: dict[int, int],
    lib: Library,
    *,
    cycles: int,
    period_ns: float,
    slew_ns: float = DEFAULT_SLEW_NS,
    output_load_pf: float = 0.0,
    stages: dict[str, dict[str, float]] | None = None,
    groups: dict[str, str] | None = None,
) -> dict:
    """Energy (pJ) of ``cycles`` clock cycles of a Yosys JSON module; see the module docstring.

    ``groups`` ({cell: name}): those cells, and the nets they drive, are booked in ``by_type``
    under the name instead of their cell type (the clock gates, rtl_sim/clock_gating.py).

    With ``stages`` ({cell: {stage: weight}}, rtl_sim/stages.py) the result also has
    ``by_stage``: each cell's area, leakage and input-pin energy, and each net's switching and
    driver's internal energy, go to its driver's stages by weight; a net driven by an input port
    goes to the stages of the cells it drives, in proportion to their pin capacitance."""
    if cycles <= 0 or period_ns <= 0:
        raise ValueError(f"cycles ({cycles}) and period_ns ({period_ns}) must be positive")
    v2 = lib.voltage**2
    load: dict[int, float] = {}
    driver: dict[int, tuple[str, Pin | None]] = {}
    kinds = {"switching_pj": 0.0, "internal_pj": 0.0, "leakage_pj": 0.0}
    by_type: dict[str, dict] = {}
    leakage_nw = 0.0

    by_stage: dict[str, dict] = {}
    loads: dict[int, list[tuple[str, float]]] = {}  # bit -> (cell, pin capacitance), for stages
    driver_cell: dict[int, str] = {}

    def entry(kind: str) -> dict:
        return by_type.setdefault(kind, {"count": 0, "area": 0.0, **kinds})

    def to_stages(inst: str, key: str, value: float) -> None:
        for stage, w in stages[inst].items():
            row = by_stage.setdefault(stage, {"count": 0.0, "area": 0.0, **kinds})
            row[key] += w * value

    for inst, c in module.get("cells", {}).items():
        try:
            cell = lib.cell(c["type"])
        except ValueError as e:
            raise ValueError(f"cell {inst}: {e}") from None
        kind = groups.get(inst, cell.name) if groups else cell.name
        e = entry(kind)
        e["count"] += 1
        leakage_nw += cell.leakage_nw
        e["area"] += cell.area
        leak_pj = cell.leakage_nw * cycles * period_ns * 1e-6  # nW x ns = 1e-6 pJ
        e["leakage_pj"] += leak_pj
        if stages is not None:
            to_stages(inst, "count", 1.0)
            to_stages(inst, "area", cell.area)
            to_stages(inst, "leakage_pj", leak_pj)
        for port, bits in c["connections"].items():
            pin = cell.pins.get(port)
            if pin is None:
                raise ValueError(f"cell {inst}: {cell.name} has no pin {port}")
            for b in _bits(bits):
                if pin.direction in ("input", "inout"):
                    load[b] = load.get(b, 0.0) + pin.capacitance_pf
                    internal = toggles.get(b, 0) * pin.internal_energy(0.0, slew_ns)
                    e["internal_pj"] += internal
                    if stages is not None:
                        to_stages(inst, "internal_pj", internal)
                        loads.setdefault(b, []).append((inst, pin.capacitance_pf))
                if pin.direction in ("output", "inout"):
                    driver[b] = (kind, pin)
                    driver_cell[b] = inst
    for port in module.get("ports", {}).values():
        for b in _bits(port["bits"]):
            if port["direction"] in ("output", "inout"):
                load[b] = load.get(b, 0.0) + output_load_pf
            if port["direction"] in ("input", "inout"):
                driver.setdefault(b, ("input ports", None))
    for b in set(load) | set(driver):
        t, c_pf = toggles.get(b, 0), load.get(b, 0.0)
        kind, pin = driver.get(b, ("undriven", None))
        e = entry(kind)
        switching = 0.5 * c_pf * v2 * t
        internal = t * pin.internal_energy(c_pf, slew_ns) if pin is not None else 0.0
        e["switching_pj"] += switching
        e["internal_pj"] += internal
        if stages is None or not t:
            continue
        if b in driver_cell:
            to_stages(driver_cell[b], "switching_pj", switching)
            to_stages(driver_cell[b], "internal_pj", internal)
        elif loads.get(b):  # an input port's net: to the cells it drives, by capacitance
            cell_pf = sum(cap for _, cap in loads[b])
            for inst, cap in loads[b]:  # (an output port's load, if any, shared out with it)
                share = cap / cell_pf if cell_pf > 0 else 1.0 / len(loads[b])
                to_stages(inst, "switching_pj", share * switching)
    totals = {k: sum(e[k] for e in by_type.values()) for k in kinds}
    dynamic = totals["switching_pj"] + totals["internal_pj"]
    return {
        **totals,
        "dynamic_pj": dynamic,
        "total_pj": dynamic + totals["leakage_pj"],
        "leakage_nw": leakage_nw,
        "area": sum(e["area"] for e in by_type.values()),
        "cells": sum(e["count"] for e in by_type.values()),
        "by_type": by_type,
        **({"by_stage": by_stage} if stages is not None else {}),
        "voltage": lib.voltage,
        "slew_ns": slew_ns,
        "cycles": cycles,
        "period_ns": period_ns,
    }
