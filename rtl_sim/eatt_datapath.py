"""The E-ATT alignment datapath: binary-input Q/K projections and L1 scores.

EATT_DATAPATH (metadata.json "eatt_datapath") picks how they are built, every choice
bit-exact: distributed arithmetic or muxes for the projections, xor / abs / min terms for
the scores (the default scores are the l1_score_row.sv leaf), balanced or chain adder trees,
widths from the weights or from the config (docs/rtl.md, "E-ATT datapath").
"""

from __future__ import annotations

import numpy as np

from eatt.config import CoreConfig
from eatt.mechanisms import mechanism_of
from eatt.rtl_sim.sv_writer import _lit
from eatt.rtl_sim.widths import _bits

# -- E-ATT alignment datapath ----------------------------------------------------------------------
#: how the E-ATT Q/K projection and L1 scores are built (metadata.json "eatt_datapath").
#: Every choice is bit-exact; they differ in resources. Measured with Yosys synth_xilinx at
#: alignment 4x8 (docs/rtl.md, "E-ATT datapath"): the defaults are the cheapest in LUTs.
EATT_DATAPATH = {
    # "rom": distributed arithmetic: per column, the binarized inputs of up to rom_inputs rows
    #        (nonzero weights only) index a constant table of their subset sums (one LUT per
    #        output bit up to 6 inputs), and the chunk results are added;
    # "select": one constant-or-zero mux and one adder input per weight
    "projection": "rom",
    "rom_inputs": 6,
    # "xor": -|d| = (d ^ {n{d >= 0}}) + (d >= 0): the xor folds into the next adder's LUTs and
    #        the +1 is that adder's carry-in; "abs": subtract, conditional negate;
    #        "min": -sum|q - k| = 2 sum min(q, k) - sum q - sum k, row sums once per query/key
    "scores": "xor",
    # "balanced": adder trees of depth ceil(log2(terms)); "chain": one term after the other
    "tree": "balanced",
    # "weights": every width from the bounds of the actual constant weights (per column);
    # "config": the worst case over every weight in range (Formats), as the ports are sized
    "widths": "weights",
}
_DATAPATH_CHOICES = {
    "projection": ("rom", "select"),
    "scores": ("xor", "abs", "min"),
    "tree": ("balanced", "chain"),
    "widths": ("weights", "config"),
}


def _eatt_datapath(options: dict | None) -> dict:
    opts = {**EATT_DATAPATH, **(options or {})}
    for key, value in opts.items():
        if key == "rom_inputs":
            if not isinstance(value, int) or not 1 <= value <= 12:
                raise ValueError(f"eatt_datapath: rom_inputs must be 1..12, got {value!r}")
        elif key not in _DATAPATH_CHOICES:
            raise ValueError(f"eatt_datapath: unknown key {key!r}")
        elif value not in _DATAPATH_CHOICES[key]:
            raise ValueError(f"eatt_datapath: {key} must be one of {_DATAPATH_CHOICES[key]}")
    return opts


def _sum_tree(
    terms: list[tuple[str, int, int]], balanced: bool, width: int | None = None
) -> tuple[str, int, int]:
    """Sum of signed (expression, lo, hi) terms; every partial sum is sized to its own bound
    (or to a fixed width), so the adders are only as wide as the values they can carry."""
    if len(terms) == 1:
        return terms[0]
    if balanced:
        half = (len(terms) + 1) // 2
        left, right = _sum_tree(terms[:half], True, width), _sum_tree(terms[half:], True, width)
    else:
        left, right = _sum_tree(terms[:-1], False, width), terms[-1]
    lo, hi = left[1] + right[1], left[2] + right[2]
    n = width or _bits(lo, hi)
    # signed operands, each sign-extended to n bits: the add happens at n bits
    return f"{n}'({left[0]}) + {n}'({right[0]})", lo, hi


def _column_bounds(mat: np.ndarray, c: int) -> tuple[int, int]:
    col = mat[:, c].astype(np.int64)
    return int(col[col < 0].sum()), int(col[col > 0].sum())


def _eatt_projection(out, pipe, opts, src, dst, rows, mat, acc_bits, fname):
    """dst[i][c] = sum_d (src[i][d] ? mat[d][c] : 0) with binary src; returns the (lo, hi)
    bound of every column (from the weights, or the worst case with widths='config')."""
    dim = mat.shape[0]
    full = 2 ** (acc_bits - 1) - 1
    fixed = acc_bits if opts["widths"] == "config" else None  # the old full-width adders
    bounds = []
    for c in range(mat.shape[1]):
        lo, hi = _column_bounds(mat, c)
        if opts["widths"] == "config":
            lo, hi = -full, full
        bounds.append((lo, hi))
    if opts["projection"] == "select":
        out(f"    // one constant-or-zero mux and one adder input per nonzero weight ({fname})")
        for c in range(mat.shape[1]):
            lo, hi = bounds[c]
            for i in range(rows):
                terms = []
                for d in range(dim):
                    w = int(mat[d, c])
                    if w:
                        n = acc_bits if opts["widths"] == "config" else _bits(lo, hi)
                        terms.append(
                            (
                                f"({src}[{i}][{d}] ? {_lit(w, n)} : {_lit(0, n)})",
                                min(w, 0),
                                max(w, 0),
                            )
                        )
                if pipe.levels and terms:
                    _pipe_sum(pipe, f"{dst}[{i}][{c}]", acc_bits, f"{dst}_{i}_{c}", terms, opts)
                    continue
                rhs = _sum_tree(terms, opts["tree"] == "balanced", fixed)[0] if terms else "0"
                out(f"    assign {dst}[{i}][{c}] = {acc_bits}'({rhs});")
        return bounds
    k = opts["rom_inputs"]
    out(f"    // distributed arithmetic ({fname}): per column, the binarized inputs of up to {k}")
    out("    // rows with a nonzero weight index a table of the subset sums of those weights")
    out("    // (one LUT per output bit for <= 6 inputs); the chunk results are added")
    for c in range(mat.shape[1]):
        nz = [d for d in range(dim) if mat[d, c] != 0]
        nchunks = -(-len(nz) // k) if nz else 0
        chunks = [nz[g * len(nz) // nchunks : (g + 1) * len(nz) // nchunks] for g in range(nchunks)]
        calls = []
        for g, rows_g in enumerate(chunks):
            ws = [int(mat[d, c]) for d in rows_g]
            glo, ghi = sum(w for w in ws if w < 0), sum(w for w in ws if w > 0)
            n = acc_bits if opts["widths"] == "config" else _bits(glo, ghi)
            name = f"{fname.lower().replace('_', '')}_c{c}_g{g}"
            nb = len(rows_g)
            out(f"    // {fname} column {c}, rows {rows_g} (bit b of idx = row {rows_g}[b])")
            out(f"    function automatic logic signed [{n - 1}:0] {name}(")
            out(f"        input logic [{nb - 1}:0] idx);")
            out("        case (idx)")
            for m in range(1, 2**nb):
                v = sum(ws[b] for b in range(nb) if m >> b & 1)
                if v:
                    out(f"            {nb}'d{m}: {name} = {_lit(v, n)};")
            out(f"            default: {name} = {_lit(0, n)};")
            out("        endcase")
            out("    endfunction")
            calls.append((name, rows_g, glo, ghi))
        for i in range(rows):
            terms = []
            for name, rows_g, glo, ghi in calls:
                idx = ", ".join(f"{src}[{i}][{d}]" for d in reversed(rows_g))
                terms.append((f"{name}({{{idx}}})", glo, ghi))
            if pipe.levels and terms:
                _pipe_sum(pipe, f"{dst}[{i}][{c}]", acc_bits, f"{dst}_{i}_{c}", terms, opts)
                continue
            rhs = _sum_tree(terms, opts["tree"] == "balanced", fixed)[0] if terms else "0"
            out(f"    assign {dst}[{i}][{c}] = {acc_bits}'({rhs});")
    return bounds


def _pipe_sum(pipe, lhs, acc_bits, name, terms, opts):
    """A projection sum of ROM/mux leaves (no adder inside) through the pipelined tree."""
    fixed = acc_bits if opts["widths"] == "config" else None
    leaves = [(expr, lo, hi, 0) for expr, lo, hi in terms]
    root = pipe.tree(name, leaves, opts["tree"] == "balanced", fixed)
    pipe.result(lhs, acc_bits, name, root, fixed)


def _eatt_scores(out, pipe, cfg, opts, qbounds, kbounds, qb, sb):
    """sc[h][i][j] = -sum_t |q[i][h*dh+t] - k[j][h*dh+t]| (q, k in qb bits; columns bounded by
    qbounds, kbounds); every width from those bounds."""
    lq, lk, heads, dh = cfg.len_q, cfg.len_k, cfg.heads, cfg.d_head
    balanced = opts["tree"] == "balanced"
    out(f"    logic signed [{sb - 1}:0] sc [{heads}][{lq}][{lk}];")
    if opts["scores"] == "min":
        out("    // ---- scores (Eq. 10) with shared row sums: |a - b| = a + b - 2 min(a, b), so")
        out("    //      S = 2 sum_t min(q, k) - sum_t q - sum_t k; sum_t q once per query")
        for h in range(heads):
            for name, rows, b in (("q", lq, qbounds), ("k", lk, kbounds)):
                cols = range(h * dh, (h + 1) * dh)
                lo, hi = sum(b[c][0] for c in cols), sum(b[c][1] for c in cols)
                n = _bits(lo, hi)
                out(f"    logic signed [{n - 1}:0] {name}sum{h} [{rows}];  // in [{lo}, {hi}]")
                for i in range(rows):
                    terms = [(f"{name}[{i}][{c}]", b[c][0], b[c][1]) for c in cols]
                    out(f"    assign {name}sum{h}[{i}] = {n}'({_sum_tree(terms, balanced)[0]});")
        for h in range(heads):
            cols = range(h * dh, (h + 1) * dh)
            qlo, qhi = sum(qbounds[c][0] for c in cols), sum(qbounds[c][1] for c in cols)
            klo, khi = sum(kbounds[c][0] for c in cols), sum(kbounds[c][1] for c in cols)
            for i in range(lq):
                for j in range(lk):
                    terms = []
                    for c in cols:
                        (a_lo, a_hi), (b_lo, b_hi) = qbounds[c], kbounds[c]
                        dlo, dhi = a_lo - b_hi, a_hi - b_lo
                        n, mlo, mhi = _bits(dlo, dhi), min(a_lo, b_lo), min(a_hi, b_hi)
                        d, m = f"diff_q{i}_k{j}_c{c}", f"min_q{i}_k{j}_c{c}"
                        out("    /* verilator lint_off UNUSEDSIGNAL */  // only the sign is used")
                        out(f"    logic signed [{n - 1}:0] {d};  // q - k in [{dlo}, {dhi}]")
                        out("    /* verilator lint_on UNUSEDSIGNAL */")
                        mb = _bits(mlo, mhi)
                        out(f"    logic signed [{mb - 1}:0] {m};  // min(q, k)")
                        out(f"    assign {d} = {n}'(q[{i}][{c}]) - {n}'(k[{j}][{c}]);")
                        out(f"    assign {m} = {mb}'({d}[{n - 1}] ? q[{i}][{c}] : k[{j}][{c}]);")
                        terms.append((m, mlo, mhi))
                    m, mlo, mhi = _sum_tree(terms, balanced)
                    lo, hi = 2 * mlo - qhi - khi, 2 * mhi - qlo - klo
                    n = _bits(lo, hi)
                    out(
                        f"    assign sc[{h}][{i}][{j}] = {sb}'({n}'({n}'({n}'({m}) <<< 1)"
                        f" - {n}'(qsum{h}[{i}]) - {n}'(ksum{h}[{j}])));"
                    )
        out("")
        return
    xor = opts["scores"] == "xor"
    if _l1_leaf(cfg, opts, pipe.levels):
        _l1_score_rows(out, cfg, qbounds, kbounds, qb, sb)
        return
    if xor:
        out("    // ---- scores (Eq. 10): S = -sum_t |q - k|. With d = q - k and p = (d >= 0),")
        out("    //      -|d| = (d ^ {n{p}}) + p (one's complement): the xor folds into the LUTs")
        out("    //      of the adder it feeds, and each p is that adder's carry-in (a + b + p is")
        out("    //      one carry chain); a tree of T terms has T - 1 adders, so the first term")
        out("    //      keeps the negate. (* keep *) stops Yosys from merging the tree into one")
        out("    //      multi-operand sum, which it would map to LUT compressors.")
        if pipe.levels:
            out("    //      Pipelined (adder_levels): the first term is min(q - k, k - q), two")
            out("    //      subtracts side by side, so every leaf is one adder level deep.")
    elif pipe.levels:
        out("    // ---- scores (Eq. 10): S = -sum_t |q - k|, -|q - k| = min(q - k, k - q)")
    else:
        out("    // ---- scores (Eq. 10): S = -sum_t |q - k| (subtract, conditional negate)")
    for h in range(heads):
        for i in range(lq):
            for j in range(lk):
                terms, bits = [], []
                for c in range(h * dh, (h + 1) * dh):
                    (a_lo, a_hi), (b_lo, b_hi) = qbounds[c], kbounds[c]
                    dlo, dhi = a_lo - b_hi, a_hi - b_lo
                    n = _bits(dlo, dhi)
                    dmax = max(-dlo, dhi)
                    d, a = f"diff_q{i}_k{j}_c{c}", f"term_q{i}_k{j}_c{c}"
                    out(f"    logic signed [{n - 1}:0] {d}, {a};  // d = q - k in [{dlo}, {dhi}]")
                    out(f"    assign {d} = {n}'(q[{i}][{c}]) - {n}'(k[{j}][{c}]);")
                    if xor and terms:  # a = -|d| - p
                        out(f"    assign {a} = $signed({d} ^ {{{n}{{~{d}[{n - 1}]}}}});")
                        terms.append((a, -dmax - 1, 0))
                        bits.append(f"$signed({{1'b0, ~{d}[{n - 1}]}})")
                    elif pipe.levels:  # a = -|d| = min(q - k, k - q): one adder level
                        e = f"rdiff_q{i}_k{j}_c{c}"
                        out(f"    logic signed [{n - 1}:0] {e};  // k - q")
                        out(f"    assign {e} = {n}'(k[{j}][{c}]) - {n}'(q[{i}][{c}]);")
                        out(f"    assign {a} = {d}[{n - 1}] ? {d} : {e};")
                        terms.append((a, -dmax, 0))
                    else:  # a = -|d|
                        out(f"    assign {a} = {d}[{n - 1}] ? {d} : -{d};")
                        terms.append((a, -dmax, 0))
                if pipe.levels:  # every leaf is one subtract deep
                    name = f"score_h{h}_q{i}_k{j}"
                    root = pipe.tree(
                        name,
                        [(*t, 1) for t in terms],
                        balanced,
                        bits=[(b, 0, 1, 1) for b in bits] if xor else None,
                    )
                    pipe.result(f"sc[{h}][{i}][{j}]", sb, name, root)
                    continue
                if xor:
                    total = _carry_in_tree(out, f"score_h{h}_q{i}_k{j}", terms, bits, balanced)[0]
                else:
                    total = _sum_tree(terms, balanced)[0]
                out(f"    assign sc[{h}][{i}][{j}] = {sb}'({total});")
    out("")


L1_SCORE_ROW_FILE = "l1_score_row.sv"


def _l1_leaf(cfg: CoreConfig, opts: dict, levels: int) -> bool:
    """The E-ATT scores come from the l1_score_row leaf: the default datapath (xor terms, a
    balanced tree) with adder_levels 0; pipelined trees and the variants stay inline."""
    return (
        mechanism_of(cfg).binarized
        and opts["scores"] == "xor"
        and opts["tree"] == "balanced"
        and not levels
    )


def l1_score_row_parameters(qbounds, kbounds, qk_bits: int, score_bits: int) -> dict:
    """The l1_score_row parameters of one head: qbounds[t], kbounds[t] = (lo, hi) of lane t's
    q and k (from the weights' column bounds). DIFF_MAX (a SystemVerilog literal, lane 0 last)
    holds the bound of |q - k| per lane; SCORE_W is the root adder's width (the bounds' sum),
    at most score_bits: above it the score's bits are sign copies, which the top sees."""
    bounds = [
        max(b_hi - a_lo, a_hi - b_lo, 0)
        for (a_lo, a_hi), (b_lo, b_hi) in zip(qbounds, kbounds, strict=True)
    ]
    lanes = len(bounds)
    root = _bits(-(sum(bounds) + lanes - 1), lanes - 1)  # l1_score_row.sv node_bits(0, LANES - 1)
    return {
        "LANES": lanes,
        "IN_W": qk_bits,
        "SCORE_W": min(root, score_bits),
        "DIFF_MAX": "{" + ", ".join(f"32'd{b}" for b in reversed(bounds)) + "}",
        "diff_max": bounds,
    }


def _l1_score_rows(out, cfg, qbounds, kbounds, qb, sb):
    """sc[h][i][j] by one l1_score_row leaf (rtl_sim/rtl/l1_score_row.sv) per head, query and
    key: the default E-ATT scores (xor terms with carry-ins, balanced tree, adder_levels 0).
    Only the per-lane bounds of |q - k| (from the weights' column bounds) are config-specific."""
    lq, lk, heads, dh = cfg.len_q, cfg.len_k, cfg.heads, cfg.d_head
    out("    // ---- scores (Eq. 10): S = -sum_t |q - k| per head, query and key, l1_score_row.sv")
    out(
        "    //      (one's-complement terms, carry-in adders, a balanced tree); DIFF_MAX: per lane"
    )
    out("    //      the bound of |q - k| from the weights' column bounds, which sizes its adders")
    out(f"    logic [{dh * qb - 1}:0] q_row [{heads}][{lq}];  // lane t: q[i][h*{dh} + t]")
    out(f"    logic [{dh * qb - 1}:0] k_row [{heads}][{lk}];")
    for h in range(heads):
        cols = range(h * dh, (h + 1) * dh)
        for name, rows in (("q", lq), ("k", lk)):
            for i in range(rows):
                lanes = ", ".join(f"{name}[{i}][{c}]" for c in reversed(cols))
                out(f"    assign {name}_row[{h}][{i}] = {{{lanes}}};")
        p = l1_score_row_parameters([qbounds[c] for c in cols], [kbounds[c] for c in cols], qb, sb)
        sw = p["SCORE_W"]
        out(f"    logic signed [{sw - 1}:0] score_h{h} [{lq}][{lk}];  // sign-extended into sc")
        out(f"    localparam logic [{dh * 32 - 1}:0] DIFF_MAX_H{h} = {p['DIFF_MAX']};")
        for i, j in np.ndindex(lq, lk):
            out(
                f"    l1_score_row #(.LANES({dh}), .IN_W({qb}), .SCORE_W({sw}), "
                f".DIFF_MAX(DIFF_MAX_H{h}))"
            )
            out(
                f"        u_score_h{h}_q{i}_k{j} (.q(q_row[{h}][{i}]), .k(k_row[{h}][{j}]), "
                f".score(score_h{h}[{i}][{j}]));"
            )
            out(f"    assign sc[{h}][{i}][{j}] = {sb}'(score_h{h}[{i}][{j}]);")
    out("")


def _carry_in_tree(out, name, terms, bits, balanced):
    """Named adders L + R + p over (expression, lo, hi) terms, one 1-bit p per adder
    (len(bits) == len(terms) - 1), each kept as its own carry chain; returns (name, lo, hi)."""
    if len(terms) == 1:
        return terms[0]
    half = (len(terms) + 1) // 2 if balanced else len(terms) - 1
    left = _carry_in_tree(out, f"{name}l", terms[:half], bits[: half - 1], balanced)
    right = _carry_in_tree(out, f"{name}r", terms[half:], bits[half - 1 : -1], balanced)
    lo, hi = left[1] + right[1], left[2] + right[2] + 1
    n = _bits(lo, hi)
    out(f"    (* keep *) logic signed [{n - 1}:0] {name};")
    out(f"    assign {name} = {n}'({left[0]}) + {n}'({right[0]}) + {n}'({bits[-1]});")
    return name, lo, hi
