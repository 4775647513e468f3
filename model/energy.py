"""Analytic energy model of E-ATT (Wan et al., "Attention Mechanism with Energy-Friendly
Operations", Findings of ACL 2022): Table 1, Table 2, Table 7 and Appendix A.

Energy is counted the paper's way: number of additions and multiplications times a per-op
energy (pJ), softmax/activations omitted (Appendix A, after Song et al. 2021). E-ATT's
binarized *selections* are counted too, as information; the paper gives them energy 0, and
every table here keeps ``sel = 0`` so ``energy_pj`` equals the paper's formula.

Reproduction at l = 22, d = 512 (IWSLT'15 En-Vi), exact rationals of these formulas:

* Table 7 (E-ATT, % of vanilla): alignment ASIC 0.4489 / FPGA 0.0478, attention 34.0947 /
  33.8291, block 83.1722 / 83.1044 (FPGA block is exactly 15125/182 = 83.10439..., no tie).
* Table 2 attention, ASIC: vanilla 100, dense 67.5949, randinit 33.7975, eatt 34.0947.

Known discrepancies *inside the paper*, left as they are (formulas are not fudged):

* Table 2/4 print E-ATT attention 34.10 while Table 7 prints 34.09 for the same quantity
  (34.0947 -> 34.09 to two decimals, 34.1 to one).
* Table 2 alignment prints dense 51.10 and E-ATT 0.44; the formulas give 51.05 and 0.45
  (0.45 agrees with Table 7). 51.10 is what dense gives at l = 23, not l = 22.
* Appendix A prints E-ATT alignment adds as "2ld + l^d"; it means 2ld + l^2 d.
* The paper's E-ATT counts omit the additions that sum the selected weight rows (Eq. 8),
  up to l*d*(d-1) per projection; ``core_counts`` counts them (that is the hardware truth).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from eatt.mechanisms import PEER, core_kinds, mechanism_of

METHODS = ("vanilla", "dense", "randinit", "eatt")
LEVELS = ("alignment", "attention", "block")
CORE_KINDS = ("eatt", "vanilla")
CORE_LEVELS = ("alignment", "attention")  # the hardware core is one attention layer, no FFN

# Per-operation energy in pJ: table name -> target -> {"add", "mul", "sel"}.
TABLES: dict[str, dict[str, dict[str, float]]] = {
    # The paper's Table 1, FP32, taken from You et al. 2020 (ShiftAddNet): ASIC = TPU-like,
    # FPGA = Microsoft cloud FPGA.
    "paper": {
        "asic": {"add": 0.9, "mul": 3.7, "sel": 0.0},
        "fpga": {"add": 0.4, "mul": 18.8, "sel": 0.0},
    },
    # Horowitz, "Computing's energy problem", ISSCC 2014, 45 nm, by data type. ASIC only:
    # the source has no FPGA figures. int add/mul are fixed-point cores (e.g. quantized E-ATT).
    "horowitz-int8": {"asic": {"add": 0.03, "mul": 0.2, "sel": 0.0}},
    "horowitz-int32": {"asic": {"add": 0.1, "mul": 3.1, "sel": 0.0}},
    "horowitz-fp16": {"asic": {"add": 0.4, "mul": 1.1, "sel": 0.0}},
    "horowitz-fp32": {"asic": {"add": 0.9, "mul": 3.7, "sel": 0.0}},
}
DEFAULT_TABLE = "paper"


@dataclass(frozen=True)
class OpCounts:
    """Numbers of additions, multiplications and (E-ATT) selections; Python ints, no overflow."""

    adds: int
    muls: int
    selections: int = 0

    def __add__(self, other: OpCounts) -> OpCounts:
        if not isinstance(other, OpCounts):
            return NotImplemented
        return OpCounts(
            self.adds + other.adds, self.muls + other.muls, self.selections + other.selections
        )

    def __radd__(self, other: object) -> OpCounts:
        # lets sum() start from 0
        if other == 0:
            return self
        return NotImplemented


def _choice(name: str, value: object, allowed: tuple[str, ...] | list[str]) -> str:
    if value not in allowed:
        raise ValueError(f"energy: unknown {name} {value!r} (choose from: {', '.join(allowed)})")
    return value  # type: ignore[return-value]


def _positive_int(name: str, value: object) -> int:
    # bool is an int subclass, but length=True is surely a mistake
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"energy: {name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"energy: {name} must be >= 1, got {value!r}")
    return int(value)


def _table(table: str) -> dict[str, dict[str, float]]:
    return TABLES[_choice("table", table, list(TABLES))]


def paper_counts(method: str, level: str, length: int, dim: int) -> OpCounts:
    """Operation counts of Appendix A for self-attention with l1 = l2 = ``length``, d = ``dim``.

    alignment = Q/K projections + scores; attention = + V projection + weighted sum of values;
    block = attention + output projection and FFN (d -> 4d -> d) = + 9ld^2 (mul and add).
    Each mechanism holds its own formulas (``Mechanism.paper_ops``).
    """
    _choice("method", method, METHODS)
    _choice("level", level, LEVELS)
    l, d = _positive_int("length", length), _positive_int("dim", dim)
    return OpCounts(*mechanism_of(method).paper_ops(l, d)[level])


def energy_pj(counts: OpCounts, table: str = DEFAULT_TABLE, target: str = "asic") -> float:
    """Energy in pJ: adds * E_add + muls * E_mul + selections * E_sel of ``table[target]``."""
    targets = _table(table)
    cost = targets[_choice("target", target, tuple(targets))]
    if not isinstance(counts, OpCounts):
        raise ValueError(f"energy: counts must be OpCounts, got {type(counts).__name__}")
    return (
        counts.adds * cost["add"]
        + counts.muls * cost["mul"]
        + counts.selections * cost.get("sel", 0.0)
    )


def energy_ratios(length: int, dim: int, table: str = DEFAULT_TABLE) -> dict:
    """{method: {level: {target: percent of vanilla at the same level}}}, not rounded."""
    targets = _table(table)
    out: dict = {}
    for method in METHODS:
        out[method] = {}
        for level in LEVELS:
            counts = paper_counts(method, level, length, dim)
            base = paper_counts(PEER.kind, level, length, dim)
            out[method][level] = {
                t: 100.0 * energy_pj(counts, table, t) / energy_pj(base, table, t) for t in targets
            }
    return out


def energy_report(length: int, dim: int, table: str = DEFAULT_TABLE) -> dict:
    """JSON-ready report: ratios, counts and absolute energies for every method and level."""
    targets = _table(table)
    counts = {m: {lv: paper_counts(m, lv, length, dim) for lv in LEVELS} for m in METHODS}
    return {
        "length": int(length),
        "dim": int(dim),
        "table": table,
        "ratios": energy_ratios(length, dim, table),
        "counts": {
            m: {
                lv: {"adds": c.adds, "muls": c.muls, "selections": c.selections}
                for lv, c in by_level.items()
            }
            for m, by_level in counts.items()
        },
        "energy_pj": {
            m: {lv: {t: energy_pj(c, table, t) for t in targets} for lv, c in by_level.items()}
            for m, by_level in counts.items()
        },
    }


def format_energy_table(report: dict) -> str:
    """Plain-text table of an ``energy_report``: one row per method x level."""
    targets = list(next(iter(next(iter(report["ratios"].values())).values())))
    header = ["method", "level", "#add", "#mul", "#sel"]
    header += [f"E_{t} (pJ)" for t in targets] + [f"%{t}" for t in targets]
    rows = [header]
    for method, by_level in report["counts"].items():
        for level, c in by_level.items():
            row = [method, level, str(c["adds"]), str(c["muls"]), str(c["selections"])]
            row += [f"{report['energy_pj'][method][level][t]:.4e}" for t in targets]
            row += [f"{report['ratios'][method][level][t]:.2f}" for t in targets]
            rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    title = f"E-ATT energy model: l={report['length']} d={report['dim']} table={report['table']}"
    lines = [title]
    for r in rows:
        # text columns left-aligned, numbers right-aligned
        cells = [
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def core_counts(
    kind: str,
    len_q: int,
    len_k: int,
    dim: int,
    heads: int,
    level: str,
    density: float = 1.0,
) -> OpCounts:
    """Honest operation counts of the hardware core: one multi-head attention layer with
    ``len_q`` queries, ``len_k`` keys, model size ``dim``, ``heads`` heads, W_Q/W_K/W_V/W_O
    all dim x dim. ``kind`` is a core kind (eatt.mechanisms): "eatt" (binarized selection +
    L1), "vanilla" (dot scores), "dense" or "randinit" (the Synthesizer's; each mechanism's
    ``alignment_ops`` says its counts).

    Conventions (one add per multiply in a multiply-accumulate, as the paper does):

    * dot alignment: Q/K projections (len_q+len_k)*dim^2 mul+add; scores len_q*len_k*dim
      mul+add (summed over heads: heads * d_h = dim, so heads do not change totals).
    * eatt alignment: binarization f(x) = [x > tau] is one comparison per input element,
      counted as an add: (len_q+len_k)*dim. Each input row selects rows of a dim x dim weight:
      (len_q+len_k)*dim^2 selections (the hardware gates every weight). Summing the k selected
      rows (Eq. 8) costs (k-1)*dim adds per input row, k = round(density*dim) the expected
      number of ones; density = 1 is the worst case, (len_q+len_k)*dim*(dim-1). L1 scores:
      len_q*len_k*dim subtractions + len_q*len_k*dim abs-and-accumulate adds. No multiplies.
    * dense alignment: W_1 len_q*dim^2 and W_2 len_q*dim*heads*len_k mul+add (the paper's
      l d^2 + l^2 d at one head); randinit: none (its scores are read, not computed).
    * attention (both kinds) adds V projection len_k*dim^2, value weighting len_q*len_k*dim and
      output projection len_q*dim^2, each mul+add. NB: unlike the paper's "attention" level
      this includes W_O (the paper puts W_O in its block level), because the core has W_O.
    """
    _choice("kind", kind, core_kinds())
    _choice("level", level, CORE_LEVELS)
    lq, lk = _positive_int("len_q", len_q), _positive_int("len_k", len_k)
    d, h = _positive_int("dim", dim), _positive_int("heads", heads)
    if d % h:
        raise ValueError(f"energy: heads must divide dim, got heads={h} dim={d}")
    if isinstance(density, bool) or not isinstance(density, numbers.Real):
        raise ValueError(f"energy: density must be a number in [0, 1], got {density!r}")
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"energy: density must be in [0, 1], got {density!r}")
    d_h = d // h
    pairs = h * lq * lk * d_h  # per-head score terms, summed over heads (= lq*lk*d)

    align = OpCounts(*mechanism_of(kind).alignment_ops(lq, lk, d, h, density))
    if level == "alignment":
        return align
    macs = lk * d * d + pairs + lq * d * d  # V projection, value weighting, output projection
    return align + OpCounts(macs, macs)
