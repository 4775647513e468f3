"""Routed clock of one folded engine at several `--adder-levels`: what each pipelining step buys.

Each argument is an RTL folder of the same layer built with a different ``--adder-levels``
(``eatt rtl LAYER.onnx --level folded ... --adder-levels N -o DIR``) or a different RTL
revision; ``eatt pnr DIR --clock NS --json`` is run where DIR/pnr/result.json is missing (or
with ``--rerun``; 10-20 minutes and 0.9 GB each for the trained default layer on an
ECP5-85k). The report (JSON, Markdown, PNG) gives per folder: adder_levels, II and latency
cycles, utilization, the routed Fmax, calls per second at it, and nextpnr's critical path (its
first and last cell, its delay split into logic and routing).

Usage: ``python bench/pnr_levels.py DIR [DIR ...] [--label NAME ...] [--clock 8] [--rerun]
[--append] --out bench/results/pnr_trained_layer_levels.json``. ``--append`` keeps the rows
--out already holds (a step measured in an earlier session, whose folder is gone) and adds
these after them, a row of the same label replaced.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from eatt.config import atomic_write_text


def critical_path(pnr: Path) -> dict | None:
    """nextpnr's critical path of the clock (register to register: on pins, the paths from and
    to the ports, <async>, are not the clock's): first and last cell, delay, logic and
    routing."""
    report = pnr / "report.json"
    if not report.is_file():
        return None
    paths = [
        p
        for p in json.loads(report.read_text()).get("critical_paths", [])
        if p["path"] and "<async>" not in (p.get("from"), p.get("to"))
    ]
    if not paths:
        return None
    steps = max(paths, key=lambda p: sum(s["delay"] for s in p["path"]))["path"]
    kinds = {k: sum(s["delay"] for s in steps if s["type"] == k) for k in ("logic", "routing")}
    return {
        "from": steps[0]["from"]["cell"],
        "to": steps[-1]["to"]["cell"],
        "ns": round(sum(s["delay"] for s in steps), 2),
        "logic_ns": round(
            kinds["logic"] + sum(s["delay"] for s in steps if s["type"] not in kinds), 2
        ),
        "routing_ns": round(kinds["routing"], 2),
    }


def row(rtl: Path, label: str, clock: float, rerun: bool) -> dict:
    result = rtl / "pnr" / "result.json"
    if rerun or not result.is_file():
        cmd = ["eatt", "pnr", str(rtl), "--clock", str(clock), "--json"]
        print(f"pnr_levels: {' '.join(cmd)}", file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    r = json.loads(result.read_text())
    meta = json.loads((rtl / "metadata.json").read_text())
    return {
        "label": label,
        "rtl": rtl.name,
        "adder_levels": meta.get("adder_levels", 0),
        "folding": meta.get("folding"),
        "ii_cycles": meta["ii_cycles"],
        "latency_cycles": meta["latency_cycles"],
        "cells": r["summary"],
        "fmax_mhz": r["fmax_mhz"].get("clk"),
        "constraint_mhz": r["constraint_mhz"],
        "speed": r.get("speed", 6),  # the part's speed grade (older results: 6, nextpnr's default)
        "seed": r.get("seed", 1),
        "dsp_regs": r.get("dsp_regs", {}).get("multipliers", 0),
        "calls_per_s": r["throughput"]["calls_per_s"],
        "critical_path": critical_path(rtl / "pnr"),
        "nextpnr_seconds": r["nextpnr"]["seconds"],
        "peak_mb": r["peak_mb"],
    }


def markdown(report: dict) -> str:
    lines = [
        f"Routed on an ECP5-85k (nextpnr, constraint {report['clock_ns']} ns): one folded engine "
        "at each pipelining step",
        "",
        "| step | speed grade | adder_levels | II cycles | FF | COMB | DSP | BRAM | Fmax MHz "
        "| calls/s | critical path (ns: logic + routing) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in report["rows"]:
        c, p = r["cells"], r["critical_path"] or {}
        path = (
            f"{p['from']} -> {p['to']} ({p['ns']}: {p['logic_ns']} + {p['routing_ns']})"
            if p
            else "-"
        )
        lines.append(
            f"| {r['label']} | -{r.get('speed', 6)} | {r['adder_levels']} | {r['ii_cycles']:,} | "
            f"{c['FF']:,} | "
            f"{c['COMB']:,} | {c['MULT18X18D']} | {c['DP16KD']} | {r['fmax_mhz']} | "
            f"{r['calls_per_s']:,.1f} | {path} |"
        )
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = report["rows"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar([r["label"] for r in rows], [r["fmax_mhz"] for r in rows], color="tab:blue")
    ax.axhline(rows[0]["constraint_mhz"], color="tab:red", ls="--", label="target")
    ax.set_ylabel("routed Fmax, MHz")
    ax.set_title("Folded engine on an ECP5-85k, by pipelining step")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="RTL folders (eatt rtl -o DIR)")
    ap.add_argument("--label", action="append", default=[], help="a name per folder, in order")
    ap.add_argument("--clock", type=float, default=8.0, help="clock constraint, ns")
    ap.add_argument("--rerun", action="store_true", help="run eatt pnr even where a result is")
    ap.add_argument("--append", action="store_true", help="keep the rows --out holds")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    for d in args.dirs:
        if not (d / "metadata.json").is_file():
            ap.error(f"{d}: not an RTL directory (no metadata.json)")
    if args.label and len(args.label) != len(args.dirs):
        ap.error("--label: give one per folder")
    labels = args.label or [d.name for d in args.dirs]
    rows = [row(d, lb, args.clock, args.rerun) for d, lb in zip(args.dirs, labels, strict=True)]
    if args.append and args.out.is_file():
        try:
            kept = json.loads(args.out.read_text())["rows"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            ap.error(f"--append: {args.out} is not a report of this bench ({err})")
        rows = [r for r in kept if r["label"] not in set(labels)] + rows
    report = {"bench": "pnr_levels", "clock_ns": args.clock, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(report, indent=1) + "\n")
    atomic_write_text(args.out.with_suffix(".md"), markdown(report))
    plot(report, args.out.with_suffix(".png"))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
