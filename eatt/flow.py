"""`eatt flow`: the main job. One core and its peer (E-ATT <-> vanilla, same weights and formats)
through every stage, each checked against the golden model, then one comparison report.

Stages per core: golden self-check (widths, float model within the derived bound), QONNX export
executed by qonnx, the hls4ml project made from that file with its C simulation, RTL at the
alignment and attention levels simulated in Verilator by cocotb, Yosys resources of the
alignment RTL and its measured energy (eatt power: the OSU-cell netlist simulated on the same
vectors, energy per call, area, the clock it closes; skipped with a line where its Debian tools
are missing). Before them, the analytic energy model. Then the windowed attention unit (kind
window, docs/window.md; the embedded default unless the config is itself a window unit) through
the same stages: golden, QONNX, hls4ml C simulation, sequential RTL in Verilator with its
cycles per window size, Yosys. Artifacts go under the output folder (default runs/flow), one
sub-folder per core and ``window``, and the report: report.md (the comparison as Markdown
tables), report.json (the whole result) and report.png (E-ATT/vanilla ratios, window cycles).

The output folder is checked, and the tools every stage needs are looked for, before any work:
a folder that is not empty and not eatt's is refused (eatt.outdir.OutputError), a missing tool
is eatt.rtl_sim.tools.ToolMissing whose one-line message says what was written.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

from eatt.config import CoreConfig, atomic_write, atomic_write_text, default_config
from eatt.mechanisms import mechanism_of
from eatt.model import energy
from eatt.outdir import check_output_dir, claim_dir
from eatt.progress import say
from eatt.quant.check import format_golden_check
from eatt.quant.golden import CoreWeights, random_weights
from eatt.quant.vectors import model_line
from eatt.rtl_sim.folded import peer_foldings
from eatt.rtl_sim.resources import find_yosys
from eatt.rtl_sim.tools import ToolMissing, check_build_tools, find_verilator
from eatt.steps import (
    TIMES_FILE,
    BuildContext,
    BuildOptions,
    earlier_results,
    run_steps,
    select,
)
from eatt.units import unit_for

#: the core each foldable kind is compared with in a flow (every other kind's peer: vanilla)
PEER = {"eatt": "vanilla", "vanilla": "eatt"}
#: the kinds' names in a report's headings
NAMES = {"eatt": "E-ATT", "dense": "Dense", "randinit": "RandInit"}
CELLS = ("LUT", "FF", "CARRY4", "DSP48E1")
#: vectors the flow's measured-energy stage simulates on the netlist (eatt power)
POWER_VECTORS = 100
#: what a flow folder holds (sub-folders and report files)
UNITS = ("eatt", "vanilla", "window")
#: sub-folders of a flow folder written before the marker (the vanilla core was "dot" then)
LEGACY_UNITS = ("eatt", "dot", "window")
REPORT_FILES = {"md": "report.md", "json": "report.json", "png": "report.png"}


def log(message: str) -> None:
    say(message)


def is_legacy_flow(path: Path) -> bool:
    """A flow folder written before eatt.outdir's marker: only core / window sub-folders (and
    report files), at least one of them holding its exported QONNX file."""
    names = {p.name for p in path.iterdir()}
    if not names <= {*LEGACY_UNITS, *REPORT_FILES.values()}:
        return False
    return any((path / u / f).is_file() for u in LEGACY_UNITS for f in ("core.onnx", "window.onnx"))


def check_tools(resources: bool = True) -> None:
    """ToolMissing (one line) for the first tool a flow stage would miss: g++ for hls4ml's C
    simulation, Verilator, make, a C++ compiler and cocotb for RTL simulation, Yosys."""
    from eatt.hls.project import check_csim_tools  # hls4ml

    check_csim_tools()
    find_verilator()
    check_build_tools()
    if importlib.util.find_spec("cocotb_tools") is None:
        raise ToolMissing("cocotb not found: pip install 'cocotb>=2'")
    if resources:
        find_yosys()


def open_flow_dir(out_dir: Path, resources: bool) -> None:
    """After a flow's own checks of its input and out_dir: the tools every stage needs
    (ToolMissing, "nothing was written"), then out_dir claimed as a flow folder and an earlier
    run's report removed (it must not outlive a failed run)."""
    try:
        check_tools(resources)
    except ToolMissing as err:
        raise ToolMissing(f"{err}; nothing was written") from None
    target = claim_dir(out_dir, "flow", legacy=is_legacy_flow)
    for name in (*REPORT_FILES.values(), TIMES_FILE):
        (target / name).unlink(missing_ok=True)


def folded_config(cfg: CoreConfig, reuse_factor: int) -> CoreConfig:
    """cfg with ``reuse_factor`` set, after checking that both kinds fold to it (the flows
    build the core and its peer): ValueError (one line) for a kind other than eatt / vanilla
    (the window unit is already sequential) or an R below the folded engine's fewest
    cycles."""
    if cfg.kind not in PEER:
        raise ValueError(
            f"--reuse-factor: folds the attention cores (kinds eatt and vanilla), not "
            f"{cfg.kind} (the window unit is already sequential)"
        )
    cfg = cfg.replace(reuse_factor=reuse_factor)
    peer_foldings(cfg, reuse_factor)  # the one-line error of an R below the fewest cycles
    return cfg


def flow_folding(cfg: CoreConfig) -> tuple[CoreConfig, dict | None]:
    """How a flow builds cfg's core: (cfg, None) for the unrolled core (reuse_factor 1); for
    reuse_factor R > 1 the folding of cfg's kind at equal cycles with its peer
    (eatt.rtl_sim.folded.peer_foldings: vanilla's folding for R, E-ATT at the same lanes and
    simd with the narrowest multiply walk that is not slower), given to the builders as a
    folding with reuse_factor 1, which R no longer picks per kind."""
    if cfg.reuse_factor <= 1:
        return cfg, None
    return cfg.replace(reuse_factor=1), peer_foldings(cfg, cfg.reuse_factor)[cfg.kind]


def core_energy(cfg: CoreConfig, table: str = energy.DEFAULT_TABLE) -> dict:
    """This core's operation counts and energy (hardware counting), E-ATT next to vanilla (and
    cfg's kind where it is another)."""
    out: dict = {}
    for kind in dict.fromkeys((*energy.CORE_KINDS, cfg.kind)):
        for level in energy.CORE_LEVELS:
            counts = energy.core_counts(kind, cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, level)
            out.setdefault(kind, {})[level] = {
                "adds": counts.adds,
                "muls": counts.muls,
                "selections": counts.selections,
                "energy_pj": {t: energy.energy_pj(counts, table, t) for t in energy.TABLES[table]},
            }
    return out


#: the steps of a core (eatt.steps), and of the windowed unit; Yosys and eatt power are left
#: out with resources=False
CORE_STEPS = ("golden", "export", "hls", "rtl", "sim", "resources", "power")
WINDOW_STEPS = ("golden", "export", "hls", "rtl", "sim", "resources")
SYNTH_STEPS = ("resources", "power")


def window_span(span: tuple) -> tuple | None:
    """The span of the windowed unit beside the cores for the cores' (from, to): a step it does
    not have (power) as the stop means its last; as the start, nothing of it runs (None)."""
    start, stop = span
    if start is not None and start not in WINDOW_STEPS:
        return None
    return start, stop if stop is None or stop in WINDOW_STEPS else None


def flow_steps(steps: tuple, resources: bool) -> tuple:
    return steps if resources else tuple(s for s in steps if s not in SYNTH_STEPS)


def mechanism_steps(cfg: CoreConfig, steps: tuple) -> tuple:
    """The steps a core's mechanism has (eatt.mechanisms): all of them, or up to the QONNX
    export where it has no HLS kernel yet (every registered mechanism has one today)."""
    if mechanism_of(cfg).hls_score is None:
        return steps[: steps.index("export") + 1]
    return steps


def run_core(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int,
    vectors: int,
    out_dir: Path,
    resources: bool,
    inputs: str | Path | None = None,
    span: tuple = (None, None),
) -> dict:
    """Every step of CORE_STEPS for one core; returns {step: result}, "ok" and
    "time_per_step". ``inputs``: a capture file of this core (`eatt capture`): its first
    ``vectors`` vectors replace the random ones in the QONNX, hls4ml and RTL checks. ``span``:
    the first and last step to run (--from-step, --to-step; None: all)."""
    # the folded engine and layer (docs/folded.md, docs/hls.md), at equal cycles with the peer
    build_cfg, folding = flow_folding(cfg)
    options = BuildOptions(
        levels=("folded",) if folding is not None else ("alignment", "attention"),
        folding=folding,
        hls_reuse_factor=1,
        power_vectors=POWER_VECTORS,
        power_optional=True,  # Debian's tools are optional for a flow
        by_level=True,
    )
    ctx = BuildContext(
        cfg, weights, out_dir, seed, vectors, options, inputs=inputs, rtl_cfg=build_cfg,
        tag=f"flow [{cfg.kind}]",
    )  # fmt: skip
    return _run_steps(ctx, flow_steps(CORE_STEPS, resources), span)


def _run_steps(ctx: BuildContext, names: tuple, span: tuple) -> dict:
    """The steps on ctx (eatt.steps.run_steps, each result kept in out_dir/steps.json); the
    results with "ok" (every check passed) and "time_per_step"."""
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    r = dict(run_steps(ctx, names, *span, save=_jsonable))
    r["ok"] = not ctx.failed
    r["steps"] = select(names, *span)
    r["time_per_step"] = ctx.times
    return r


def run_window(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int,
    vectors: int,
    out_dir: Path,
    resources: bool,
    inputs: None = None,
    span: tuple = (None, None),
) -> dict:
    """Every step of WINDOW_STEPS for the windowed unit (kind window): its sequential RTL, the
    cycles rule checked on every step; returns {step: result}, "ok" and "time_per_step"."""
    ctx = BuildContext(
        cfg, weights, out_dir, seed, vectors, BuildOptions(levels=()), onnx_name="window.onnx",
        tag="flow [window]",
    )  # fmt: skip
    return {"config": cfg.to_dict(), **_run_steps(ctx, flow_steps(WINDOW_STEPS, resources), span)}


def run_flow(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int = 1,
    vectors: int = 1000,
    out_dir: str | Path = "runs/flow",
    resources: bool = True,
    window: bool = True,
    inputs: str | Path | None = None,
    span: tuple = (None, None),
) -> dict:
    """The core and its peer, then the windowed unit (``window=False`` skips it). A window
    config runs the windowed unit alone. Ends with report.md, report.json and report.png in
    out_dir (their paths in ``result["report"]``). ``inputs``: a capture file of cfg's core
    (`eatt capture`), checked at every level of that core instead of random vectors (the peer
    computes another function and keeps random ones). ``span``: (--from-step, --to-step), the
    first and last of the steps (eatt.steps; CORE_STEPS) to run, None for all: a flow that
    starts later reads the earlier steps' results from the folder (each unit's steps.json).
    Each unit's wall time and peak memory per step go into out_dir/time_per_step.json.

    Before any work: OutputError when out_dir is a folder eatt must not write to, ToolMissing
    ("nothing was written") when a tool is missing. A tool found missing later (it cannot be
    used, though it was found) is ToolMissing naming out_dir, which holds the stages done.
    """
    given = Path(out_dir)
    check_output_dir(given, "flow", legacy=is_legacy_flow)
    open_flow_dir(given, resources)
    try:
        result = _run(cfg, weights, seed, vectors, given, resources, window, inputs, span)
    except ToolMissing as err:
        raise ToolMissing(f"{err} (the stages done so far are in {given})") from None
    if any(span):
        result["span"] = {"from": span[0], "to": span[1]}
    write_times(result, given)
    result["report"] = write_report(result, given)
    return result


def write_times(result: dict, out_dir: Path) -> dict:
    """out_dir/time_per_step.json: each unit's wall time and peak memory per step."""
    units = {
        **result.get("cores", {}),
        **({"window": result["window"]} if "window" in result else {}),
    }
    times = {name: u.get("time_per_step", {}) for name, u in units.items()}
    atomic_write_text(out_dir / TIMES_FILE, json.dumps(times, indent=1) + "\n")
    return times


def _run(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int,
    vectors: int,
    out_dir: Path,
    resources: bool,
    window: bool,
    inputs: str | Path | None = None,
    span: tuple = (None, None),
) -> dict:
    result = {"config": cfg.to_dict(), "seed": seed, "out_dir": str(out_dir)}
    if inputs is not None:
        result["inputs"] = str(inputs)
    wunit = unit_for("window")
    wcfg = default_config(wunit.kinds[0])
    beside = window and cfg.kind not in wunit.kinds  # the default windowed unit beside the cores
    wspan = window_span(span)
    beside = beside and wspan is not None
    if beside:  # --from-step: its earlier steps are there, before any work
        earlier_results(out_dir / "window", wcfg, flow_steps(WINDOW_STEPS, resources), *wspan)
    # the unit's flow (eatt.units): run_cores for eatt/vanilla, run_window_unit for window
    flow = unit_for(cfg).load("flow")
    part = flow(cfg, weights, seed, vectors, out_dir, resources, inputs, span)
    result.update(part if "cores" in part else {"cores": {}, **part})
    if beside:
        wflow, wweights = wunit.load("flow"), random_weights(wcfg, seed)
        result.update(wflow(wcfg, wweights, seed, vectors, out_dir, resources, None, wspan))
    cores = result["cores"]
    result["ok"] = all(c["ok"] for c in cores.values()) and result.get("window", {}).get("ok", True)
    return result


def shared_weights(cfg: CoreConfig, weights: CoreWeights, seed: int) -> CoreWeights:
    """The weights of a peer core: the same integer weights where its mechanism takes the
    same (the comparison changes the mechanism, nothing else), else its own alignment weights
    drawn from the seed beside the same W_V and W_O."""
    own = random_weights(cfg, seed).as_dict()
    if set(own) == set(weights.names):
        return weights
    return CoreWeights(**{**own, "wv": weights.wv, "wo": weights.wo})


def run_cores(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int,
    vectors: int,
    out_dir: Path,
    resources: bool,
    inputs: str | Path | None = None,
    span: tuple = (None, None),
) -> dict:
    """The core unit's flow: cfg's kind and its peer (E-ATT vs vanilla) with the same weights, each
    through run_core; returns the result's "energy", "comparison" and "cores" entries."""
    cores, result = {}, {}
    paper = energy.energy_report(length=max(cfg.len_q, cfg.len_k), dim=cfg.dim)
    peer = PEER.get(cfg.kind, "vanilla")
    for kind in (cfg.kind, peer):  # --from-step: both cores' earlier steps, first
        core_cfg = cfg if kind == cfg.kind else cfg.replace(kind=kind)
        earlier_results(out_dir / kind, core_cfg, flow_steps(CORE_STEPS, resources), *span)
    for kind in (cfg.kind, peer):
        core_cfg = cfg if kind == cfg.kind else cfg.replace(kind=kind)
        given = inputs if kind == cfg.kind else None  # the capture is of cfg's core
        out = out_dir / kind
        core_weights = shared_weights(core_cfg, weights, seed)
        cores[kind] = run_core(core_cfg, core_weights, seed, vectors, out, resources, given, span)
    result["energy"] = {"paper": paper, "core": core_energy(cfg)}
    result["comparison"] = compare(cores, core_energy(cfg))
    result["cores"] = cores
    return result


def run_window_unit(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int,
    vectors: int,
    out_dir: Path,
    resources: bool,
    inputs: None = None,
    span: tuple = (None, None),
) -> dict:
    """The window unit's flow: run_window in out_dir/window; returns the result's "window"."""
    out = out_dir / "window"
    return {"window": run_window(cfg, weights, seed, vectors, out, resources, None, span)}


def compared_kinds(cores: dict) -> tuple[str, str]:
    """The two kinds a flow compares, in the report's order: E-ATT before vanilla, else the
    config's kind before its peer (vanilla)."""
    return ("eatt", "vanilla") if {"eatt", "vanilla"} <= set(cores) else tuple(cores)[:2]


def compare(cores: dict, core_en: dict) -> list[dict]:
    """Rows of the report: metric, the kind (E-ATT), its peer (vanilla), kind / peer; each
    row's values under the kinds' names."""
    rows = []
    a, b = compared_kinds(cores)

    def add(metric: str, get) -> None:
        try:
            e, d = get(cores[a]), get(cores[b])
        except KeyError:
            return
        ratio = e / d if isinstance(e, (int, float)) and d else None
        rows.append({"metric": metric, a: e, b: d, "ratio": ratio})

    for level in ("alignment", "attention"):
        for target in ("asic", "fpga"):
            e, d = (core_en[k][level]["energy_pj"][target] for k in (a, b))
            metric = f"{level} energy, {target} (pJ, analytic)"
            rows.append({"metric": metric, a: e, b: d, "ratio": e / d if d else None})
    for level in ("alignment", "attention", "folded"):
        add(f"{level} RTL latency (cycles)", lambda c, lv=level: c["sim"][lv]["latency_cycles"])
        add(f"{level} RTL II (cycles)", lambda c, lv=level: c["sim"][lv]["ii_cycles"])
    add("folded HLS iterations per call", lambda c: (c["hls"].get("iterations") or {})["total"])
    # the synthesized level: the alignment (unrolled cores) or the folded engine
    lv = next(iter(cores.get(a, {}).get("resources", {})), "alignment")
    for cell in (*CELLS, "BRAM") if lv == "folded" else CELLS:
        add(f"{lv} {cell} (Yosys xc7)", lambda c, k=cell: c["resources"][lv][k])
    add(
        f"{lv} energy, measured (pJ/call, OSU)",
        lambda c: c["power"][lv]["energy_per_call_pj"]["total"],
    )
    for stage in ("projections", "scores", "softmax", "values"):  # rtl_sim/stages.py
        add(
            f"{lv} {stage} energy, measured (pJ/call, dynamic)",
            lambda c, s=stage: c["power"][lv]["by_stage"][s]["dynamic_pj"],
        )
    add(f"{lv} area (um^2, OSU 0.18)", lambda c: c["power"][lv]["area_um2"])
    add(f"{lv} Fmax (MHz, OpenSTA)", lambda c: c["power"][lv]["sta"]["fmax_mhz"])
    add("mismatches, all levels", lambda c: _mismatches(c))
    return rows


def _mismatches(core: dict) -> int:
    return (
        core["export"]["check"]["mismatches"]
        + core["hls"]["csim"]["mismatches"]
        + sum(s["mismatches"] for s in core["sim"].values())
    )


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def format_window(w: dict, out_dir: str) -> list[str]:
    """The windowed unit's part of the report."""
    from eatt.quant.export import format_check  # qonnx/onnx

    c = w["config"]
    lines = [
        "",
        f"=== windowed unit: {c['window_score']} scores, l_k {c['len_k']}, D {c['window_d']}, "
        f"position {c['position']} ({out_dir}/window) ===",
    ]
    if "golden" in w:
        lines.append(format_golden_check(w["golden"]))
    if "export" in w:
        lines.append(format_check(w["export"]["check"]))
    if "hls" in w:
        cs = w["hls"]["csim"]
        lines.append(
            f"hls4ml C simulation vs golden: {cs['vectors']} random + {cs['edge_vectors']} edge "
            f"steps, {cs['mismatches']} mismatching"
        )
    if "sim" in w:
        lines += _window_sim_lines(w["sim"])
    if "resources" in w:
        res = w["resources"]
        lines.append(
            "Yosys xc7, windowed unit: " + ", ".join(f"{k} {res[k]}" for k in (*CELLS, "BRAM"))
        )
    return lines


def _window_sim_lines(s: dict) -> list[str]:
    lines = [
        f"RTL: Verilator + cocotb, {s['vectors']} steps over {s['memories']} memories, "
        f"{s['mismatches']} mismatching; {s['cycles_rule']} "
        f"({'holds' if s['cycles_rule_holds'] else 'DOES NOT HOLD'} on every step)",
    ]
    if s.get("first_mismatch"):
        lines.append(f"  first mismatch: {s['first_mismatch']['message']}")
    by_rows = s["cycles_by_rows"]
    lines.append(
        "  cycles by window rows: "
        + ", ".join(
            f"{rows} rows: latency {v['latency_cycles']}, II {v['ii_cycles']}"
            for rows, v in sorted(by_rows.items(), key=lambda kv: int(kv[0]))
        )
    )
    return lines


def _core_lines(c: dict) -> list[str]:
    """One core's stages, as format_flow prints them (no heading)."""
    from eatt.quant.export import format_check  # qonnx/onnx

    lines = []
    if "golden" in c:
        lines.append(format_golden_check(c["golden"]))
    if "export" in c:
        lines.append(format_check(c["export"]["check"]))
    cs = (c.get("hls") or {}).get("csim")
    if cs:
        lines.append(
            f"hls4ml C simulation vs golden: {cs['vectors']} "
            f"{'captured' if cs.get('captured') else 'random'} + {cs['edge_vectors']} edge "
            f"vectors, {cs['mismatches']} mismatching"
        )
    if (c.get("hls") or {}).get("folding"):
        from eatt.hls.folding import format_folded  # hls4ml (registered on import)

        lines.append("  " + format_folded(c["hls"]))
    for level, meta in c.get("rtl", {}).items() if "sim" not in c else ():
        lines.append(f"RTL {level}: written ({meta.get('bytes', 0):,} bytes of SystemVerilog)")
    for level, s in c.get("sim", {}).items():
        lines.append(
            f"RTL {level}: Verilator + cocotb, {s['vectors']} "
            f"{'captured ' if s.get('captured') else ''}vectors, {s['mismatches']} "
            f"mismatching; latency {s['latency_cycles']} cycles, II {s['ii_cycles']}"
        )
        if s.get("first_mismatch"):
            lines.append(f"  first mismatch: {s['first_mismatch']['message']}")
        lines[-1] += model_line(s.get("vs_model"), f"RTL {level}")
    for lv, res in c.get("resources", {}).items():
        lines.append(f"Yosys xc7, {lv}: " + ", ".join(f"{k} {res[k]}" for k in CELLS))
    lv, p = next(iter(c.get("power", {}).items()), ("alignment", None))
    if p and "skipped" in p:
        lines.append(f"measured energy, {lv}: skipped ({p['skipped']})")
    elif p:
        lines.append(
            f"measured energy, {lv} ({p['liberty']}, netlist simulated on {p['vectors']} "
            f"vectors, {p['mismatches']} mismatching): {p['energy_per_call_pj']['total']:.4g} "
            f"pJ/call, {p['area_um2']:,.0f} um^2, closes at {p['sta']['fmax_mhz']:g} MHz"
        )
    return lines


def _paper_heading(r: dict) -> str:
    paper = r["energy"]["paper"]
    return f"the paper's levels at l={paper['length']}, d={paper['dim']}"


def _comparison_heading(r: dict) -> str:
    """The comparison's heading: what the two cores share, and how a folded flow paired them."""
    reuse = r["config"].get("reuse_factor", 1)
    paired = (
        f"; folded for reuse_factor {reuse} at equal cycles: vanilla's folding for it, E-ATT at "
        "its lanes and simd with the narrowest multiply walk that is not slower"
        if reuse > 1
        else ""
    )
    a, b = compared_kinds(r["cores"])
    shared = "same weights and formats" if a == "eatt" else "same W_V, W_O and formats"
    return f"{NAMES.get(a, a)} vs {NAMES.get(b, b)} ({shared}{paired})"


def _span_note(r: dict) -> str:
    """ " (steps from X to Y)" for a flow run with --from-step / --to-step, else ""."""
    span = r.get("span")
    if not span:
        return ""
    return f" (steps {span['from'] or 'first'} to {span['to'] or 'last'} only)"


def format_flow(r: dict) -> str:
    lines = []
    if "energy" in r:
        lines = [
            f"== energy: {_paper_heading(r)} ==",
            energy.format_energy_table(r["energy"]["paper"]),
        ]
    for kind, c in r["cores"].items():
        lines += ["", f"=== core: {kind} ({r['out_dir']}/{kind}) ===", *_core_lines(c)]
    if "comparison" in r:
        lines += ["", f"=== {_comparison_heading(r)} ==="]
        a, b = compared_kinds(r["cores"])
        lines.append(f"{'metric':<40} {a:>12} {b:>12} {a + '/' + b:>12}")
        for row in r["comparison"]:
            lines.append(
                f"{row['metric']:<40} {_fmt(row[a]):>12} {_fmt(row[b]):>12} "
                f"{_fmt(row['ratio']):>12}"
            )
    if "window" in r:
        lines += format_window(r["window"], r["out_dir"])
    lines += ["", "flow: " + ("PASS" if r["ok"] else "FAIL") + _span_note(r)]
    return "\n".join(lines)


# -- report files ---------------------------------------------------------------------------------
def _md_table(header: list[str], rows: list[list], right: int = 1) -> list[str]:
    """A Markdown table; columns from `right` on are right-aligned (numbers)."""
    align = ["---" if i < right else "---:" for i in range(len(header))]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    out += [
        "| " + " | ".join(_fmt(v) if not isinstance(v, str) else v for v in row) + " |"
        for row in rows
    ]
    return out


def _text_block(lines: list[str]) -> list[str]:
    return ["```text", *lines, "```"]


def format_markdown(r: dict) -> str:
    """report.md: what format_flow prints, with the comparison and the window cycles as
    Markdown tables."""
    c = r["config"]
    lines = [
        f"# eatt flow: {'PASS' if r['ok'] else 'FAIL'}{_span_note(r)}",
        "",
        f"Core: kind {c['kind']}, len_q {c['len_q']}, len_k {c['len_k']}, dim {c['dim']}, "
        f"heads {c['heads']}; seed {r['seed']}; artifacts in `{r['out_dir']}`.",
    ]
    if "comparison" in r:
        lines += ["", f"## {_comparison_heading(r)}", ""]
        a, b = compared_kinds(r["cores"])
        lines += _md_table(
            ["metric", a, b, f"{a}/{b}"],
            [[row["metric"], row[a], row[b], row["ratio"]] for row in r["comparison"]],
        )
    if "energy" in r:
        lines += ["", f"## Energy: {_paper_heading(r)}", ""]
        lines += _text_block(energy.format_energy_table(r["energy"]["paper"]).splitlines())
    for kind, core in r["cores"].items():
        lines += ["", f"## Core: {kind} (`{r['out_dir']}/{kind}`)", ""]
        lines += _text_block("\n".join(_core_lines(core)).splitlines())
    if "window" in r:
        w = r["window"]
        text = format_window(w, r["out_dir"])
        heading = text[1].strip("= ")  # "windowed unit: ... scores, l_k ..."
        lines += ["", f"## W{heading[1:]}", ""]
        lines += _text_block("\n".join(text[2:]).splitlines())
        by_rows = sorted(
            w.get("sim", {}).get("cycles_by_rows", {}).items(), key=lambda kv: int(kv[0])
        )
        lines += [""]
        lines += _md_table(
            ["window rows", "latency (cycles)", "II (cycles)"],
            [[str(rows), v["latency_cycles"], v["ii_cycles"]] for rows, v in by_rows],
        )
    return "\n".join(lines) + "\n"


def _jsonable(value):
    """The result as strict JSON values: numpy scalars as numbers, paths as strings, tuples
    as lists, a NaN or infinity as null."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", None) == 0:
        value = value.item()  # numpy scalar
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _cycles(value) -> float:
    """A bar height of cycles_by_rows: the value, the worst of several, NaN (no bar) for None
    (no two steps of that size in a row, so no II)."""
    if isinstance(value, list):
        return float(max(value)) if value else math.nan
    return math.nan if value is None else float(value)


def plot_report(r: dict, path: Path) -> bool:
    """report.png: E-ATT/vanilla ratios of the energy and Yosys rows (log scale) and the windowed
    unit's cycles per window size. False (nothing written) when there is nothing to plot."""
    from matplotlib.figure import Figure  # matplotlib: only when a report is plotted

    ratios = [
        (row["metric"], row["ratio"])
        for row in r.get("comparison", [])
        if ("energy" in row["metric"] or "Yosys" in row["metric"])
        and isinstance(row["ratio"], (int, float))
        and row["ratio"] > 0
    ]
    zeros = [
        row["metric"].removeprefix("alignment ").split(" (")[0]
        for row in r.get("comparison", [])
        if row["ratio"] == 0 and "Yosys" in row["metric"]
    ]
    cycles = sorted(
        r.get("window", {}).get("sim", {}).get("cycles_by_rows", {}).items(),
        key=lambda kv: int(kv[0]),
    )
    panels = [p for p in ("ratios", "cycles") if (ratios if p == "ratios" else cycles)]
    if not panels:
        return False
    fig = Figure(figsize=(7.5, 3.6 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, panel in zip(axes, panels, strict=True):
        if panel == "ratios":
            names = [m for m, _ in ratios][::-1]
            values = [v for _, v in ratios][::-1]
            colors = ["tab:green" if v < 1 else "tab:red" for v in values]
            ax.barh(names, values, color=colors)
            ax.set_xscale("log")
            ax.axvline(1.0, color="black", linewidth=0.8)
            a, b = (NAMES.get(k, k) for k in compared_kinds(r["cores"]))
            ax.set_xlabel(
                f"{a} / {b} (log scale; < 1: {a} smaller)"
                + (f"\n{a} uses no {', '.join(zeros)} (ratio 0, not drawn)" if zeros else "")
            )
            ax.set_title(_comparison_heading(r).split(" (")[0])
            ax.tick_params(axis="y", labelsize=8)
        else:
            rows = [int(k) for k, _ in cycles]
            lat = [_cycles(v["latency_cycles"]) for _, v in cycles]
            ii = [_cycles(v["ii_cycles"]) for _, v in cycles]
            width = 0.4
            ax.bar([x - width / 2 for x in rows], lat, width, label="latency")
            ax.bar([x + width / 2 for x in rows], ii, width, label="II")
            ax.set_xticks(rows)
            ax.set_xlabel("window rows")
            ax.set_ylabel("cycles")
            ax.set_title("windowed unit: RTL cycles per window size")
            ax.legend()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110), suffix=".png")
    return True


def write_report(r: dict, out_dir: Path, markdown=None, plot=None) -> dict:
    """report.md, report.json and report.png in out_dir; returns their paths (by kind).
    ``markdown`` (r -> text) and ``plot`` (r, path -> written?) default to the core flow's
    format_markdown and plot_report (eatt.flow_layer passes its own)."""
    markdown, plot = markdown or format_markdown, plot or plot_report
    out_dir = Path(out_dir)
    paths = {kind: str(out_dir / name) for kind, name in REPORT_FILES.items()}
    if not plot(r, out_dir / REPORT_FILES["png"]):
        del paths["png"]
    atomic_write_text(out_dir / REPORT_FILES["md"], markdown(r))
    full = {**r, "report": paths}
    atomic_write_text(
        out_dir / REPORT_FILES["json"],
        json.dumps(_jsonable(full), indent=2, allow_nan=False) + "\n",
    )
    return paths
