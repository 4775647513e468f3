"""`eatt sim`: simulate an RTL folder (Verilator or Icarus, with cocotb) against the golden
model, on random or captured vectors."""

from __future__ import annotations

from eatt.cli.common import BoundedInt, add_json, emit
from eatt.cli.exits import EXIT_CHECK_FAILED, EXIT_OK, CommandError, tool_failures
from eatt.config import CoreConfig, check_vectors
from eatt.quant.vectors import capture_inputs, load_window_capture, model_line
from eatt.rtl_sim.generate import load_metadata
from eatt.rtl_sim.netlist_sim import NETLISTS, simulate_netlist
from eatt.rtl_sim.runner import simulate

HELP = "simulate an RTL folder (Verilator, Icarus) vs golden"
SIMULATORS = {"verilator": "Verilator", "icarus": "Icarus Verilog"}


def add_arguments(p) -> None:
    p.add_argument("dir", metavar="DIR", help="a folder written by `eatt rtl`")
    p.add_argument(
        "--vectors", action=BoundedInt, default=1000, help="vectors (edge vectors first)"
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the random vectors")
    p.add_argument(
        "--simulator",
        choices=sorted(SIMULATORS),
        default="verilator",
        help="verilator (2-state, fast) or icarus (4-state: unknown values show as X)",
    )
    p.add_argument(
        "--inputs", metavar="ACTS.npz", help="simulate these captured vectors (eatt capture)"
    )
    p.add_argument(
        "--netlist",
        choices=NETLISTS,
        help="simulate the folder's mapped netlist instead of its RTL (ecp5: Yosys synth_ecp5 "
        "with the ECP5 cell models, what eatt pnr places; outputs only, no activity)",
    )
    p.add_argument(
        "--dsp-registers",
        action="store_true",
        help="with --netlist ecp5: the netlist eatt pnr --dsp-registers places (each "
        "multiplier's flip-flops in its MULT18X18D's registers)",
    )
    add_json(p)


def run(args) -> int:
    if args.dsp_registers and not args.netlist:
        raise CommandError("--dsp-registers: a mapped netlist's option (with --netlist ecp5)")
    meta = load_metadata(args.dir)
    cfg = CoreConfig.from_dict(meta["config"], source=f"{args.dir}/metadata.json")
    check_vectors(cfg, args.vectors)
    inputs = None
    if args.inputs:
        if meta["level"] == "window":  # a windowed layer's decoding steps
            inputs = load_window_capture(args.inputs, cfg, args.vectors)["steps"]
        elif meta["level"] in ("alignment", "attention", "folded"):
            inputs = capture_inputs(args.inputs, cfg, args.vectors)
        else:
            raise CommandError(f"--inputs: captures are of attention cores, not a {cfg.kind} unit")
    if args.netlist:
        return _netlist(args, inputs)
    with tool_failures(first_line_only=False):  # a handshake assertion, a failed build
        result = simulate(
            args.dir, vectors=args.vectors, seed=args.seed, simulator=args.simulator, inputs=inputs
        )

    if inputs is not None:
        result["captured"] = True

    def text(r: dict) -> str:
        lines = [
            f"RTL simulation ({SIMULATORS[r.get('simulator', 'verilator')]} + cocotb): "
            f"{r['vectors']} {'captured ' if r.get('captured') else ''}vectors, "
            f"{r['mismatches']} mismatching; latency {r['latency_cycles']} cycles, "
            f"II {r['ii_cycles']} cycles; build {r['build_seconds']:.1f} s"
            + (" (cached)" if r.get("cached_build") else "")
            + f", sim {r['sim_seconds']:.2f} s",
        ]
        if r.get("first_mismatch"):
            lines.append(f"  first mismatch: {r['first_mismatch']['message']}")
        lines[-1] += model_line(r.get("vs_model"), "RTL")
        lines.append("  result: " + ("PASS" if r["ok"] else "FAIL"))
        return "\n".join(lines)

    emit(result, args.json, text)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED


def _netlist(args, inputs) -> int:
    """--netlist: the mapped netlist against the golden model (rtl_sim/netlist_sim.py)."""
    with tool_failures(first_line_only=False):
        result = simulate_netlist(
            args.dir,
            vectors=args.vectors,
            seed=args.seed,
            inputs=inputs,
            simulator=args.simulator,
            dsp_registers=args.dsp_registers,
        )

    def text(r: dict) -> str:
        y = r["yosys"]
        lines = [
            f"{r['netlist'].upper()} netlist of {r['top']} (Yosys synth_ecp5"
            + (", cached" if y.get("cached") else f", {y['seconds']:.0f} s")
            + f"; {SIMULATORS[r['sim']['simulator']]}): {r['vectors']} "
            f"{'captured ' if inputs is not None else ''}vectors, {r['mismatches']} mismatching "
            f"against the golden model; {r['cycles']:,} cycles; build "
            f"{r['sim']['build_seconds']:.1f} s"
            + (" (cached)" if r["sim"].get("cached_build") else "")
            + f", sim {r['sim']['sim_seconds']:.1f} s",
        ]
        if r.get("first_mismatch"):
            lines.append(f"  first mismatch: {r['first_mismatch']['message']}")
        lines[-1] += model_line(r.get("vs_model"), "netlist")
        lines.append("  result: " + ("PASS" if r["ok"] else "FAIL"))
        return "\n".join(lines)

    emit(result, args.json, text)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED
