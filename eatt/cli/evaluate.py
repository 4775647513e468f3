"""`eatt evaluate`: BLEU, binarization ratios and energy of a trained checkpoint."""

from __future__ import annotations

from eatt.cli.common import (
    MAX_BEAM,
    SPLITS,
    BoundedInt,
    FloatRange,
    add_json,
    check_checkpoint_path,
    emit,
    set_torch_threads,
)
from eatt.cli.exits import EXIT_OK, CommandError
from eatt.progress import step

HELP = "BLEU, binarization ratios and energy of a checkpoint"


def add_arguments(p) -> None:
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="best.pt / last.pt of `eatt train`")
    p.add_argument(
        "--beam", action=BoundedInt, high=MAX_BEAM, default=4, help="beam size (1 = greedy)"
    )
    p.add_argument(
        "--alpha",
        action=FloatRange,
        low=0,
        high=10,
        default=0.6,
        help="length penalty exponent",
    )
    p.add_argument("--split", choices=SPLITS, default="test")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    p.add_argument(
        "--hardware",
        action="store_true",
        help="quantized models: also decode with the exported cores' shape (max_len, masks) "
        "and with the QAT surrogate; report each BLEU and the hypotheses that differ",
    )
    p.add_argument("--threads", action=BoundedInt, default=1, help="torch intra-op threads")
    add_json(p)


def run(args) -> int:
    from eatt.model.evaluate import evaluate, format_evaluation  # torch
    from eatt.model.train import resolve_device  # torch

    set_torch_threads(args.threads)
    try:
        resolve_device(args.device)
    except ValueError as err:
        raise CommandError(f"--{err}") from None
    check_checkpoint_path(args.checkpoint)
    with step(f"decoding the {args.split} split with {args.checkpoint} (beam {args.beam})"):
        result = evaluate(
            args.checkpoint,
            beam=args.beam,
            alpha=args.alpha,
            split=args.split,
            device=args.device,
            hardware=args.hardware,
        )
    emit(result, args.json, format_evaluation)
    return EXIT_OK
