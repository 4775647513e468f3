"""`eatt flow`: the main job. Its SOURCE picks one of two flows (:func:`is_trained_model`):

- a core (the embedded default, --config, a core checkpoint .pt or a core's FILE.onnx) and its
  peer through every stage: golden, QONNX, hls4ml, RTL simulation, resources (eatt/flow.py);
- ``eatt flow MODEL.pt --layer NAME``: a trained model's layer through every stage on its
  captured vectors, BLEU of the model against the hardware (eatt/flow_layer.py).
"""

from __future__ import annotations

from eatt.cli.common import (
    INT32_MAX,
    MAX_BEAM,
    SPLITS,
    STEP_HELP,
    BoundedInt,
    add_core_arguments,
    check_checkpoint_path,
    emit,
    not_a_model,
    random_core,
)
from eatt.cli.exits import EXIT_CHECK_FAILED, EXIT_OK, EXIT_TOOL_MISSING, CommandError
from eatt.config import check_rtl_size, check_vectors
from eatt.quant.vectors import load_capture

HELP = "the main job: a core and its peer through every stage"


def add_arguments(p) -> None:
    add_core_arguments(p)
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
    p.add_argument("--split", choices=SPLITS, default="test",
                   help="the split a layer's flow decodes (capture and BLEU)")  # fmt: skip
    p.add_argument(
        "--beam",
        action=BoundedInt,
        high=MAX_BEAM,
        default=1,
        help="a layer's flow: beam size (1 = greedy)",
    )
    p.add_argument(
        "--vectors",
        action=BoundedInt,
        default=1000,
        help="random vectors per check (a layer's flow: at most this many captured vectors)",
    )
    p.add_argument("-o", "--output", default="runs/flow", metavar="DIR", help="artifacts folder")
    p.add_argument(
        "--reuse-factor",
        action=BoundedInt,
        high=INT32_MAX,
        metavar="R",
        help="fold both cores to at most R cycles per call: the folded hls4ml layer and RTL "
        "engine (default: the config's reuse_factor; docs/folded.md)",
    )
    p.add_argument(
        "--no-resources",
        action="store_true",
        help="skip Yosys' steps: resources and the measured energy (slow on big cores)",
    )
    p.add_argument("--no-window", action="store_true", help="skip the windowed attention unit")
    p.add_argument("--no-peer", action="store_true", help="a layer's flow: skip the peer core")
    for flag, what in (("--from-step", "start at"), ("--to-step", "stop after")):
        p.add_argument(
            flag,
            metavar="STEP",
            help=f"{what} this build step (a core's flow: golden, export, hls, rtl, sim, "
            "resources, power; a layer's: capture, golden, export, hls, rtl, sim, sim_edges, "
            "resources, power, bleu; eatt/steps.py); a later start reads the earlier steps' "
            "results from the folder",
        )


def run(args) -> int:
    if is_trained_model(args.checkpoint):
        return _layer_flow(args)
    return _core_flow(args)


def is_trained_model(source: str | None) -> bool:
    """Whether SOURCE is a model of `eatt train` (its layer's flow), rather than a core: none
    given (the default core or --config), a core's FILE.onnx or a core checkpoint."""
    if source is None or source.lower().endswith(".onnx"):
        return False
    check_checkpoint_path(source)
    from eatt.model import layers  # torch

    return layers.is_model_checkpoint(source)


def _core_flow(args) -> int:
    """`eatt flow [CORE]`: a core and its peer through every stage."""
    from eatt.builder import select  # torch
    from eatt.flow import (  # torch
        CORE_STEPS,
        flow_steps,
        folded_config,
        format_flow,
        run_flow,
    )

    for flag, given in (("--layer", args.layer), ("--step", args.step)):
        if given and args.checkpoint is not None:
            raise CommandError(f"{flag}: {not_a_model(args.checkpoint)}")
        if given:
            raise CommandError(f"{flag}: give the model's CHECKPOINT (best.pt of `eatt train`)")
    if args.checkpoint is not None:
        if args.config:
            raise CommandError(f"give either --config or {args.checkpoint}, not both")
        cfg, weights = _core_file(args.checkpoint)
    else:
        cfg, weights = random_core(args)
    if args.inputs:
        if args.checkpoint is None:
            raise CommandError("--inputs: give the layer's FILE.onnx (eatt export --layer)")
        load_capture(args.inputs, cfg)  # a capture of this core, before any work
    reuse = args.reuse_factor or getattr(cfg, "reuse_factor", 1)
    if reuse > 1:  # the folded engine and layer, both kinds (one line if they cannot fold)
        cfg = folded_config(cfg, reuse)
    else:
        check_rtl_size(cfg)
    check_vectors(cfg, args.vectors)
    span = (args.from_step, args.to_step)
    select(flow_steps(CORE_STEPS, not args.no_resources), *span)  # a step of this flow
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
            span=span,
        )
    except BuildError as err:  # g++ failed on the HLS project: its output is above
        raise CommandError(str(err), EXIT_CHECK_FAILED) from None
    emit(result, args.json, format_flow)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED


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


def _layer_flow(args) -> int:
    """`eatt flow CHECKPOINT --layer NAME`: a trained layer through every stage."""
    if args.config:
        raise CommandError("give either --config or a CHECKPOINT, not both")
    if args.inputs:
        raise CommandError("--inputs: a layer's flow captures its own vectors; leave it out")
    if args.no_window:
        raise CommandError("--no-window: a layer's flow builds no windowed unit; leave it out")
    from eatt.flow_layer import format_layer_flow, run_layer_flow  # torch

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
            reuse_factor=args.reuse_factor or 1,
            span=(args.from_step, args.to_step),
        )
    except BuildError as err:
        raise CommandError(str(err), EXIT_CHECK_FAILED) from None
    emit(result, args.json, format_layer_flow)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED
