"""The report of `eatt flow CHECKPOINT --layer NAME` (eatt.flow_layer): the layer's core
against its peer (rows of metrics), the checks of every level, BLEU by arithmetic; the text
printed, report.md and report.png. A flow stopped early (--to-step) reports the steps it ran."""

from __future__ import annotations

from pathlib import Path

from eatt.config import CoreConfig, WindowConfig, atomic_write
from eatt.flow import CELLS, PEER, _fmt, _md_table
from eatt.flow_report import step_rows
from eatt.model import energy
from eatt.quant.check import format_golden_check
from eatt.rtl_sim import throughput as rate
from eatt.steps import STEPS

#: the window unit's peer: the other score
WINDOW_PEER = {"eatt": "dot", "dot": "eatt"}
#: metrics (their label's words) where the larger number is the better one (a ratio > 1 wins)
HIGHER_IS_BETTER = ("Fmax", "calls/s")


def core_label(cfg: CoreConfig) -> str:
    """How the report names a layer's core: its kind, or the window unit and its score."""
    return f"window {cfg.window_score}" if isinstance(cfg, WindowConfig) else cfg.kind


def peer_config(cfg: CoreConfig) -> CoreConfig:
    """The peer of a layer's core: the other kind (E-ATT <-> vanilla; vanilla for every other
    mechanism) or, for the window unit, the other score; the same formats, and the same integer
    weights where the peer takes them (eatt.flow.shared_weights)."""
    if isinstance(cfg, WindowConfig):
        return cfg.replace(window_score=WINDOW_PEER[cfg.window_score])
    return cfg.replace(kind=PEER.get(cfg.kind, "vanilla"))


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

    # the steps' own rows (eatt.steps), on the captured vectors' simulation, without a level
    mine, peer = cores.get(kind, {}), cores.get(other) or {}
    for name, part in (("sim", "captured"), ("resources", None), ("power", None), ("rtl", None)):
        x, y = mine.get(name), peer.get(name)
        if part is not None:
            x, y = (x or {}).get(part), (y or {}).get(part)
        for label, a, b in step_rows(x, y, STEPS[name], by_level=False):
            rows.append({"metric": label, "layer": a, "peer": b, "ratio": _ratio(a, b)})
    return rows


def _labels(r: dict) -> tuple[str, str]:
    """(the layer's core, its peer) as the report names them (core_label)."""
    cfg = CoreConfig.from_dict(r["config"])
    return core_label(cfg), core_label(peer_config(cfg))


def _check_lines(r: dict) -> list[str]:
    from eatt.quant.export import format_check  # qonnx/onnx

    cap = r["capture"]
    g = cap["golden_vs_model"]
    lines = [
        f"capture: {cap['vectors']} vectors of {r['layer']} ({r['split']} split, beam "
        f"{r['beam']}), valid key lengths {cap['lengths'][0]}-{cap['lengths'][-1]}; golden "
        f"model vs the model: {g['mismatches']} mismatching",
    ]
    if "golden" in r:
        lines.append(format_golden_check(r["golden"]))
    if "export" in r:
        lines.append(format_check(r["export"]["check"]))
    if "hls" in r:
        cs = r["hls"]["csim"]
        lines.append(
            f"hls4ml C simulation vs golden: {cs['vectors']} captured + {cs['edge_vectors']} "
            f"edge vectors, {cs['mismatches']} mismatching"
        )
    if r.get("hls", {}).get("folding"):
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
            f = c.get("rtl", {}).get("folding")
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
        if "power" in c:
            lines += _power_lines(kind, who, c["power"])
    return lines


def _power_lines(kind: str, who: str, p: dict) -> list[str]:
    """eatt power's result of one core: energy per call by part, on how many captured calls."""
    if "skipped" in p:
        return [f"measured energy, {kind} ({who}): skipped ({p['skipped']})"]
    e = p["energy_per_call_pj"]
    parts = ", ".join(
        f"{name} {part['pj'] / 1e6:.4g}" for name, part in p.get("parts", {}).items()
        if isinstance(part, dict) and "pj" in part
    )  # fmt: skip
    model = p.get("vs_model")
    vs_model = f", {model['mismatches']} differ from the model's own" if model else ""
    lines = [
        f"measured energy, {kind} ({who}): {p['liberty']} netlist ({p['cells']:,} cells) on "
        f"{p['vectors']} {p['inputs'] if p['inputs'] != 'given' else 'captured'} calls, "
        f"{p['mismatches']} mismatching{vs_model}; {e['total'] / 1e6:.4g} uJ/call"
        + (f" ({parts})" if parts else ""),
    ]
    if p.get("throughput"):
        lines.append("  " + rate.line(p["throughput"]))
    return lines


def _bleu_lines(r: dict) -> list[str]:
    if "bleu" not in r:
        return ["BLEU: not measured (the flow stopped before its bleu step)"]
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


def ratio_colour(metric: str, ratio: float) -> str:
    """The bar colour of a layer / peer ratio: green where the layer's number is the better one
    (smaller, or larger for :data:`HIGHER_IS_BETTER`), red where worse, grey when equal."""
    if ratio == 1:
        return "tab:gray"
    higher = any(word in metric for word in HIGHER_IS_BETTER)
    return "tab:green" if (ratio > 1) == higher else "tab:red"


def plot_layer_report(r: dict, path: Path) -> bool:
    """report.png: BLEU by arithmetic, and the layer / peer ratios (log scale); True."""
    from matplotlib.figure import Figure  # matplotlib: only when a report is plotted

    fig = Figure(figsize=(7.5, 6.6), layout="constrained")
    top, bottom = fig.subplots(2, 1)
    b = r.get("bleu")
    if b:
        names = ["model (eval)", "exported cores", "QAT surrogate"]
        values = [b["model"], b["exported"]["bleu"], b["surrogate"]["bleu"]]
        bars = top.bar(names, values, color=["tab:blue", "tab:green", "tab:gray"])
        top.bar_label(bars, fmt="%.2f")
        top.set_ylabel("BLEU")
        top.set_title(f"{r['layer']}: BLEU on {r['split']} ({b['sentences']} sentences)")
    else:
        top.set_axis_off()
        top.text(0.5, 0.5, "BLEU not measured (--to-step)", ha="center", va="center")
    ratios = [(x["metric"], x["ratio"]) for x in r["comparison"] if x["ratio"]]
    if ratios:
        kind, other = _labels(r)
        colors = [ratio_colour(m, v) for m, v in ratios]
        bottom.barh([m for m, _ in ratios][::-1], [v for _, v in ratios][::-1], color=colors[::-1])
        bottom.set_xscale("log")
        bottom.axvline(1.0, color="black", linewidth=0.8)
        bottom.set_xlabel(
            f"{kind} / {other} peer (log scale; < 1: the layer's is smaller)\ngreen: the "
            f"layer's is better (smaller; {', '.join(HIGHER_IS_BETTER)}: larger)"
        )
        bottom.tick_params(axis="y", labelsize=8)
    else:
        bottom.set_axis_off()
        why = r.get("peer_skipped") or "--no-peer"
        bottom.text(0.5, 0.5, f"no peer ({why})", ha="center", va="center", wrap=True)
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110), suffix=".png")
    return True
