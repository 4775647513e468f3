"""Cycles per decoding step of the windowed attention unit against the whole memory (issue 8).

For l_k in 16, 32, 64, 128 and D in 2, 4, 8 the windowed unit (kind window, E-ATT scores,
local-p Gaussian, dim 4, one head; rtl_sim/window.py) is generated and simulated in Verilator
(cocotb, bit-exact against quant/window.py) on steps whose window lies inside the memory
(p = l_k / 2, w = D: min(2 D + 1, l_k) rows). "full" is the same unit generated with D = l_k
and driven with w = l_k: it scores the whole memory (l_k rows). Two cycle counts per step:

    latency  ap_start accepted -> ap_done (one step into an idle unit)
    ii       cycles between back-to-back starts (the reduction of one step overlaps the
             scoring of the next: the throughput of a decoder that keeps the unit busy)

Target (issue 8): cycles <= 1.2 (2D + 1) / l_k * full. Compaction (L0Drop Algorithm 1): on the
full unit, memories of N' kept rows + one zero row (length N' + 1, w = l_k): cycles against N'.

Writes bench/results/window_cycles.json and window_cycles.png; prints a summary table.
Usage: ``python bench/window_cycles.py [--lk 16,32] [--d 2,4] [--steps 8] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from eatt.config import CoreConfig, atomic_write, atomic_write_text
from eatt.quant.golden import random_weights
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.window import simulate_window, window_steps

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_OUT = RESULTS / "window_cycles.json"
LKS = (16, 32, 64, 128)
DS = (2, 4, 8)


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def unit_config(len_k: int, window_d: int) -> CoreConfig:
    return CoreConfig.from_dict(
        dict(kind="window", len_q=1, len_k=len_k, dim=4, heads=1, window_d=window_d)
    )


def build_unit(cfg: CoreConfig, work: Path) -> Path:
    out = work / f"lk{cfg.len_k}_d{cfg.window_d}"
    generate_rtl(cfg, random_weights(cfg, seed=1), out)
    return out


def measure(out: Path, steps: dict) -> dict:
    """Simulate the grouped steps (bit-exact check included); return the summary."""
    result = simulate_window(out, inputs=steps, seed=1)
    if result["mismatches"]:
        raise RuntimeError(f"{out}: {result['mismatches']} mismatches: {result['first_mismatch']}")
    return result


def centred_steps(cfg: CoreConfig, w: int, n: int, seed: int) -> dict:
    """n steps over one full-length memory, centred so the window is not clipped."""
    steps = window_steps(cfg, n, seed=seed, steps_per_memory=n)
    steps["length"][:] = cfg.len_k
    steps["counts"][:] = 1
    steps["p"][:] = cfg.len_k // 2
    steps["w"][:] = w
    return steps


def compaction_steps(cfg: CoreConfig, kept: list[int], n: int, seed: int) -> dict:
    """Per N' in kept: a memory of N' rows + one zero row (count l_k - N'), n steps with the
    whole memory in the window."""
    groups = [window_steps(cfg, n, seed=seed + i, steps_per_memory=n) for i in range(len(kept))]
    steps = {k: np.concatenate([g[k] for g in groups]) for k in groups[0]}
    steps["group"] = np.repeat(np.arange(len(kept)), n)
    for i, k in enumerate(kept):
        steps["keys"][i, k:], steps["values"][i, k:] = 0, 0
        steps["counts"][i] = 1
        steps["counts"][i, k] = cfg.len_k - k
        steps["length"][i] = k + 1
    steps["p"] = np.zeros_like(steps["group"])
    steps["w"] = np.full_like(steps["group"], cfg.window_d)
    return steps


def _cycles(result: dict, rows: int) -> dict:
    entry = result["cycles_by_rows"][str(rows)]
    return {"rows": rows, "latency": entry["latency_cycles"], "ii": entry["ii_cycles"]}


def run(lks, ds, steps_per_point: int, work: Path) -> dict:
    points, fulls, compaction = [], {}, {}
    for lk in lks:
        full_cfg = unit_config(lk, lk)
        kept = sorted({max(1, lk // 8), lk // 4, lk // 2, lk - 1})
        steps = centred_steps(full_cfg, lk, steps_per_point, seed=lk)
        t0 = time.perf_counter()
        full_dir = build_unit(full_cfg, work)
        full = measure(full_dir, steps)
        fulls[lk] = _cycles(full, lk)
        comp = measure(full_dir, compaction_steps(full_cfg, kept, steps_per_point, lk))
        compaction[lk] = [{"kept": k, **_cycles(comp, k + 1)} for k in kept]
        _log(f"l_k={lk} full: {fulls[lk]} ({time.perf_counter() - t0:.0f} s)")
        for d in ds:
            cfg = unit_config(lk, d)
            t0 = time.perf_counter()
            res = measure(build_unit(cfg, work), centred_steps(cfg, d, steps_per_point, lk + d))
            rows = min(2 * d + 1, lk)
            c = _cycles(res, rows)
            target = 1.2 * (2 * d + 1) / lk
            point = {
                "len_k": lk,
                "D": d,
                "window": c,
                "full": fulls[lk],
                "target_ratio": round(target, 4),
                "latency_ratio": round(c["latency"] / fulls[lk]["latency"], 4),
                "ii_ratio": round(c["ii"] / fulls[lk]["ii"], 4),
                "vectors": res["vectors"],
                "mismatches": res["mismatches"],
            }
            point["latency_meets_target"] = point["latency_ratio"] <= target
            point["ii_meets_target"] = point["ii_ratio"] <= target
            points.append(point)
            _log(f"l_k={lk} D={d}: {c} ({time.perf_counter() - t0:.0f} s)")
    return {
        "points": points,
        "full": {str(k): v for k, v in fulls.items()},
        "compaction": {str(k): v for k, v in compaction.items()},
    }


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    lks = sorted({p["len_k"] for p in result["points"]})
    for n, d in enumerate(sorted({p["D"] for p in result["points"]})):
        pts = [p for p in result["points"] if p["D"] == d]
        ax1.plot(
            [p["len_k"] for p in pts], [p["window"]["latency"] for p in pts], "o-",
            color=f"C{n}", label=f"window D={d} (latency)",
        )  # fmt: skip
        ax1.plot(
            [p["len_k"] for p in pts], [p["window"]["ii"] for p in pts], "x--",
            color=f"C{n}", label=f"window D={d} (II)",
        )  # fmt: skip
    full = result["full"]
    ax1.plot(lks, [full[str(k)]["latency"] for k in lks], "ks-", label="whole memory (latency)")
    ax1.plot(lks, [full[str(k)]["ii"] for k in lks], "k^--", label="whole memory (II)")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log", base=2)
    ax1.set_xlabel("memory length l_k")
    ax1.set_ylabel("cycles per step")
    ax1.set_title("windowed unit vs whole memory")
    ax1.legend(fontsize=7)
    for lk, rows in result["compaction"].items():
        ax2.plot([r["kept"] for r in rows], [r["latency"] for r in rows], "o-", label=f"l_k={lk}")
    ax2.set_xlabel("kept rows N' (memory N' + 1 rows)")
    ax2.set_ylabel("latency cycles per step")
    ax2.set_title("L0Drop compaction: cycles vs N'")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)


def summary(result: dict) -> str:
    lines = [
        "l_k  D  rows | latency win/full ratio | II win/full ratio | target | latency | II",
    ]
    for p in result["points"]:
        w, f = p["window"], p["full"]
        lines.append(
            f"{p['len_k']:4d} {p['D']:2d} {w['rows']:4d} | {w['latency']:4d}/{f['latency']:4d} "
            f"{p['latency_ratio']:.3f}   | {w['ii']:4d}/{f['ii']:4d} {p['ii_ratio']:.3f} | "
            f"{p['target_ratio']:.3f}  | {'meets' if p['latency_meets_target'] else 'MISSES'}  "
            f"| {'meets' if p['ii_meets_target'] else 'MISSES'}"
        )
    lines.append("compaction (full unit): N' -> latency / II cycles")
    for lk, rows in result["compaction"].items():
        cells = ", ".join(f"{r['kept']}: {r['latency']}/{r['ii']}" for r in rows)
        lines.append(f"  l_k={lk}: {cells}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lk", default=",".join(map(str, LKS)), help="memory lengths")
    parser.add_argument("--d", default=",".join(map(str, DS)), help="static half-widths D")
    parser.add_argument("--steps", type=int, default=8, help="steps per measured point")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON path (PNG beside)")
    args = parser.parse_args(argv)
    try:
        lks = [int(v) for v in args.lk.split(",")]
        ds = [int(v) for v in args.d.split(",")]
    except ValueError:
        parser.error("--lk and --d take comma-separated integers")
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the II needs two back-to-back steps)")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="window_cycles_") as tmp:
        result = run(lks, ds, args.steps, Path(tmp))
    result["meta"] = {
        "seconds": round(time.perf_counter() - t0, 1),
        "python": platform.python_version(),
        "unit": "kind window, E-ATT scores, gaussian, dim 4, heads 1, default formats",
        "latency_rule": "rows + 3",
        "ii_rule": "rows",
    }
    atomic_write_text(args.out, json.dumps(result, indent=2) + "\n")
    plot(result, args.out.with_suffix(".png"))
    print(summary(result))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
