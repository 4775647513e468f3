"""Build steps: the one table of stages every flow runs (in the manner of FINN's builder).

A :class:`Step` is a name, a progress title, ``run(context, level) -> result``, ``check(result)
-> why it failed or None`` and ``metrics(result) -> {name: number}`` (the flat numbers a sweep
compares). :data:`STEPS` holds every step once; a flow is a list of step names over it:

==========  =====================================================================  ==========
step        what it runs                                                           levels
==========  =====================================================================  ==========
golden      eatt.quant.check.golden_check: the golden model's self-check
export      eatt.quant.export: the QONNX file, executed by qonnx against the golden
hls         eatt.hls.project.write_project: the hls4ml project, its C simulation
rtl         eatt.rtl_sim.generate.generate_rtl                                       every
sim         eatt.rtl_sim.runner.simulate: Verilator + cocotb (captured vectors       every
            where the context has them)
sim_edges   simulate on random + edge vectors beside a capture (the layer flow)      every
resources   eatt.rtl_sim.resources.resources: Yosys synth_xilinx (xc7) cells         first
nodsp       the same with -nodsp                                                     first
power       eatt.rtl_sim.power.power: energy per call from the netlist               first
pnr         eatt.rtl_sim.pnr.pnr: Yosys synth_ecp5 + nextpnr-ecp5, Fmax              first
da4ml       eatt.rtl_sim.da4ml_trace: da4ml's estimate, check and Yosys on its RTL
energy      eatt.model.energy: the paper's analytic energy of the core
train       eatt.model.train.train_from_config (a model sweep's point)
bleu        eatt.model.evaluate.evaluate: BLEU and the model's analytic energy
==========  =====================================================================  ==========

"levels": a step run once per RTL level the context builds (``BuildOptions.levels``), or once
on the first of them (the level a flow synthesizes). :class:`BuildContext` carries what the
steps share: config, integer weights, seed, vectors, captured inputs, the output folder and the
:class:`BuildOptions` (how it is built, apart from what it computes; eatt/build_options.py,
re-exported here). eatt.builder runs them: ``run_steps`` a list of names (from / to a named
step), each shown on stderr, its wall time and peak memory recorded in the context (``times``,
written as time_per_step.json by the flows) and its results (``results``, written as
steps.json, which a later ``--from-step`` run starts from).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from eatt.build_options import BuildOptions  # re-exported: eatt.steps.BuildOptions
from eatt.config import CoreConfig, atomic_write_text
from eatt.model import energy
from eatt.model.evaluate import evaluate
from eatt.model.train import train_from_config
from eatt.progress import say
from eatt.quant.check import golden_check
from eatt.quant.golden import CoreWeights
from eatt.quant.vectors import capture_inputs, model_mismatches
from eatt.rtl_sim import da4ml_trace
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.pnr import pnr
from eatt.rtl_sim.power import power, too_many_weights
from eatt.rtl_sim.resources import resources
from eatt.rtl_sim.rtldir import load_metadata
from eatt.rtl_sim.runner import simulate
from eatt.rtl_sim.tools import ToolMissing

#: the file run_steps keeps each finished step's result in (what --from-step starts from)
RESULTS_FILE = "steps.json"
#: a flow folder's wall time and peak memory per step
TIMES_FILE = "time_per_step.json"
CELL_KEYS = ("LUT", "FF", "CARRY4", "DSP48E1", "BRAM")
LOGIC_CELLS = CELL_KEYS[:4]  # the cells every level has (BRAM: the folded engine's memories)


class CheckFailed(Exception):
    """A step ran and its check failed (simulation mismatches, golden self-check)."""


@dataclass
class BuildContext:
    """What the steps of one core share; ``results`` and ``times`` fill in as they run."""

    cfg: CoreConfig
    weights: CoreWeights
    out_dir: Path
    seed: int = 1
    vectors: int = 1000
    options: BuildOptions = field(default_factory=BuildOptions)
    #: a capture file (`eatt capture`, or a layer's acts.npz) the checks use instead of random
    inputs: str | Path | None = None
    #: its vectors as loaded (capture_inputs; a window layer's steps), loaded on first use
    captured: Any = None
    #: checked before the capture is loaded (a sweep: the file has not changed), or None
    check_inputs: Callable[[], None] | None = None
    #: the config the RTL is built from (a folded flow's has reuse_factor 1), default cfg
    rtl_cfg: CoreConfig | None = None
    #: where the QONNX file goes and what it records as its source (a layer's checkpoint)
    onnx_name: str = "core.onnx"
    source: dict | None = None
    #: the RTL folder's name (default: rtl, or rtl_LEVEL where results are keyed by level)
    rtl_name: str | None = None
    #: the progress lines' prefix, e.g. "flow [eatt]"
    tag: str = "eatt"
    #: a model sweep's point: its run config, beam and split
    extra: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    times: dict = field(default_factory=dict)
    #: "step: why" for each failed check
    failed: list = field(default_factory=list)

    def rtl_dir(self, level: str | None) -> Path:
        if self.rtl_name:
            return self.out_dir / self.rtl_name
        return self.out_dir / (f"rtl_{level}" if self.options.by_level and level else "rtl")

    def capture(self):
        """The captured vectors the checks use (None: random ones), loaded once."""
        if self.captured is None and self.inputs is not None:
            if self.check_inputs is not None:
                self.check_inputs()
            self.captured = capture_inputs(self.inputs, self.cfg, self.vectors)
        return self.captured

    def level_result(self, name: str, level: str | None) -> dict:
        got = self.results[name]
        return got[level] if self.options.by_level else got


@dataclass(frozen=True)
class Step:
    """One stage: ``run(context, level)`` returns its result (a JSON-ready dict)."""

    name: str
    title: str
    run: Callable[[BuildContext, Any], dict]
    #: "" once, "every" per built level, "first" on the first built level
    levels: str = ""
    check: Callable[[dict], str | None] = lambda result: None
    metrics: Callable[[dict], dict] = lambda result: {}
    #: what a flow's report shows of it, each a row of its metrics: (metric, label; "{level}"
    #: in a label is the level the result is of, the levels it is shown at or None: every one)
    rows: tuple[tuple[str, str, tuple[str, ...] | None], ...] = ()

    def report_rows(self, result: dict, level: str | None = None) -> list[tuple[str, Any]]:
        """(label, value) of each of its ``rows`` its metrics hold (none of a skipped step);
        level None: the labels without one."""
        try:
            got = self.metrics(result)
        except KeyError:  # a result without what its metrics read (a skipped tool)
            return []
        return [
            (label.format(level=level or "").strip(), got[metric])
            for metric, label, levels in self.rows
            if got.get(metric) is not None and (levels is None or level in levels)
        ]


# -- the steps ------------------------------------------------------------------------------------
def _golden(ctx: BuildContext, level) -> dict:
    return golden_check(ctx.cfg, ctx.weights, vectors=ctx.vectors, seed=ctx.seed)


def _export(ctx: BuildContext, level) -> dict:
    from eatt.quant import export  # qonnx/onnx

    path = ctx.out_dir / ctx.onnx_name
    r = export.export_core(ctx.cfg, ctx.weights, path, ctx.source)
    r["check"] = export.check_export(path, vectors=ctx.vectors, seed=ctx.seed, inputs=ctx.inputs)
    return r


def _hls(ctx: BuildContext, level) -> dict:
    """The hls4ml project of the exported QONNX file (of the config and weights where the
    list has no export step), the folded layer where the RTL is the folded engine."""
    from eatt.hls.project import write_project  # hls4ml

    exported = ctx.out_dir / ctx.onnx_name
    source = exported if "export" in ctx.results else (ctx.cfg, ctx.weights)
    folded = ctx.options.folding is not None and "folded" in ctx.options.levels
    options = ctx.options if folded else replace(ctx.options, folding=None)
    return write_project(
        source, ctx.out_dir / "hls", options=options, vectors=ctx.vectors, inputs=ctx.inputs
    )


def _rtl(ctx: BuildContext, level) -> dict:
    rtl_dir = ctx.rtl_dir(level)
    started = time.monotonic()
    at = {} if level is None else {"level": level}
    meta = generate_rtl(
        ctx.rtl_cfg or ctx.cfg, ctx.weights, rtl_dir, options=ctx.options, source=ctx.source, **at
    )
    meta["seconds"] = time.monotonic() - started
    meta["bytes"] = sum(p.stat().st_size for p in rtl_dir.rglob("*.sv"))
    return meta


def _sim(ctx: BuildContext, level) -> dict:
    captured = ctx.capture()
    r = simulate(ctx.rtl_dir(level), vectors=ctx.vectors, seed=ctx.seed, inputs=captured)
    r["captured"] = captured is not None
    return r


def _sim_edges(ctx: BuildContext, level) -> dict:
    return simulate(ctx.rtl_dir(level), vectors=ctx.vectors, seed=ctx.seed)


def _sim_check(r: dict) -> str | None:
    if r["mismatches"]:
        first = (r.get("first_mismatch") or {}).get("message", "")
        return f"{r['mismatches']} of {r['vectors']} vectors mismatch ({first})"
    if model_mismatches(r):
        return f"{model_mismatches(r)} vectors differ from the model's own outputs"
    if r.get("cycles_rule_holds") is False:
        return f"the cycles rule does not hold: {r.get('cycles_rule')}"
    return None


def _timing_metrics(r: dict) -> dict:
    got = {k: r[k] for k in ("latency_cycles", "ii_cycles") if r.get(k) is not None}
    if "ii_cycles" in got:
        got["cycles"] = got["ii_cycles"]
    return got


def _yosys(nodsp: bool):
    def run(ctx: BuildContext, level) -> dict:
        return resources(ctx.rtl_dir(level), nodsp=nodsp, abc_verify=ctx.options.abc_verify)

    return run


#: the most clock cycles a build's eatt power simulates at gate level (past 20,000 cycles the
#: netlist runs in Verilator, whose C++ build of a big netlist takes long: 8 minutes for the
#: paper-size folded E-ATT engine's 75k cells beside a training, docs/power.md); `eatt power
#: DIR --vectors 1` measures a longer call
POWER_CYCLES = 200_000


def _power(ctx: BuildContext, level) -> dict:
    """eatt power on the RTL (at most options.power_vectors vectors, and vectors of at most
    :data:`POWER_CYCLES` cycles in all). A folded engine too big for it, or (power_optional) a
    missing tool, is a result with "skipped" and a line."""
    rtl = ctx.rtl_dir(level)
    skipped = too_many_weights(ctx.cfg, level, rtl) if level else None
    ii = int(load_metadata(rtl).get("ii_cycles") or 1) if level else 1
    if not skipped and ii > POWER_CYCLES:
        skipped = (
            f"a call takes {ii:,} cycles, more than the {POWER_CYCLES:,} a build simulates at "
            f"gate level (run `eatt power {rtl} --vectors 1`)"
        )
    if skipped:
        say(f"{ctx.tag}: measured energy skipped: {skipped}")
        return {"skipped": skipped}
    n = min(ctx.vectors, ctx.options.power_vectors, max(1, POWER_CYCLES // ii))
    given = ctx.capture()
    if given is not None:
        x, y, masks, model = given
        model = None if model is None else {k: v[:n] for k, v in model.items()}
        given = (x[:n], y[:n], {k: v[:n] for k, v in masks.items()}, model)
    try:
        return power(rtl, vectors=n, seed=ctx.seed, inputs=given)
    except ToolMissing as err:
        if not ctx.options.power_optional:
            raise
        say(f"{ctx.tag}: measured energy skipped: {err}")
        return {"skipped": str(err)}


def _power_metrics(r: dict) -> dict:
    if "skipped" in r:
        return {}
    return {
        "energy_pj": r["energy_per_call_pj"]["total"],
        **{f"{stage}_dynamic_pj": v["dynamic_pj"] for stage, v in r.get("by_stage", {}).items()},
        "area_um2": r["area_um2"],
        "fmax_mhz": r["sta"]["fmax_mhz"],
        "calls_per_s": (r.get("throughput") or {}).get("calls_per_s"),
    }


#: the energy of these stages (rtl_sim/stages.py) is a row of a flow's report each
REPORT_STAGES = ("projections", "scores", "softmax", "values")


def _pnr(ctx: BuildContext, level) -> dict:
    return pnr(ctx.rtl_dir(level))


def _pnr_metrics(r: dict) -> dict:
    fmax = r.get("fmax_mhz") or {}
    best = {"pnr_fmax_mhz": min(fmax.values())} if fmax else {}
    calls = (r.get("throughput") or {}).get("calls_per_s")
    best |= {"pnr_calls_per_s": calls} if calls else {}
    return {**best, "pnr_fits": bool(r.get("fits"))}


def _da4ml(ctx: BuildContext, level) -> dict:
    """da4ml's trace of the alignment (constant products as shift-add): its LUT estimate, its
    check against the golden model, and Yosys on the Verilog da4ml writes."""
    if ctx.options.levels[0] != "alignment":
        raise ValueError(f"da4ml traces the alignment level, not {ctx.options.levels[0]}")
    r: dict = {"estimate": da4ml_trace.estimate(ctx.cfg, ctx.weights)}
    r["check"] = da4ml_trace.check(ctx.cfg, ctx.weights, vectors=ctx.vectors)
    if r["check"]["mismatches"]:  # before Yosys: its check ends the step
        ctx.metrics.update(_da4ml_metrics(r))
        raise CheckFailed(f"da4ml's trace differs from the golden model: {r['check']}")
    meta = da4ml_trace.write_rtl(ctx.cfg, ctx.weights, ctx.out_dir / "rtl_da4ml")
    r["pipeline_stages"] = meta["latency_cycles"]
    r["yosys"] = resources(ctx.out_dir / "rtl_da4ml", abc_verify=ctx.options.abc_verify)
    return r


def _da4ml_metrics(r: dict) -> dict:
    return {
        "da4ml_LUT_estimate": r["estimate"]["LUT_estimate"],
        "da4ml_mismatches": r["check"]["mismatches"],
        **{f"da4ml_{k}": r["yosys"][k] for k in CELL_KEYS if "yosys" in r},
    }


def _energy(ctx: BuildContext, level) -> dict:
    c = ctx.cfg
    counts = energy.core_counts(c.kind, c.len_q, c.len_k, c.dim, c.heads, "attention")
    pj = energy.energy_pj(counts, energy.DEFAULT_TABLE, "asic")
    return {"adds": counts.adds, "muls": counts.muls, "energy_pj_asic": pj}


def _train(ctx: BuildContext, level) -> dict:
    """`eatt train` of the point's run config (a model sweep's, with its overrides)."""
    path = ctx.out_dir / "run.yaml"
    atomic_write_text(path, yaml.safe_dump(ctx.extra["run"], sort_keys=False))
    return train_from_config(path, ctx.out_dir / "train", progress=False)


def _bleu(ctx: BuildContext, level) -> dict:
    """`eatt evaluate` of the trained checkpoint: BLEU and the model's attention energy."""
    checkpoint = ctx.out_dir / "train" / "best.pt"
    return evaluate(checkpoint, beam=ctx.extra["beam"], split=ctx.extra["split"])


def _bleu_metrics(r: dict) -> dict:
    pj = (r["energy"].get("energy_pj") or {}).get("asic")
    return {"bleu": r["bleu"], **({"energy_analytic_pj": pj} if pj is not None else {})}


def _cells(suffix: str):
    return lambda r: {k + suffix: r[k] for k in CELL_KEYS if k in r}


STEPS: dict[str, Step] = {
    s.name: s
    for s in (
        Step(
            "golden",
            "golden model check",
            _golden,
            check=lambda r: None if r["ok"] else "the golden model's self-check failed",
            metrics=lambda r: {"golden_ok": bool(r["ok"])},
        ),
        Step(
            "export",
            "QONNX export, qonnx execution",
            _export,
            check=lambda r: (
                None
                if r["check"]["ok"]
                else f"qonnx execution: {r['check']['mismatches']} mismatching vectors"
            ),
            metrics=lambda r: {"export_mismatches": int(r["check"]["mismatches"])},
        ),
        Step(
            "hls",
            "hls4ml project, C simulation",
            _hls,
            check=lambda r: (
                None
                if r["ok"]
                else f"C simulation: {(r.get('csim') or {}).get('mismatches')} mismatching vectors"
            ),
            metrics=lambda r: {
                "hls_mismatches": (r.get("csim") or {}).get("mismatches"),
                "hls_iterations": (r.get("iterations") or {}).get("total"),
            },
            rows=(("hls_iterations", "folded HLS iterations per call", None),),
        ),
        Step(
            "rtl",
            "RTL ({level})",
            _rtl,
            "every",
            metrics=lambda r: {**_timing_metrics(r), "rtl_bytes": r.get("bytes")},
            rows=(("rtl_bytes", "SystemVerilog (bytes)", None),),
        ),
        Step(
            "sim",
            "Verilator + cocotb simulation ({level})",
            _sim,
            "every",
            check=_sim_check,
            metrics=lambda r: {"mismatches": int(r["mismatches"]), **_timing_metrics(r)},
            rows=(
                ("latency_cycles", "{level} RTL latency (cycles)", None),
                ("ii_cycles", "{level} RTL II (cycles)", None),
            ),
        ),
        Step(
            "sim_edges",
            "Verilator + cocotb on random + edge vectors ({level})",
            _sim_edges,
            "every",
            check=_sim_check,
        ),
        Step(
            "resources",
            "Yosys synth_xilinx ({level}; minutes on big cores)",
            _yosys(False),
            "first",
            metrics=_cells(""),
            rows=(
                *((cell, f"{{level}} {cell} (Yosys xc7)", None) for cell in LOGIC_CELLS),
                ("BRAM", "{level} BRAM (Yosys xc7)", ("folded",)),  # the folded engine's memories
            ),
        ),
        Step(
            "nodsp",
            "Yosys synth_xilinx -nodsp ({level})",
            _yosys(True),
            "first",
            metrics=_cells("_nodsp"),
        ),  # noqa: E501
        Step(
            "power",
            "measured energy of the {level} netlist (eatt power)",
            _power,
            "first",
            check=lambda r: (
                f"{model_mismatches(r)} vectors differ from the model's own outputs"
                if model_mismatches(r)
                else None
            ),
            metrics=_power_metrics,
            rows=(
                ("energy_pj", "{level} energy, measured (pJ/call, OSU)", None),
                *(
                    (f"{s}_dynamic_pj", f"{{level}} {s} energy, measured (pJ/call, dynamic)", None)
                    for s in REPORT_STAGES
                ),
                ("area_um2", "{level} area (um^2, OSU 0.18)", None),
                ("fmax_mhz", "{level} Fmax (MHz, OpenSTA)", None),
                ("calls_per_s", "{level} calls/s at that Fmax", None),
            ),
        ),
        Step(
            "pnr", "Yosys synth_ecp5 + nextpnr-ecp5 ({level})", _pnr, "first", metrics=_pnr_metrics
        ),  # noqa: E501
        Step("da4ml", "da4ml trace of the alignment", _da4ml, metrics=_da4ml_metrics),
        Step(
            "energy",
            "analytic energy",
            _energy,
            metrics=lambda r: {"energy_analytic_pj": r["energy_pj_asic"]},
        ),
        Step(
            "train",
            "eatt train",
            _train,
            metrics=lambda r: {"dev_loss": r["dev_loss"], "train_steps": r["steps"]},
        ),
        Step("bleu", "BLEU (eatt evaluate)", _bleu, metrics=_bleu_metrics),
    )
}
