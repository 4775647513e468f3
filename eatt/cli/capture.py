"""`eatt capture`: record a trained layer's real inputs while the model decodes a split."""

from __future__ import annotations

from eatt.cli.common import (
    MAX_BEAM,
    SPLITS,
    STEP_HELP,
    BoundedInt,
    add_json,
    check_checkpoint_path,
    emit,
    not_a_model,
)
from eatt.cli.exits import EXIT_CHECK_FAILED, EXIT_OK, CommandError
from eatt.outdir import check_output_file
from eatt.progress import step
from eatt.quant.vectors import capture_meta

HELP = "record a trained layer's real inputs while it decodes"
#: the most vectors one capture takes
MAX_VECTORS = 10**7


def add_arguments(p) -> None:
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="best.pt / last.pt of `eatt train`")
    p.add_argument("--layer", required=True, metavar="NAME", help="the quantized layer")
    p.add_argument("--split", choices=SPLITS, default="test")
    p.add_argument(
        "--max",
        action=BoundedInt,
        high=MAX_VECTORS,
        default=1000,
        metavar="N",
        help="at most N vectors",
    )
    p.add_argument(
        "--beam",
        action=BoundedInt,
        high=MAX_BEAM,
        default=1,
        help="beam size of the decoding (1 = greedy)",
    )
    p.add_argument("--step", action="store_true", help=STEP_HELP)
    p.add_argument("-o", "--output", required=True, metavar="ACTS.npz", help="output file")
    add_json(p)


def run(args) -> int:
    from eatt.model import layers  # torch

    check_checkpoint_path(args.checkpoint)
    if not layers.is_model_checkpoint(args.checkpoint):
        raise CommandError(not_a_model(args.checkpoint))
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

    emit(result, args.json, text)
    return EXIT_OK if ok else EXIT_CHECK_FAILED
