"""Measured energy per call, E-ATT against dot-product attention, on ASIC standard cells.

For each level (alignment, attention, folded) and kind (eatt, vanilla), the default core
(eatt/configs/eatt_default.yaml: len_q = len_k = 4, dim 8, 2 heads; ``--quick``: a 2 x 2, dim-2,
4-bit core) is generated with seed-1 random integer weights and measured with
``eatt.rtl_sim.power.power`` (docs/power.md): Yosys to the OSU 0.18 um cells, the netlist
simulated in Icarus on the same vectors for both kinds (edge + random, seed 0; bit-exact with the
golden model), every net's toggles into energy with the Liberty tables, OpenSTA for the clock the
netlist closes. Beside each measured ratio (E-ATT over vanilla): the paper's analytic ratio for
the same (l, d) (eatt.model.energy.energy_ratios: FP32 operations at 45 nm, the paper's Table 7
formulas) and our per-core operation count's ratio (eatt.model.energy.core_counts with the same
45 nm table, integer additions and multiplications of this core).

The folded level is the folded engine (docs/folded.md) at equal cycles per call: lanes 2 / simd
2 (quick: lanes 1), vanilla's one multiply tile against E-ATT's select tile beside a multiply
tile one column wide (pe 1); its paper and core-count ratios are the attention level's (the
same function), and its records carry the energy split (flip-flops, logic, input-port nets).
Every record carries the dynamic energy by stage (projections, scores, softmax, values; the
folded engine's token memories; control: rtl_sim/stages.py), tabled with E-ATT / vanilla per
stage and plotted beside the totals.

The paper's Table 7 rows, all four methods (its Table 2: vanilla, Dense, RandInit, E-ATT; the
hardware mechanisms of eatt.mechanisms): at the unrolled levels every method is measured, and
each one's energy over vanilla's is tabled beside the paper's analytic ratio and our core
counts' (``methods``); the folded engine has all four too (Dense and RandInit at vanilla's
folding: one multiply walk S columns wide, no select walk).

Writes bench/results/energy_compare.json (rewritten after every job: a run cut short keeps what
finished), energy_compare.md (the table) and energy_compare.png (the plot).

Usage: ``python bench/energy_compare.py [--quick] [--levels alignment,attention,folded]
[--vectors N] [--clock NS] [--macro-rows N] [--clock-gating N] [--out PATH]`` (the committed
results: the two unrolled levels in
energy_compare.json, ``--levels folded --vectors 20 --out
bench/results/energy_compare_folded.json`` for the folded engine).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig, atomic_write_text, default_config
from eatt.mechanisms import PEER
from eatt.model import energy
from eatt.quant.golden import random_weights
from eatt.rtl_sim.folded import MACRO_ROWS
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.power import power

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "energy_compare.json"
QUICK = dict(len_q=2, len_k=2, dim=2, heads=1, in_bits=4, in_frac=2, weight_bits=4, qk_bits=6)
KINDS = ("eatt", "vanilla")
#: every method measured at the unrolled levels, in the paper's Table 2 order
METHODS = ("vanilla", "dense", "randinit", "eatt")
NAMES = {"vanilla": "dot product", "dense": "Dense", "randinit": "RandInit", "eatt": "E-ATT"}
LEVELS = ("alignment", "attention", "folded")
#: the folded engine's folding per kind: equal cycles per call (docs/folded.md)
FOLDING = {
    "eatt": {"lanes": 2, "simd": 2, "pe": 1},
    **{kind: {"lanes": 2, "simd": 2} for kind in ("vanilla", "dense", "randinit")},
}
QUICK_FOLDING = {
    "eatt": {"lanes": 1, "simd": 2, "pe": 1},
    **{kind: {"lanes": 1, "simd": 2} for kind in ("vanilla", "dense", "randinit")},
}


def _config(kind: str, quick: bool) -> CoreConfig:
    if not quick:
        return default_config(kind)
    return CoreConfig.from_dict({**QUICK, "kind": kind})


def _record(r: dict) -> dict:
    keep = ("area_um2", "cells", "energy_per_call_pj", "power_mw", "vectors", "cycles")
    out = {k: r[k] for k in keep}
    out["energy_split_per_call_pj"] = r.get("energy_split_per_call_pj")
    out["parts"] = {k: v["pj"] for k, v in r.get("parts", {}).items()}
    if r.get("memories"):  # the folded engine's memory macros (rtl_sim/memory_energy.py)
        mem = r["memories"]
        out["memories"] = {
            "macros": len(mem["macros"]),
            "node_nm": mem["node_nm"],
            "source": mem["source"],
            "at_node_pj": mem["at_node_pj_per_call"]["total"],
            "scaled_pj": mem["pj_per_call"]["total"],
            "scaled_to": mem["scaled_to"],
        }
    out["by_stage"] = r.get("by_stage")
    out["clock_gating"] = r.get("clock_gating")
    out["simulator"] = r["sim"].get("simulator")
    out["mismatches"] = r["mismatches"]
    out["fmax_mhz"] = r["sta"]["fmax_mhz"]
    out["calls_per_s"] = (r.get("throughput") or {}).get("calls_per_s")
    out["yosys_seconds"] = r["yosys"]["seconds"]
    out["yosys_peak_mb"] = r["yosys"]["peak_mb"]
    out["seconds"] = r["seconds"]
    return out


def ratios(report: dict) -> dict:
    """E-ATT over vanilla per level: measured (energy, dynamic energy, area), the paper's
    analytic percentage / 100, our core count's."""
    out = {}
    for level, by_kind in report["levels"].items():
        if not all(k in by_kind for k in KINDS):
            continue
        e, v = by_kind["eatt"], by_kind["vanilla"]
        cfg = report["config"]
        same = "attention" if level == "folded" else level  # the folded engine: the whole core
        paper = energy.energy_ratios(cfg["len_k"], cfg["dim"])["eatt"][same]["asic"] / 100.0
        counts = report["core_counts_pj"]
        out[level] = {
            "energy": e["energy_per_call_pj"]["total"] / v["energy_per_call_pj"]["total"],
            "dynamic": e["energy_per_call_pj"]["dynamic"] / v["energy_per_call_pj"]["dynamic"],
            "area": e["area_um2"] / v["area_um2"],
            "paper_analytic": paper,
            "core_counts": counts["eatt"][same] / counts["vanilla"][same],
        }
    return out


def methods(report: dict) -> dict:
    """Each method over vanilla per level (the paper's Table 7 rows): measured energy, dynamic
    energy and area, the paper's analytic ratio, our core counts' ratio (the folded engine's:
    the attention level's, the same function)."""
    out = {}
    cfg = report["config"]
    paper = energy.energy_ratios(cfg["len_k"], cfg["dim"])
    counts = report["core_counts_pj"]
    for level, by_kind in report["levels"].items():
        if PEER.kind not in by_kind:
            continue
        v = by_kind[PEER.kind]
        same = "attention" if level == "folded" else level  # the folded engine: the whole core
        for kind in (k for k in METHODS if k in by_kind and k != PEER.kind):
            m = by_kind[kind]
            out.setdefault(level, {})[kind] = {
                "energy": m["energy_per_call_pj"]["total"] / v["energy_per_call_pj"]["total"],
                "dynamic": m["energy_per_call_pj"]["dynamic"] / v["energy_per_call_pj"]["dynamic"],
                "area": m["area_um2"] / v["area_um2"],
                "paper_analytic": paper[kind][same]["asic"] / 100.0,
                "core_counts": counts[kind][same] / counts["vanilla"][same],
            }
    return out


def markdown(report: dict) -> str:
    cfg = report["config"]
    lines = [
        f"Energy per call on {report['liberty']} ({cfg['len_q']} x {cfg['len_k']}, dim "
        f"{cfg['dim']}, {cfg['heads']} heads; {report['vectors']} vectors, the same for both "
        f"kinds; clock {report['clock_ns']:g} ns"
        + (
            f"; clocks gated for enables of >= {report['clock_gating']} flip-flops"
            if report.get("clock_gating")
            else ""
        )
        + (
            f"; pipelined to at most {report['adder_levels']} adder levels between registers "
            "(eatt rtl --adder-levels: unrolled cores with the reciprocal registered, the folded "
            "engine with registered reads)"
            if report.get("adder_levels")
            else ""
        )
        + (
            f"; memories of >= {report['macro_rows']} words are macros"
            if report.get("macro_rows") not in (None, MACRO_ROWS) and "folded" in report["levels"]
            else ""
        )
        + ")",
        "",
        "| level | kind | energy/call pJ | switching | internal | leakage | area um^2 | cells "
        "| closes at MHz | synthesis s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for level, by_kind in report["levels"].items():
        for kind, r in by_kind.items():
            e = r["energy_per_call_pj"]
            lines.append(
                f"| {level} | {kind} | {e['total']:.4g} | {e['switching']:.4g} | "
                f"{e['internal']:.4g} | {e['leakage']:.3g} | {r['area_um2']:,.0f} | "
                f"{r['cells']:,} | {r['fmax_mhz']:g} | {r['yosys_seconds']:.0f} |"
            )
    lines += [
        "",
        "| level | E-ATT / vanilla energy (measured) | dynamic | area | paper's analytic ratio "
        "| our core counts' ratio |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for level, q in report["ratios"].items():
        lines.append(
            f"| {level} | {q['energy']:.3f} | {q['dynamic']:.3f} | {q['area']:.3f} | "
            f"{q['paper_analytic']:.4f} | {q['core_counts']:.4f} |"
        )
    if report.get("methods"):
        lines += [
            "",
            "The paper's Table 7 rows: each method's energy over vanilla's (ASIC)",
            "",
            "| level | method | measured | dynamic | area | paper's analytic | our core counts |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for level, by_kind in report["methods"].items():
            for kind, q in by_kind.items():
                lines.append(
                    f"| {level} | {NAMES[kind]} | {q['energy']:.3f} | {q['dynamic']:.3f} | "
                    f"{q['area']:.3f} | {q['paper_analytic']:.4f} | {q['core_counts']:.4f} |"
                )
    split = [
        (level, kind, r["energy_split_per_call_pj"])
        for level, by_kind in report["levels"].items()
        for kind, r in by_kind.items()
        if r.get("energy_split_per_call_pj")
    ]
    if split:
        lines += [
            "",
            "| level | kind | dynamic pJ/call: flip-flops | logic | input-port nets (the clock) "
            "| clock gates (gated clock nets) | memory macros (scaled to the cells' node) |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for lv, kind, q in split:
            mem = report["levels"][lv][kind].get("memories")
            macros = f"{mem['scaled_pj']:.4g} ({mem['macros']})" if mem else "-"
            gates = f"{q['clock_gating']:.4g}" if "clock_gating" in q else "-"
            lines.append(
                f"| {lv} | {kind} | {q['flip_flops']:.4g} | {q['logic']:.4g} | "
                f"{q['input_ports']:.4g} | {gates} | {macros} |"
            )
    lines += stage_table(report)
    return "\n".join(lines) + "\n"


def stage_ratios(report: dict) -> dict:
    """{level: {stage: E-ATT / vanilla dynamic energy}} where both kinds have the stage."""
    out = {}
    for level, by_kind in report["levels"].items():
        e, v = (by_kind.get(k, {}).get("by_stage") or {} for k in KINDS)
        both = [s for s in e if s in v and v[s]["dynamic_pj"] > 0]
        if both:
            out[level] = {s: e[s]["dynamic_pj"] / v[s]["dynamic_pj"] for s in both}
    return out


def stage_table(report: dict) -> list[str]:
    """Dynamic energy per call by stage (rtl_sim/stages.py), both kinds and their ratio."""
    lines = []
    ratio = stage_ratios(report)
    for level, by_kind in report["levels"].items():
        if level not in ratio:
            continue
        stages = list(ratio[level])
        lines += [
            "",
            f"{level}: dynamic pJ/call by stage (logic counts for the registers it computes)",
            "",
            "| kind | " + " | ".join(stages) + " |",
            "| --- |" + " --- |" * len(stages),
        ]
        for kind in KINDS:  # the stage table of the pair (a Synthesizer's stages differ)
            row = by_kind[kind]["by_stage"]
            lines.append(
                f"| {kind} | " + " | ".join(f"{row[s]['dynamic_pj']:.4g}" for s in stages) + " |"
            )
        lines.append(
            "| E-ATT / vanilla | " + " | ".join(f"{ratio[level][s]:.3f}" for s in stages) + " |"
        )
    return lines


def plot(report: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    levels = list(report["levels"])
    by_stage = stage_ratios(report)
    fig, axes = plt.subplots(1, 2 if by_stage else 1, figsize=(11.0 if by_stage else 6.0, 3.6))
    ax = axes[0] if by_stage else axes
    kinds = [k for k in METHODS if any(k in by_kind for by_kind in report["levels"].values())]
    width = 0.8 / len(kinds)
    for i, kind in enumerate(kinds):
        values = [
            report["levels"][lv].get(kind, {}).get("energy_per_call_pj", {}).get("total", 0)
            for lv in levels
        ]
        xs = [j + (i - (len(kinds) - 1) / 2) * width for j in range(len(levels))]
        ax.bar(xs, values, width, label=NAMES[kind])
    for j, lv in enumerate(levels):
        q = report["ratios"].get(lv)
        if q:
            ax.annotate(
                f"E-ATT / dot {q['energy']:.3f}\n(paper's analytic {q['paper_analytic']:.3f})",
                (j, report["levels"][lv]["vanilla"]["energy_per_call_pj"]["total"]),
                ha="center",
                va="bottom",
                fontsize=8,
            )
    ax.set_xticks(range(len(levels)), levels)
    ax.set_yscale("log")
    top = max(
        r.get("energy_per_call_pj", {}).get("total", 0)
        for by_kind in report["levels"].values()
        for r in by_kind.values()
    )
    ax.set_ylim(100, top * 8)
    ax.set_ylabel("energy per call (pJ)")
    ax.set_title(f"measured on {report['liberty']}", fontsize=10)
    ax.legend(loc="upper left", ncol=2, fontsize=8)
    if by_stage:
        bx = axes[1]
        stages = list(dict.fromkeys(s for q in by_stage.values() for s in q))
        width = 0.8 / len(by_stage)
        for i, (level, q) in enumerate(by_stage.items()):
            xs = [j + (i - (len(by_stage) - 1) / 2) * width for j, s in enumerate(stages)]
            bx.bar(xs, [q.get(s, 0.0) for s in stages], width, label=level)
        bx.axhline(1.0, color="grey", lw=0.8)
        bx.set_xticks(range(len(stages)), stages, fontsize=8)
        bx.set_ylabel("E-ATT / dot, dynamic energy")
        bx.set_title("by stage (logic counts for the registers it computes)", fontsize=10)
        bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a 2 x 2, dim-2 core (seconds)")
    ap.add_argument("--levels", default="alignment,attention")
    ap.add_argument("--vectors", type=int, default=100)
    ap.add_argument("--clock", type=float, default=10.0, help="clock period in ns")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument(
        "--macro-rows",
        type=int,
        default=MACRO_ROWS,
        help=f"folded: memories of at least this many words are macros ({MACRO_ROWS}; 1: all)",
    )
    ap.add_argument(
        "--clock-gating",
        type=int,
        metavar="N",
        help="gate the clocks of enables of at least N flip-flops (eatt power --clock-gating)",
    )
    ap.add_argument(
        "--adder-levels",
        type=int,
        default=0,
        metavar="N",
        help="at most N adder levels between registers (eatt rtl --adder-levels; folded: also "
        "its block-RAM reads, the lanes' max and N x R registered)",
    )
    ap.add_argument("--methods", default=",".join(METHODS), help="unrolled levels: these methods")
    args = ap.parse_args(argv)
    methods_run = [m for m in args.methods.split(",") if m]
    for m in methods_run:
        if m not in METHODS:
            ap.error(f"--methods: {m!r} is not one of {', '.join(METHODS)}")
    if args.adder_levels < 0:
        ap.error("--adder-levels: must be >= 0")
    levels = [lv for lv in args.levels.split(",") if lv]
    for lv in levels:
        if lv not in LEVELS:
            ap.error(f"--levels: {lv!r} is not one of {', '.join(LEVELS)}")
    cfg = _config("eatt", args.quick)
    report = {
        "bench": "energy_compare",
        "quick": args.quick,
        "config": {k: v for k, v in cfg.to_dict().items() if k != "kind"},
        "vectors": args.vectors,
        "clock_ns": args.clock,
        "macro_rows": args.macro_rows,
        "clock_gating": args.clock_gating,
        "adder_levels": args.adder_levels,
        "liberty": None,
        "machine": platform.machine(),
        "levels": {},
        "core_counts_pj": {
            k: {
                lv: energy.energy_pj(
                    energy.core_counts(k, cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, lv),
                    energy.DEFAULT_TABLE,
                    "asic",
                )
                for lv in energy.CORE_LEVELS
            }
            for k in METHODS
        },
        "ratios": {},
        "methods": {},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eatt-energy-") as tmp:
        for level in levels:
            for kind in methods_run:
                kcfg = _config(kind, args.quick)
                out = Path(tmp) / f"{level}_{kind}"
                folding = (QUICK_FOLDING if args.quick else FOLDING).get(kind)
                folding = {**(folding or {}), "macro_rows": args.macro_rows}
                options = BuildOptions(
                    folding=folding if level == "folded" else None, adder_levels=args.adder_levels
                )
                generate_rtl(kcfg, random_weights(kcfg, seed=1), out, level=level, options=options)
                t0 = time.perf_counter()
                r = power(
                    out, vectors=args.vectors, seed=0, clock_ns=args.clock,
                    clock_gating=args.clock_gating,
                )  # fmt: skip
                print(f"{level} {kind}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
                report["liberty"] = r["liberty"]
                report["levels"].setdefault(level, {})[kind] = _record(r)
                report["ratios"] = ratios(report)
                report["methods"] = methods(report)
                atomic_write_text(args.out, json.dumps(report, indent=1) + "\n")
    atomic_write_text(args.out.with_suffix(".md"), markdown(report))
    plot(report, args.out.with_suffix(".png"))
    print(markdown(report))
    print(json.dumps(report["ratios"]))
    return 0


def replot(path: Path = DEFAULT_OUT) -> None:
    """energy_compare.md and .png again from the JSON (no measurement)."""
    report = json.loads(path.read_text())
    atomic_write_text(path.with_suffix(".md"), markdown(report))
    plot(report, path.with_suffix(".png"))


if __name__ == "__main__":
    sys.exit(main())
