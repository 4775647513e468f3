"""The folded hls4ml layer at a size: E-ATT next to vanilla at the same reuse_factor.

For each kind, ``eatt.hls.project.write_project`` writes the folded layer that
``reuse_factor`` selects (eatt.hls.folding, docs/hls.md "Folded"), compiles its C simulation
and runs N random + the edge vectors against the golden model; the C simulation counts the
pipelined-loop iterations per call, which must equal the formula. Written to
bench/results/hls_folded_<size>.json, .md and .png: per kind the folding, iterations per call
(and the RTL engine's cycles for the same folding), mismatches, compile and C-simulation times,
peak memory, and the E-ATT / vanilla ratios. No vendor HLS tool runs here, so the schedule's
real latency and the resources are not part of it.

Sizes: ``paper`` (l 22, d 512, 8 heads, reuse_factor 400,000: E-ATT (2, 8, 4), vanilla (2, 8);
about 1.5 minutes and 0.5 GB here), ``default`` (the bundled model's 64 x 64, dim 128, 4 heads,
reuse_factor 40,000), ``small`` (4 x 4, dim 8: seconds, for the tests).

Usage: ``python bench/hls_folded.py [--size paper|default|small] [--vectors N]
[--io-type io_stream|io_parallel] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

from eatt.config import CoreConfig, atomic_write_text
from eatt.hls.project import write_project
from eatt.rtl_sim.folded import folded_cycles

RESULTS = Path(__file__).resolve().parent / "results"
#: size -> (len_q, len_k, dim, heads, reuse_factor)
SIZES = {
    "paper": (22, 22, 512, 8, 400_000),
    "default": (64, 64, 128, 4, 40_000),
    "small": (4, 4, 8, 2, 300),
}


def measure(kind: str, size: str, vectors: int, io_type: str, work: Path) -> dict:
    lq, lk, dim, heads, reuse = SIZES[size]
    cfg = CoreConfig(kind, lq, lk, dim, heads, reuse_factor=reuse)
    start = time.perf_counter()
    r = write_project(cfg, work / kind, vectors=vectors, io_type=io_type)
    wall = time.perf_counter() - start
    csim, folding = r["csim"], r["folding"]
    return {
        "config": cfg.to_dict(),
        "folding": folding,
        "iterations_per_call": r["iterations"]["total"],
        "iterations_counted": csim["iterations_per_call"],
        "ii_iterations": r["iterations"]["ii"],
        "rtl_ii_cycles": folded_cycles(cfg, **folding)["ii"],
        "vectors": csim["vectors"] + csim["edge_vectors"],
        "mismatches": csim["mismatches"],
        "ok": r["ok"],
        "compile_s": csim["compile_s"],
        "csim_s": csim["csim_s"],
        "csim_vectors_per_s": csim["vectors_per_s"],
        "wall_s": round(wall, 1),
    }


def to_markdown(result: dict) -> str:
    rows = result["kinds"]
    keys = ("folding", "iterations_per_call", "iterations_counted", "ii_iterations",
            "rtl_ii_cycles", "mismatches", "compile_s", "csim_vectors_per_s", "wall_s")  # fmt: skip
    lines = [
        f"# Folded hls4ml layer, {result['size']} size ({result['io_type']})",
        "",
        "| | E-ATT | vanilla | E-ATT / vanilla |",
        "| --- | ---: | ---: | ---: |",
    ]
    for key in keys:
        e, v = rows["eatt"][key], rows["vanilla"][key]
        ratio = result["ratios"].get(key)
        if isinstance(e, dict):
            e = ", ".join(f"{k} {x}" for k, x in e.items())
            v = ", ".join(f"{k} {x}" for k, x in v.items())
        lines.append(f"| {key} | {e} | {v} | {'' if ratio is None else f'{ratio:.3g}'} |")
    lines += ["", f"Peak memory {result['peak_rss_mb']:.0f} MB (this process and g++)."]
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["kinds"]
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.2))
    for ax, key, label in zip(
        axes,
        ("iterations_per_call", "compile_s", "csim_vectors_per_s"),
        ("cycles per call (iterations)", "g++ compile (s)", "C simulation (vectors/s)"),
        strict=True,
    ):
        ax.bar(["E-ATT", "vanilla"], [rows["eatt"][key], rows["vanilla"][key]],
               color=["tab:green", "tab:gray"])  # fmt: skip
        ax.set_title(label, fontsize=9)
    fig.suptitle(f"folded hls4ml layer, {result['size']} size ({result['io_type']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=list(SIZES), default="paper")
    parser.add_argument("--vectors", type=int, default=200)
    parser.add_argument("--io-type", choices=["io_stream", "io_parallel"], default="io_stream")
    parser.add_argument("--out", type=Path, help="JSON path (default bench/results/...)")
    args = parser.parse_args()
    if args.vectors < 1:
        parser.error(f"--vectors: must be >= 1, got {args.vectors}")
    out = args.out or RESULTS / f"hls_folded_{args.size}.json"
    with tempfile.TemporaryDirectory(prefix="eatt-hls-folded-") as tmp:
        kinds = {k: measure(k, args.size, args.vectors, args.io_type, Path(tmp)) for k in
                 ("eatt", "vanilla")}  # fmt: skip
    ratios = {
        key: kinds["eatt"][key] / kinds["vanilla"][key]
        for key in ("iterations_per_call", "rtl_ii_cycles", "compile_s", "csim_vectors_per_s")
        if kinds["vanilla"][key]
    }
    peak = max(
        resource.getrusage(who).ru_maxrss
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    result = {
        "size": args.size,
        "io_type": args.io_type,
        "kinds": kinds,
        "ratios": ratios,
        "ok": all(k["ok"] for k in kinds.values()),
        "peak_rss_mb": peak / 1024,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    atomic_write_text(out.with_suffix(".md"), to_markdown(result))
    plot(result, out.with_suffix(".png"))
    print(json.dumps({"ok": result["ok"], "ratios": ratios, "out": str(out)}))
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
