"""`eatt resources`: Yosys synth_xilinx (xc7) cell counts of an RTL folder, and da4ml's
estimate where it applies."""

from __future__ import annotations

from eatt.cli.common import add_json, emit
from eatt.cli.exits import EXIT_OK, tool_failures
from eatt.rtl_sim.resources import resources_report

HELP = "Yosys synth_xilinx (xc7) cell counts of an RTL folder"


def add_arguments(p) -> None:
    p.add_argument("dir", metavar="DIR", help="a folder written by `eatt rtl`")
    p.add_argument("--no-nodsp", action="store_true", help="skip the all-fabric (-nodsp) run")
    p.add_argument(
        "--no-abc-verify",
        action="store_true",
        help="skip ABC's check of the mapped netlist (same cells; faster on big cores)",
    )
    add_json(p)


def run(args) -> int:
    with tool_failures():  # synthesis failed: the log tail follows the first line
        result = resources_report(
            args.dir, nodsp=not args.no_nodsp, abc_verify=not args.no_abc_verify
        )

    def text(r: dict) -> str:
        cells = ("LUT", "FF", "CARRY4", "DSP48E1", "BRAM")
        lines = [
            f"{name:<12} " + ", ".join(f"{c} {v[c]}" for c in cells)
            for name, v in r.items()
            if name.startswith("yosys")
        ]
        if "da4ml" in r:
            d = r["da4ml"]
            lines.append(
                f"{'da4ml':<12} LUT estimate {d['LUT_estimate']}, adder depth "
                f"{d['adder_depth']:g}, multipliers {d['multipliers']}"
            )
        return "\n".join(lines)

    emit(result, args.json, text)
    return EXIT_OK
