"""The golden model's self-check: widths hold on real data, and the float model agrees.

Run by `eatt golden` and `eatt flow`: golden_check dispatches to cfg's unit's check through the
registry (eatt/units.py; quant/golden_checks.py: core_golden_check for the core's kinds,
window_golden_check for kind window); format_golden_check prints a report of either.
"""

from __future__ import annotations

from eatt.config import CoreConfig
from eatt.quant.golden import CoreWeights
from eatt.quant.golden_checks import width_violations  # noqa: F401 - re-exported: its old home
from eatt.units import unit_for


def golden_check(cfg: CoreConfig, weights: CoreWeights, vectors: int = 1000, seed: int = 1) -> dict:
    """The golden model's self-check of cfg's unit (eatt.units: core_golden_check for kinds
    eatt and vanilla, window_golden_check for window). The report's ``summary`` lines say
    what is particular to the unit (formats, window); format_golden_check prints them."""
    return unit_for(cfg).load("golden_check")(cfg, weights, vectors, seed)


def format_golden_check(r: dict) -> str:
    c, fl = r["config"], r["float"]
    lines = [
        f"golden model: kind={c['kind']} len_q={c['len_q']} len_k={c['len_k']} dim={c['dim']} "
        f"heads={c['heads']} tau={c['tau']}",
        *r["summary"],
        f"  vectors: {r['vectors']} random + {r['edge_vectors']} edge",
        "  widths: "
        + (
            "all intermediates inside their declared ranges"
            if not r["width_violations"]
            else "; ".join(r["width_violations"])
        ),
        f"  vs float: max |error| {fl['max_abs_error']:.6g} <= bound {fl['bound']:.6g}"
        + r.get("float_note", "")
        + ": "
        + ("yes" if fl["within_bound"] else f"NO (worst vector {fl['worst_vector']})"),
        "  result: " + ("PASS" if r["ok"] else "FAIL"),
    ]
    return "\n".join(lines)
