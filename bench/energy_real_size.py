"""Measured energy per call at the sizes users build: E-ATT against its dot-product peer, folded.

The rows energy_compare.py cannot reach in a minute (issue 42 items 4 and 6), each a folded
engine at equal cycles per call (E-ATT's V/O multiply tile half as wide as its select tile,
pe = simd / 2), measured with ``eatt.rtl_sim.power.power`` (docs/power.md): Yosys on the
logic (the memories are macros, priced per access by CACTI and scaled to the cells' 180 nm),
the netlist simulated in Verilator with a SAIF trace (bit-exact with the golden model on every
vector), OSU 0.18 um cells:

- ``paper``: the E-ATT paper's size, l 22, d 512, 8 heads, lanes 2 / simd 8, seed-1 random
  weights, the first ``--vectors`` edge + random vectors (seed 0);
- ``layer``: a trained model's layer (``--onnx``, eatt export: by default the trained default
  model's decoder.0.cross, 64 x 64, d 128, 4 heads) on its captured activations (``--inputs``,
  eatt capture), lanes 2 / simd 8 (142,338 cycles a call; lanes 4 / simd 8, 105,474 cycles,
  is a 159k-cell netlist, twice the Verilator build); its peer the same integer weights as
  dot. The default files come from ``eatt train examples/default_quant.yaml -o
  runs/default_quant`` (11 minutes on one thread), then ``eatt capture runs/default_quant/
  best.pt --layer decoder.0.cross --max 50 -o runs/default_quant/acts.npz`` and ``eatt export
  runs/default_quant/best.pt --layer decoder.0.cross -o runs/default_quant/layer.onnx``.

Each point is measured with the clocks ungated and gated (``--clock-gating``: eatt power's
latch-based gates for enables of at least 4 flip-flops), so the table shows what clock gating
changes, and the E-ATT / dot ratio beside the paper's analytic attention ratio for the same
(l, d) and our operation counts' ratio.

Writes bench/results/energy_real_size.json after every point, .md and .png. ``--resume`` skips
a point it has measured on the same source (each point records it: the paper size's random
weights and vector count; the layer's ONNX file and capture by SHA-256 and the vector count);
a point measured on other weights or vectors, or on an older RTL (the generated design's
SHA-256), is measured again, so both kinds of a ratio always share their weights and RTL.
Each point's Verilator build takes minutes (its time and the simulation's are in the record);
docs/power.md gives the run times on this 2-core machine.

Usage: ``python bench/energy_real_size.py [--sizes paper,layer] [--vectors 2] [--gating both|on|
off] [--onnx runs/default_quant/layer.onnx --inputs runs/default_quant/acts.npz]
[--resume] [--out PATH]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig, atomic_write_text
from eatt.mechanisms import mechanism_of
from eatt.model import energy
from eatt.quant.golden import random_weights
from eatt.quant.vectors import capture_inputs
from eatt.rtl_sim import node_scaling as scaling
from eatt.rtl_sim.clock_gating import DEFAULT_MIN_FLIP_FLOPS
from eatt.rtl_sim.folding import folded_cycles
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.power import power

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "energy_real_size.json"
KINDS = ("eatt", "vanilla")
PAPER = dict(len_q=22, len_k=22, dim=512, heads=8)
#: (lanes, simd) per size; E-ATT's pe = simd / 2 (equal cycles with the dot peer)
FOLDING = {"paper": (2, 8), "layer": (2, 8)}
PARTS = ("logic", "registers", "clock_and_inputs", "clock_gating", "macro_outputs", "memories",
         "leakage")  # fmt: skip


def folding(size: str, kind: str) -> dict:
    lanes, simd = FOLDING[size]
    return {
        "lanes": lanes,
        "simd": simd,
        **({"pe": simd // 2} if mechanism_of(kind).binarized else {}),
    }


def _record(r: dict, source: dict | None) -> dict:
    return {
        **({"source": source} if source else {}),  # None: added by hand (--add)
        "energy_per_call_pj": r["energy_per_call_pj"],
        "parts": {k: v["pj"] for k, v in r["parts"].items()},
        "by_stage": {k: v.get("dynamic_pj") for k, v in r["by_stage"].items()},
        "clock_gating": r.get("clock_gating", {"gates": 0}),
        "cells": r["cells"],
        "area_um2": r["area_um2"],
        "cycles": r["cycles"],
        "vectors": r["vectors"],
        "inputs": r["inputs"],
        "mismatches": r["mismatches"],
        **({"vs_model": r["vs_model"]} if r.get("vs_model") else {}),
        "memories": {
            "macros": len(r["memories"]["macros"]),
            "by_macro": by_macro(r),
            "source": r["memories"]["source"],
            "node_nm": r["memories"]["node_nm"],
            "scaled_to": r["memories"]["scaled_to"],
        }
        if r.get("memories")
        else None,
        "fmax_mhz": r["sta"]["fmax_mhz"],
        **({"calls_per_s": r["throughput"]["calls_per_s"]} if r.get("throughput") else {}),
        "simulator": r["sim"]["simulator"],
        "yosys_seconds": r["yosys"]["seconds"],
        "build_seconds": r["sim"]["build_seconds"],
        "sim_seconds": r["sim"]["sim_seconds"],
        "seconds": r["seconds"],
        **({"rescaled": r["rescaled"]} if r.get("rescaled") else {}),
    }


def by_macro(r: dict) -> list[dict]:
    """Each memory macro of a power result per call: its shape, reads and writes, and its
    dynamic and leakage energy (pJ at CACTI's node, before scaling): what explains a kind's
    memory energy against its peer's."""
    calls = max(r["vectors"], 1)
    return [
        {
            "name": m["name"],
            "kind": m["kind"],
            "depth": m["depth"],
            "width": m["width"],
            "reads_per_call": m["reads"] / calls,
            "writes_per_call": m["writes"] / calls,
            "read_pj": m["read_pj"],
            "dynamic_pj_per_call": m["dynamic_pj_per_call"],
            "leakage_pj_per_call": m["leakage_pj_per_call"],
        }
        for m in r["memories"]["macros"]
    ]


def macro_lines(report: dict) -> list[str]:
    """The memories by macro of each point that kept them (E-ATT and dot side by side)."""
    lines = []
    for key, by_kind in report["points"].items():
        for kind in KINDS:
            rows = ((by_kind.get(kind) or {}).get("memories") or {}).get("by_macro")
            if not rows:
                continue
            lines += [
                "",
                f"### {key}, {kind}: memories by macro (pJ per call at CACTI's node)",
                "",
                "| macro | kind | depth x width | reads/call | writes/call | pJ/read | dynamic "
                "| leakage |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |",
            ]
            for m in sorted(rows, key=lambda m: -m["dynamic_pj_per_call"]):
                lines.append(
                    f"| {m['name']} | {m['kind']} | {m['depth']} x {m['width']} | "
                    f"{m['reads_per_call']:,.0f} | {m['writes_per_call']:,.0f} | "
                    f"{m['read_pj']:.3f} | {m['dynamic_pj_per_call']:,.0f} | "
                    f"{m['leakage_pj_per_call']:,.0f} |"
                )
    return lines


def rescaled(r: dict) -> dict:
    """An `eatt power --json` result from before Stillmaker & Baas' scaling (its memories scaled
    by the classical rule) with its memories rescaled by the equations (the same counts, the
    same prices at CACTI's node): the totals and parts follow."""
    mem = r.get("memories")
    if not mem or mem["scaled_to"]["rule"] == scaling.SOURCE:
        return r
    to = mem["scaled_to"]
    f = scaling.factor(mem["node_nm"], mem["vdd"], to["node_nm"], to["vdd"])
    at = mem["at_node_pj_per_call"]
    total = at["total"] * f  # SRAM weights: nothing off chip
    mem["scaled_to"] = {**to, "factor": f, "rule": scaling.SOURCE, "classical_factor": to["factor"]}
    mem["pj_per_call"] = {
        "dynamic": at["dynamic"] * f,
        "leakage": at["leakage"] * f,
        "total": total,
    }
    e = r["energy_per_call_pj"]
    e["memories"], e["total"] = total, e["netlist"] + total
    r["parts"]["memories"]["pj"] = total
    r["rescaled"] = f"memories x {f:.3f} (Stillmaker & Baas) instead of x {to['factor']:.3f}"
    return r


def calls_per_s(report: dict, key: str, kind: str) -> float:
    """A point's calls a second at its Fmax: Fmax / the engine's II (the cycle formula of its
    size and folding, which the netlist's simulation matched; points from before the
    throughput was recorded get it here)."""
    r = report["points"][key][kind]
    if r.get("calls_per_s"):
        return r["calls_per_s"]
    cfg = report["configs"][key.split("/")[0]]
    shape = {k: cfg[k] for k in ("len_q", "len_k", "dim", "heads")}
    lanes, simd = cfg["folding"]
    fold = folding(key.split("/")[0], kind)
    ii = folded_cycles(CoreConfig.from_dict(dict(kind=kind, **shape)), lanes, simd, fold.get("pe"))
    return r["fmax_mhz"] * 1e6 / ii["ii"]


def _shared(source: dict) -> dict:
    """What both kinds of a ratio must share: a point's source but its own RTL's digest."""
    return {k: v for k, v in source.items() if k != "rtl_sha256"}


def ratios(report: dict) -> dict:
    """E-ATT / dot per size and gating: the total, each part, the paper's and our counts'."""
    out = {}
    for key, by_kind in report["points"].items():
        if not all(k in by_kind for k in KINDS):
            continue
        e, v = by_kind["eatt"], by_kind["vanilla"]
        if "source" in e and "source" in v and _shared(e["source"]) != _shared(v["source"]):
            continue  # other weights or vectors: no ratio until both are measured on one
        cfg = report["configs"][key.split("/")[0]]
        counts = [
            energy.energy_pj(
                energy.core_counts(
                    k, cfg["len_q"], cfg["len_k"], cfg["dim"], cfg["heads"], "attention"
                ),
                energy.DEFAULT_TABLE,
                "asic",
            )  # fmt: skip
            for k in KINDS
        ]
        out[key] = {
            "energy": e["energy_per_call_pj"]["total"] / v["energy_per_call_pj"]["total"],
            "parts": {
                p: e["parts"][p] / v["parts"][p]
                for p in PARTS
                if v["parts"].get(p) and p in e["parts"]
            },
            "paper_analytic": energy.energy_ratios(cfg["len_k"], cfg["dim"])["eatt"]["attention"][
                "asic"
            ]
            / 100.0,
            "core_counts": counts[0] / counts[1],
            "calls_per_s": calls_per_s(report, key, "eatt") / calls_per_s(report, key, "vanilla"),
        }
    return out


def markdown(report: dict) -> str:
    lines = [
        "# Measured energy at real sizes: E-ATT vs dot, folded engine (bench/energy_real_size.py)",
        "",
        f"OSU 0.18 um cells, memories by CACTI scaled to 180 nm; {report['date']}, "
        f"{report['machine']}. uJ per call; ratios are E-ATT / dot.",
        "",
        "| size | clocks | kind | energy/call | logic | registers | clock + inputs | clock gates "
        "| memories | cells | cycles/call | Fmax MHz | calls/s | mismatches | build + sim s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- |",
    ]
    for key, by_kind in report["points"].items():
        size, gating = key.split("/")
        for kind in KINDS:
            r = by_kind.get(kind)
            if not r:
                continue
            p = r["parts"]
            lines.append(
                f"| {size} | {gating} | {kind} | {r['energy_per_call_pj']['total'] / 1e6:,.1f} | "
                + " | ".join(
                    f"{p.get(k, 0) / 1e6:,.1f}"
                    for k in ("logic", "registers", "clock_and_inputs", "clock_gating", "memories")
                )
                + f" | {r['cells']:,} | {r['cycles'] // max(r['vectors'], 1):,} | "
                f"{r['fmax_mhz']:g} | {calls_per_s(report, key, kind):,.1f} | {r['mismatches']} | "
                f"{r['build_seconds']:.0f} + {r['sim_seconds']:.0f} |"
            )
        q = report["ratios"].get(key)
        if q:
            pq = q["parts"]
            lines.append(
                f"| {size} | {gating} | **E-ATT / dot** | **{q['energy']:.3f}** | "
                + " | ".join(
                    f"{pq[k]:.2f}" if k in pq else "-"
                    for k in ("logic", "registers", "clock_and_inputs", "clock_gating", "memories")
                )
                + f" | paper {q['paper_analytic']:.3f}, counts {q['core_counts']:.3f} | | | "
                f"{q['calls_per_s']:.2f} | | |"
            )
    return "\n".join(lines + macro_lines(report)) + "\n"


def plot(report: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    keys = [k for k in report["points"] if k in report["ratios"]]  # both kinds, one source
    if not keys:
        return False
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(keys), 3.6))
    parts = ("logic", "registers", "clock_and_inputs", "clock_gating", "memories")
    for j, key in enumerate(keys):
        for i, kind in enumerate(KINDS):
            r = report["points"][key][kind]
            bottom = 0.0
            for n, part in enumerate(parts):
                v = r["parts"].get(part, 0.0) / 1e6
                ax.bar(j + (i - 0.5) * 0.38, v, 0.36, bottom=bottom, color=f"C{n}",
                       label=part if j == 0 and i == 0 else None)  # fmt: skip
                bottom += v
    ticks = [
        f"{k.replace('/', ', ')}\nE-ATT / dot {report['ratios'][k]['energy']:.2f}"
        f"\n(paper {report['ratios'][k]['paper_analytic']:.2f})"
        for k in keys
    ]
    ax.set_xticks(range(len(keys)), ticks, fontsize=7)
    ax.set_ylabel("uJ per call (left E-ATT, right dot)")
    ax.set_title("E-ATT / dot measured at real sizes", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def source_of(size: str, args) -> dict:
    """What a point of this size is measured on: a resumed run keeps a point only if its
    recorded source is this one."""
    if size == "paper":
        return {"weights": "random, seed 1", "vectors": args.vectors}
    from eatt.sweep_point import file_digest

    return {
        "onnx_sha256": file_digest(args.onnx),
        "inputs_sha256": file_digest(args.inputs),
        "vectors": args.vectors,
    }


def rtl_digest(rtl: Path) -> str:
    """The first 16 hex digits of the SHA-256 of a generated design (its .sv and .mem files,
    names and contents): a point measured on an older RTL is measured again on --resume."""
    h = hashlib.sha256()
    for f in sorted(rtl.glob("*")):
        if f.suffix in (".sv", ".mem"):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def measured_on(record: dict, size: str, source: dict) -> bool:
    """Whether a recorded point was measured on ``source`` (a paper-size point recorded before
    the source was kept: its weights were always seed 1, so its vector count decides)."""
    recorded = record.get("source")
    if recorded is None and size == "paper":
        recorded = {"weights": "random, seed 1", "vectors": record.get("vectors")}
    return recorded == source


def _cores(size: str, args, tmp: Path):
    """(kind, RTL folder, inputs) of one size: both kinds, the same weights."""
    if size == "paper":
        for kind in KINDS:
            cfg = CoreConfig.from_dict(dict(kind=kind, **PAPER))
            out = tmp / f"{size}_{kind}"
            weights = random_weights(cfg.replace(kind="eatt"), seed=1)
            options = BuildOptions(folding=folding(size, kind))
            generate_rtl(cfg, weights, out, level="folded", options=options)
            yield kind, out, None, cfg
        return
    from eatt.quant.reader import load_core  # onnx: heavy

    cfg, weights = load_core(args.onnx)
    inputs = capture_inputs(args.inputs, cfg, args.vectors)
    for kind in KINDS:
        kcfg = cfg.replace(kind=kind)
        out = tmp / f"{size}_{kind}"
        options = BuildOptions(folding=folding(size, kind))
        generate_rtl(kcfg, weights, out, level="folded", options=options)
        yield kind, out, inputs, kcfg


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="paper,layer")
    ap.add_argument("--vectors", type=int, default=2)
    ap.add_argument("--gating", choices=("both", "on", "off"), default="both")
    ap.add_argument("--onnx", default="runs/default_quant/layer.onnx")
    ap.add_argument("--inputs", default="runs/default_quant/acts.npz")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument(
        "--add",
        nargs=3,
        metavar=("RESULT.json", "SIZE/GATING", "KIND"),
        help="add an `eatt power --json` result made by hand as a point (no measurement)",
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    sizes = [s for s in args.sizes.split(",") if s]
    for s in sizes:
        if s not in FOLDING:
            ap.error(f"--sizes: {s!r} is not one of {', '.join(FOLDING)}")
    gatings = {"both": ("ungated", "gated"), "on": ("gated",), "off": ("ungated",)}[args.gating]
    report = {"bench": "energy_real_size", "points": {}, "configs": {}, "ratios": {}}
    if args.resume and args.out.is_file():
        report = json.loads(args.out.read_text())
        report["ratios"] = ratios(report)  # a record from an older version has fewer
    report.update(date=time.strftime("%Y-%m-%d"), machine=platform.machine())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.add:
        path, key, kind = args.add
        r = rescaled(json.loads(Path(path).read_text()))
        size = key.split("/")[0]
        shape = ("len_q", "len_k", "dim", "heads")
        report["configs"][size] = {k: r["config"][k] for k in shape} | {"folding": FOLDING[size]}
        report["points"].setdefault(key, {})[kind] = _record(r, None)
        report["ratios"] = ratios(report)
        atomic_write_text(args.out, json.dumps(report, indent=1) + "\n")
        sizes = []
    with tempfile.TemporaryDirectory(prefix="eatt-real-size-") as tmp:
        for size in sizes:
            source = source_of(size, args)
            for kind, rtl, inputs, cfg in _cores(size, args, Path(tmp)):
                shape = ("len_q", "len_k", "dim", "heads")
                report["configs"][size] = {k: cfg.to_dict()[k] for k in shape} | {
                    "folding": FOLDING[size]
                }
                for gating in gatings:
                    key = f"{size}/{gating}"
                    done = report["points"].get(key, {}).get(kind)
                    here = {**source, "rtl_sha256": rtl_digest(rtl)}
                    if done is not None and measured_on(done, size, here):
                        continue
                    t0 = time.perf_counter()
                    r = power(
                        rtl, vectors=args.vectors, seed=0, inputs=inputs, simulator="verilator",
                        clock_gating=DEFAULT_MIN_FLIP_FLOPS if gating == "gated" else None,
                    )  # fmt: skip
                    print(f"{key} {kind}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
                    report["points"].setdefault(key, {})[kind] = _record(r, here)
                    report["ratios"] = ratios(report)
                    atomic_write_text(args.out, json.dumps(report, indent=1) + "\n")
    atomic_write_text(args.out.with_suffix(".md"), markdown(report))
    plot(report, args.out.with_suffix(".png"))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
