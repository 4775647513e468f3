"""hls4ml C simulation: conversion, g++ compile and C simulation time, E-ATT next to vanilla.

For the embedded default core and its dot-product peer (same seed-1 integer weights and
formats), ``eatt.hls.project.write_project`` converts the core's QONNX file with hls4ml, writes
the project, compiles the C simulation with g++ and runs N vectors (random + edge) against the
golden model. Wall times per phase go to bench/results/hls_csim.json with the E-ATT / vanilla
ratios; the last stdout line is one JSON object with the ratios and the mismatch counts.

Usage: ``python bench/hls_csim.py [--vectors N] [--repeats R] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from eatt.config import default_config
from eatt.hls.project import write_project
from eatt.quant.export import export_core
from eatt.quant.golden import random_weights

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "hls_csim.json"


def measure(kind: str, vectors: int, repeats: int, work: Path) -> dict:
    cfg = default_config(kind)
    onnx_path = work / f"{kind}.onnx"
    export_core(cfg, random_weights(cfg, seed=1), onnx_path)
    totals, compiles, csims, rates, mismatches = [], [], [], [], 0
    for r in range(repeats):
        start = time.perf_counter()
        result = write_project(onnx_path, work / f"{kind}_hls_{r}", vectors=vectors)
        totals.append(time.perf_counter() - start)
        csim = result["csim"]
        compiles.append(csim["compile_s"])
        csims.append(csim["csim_s"])
        rates.append(csim["vectors_per_s"])
        mismatches += csim["mismatches"]
    compile_s, csim_s, total_s = (statistics.median(v) for v in (compiles, csims, totals))
    return {
        "config": cfg.to_dict(),
        "vectors": vectors + csim["edge_vectors"],
        "mismatches": mismatches,
        "total_s": total_s,
        "compile_s": compile_s,
        "csim_s": csim_s,
        # the rest: hls4ml conversion and golden outputs (hls4ml writes the project in compile())
        "convert_s": total_s - compile_s - csim_s,
        "csim_vectors_per_s": statistics.median(rates),
        "repeats": repeats,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hls_csim_") as tmp:
        cores = {k: measure(k, args.vectors, args.repeats, Path(tmp)) for k in ("eatt", "vanilla")}
    e, d = cores["eatt"], cores["vanilla"]
    ratios = {
        key: e[key] / d[key]
        for key in ("total_s", "compile_s", "csim_s", "convert_s")
        if d[key] > 0
    }
    result = {
        "benchmark": "hls_csim",
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "cores": cores,
        "ratios_eatt_over_vanilla": ratios,
        "mismatches": e["mismatches"] + d["mismatches"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = args.out.with_suffix(".json.tmp")
    tmp_out.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(tmp_out, args.out)
    for kind, c in cores.items():
        print(
            f"{kind:>4}: convert {c['convert_s']:.2f} s, "
            f"compile {c['compile_s']:.2f} s, C sim {c['csim_s']:.3f} s "
            f"({c['csim_vectors_per_s']:.0f} vectors/s), "
            f"{c['mismatches']} mismatches"
        )
    print(json.dumps({"ratios_eatt_over_vanilla": ratios, "mismatches": result["mismatches"]}))


if __name__ == "__main__":
    main()
