"""`eatt sweep`: many design points of a sweep file on Ray (local or a cluster): a record per
point, the report and the Pareto front."""

from __future__ import annotations

from pathlib import Path

from eatt.cli.common import BoundedInt, add_json, emit
from eatt.cli.exits import EXIT_CHECK_FAILED, EXIT_OK, CommandError

HELP = "many design points on Ray (local or a cluster): records, report, Pareto"


def add_arguments(p) -> None:
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
        "--max-parallel",
        action=BoundedInt,
        metavar="N",
        help="at most N points at once (Ray's limit)",
    )
    add_json(p)


def run(args) -> int:
    from eatt.sweep import format_sweep, load_sweep, run_sweep  # torch (the golden stage)

    if not Path(args.sweep).is_file():
        raise CommandError(f"{args.sweep}: no such sweep file")
    sweep = load_sweep(args.sweep)
    output = args.output or str(Path("runs") / "sweeps" / Path(args.sweep).stem)
    address = None if args.address in (None, "local") else args.address
    result = run_sweep(
        sweep, output, address=address, resume=args.resume, max_parallel=args.max_parallel
    )
    emit(result, args.json, format_sweep)
    return EXIT_OK if not result["failed"] else EXIT_CHECK_FAILED
