"""`eatt pnr`: Yosys synth_ecp5 and nextpnr-ecp5 on an RTL folder: utilization and Fmax on a
Lattice ECP5 part (optionally behind a serial-load wrapper, to a bitstream)."""

from __future__ import annotations

import sys

from eatt.cli.common import PositiveFloat, add_json, emit
from eatt.cli.exits import EXIT_CHECK_FAILED, EXIT_OK, CommandError, tool_failures
from eatt.rtl_sim import throughput as rate
from eatt.rtl_sim.generate import load_metadata
from eatt.rtl_sim.pnr import DEVICES, SPEEDS, pnr

HELP = "Yosys synth_ecp5 + nextpnr-ecp5: utilization and Fmax of an RTL folder"


def add_arguments(p) -> None:
    p.add_argument("dir", metavar="DIR", help="a folder written by `eatt rtl`")
    p.add_argument("--device", default="ecp5-85k", help="ecp5-12k/25k/45k/85k (ecp5-85k)")
    p.add_argument(
        "--clock",
        action=PositiveFloat,
        what="a period in ns",
        default=10.0,
        metavar="NS",
        help="clock period (10)",
    )
    p.add_argument(
        "--timeout",
        action=PositiveFloat,
        what="seconds",
        metavar="S",
        help="seconds for both tools together",
    )
    p.add_argument("--nodsp", action="store_true", help="every product in fabric (no MULT18X18D)")
    p.add_argument(
        "--router",
        choices=["router1", "router2"],
        default="router1",
        help="nextpnr's router (router1, its default; router2 is often faster on a congested "
        "design)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=1,
        help="nextpnr's placer seed (1): another placement of the same netlist, for a design "
        "whose routing depends on it",
    )
    p.add_argument(
        "--speed",
        type=int,
        choices=SPEEDS,
        default=6,
        help="the part's speed grade: 6 (the slowest, nextpnr's default), 7 or 8",
    )
    p.add_argument(
        "--dsp-registers",
        action="store_true",
        help="move the flip-flops around each multiplier into its MULT18X18D's input and "
        "output registers (docs/pnr.md; eatt sim --netlist ecp5 --dsp-registers checks that "
        "netlist)",
    )
    p.add_argument(
        "--wrapper",
        action="store_true",
        help="on pins, with a bitstream (pnr/design.bit): a core behind a serial-load wrapper, "
        "a folded engine with its AXI4-Stream ports",
    )
    add_json(p)


def run(args) -> int:
    if args.device not in DEVICES:
        raise CommandError(
            f"--device: unknown device {args.device!r} (one of {', '.join(DEVICES)})"
        )
    load_metadata(args.dir)  # a bad folder: one line, before any tool runs
    with tool_failures():  # a tool failed: the log tail follows the first line
        result = pnr(
            args.dir,
            device=args.device,
            clock_ns=args.clock,
            timeout=args.timeout,
            nodsp=args.nodsp,
            wrapper=args.wrapper,
            router=args.router,
            seed=args.seed,
            dsp_registers=args.dsp_registers,
            speed=args.speed,
        )
    if result["error"]:  # does not fit: the one line with the numbers, the JSON still printed
        print(f"eatt: error: {result['error']}", file=sys.stderr)
    emit(result, args.json, _text)
    return EXIT_OK if result["routed"] else EXIT_CHECK_FAILED


def _wrapper(w: dict | None) -> str:
    """The head's words for --wrapper: the serial shell, or a folded engine's own ports."""
    if not w:
        return ""
    if "axis_pins" in w:
        return f", AXI4-Stream ports on {w['axis_pins']} pins"
    return ", serial wrapper"


def _text(r: dict) -> str:
    """The report of one place-and-route run."""
    s = r["summary"]
    fmax = ", ".join(f"{c} {v:g} MHz" for c, v in r["fmax_mhz"].items()) or "none"
    util = r["utilization"]
    comb = util.get("TRELLIS_COMB", {})
    head = (
        f"{r['part']} ({r['device']}, speed grade {r.get('speed', 6)}"
        f"{', out of context' if r['out_of_context'] else ''}"
        f"{', -nodsp' if r['nodsp'] else ''}"
        f"{_wrapper(r['wrapper'])}):"
        f" {'routed' if r['routed'] else 'not routed'}"
    )
    if r["yosys"] is None:  # refused before any tool ran (the weights alone do not fit)
        return f"{head}\nnot fitting  {r['error']}"
    return "\n".join(
        [
            head,
            f"logic        COMB {comb.get('used', 0)}/{comb.get('available', 0)}"
            f" ({comb.get('percent', 0)} %), LUT4 {s['LUT4']}, DFF {s['DFF']},"
            f" CCU2C {s['CCU2C']}",
            f"blocks       MULT18X18D {s['MULT18X18D']}/"
            f"{util.get('MULT18X18D', {}).get('available', 0)}, DP16KD {s['DP16KD']}/"
            f"{util.get('DP16KD', {}).get('available', 0)}, IO {s.get('IO', 0)}"
            + _moved(r.get("bram_outreg"), "sides", "block RAM output register")
            + _moved(r.get("dsp_regs"), "multipliers", "MULT18X18D register"),
            f"Fmax         {fmax} (constraint {r['constraint_mhz']:g} MHz)",
            rate.line(r.get("throughput")),
            f"time         {r['seconds']:.0f} s, peak {r['peak_mb']} MiB"
            + (f"\nbitstream    {r['bitstream']}" if r["bitstream"] else "")
            + (f"\nnot fitting  {r['error']}" if r["error"] else ""),
        ]
    )


def _moved(moved: dict | None, key: str, what: str) -> str:
    """The flip-flops a pass moved into blocks' own registers (rtl_sim/ecp5_outreg.py: block
    RAM read sides, rtl_sim/ecp5_dspreg.py: multipliers); "" when it moved none."""
    if not moved or not moved[key]:
        return ""
    n = moved[key]
    return f"; {moved['flip_flops']} flip-flops moved into {n} {what}{'s' if n != 1 else ''}"
