"""`eatt golden`: the fixed-point golden model against the float model, on random vectors."""

from __future__ import annotations

from eatt.cli.common import BoundedInt, add_core_arguments, emit, random_core
from eatt.cli.exits import EXIT_CHECK_FAILED, EXIT_OK
from eatt.config import check_vectors
from eatt.progress import step

HELP = "check the fixed-point golden model against the float model"


def add_arguments(p) -> None:
    add_core_arguments(p)
    p.add_argument(
        "--vectors", action=BoundedInt, default=1000, help="random vectors (plus edge vectors)"
    )


def run(args) -> int:
    from eatt.quant.check import format_golden_check, golden_check  # torch: the float twin

    cfg, weights = random_core(args)
    check_vectors(cfg, args.vectors)
    with step(f"golden model check of the {cfg.kind} core ({args.vectors} vectors)"):
        result = golden_check(cfg, weights, vectors=args.vectors, seed=args.seed)
    emit(result, args.json, format_golden_check)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED
