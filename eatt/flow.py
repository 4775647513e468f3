"""`eatt flow`: the main job. One core and its peer (E-ATT <-> dot, same weights and formats)
through every stage, each checked against the golden model, then one comparison report.

Stages per core: golden self-check (widths, float model within the derived bound), QONNX export
executed by qonnx, the hls4ml project made from that file with its C simulation, RTL at the
alignment and attention levels simulated in Verilator by cocotb, and Yosys resources of the
alignment RTL. Before them, the analytic energy model. Then the windowed attention unit (kind
window, docs/window.md; the embedded default unless the config is itself a window unit) through
the same stages: golden, QONNX, hls4ml C simulation, sequential RTL in Verilator with its
cycles per window size, Yosys. Artifacts go under the output folder (default runs/flow), one
sub-folder per core and ``window``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from eatt.config import CoreConfig
from eatt.model import energy
from eatt.quant.check import format_golden_check, golden_check
from eatt.quant.golden import CoreWeights

PEER = {"eatt": "dot", "dot": "eatt"}
CELLS = ("LUT", "FF", "CARRY4", "DSP48E1")


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


def run_core(
    cfg: CoreConfig, weights: CoreWeights, seed: int, vectors: int, out_dir: Path, resources: bool
) -> dict:
    """Every stage for one core; returns {stage: result} and "ok"."""
    from eatt.hls.project import write_project
    from eatt.quant import export
    from eatt.rtl_sim.generate import generate_rtl
    from eatt.rtl_sim.runner import simulate

    kind = cfg.kind
    r: dict = {}
    log(f"flow [{kind}]: golden model check")
    r["golden"] = golden_check(cfg, weights, vectors=vectors, seed=seed)
    log(f"flow [{kind}]: QONNX export, qonnx execution")
    onnx_path = out_dir / "core.onnx"
    r["export"] = export.export_core(cfg, weights, onnx_path)
    r["export"]["check"] = export.check_export(onnx_path, vectors=vectors, seed=seed)
    log(f"flow [{kind}]: hls4ml project from the QONNX file, C simulation")
    r["hls"] = write_project(onnx_path, out_dir / "hls", vectors=vectors)
    r["rtl"], r["sim"] = {}, {}
    for level in ("alignment", "attention"):
        log(f"flow [{kind}]: RTL ({level}), Verilator + cocotb simulation")
        rtl_dir = out_dir / f"rtl_{level}"
        r["rtl"][level] = generate_rtl(cfg, weights, rtl_dir, level=level)
        r["sim"][level] = simulate(rtl_dir, vectors=vectors, seed=seed)
    if resources:
        from eatt.rtl_sim.resources import resources as yosys

        log(f"flow [{kind}]: Yosys synth_xilinx of the alignment RTL (minutes on big cores)")
        r["resources"] = {"alignment": yosys(out_dir / "rtl_alignment")}
    r["ok"] = bool(
        r["golden"]["ok"]
        and r["export"]["check"]["ok"]
        and r["hls"]["ok"]
        and all(not s["mismatches"] for s in r["sim"].values())
    )
    return r


def run_window(
    cfg: CoreConfig, weights: CoreWeights, seed: int, vectors: int, out_dir: Path, resources: bool
) -> dict:
    """Every stage for the windowed unit (kind window); returns {stage: result} and "ok"."""
    from eatt.hls.project import write_project
    from eatt.quant import export
    from eatt.rtl_sim.generate import generate_rtl
    from eatt.rtl_sim.runner import simulate

    r: dict = {"config": cfg.to_dict()}
    log("flow [window]: golden model check")
    r["golden"] = golden_check(cfg, weights, vectors=vectors, seed=seed)
    log("flow [window]: QONNX export, qonnx execution")
    onnx_path = out_dir / "window.onnx"
    r["export"] = export.export_core(cfg, weights, onnx_path)
    r["export"]["check"] = export.check_export(onnx_path, vectors=vectors, seed=seed)
    log("flow [window]: hls4ml project from the QONNX file, C simulation")
    r["hls"] = write_project(onnx_path, out_dir / "hls", vectors=vectors)
    log("flow [window]: sequential RTL, Verilator + cocotb simulation")
    r["rtl"] = generate_rtl(cfg, weights, out_dir / "rtl")
    r["sim"] = simulate(out_dir / "rtl", vectors=vectors, seed=seed)
    if resources:
        from eatt.rtl_sim.resources import resources as yosys

        log("flow [window]: Yosys synth_xilinx of the windowed unit")
        r["resources"] = yosys(out_dir / "rtl")
    r["ok"] = bool(
        r["golden"]["ok"]
        and r["export"]["check"]["ok"]
        and r["hls"]["ok"]
        and not r["sim"]["mismatches"]
        and r["sim"]["cycles_rule_holds"]
    )
    return r


def run_flow(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int = 1,
    vectors: int = 1000,
    out_dir: str | Path = "runs/flow",
    resources: bool = True,
    window: bool = True,
) -> dict:
    """The core and its peer, then the windowed unit (``window=False`` skips it). A window
    config runs the windowed unit alone."""
    out_dir = Path(out_dir)
    cores, result = {}, {"config": cfg.to_dict(), "seed": seed, "out_dir": str(out_dir)}
    if cfg.kind != "window":
        paper = energy.energy_report(length=max(cfg.len_q, cfg.len_k), dim=cfg.dim)
        for kind in (cfg.kind, PEER[cfg.kind]):
            core_cfg = cfg if kind == cfg.kind else cfg.replace(kind=kind)
            # same integer weights for both: the comparison changes the mechanism, nothing else
            cores[kind] = run_core(core_cfg, weights, seed, vectors, out_dir / kind, resources)
        result["energy"] = {"paper": paper, "core": core_energy(cfg)}
        result["comparison"] = compare(cores, core_energy(cfg))
    result["cores"] = cores
    if cfg.kind == "window" or window:
        from eatt.config import default_config
        from eatt.quant.golden import random_weights

        wcfg = cfg if cfg.kind == "window" else default_config("window")
        wweights = weights if cfg.kind == "window" else random_weights(wcfg, seed)
        result["window"] = run_window(wcfg, wweights, seed, vectors, out_dir / "window", resources)
    result["ok"] = all(c["ok"] for c in cores.values()) and result.get("window", {}).get("ok", True)
    return result


def compare(cores: dict, core_en: dict) -> list[dict]:
    """Rows of the report: metric, E-ATT, dot, E-ATT / dot."""
    rows = []

    def add(metric: str, get) -> None:
        try:
            e, d = get(cores["eatt"]), get(cores["dot"])
        except KeyError:
            return
        ratio = e / d if isinstance(e, (int, float)) and d else None
        rows.append({"metric": metric, "eatt": e, "dot": d, "ratio": ratio})

    for level in ("alignment", "attention"):
        for target in ("asic", "fpga"):
            rows.append(
                {
                    "metric": f"{level} energy, {target} (pJ, analytic)",
                    "eatt": core_en["eatt"][level]["energy_pj"][target],
                    "dot": core_en["dot"][level]["energy_pj"][target],
                    "ratio": core_en["eatt"][level]["energy_pj"][target]
                    / core_en["dot"][level]["energy_pj"][target],
                }
            )
    for level in ("alignment", "attention"):
        add(f"{level} RTL latency (cycles)", lambda c, lv=level: c["sim"][lv]["latency_cycles"])
        add(f"{level} RTL II (cycles)", lambda c, lv=level: c["sim"][lv]["ii_cycles"])
    for cell in CELLS:
        add(f"alignment {cell} (Yosys xc7)", lambda c, k=cell: c["resources"]["alignment"][k])
    add("mismatches, all levels", lambda c: _mismatches(c))
    return rows


def _mismatches(core: dict) -> int:
    return (
        core["export"]["check"]["mismatches"]
        + core["hls"]["csim"]["mismatches"]
        + sum(s["mismatches"] for s in core["sim"].values())
    )


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def format_window(w: dict, out_dir: str) -> list[str]:
    """The windowed unit's part of the report."""
    from eatt.quant.export import format_check

    c = w["config"]
    s, cs = w["sim"], w["hls"]["csim"]
    lines = [
        "",
        f"=== windowed unit: {c['score']} scores, l_k {c['len_k']}, D {c['half_width']}, "
        f"position {c['position']} ({out_dir}/window) ===",
        format_golden_check(w["golden"]),
        format_check(w["export"]["check"]),
        f"hls4ml C simulation vs golden: {cs['vectors']} random + {cs['edge_vectors']} edge "
        f"steps, {cs['mismatches']} mismatching",
        f"RTL: Verilator + cocotb, {s['vectors']} steps over {s['memories']} memories, "
        f"{s['mismatches']} mismatching; {s['cycles_rule']} "
        f"({'holds' if s['cycles_rule_holds'] else 'DOES NOT HOLD'} on every step)",
    ]
    if s.get("first_mismatch"):
        lines.append(f"  first mismatch: {s['first_mismatch']['message']}")
    by_rows = s["cycles_by_rows"]
    lines.append(
        "  cycles by window rows: "
        + ", ".join(
            f"{rows} rows: latency {v['latency_cycles']}, II {v['ii_cycles']}"
            for rows, v in sorted(by_rows.items(), key=lambda kv: int(kv[0]))
        )
    )
    if "resources" in w:
        res = w["resources"]
        lines.append(
            "Yosys xc7, windowed unit: " + ", ".join(f"{k} {res[k]}" for k in (*CELLS, "BRAM"))
        )
    return lines


def format_flow(r: dict) -> str:
    lines = []
    if "energy" in r:
        paper = r["energy"]["paper"]
        lines = [
            f"== energy: the paper's levels at l={paper['length']}, d={paper['dim']} ==",
            energy.format_energy_table(paper),
        ]
    from eatt.quant.export import format_check

    for kind, c in r["cores"].items():
        lines += ["", f"=== core: {kind} ({r['out_dir']}/{kind}) ==="]
        lines += [format_golden_check(c["golden"])]
        lines += [format_check(c["export"]["check"])]
        cs = c["hls"]["csim"]
        lines.append(
            f"hls4ml C simulation vs golden: {cs['vectors']} random + {cs['edge_vectors']} edge "
            f"vectors, {cs['mismatches']} mismatching"
        )
        for level, s in c["sim"].items():
            lines.append(
                f"RTL {level}: Verilator + cocotb, {s['vectors']} vectors, {s['mismatches']} "
                f"mismatching; latency {s['latency_cycles']} cycles, II {s['ii_cycles']}"
            )
            if s.get("first_mismatch"):
                lines.append(f"  first mismatch: {s['first_mismatch']['message']}")
        if "resources" in c:
            res = c["resources"]["alignment"]
            lines.append("Yosys xc7, alignment: " + ", ".join(f"{k} {res[k]}" for k in CELLS))
    if "comparison" in r:
        lines += ["", "=== E-ATT vs dot (same weights and formats) ==="]
        lines.append(f"{'metric':<40} {'eatt':>12} {'dot':>12} {'eatt/dot':>9}")
        for row in r["comparison"]:
            lines.append(
                f"{row['metric']:<40} {_fmt(row['eatt']):>12} {_fmt(row['dot']):>12} "
                f"{_fmt(row['ratio']):>9}"
            )
    if "window" in r:
        lines += format_window(r["window"], r["out_dir"])
    lines += ["", "flow: " + ("PASS" if r["ok"] else "FAIL")]
    return "\n".join(lines)
