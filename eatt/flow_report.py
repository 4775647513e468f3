"""The report of `eatt flow`: the comparison of a core with its peer (rows of metrics, the
kinds' names), the text printed, report.md / report.json / report.png (the plot of the ratios
and the windowed unit's cycles) and what the trained-layer flow shares of them. eatt.flow
re-exports it."""

from __future__ import annotations

import json
import math
from pathlib import Path

from eatt.config import atomic_write, atomic_write_text
from eatt.mechanisms import PEER, mechanism_of
from eatt.model import energy
from eatt.quant.check import format_golden_check
from eatt.quant.vectors import model_line
from eatt.rtl_sim import throughput as rate
from eatt.steps import STEPS, Step


def title(kind: str) -> str:
    """A kind's name in a report's headings: its mechanism's title, else the kind itself."""
    try:
        return mechanism_of(kind).title
    except ValueError:
        return kind


CELLS = ("LUT", "FF", "CARRY4", "DSP48E1")


REPORT_FILES = {"md": "report.md", "json": "report.json", "png": "report.png"}


def compared_kinds(cores: dict) -> tuple[str, str]:
    """The two kinds a flow compares, in the report's order: the config's kind (E-ATT, Dense,
    ...) before its peer (vanilla)."""
    return tuple(sorted(cores, key=lambda kind: kind == PEER.kind))[:2]


def report_kinds(r: dict) -> tuple[str, str]:
    """The two kinds a flow result compares: its comparison rows' (their values are keyed by
    the kinds), else its cores'."""
    rows = r.get("comparison") or []
    kinds = tuple(k for k in (rows[0] if rows else {}) if k not in ("metric", "ratio"))
    return kinds if len(kinds) == 2 else compared_kinds(r["cores"])


def compare(cores: dict, core_en: dict) -> list[dict]:
    """Rows of the report: metric, the kind (E-ATT), its peer (vanilla), kind / peer; each
    row's values under the kinds' names. Past the analytic energies, the rows are the steps'
    own (eatt.steps: each step's ``rows`` of its metrics, REPORT_STEPS in order, at each level
    it ran at), then the mismatches of every level."""
    rows = []
    a, b = compared_kinds(cores)

    def add(metric: str, e, d) -> None:
        ratio = e / d if isinstance(e, (int, float)) and d else None
        rows.append({"metric": metric, a: e, b: d, "ratio": ratio})

    for level in ("alignment", "attention"):
        for target in ("asic", "fpga"):
            e, d = (core_en[k][level]["energy_pj"][target] for k in (a, b))
            add(f"{level} energy, {target} (pJ, analytic)", e, d)
    for name in REPORT_STEPS:
        for label, e, d in step_rows(cores[a].get(name), cores[b].get(name), STEPS[name]):
            if d is not None:
                add(label, e, d)
    e, d = _mismatches(cores[a]), _mismatches(cores[b])
    if e is not None and d is not None:
        add("mismatches, all levels", e, d)
    return rows


#: the steps whose rows a core flow's report shows, in its order
REPORT_STEPS = ("sim", "hls", "resources", "power")
#: the order of the levels in a report
LEVELS = ("alignment", "attention", "folded")


def step_rows(mine, peer, step: Step, by_level: bool | None = None) -> list[tuple]:
    """(label, this core's value, its peer's or None) of a step's report rows that this
    core's result holds; a per-level step's results ({level: result}) level by level
    (``by_level`` False: one result, its labels without a level)."""
    if mine is None:
        return []
    by_level = bool(step.levels) if by_level is None else by_level
    pairs = [(None, mine, peer)] if not by_level else [
        (level, mine[level], (peer or {}).get(level)) for level in LEVELS if level in mine
    ]  # fmt: skip
    out = []
    for level, x, y in pairs:
        theirs = dict(step.report_rows(y, level)) if y is not None else {}
        out += [(label, v, theirs.get(label)) for label, v in step.report_rows(x, level)]
    return out


def _mismatches(core: dict) -> int | None:
    """The mismatching vectors of the QONNX file, the C simulation and every RTL level (the
    steps' metrics); None where a step did not run."""
    try:
        counts = [
            STEPS["export"].metrics(core["export"])["export_mismatches"],
            STEPS["hls"].metrics(core["hls"])["hls_mismatches"],
            *(STEPS["sim"].metrics(r)["mismatches"] for r in core["sim"].values()),
        ]
    except KeyError:  # a step this run stopped before (--to-step)
        return None
    return None if None in counts else sum(counts)


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
        lines[-1] += model_line(cs.get("vs_model"), "C simulation")
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
        if p.get("throughput"):
            lines.append(rate.line(p["throughput"]))
    return lines


def _paper_heading(r: dict) -> str:
    paper = r["energy"]["paper"]
    return f"the paper's levels at l={paper['length']}, d={paper['dim']}"


def _comparison_heading(r: dict) -> str:
    """The comparison's heading: what the two cores share, and how a folded flow paired them."""
    reuse = r["config"].get("reuse_factor", 1)
    a, b = report_kinds(r)
    paired = (
        f"; folded for reuse_factor {reuse} at equal cycles: vanilla's folding for it, E-ATT at "
        "its lanes and simd with the narrowest multiply walk that is not slower"
        if reuse > 1 and any(mechanism_of(k).binarized for k in (a, b))
        else f"; each folded to its least datapath within reuse_factor {reuse}"
        if reuse > 1
        else ""
    )
    shared = (
        "same weights and formats"
        if _weight_names(a) == _weight_names(b)
        else "same W_V, W_O and formats"
    )
    return f"{title(a)} vs {title(b)} ({shared}{paired})"


def _weight_names(kind: str) -> tuple[str, ...]:
    """The alignment weights of a kind's mechanism (E-ATT and vanilla share W_Q and W_K)."""
    try:
        return mechanism_of(kind).weight_names
    except ValueError:
        return ()


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
        a, b = report_kinds(r)
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
        a, b = report_kinds(r)
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
            a, b = (title(k) for k in report_kinds(r))
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
