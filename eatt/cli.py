"""The `eatt` command. Every sub-command is a thin layer over a library function.

Exit codes: 0 ok, 1 check failed, 2 bad input, 3 external tool missing.
With --json a command prints exactly one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

# Light modules only (numpy at most). torch (seconds to import), Brevitas, qonnx/onnx and hls4ml
# are imported by the commands that need them, so `eatt --help`, rtl and sim start fast.
from eatt.config import (
    ConfigError,
    CoreConfig,
    WindowConfig,
    check_rtl_size,
    check_vectors,
    default_config,
    first_line,
    load_config,
)
from eatt.model import energy
from eatt.outdir import check_output_dir, check_output_file
from eatt.progress import step
from eatt.quant.golden import random_weights
from eatt.quant.vectors import (
    capture_inputs,
    capture_meta,
    load_capture,
    load_window_capture,
    model_line,
    model_mismatches,
)
from eatt.rtl_sim.generate import generate_rtl, load_metadata
from eatt.rtl_sim.pnr import DEVICES, pnr
from eatt.rtl_sim.power import DEFAULT_LIBERTY, LIBERTIES, power
from eatt.rtl_sim.resources import resources_report
from eatt.rtl_sim.runner import simulate
from eatt.rtl_sim.tools import ToolMissing

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT, EXIT_TOOL_MISSING = 0, 1, 2, 3
#: an unexpected error (a bug): one line, EATT_DEBUG=1 for the traceback (BSD's EX_SOFTWARE)
EXIT_INTERNAL = 70
SIMULATORS = {"verilator": "Verilator", "icarus": "Icarus Verilog"}
STEP_HELP = "a decoder layer's core of one decoding step (len_q 1; what the model decodes with)"


class CommandError(Exception):
    """An error with its exit code; printed as one line, never a traceback."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT):
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of usage + message
        raise CommandError(f"{self.prog}: {message} (see --help)")


def _emit(result: dict, as_json: bool, text: Callable[[dict], str]) -> None:
    if as_json:
        print(json.dumps(result))
    else:
        print(text(result))


def _load_core(args) -> tuple:
    """The core of a command: --config (or the embedded default) and --seed."""
    cfg = load_config(args.config) if args.config else default_config()
    if args.seed < 0:
        raise CommandError(f"--seed: must be >= 0, got {args.seed}")
    return cfg, random_weights(cfg, args.seed)


# -- eatt energy ----------------------------------------------------------------------------------
def cmd_energy(args) -> int:
    for flag, value in (("--length", args.length), ("--dim", args.dim)):
        if not 1 <= value <= 10**9:  # counts stay exact floats; far past any real model
            raise CommandError(f"{flag}: must be in [1, 1000000000], got {value}")
    report = energy.energy_report(args.length, args.dim, table=args.table)
    _emit(report, args.json, energy.format_energy_table)
    return EXIT_OK


# -- eatt golden ----------------------------------------------------------------------------------
def cmd_golden(args) -> int:
    from eatt.quant.check import format_golden_check, golden_check  # torch: the float twin

    cfg, weights = _load_core(args)
    if args.vectors < 1:
        raise CommandError(f"--vectors: must be >= 1, got {args.vectors}")
    check_vectors(cfg, args.vectors)
    with step(f"golden model check of the {cfg.kind} core ({args.vectors} vectors)"):
        result = golden_check(cfg, weights, vectors=args.vectors, seed=args.seed)
    _emit(result, args.json, format_golden_check)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED


# -- eatt export ----------------------------------------------------------------------------------
def cmd_export(args) -> int:
    try:
        from eatt.quant import export  # qonnx/onnx
    except ImportError as err:
        raise CommandError(
            f"export needs qonnx/onnx ({err}); nothing was written", EXIT_TOOL_MISSING
        ) from None
    if args.step and not args.layer:
        raise CommandError("--step: give --layer NAME (a decoder layer of a model)")
    if (args.layer or args.list_layers) and not args.checkpoint:
        flag = "--layer" if args.layer else "--list-layers"
        raise CommandError(f"{flag}: give the model's CHECKPOINT (best.pt of `eatt train`)")
    if args.list_layers:
        return _list_layers(args)
    if not args.output:
        raise CommandError("-o/--output: give the FILE.onnx to write")
    source = None
    if args.checkpoint:
        if args.config:
            raise CommandError("give either --config or a CHECKPOINT, not both")
        try:
            from eatt.model import layers  # torch
            from eatt.quant.modules import checkpoint_core  # Brevitas, torch
        except ImportError as err:
            raise CommandError(
                f"checkpoints need brevitas ({err}); nothing was written", EXIT_TOOL_MISSING
            ) from None
        _check_checkpoint_path(args.checkpoint)
        if layers.is_model_checkpoint(args.checkpoint):
            if not args.layer:
                raise CommandError(
                    f"{args.checkpoint}: a model of `eatt train`: give --layer NAME "
                    "(--list-layers prints them)"
                )
            cfg, weights = layers.checkpoint_layer_core(args.checkpoint, args.layer, args.step)
            source = {"checkpoint": str(Path(args.checkpoint).resolve()), "layer": args.layer}
            if args.step:
                source["step"] = True
        elif args.layer:
            raise CommandError(f"--layer: {_not_a_model(args.checkpoint)}")
        else:
            cfg, weights = checkpoint_core(args.checkpoint)
    else:
        cfg, weights = _load_core(args)
    if args.check is not None and args.check < 1:
        raise CommandError(f"--check: must be >= 1, got {args.check}")
    if args.inputs and not args.check:
        raise CommandError("--inputs: give --check N too (N captured vectors are checked)")
    if args.check:
        check_vectors(cfg, args.check, "--check")
    if args.inputs:  # a capture that does not fit is refused before anything is written
        if isinstance(cfg, WindowConfig):
            load_window_capture(args.inputs, cfg, args.check)
        else:
            load_capture(args.inputs, cfg)
    check_output_file(args.output, ours=export.load_core)  # only its own
    result = export.export_core(cfg, weights, args.output, source)
    ok = True
    if args.check:
        with step(f"qonnx execution of {args.output} ({args.check} vectors)"):
            result["check"] = export.check_export(
                args.output, vectors=args.check, seed=args.seed, inputs=args.inputs
            )
        ok = result["check"]["ok"]

    def text(r: dict) -> str:
        lines = [f"exported {r['config']['kind']} core to {r['path']} ({r['bytes']} bytes)"]
        if "source" in r:
            step = " (one decoding step)" if r["source"].get("step") else ""
            lines.append(f"  layer {r['source']['layer']}{step} of {r['source']['checkpoint']}")
        if "check" in r:
            lines.append(export.format_check(r["check"]))
        return "\n".join(lines)

    _emit(result, args.json, text)
    return EXIT_OK if ok else EXIT_CHECK_FAILED


def cmd_capture(args) -> int:
    from eatt.model import layers  # torch

    if not 1 <= args.max <= 10**7:
        raise CommandError(f"--max: must be in [1, 10000000], got {args.max}")
    if not 1 <= args.beam <= 256:
        raise CommandError(f"--beam: must be in [1, 256], got {args.beam}")
    _check_checkpoint_path(args.checkpoint)
    if not layers.is_model_checkpoint(args.checkpoint):
        raise CommandError(_not_a_model(args.checkpoint))
    check_output_file(args.output, ours=capture_meta)  # only its own
    with step(f"decoding the {args.split} split, capturing {args.layer}"):
        capture = layers.capture_layer(
            args.checkpoint, args.layer, args.split, args.max, beam=args.beam, step=args.step
        )
    layers.save_capture(capture, args.output)
    result = {**capture["report"], "path": args.output}
    result.pop("config")
    ok = result["golden_vs_model"]["mismatches"] == 0

    def text(r: dict) -> str:
        g = r["golden_vs_model"]
        lines = [
            f"captured {r['vectors']} vectors of {r['layer']}"
            + (" (one decoding step each)" if r.get("step") else "")
            + f" ({r['split']} split, beam {r['beam']}) to {r['path']}; valid key lengths "
            f"{r['lengths'][0]}-{r['lengths'][-1]}",
            f"golden model of the exported core vs the model: {g['mismatches']} mismatching",
        ]
        if g["first_mismatch"]:
            lines.append("  " + g["first_mismatch"])
        return "\n".join(lines)

    _emit(result, args.json, text)
    return EXIT_OK if ok else EXIT_CHECK_FAILED


def _vector_kind(report: dict) -> str:
    """ "captured" or "random": the vectors a check ran before its edge vectors."""
    return "captured" if report.get("captured") else "random"


def _check_checkpoint_path(path: str) -> None:
    p = Path(path)
    if p.is_dir():
        raise CommandError(f"{p}: is a folder; give its best.pt or last.pt")
    if not p.is_file():
        raise CommandError(f"{p}: no such checkpoint file")


def _list_layers(args) -> int:
    from eatt.model import layers  # torch

    _check_checkpoint_path(args.checkpoint)
    if not layers.is_model_checkpoint(args.checkpoint):
        raise CommandError(_not_a_model(args.checkpoint))
    found = [layer.to_dict() for layer in layers.checkpoint_layers(args.checkpoint)]
    result = {"checkpoint": args.checkpoint, "layers": found}

    def text(r: dict) -> str:
        return "\n".join(
            f"{x['name']:<20} {x['kind']:<14} "
            + ("hardware core: eatt export CHECKPOINT --layer " + x["name"] if x["hardware"]
               else "float (no hardware core)")
            for x in r["layers"]
        )  # fmt: skip

    _emit(result, args.json, text)
    return EXIT_OK


# -- eatt hls -------------------------------------------------------------------------------------
def cmd_hls(args) -> int:
    try:
        from eatt.hls.project import BuildError, synth, write_project  # hls4ml
    except ImportError as err:
        raise CommandError(
            f"hls needs hls4ml ({err}); nothing was written", EXIT_TOOL_MISSING
        ) from None
    if args.config and args.onnx:
        raise CommandError("give either --config or an ONNX file, not both")
    if args.vectors < 1:
        raise CommandError(f"--vectors: must be >= 1, got {args.vectors}")
    source = args.onnx if args.onnx else (load_config(args.config) if args.config else None)
    if source is None:
        source = default_config()
    if not args.onnx:
        check_vectors(source, args.vectors)
    kwargs = {"seed": args.seed, "backend": args.backend, "vectors": args.vectors}
    if args.inputs:
        if not args.onnx:
            raise CommandError("--inputs: give the layer's FILE.onnx (eatt export --layer)")
        kwargs["inputs"] = args.inputs
    if args.part is not None:
        if not args.part.strip():
            raise CommandError("--part: must name an FPGA part, got an empty string")
        kwargs["part"] = args.part
    if args.clock is not None:
        if not (math.isfinite(args.clock) and args.clock > 0):
            raise CommandError(f"--clock: must be a period in ns > 0, got {args.clock}")
        kwargs["clock_ns"] = args.clock
    if args.reuse_factor is not None:
        kwargs["reuse_factor"] = _reuse_factor(args)
    folding = _folding(args)
    if folding:
        kwargs["folding"] = folding
    if args.io_type != "io_parallel":
        kwargs["io_type"] = args.io_type
    if args.onnx:
        from eatt.hls import model_project  # hls4ml, qonnx

        if model_project.is_whole_model(args.onnx):
            return _hls_whole_model(args, kwargs, model_project)
    try:
        result = write_project(source, args.output, **kwargs)
    except BuildError as err:  # g++ failed on the project: its output is above
        raise CommandError(str(err), EXIT_CHECK_FAILED) from None
    if args.synth and result["ok"]:
        try:
            result["synth"] = synth(args.output)
        except ToolMissing as err:
            raise CommandError(str(err), EXIT_TOOL_MISSING) from None

    def text(r: dict) -> str:
        c = r["csim"]
        lines = [
            f"hls4ml project ({r['backend']}) in {r['project']}",
            f"C simulation vs golden: {c['vectors']} {_vector_kind(c)} + {c['edge_vectors']} "
            "edge vectors, "
            f"{c['mismatches']} mismatching ({c['vectors_per_s']:.0f} vectors/s)",
        ]
        if c.get("first_mismatch"):
            lines.append(f"  first mismatch: {c['first_mismatch']}")
        lines[-1] += model_line(c.get("vs_model"), "C simulation")
        if r.get("folding"):
            from eatt.hls.folding import format_folded  # hls4ml, imported above

            lines.append(format_folded(r))
        lines.append("  result: " + ("PASS" if r["ok"] else "FAIL"))
        return "\n".join(lines)

    _emit(result, args.json, text)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED


def _hls_whole_model(args, kwargs: dict, model_project) -> int:
    """eatt hls of a whole model's QONNX file (brevitas export_qonnx of a model with eatt.nn
    attention): hls4ml's project, its C simulation on random inputs against qonnx."""
    for key, flag in (("inputs", "--inputs"), ("folding", "--lanes/--simd/--pe"),
                      ("reuse_factor", "--reuse-factor"), ("io_type", "--io-type"),
                      ("part", "--part")):  # fmt: skip
        if key in kwargs:
            raise CommandError(f"{flag}: for a core file; {args.onnx} is a whole model")
    if args.synth:
        raise CommandError(f"--synth: for a core file; {args.onnx} is a whole model")
    check_output_dir(args.output, "hls4ml project")
    inputs = model_project.random_inputs(args.onnx, args.vectors, args.seed)
    options = {k: kwargs[k] for k in ("backend", "clock_ns") if k in kwargs}
    result = model_project.write_model_project(args.onnx, args.output, inputs, **options)

    def text(r: dict) -> str:
        return "\n".join(
            [
                f"hls4ml project ({r['backend']}) of the whole model {r['source']} in "
                f"{r['project']}",
                "layers: " + ", ".join(r["layers"]),
                f"C simulation vs qonnx execution: {r['vectors']} random inputs (seed "
                f"{args.seed}), {r['mismatches']} mismatching (max |diff| {r['max_abs_diff']:g})",
                "  result: " + ("PASS" if r["ok"] else "FAIL"),
            ]
        )

    _emit(result, args.json, text)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED


# -- eatt rtl / eatt sim -------------------------------------------------------------------------
def cmd_rtl(args) -> int:
    source = None
    if args.onnx:
        if args.config:
            raise CommandError("give either --config or an ONNX file, not both")
        try:
            from eatt.quant.export import core_source, load_core  # onnx, qonnx
        except ImportError as err:
            raise CommandError(
                f"reading {args.onnx} needs onnx/qonnx ({err})", EXIT_TOOL_MISSING
            ) from None
        cfg, weights = load_core(args.onnx)
        source = {"onnx": str(Path(args.onnx).resolve()), **(core_source(args.onnx) or {})}
    else:
        cfg, weights = _load_core(args)
    if args.level is None:  # reuse_factor > 1 folds the core (docs/folded.md)
        args.level = "folded" if getattr(cfg, "reuse_factor", 1) > 1 else "alignment"
    folding = _folding(args)
    if folding and args.level != "folded":
        raise CommandError("--lanes/--simd/--pe: only with --level folded")
    if args.level == "folded" and cfg.kind not in ("eatt", "vanilla"):
        raise CommandError(f"--level folded: for kinds eatt and vanilla, not {cfg.kind}")
    if args.level != "folded":  # the folded engine's size does not grow with the config
        check_rtl_size(cfg)
    # window: one level, a fixed pipeline (adder_levels must be 0)
    meta = generate_rtl(
        cfg,
        weights,
        args.output,
        level=args.level,
        adder_levels=args.adder_levels,
        source=source,
        folding=folding or None,
    )

    def text(m: dict) -> str:
        if "latency_cycles" in m:
            latency = f"latency {m['latency_cycles']} cycles"
        else:  # the windowed unit: cycles grow with the window
            latency = f"latency up to {m['latency_cycles_max']} cycles"
        return (
            f"wrote {m['level']} RTL of the {m['config']['kind']} core to {args.output}: "
            + ", ".join(m["sources"])
            + f" ({latency})"
        )

    _emit(meta, args.json, text)
    return EXIT_OK


def cmd_sim(args) -> int:
    if args.vectors < 1:
        raise CommandError(f"--vectors: must be >= 1, got {args.vectors}")
    meta = load_metadata(args.dir)
    cfg = CoreConfig.from_dict(meta["config"], source=f"{args.dir}/metadata.json")
    check_vectors(cfg, args.vectors)
    inputs = None
    if args.inputs:
        if meta["level"] == "window":  # a windowed layer's decoding steps
            inputs = load_window_capture(args.inputs, cfg, args.vectors)["steps"]
        elif meta["level"] in ("alignment", "attention", "folded"):
            inputs = capture_inputs(args.inputs, cfg, args.vectors)
        else:
            raise CommandError(f"--inputs: captures are of attention cores, not a {cfg.kind} unit")
    try:
        result = simulate(
            args.dir, vectors=args.vectors, seed=args.seed, simulator=args.simulator, inputs=inputs
        )
    except ToolMissing as err:
        raise CommandError(str(err), EXIT_TOOL_MISSING) from None
    except RuntimeError as err:  # a handshake assertion or a failed build: the check failed
        raise CommandError(str(err), EXIT_CHECK_FAILED) from None

    if inputs is not None:
        result["captured"] = True

    def text(r: dict) -> str:
        lines = [
            f"RTL simulation ({SIMULATORS[r.get('simulator', 'verilator')]} + cocotb): "
            f"{r['vectors']} {'captured ' if r.get('captured') else ''}vectors, "
            f"{r['mismatches']} mismatching; latency {r['latency_cycles']} cycles, "
            f"II {r['ii_cycles']} cycles; build {r['build_seconds']:.1f} s"
            + (" (cached)" if r.get("cached_build") else "")
            + f", sim {r['sim_seconds']:.2f} s",
        ]
        if r.get("first_mismatch"):
            lines.append(f"  first mismatch: {r['first_mismatch']['message']}")
        lines[-1] += model_line(r.get("vs_model"), "RTL")
        lines.append("  result: " + ("PASS" if r["ok"] else "FAIL"))
        return "\n".join(lines)

    _emit(result, args.json, text)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED


# -- eatt resources --------------------------------------------------------------------------------
def cmd_resources(args) -> int:
    try:
        result = resources_report(
            args.dir, nodsp=not args.no_nodsp, abc_verify=not args.no_abc_verify
        )
    except ToolMissing as err:
        raise CommandError(str(err), EXIT_TOOL_MISSING) from None
    except RuntimeError as err:  # synthesis failed: the log tail follows the first line
        raise CommandError(str(err).splitlines()[0], EXIT_CHECK_FAILED) from None

    def text(r: dict) -> str:
        cells = ("LUT", "FF", "CARRY4", "DSP48E1", "BRAM")
        lines = [
            f"{name:<12} " + ", ".join(f"{c} {v[c]}" for c in cells)
            for name, v in r.items()
            if name.startswith("yosys")
        ]
        if "da4ml" in r:
            d = r["da4ml"]
            lines.append(
                f"{'da4ml':<12} LUT estimate {d['LUT_estimate']}, adder depth "
                f"{d['adder_depth']:g}, multipliers {d['multipliers']}"
            )
        return "\n".join(lines)

    _emit(result, args.json, text)
    return EXIT_OK


# -- eatt power ------------------------------------------------------------------------------------
def cmd_power(args) -> int:
    if args.vectors < 1:
        raise CommandError(f"--vectors: must be >= 1, got {args.vectors}")
    if not (math.isfinite(args.clock) and args.clock > 0):
        raise CommandError(f"--clock: must be a period in ns > 0, got {args.clock}")
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise CommandError(f"--timeout: must be seconds > 0, got {args.timeout}")
    meta = load_metadata(args.dir)  # a bad folder: one line, before any tool runs
    if meta["level"] not in ("alignment", "attention", "folded"):
        raise CommandError(
            f"{args.dir}: level {meta['level']!r}: eatt power measures the cores "
            f"(alignment, attention, folded)"
        )
    cfg = CoreConfig.from_dict(meta["config"], source=f"{args.dir}/metadata.json")
    check_vectors(cfg, args.vectors)  # the size estimate, before any tool runs
    inputs = None if not args.inputs else capture_inputs(args.inputs, cfg, args.vectors)
    try:
        result = power(
            args.dir,
            vectors=args.vectors,
            seed=args.seed,
            inputs=inputs,
            clock_ns=args.clock,
            liberty=args.liberty,
            timeout=args.timeout,
        )
    except ToolMissing as err:
        raise CommandError(str(err), EXIT_TOOL_MISSING) from None
    except RuntimeError as err:  # a tool failed or the netlist differs: the check failed
        raise CommandError(str(err).splitlines()[0], EXIT_CHECK_FAILED) from None

    def text(r: dict) -> str:
        e, p, sta = r["energy_per_call_pj"], r["power_mw"], r["sta"]
        lines = "\n".join(
            [
                f"{r['top']} on {r['liberty']} ({r['voltage']:g} V), {r['vectors']} vectors "
                f"({r['inputs']}), {r['cycles']} cycles: netlist = golden model, "
                f"{r['mismatches']} mismatches",
                f"area         {r['area_um2']:,.0f} um^2, {r['cells']:,} cells",
                f"energy/call  {e['total']:.4g} pJ (switching {e['switching']:.4g}, internal "
                f"{e['internal']:.4g}, leakage {e['leakage']:.3g})",
                "  dynamic    = flip-flops {flip_flops:.4g} + logic {logic:.4g} + nets of the "
                "input ports (the clock among them) {input_ports:.4g} pJ".format(
                    **r["energy_split_per_call_pj"]
                ),
                "  by stage   "
                + ", ".join(f"{k} {v['dynamic_pj']:.4g}" for k, v in r["by_stage"].items())
                + " pJ (docs/power.md: logic counts for the registers it computes)",
                f"power        {p['total']:.4g} mW at {r['clock_ns']:g} ns (dynamic "
                f"{p['dynamic']:.4g}, leakage {p['leakage']:.3g})",
                f"timing       worst slack {sta['worst_slack_ns']:g} ns at {r['clock_ns']:g} ns: "
                f"closes at {sta['fmax_mhz']:g} MHz (OpenSTA, ideal clock, no wire load)",
                f"vectorless   {sta['vectorless_energy_per_call_pj']:.4g} pJ/call (OpenSTA: input "
                f"activity {r['input_activity']:.3g}/cycle propagated, not the simulation's)",
                f"time         {r['seconds']:.0f} s; files in {args.dir}/power",
            ]
        )
        fail = "\nresult: FAIL (the model's own outputs differ)" if model_mismatches(r) else ""
        return lines + model_line(r.get("vs_model"), "the netlist") + fail

    _emit(result, args.json, text)
    ok = not result["mismatches"] and not model_mismatches(result)
    return EXIT_OK if ok else EXIT_CHECK_FAILED


# -- eatt pnr --------------------------------------------------------------------------------------
def cmd_pnr(args) -> int:
    if args.device not in DEVICES:
        raise CommandError(
            f"--device: unknown device {args.device!r} (one of {', '.join(DEVICES)})"
        )
    if not (math.isfinite(args.clock) and args.clock > 0):
        raise CommandError(f"--clock: must be a period in ns > 0, got {args.clock}")
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise CommandError(f"--timeout: must be seconds > 0, got {args.timeout}")
    load_metadata(args.dir)  # a bad folder: one line, before any tool runs
    try:
        result = pnr(
            args.dir,
            device=args.device,
            clock_ns=args.clock,
            timeout=args.timeout,
            nodsp=args.nodsp,
            wrapper=args.wrapper,
        )
    except ToolMissing as err:
        raise CommandError(str(err), EXIT_TOOL_MISSING) from None
    except RuntimeError as err:  # a tool failed: the log tail follows the first line
        raise CommandError(str(err).splitlines()[0], EXIT_CHECK_FAILED) from None
    if result["error"]:  # does not fit: the one line with the numbers, the JSON still printed
        print(f"eatt: error: {result['error']}", file=sys.stderr)

    def text(r: dict) -> str:
        s = r["summary"]
        fmax = ", ".join(f"{c} {v:g} MHz" for c, v in r["fmax_mhz"].items()) or "none"
        util = r["utilization"]
        comb = util.get("TRELLIS_COMB", {})
        head = (
            f"{r['part']} ({r['device']}{', out of context' if r['out_of_context'] else ''}"
            f"{', -nodsp' if r['nodsp'] else ''}"
            f"{', serial wrapper' if r['wrapper'] else ''}):"
            f" {'routed' if r['routed'] else 'not routed'}"
        )
        if r["yosys"] is None:  # refused before any tool ran (the weights alone do not fit)
            return f"{head}\nnot fitting  {r['error']}"
        return "\n".join(
            [
                head,
                f"logic        COMB {comb.get('used', 0)}/{comb.get('available', 0)}"
                f" ({comb.get('percent', 0)} %), LUT4 {s['LUT4']}, DFF {s['DFF']},"
                f" CCU2C {s['CCU2C']}",
                f"blocks       MULT18X18D {s['MULT18X18D']}/"
                f"{util.get('MULT18X18D', {}).get('available', 0)}, DP16KD {s['DP16KD']}/"
                f"{util.get('DP16KD', {}).get('available', 0)}, IO {s.get('IO', 0)}",
                f"Fmax         {fmax} (constraint {r['constraint_mhz']:g} MHz)",
                f"time         {r['seconds']:.0f} s, peak {r['peak_mb']} MiB"
                + (f"\nbitstream    {r['bitstream']}" if r["bitstream"] else "")
                + (f"\nnot fitting  {r['error']}" if r["error"] else ""),
            ]
        )

    _emit(result, args.json, text)
    return EXIT_OK if result["routed"] else EXIT_CHECK_FAILED


# -- eatt train / evaluate / experiment (seq2seq models) -----------------------------------------
def _threads(n: int) -> None:
    """Small models train fastest on one thread, and never oversubscribe a shared machine."""
    import torch  # seconds to import: only the seq2seq commands load it

    if n < 1:
        raise CommandError(f"--threads: must be >= 1, got {n}")
    torch.set_num_threads(n)


def _int_list(text: str) -> tuple[int, ...]:
    """``1,2,3`` -> (1, 2, 3)."""
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 1,2,3, got {text!r}"
        ) from None


def cmd_train(args) -> int:
    from eatt.model.train import train_from_config  # torch

    _threads(args.threads)
    out = args.output or str(Path("runs") / Path(args.config).stem)
    summary = train_from_config(args.config, out, progress=False if args.no_progress else None)
    _emit(
        summary,
        args.json,
        lambda s: (
            f"trained {s['steps']} steps in {s['seconds']:.0f} s, best dev loss "
            f"{s['dev_loss']:.3f} (step {s['best_step']}): {s['checkpoint']}"
        ),
    )
    return EXIT_OK


def cmd_evaluate(args) -> int:
    from eatt.model.evaluate import evaluate, format_evaluation  # torch

    _threads(args.threads)
    if not 1 <= args.beam <= 256:
        raise CommandError(f"--beam: must be in [1, 256], got {args.beam}")
    if not (math.isfinite(args.alpha) and 0 <= args.alpha <= 10):
        raise CommandError(f"--alpha: must be a number in [0, 10], got {args.alpha}")
    from eatt.model.train import resolve_device  # torch

    try:
        resolve_device(args.device)
    except ValueError as err:
        raise CommandError(f"--{err}") from None
    checkpoint = Path(args.checkpoint)
    if checkpoint.is_dir():
        raise CommandError(f"{checkpoint}: is a folder; give its best.pt or last.pt")
    if not checkpoint.is_file():
        raise CommandError(f"{checkpoint}: no such checkpoint file")
    with step(f"decoding the {args.split} split with {args.checkpoint} (beam {args.beam})"):
        result = evaluate(
            args.checkpoint,
            beam=args.beam,
            alpha=args.alpha,
            split=args.split,
            device=args.device,
            hardware=args.hardware,
        )
    _emit(result, args.json, format_evaluation)
    return EXIT_OK


def cmd_experiment(args) -> int:
    from eatt.model.experiments import format_table, run_experiment  # torch, matplotlib

    _threads(args.threads)
    report = run_experiment(
        args.name,
        quick=args.quick,
        out_dir=args.output,
        workers=args.workers,
        steps=args.steps,
        seeds=args.seeds,
        resume=args.resume,
    )
    _emit(report, args.json, format_table)
    return EXIT_OK


# -- eatt flow ------------------------------------------------------------------------------------
def cmd_flow(args) -> int:
    from eatt.flow import folded_config, format_flow, run_flow  # torch (the float twin)

    if args.vectors < 1:
        raise CommandError(f"--vectors: must be >= 1, got {args.vectors}")
    if args.checkpoint is not None and not args.checkpoint.endswith(".onnx"):
        _check_checkpoint_path(args.checkpoint)
        from eatt.model import layers  # torch

        if layers.is_model_checkpoint(args.checkpoint):
            return _flow_layer(args)
    for flag, given in (("--layer", args.layer), ("--step", args.step)):
        if given and args.checkpoint is not None:
            raise CommandError(f"{flag}: {_not_a_model(args.checkpoint)}")
        if given:
            raise CommandError(f"{flag}: give the model's CHECKPOINT (best.pt of `eatt train`)")
    if args.checkpoint is not None:
        if args.config:
            raise CommandError(f"give either --config or {args.checkpoint}, not both")
        cfg, weights = _core_file(args.checkpoint)
        if args.seed < 0:
            raise CommandError(f"--seed: must be >= 0, got {args.seed}")
    else:
        cfg, weights = _load_core(args)
    if args.inputs:
        if args.checkpoint is None:
            raise CommandError("--inputs: give the layer's FILE.onnx (eatt export --layer)")
        load_capture(args.inputs, cfg)  # a capture of this core, before any work
    reuse = _reuse_factor(args) or getattr(cfg, "reuse_factor", 1)
    if reuse > 1:  # the folded engine and layer, both kinds (one line if they cannot fold)
        cfg = folded_config(cfg, reuse)
    else:
        check_rtl_size(cfg)
    check_vectors(cfg, args.vectors)
    from eatt.hls.project import BuildError  # hls4ml

    try:
        result = run_flow(
            cfg,
            weights,
            seed=args.seed,
            vectors=args.vectors,
            out_dir=args.output,
            resources=not args.no_resources,
            window=not args.no_window,
            inputs=args.inputs,
        )
    except BuildError as err:  # g++ failed on the HLS project: its output is above
        raise CommandError(str(err), EXIT_CHECK_FAILED) from None
    _emit(result, args.json, format_flow)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED


# -- eatt sweep -----------------------------------------------------------------------------------
def cmd_sweep(args) -> int:
    from eatt.sweep import format_sweep, load_sweep, run_sweep  # torch (the golden stage)

    if args.max_parallel is not None and args.max_parallel < 1:
        raise CommandError(f"--max-parallel: must be >= 1, got {args.max_parallel}")
    if not Path(args.sweep).is_file():
        raise CommandError(f"{args.sweep}: no such sweep file")
    sweep = load_sweep(args.sweep)
    output = args.output or str(Path("runs") / "sweeps" / Path(args.sweep).stem)
    address = None if args.address in (None, "local") else args.address
    result = run_sweep(
        sweep, output, address=address, resume=args.resume, max_parallel=args.max_parallel
    )
    _emit(result, args.json, format_sweep)
    return EXIT_OK if not result["failed"] else EXIT_CHECK_FAILED


def _not_a_model(path: str) -> str:
    """The line for a file that is not a model of `eatt train` where one is needed."""
    return (
        f"{path}: not a model of `eatt train`; your own model's layers go through the Python "
        "API (eatt.capture, eatt.export_layer: docs/own_model.md), then `eatt flow "
        "layer.onnx --inputs acts.npz`"
    )


def _core_file(path: str) -> tuple:
    """(config, weights) of a core file: a QONNX file of `eatt export` or a core checkpoint."""
    if path.endswith(".onnx"):
        try:
            from eatt.quant.export import load_core  # onnx, qonnx
        except ImportError as err:
            raise CommandError(
                f"reading {path} needs onnx/qonnx ({err})", EXIT_TOOL_MISSING
            ) from None
        return load_core(path)
    try:
        from eatt.quant.modules import checkpoint_core  # Brevitas, torch
    except ImportError as err:
        raise CommandError(f"reading {path} needs brevitas ({err})", EXIT_TOOL_MISSING) from None
    return checkpoint_core(path)


#: the largest integer a flag may give: what HLS code and every config key take (int32)
INT_MAX = 2**31 - 1


def _reuse_factor(args) -> int | None:
    """--reuse-factor (eatt hls, eatt flow): None when not given, else an integer >= 1."""
    _in_range("--reuse-factor", args.reuse_factor)
    return args.reuse_factor


def _in_range(flag: str, value: int | None) -> None:
    """An integer flag: >= 1 and at most INT_MAX (None: not given)."""
    if value is not None and value < 1:
        raise CommandError(f"{flag}: must be >= 1, got {value}")
    if value is not None and value > INT_MAX:
        raise CommandError(f"{flag}: must be at most {INT_MAX} (int32), got {value}")


def _folding(args) -> dict[str, int]:
    """--lanes/--simd/--pe (eatt rtl, eatt hls): the ones given."""
    given = (("lanes", args.lanes), ("simd", args.simd), ("pe", args.pe))
    for key, v in given:  # below 1: the folding's own check says what divides
        if v is not None and v > INT_MAX:
            raise CommandError(f"--{key}: must be at most {INT_MAX} (int32), got {v}")
    return {k: v for k, v in given if v is not None}


def _flow_layer(args) -> int:
    """`eatt flow CHECKPOINT --layer NAME`: a trained layer through every stage."""
    if args.config:
        raise CommandError("give either --config or a CHECKPOINT, not both")
    if args.inputs:
        raise CommandError("--inputs: a layer's flow captures its own vectors; leave it out")
    if args.no_window:
        raise CommandError("--no-window: a layer's flow builds no windowed unit; leave it out")
    if not 1 <= args.beam <= 256:
        raise CommandError(f"--beam: must be in [1, 256], got {args.beam}")
    if args.seed < 0:
        raise CommandError(f"--seed: must be >= 0, got {args.seed}")
    from eatt.flow_layer import format_layer_flow, run_layer_flow  # torch
    from eatt.model import layers  # torch

    _check_checkpoint_path(args.checkpoint)
    if not layers.is_model_checkpoint(args.checkpoint):
        raise CommandError(_not_a_model(args.checkpoint))
    if not args.layer:
        raise CommandError(
            f"{args.checkpoint}: a model of `eatt train`: give --layer NAME (`eatt export "
            f"{args.checkpoint} --list-layers` prints them)"
        )
    from eatt.hls.project import BuildError  # hls4ml

    try:
        result = run_layer_flow(
            args.checkpoint,
            args.layer,
            out_dir=args.output,
            step_core=args.step,
            vectors=args.vectors,
            split=args.split,
            beam=args.beam,
            seed=args.seed,
            resources=not args.no_resources,
            peer=not args.no_peer,
            reuse_factor=_reuse_factor(args) or 1,
        )
    except BuildError as err:
        raise CommandError(str(err), EXIT_CHECK_FAILED) from None
    _emit(result, args.json, format_layer_flow)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED


def _add_core_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="CFG", help="core config (YAML/JSON); default: embedded")
    p.add_argument("--seed", type=int, default=1, help="seed of the random integer weights")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _add_folding_args(p: argparse.ArgumentParser) -> None:
    """--lanes/--simd/--pe: the folded engine's parallelism (docs/folded.md), for eatt rtl
    --level folded and eatt hls (the folded hls4ml layer)."""
    p.add_argument(
        "--lanes",
        type=int,
        metavar="P",
        help="folded: keys scored per cycle (divides len_k; default up to 4)",
    )
    p.add_argument(
        "--simd",
        type=int,
        metavar="S",
        help="folded: features per cycle (divides d_head = dim / heads; default up to 4)",
    )
    p.add_argument(
        "--pe",
        type=int,
        metavar="N",
        help="folded E-ATT: V and O columns per cycle (divides simd; default simd): the "
        "multiply tile, beside the select tile that computes Q and K at the same time",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="eatt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("energy", help="analytic energy of attention variants (paper, App. A)")
    p.add_argument("--length", type=int, required=True, help="sequence length l")
    p.add_argument("--dim", type=int, required=True, help="model dimension d")
    p.add_argument("--table", default="paper", help="per-operation energy table")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=cmd_energy)

    p = sub.add_parser("golden", help="check the fixed-point golden model against the float model")
    _add_core_args(p)
    p.add_argument("--vectors", type=int, default=1000, help="random vectors (plus edge vectors)")
    p.set_defaults(func=cmd_golden)

    p = sub.add_parser("export", help="write the core as a QONNX file (qonnx executes it)")
    _add_core_args(p)
    p.add_argument(
        "checkpoint",
        nargs="?",
        metavar="CHECKPOINT",
        help="a quantized core (.pt), or a model of `eatt train` with --layer",
    )
    p.add_argument("-o", "--output", metavar="FILE.onnx", help="output file")
    p.add_argument("--check", type=int, metavar="N", help="execute with qonnx on N vectors")
    p.add_argument(
        "--layer",
        metavar="NAME",
        help="the model's attention layer to export (encoder.0.self, decoder.1.cross, ...)",
    )
    p.add_argument(
        "--list-layers", action="store_true", help="print the model's attention layers and stop"
    )
    p.add_argument(
        "--inputs", metavar="ACTS.npz", help="--check on these captured vectors (eatt capture)"
    )
    p.add_argument("--step", action="store_true", help=STEP_HELP)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("capture", help="record a trained layer's real inputs while it decodes")
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="best.pt / last.pt of `eatt train`")
    p.add_argument("--layer", required=True, metavar="NAME", help="the quantized layer")
    p.add_argument("--split", choices=["test", "dev", "train"], default="test")
    p.add_argument("--max", type=int, default=1000, metavar="N", help="at most N vectors")
    p.add_argument("--beam", type=int, default=1, help="beam size of the decoding (1 = greedy)")
    p.add_argument("--step", action="store_true", help=STEP_HELP)
    p.add_argument("-o", "--output", required=True, metavar="ACTS.npz", help="output file")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=cmd_capture)

    p = sub.add_parser("hls", help="hls4ml project of the core, C simulation vs golden")
    _add_core_args(p)
    p.add_argument("onnx", nargs="?", metavar="FILE.onnx", help="a core written by `eatt export`")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="project folder")
    p.add_argument("--backend", choices=["vitis", "vivado"], default="vitis")
    p.add_argument("--part", help="FPGA part (default: hls4ml's)")
    p.add_argument("--clock", type=float, metavar="NS", help="clock period in ns")
    p.add_argument("--vectors", type=int, default=1000, help="C simulation vectors (+ edge)")
    p.add_argument("--synth", action="store_true", help="run vendor C synthesis (vitis/vivado)")
    p.add_argument(
        "--inputs", metavar="ACTS.npz", help="check on these captured vectors (eatt capture)"
    )
    p.add_argument(
        "--reuse-factor",
        type=int,
        metavar="R",
        help="fold the layer to at most R cycles per call (hls4ml's ReuseFactor; default: the "
        "config's reuse_factor, 1 = unrolled; docs/hls.md)",
    )
    _add_folding_args(p)
    p.add_argument(
        "--io-type",
        choices=["io_parallel", "io_stream"],
        default="io_parallel",
        help="hls4ml's io type: io_stream (the folded layer) takes and gives one token a beat "
        "on AXI4-Stream ports (default io_parallel)",
    )
    p.set_defaults(func=cmd_hls)

    p = sub.add_parser("rtl", help="generate the core's RTL (SystemVerilog) and metadata.json")
    _add_core_args(p)
    p.add_argument(
        "onnx", nargs="?", metavar="FILE.onnx", help="a core written by `eatt export` (a layer)"
    )
    p.add_argument(
        "--level",
        choices=["alignment", "attention", "folded"],
        default=None,
        help="alignment: scores only; attention: the whole core; folded: the whole core, "
        "folded (docs/folded.md) (default: folded where the config's reuse_factor > 1, else "
        "alignment; kind window: ignored)",
    )
    _add_folding_args(p)
    p.add_argument(
        "--adder-levels",
        type=int,
        default=0,
        metavar="N",
        help="pipeline the adder trees: at most N adder levels between registers (0: fixed)",
    )
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder")
    p.set_defaults(func=cmd_rtl)

    p = sub.add_parser("sim", help="simulate an RTL folder (Verilator, Icarus) vs golden")
    p.add_argument("dir", metavar="DIR", help="a folder written by `eatt rtl`")
    p.add_argument("--vectors", type=int, default=1000, help="vectors (edge vectors first)")
    p.add_argument("--seed", type=int, default=1, help="seed of the random vectors")
    p.add_argument(
        "--simulator",
        choices=sorted(SIMULATORS),
        default="verilator",
        help="verilator (2-state, fast) or icarus (4-state: unknown values show as X)",
    )
    p.add_argument(
        "--inputs", metavar="ACTS.npz", help="simulate these captured vectors (eatt capture)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=cmd_sim)

    p = sub.add_parser("resources", help="Yosys synth_xilinx (xc7) cell counts of an RTL folder")
    p.add_argument("dir", metavar="DIR", help="a folder written by `eatt rtl`")
    p.add_argument("--no-nodsp", action="store_true", help="skip the all-fabric (-nodsp) run")
    p.add_argument(
        "--no-abc-verify",
        action="store_true",
        help="skip ABC's check of the mapped netlist (same cells; faster on big cores)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=cmd_resources)

    p = sub.add_parser(
        "pnr", help="Yosys synth_ecp5 + nextpnr-ecp5: utilization and Fmax of an RTL folder"
    )
    p.add_argument("dir", metavar="DIR", help="a folder written by `eatt rtl`")
    p.add_argument("--device", default="ecp5-85k", help="ecp5-12k/25k/45k/85k (ecp5-85k)")
    p.add_argument("--clock", type=float, default=10.0, metavar="NS", help="clock period (10)")
    p.add_argument("--timeout", type=float, metavar="S", help="seconds for both tools together")
    p.add_argument("--nodsp", action="store_true", help="every product in fabric (no MULT18X18D)")
    p.add_argument(
        "--wrapper",
        action="store_true",
        help="the core behind a serial-load wrapper, on pins, and a bitstream (pnr/design.bit)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=cmd_pnr)

    p = sub.add_parser(
        "power",
        help="energy per call from the synthesized netlist's switching activity (ASIC cells)",
    )
    p.add_argument("dir", metavar="DIR", help="a core folder written by `eatt rtl`")
    p.add_argument("--vectors", type=int, default=100, help="input vectors simulated (100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random vectors")
    p.add_argument(
        "--inputs", metavar="ACTS.npz", help="simulate these captured vectors (eatt capture)"
    )
    p.add_argument("--target", choices=("asic",), default="asic", help="asic (standard cells)")
    p.add_argument(
        "--liberty",
        default=DEFAULT_LIBERTY,
        metavar="LIB",
        help=f"{' or '.join(LIBERTIES)} (Debian's OSU cells) or a .lib file ({DEFAULT_LIBERTY})",
    )
    p.add_argument("--clock", type=float, default=10.0, metavar="NS", help="clock period (10)")
    p.add_argument("--timeout", type=float, metavar="S", help="seconds for each tool")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=cmd_power)

    p = sub.add_parser(
        "sweep", help="many design points on Ray (local or a cluster): records, report, Pareto"
    )
    p.add_argument("sweep", metavar="SWEEP.yaml", help="the sweep file (docs/sweep.md)")
    p.add_argument("-o", "--output", metavar="DIR", help="sweep folder (runs/sweeps/<file>)")
    p.add_argument(
        "--address",
        metavar="ADDR",
        help="a Ray cluster: auto (the one on this machine), HOST:PORT or ray://HOST:PORT "
        "(default: a new local Ray instance)",
    )
    p.add_argument(
        "--resume", action="store_true", help="keep finished points, run failed and missing ones"
    )
    p.add_argument(
        "--max-parallel", type=int, metavar="N", help="at most N points at once (Ray's limit)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("train", help="train a seq2seq model from a run config (model/train/data)")
    p.add_argument("config", metavar="CONFIG", help="YAML/JSON run config")
    p.add_argument("-o", "--output", metavar="DIR", help="checkpoints folder (runs/<config>)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="BLEU, binarization ratios and energy of a checkpoint")
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="best.pt / last.pt of `eatt train`")
    p.add_argument("--beam", type=int, default=4, help="beam size (1 = greedy)")
    p.add_argument("--alpha", type=float, default=0.6, help="length penalty exponent")
    p.add_argument("--split", choices=["test", "dev", "train"], default="test")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    p.add_argument(
        "--hardware",
        action="store_true",
        help="quantized models: also decode with the exported cores' shape (max_len, masks) "
        "and with the QAT surrogate; report each BLEU and the hypotheses that differ",
    )
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("experiment", help="the paper's experiments on the bundled task")
    p.add_argument(
        "name",
        metavar="NAME",
        help="eatt-vs-vanilla, ablation, hybrids, energy-vs-quality, window, window-lstm, "
        "flexible-train-window, window-eatt, window-unit, flexible-unit, l0drop, "
        "l0drop-redundant, l0drop-scratch, l0drop-unit, qat",
    )
    p.add_argument("--quick", action="store_true", help="tiny version (seconds)")
    p.add_argument("-o", "--output", default="results", metavar="DIR", help="results folder")
    p.add_argument("--workers", type=int, default=1, help="runs trained at once (Ray tasks)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        metavar="N",
        help="training updates per run (default: the plan's; results still go to -o DIR/NAME)",
    )
    p.add_argument(
        "--seeds",
        type=_int_list,
        default=None,
        metavar="S,S,..",
        help="seeds (default: the plan's)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="staged experiments: reuse the runs in -o DIR/NAME/runs that finished with the "
        "same model, training settings and data",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=cmd_experiment)

    p = sub.add_parser("flow", help="the main job: a core and its peer through every stage")
    _add_core_args(p)
    p.add_argument(
        "checkpoint",
        nargs="?",
        metavar="SOURCE",
        help="a model of `eatt train` (with --layer NAME: that layer through every stage), a "
        "core checkpoint (.pt) or a core's FILE.onnx (eatt export)",
    )
    p.add_argument(
        "--inputs", metavar="ACTS.npz", help="check the FILE.onnx core on these captured vectors"
    )
    p.add_argument("--layer", metavar="NAME", help="the model's quantized attention layer")
    p.add_argument("--step", action="store_true", help=STEP_HELP)
    p.add_argument("--split", choices=["test", "dev", "train"], default="test",
                   help="the split a layer's flow decodes (capture and BLEU)")  # fmt: skip
    p.add_argument("--beam", type=int, default=1, help="a layer's flow: beam size (1 = greedy)")
    p.add_argument(
        "--vectors",
        type=int,
        default=1000,
        help="random vectors per check (a layer's flow: at most this many captured vectors)",
    )
    p.add_argument("-o", "--output", default="runs/flow", metavar="DIR", help="artifacts folder")
    p.add_argument(
        "--reuse-factor",
        type=int,
        metavar="R",
        help="fold both cores to at most R cycles per call: the folded hls4ml layer and RTL "
        "engine (default: the config's reuse_factor; docs/folded.md)",
    )
    p.add_argument("--no-resources", action="store_true", help="skip Yosys (slow on big cores)")
    p.add_argument("--no-window", action="store_true", help="skip the windowed attention unit")
    p.add_argument("--no-peer", action="store_true", help="a layer's flow: skip the peer core")
    p.set_defaults(func=cmd_flow)
    return parser


def _one_line_os_error(err: OSError) -> str:
    """'PATH: reason' for a file-system fault (read-only, no space, a file where a folder goes)."""
    what = err.strerror or str(err) or type(err).__name__
    name = err.filename if err.filename is not None else None
    if err.filename2 is not None:
        name = f"{err.filename} -> {err.filename2}"
    return f"{name}: {what}" if name else what


def _terminate(signum, frame) -> None:
    """SIGTERM / SIGHUP end a command like Ctrl-C: cleanups run, temporary files go."""
    raise _Terminated(signum)


class _Terminated(KeyboardInterrupt):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code: 0 ok, 1 a check failed, 2 bad
    input (one line naming the flag or file), 3 a missing tool, 130 interrupted (143 SIGTERM),
    141 the reader of stdout went away (`eatt energy | head -3`)."""
    held = (signal.SIGTERM, signal.SIGHUP)  # end like Ctrl-C: cleanups run, temporaries go
    previous = (
        {sig: signal.signal(sig, _terminate) for sig in held}
        if threading.current_thread() is threading.main_thread()
        else {}
    )
    try:
        args = build_parser().parse_args(argv)
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except CommandError as err:
        print(f"eatt: error: {err}", file=sys.stderr)
        return err.code
    except ToolMissing as err:
        print(f"eatt: error: {first_line(err)}", file=sys.stderr)
        return EXIT_TOOL_MISSING
    except (ConfigError, ValueError) as err:
        print(f"eatt: error: {first_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # the reader closed stdout: say nothing more there, exit like a tool killed by SIGPIPE
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as err:  # read-only folder, a file where a folder goes, disk full, ...
        print(f"eatt: error: {_one_line_os_error(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print("eatt: error: out of memory (a smaller core or fewer --vectors)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except _Terminated as err:
        print("eatt: terminated", file=sys.stderr)
        return 128 + err.signum
    except KeyboardInterrupt:
        print("eatt: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a bug: still one line, and the traceback on request
        if os.environ.get("EATT_DEBUG"):
            raise
        print(
            f"eatt: internal error: {type(err).__name__}: {first_line(err)} "
            "(please report it; EATT_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
