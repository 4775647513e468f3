"""`eatt power`: energy per call of a core from its synthesized netlist's switching activity
(--target asic: standard cells, Yosys, a gate-level simulation, OpenSTA; --target fpga: the
ECP5-mapped netlist's toggles per primitive class, a SAIF and a Vivado script, a proxy energy)."""

from __future__ import annotations

from eatt.cli.common import BoundedInt, PositiveFloat, add_json, emit
from eatt.cli.exits import EXIT_CHECK_FAILED, EXIT_OK, CommandError, tool_failures
from eatt.config import CoreConfig, check_vectors
from eatt.quant.vectors import capture_inputs, model_line, model_mismatches
from eatt.rtl_sim import throughput as rate
from eatt.rtl_sim.clock_gating import DEFAULT_MIN_FLIP_FLOPS
from eatt.rtl_sim.fpga_energy import BASIS_KEY, CLASSES, load_coefficients
from eatt.rtl_sim.fpga_power import fpga_power
from eatt.rtl_sim.generate import load_metadata
from eatt.rtl_sim.memory_energy import DEFAULT_NODE_NM, NODES_NM, WEIGHT_PLACES
from eatt.rtl_sim.power import DEFAULT_LIBERTY, ICARUS_CYCLES, LIBERTIES, SIMULATORS, power

HELP = "energy per call from the synthesized netlist's switching activity (ASIC cells or FPGA)"
#: the RTL levels eatt power measures: the cores (not the windowed unit)
CORE_LEVELS = ("alignment", "attention", "folded")


def add_arguments(p) -> None:
    p.add_argument("dir", metavar="DIR", help="a core folder written by `eatt rtl`")
    p.add_argument(
        "--vectors", action=BoundedInt, default=100, help="input vectors simulated (100)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random vectors")
    p.add_argument(
        "--inputs", metavar="ACTS.npz", help="simulate these captured vectors (eatt capture)"
    )
    p.add_argument(
        "--target",
        choices=("asic", "fpga"),
        default="asic",
        help="asic (standard cells, the default) or fpga (ECP5 primitives' toggles, a SAIF and a "
        "Vivado script, a proxy energy; docs/power.md)",
    )
    p.add_argument(
        "--liberty",
        metavar="LIB",
        help=f"asic: {' or '.join(LIBERTIES)} (Debian's OSU cells) or a .lib file "
        f"({DEFAULT_LIBERTY})",
    )
    p.add_argument(
        "--fpga-coefficients",
        metavar="FILE",
        help="fpga: the proxy's pJ per transition per primitive class (YAML/JSON; default "
        "eatt/configs/fpga_energy.yaml, VTR's academic 45 nm FPGA)",
    )
    p.add_argument(
        "--clock",
        action=PositiveFloat,
        what="a period in ns",
        default=10.0,
        metavar="NS",
        help="clock period (10)",
    )
    p.add_argument(
        "--timeout", action=PositiveFloat, what="seconds", metavar="S", help="seconds for each tool"
    )
    p.add_argument(
        "--memory-node",
        type=int,
        choices=NODES_NM,
        metavar="NM",
        help="asic: the folded engine's memory macros priced by CACTI at this node "
        f"({DEFAULT_NODE_NM}; {', '.join(map(str, NODES_NM))}) and scaled to the Liberty's",
    )
    p.add_argument(
        "--weights",
        choices=WEIGHT_PLACES,
        help="asic: the folded engine's weights on chip (sram, the default) or read from DRAM "
        "per bit (dram)",
    )
    p.add_argument(
        "--simulator",
        choices=SIMULATORS,
        help="the netlist's simulation: icarus (4-state, VCD), verilator (SAIF; a build "
        f"of minutes, then fast) or auto (the default: icarus up to {ICARUS_CYCLES:,} cycles)",
    )
    p.add_argument(
        "--clock-gating",
        action=BoundedInt,
        nargs="?",
        const=DEFAULT_MIN_FLIP_FLOPS,
        metavar="N",
        help="asic: gate the clock of every enable that loads at least N flip-flops "
        f"({DEFAULT_MIN_FLIP_FLOPS}) with a latch-based clock gate of the library's cells",
    )
    add_json(p)


def run(args) -> int:
    only = {  # the flags of the other target, given
        "asic": [("--fpga-coefficients", args.fpga_coefficients)],
        "fpga": [
            ("--liberty", args.liberty),
            ("--memory-node", args.memory_node),
            ("--weights", args.weights),
            ("--clock-gating", args.clock_gating),
        ],
    }
    for flag, value in only[args.target]:
        if value is not None:
            other = "asic" if args.target == "fpga" else "fpga"
            raise CommandError(f"{flag}: only for --target {other}, not --target {args.target}")
    meta = load_metadata(args.dir)  # a bad folder: one line, before any tool runs
    if meta["level"] not in CORE_LEVELS:
        raise CommandError(
            f"{args.dir}: level {meta['level']!r}: eatt power measures the cores "
            f"(alignment, attention, folded)"
        )
    cfg = CoreConfig.from_dict(meta["config"], source=f"{args.dir}/metadata.json")
    check_vectors(cfg, args.vectors)  # the size estimate, before any tool runs
    inputs = None if not args.inputs else capture_inputs(args.inputs, cfg, args.vectors)
    common = dict(
        vectors=args.vectors,
        seed=args.seed,
        inputs=inputs,
        clock_ns=args.clock,
        timeout=args.timeout,
    )
    if args.target == "fpga":
        load_coefficients(args.fpga_coefficients)  # a bad file: one line, before any tool runs
        with tool_failures():
            result = fpga_power(
                args.dir,
                coefficients=args.fpga_coefficients,
                simulator=args.simulator or "auto",
                **common,
            )
        emit(result, args.json, lambda r: _fpga_text(r, args.dir))
    else:
        with tool_failures():  # a tool failed or the netlist differs: the check failed
            result = power(
                args.dir,
                liberty=args.liberty or DEFAULT_LIBERTY,
                memory_node=args.memory_node or DEFAULT_NODE_NM,
                weights=args.weights or "sram",
                simulator=args.simulator or "auto",
                clock_gating=args.clock_gating,
                **common,
            )
        emit(result, args.json, lambda r: _text(r, args.dir))
    ok = not result["mismatches"] and not model_mismatches(result)
    return EXIT_OK if ok else EXIT_CHECK_FAILED


def _memory_lines(r: dict) -> list[str]:
    """The memory macros' lines of the report: the model, the node, the biggest spenders."""
    mem = r.get("memories")
    if not mem:
        return []
    scaled = mem["scaled_to"]
    lines = [
        f"  memories   {len(mem['macros'])} macros priced by {mem['source']} at "
        f"{mem['node_nm']} nm: {mem['at_node_pj_per_call']['total']:.4g} pJ"
        + (
            f", x {scaled['factor']:.3g} to {scaled['node_nm']:g} nm ({scaled['rule']})"
            if scaled
            else " (the Liberty's node is unknown: not scaled)"
        )
        + f"; weights in {mem['weights']}"
    ]
    top = sorted(mem["macros"], key=lambda m: -m["dynamic_pj_per_call"])[:4]
    lines += [
        f"             {m['name']}: {m['kind']} {m['depth']} x {m['width']} b, "
        f"{m['reads'] / r['vectors']:.4g} reads + {m['writes'] / r['vectors']:.4g} writes/call, "
        f"{m['dynamic_pj_per_call']:.4g} pJ at {mem['node_nm']} nm"
        for m in top
    ]
    return lines


def _path_part(ends: dict) -> str:
    """The worst path's ends, as a clause of the timing line ("" where OpenSTA named none)."""
    if not ends:
        return ""
    return f"; worst path {ends.get('startpoint', '?')} -> {ends.get('endpoint', '?')}"


def _gating_part(r: dict) -> str:
    pj = r["energy_split_per_call_pj"].get("clock_gating")
    return "" if pj is None else f" + clock gates {pj:.4g}"


def _gating_lines(r: dict) -> list[str]:
    g = r.get("clock_gating") or {}
    if not g.get("gates"):
        return []
    return [
        f"  gating     {g['gates']} clock gates ({' + '.join(g['cells'])}) clock "
        f"{g['gated_flip_flops']:,} of {g['flip_flops']:,} flip-flops (enables of >= "
        f"{g['min_flip_flops']})"
    ]


def _simulator(r: dict) -> str:
    return {"icarus": "Icarus", "verilator": "Verilator"}.get(r["sim"].get("simulator"), "?")


def _text(r: dict, folder: str) -> str:
    """The report of one power run, a line per measure."""
    e, p, sta = r["energy_per_call_pj"], r["power_mw"], r["sta"]
    lines = "\n".join(
        [
            f"{r['top']} on {r['liberty']} ({r['voltage']:g} V), {r['vectors']} vectors "
            f"({r['inputs']}), {r['cycles']:,} cycles in {_simulator(r)}: netlist = golden "
            f"model, {r['mismatches']} mismatches",
            f"area         {r['area_um2']:,.0f} um^2, {r['cells']:,} cells",
            f"energy/call  {e['total']:.4g} pJ"
            + (
                f" = netlist {e['netlist']:.4g} + memory macros {e['memories']:.4g}"
                if "memories" in e
                else ""
            )
            + f" (netlist: switching {e['switching']:.4g}, internal {e['internal']:.4g}, "
            f"leakage {e['leakage']:.3g})",
            *_memory_lines(r),
            "  dynamic    = flip-flops {flip_flops:.4g} + logic {logic:.4g} + nets of the "
            "input ports (the clock among them) {input_ports:.4g}".format(
                **r["energy_split_per_call_pj"]
            )
            + _gating_part(r)
            + " pJ",
            *_gating_lines(r),
            "  by stage   "
            + ", ".join(f"{k} {v['dynamic_pj']:.4g}" for k, v in r["by_stage"].items())
            + " pJ (docs/power.md: logic counts for the registers it computes)",
            f"power        {p['total']:.4g} mW at {r['clock_ns']:g} ns (dynamic "
            f"{p['dynamic']:.4g}, leakage {p['leakage']:.3g})",
            f"timing       worst slack {sta['worst_slack_ns']:g} ns at {r['clock_ns']:g} ns: "
            f"closes at {sta['fmax_mhz']:g} MHz (OpenSTA, ideal clock, no wire load)"
            + _path_part(sta.get("worst_path") or {}),
            rate.line(r.get("throughput")),
            f"vectorless   {sta['vectorless_energy_per_call_pj']:.4g} pJ/call (OpenSTA: input "
            f"activity {r['input_activity']:.3g}/cycle propagated, not the simulation's)",
            f"time         {r['seconds']:.0f} s; files in {folder}/power",
        ]
    )
    fail = "\nresult: FAIL (the model's own outputs differ)" if model_mismatches(r) else ""
    return lines + model_line(r.get("vs_model"), "the netlist") + fail


def _fpga_text(r: dict, folder: str) -> str:
    """The report of one --target fpga run: the primitive table, the proxy and its sources."""
    proxy, coeffs = r["proxy_energy_per_call_pj"] or {}, r["coefficients"]
    why = "; ".join(r["yosys"].get("nobram_why") or ["beyond eatt's DP16KD model"])
    bram = f" (block RAM mapped as LUT RAM: {why})" if r["yosys"]["nobram"] else ""
    where = f" in {_simulator(r)}" if r["sim"].get("simulator") else ""
    lines = [
        f"{r['top']} mapped to ECP5 primitives (Yosys synth_ecp5{bram}), {r['vectors']} vectors "
        f"({r['inputs']}), {r['cycles']:,} cycles{where}: netlist = golden model, "
        f"{r['mismatches']} mismatches",
        f"{'class':<7}{'cells':>8}{'toggles/call':>14}{'proxy pJ/call':>15}  "
        "(pJ per transition x transitions/call of)",
    ]
    cells = 0
    for name in CLASSES:
        row, pj, basis = r["primitives"][name], proxy.get(name), coeffs["basis"][name]
        cells += row["cells"]
        of, basis = row[BASIS_KEY[basis]], basis.replace("_", " ")
        how = "no coefficient" if coeffs["pj"][name] is None else f"{coeffs['pj'][name]:g} x"
        lines.append(
            f"{name:<7}{row['cells']:>8,}{row['toggles_per_call']:>14,.1f}"
            f"{'-' if pj is None else f'{pj:.4g}':>15}  ({how} {basis}s {of:,.1f})"
        )
    total = "-" if not proxy else f"{proxy['total']:.4g}"
    lines.append(f"{'total':<7}{cells:>8,}{'':>14}{total:>15}")
    without = f"; no coefficient for {', '.join(coeffs['without'])}" if coeffs["without"] else ""
    lines += [
        "proxy        a proxy, not a measurement of a real part: toggles x the pJ per transition "
        f"of {coeffs['summary'] or '?'}{without}",
        f"             coefficients and their sources: {coeffs['file']}",
        f"vivado       a real number for a Xilinx part: cd {folder}/power_fpga && vivado -mode "
        "batch -source vivado_power.tcl (reads activity.saif, writes power.rpt)",
        f"time         {r['seconds']:.0f} s; files in {folder}/power_fpga",
    ]
    fail = "\nresult: FAIL (the model's own outputs differ)" if model_mismatches(r) else ""
    return "\n".join(lines) + model_line(r.get("vs_model"), "the netlist") + fail
