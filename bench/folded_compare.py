"""E-ATT vs dot-product attention, folded engine, at equal cycles per call: an `eatt sweep`.

Runs a sweep (eatt.sweep on a local Ray instance) and writes bench/results/folded_compare.json,
.md and .png: per size and folding, both kinds' cycles per call (measured in Verilator where
the sweep simulates, else the metadata's formula, which the simulation checks equal), Yosys
synth_xilinx cells (LUT, FF, CARRY4, DSP48E1, BRAM), LUT-equivalents (LUT + dsp_luts x
DSP48E1, eatt.sweep_report.DSP_LUTS), all-fabric LUTs where the sweep has the nodsp stage, the
E-ATT / dot ratios, and the paper's analytic attention energy ratio for the same (l, d).
A row pairs the kinds at one (lanes, simd): vanilla's one multiply tile, and E-ATT with its
V/O multiply tile half as wide (pe = simd / 2) beside the select tile that computes Q and K at
the same time; then both take the same cycles to within a few (docs/folded.md, "Two
projection walks"), so each row is an equal-throughput comparison (cycles ratio in the row).

Sweeps:
- ``small`` (default): examples/sweep_folded.yaml, 12 points (two sizes, three foldings, RTL +
  simulation + Yosys): about 4 minutes on 2 cores.
- ``paper``: bench/sweep_paper.yaml, the paper's size (l 22, d 512, 8 heads) at two foldings,
  RTL + Yosys with DSPs, all-fabric (-nodsp) at lanes 2 / simd 8 only (no simulation: 200
  vectors take 15 minutes a point, docs/folded.md): 16-20 minutes and 1.3 GB a point here.

- ``rates``: bench/sweep_folded_rates.yaml, 6 points at 8 x 8, dim 16: the small sweep's
  stages plus ``power`` (OpenSTA's Fmax at OSU 0.18 um) and ``pnr`` (nextpnr's on an
  ECP5-85k), so the rows give each kind's Fmax and calls per second there
  (rtl_sim/throughput.py: Fmax / cycles a call), E-ATT / dot at equal cycles.

Usage: ``python bench/folded_compare.py [--sweep small|paper|rates|FILE.yaml] [-o DIR]
[--resume] [--max-parallel N] [--out PATH]``. The sweep folder (default
runs/sweeps/folded_compare_<sweep>) keeps every record, so ``--resume`` after a stop runs only
what is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
from pathlib import Path

from eatt.cli.exits import exit_code
from eatt.config import atomic_write_text
from eatt.flow import PEER
from eatt.model import energy
from eatt.sweep import load_sweep, read_record, run_sweep
from eatt.sweep_report import lut_equivalents

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SWEEPS = {
    "small": ROOT / "examples" / "sweep_folded.yaml",
    "paper": ROOT / "bench" / "sweep_paper.yaml",
    "rates": ROOT / "bench" / "sweep_folded_rates.yaml",
}
CELLS = ("LUT", "FF", "CARRY4", "DSP48E1", "BRAM")
RATES = ("pnr_fmax_mhz", "pnr_calls_per_s", "fmax_mhz", "calls_per_s")


def _size(cfg: dict) -> tuple:
    return cfg["len_q"], cfg["len_k"], cfg["dim"], cfg["heads"]


def compare(records: list[dict], dsp_luts: float) -> list[dict]:
    """One row per (size, folding) with both kinds done: their numbers and E-ATT / dot."""
    by: dict = {}
    for r in records:
        if r["status"] != "done":
            continue
        fold = r["folding"] or {}
        key = (*_size(r["config"]), fold.get("lanes"), fold.get("simd"))
        by.setdefault(key, {})[r["config"]["kind"]] = r
    rows = []
    for key in sorted(by):
        pair = by[key]
        if not set(PEER) <= set(pair):  # the flows' pair, E-ATT and its dot-product peer
            continue
        len_q, len_k, dim, heads, lanes, simd = key
        row: dict = {
            "len_q": len_q,
            "len_k": len_k,
            "dim": dim,
            "heads": heads,
            "lanes": lanes,
            "simd": simd,
        }
        for kind in PEER:
            r = pair[kind]
            m = r["metrics"]
            row[kind] = {
                "id": r["id"],
                "cycles": m.get("cycles"),
                "mismatches": m.get("mismatches"),
                **{c: m.get(c) for c in CELLS},
                "LUT_equiv": lut_equivalents(m, dsp_luts),
                "LUT_nodsp": m.get("LUT_nodsp"),
                # the clock where a stage measured one (pnr: ECP5, power: OpenSTA at OSU 0.18)
                # and the calls a second there (rtl_sim/throughput.py)
                **{k: m.get(k) for k in RATES},
            }
        e, v = row["eatt"], row["vanilla"]
        row["pe"] = (pair["eatt"]["folding"] or {}).get("pe")
        row["cycles_ratio"] = round(e["cycles"] / v["cycles"], 4)
        row["equal_cycles"] = abs(row["cycles_ratio"] - 1) <= 0.01
        row["ratios"] = {
            k: round(e[k] / v[k], 4)
            for k in ("LUT", "LUT_equiv", "LUT_nodsp", *RATES)
            if e[k] and v[k]
        }
        # the paper's analytic model (App. A) for the same (l, d): attention-level energy
        paper = energy.energy_ratios(len_k, dim)["eatt"]["attention"]["asic"] / 100
        row["paper_attention_energy_ratio"] = round(paper, 4)
        rows.append(row)
    return rows


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.2f}"
    return f"{int(v):,}"


def _rates(row: dict, key: str) -> str:
    """E-ATT / dot of a rate: ECP5's (nextpnr) and OSU 0.18's (OpenSTA) where measured."""
    cells = []
    for prefix, where in (("pnr_", "ECP5"), ("", "OSU")):
        e, v = row["eatt"].get(prefix + key), row["vanilla"].get(prefix + key)
        if e and v:
            a, b = (f"{x:,.0f}" if x >= 1000 else f"{x:g}" for x in (e, v))
            cells.append(f"{where} {a} / {b} ({e / v:.2f})")
    return ", ".join(cells) or "-"


def markdown(rows: list[dict], sweep: str, dsp_luts: float) -> str:
    lines = [
        f"# E-ATT vs dot, folded engine, equal cycles per call (sweep `{sweep}`)",
        "",
        f"LUT-eq = LUT + {dsp_luts:g} x DSP48E1. Ratios are E-ATT / dot.",
        "",
        "| len_q x len_k, dim, heads | lanes, simd (E-ATT pe) | cycles E-ATT / dot | "
        "E-ATT LUT / DSP / LUT-eq | dot LUT / DSP / LUT-eq | LUT-eq ratio | "
        "all-fabric LUT E-ATT / dot | paper energy | Fmax E-ATT / dot (MHz) | "
        "calls/s E-ATT / dot |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        e, v = r["eatt"], r["vanilla"]
        nodsp = (
            f"{_fmt(e['LUT_nodsp'])} / {_fmt(v['LUT_nodsp'])} ({r['ratios']['LUT_nodsp']:.2f})"
            if "LUT_nodsp" in r["ratios"]
            else "-"
        )
        paper = r["paper_attention_energy_ratio"]
        lines.append(
            f"| {r['len_q']} x {r['len_k']}, {r['dim']}, {r['heads']} | {r['lanes']}, "
            f"{r['simd']} ({r.get('pe') or r['simd']}) | {_fmt(e['cycles'])} / "
            f"{_fmt(v['cycles'])} | {_fmt(e['LUT'])} / {_fmt(e['DSP48E1'])} / "
            f"{_fmt(e['LUT_equiv'])} | {_fmt(v['LUT'])} / {_fmt(v['DSP48E1'])} / "
            f"{_fmt(v['LUT_equiv'])} | {r['ratios'].get('LUT_equiv', float('nan')):.2f} | "
            f"{nodsp} | {'-' if paper is None else f'{paper:.3f}'} | {_rates(r, 'fmax_mhz')} | "
            f"{_rates(r, 'calls_per_s')} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweep", default="small", help="small, paper or a sweep file")
    p.add_argument("-o", "--output", metavar="DIR", help="the sweep folder")
    p.add_argument("--resume", action="store_true", help="keep the finished points")
    p.add_argument("--out", type=Path, help="result JSON (bench/results/folded_compare.json)")
    p.add_argument("--max-parallel", type=int, metavar="N", help="at most N points at once")
    args = p.parse_args(argv)
    path = SWEEPS.get(args.sweep, Path(args.sweep))
    name = args.sweep if args.sweep in SWEEPS else path.stem
    sweep = load_sweep(path)
    out_dir = args.output or ROOT / "runs" / "sweeps" / f"folded_compare_{name}"
    result = run_sweep(sweep, out_dir, resume=args.resume, max_parallel=args.max_parallel)
    records = [read_record(Path(result["dir"]), s) for s in sweep["points"]]
    rows = compare([r for r in records if r], sweep["dsp_luts"])
    suffix = "" if name == "small" else f"_{name}"
    out = args.out or RESULTS / f"folded_compare{suffix}.json"
    report = {
        "benchmark": "folded_compare",
        "sweep": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
        "machine": {
            "arch": platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "seconds": result["seconds"],  # this run (a --resume keeps finished points)
        # the points' own wall times (each on one CPU, two at a time on 2 cores)
        "points_wall_s": round(sum((r or {}).get("run", {}).get("wall_s", 0) for r in records), 1),
        "points": result["points"],
        "done": result["done"],
        "failed": result["failed"],
        # the records' errors name files in the sweep folder: relative to it here
        "failures": [
            {**f, "error": (f["error"] or "").replace(str(result["dir"]) + "/", "")}
            for f in result["failures"]
        ],
        "dsp_luts": sweep["dsp_luts"],
        "rows": rows,
    }
    atomic_write_text(out, json.dumps(report, indent=1) + "\n")
    atomic_write_text(out.with_suffix(".md"), markdown(rows, name, sweep["dsp_luts"]))
    if result["report"].get("png"):
        shutil.copyfile(result["report"]["png"], out.with_suffix(".png"))
    print(markdown(rows, name, sweep["dsp_luts"]))
    return 0 if not result["failed"] else 1


if __name__ == "__main__":
    # as an eatt command: SIGTERM / SIGHUP end it like Ctrl-C, so the sweep's Ray instance is
    # shut down and no Ray process outlives it (exit 143 / 129 / 130)
    sys.exit(exit_code(main))
