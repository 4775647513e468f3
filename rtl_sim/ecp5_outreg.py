"""Block RAM output registers for the ECP5 flow (``eatt pnr``, the mapped netlist's simulation).

An ECP5 DP16KD without its output register (REGMODE NOREG, all Yosys' memory mapping writes:
lattice/brams_map_16kd.v) puts its word out about 5.8 ns after the clock (nextpnr's timing of
DP16KD_REGMODE_A_NOREG_REGMODE_B_NOREG): with any routing to a flip-flop that is most of a
125 MHz cycle. With REGMODE OUTREG the word passes a register inside the block RAM, clocked by
the same clock and enabled by OCE, and leaves it a fraction of that after the clock. The
engine registers each block RAM's word as it arrives where the clock needs it (the walks'
word registers, the output's landing register); this pass moves such a register into the
block RAM, as vendor tools do (Vivado's DOA_REG, Diamond's OUTREG):

a read side (A, or B; in the pseudo dual port mode, 36 bits wide, one read side of DOA and
DOB together, whose output registers are both clocked by the read clock CLKB and enabled by
OCEB whatever clocks the write side A: nextpnr-ecp5 packs Lattice's PDPW16KD, one REGMODE, one
read clock CLKR, one OCER, into a DP16KD with REGMODE_A = REGMODE_B, CLKR on CLKB, OCER on OCEB,
and times every output of a pseudo dual port from CLKB; so a ROM, whose write clock Yosys ties
off, is absorbed too) is absorbed when every output bit it drives feeds exactly one TRELLIS_FF's DI
and nothing else, the flip-flops are clocked by that side's clock with the same polarity,
share one clock enable (or none), have no set or reset in use (LSR tied to 0) and reset to 0:
the side gets REGMODE OUTREG, OCE the flip-flops' enable (1 without one), its outputs take the
flip-flops' nets and the flip-flops go. The function is the same cycle by cycle: the output
register loads the block RAM's read word under OCE as the flip-flops did under their enable.

Yosys has no such pass (its ECP5 block RAM library declares no output register), hence this
small one on the JSON netlist between synth_ecp5 and nextpnr-ecp5 (docs/architecture.md).
rtl_sim/ecp5_models.py simulates OUTREG the same way.
"""

from __future__ import annotations

from collections import defaultdict

from eatt.rtl_sim.ecp5_models import _param_int

DO_BITS = 18  # DOA0..17, DOB0..17


def _s(value: object) -> str:
    return str(value).strip()


def _is_36(cell: dict) -> bool:
    p = cell.get("parameters", {})
    return all(_param_int(_s(p.get(f"DATA_WIDTH_{q}", "18"))) == 36 for q in "AB")


def _inverted(cell: dict, clock: str) -> bool:
    return _s(cell.get("parameters", {}).get(f"{clock}MUX", clock)) == "INV"


def _sinks(module: dict) -> dict[int, list[tuple[str, str]]]:
    """Each net bit's loads: (cell, pin), ("", port) for the module's outputs."""
    sinks: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for name, cell in module["cells"].items():
        dirs = cell.get("port_directions", {})
        for pin, bits in cell["connections"].items():
            if dirs.get(pin, "input") != "output":
                for b in bits:
                    if isinstance(b, int):
                        sinks[b].append((name, pin))
    for port, info in module.get("ports", {}).items():
        if info.get("direction") != "input":
            for b in info["bits"]:
                if isinstance(b, int):
                    sinks[b].append(("", port))
    return sinks


def flip_flop_control(ff: dict) -> tuple[object, bool, object] | None:
    """(clock bit, inverted clock, enable: "1" or a net bit) of a TRELLIS_FF that a block's
    own register can stand for: no set or reset in use (LSR tied to 0), resets to 0; None
    for any other cell (this pass and rtl_sim/ecp5_dspreg.py share these rules)."""
    if ff["type"] != "TRELLIS_FF":
        return None
    p = {k: _s(v) for k, v in ff.get("parameters", {}).items()}
    c = ff["connections"]
    if p.get("REGSET", "RESET") != "RESET" or p.get("LSRMODE", "LSR") != "LSR":
        return None
    if p.get("LSRMUX", "LSR") != "LSR" or c.get("LSR", ["0"])[0] != "0":
        return None
    cemux = p.get("CEMUX", "1")
    if cemux not in ("1", "CE"):
        return None
    enable = "1" if cemux == "1" else c["CE"][0]
    return c.get("CLK", [None])[0], p.get("CLKMUX", "CLK") == "INV", enable


def _side(
    module: dict,
    cell: dict,
    pins: list[str],
    clock: str,
    inverted: bool,
    sinks: dict[int, list[tuple[str, str]]],
) -> tuple[list[tuple[str, str]], object] | None:
    """The (output pin, flip-flop) pairs of one read side and their enable ("1" or a net bit),
    or None when the side cannot take its flip-flops (the module doc's rules)."""
    conns = cell["connections"]
    clk = conns.get(clock, [None])[0]
    pairs: list[tuple[str, str]] = []
    enables = set()
    for pin in pins:
        bit = conns.get(pin, [None])[0]
        if not isinstance(bit, int) or not sinks.get(bit):
            continue  # an unused output
        loads = sinks[bit]
        if len(loads) != 1 or not loads[0][0] or loads[0][1] != "DI":
            return None
        control = flip_flop_control(module["cells"][loads[0][0]])
        if control is None or control[:2] != (clk, inverted):
            return None
        enables.add(control[2])
        pairs.append((pin, loads[0][0]))
    if not pairs or len(enables) != 1:
        return None
    return pairs, enables.pop()


def absorb_output_registers(netlist: dict) -> dict[str, int]:
    """Move the flip-flops after each DP16KD read side into its output register (module doc),
    in place, in every module of a Yosys JSON netlist: {"sides": read sides now OUTREG,
    "flip_flops": TRELLIS_FF removed}."""
    absorbed = flops = 0
    for module in netlist.get("modules", {}).values():
        cells = module.get("cells", {})
        rams = [n for n, c in cells.items() if c["type"] == "DP16KD"]
        if not rams:
            continue
        sinks = _sinks(module)
        for name in rams:
            cell = cells[name]
            p = cell.setdefault("parameters", {})
            if _is_36(cell):  # the pseudo dual port: B reads {DOB, DOA}, registered on CLKB
                sides = [("AB", [f"DO{q}{i}" for q in "AB" for i in range(DO_BITS)], "CLKB")]
            else:
                sides = [(q, [f"DO{q}{i}" for i in range(DO_BITS)], f"CLK{q}") for q in "AB"]
            for regs, pins, clock in sides:
                if any(_s(p.get(f"REGMODE_{q}", "NOREG")) != "NOREG" for q in regs):
                    continue
                found = _side(module, cell, pins, clock, _inverted(cell, clock), sinks)
                if found is None:
                    continue
                pairs, enable = found
                for pin, ff_name in pairs:
                    q_bit = cells[ff_name]["connections"]["Q"][0]
                    cell["connections"][pin] = [q_bit]
                    del cells[ff_name]
                    flops += 1
                for q in regs:
                    p[f"REGMODE_{q}"] = "OUTREG"
                    cell["connections"][f"OCE{q}"] = [enable]
                absorbed += 1
    return {"sides": absorbed, "flip_flops": flops}
