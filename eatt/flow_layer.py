"""`eatt flow CHECKPOINT --layer NAME`: one attention layer of a trained model through every
stage, on the vectors the layer really sees (issue 18, item 6).

Stages, each checked against the golden model of the layer's exported core (the core the
model's own eval computes with, eatt.model.layers.layer_core):

1. capture: the model decodes the split; the layer's integer inputs and valid lengths are
   recorded (acts.npz) and the golden model is compared with what the model computed;
2. golden self-check of the core (widths, the float model within the derived bound);
3. QONNX export of the layer (layer.onnx, recording checkpoint and layer), executed by qonnx
   on the captured vectors and the edge vectors;
4. the hls4ml project from that file, its C simulation on the captured vectors;
5. the core's RTL (attention level) in Verilator + cocotb: the captured vectors, then random
   vectors with every valid length and causal offset (edge masks); latency and II;
6. Yosys resources of that RTL; the peer core (E-ATT <-> vanilla, the same integer weights and
   formats) through RTL, simulation and Yosys beside it;
7. BLEU of the model (its eval is the hardware's arithmetic) against the exported cores and
   the QAT surrogate, and the analytic energy of the layer per decoded sentence (the unrolled
   core's operation counts per call x the layer's calls per sentence), for both kinds.

A windowed layer (kinds quant-global / quant-local-m / quant-local-p) is the window unit
(docs/window.md, "Models on the unit"): the same stages on its captured decoding steps (grouped
by memory), its RTL the sequential unit, the peer the unit with the other score (E-ATT <-> dot)
on the same steps when they fit its formats; no analytic energy (the operation counts are the
cores').

A layer too big for the unrolled core on this machine is refused before any work, with one
line pointing to ``--step`` (a decoder layer's one-step core) or the folded engine. The report
is report.md, report.json and report.png in the output folder (eatt.flow's report files).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from eatt.config import ConfigError, CoreConfig, WindowConfig, atomic_write
from eatt.flow import (
    CELLS,
    PEER,
    _fmt,
    _md_table,
    flow_folding,
    folded_config,
    open_flow_dir,
    write_report,
    write_times,
)
from eatt.model import energy, layers
from eatt.model.evaluate import evaluate
from eatt.outdir import check_output_dir
from eatt.progress import say, step
from eatt.quant.check import format_golden_check
from eatt.quant.golden import CoreWeights
from eatt.quant.vectors import (
    capture_inputs,
    load_window_capture,
    window_step_inputs,
)
from eatt.quant.window import WindowGolden, window_bounds
from eatt.rtl_sim.tools import ToolMissing
from eatt.steps import BuildContext, BuildOptions, run_steps

#: most estimated SystemVerilog (MB, CoreConfig.rtl_megabytes) of a layer's core that
#: `eatt flow CHECKPOINT --layer` builds (EATT_MAX_FLOW_RTL_MB overrides). Measured on 2 cores:
#: the attention level at 1 x 12 x dim 16 (0.57 MB estimated) took 46 s in Verilator and
#: 340 s in Yosys (54,622 LUT, 3,238 DSP48E1); the time grows about linearly past that
MAX_FLOW_RTL_MB = 1.0
#: the layer's steps (eatt.steps) before its cores, and each core's (the layer's and its peer)
LAYER_STEPS = ("golden", "export", "hls")
CORE_RTL_STEPS = ("rtl", "sim", "sim_edges", "resources")


def check_flow_size(cfg: CoreConfig, name: str, step_core: bool) -> None:
    """ConfigError (one line) when the layer's unrolled core is too big for the flow here."""
    limit = float(os.environ.get("EATT_MAX_FLOW_RTL_MB", MAX_FLOW_RTL_MB))
    mb = cfg.rtl_megabytes()
    if mb <= limit:
        return
    hint = (
        "add --step for the core of one decoding step (len_q 1), or "
        if not step_core and not name.startswith("encoder.")
        else ""
    )
    raise ConfigError(
        f"--layer {name}: its unrolled core ({cfg.len_q} x {cfg.len_k} queries x keys, dim "
        f"{cfg.dim}) would be about {mb:,.1f} MB of SystemVerilog, more than the flow builds in "
        f"minutes on this machine (limit {limit:g} MB, EATT_MAX_FLOW_RTL_MB); {hint}train a "
        "smaller model, or fold it with --reuse-factor R: sizes like this are for the folded "
        "engine (eatt rtl --level folded), not the unrolled core"
    )


def layer_energy(cfg: CoreConfig, calls_per_sentence: float | None) -> dict:
    """Analytic energy (pJ, the paper's Table 1 costs) of the layer's core and its peer: per
    call of the unrolled core (every max_len position computed) and per decoded sentence."""
    out: dict = {}
    for kind in energy.CORE_KINDS:
        for level in energy.CORE_LEVELS:
            counts = energy.core_counts(kind, cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, level)
            per_call = {t: energy.energy_pj(counts, "paper", t) for t in ("asic", "fpga")}
            per_sentence = (
                {t: v * calls_per_sentence for t, v in per_call.items()}
                if calls_per_sentence is not None
                else None
            )
            out.setdefault(kind, {})[level] = {
                "adds": counts.adds,
                "muls": counts.muls,
                "per_call_pj": per_call,
                "per_sentence_pj": per_sentence,
            }
    return out


#: the window unit's peer: the other score
WINDOW_PEER = {"eatt": "dot", "dot": "eatt"}


def core_label(cfg: CoreConfig) -> str:
    """How the report names a layer's core: its kind, or the window unit and its score."""
    return f"window {cfg.window_score}" if isinstance(cfg, WindowConfig) else cfg.kind


def peer_config(cfg: CoreConfig) -> CoreConfig:
    """The peer of a layer's core: the other kind (E-ATT <-> vanilla) or, for the window unit,
    the other score; the same formats, and the same integer weights."""
    if isinstance(cfg, WindowConfig):
        return cfg.replace(window_score=WINDOW_PEER[cfg.window_score])
    return cfg.replace(kind=PEER[cfg.kind])


def run_layer_flow(
    checkpoint: str | os.PathLike,
    layer: str,
    out_dir: str | os.PathLike = "runs/flow_layer",
    step_core: bool = False,
    vectors: int = 1000,
    split: str = "test",
    beam: int = 1,
    seed: int = 1,
    resources: bool = True,
    peer: bool = True,
    reuse_factor: int = 1,
) -> dict:
    """Every stage for layer ``layer`` of ``checkpoint`` (module docstring); writes the report
    files into out_dir and returns the result (``result["report"]``: their paths).
    ``reuse_factor`` > 1 folds both cores at equal cycles (eatt.flow.flow_folding): the folded
    hls4ml layer and the folded RTL engine instead of the unrolled ones, so a layer of any size
    goes through (no size limit then).

    Before any work: ValueError for a float layer or a wrong name, ConfigError for a size the
    flow does not build (check_flow_size), OutputError for a folder eatt must not write to,
    ToolMissing when a tool is missing.
    """
    given = Path(out_dir)
    check_output_dir(given, "flow")
    cfg, weights = layers.checkpoint_layer_core(checkpoint, layer, step_core)
    if reuse_factor > 1:  # the folded engine and layer, for both kinds: a size of any scale
        cfg = folded_config(cfg, reuse_factor)
    else:
        check_flow_size(cfg, layer, step_core)
    open_flow_dir(given, resources)
    try:
        result = _run(checkpoint, layer, cfg, weights, given, step_core, vectors, split, beam,
                      seed, resources, peer)  # fmt: skip
    except ToolMissing as err:
        raise ToolMissing(f"{err} (the stages done so far are in {given})") from None
    result["comparison"] = comparison(result)
    write_times(result, given)
    result["report"] = write_report(result, given, format_layer_markdown, plot_layer_report)
    return result


def _run(
    checkpoint, layer, cfg, weights, out: Path, step_core, vectors, split, beam, seed, resources,
    peer,
) -> dict:  # fmt: skip

    source = {"checkpoint": str(Path(checkpoint).resolve()), "layer": layer}
    if step_core:
        source["step"] = True
    r: dict = {
        "checkpoint": str(checkpoint),
        "layer": layer,
        "step": step_core,
        "split": split,
        "beam": beam,
        "seed": seed,
        "config": cfg.to_dict(),
        "out_dir": str(out),
    }
    acts = out / "acts.npz"
    with step(f"flow [{layer}]: capture while decoding the {split} split (at most {vectors})"):
        capture = layers.capture_layer(checkpoint, layer, split, vectors, beam=beam, step=step_core)
        layers.save_capture(capture, acts)
    r["capture"] = {**capture["report"], "path": str(acts)}
    r["capture"].pop("config")
    n = r["capture"]["vectors"]
    window = isinstance(cfg, WindowConfig)
    captured = load_window_capture(acts, cfg)["steps"] if window else capture_inputs(acts, cfg)
    _, folding = (None, None) if window else flow_folding(cfg)  # equal cycles with the peer
    ctx = BuildContext(
        cfg, weights, out, seed, n, _options(folding), inputs=acts, captured=captured,
        onnx_name="layer.onnx", source=source, tag=f"flow [{layer}]",
    )  # fmt: skip
    r.update(run_steps(ctx, LAYER_STEPS))
    r["time_per_step"] = ctx.times
    r["cores"] = {}
    configs = [cfg]
    if peer:
        other = peer_config(cfg)
        misfit = _steps_misfit(other, weights, captured) if window else None
        if misfit:
            unit = core_label(other)
            r["peer_skipped"] = f"the captured steps do not fit the {unit} unit: {misfit}"
            say(f"flow [{layer}]: no peer: {r['peer_skipped']}")
        else:
            configs.append(other)
    for c in configs:
        label = core_label(c)
        r["cores"][label] = _core_rtl(
            c, weights, out / f"rtl_{label.replace(' ', '_')}", captured, n, seed, resources,
            source if c is cfg else None, layer,
        )  # fmt: skip
    with step(f"flow [{layer}]: BLEU on {split} (model, exported cores, surrogate)"):
        ev = evaluate(checkpoint, beam=beam, split=split, hardware=True)
    r["bleu"] = {
        "model": ev["bleu"],
        "sentences": ev["sentences"],
        "signature": ev["signature"],
        **{k: v for k, v in ev["hardware"].items()},
    }
    # the analytic counts are the unrolled cores' (energy.core_counts): none for the window unit
    r["energy"] = {} if window else layer_energy(cfg, r["capture"]["calls_per_sentence"])
    own = r["cores"][core_label(cfg)]
    if window:
        r["vision"] = window_vision(captured, own["sim"]["captured"], ev["vision_span"])
    r["ok"] = bool(
        r["capture"]["golden_vs_model"]["mismatches"] == 0
        and r["golden"]["ok"]
        and r["export"]["check"]["ok"]
        and r["hls"]["ok"]
        and all(c["ok"] for c in r["cores"].values())
        and r["bleu"]["exported"]["hypotheses_differ"] == 0
        and own["sim"]["captured"]["vectors"] >= 1
    )
    return r


def window_vision(steps: dict, sim: dict, model_span: float | None) -> dict:
    """The vision span as the unit sees it: the rows its windows read per captured step (from
    the steps' p, w and length, as the RTL's address generator walks them), the RTL's measured
    cycles per step back to back (cycles_by_rows), beside the model's own count (evaluate's
    vision_span over the whole split)."""
    rows = window_rows(steps)
    by_rows = sim.get("cycles_by_rows") or {}
    cycles = [(by_rows[str(int(n))]["ii_cycles"], n) for n in rows if str(int(n)) in by_rows]
    measured = [c for c, _ in cycles if isinstance(c, int)]
    return {
        "rows_per_step": float(rows.mean()) if len(rows) else None,
        "cycles_per_step": float(np.mean(measured)) if measured else None,
        "model_vision_span": model_span,
    }


def window_rows(steps: dict) -> np.ndarray:
    """Rows each grouped step's window reads: hi - lo + 1 (eatt.quant.window.window_bounds)."""
    length = np.asarray(steps["length"])[np.asarray(steps["group"])]
    lo, hi = window_bounds(np.asarray(steps["p"]), np.asarray(steps["w"]), length)
    return hi - lo + 1


def _steps_misfit(cfg: CoreConfig, weights: CoreWeights, steps: dict) -> str | None:
    """Why a window capture's steps are not valid inputs of the unit cfg (its input ranges),
    or None when they are."""
    try:
        WindowGolden(cfg, weights).check_inputs(**window_step_inputs(steps))
    except ValueError as err:
        return str(err)
    return None


def _core_rtl(
    cfg: CoreConfig, weights: CoreWeights, rtl_dir: Path, captured, n, seed, resources, source,
    layer,
) -> dict:  # fmt: skip
    """The attention-level RTL of cfg (the folded engine where cfg.reuse_factor > 1, the window
    unit's RTL for a windowed layer): generated, simulated on the captured vectors and on
    random + edge vectors (every length and offset), and synthesized."""
    window = isinstance(cfg, WindowConfig)
    build_cfg, folding = (cfg, None) if window else flow_folding(cfg)
    ctx = BuildContext(
        cfg, weights, rtl_dir.parent, seed, n, _options(folding), captured=captured,
        rtl_cfg=build_cfg, source=source, rtl_name=rtl_dir.name,
        tag=f"flow [{layer}, {core_label(cfg)}{'' if source else ' peer'}]",
    )  # fmt: skip
    names = CORE_RTL_STEPS if resources else CORE_RTL_STEPS[:-1]
    c: dict = dict(run_steps(ctx, names))
    c["sim"] = {"captured": c.pop("sim"), "random + edge": c.pop("sim_edges")}
    if resources:
        c["resources"]["seconds"] = ctx.times["resources"]["wall_s"]
    c["ok"] = not ctx.failed
    c["time_per_step"] = ctx.times
    return c


def _options(folding: dict | None) -> BuildOptions:
    """A layer's core: the attention level (the folded engine where folding is given), its
    hls4ml layer folded the same way."""
    levels = ("attention",) if folding is None else ("folded",)
    return BuildOptions(levels=levels, folding=folding, hls_reuse_factor=1)


# -- the report -----------------------------------------------------------------------------------
def _ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def comparison(r: dict) -> list[dict]:
    """Rows: metric, the layer's core, its peer, layer / peer (None without the peer)."""
    kind, other = _labels(r)
    cores = r["cores"]
    rows = []
    for level in energy.CORE_LEVELS if r["energy"] else ():
        for target in ("asic", "fpga"):
            e = r["energy"][kind][level]["per_sentence_pj"]
            p = r["energy"][other][level]["per_sentence_pj"]
            if e is None:
                continue
            rows.append({
                "metric": f"{level} energy per sentence, {target} (pJ, analytic)",
                "layer": e[target], "peer": p[target], "ratio": _ratio(e[target], p[target]),
            })  # fmt: skip

    def add(metric, get):
        a = get(cores[kind])
        b = get(cores[other]) if other in cores else None
        rows.append({"metric": metric, "layer": a, "peer": b, "ratio": _ratio(a, b)})

    add("RTL latency (cycles)", lambda c: c["sim"]["captured"]["latency_cycles"])
    add("RTL II (cycles)", lambda c: c["sim"]["captured"]["ii_cycles"])
    if "resources" in cores[kind]:
        for cell in CELLS:
            add(f"{cell} (Yosys xc7)", lambda c, k=cell: c["resources"][k])
    add("SystemVerilog (bytes)", lambda c: c["rtl"]["bytes"])
    return rows


def _labels(r: dict) -> tuple[str, str]:
    """(the layer's core, its peer) as the report names them (core_label)."""
    cfg = CoreConfig.from_dict(r["config"])
    return core_label(cfg), core_label(peer_config(cfg))


def _check_lines(r: dict) -> list[str]:
    from eatt.quant.export import format_check  # qonnx/onnx

    cap = r["capture"]
    g = cap["golden_vs_model"]
    cs = r["hls"]["csim"]
    lines = [
        f"capture: {cap['vectors']} vectors of {r['layer']} ({r['split']} split, beam "
        f"{r['beam']}), valid key lengths {cap['lengths'][0]}-{cap['lengths'][-1]}; golden "
        f"model vs the model: {g['mismatches']} mismatching",
        format_golden_check(r["golden"]),
        format_check(r["export"]["check"]),
        f"hls4ml C simulation vs golden: {cs['vectors']} captured + {cs['edge_vectors']} edge "
        f"vectors, {cs['mismatches']} mismatching",
    ]
    if r["hls"].get("folding"):
        from eatt.hls.folding import format_folded  # hls4ml (registered on import)

        lines.append("  " + format_folded(r["hls"]))
    if g["first_mismatch"]:
        lines.insert(1, "  first mismatch: " + g["first_mismatch"])
    if r.get("peer_skipped"):
        lines.append(f"no peer: {r['peer_skipped']}")
    own, _ = _labels(r)
    for kind, c in r["cores"].items():
        who = "layer" if kind == own else "peer"
        for what, s in c["sim"].items():
            f = c["rtl"].get("folding")
            folded = f" folded ({f['lanes']}, {f['simd']}, {f['pe']})" if f else ""
            lines.append(
                f"RTL {kind}{folded} ({who}), Verilator + cocotb: {s['vectors']} {what} vectors, "
                f"{s['mismatches']} mismatching; latency {s['latency_cycles']} cycles, II "
                f"{s['ii_cycles']}"
            )
            if s.get("first_mismatch"):
                lines.append(f"  first mismatch: {s['first_mismatch']['message']}")
        if "resources" in c:
            res = c["resources"]
            lines.append(
                f"Yosys xc7, {kind} ({who}): "
                + ", ".join(f"{k} {res[k]}" for k in CELLS)
                + f" ({res['seconds']:.0f} s)"
            )
    return lines


def _bleu_lines(r: dict) -> list[str]:
    b = r["bleu"]
    vision = []
    if r.get("vision"):
        v = r["vision"]
        vision = [
            f"vision span: the unit reads {_fmt(v['rows_per_step'])} rows per captured step, "
            f"{_fmt(v['cycles_per_step'])} cycles per step back to back (RTL); the model counts "
            f"{_fmt(v['model_vision_span'])} positions per step ({r['split']} split)"
        ]
    return vision + [
        f"BLEU on {r['split']} ({b['sentences']} sentences, beam {r['beam']}): model "
        f"{b['model']:.2f} (its eval is the hardware's arithmetic)",
        f"  with the exported cores: {b['exported']['bleu']:.2f}, "
        f"{b['exported']['hypotheses_differ']} hypotheses differ",
        f"  with the QAT surrogate (float softmax): {b['surrogate']['bleu']:.2f}, "
        f"{b['surrogate']['hypotheses_differ']} hypotheses differ",
    ]


def _heading(r: dict) -> str:
    c = r["config"]
    if c["kind"] == "window":
        return (
            f"layer {r['layer']} of {r['checkpoint']}: the window unit ({c['window_score']} "
            f"scores, position {c['position']}), l_k {c['len_k']}, dim {c['dim']}, D "
            f"{c['window_d']}, one decoding step per call"
        )
    step_text = ", one decoding step" if r["step"] else ""
    reuse = c.get("reuse_factor", 1)
    folded = (
        f"; folded for reuse_factor {reuse}, the peer at equal cycles (lanes, simd, pe)"
        if reuse > 1
        else ""
    )
    return (
        f"layer {r['layer']} of {r['checkpoint']}: {c['kind']} core{step_text}, len_q "
        f"{c['len_q']}, len_k {c['len_k']}, dim {c['dim']}, heads {c['heads']}, "
        f"masks {', '.join(k for k in ('key_padding', 'causal') if c[k]) or 'none'}{folded}"
    )


def format_layer_flow(r: dict) -> str:
    """The text the CLI prints."""
    kind, other = _labels(r)
    lines = [f"=== {_heading(r)} ===", *_check_lines(r), "", *_bleu_lines(r), ""]
    calls = r["capture"]["calls_per_sentence"]
    if calls is not None:
        lines.append(f"the layer's core runs {calls:.1f} times per decoded sentence")
    lines.append(f"{'metric':<48} {kind:>12} {other + ' peer':>14} {'ratio':>8}")
    for row in r["comparison"]:
        lines.append(
            f"{row['metric']:<48} {_fmt(row['layer']):>12} {_fmt(row['peer']):>14} "
            f"{_fmt(row['ratio']):>8}"
        )
    lines += ["", "flow: " + ("PASS" if r["ok"] else "FAIL")]
    return "\n".join(lines)


def format_layer_markdown(r: dict) -> str:
    kind, other = _labels(r)
    lines = [
        f"# eatt flow, a trained layer: {'PASS' if r['ok'] else 'FAIL'}",
        "",
        f"{_heading(r)[0].upper()}{_heading(r)[1:]}; artifacts in `{r['out_dir']}`.",
        "",
        "## Checks (every level against the golden model of the layer's core)",
        "",
        "```text",
        *_check_lines(r),
        "```",
        "",
        "## BLEU",
        "",
        "```text",
        *_bleu_lines(r),
        "```",
        "",
        f"## {kind} layer vs the {other} peer (same integer weights and formats)",
        "",
    ]
    calls = r["capture"]["calls_per_sentence"]
    if calls is not None:
        lines += [f"The layer's core runs {calls:.1f} times per decoded sentence.", ""]
    lines += _md_table(
        ["metric", kind, f"{other} peer", "ratio"],
        [[x["metric"], x["layer"], x["peer"], x["ratio"]] for x in r["comparison"]],
    )
    return "\n".join(lines) + "\n"


def plot_layer_report(r: dict, path: Path) -> bool:
    """report.png: BLEU by arithmetic, and the layer / peer ratios (log scale); True."""
    from matplotlib.figure import Figure  # matplotlib: only when a report is plotted

    fig = Figure(figsize=(7.5, 6.6), layout="constrained")
    top, bottom = fig.subplots(2, 1)
    b = r["bleu"]
    names = ["model (eval)", "exported cores", "QAT surrogate"]
    values = [b["model"], b["exported"]["bleu"], b["surrogate"]["bleu"]]
    bars = top.bar(names, values, color=["tab:blue", "tab:green", "tab:gray"])
    top.bar_label(bars, fmt="%.2f")
    top.set_ylabel("BLEU")
    top.set_title(f"{r['layer']}: BLEU on {r['split']} ({b['sentences']} sentences)")
    ratios = [(x["metric"], x["ratio"]) for x in r["comparison"] if x["ratio"]]
    if ratios:
        kind, other = _labels(r)
        colors = ["tab:green" if v < 1 else "tab:red" if v > 1 else "tab:gray" for _, v in ratios]
        bottom.barh([m for m, _ in ratios][::-1], [v for _, v in ratios][::-1], color=colors[::-1])
        bottom.set_xscale("log")
        bottom.axvline(1.0, color="black", linewidth=0.8)
        bottom.set_xlabel(f"{kind} / {other} peer (log scale; < 1: the layer's is smaller)")
        bottom.tick_params(axis="y", labelsize=8)
    else:
        bottom.set_axis_off()
        why = r.get("peer_skipped") or "--no-peer"
        bottom.text(0.5, 0.5, f"no peer ({why})", ha="center", va="center", wrap=True)
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110), suffix=".png")
    return True


__all__ = [
    "MAX_FLOW_RTL_MB",
    "check_flow_size",
    "core_label",
    "format_layer_flow",
    "layer_energy",
    "peer_config",
    "run_layer_flow",
]
