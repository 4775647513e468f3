"""`eatt export`: the core, or a trained model's layer, as a QONNX file (qonnx executes it)."""

from __future__ import annotations

from pathlib import Path

from eatt.cli.common import (
    STEP_HELP,
    BoundedInt,
    add_core_arguments,
    check_checkpoint_path,
    emit,
    not_a_model,
    random_core,
)
from eatt.cli.exits import EXIT_CHECK_FAILED, EXIT_OK, EXIT_TOOL_MISSING, CommandError
from eatt.config import WindowConfig, check_vectors
from eatt.outdir import check_output_file
from eatt.progress import step
from eatt.quant.vectors import load_capture, load_window_capture

HELP = "write the core as a QONNX file (qonnx executes it)"


def add_arguments(p) -> None:
    add_core_arguments(p)
    p.add_argument(
        "checkpoint",
        nargs="?",
        metavar="CHECKPOINT",
        help="a quantized core (.pt), or a model of `eatt train` with --layer",
    )
    p.add_argument("-o", "--output", metavar="FILE.onnx", help="output file")
    p.add_argument(
        "--check", action=BoundedInt, metavar="N", help="execute with qonnx on N vectors"
    )
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


def run(args) -> int:
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
    if args.checkpoint:
        cfg, weights, source = _checkpoint_core(args)
    else:
        (cfg, weights), source = random_core(args), None
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

    emit(result, args.json, text)
    return EXIT_OK if ok else EXIT_CHECK_FAILED


def _checkpoint_core(args) -> tuple:
    """(config, weights, source) of CHECKPOINT: a trained model's --layer, or a quantized core
    (source None)."""
    if args.config:
        raise CommandError("give either --config or a CHECKPOINT, not both")
    try:
        from eatt.model import layers  # torch
        from eatt.quant.modules import checkpoint_core  # Brevitas, torch
    except ImportError as err:
        raise CommandError(
            f"checkpoints need brevitas ({err}); nothing was written", EXIT_TOOL_MISSING
        ) from None
    check_checkpoint_path(args.checkpoint)
    if not layers.is_model_checkpoint(args.checkpoint):
        if args.layer:
            raise CommandError(f"--layer: {not_a_model(args.checkpoint)}")
        return (*checkpoint_core(args.checkpoint), None)
    if not args.layer:
        raise CommandError(
            f"{args.checkpoint}: a model of `eatt train`: give --layer NAME "
            "(--list-layers prints them)"
        )
    cfg, weights = layers.checkpoint_layer_core(args.checkpoint, args.layer, args.step)
    source = {"checkpoint": str(Path(args.checkpoint).resolve()), "layer": args.layer}
    if args.step:
        source["step"] = True
    return cfg, weights, source


def _list_layers(args) -> int:
    """`eatt export CHECKPOINT --list-layers`: a trained model's attention layers."""
    from eatt.model import layers  # torch

    check_checkpoint_path(args.checkpoint)
    if not layers.is_model_checkpoint(args.checkpoint):
        raise CommandError(not_a_model(args.checkpoint))
    found = [layer.to_dict() for layer in layers.checkpoint_layers(args.checkpoint)]
    result = {"checkpoint": args.checkpoint, "layers": found}

    def text(r: dict) -> str:
        return "\n".join(
            f"{x['name']:<20} {x['kind']:<14} "
            + ("hardware core: eatt export CHECKPOINT --layer " + x["name"] if x["hardware"]
               else "float (no hardware core)")
            for x in r["layers"]
        )  # fmt: skip

    emit(result, args.json, text)
    return EXIT_OK
