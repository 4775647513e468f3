"""`eatt experiment`: the paper's experiments on the bundled task (a table and figures)."""

from __future__ import annotations

import argparse

from eatt.cli.common import BoundedInt, add_json, emit, set_torch_threads
from eatt.cli.exits import EXIT_OK

HELP = "the paper's experiments on the bundled task"


def add_arguments(p) -> None:
    p.add_argument(
        "name",
        metavar="NAME",
        help="eatt-vs-vanilla, ablation, hybrids, energy-vs-quality, window, window-lstm, "
        "flexible-train-window, window-eatt, window-unit, flexible-unit, l0drop, "
        "l0drop-redundant, l0drop-scratch, l0drop-unit, qat",
    )
    p.add_argument("--quick", action="store_true", help="tiny version (seconds)")
    p.add_argument(
        "--task",
        choices=("synthetic", "ding"),
        default="synthetic",
        help="the data: the bundled synthetic task, or the Ding dictionary's German-English "
        "sentences (Debian package trans-de-en; eatt-vs-vanilla, ablation, energy-vs-quality, "
        "qat, window, window-lstm, flexible-train-window, l0drop); results go to -o DIR/NAME-ding",
    )
    p.add_argument("-o", "--output", default="results", metavar="DIR", help="results folder")
    p.add_argument("--workers", type=int, default=1, help="runs trained at once (Ray tasks)")
    p.add_argument("--threads", action=BoundedInt, default=1, help="torch intra-op threads")
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        metavar="N",
        help="training updates per run (default: the plan's; results still go to -o DIR/NAME)",
    )
    p.add_argument(
        "--seeds",
        type=int_list,
        default=None,
        metavar="S,S,..",
        help="seeds (default: the plan's)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="reuse the runs in -o DIR/NAME/runs that finished with the same model, training "
        "settings and data (a seeded run's evaluation too): a long experiment across sessions",
    )
    p.add_argument(
        "--reuse",
        action="append",
        default=[],
        metavar="REPORT.json",
        help="take the runs of an earlier report (results.json of a seeded experiment, e.g. "
        "bench/results/experiments/eatt-vs-vanilla-ding.json) that equal runs of this one "
        "(model, training settings, data, beam, alpha, seed) instead of training them again; "
        "for window, window-lstm and flexible-train-window its units (each Luong kind, "
        "Flexible per score, each window-unit kind; partial.json of an unfinished run too); "
        "repeatable",
    )
    add_json(p)


def run(args) -> int:
    from eatt.model.experiments import format_table, run_experiment  # torch, matplotlib

    set_torch_threads(args.threads)
    report = run_experiment(
        args.name,
        quick=args.quick,
        out_dir=args.output,
        workers=args.workers,
        steps=args.steps,
        seeds=args.seeds,
        resume=args.resume,
        task=args.task,
        reuse=tuple(args.reuse),
    )
    emit(report, args.json, format_table)
    return EXIT_OK


def int_list(text: str) -> tuple[int, ...]:
    """``1,2,3`` -> (1, 2, 3)."""
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 1,2,3, got {text!r}"
        ) from None
