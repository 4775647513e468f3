"""Clock gating for ``eatt power --clock-gating`` (rtl_sim/power.py): the registers that hold
get their clock only in the cycles they load.

Yosys' ``clockgate`` pass does the transformation ASIC flows do: every set of at least
``min_flip_flops`` flip-flops that share a clock and an enable loses its enable, and one
integrated clock-gating cell (ICG) drives their clock instead. The OSU libraries have no ICG
cell, so the ICG is the textbook latch-based one built from the library's own cells
(:func:`icg_verilog`): an inverter opens a latch while the clock is low, the latch holds the
enable while it is high, and an AND of the clock and the held enable is the gated clock (no
glitch: the enable can change only while the gated clock is low). The three cells are tagged
:data:`ATTRIBUTE`, so the energy calculator books them, and the gated clock nets they drive,
as ``clock gates`` (liberty.netlist_energy ``groups``): the gating's own cost, measured by the
same gate-level simulation as everything else, beside the registers' clock energy it saves.

Why our own: the pass needs a cell with an enable, a clock in and a gated clock out; a library
without one (OSU) needs a module of its cells, which is this file's few lines.
"""

from __future__ import annotations

from pathlib import Path

#: the attribute on the ICG's three cells (kept through flatten and in the netlist's JSON)
ATTRIBUTE = "eatt_clock_gate"
#: the by_type key of the ICG's cells and the nets they drive (rtl_sim/liberty.py)
GROUP = "clock gates"
MODULE = "eatt_icg"
#: the fewest flip-flops a clock gate serves (a gate costs three cells)
DEFAULT_MIN_FLIP_FLOPS = 4
#: (inverter, latch transparent while its CLK is high, 2-input AND) of each known library, with
#: their pins
CELLS = {
    "osu018": {
        "inv": ("INVX1", "A", "Y"),
        "latch": ("LATCH", "CLK", "D", "Q"),
        "and": ("AND2X1", "A", "B", "Y"),
    },  # fmt: skip
}
CELLS["osu035"] = CELLS["osu018"]


def cells_for(liberty: str, cell_names) -> dict:
    """The ICG's cells for the library ``liberty`` (a name of :data:`CELLS` or a .lib file
    with the same cells, ``cell_names`` being its cells); ValueError naming what is missing."""
    cells = CELLS.get(liberty, CELLS["osu018"])
    missing = [c[0] for c in cells.values() if c[0] not in cell_names]
    if missing:
        raise ValueError(
            f"--clock-gating: the Liberty {liberty} has no {', '.join(missing)} (the clock gate "
            f"is built of an inverter, a latch and an AND2 by these OSU names)"
        )
    return cells


def icg_verilog(cells: dict) -> str:
    """The ICG module: E (enable, active high), CLK, GCLK (the gated clock)."""
    inv, latch, and2 = cells["inv"], cells["latch"], cells["and"]
    return (
        f"// eatt power --clock-gating: a latch-based clock gate of the library's cells\n"
        f"module {MODULE} (input E, input CLK, output GCLK);\n"
        f"  wire clk_n, enable;\n"
        f"  (* {ATTRIBUTE} *) {inv[0]} u_inv (.{inv[1]}(CLK), .{inv[2]}(clk_n));\n"
        f"  (* {ATTRIBUTE} *) {latch[0]} u_latch (.{latch[1]}(clk_n), .{latch[2]}(E), "
        f".{latch[3]}(enable));\n"
        f"  (* {ATTRIBUTE} *) {and2[0]} u_and (.{and2[1]}(CLK), .{and2[2]}(enable), "
        f".{and2[3]}(GCLK));\n"
        f"endmodule\n"
    )


def yosys_commands(rel: str, top: str, lib: str, min_flip_flops: int) -> str:
    """The Yosys commands, after ``synth -noabc`` and before ``dfflibmap``, that gate the
    clocks: the enables' flip-flops grouped under ICG instances, which are then flattened into
    the library's cells (read as black boxes; rel/eatt_icg.v: :func:`icg_verilog`)."""
    return (
        f"clockgate -pos {MODULE} E:CLK:GCLK -min_net_size {min_flip_flops}; "
        f"read_liberty -lib {lib}; read_verilog {rel}/{MODULE}.v; "
        f"hierarchy -top {top}; flatten; "
    )


def write_icg(work: Path, cells: dict) -> None:
    (work / f"{MODULE}.v").write_text(icg_verilog(cells))


def groups(module: dict) -> dict[str, str]:
    """{cell: GROUP} for the ICG cells of a Yosys JSON module."""
    return {
        name: GROUP
        for name, c in module.get("cells", {}).items()
        if ATTRIBUTE in c.get("attributes", {})
    }


def summary(module: dict, library, cells: dict, min_flip_flops: int) -> dict:
    """How much is gated: clock gates, the flip-flops on gated clocks, all flip-flops."""
    tagged = groups(module)
    all_cells = module.get("cells", {})
    and_cell, and_out = cells["and"][0], cells["and"][3]
    gated_nets = {
        b
        for name in tagged
        if all_cells[name]["type"] == and_cell
        for b in all_cells[name]["connections"][and_out]
    }
    flops = [
        c
        for name, c in all_cells.items()
        if name not in tagged and c["type"] in library.cells and library.cells[c["type"]].sequential
    ]
    clock_pins = {"CLK", "C", "CK", "CLOCK"}
    gated = sum(
        1
        for c in flops
        if any(
            b in gated_nets for p, bits in c["connections"].items() if p in clock_pins for b in bits
        )
    )
    return {
        "gates": len(gated_nets),
        "gated_flip_flops": gated,
        "flip_flops": len(flops),
        "min_flip_flops": min_flip_flops,
        "cells": [cells[k][0] for k in ("inv", "latch", "and")],
    }
