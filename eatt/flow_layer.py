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
is report.md, report.json and report.png in the output folder (eatt.flow_layer_report).

``--to-step S`` stops after step S of LAYER_FLOW_STEPS (capture, golden, export, hls, then
each core's rtl, sim, sim_edges, resources, power, then bleu; ``--no-resources`` leaves out
resources and power, Yosys' steps) and reports what ran; ``--from-step S``
continues such a run in the same folder: the earlier steps' results come from
layer_steps.json (written after each part, checked to be the same run) and the capture from
acts.npz.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from eatt.builder import run_steps, saved_state, select
from eatt.config import ConfigError, CoreConfig, WindowConfig, atomic_write_text
from eatt.flow import (
    POWER_VECTORS,
    _jsonable,
    flow_folding,
    flow_steps,
    folded_config,
    open_flow_dir,
    shared_weights,
    write_report,
    write_times,
)
from eatt.flow_layer_report import (
    comparison,
    core_label,
    format_layer_flow,
    format_layer_markdown,
    peer_config,
    plot_layer_report,
)
from eatt.model import energy, layers
from eatt.model.evaluate import evaluate
from eatt.outdir import check_output_dir
from eatt.progress import say, step
from eatt.quant.golden import CoreWeights
from eatt.quant.vectors import (
    capture_inputs,
    load_window_capture,
    window_step_inputs,
)
from eatt.quant.window import WindowGolden, window_bounds
from eatt.rtl_sim.tools import ToolMissing
from eatt.steps import BuildContext, BuildOptions

#: most estimated SystemVerilog (MB, CoreConfig.rtl_megabytes) of a layer's core that
#: `eatt flow CHECKPOINT --layer` builds (EATT_MAX_FLOW_RTL_MB overrides). Measured on 2 cores:
#: the attention level at 1 x 12 x dim 16 (0.57 MB estimated) took 46 s in Verilator and
#: 340 s in Yosys (54,622 LUT, 3,238 DSP48E1); the time grows about linearly past that
MAX_FLOW_RTL_MB = 1.0
#: the layer's steps (eatt.steps) before its cores, and each core's (the layer's and its peer)
LAYER_STEPS = ("golden", "export", "hls")
CORE_RTL_STEPS = ("rtl", "sim", "sim_edges", "resources", "power")
#: every step of a layer's flow in order: --from-step / --to-step name one of them
LAYER_FLOW_STEPS = ("capture", *LAYER_STEPS, *CORE_RTL_STEPS, "bleu")
#: the finished steps' results of a layer's flow (what a later --from-step starts from)
LAYER_STATE = "layer_steps.json"


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
    for kind in (cfg.kind, peer_config(cfg).kind):
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
    span: tuple = (None, None),
) -> dict:
    """Every stage for layer ``layer`` of ``checkpoint`` (module docstring); writes the report
    files into out_dir and returns the result (``result["report"]``: their paths).
    ``reuse_factor`` > 1 folds both cores at equal cycles (eatt.flow.flow_folding): the folded
    hls4ml layer and the folded RTL engine instead of the unrolled ones, so a layer of any size
    goes through (no size limit then). ``span``: (--from-step, --to-step), the first and last
    of LAYER_FLOW_STEPS to run (None: all); a later start reads the earlier steps' results
    (layer_steps.json) and the capture (acts.npz) from out_dir, the report covers the steps
    run so far.

    Before any work: ValueError for a float layer, a wrong name, a step the flow does not
    have or an out_dir without the earlier steps of this run, ConfigError for a size the
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
    names = flow_steps(LAYER_FLOW_STEPS, resources)  # --no-resources: no Yosys, no eatt power
    chosen = select(names, *span)
    run_id = {"checkpoint": str(Path(checkpoint).resolve()), "layer": layer, "step": step_core,
              "split": split, "beam": beam, "vectors": vectors, "seed": seed, "peer": peer,
              "config": cfg.to_dict()}  # fmt: skip
    state = earlier_layer_steps(given, run_id, names, chosen)
    open_flow_dir(given, resources)
    try:
        result = _run(checkpoint, layer, cfg, weights, given, step_core, vectors, split, beam,
                      seed, peer, Span(names, chosen, state, run_id))  # fmt: skip
    except ToolMissing as err:
        raise ToolMissing(f"{err} (the stages done so far are in {given})") from None
    result["comparison"] = comparison(result)
    if any(span):
        result["span"] = {"from": span[0], "to": span[1]}
    write_times(result, given)
    result["report"] = write_report(result, given, format_layer_markdown, plot_layer_report)
    return result


class Span:
    """The steps a layer's flow runs (``chosen`` of ``names``) and the earlier ones' results
    (``state``: capture, golden, export, hls, cores: {label: {step: result}}, bleu)."""

    def __init__(self, names: tuple, chosen: list, state: dict, run_id: dict) -> None:
        self.names, self.chosen, self.state, self.run_id = names, chosen, state, run_id
        self.earlier = names[: names.index(chosen[0])]

    def runs(self, name: str) -> bool:
        return name in self.chosen

    def has(self, name: str) -> bool:
        """Whether the step ran now or in the run this one continues."""
        return name in self.chosen or name in self.earlier

    def save(self, out: Path, r: dict) -> None:
        """The finished steps so far into out/LAYER_STATE (after each part of the flow)."""
        parts = {k: r[k] for k in ("capture", *LAYER_STEPS, "bleu") if k in r}
        parts["cores"] = r.get("core_steps", {})
        state = {"run": self.run_id, "results": _jsonable(parts)}
        atomic_write_text(out / LAYER_STATE, json.dumps(state) + "\n")


def earlier_layer_steps(out: Path, run_id: dict, names: tuple, chosen: list) -> dict:
    """The results of the steps before the first chosen one, from out/LAYER_STATE and the
    capture out/acts.npz ({} when the flow starts at its first step); ValueError (one line)
    when the folder does not hold them for this run."""
    start = chosen[0]
    before = names[: names.index(start)]
    if not before:
        return {}
    path = out / LAYER_STATE
    state = saved_state(path, start, before[-1])
    if state.get("run") != json.loads(json.dumps(run_id)):
        raise ValueError(f"--from-step {start}: {path} is another run's (checkpoint, layer, "
                         "split, beam, vectors, seed or config differ)")  # fmt: skip
    if not (out / "acts.npz").is_file():
        raise ValueError(f"--from-step {start}: {out / 'acts.npz'} (the capture) is missing")
    results = state.get("results", {})
    missing = [n for n in before if n in ("capture", *LAYER_STEPS, "bleu") and n not in results]
    cores = results.get("cores") or {}
    for n in (n for n in before if n in CORE_RTL_STEPS):
        if not cores or any(n not in c for c in cores.values()):
            missing.append(n)
    if missing:
        raise ValueError(f"--from-step {start}: {path} has no result of {', '.join(missing)}")
    return results


def _run(
    checkpoint, layer, cfg, weights, out: Path, step_core, vectors, split, beam, seed, peer,
    span: Span,
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
    if span.runs("capture"):
        with step(f"flow [{layer}]: capture while decoding the {split} split (at most {vectors})"):
            capture = layers.capture_layer(checkpoint, layer, split, vectors, beam=beam,
                                           step=step_core)  # fmt: skip
            layers.save_capture(capture, acts)
        r["capture"] = {**capture["report"], "path": str(acts)}
        r["capture"].pop("config")
    else:
        r["capture"] = span.state["capture"]
    span.save(out, r)
    n = r["capture"]["vectors"]
    window = isinstance(cfg, WindowConfig)
    captured = load_window_capture(acts, cfg)["steps"] if window else capture_inputs(acts, cfg)
    _, folding = (None, None) if window else flow_folding(cfg)  # equal cycles with the peer
    ctx = BuildContext(
        cfg, weights, out, seed, n, _options(folding), inputs=acts, captured=captured,
        onnx_name="layer.onnx", source=source, tag=f"flow [{layer}]",
    )  # fmt: skip
    ctx.results.update({k: span.state[k] for k in LAYER_STEPS if k in span.earlier})
    r.update(_run_some(ctx, [k for k in LAYER_STEPS if span.runs(k)]))
    r["time_per_step"] = ctx.times
    span.save(out, r)
    r["cores"], r["core_steps"] = {}, {}
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
    core_names = [k for k in CORE_RTL_STEPS if k in span.names]
    for c in configs if any(span.has(k) for k in core_names) else ():
        label = core_label(c)
        earlier = {k: v for k, v in span.state.get("cores", {}).get(label, {}).items()
                   if k in span.earlier}  # fmt: skip
        own = weights if c is cfg else shared_weights(c, weights, seed)

        def saved(steps: dict, label: str = label) -> None:  # after each of the core's steps
            r["core_steps"][label] = dict(steps)
            span.save(out, r)

        r["core_steps"][label], r["cores"][label] = _core_rtl(
            c, own, out / f"rtl_{label.replace(' ', '_')}", captured, n, seed,
            [k for k in core_names if span.runs(k)], earlier, source if c is cfg else None, layer,
            saved,
        )  # fmt: skip
        span.save(out, r)
    ev = None
    if span.runs("bleu"):
        with step(f"flow [{layer}]: BLEU on {split} (model, exported cores, surrogate)"):
            ev = evaluate(checkpoint, beam=beam, split=split, hardware=True)
        r["bleu"] = {
            "model": ev["bleu"],
            "sentences": ev["sentences"],
            "signature": ev["signature"],
            "vision_span": ev["vision_span"],
            **{k: v for k, v in ev["hardware"].items()},
        }
        span.save(out, r)
    elif span.has("bleu"):
        r["bleu"] = span.state["bleu"]
    r.pop("core_steps")
    # the analytic counts are the unrolled cores' (energy.core_counts): none for the window unit
    r["energy"] = {} if window else layer_energy(cfg, r["capture"]["calls_per_sentence"])
    own = r["cores"].get(core_label(cfg), {})
    captured_sim = own.get("sim", {}).get("captured")
    if window and captured_sim and "bleu" in r:
        r["vision"] = window_vision(captured, captured_sim, r["bleu"]["vision_span"])
    r["ok"] = bool(
        r["capture"]["golden_vs_model"]["mismatches"] == 0
        and all(r[k]["ok"] for k in ("golden", "hls") if k in r)
        and ("export" not in r or r["export"]["check"]["ok"])
        and all(c["ok"] for c in r["cores"].values())
        and ("bleu" not in r or r["bleu"]["exported"]["hypotheses_differ"] == 0)
        and (not span.has("sim") or (captured_sim or {}).get("vectors", 0) >= 1)
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
    cfg: CoreConfig, weights: CoreWeights, rtl_dir: Path, captured, n, seed, names: list,
    earlier: dict, source, layer, saved,
) -> tuple[dict, dict]:  # fmt: skip
    """The attention-level RTL of cfg (the folded engine where cfg.reuse_factor > 1, the window
    unit's RTL for a windowed layer): generated, simulated on the captured vectors and on
    random + edge vectors (every length and offset), and synthesized: the steps ``names``
    (of CORE_RTL_STEPS), after the ``earlier`` ones' results; ``saved`` gets the results after
    each step (a flow stopped during a core's power keeps its core's sim and resources).
    Returns (each step's result, the core's part of the report)."""
    window = isinstance(cfg, WindowConfig)
    build_cfg, folding = (cfg, None) if window else flow_folding(cfg)
    ctx = BuildContext(
        cfg, weights, rtl_dir.parent, seed, n, _options(folding), captured=captured,
        rtl_cfg=build_cfg, source=source, rtl_name=rtl_dir.name,
        tag=f"flow [{layer}, {core_label(cfg)}{'' if source else ' peer'}]",
    )  # fmt: skip
    ctx.results.update(earlier)
    unmeasured = _unmeasured(window, folding) if "power" in names else None
    for name in names:
        if not (unmeasured and name == "power"):
            saved(run_steps(ctx, [name]))
    steps = dict(ctx.results)
    if unmeasured:
        say(f"{ctx.tag}: measured energy skipped: {unmeasured}")
        steps["power"] = {"skipped": unmeasured}
    c = dict(steps)
    sims = {"captured": c.pop("sim", None), "random + edge": c.pop("sim_edges", None)}
    c["sim"] = {what: s for what, s in sims.items() if s is not None}
    if "resources" in ctx.times:
        c["resources"]["seconds"] = ctx.times["resources"]["wall_s"]
    c["ok"] = not ctx.failed and all(s.get("ok", True) for s in c["sim"].values())
    c["time_per_step"] = ctx.times
    return steps, c


def _unmeasured(window: bool, folding: dict | None) -> str | None:
    """Why the power step does not run on a layer's core (None: it does). eatt power measures
    the folded engine, its memories as macros; a layer's unrolled attention core is every
    product in gates (622,567 cells for a one-step vanilla core of dim 8 and 12 keys, 8 minutes
    of Yosys before any simulation), and the window unit is not one of its levels."""
    if window:
        return "eatt power measures the attention cores, not the window unit"
    if folding is None:
        return "eatt power measures a layer's folded engine: add --reuse-factor R"
    return None


def _run_some(ctx: BuildContext, names: list) -> dict:
    """run_steps of names on ctx, or its results so far where none is chosen."""
    return run_steps(ctx, names) if names else ctx.results


def _options(folding: dict | None) -> BuildOptions:
    """A layer's core: the attention level (the folded engine where folding is given), its
    hls4ml layer folded the same way."""
    levels = ("attention",) if folding is None else ("folded",)
    return BuildOptions(
        levels=levels, folding=folding, hls_reuse_factor=1, power_vectors=POWER_VECTORS,
        power_optional=True,  # Debian's tools are optional for a flow (eatt.flow)
    )  # fmt: skip


__all__ = [
    "MAX_FLOW_RTL_MB",
    "check_flow_size",
    "core_label",
    "format_layer_flow",
    "format_layer_markdown",
    "layer_energy",
    "peer_config",
    "run_layer_flow",
]
