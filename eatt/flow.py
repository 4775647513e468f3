"""`eatt flow`: the main job on one core, every stage that exists so far, in order.

Today: the analytic energy table (the paper's levels at the core's size and the core's own
operation counts), the golden model's self-check, the QONNX export executed by qonnx against
the golden model, the hls4ml project made from that file with its C simulation against the
golden model, and the alignment-level RTL simulated in Verilator against the golden model.
Later stages (attention-level RTL, resources) append their results here as they land.
Artifacts go under the output folder (default runs/flow).
"""

from __future__ import annotations

import sys
from pathlib import Path

from eatt.config import CoreConfig
from eatt.model import energy
from eatt.quant.check import format_golden_check, golden_check
from eatt.quant.golden import CoreWeights


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def core_energy(cfg: CoreConfig, table: str = energy.DEFAULT_TABLE) -> dict:
    """This core's operation counts and energy (hardware counting), E-ATT next to dot."""
    out: dict = {}
    for kind in energy.CORE_KINDS:
        for level in energy.CORE_LEVELS:
            counts = energy.core_counts(kind, cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, level)
            out.setdefault(kind, {})[level] = {
                "adds": counts.adds,
                "muls": counts.muls,
                "selections": counts.selections,
                "energy_pj": {t: energy.energy_pj(counts, table, t) for t in energy.TABLES[table]},
            }
    return out


def run_flow(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int = 1,
    vectors: int = 1000,
    out_dir: str | Path = "runs/flow",
) -> dict:
    from eatt.quant import export

    out_dir = Path(out_dir)
    paper = energy.energy_report(length=max(cfg.len_q, cfg.len_k), dim=cfg.dim)
    stages: dict = {"energy": {"paper": paper, "core": core_energy(cfg)}}
    log("flow: golden model check")
    stages["golden"] = golden_check(cfg, weights, vectors=vectors, seed=seed)
    log("flow: QONNX export and qonnx execution")
    onnx_path = out_dir / f"{cfg.kind}_core.onnx"
    stages["export"] = export.export_core(cfg, weights, onnx_path)
    stages["export"]["check"] = export.check_export(onnx_path, vectors=vectors, seed=seed)
    log("flow: hls4ml project from the QONNX file, C simulation")
    from eatt.hls.project import write_project

    stages["hls"] = write_project(onnx_path, out_dir / f"{cfg.kind}_hls", vectors=vectors)
    log("flow: RTL generation (alignment) and Verilator simulation")
    from eatt.rtl_sim.generate import generate_rtl
    from eatt.rtl_sim.runner import simulate

    rtl_dir = out_dir / f"{cfg.kind}_alignment_rtl"
    stages["rtl"] = {"alignment": generate_rtl(cfg, weights, rtl_dir, level="alignment")}
    stages["sim"] = {"alignment": simulate(rtl_dir, vectors=vectors, seed=seed)}
    ok = (
        stages["golden"]["ok"]
        and stages["export"]["check"]["ok"]
        and stages["hls"]["ok"]
        and not stages["sim"]["alignment"]["mismatches"]
    )
    return {
        "config": cfg.to_dict(),
        "seed": seed,
        "out_dir": str(out_dir),
        "stages": stages,
        "ok": ok,
    }


def format_flow(r: dict) -> str:
    paper = r["stages"]["energy"]["paper"]
    core = r["stages"]["energy"]["core"]
    lines = [
        f"== energy: the paper's levels at l={paper['length']}, d={paper['dim']} ==",
        energy.format_energy_table(paper),
        "",
        "== energy: this core, hardware operation counts (paper table, pJ) ==",
    ]
    for level in energy.CORE_LEVELS:
        e, d = core["eatt"][level], core["dot"][level]
        ratios = ", ".join(
            f"{t} {100 * e['energy_pj'][t] / d['energy_pj'][t]:.2f}%" for t in e["energy_pj"]
        )
        lines.append(
            f"  {level:<9} eatt: {e['adds']} add, {e['muls']} mul, {e['selections']} sel | "
            f"dot: {d['adds']} add, {d['muls']} mul | eatt/dot {ratios}"
        )
    lines += ["", "== golden model ==", format_golden_check(r["stages"]["golden"])]
    from eatt.quant.export import format_check

    ex = r["stages"]["export"]
    lines += ["", f"== QONNX export: {ex['path']} ==", format_check(ex["check"])]
    hls = r["stages"]["hls"]
    c = hls["csim"]
    lines += [
        "",
        f"== hls4ml ({hls['backend']}): {hls['project']} ==",
        f"C simulation vs golden: {c['vectors']} random + {c['edge_vectors']} edge vectors, "
        f"{c['mismatches']} mismatching",
    ]
    if c.get("first_mismatch"):
        lines.append(f"  first mismatch: {c['first_mismatch']}")
    sim = r["stages"]["sim"]["alignment"]
    lines += [
        "",
        f"== RTL, alignment level: {r['out_dir']}/{r['config']['kind']}_alignment_rtl ==",
        f"Verilator + cocotb: {sim['vectors']} vectors, {sim['mismatches']} mismatching; "
        f"latency {sim['latency_cycles']} cycles, II {sim['ii_cycles']} cycle(s)",
    ]
    if sim.get("first_mismatch"):
        lines.append(f"  first mismatch: {sim['first_mismatch']['message']}")
    lines.append("")
    lines.append("flow: " + ("PASS" if r["ok"] else "FAIL"))
    return "\n".join(lines)
