"""`eatt flow`: the main job. One core and its peer (E-ATT <-> vanilla, same weights and formats)
through every stage, each checked against the golden model, then one comparison report.

Stages per core: golden self-check (widths, float model within the derived bound), QONNX export
executed by qonnx, the hls4ml project made from that file with its C simulation, RTL at the
alignment and attention levels simulated in Verilator by cocotb, Yosys resources of the
alignment RTL and its measured energy (eatt power: the OSU-cell netlist simulated on the same
vectors, energy per call, area, the clock it closes; skipped with a line where its Debian tools
are missing). Before them, the analytic energy model. Then the windowed attention unit (kind
window, docs/window.md; the embedded default unless the config is itself a window unit) through
the same stages: golden, QONNX, hls4ml C simulation, sequential RTL in Verilator with its
cycles per window size, Yosys. Artifacts go under the output folder (default runs/flow), one
sub-folder per core and ``window``, and the report: report.md (the comparison as Markdown
tables), report.json (the whole result) and report.png (E-ATT/vanilla ratios, window cycles).

The output folder is checked, and the tools every stage needs are looked for, before any work:
a folder that is not empty and not eatt's is refused (eatt.outdir.OutputError), a missing tool
is eatt.rtl_sim.tools.ToolMissing whose one-line message says what was written.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

from eatt.builder import earlier_results, run_steps, select
from eatt.config import CoreConfig, atomic_write_text, default_config
from eatt.flow_report import (  # noqa: F401 - re-exported: the report's pieces
    CELLS,
    REPORT_FILES,
    _comparison_heading,
    _core_lines,
    _cycles,
    _fmt,
    _jsonable,
    _md_table,
    _mismatches,
    _paper_heading,
    _span_note,
    _text_block,
    _window_sim_lines,
    compare,
    compared_kinds,
    format_flow,
    format_markdown,
    format_window,
    plot_report,
    title,
    write_report,
)
from eatt.mechanisms import folded_kinds
from eatt.model import energy
from eatt.outdir import check_output_dir, claim_dir
from eatt.progress import say
from eatt.quant.golden import CoreWeights, random_weights
from eatt.quant.vectors import PEER_KINDS, capture_meta
from eatt.rtl_sim.folded import peer_foldings
from eatt.rtl_sim.resources import find_yosys
from eatt.rtl_sim.tools import ToolMissing, check_build_tools, find_verilator
from eatt.steps import TIMES_FILE, BuildContext, BuildOptions
from eatt.units import unit_for

#: the core each foldable kind is compared with in a flow (every other kind's peer: vanilla)
PEER = {"eatt": "vanilla", "vanilla": "eatt"}
#: vectors the flow's measured-energy stage simulates on the netlist (eatt power)
POWER_VECTORS = 100
#: what a flow folder holds (sub-folders and report files)
UNITS = ("eatt", "vanilla", "window")
#: sub-folders of a flow folder written before the marker (the vanilla core was "dot" then)
LEGACY_UNITS = ("eatt", "dot", "window")


def log(message: str) -> None:
    say(message)


def is_legacy_flow(path: Path) -> bool:
    """A flow folder written before eatt.outdir's marker: only core / window sub-folders (and
    report files), at least one of them holding its exported QONNX file."""
    names = {p.name for p in path.iterdir()}
    if not names <= {*LEGACY_UNITS, *REPORT_FILES.values()}:
        return False
    return any((path / u / f).is_file() for u in LEGACY_UNITS for f in ("core.onnx", "window.onnx"))


def check_tools(resources: bool = True) -> None:
    """ToolMissing (one line) for the first tool a flow stage would miss: g++ for hls4ml's C
    simulation, Verilator, make, a C++ compiler and cocotb for RTL simulation, Yosys."""
    from eatt.hls.project import check_csim_tools  # hls4ml

    check_csim_tools()
    find_verilator()
    check_build_tools()
    if importlib.util.find_spec("cocotb_tools") is None:
        raise ToolMissing("cocotb not found: pip install 'cocotb>=2'")
    if resources:
        find_yosys()


def open_flow_dir(out_dir: Path, resources: bool) -> None:
    """After a flow's own checks of its input and out_dir: the tools every stage needs
    (ToolMissing, "nothing was written"), then out_dir claimed as a flow folder and an earlier
    run's report removed (it must not outlive a failed run)."""
    try:
        check_tools(resources)
    except ToolMissing as err:
        raise ToolMissing(f"{err}; nothing was written") from None
    target = claim_dir(out_dir, "flow", legacy=is_legacy_flow)
    for name in (*REPORT_FILES.values(), TIMES_FILE):
        (target / name).unlink(missing_ok=True)


def folded_config(cfg: CoreConfig, reuse_factor: int) -> CoreConfig:
    """cfg with ``reuse_factor`` set, after checking that both kinds fold to it (the flows
    build the core and its peer): ValueError (one line) for a kind the folded engine has not
    (the window unit is already sequential) or an R below the folded engine's fewest
    cycles."""
    if cfg.kind not in folded_kinds():
        raise ValueError(
            f"--reuse-factor: folds the attention cores (kinds {', '.join(folded_kinds())}), "
            f"not {cfg.kind} (the window unit is already sequential)"
        )
    cfg = cfg.replace(reuse_factor=reuse_factor)
    peer_foldings(cfg, reuse_factor)  # the one-line error of an R below the fewest cycles
    return cfg


def flow_folding(cfg: CoreConfig) -> tuple[CoreConfig, dict | None]:
    """How a flow builds cfg's core: (cfg, None) for the unrolled core (reuse_factor 1); for
    reuse_factor R > 1 the folding of cfg's kind at equal cycles with its peer
    (eatt.rtl_sim.folded.peer_foldings: vanilla's folding for R, E-ATT at the same lanes and
    simd with the narrowest multiply walk that is not slower), given to the builders as a
    folding with reuse_factor 1, which R no longer picks per kind."""
    if cfg.reuse_factor <= 1:
        return cfg, None
    return cfg.replace(reuse_factor=1), peer_foldings(cfg, cfg.reuse_factor)[cfg.kind]


def core_energy(cfg: CoreConfig, table: str = energy.DEFAULT_TABLE) -> dict:
    """This core's operation counts and energy (hardware counting), E-ATT next to vanilla (and
    cfg's kind where it is another)."""
    out: dict = {}
    for kind in dict.fromkeys((*energy.CORE_KINDS, cfg.kind)):
        for level in energy.CORE_LEVELS:
            counts = energy.core_counts(kind, cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, level)
            out.setdefault(kind, {})[level] = {
                "adds": counts.adds,
                "muls": counts.muls,
                "selections": counts.selections,
                "energy_pj": {t: energy.energy_pj(counts, table, t) for t in energy.TABLES[table]},
            }
    return out


#: the steps of a core (eatt.steps), and of the windowed unit; Yosys and eatt power are left
#: out with resources=False
CORE_STEPS = ("golden", "export", "hls", "rtl", "sim", "resources", "power")
WINDOW_STEPS = ("golden", "export", "hls", "rtl", "sim", "resources")
SYNTH_STEPS = ("resources", "power")


def window_span(span: tuple) -> tuple | None:
    """The span of the windowed unit beside the cores for the cores' (from, to): a step it does
    not have (power) as the stop means its last; as the start, nothing of it runs (None)."""
    start, stop = span
    if start is not None and start not in WINDOW_STEPS:
        return None
    return start, stop if stop is None or stop in WINDOW_STEPS else None


def flow_steps(steps: tuple, resources: bool) -> tuple:
    return steps if resources else tuple(s for s in steps if s not in SYNTH_STEPS)


def run_core(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int,
    vectors: int,
    out_dir: Path,
    resources: bool,
    inputs: str | Path | None = None,
    span: tuple = (None, None),
) -> dict:
    """Every step of CORE_STEPS for one core; returns {step: result}, "ok" and
    "time_per_step". ``inputs``: a capture file of this core (`eatt capture`): its first
    ``vectors`` vectors replace the random ones in the QONNX, hls4ml and RTL checks. ``span``:
    the first and last step to run (--from-step, --to-step; None: all)."""
    # the folded engine and layer (docs/folded.md, docs/hls.md), at equal cycles with the peer
    build_cfg, folding = flow_folding(cfg)
    options = BuildOptions(
        levels=("folded",) if folding is not None else ("alignment", "attention"),
        folding=folding,
        hls_reuse_factor=1,
        power_vectors=POWER_VECTORS,
        power_optional=True,  # Debian's tools are optional for a flow
        by_level=True,
    )
    ctx = BuildContext(
        cfg, weights, out_dir, seed, vectors, options, inputs=inputs, rtl_cfg=build_cfg,
        tag=f"flow [{cfg.kind}]",
    )  # fmt: skip
    return _run_steps(ctx, flow_steps(CORE_STEPS, resources), span)


def _run_steps(ctx: BuildContext, names: tuple, span: tuple) -> dict:
    """The steps on ctx (eatt.builder.run_steps, each result kept in out_dir/steps.json); the
    results with "ok" (every check passed) and "time_per_step"."""
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    r = dict(run_steps(ctx, names, *span, save=_jsonable))
    r["ok"] = not ctx.failed
    r["steps"] = select(names, *span)
    r["time_per_step"] = ctx.times
    return r


def run_window(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int,
    vectors: int,
    out_dir: Path,
    resources: bool,
    inputs: None = None,
    span: tuple = (None, None),
) -> dict:
    """Every step of WINDOW_STEPS for the windowed unit (kind window): its sequential RTL, the
    cycles rule checked on every step; returns {step: result}, "ok" and "time_per_step"."""
    ctx = BuildContext(
        cfg, weights, out_dir, seed, vectors, BuildOptions(levels=()), onnx_name="window.onnx",
        tag="flow [window]",
    )  # fmt: skip
    return {"config": cfg.to_dict(), **_run_steps(ctx, flow_steps(WINDOW_STEPS, resources), span)}


def run_flow(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int = 1,
    vectors: int = 1000,
    out_dir: str | Path = "runs/flow",
    resources: bool = True,
    window: bool = True,
    inputs: str | Path | None = None,
    span: tuple = (None, None),
) -> dict:
    """The core and its peer, then the windowed unit (``window=False`` skips it). A window
    config runs the windowed unit alone. Ends with report.md, report.json and report.png in
    out_dir (their paths in ``result["report"]``). ``inputs``: a capture file of cfg's core
    (`eatt capture`), checked at every level of that core instead of random vectors, and
    driving its E-ATT / vanilla peer too (another function: only its golden count; a
    Synthesizer's peer keeps random ones). ``span``: (--from-step, --to-step), the
    first and last of the steps (eatt.steps; CORE_STEPS) to run, None for all: a flow that
    starts later reads the earlier steps' results from the folder (each unit's steps.json).
    Each unit's wall time and peak memory per step go into out_dir/time_per_step.json.

    Before any work: OutputError when out_dir is a folder eatt must not write to, ToolMissing
    ("nothing was written") when a tool is missing. A tool found missing later (it cannot be
    used, though it was found) is ToolMissing naming out_dir, which holds the stages done.
    """
    given = Path(out_dir)
    check_output_dir(given, "flow", legacy=is_legacy_flow)
    open_flow_dir(given, resources)
    try:
        result = _run(cfg, weights, seed, vectors, given, resources, window, inputs, span)
    except ToolMissing as err:
        raise ToolMissing(f"{err} (the stages done so far are in {given})") from None
    if any(span):
        result["span"] = {"from": span[0], "to": span[1]}
    write_times(result, given)
    result["report"] = write_report(result, given)
    return result


def write_times(result: dict, out_dir: Path) -> dict:
    """out_dir/time_per_step.json: each unit's wall time and peak memory per step."""
    units = {
        **result.get("cores", {}),
        **({"window": result["window"]} if "window" in result else {}),
    }
    times = {name: u.get("time_per_step", {}) for name, u in units.items()}
    atomic_write_text(out_dir / TIMES_FILE, json.dumps(times, indent=1) + "\n")
    return times


def _run(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int,
    vectors: int,
    out_dir: Path,
    resources: bool,
    window: bool,
    inputs: str | Path | None = None,
    span: tuple = (None, None),
) -> dict:
    result = {"config": cfg.to_dict(), "seed": seed, "out_dir": str(out_dir)}
    if inputs is not None:
        result["inputs"] = str(inputs)
    wunit = unit_for("window")
    wcfg = default_config(wunit.kinds[0])
    beside = window and cfg.kind not in wunit.kinds  # the default windowed unit beside the cores
    wspan = window_span(span)
    beside = beside and wspan is not None
    if beside:  # --from-step: its earlier steps are there, before any work
        earlier_results(out_dir / "window", wcfg, flow_steps(WINDOW_STEPS, resources), *wspan)
    # the unit's flow (FLOWS): run_cores for eatt/vanilla, run_window_unit for window
    part = FLOWS[unit_for(cfg).name](cfg, weights, seed, vectors, out_dir, resources, inputs, span)
    result.update(part if "cores" in part else {"cores": {}, **part})
    if beside:
        wflow, wweights = FLOWS[wunit.name], random_weights(wcfg, seed)
        result.update(wflow(wcfg, wweights, seed, vectors, out_dir, resources, None, wspan))
    cores = result["cores"]
    result["ok"] = all(c["ok"] for c in cores.values()) and result.get("window", {}).get("ok", True)
    return result


def shared_weights(cfg: CoreConfig, weights: CoreWeights, seed: int) -> CoreWeights:
    """The weights of a peer core: the same integer weights where its mechanism takes the
    same (the comparison changes the mechanism, nothing else), else its own alignment weights
    drawn from the seed beside the same W_V and W_O."""
    own = random_weights(cfg, seed).as_dict()
    if set(own) == set(weights.names):
        return weights
    return CoreWeights(**{**own, "wv": weights.wv, "wo": weights.wo})


def run_cores(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int,
    vectors: int,
    out_dir: Path,
    resources: bool,
    inputs: str | Path | None = None,
    span: tuple = (None, None),
) -> dict:
    """The core unit's flow: cfg's kind and its peer (E-ATT vs vanilla) with the same weights, each
    through run_core; returns the result's "energy", "comparison" and "cores" entries."""
    cores, result = {}, {}
    paper = energy.energy_report(length=max(cfg.len_q, cfg.len_k), dim=cfg.dim)
    peer = PEER.get(cfg.kind, "vanilla")
    for kind in (cfg.kind, peer):  # --from-step: both cores' earlier steps, first
        core_cfg = cfg if kind == cfg.kind else cfg.replace(kind=kind)
        earlier_results(out_dir / kind, core_cfg, flow_steps(CORE_STEPS, resources), *span)
    for kind in (cfg.kind, peer):
        core_cfg = cfg if kind == cfg.kind else cfg.replace(kind=kind)
        # the capture is of cfg's core; its peer (E-ATT <-> vanilla) takes the same activations,
        # compared with the golden model only (a capture of the peer's kind would be compared
        # with that layer's outputs though the peer runs with this file's weights: random ones)
        given = inputs if kind == cfg.kind or _drives_peer(inputs, cfg, kind) else None
        out = out_dir / kind
        core_weights = shared_weights(core_cfg, weights, seed)
        cores[kind] = run_core(core_cfg, core_weights, seed, vectors, out, resources, given, span)
    result["energy"] = {"paper": paper, "core": core_energy(cfg)}
    result["comparison"] = compare(cores, core_energy(cfg))
    result["cores"] = cores
    return result


def _drives_peer(inputs, cfg: CoreConfig, peer: str) -> bool:
    """Whether the capture ``inputs`` (of cfg's core) also drives its ``peer``: a capture of
    cfg's own kind, the peer E-ATT <-> vanilla."""
    if inputs is None or not {peer, cfg.kind} <= PEER_KINDS:
        return False
    return capture_meta(inputs).get("config", {}).get("kind") == cfg.kind


def run_window_unit(
    cfg: CoreConfig,
    weights: CoreWeights,
    seed: int,
    vectors: int,
    out_dir: Path,
    resources: bool,
    inputs: None = None,
    span: tuple = (None, None),
) -> dict:
    """The window unit's flow: run_window in out_dir/window; returns the result's "window"."""
    out = out_dir / "window"
    return {"window": run_window(cfg, weights, seed, vectors, out, resources, None, span)}


#: each unit's flow (eatt/units.py names the stages; a flow runs them through their dispatchers,
#: so it stays out of the registry, which must not reach back up here): unit name -> (cfg,
#: weights, seed, vectors, out_dir, resources, inputs, span) -> the result's entries
FLOWS: dict[str, Callable[..., dict]] = {"core": run_cores, "window": run_window_unit}
