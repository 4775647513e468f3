"""`eatt energy`: the analytic energy of the attention variants (paper, App. A)."""

from __future__ import annotations

from eatt.cli.common import BoundedInt, add_json, emit
from eatt.cli.exits import EXIT_OK
from eatt.model import energy

HELP = "analytic energy of attention variants (paper, App. A)"
#: counts stay exact floats up to here; far past any real model
LARGEST = 10**9


def add_arguments(p) -> None:
    p.add_argument(
        "--length", action=BoundedInt, high=LARGEST, required=True, help="sequence length l"
    )
    p.add_argument(
        "--dim", action=BoundedInt, high=LARGEST, required=True, help="model dimension d"
    )
    p.add_argument("--table", default="paper", help="per-operation energy table")
    add_json(p)


def run(args) -> int:
    report = energy.energy_report(args.length, args.dim, table=args.table)
    emit(report, args.json, energy.format_energy_table)
    return EXIT_OK
