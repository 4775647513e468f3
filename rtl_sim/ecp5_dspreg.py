"""DSP block registers for the ECP5 flow (``eatt pnr``, the mapped netlist's simulation).

synth_ecp5 maps every product to a MULT18X18D with its registers off (REG_*_CLK NONE: the
combinational multiply of lattice/dsp_map_18x18.v), so a product's own registers are fabric
flip-flops, which nextpnr places wherever their other nets pull them: on the trained layer
a register meant to sit beside the multiplier ended up 27 rows away, 2.7 ns of routing each
way around the multiply's 3.9 ns. The MULT18X18D has input registers (A, B) and an output
register (P) inside the block; this pass moves such flip-flops into them, as vendor tools do
(Diamond's sysDSP, Vivado's AREG/BREG/PREG), the same way rtl_sim/ecp5_outreg.py moves a block
RAM's output flip-flops into its output register.

- **Inputs.** A side (A0..A17, or B0..B17) is absorbed when each of its pins is tied to 0 or
  driven by a TRELLIS_FF whose output feeds only that side of this multiplier (one flip-flop
  may feed several of its pins: Yosys extends a sign that way), the flip-flops share one clock
  (rising edge) and one clock enable (or none), and use no set or reset. Both sides or none:
  nextpnr times a multiplier with one registered input as if neither were (a warning).
- **Output.** P is absorbed when each used P bit feeds exactly one TRELLIS_FF's DI and nothing
  else, with the same rules.
- One clock for the block (CLK0; an output register on another clock than the inputs' keeps
  its flip-flops), each distinct enable on a CE pin of its own (CE0..CE3; none: tied to 1),
  RST0 tied to 0; REG_*_CLK "CLK0", REG_*_CE the side's pin, REG_*_RST "RST0", the other
  parameters at the defaults Lattice's primitive declares.

The function is the same cycle by cycle: the block's register loads its input (or the
product) under its enable as the flip-flops did. rtl_sim/ecp5_models.py simulates these
registers, so the netlist placed is the netlist checked; that the silicon's registers behave
as that model (Lattice's sysDSP guide) is the one assumption, as for the block RAMs' OUTREG.
"""

from __future__ import annotations

from eatt.rtl_sim.ecp5_outreg import _s, _sinks, flip_flop_control

SIDE_BITS = 18  # A0..A17, B0..B17
P_BITS = 36  # P0..P35


def _ff_rules(ff: dict) -> tuple[object, object] | None:
    """(clock bit, enable) of a TRELLIS_FF the block can stand for (ecp5_outreg's rules, and a
    rising edge: the block's registers have no inverted clock); None otherwise."""
    control = flip_flop_control(ff)
    if control is None or control[1]:
        return None
    return control[0], control[2]


def _drivers(module: dict) -> dict[int, str]:
    """Each net bit a TRELLIS_FF drives: that flip-flop's name."""
    return {
        c["connections"]["Q"][0]: name
        for name, c in module["cells"].items()
        if c["type"] == "TRELLIS_FF" and isinstance(c["connections"].get("Q", [None])[0], int)
    }


def _input_side(module, name, cell, side, drivers, sinks):
    """(flip-flops, clock, enable) of input side "A" or "B", or None (module doc)."""
    conns = cell["connections"]
    flops: set[str] = set()
    for i in range(SIDE_BITS):
        bit = conns.get(f"{side}{i}", ["0"])[0]
        if bit == "0":
            continue
        if not isinstance(bit, int) or drivers.get(bit) not in module["cells"]:
            return None  # (a flip-flop moved into another block has gone)
        flops.add(drivers[bit])
    if not flops:
        return None
    found = set()
    for ff_name in flops:
        ff = module["cells"][ff_name]
        q = ff["connections"]["Q"][0]
        if any(load != name or not pin.startswith(side) for load, pin in sinks.get(q, [])):
            return None  # its output goes elsewhere too
        if any(not pin[len(side) :].isdigit() for _, pin in sinks.get(q, [])):
            return None  # (SIGNEDA, SOURCEA: not a data pin)
        rules = _ff_rules(ff)
        if rules is None:
            return None
        found.add(rules)
    if len(found) != 1:
        return None
    clock, enable = found.pop()
    return flops, clock, enable


def _output_side(module, cell, sinks):
    """(P pin -> flip-flop, clock, enable) of the product, or None (module doc)."""
    conns = cell["connections"]
    pairs: dict[str, str] = {}
    found = set()
    for i in range(P_BITS):
        bit = conns.get(f"P{i}", [None])[0]
        if not isinstance(bit, int) or not sinks.get(bit):
            continue
        loads = sinks[bit]
        if len(loads) != 1 or loads[0][0] not in module["cells"] or loads[0][1] != "DI":
            return None
        rules = _ff_rules(module["cells"][loads[0][0]])
        if rules is None:
            return None
        found.add(rules)
        pairs[f"P{i}"] = loads[0][0]
    if not pairs or len(found) != 1:
        return None
    clock, enable = found.pop()
    return pairs, clock, enable


def _combinational(cell: dict) -> bool:
    p = {k: _s(v) for k, v in cell.get("parameters", {}).items()}
    return all(v == "NONE" for k, v in p.items() if k.startswith("REG_") and k.endswith("_CLK"))


def absorb_multiplier_registers(netlist: dict) -> dict[str, int]:
    """Move the flip-flops on each MULT18X18D's inputs and product into its registers (module
    doc), in place, in every module of a Yosys JSON netlist: {"multipliers": blocks given a
    register, "flip_flops": TRELLIS_FF removed}."""
    blocks = removed = 0
    for module in netlist.get("modules", {}).values():
        cells = module.get("cells", {})
        mults = [n for n, c in cells.items() if c["type"] == "MULT18X18D" and _combinational(c)]
        if not mults:
            continue
        sinks, drivers = _sinks(module), _drivers(module)
        for name in mults:
            cell = cells[name]
            a = _input_side(module, name, cell, "A", drivers, sinks)
            b = _input_side(module, name, cell, "B", drivers, sinks)
            out = _output_side(module, cell, sinks)
            inputs = [(s, f) for s, f in (("A", a), ("B", b)) if f is not None]
            if len(inputs) != 2 or inputs[0][1][1] != inputs[1][1][1]:
                inputs = []  # both or none, on one clock
            clock = inputs[0][1][1] if inputs else out[1] if out else None
            if out is not None and out[1] != clock:
                out = None
            if not inputs and out is None:
                continue
            enables: list[object] = []  # CE0, CE1, ...: each distinct enable once
            regs = [(f"INPUT{s}", found[2]) for s, found in inputs]
            regs += [("OUTPUT", out[2])] if out is not None else []
            for _, enable in regs:
                if enable not in enables:
                    enables.append(enable)
            p, conns = cell.setdefault("parameters", {}), cell["connections"]
            dirs = cell.setdefault("port_directions", {})
            for reg, enable in regs:
                p[f"REG_{reg}_CLK"] = "CLK0"
                p[f"REG_{reg}_CE"] = f"CE{enables.index(enable)}"
                p[f"REG_{reg}_RST"] = "RST0"
            for pin, bits in [("CLK0", [clock]), ("RST0", ["0"])] + [
                (f"CE{i}", [e]) for i, e in enumerate(enables)
            ]:
                conns[pin], dirs[pin] = bits, "input"
            for side, (flops, _, _) in inputs:  # each pin now reads the flip-flop's input
                for i in range(SIDE_BITS):
                    bit = conns.get(f"{side}{i}", ["0"])[0]
                    if bit != "0":
                        ff = next(f for f in flops if cells[f]["connections"]["Q"][0] == bit)
                        conns[f"{side}{i}"] = [cells[ff]["connections"]["DI"][0]]
                for ff in flops:
                    del cells[ff]
                removed += len(flops)
            if out is not None:
                for pin, ff in out[0].items():
                    conns[pin] = [cells[ff]["connections"]["Q"][0]]
                    del cells[ff]
                removed += len(out[0])
            blocks += 1
            # (sinks and drivers are not recomputed: every rule above asks that the flip-flops
            # it names still exist, so none is claimed twice, and a net whose flip-flop went
            # into a block is refused wherever it is read)
    return {"multipliers": blocks, "flip_flops": removed}
