"""Emitter of the alignment level (scores out) and of the front end both levels share.

``_front_end``: inputs, binarization (E-ATT), the Q/K (and V) projections, the first register
stage and the scores; ``_alignment_sv``: the whole alignment top.
"""

from __future__ import annotations

import numpy as np

from eatt.config import CoreConfig
from eatt.mechanisms import mechanism_of
from eatt.quant.golden import CoreWeights, derive_formats
from eatt.rtl_sim.eatt_datapath import _eatt_projection, _eatt_scores
from eatt.rtl_sim.emit_synthesizer import FRONTS
from eatt.rtl_sim.emit_top import (
    _const_matmul,
    _control,
    _header,
    _inputs,
    _ports,
    _stage0,
    _values,
)
from eatt.rtl_sim.pipeline import _Pipe
from eatt.rtl_sim.sv_writer import _lit, _loops, _Writer
from eatt.rtl_sim.widths import alignment_widths

#: register stages of the generated alignment datapath (ap_start accepted -> ap_done)
ALIGNMENT_LATENCY = 2


def _front_end(
    out: _Writer, pipe: _Pipe, cfg: CoreConfig, weights: CoreWeights, with_v: bool, opts: dict
) -> None:
    """Inputs, binarization (E-ATT), Q/K (and V) projections, stage 0 registers, scores sc
    (a Synthesizer mechanism: its own front end, rtl_sim/emit_synthesizer.py)."""
    mechanism = mechanism_of(cfg)
    if mechanism.rtl_front is not None:
        FRONTS[mechanism.rtl_front](out, pipe, cfg, weights, with_v, opts)
        return
    f = derive_formats(cfg)
    w = alignment_widths(cfg, f)
    lq, lk, dim, heads, dh = cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, cfg.d_head
    aw, qs, qb, sb = w["acc_bits"], w["q_shift"], w["qk_bits"], w["score_bits"]
    eatt = mechanism.binarized
    _inputs(out, cfg)
    if eatt:
        tau, ib = cfg.tau_int, w["in_bits"]
        out(f"    // ---- binarize (Eq. 4, strict): xb = x > tau_int = {tau}")
        out(f"    logic xb [{lq}][{dim}];")
        out(f"    logic yb [{lk}][{dim}];")
        out("    always_comb begin")
        for name, length in (("x", lq), ("y", lk)):
            _loops(
                out,
                8,
                [("i", length), ("d", dim)],
                [f"{name}b[i][d] = {ib + 1}'({name}e[i][d]) > {_lit(tau, ib + 1)};"],
            )
        out("    end")
        out("")
    out(f"    // ---- projections Q = X @ W_Q, K = Y @ W_K: {aw}-bit accumulators")
    out(f"    //      (|acc| <= q_acc_bound = {f.q_acc_bound})")
    out(f"    logic signed [{aw - 1}:0] qa [{lq}][{dim}];")
    out(f"    logic signed [{aw - 1}:0] ka [{lk}][{dim}];")
    if eatt:
        qbounds = _eatt_projection(out, pipe, opts, "xb", "qa", lq, weights.wq, aw, "W_Q")
        kbounds = _eatt_projection(out, pipe, opts, "yb", "ka", lk, weights.wk, aw, "W_K")
    else:
        _const_matmul(out, pipe, "qa", "xe", lq, weights.wq, aw, "W_Q")
        _const_matmul(out, pipe, "ka", "ye", lk, weights.wk, aw, "W_K")
    values = _values(out, pipe, cfg, weights) if with_v else []
    out("")
    out(f"    // ---- stage 0: requantize, arithmetic right shift by {qs} (floor), into {qb} bits")
    out(f"    logic signed [{qb - 1}:0] q [{lq}][{dim}];")
    out(f"    logic signed [{qb - 1}:0] k [{lk}][{dim}];")
    regs = [("q", "qa", lq, dim, qb, qs), ("k", "ka", lk, dim, qb, qs), *values]
    _stage0(out, pipe, regs)
    if eatt:
        # the bounds of q = qa >>> qs (floor) per column; 'config': the whole qb-bit range
        if opts["widths"] == "config":
            qbounds = kbounds = [(-(2 ** (qb - 1)), 2 ** (qb - 1) - 1)] * dim
        else:
            qbounds = [(lo >> qs, hi >> qs) for lo, hi in qbounds]
            kbounds = [(lo >> qs, hi >> qs) for lo, hi in kbounds]
        _eatt_scores(out, pipe, cfg, opts, qbounds, kbounds, qb, sb)
        return
    out(f"    // ---- scores: S = q . k per head, d_head = {dh}")
    out(f"    function automatic logic signed [{sb - 1}:0] product(")
    out(f"        input logic signed [{qb - 1}:0] a, input logic signed [{qb - 1}:0] b);")
    out(f"        product = {sb}'(a) * {sb}'(b);")
    out("    endfunction")
    term = f"+ product(q[i][h*{dh} + t], k[j][h*{dh} + t])"
    out(f"    logic signed [{sb - 1}:0] sc [{heads}][{lq}][{lk}];")
    if pipe.levels:  # a balanced tree of the products (the multipliers are not cut)
        for h, i, j in np.ndindex(heads, lq, lk):
            name = f"score_h{h}_q{i}_k{j}"
            leaves = [
                (f"product(q[{i}][{c}], k[{j}][{c}])", 0, 0, 0) for c in range(h * dh, (h + 1) * dh)
            ]
            pipe.result(f"sc[{h}][{i}][{j}]", sb, name, pipe.tree(name, leaves, True, sb), sb)
        out("")
        return
    out("    always_comb begin")
    body = [
        f"sc[h][i][j] = {_lit(0, sb)};",
        f"for (int t = 0; t < {dh}; t++) begin",
        f"    sc[h][i][j] = sc[h][i][j] {term};",
        "end",
    ]
    _loops(out, 8, [("h", heads), ("i", lq), ("j", lk)], body)
    out("    end")
    out("")


def _alignment_sv(
    cfg: CoreConfig, weights: CoreWeights, top: str, opts: dict, levels: int
) -> tuple[str, _Pipe]:
    w = alignment_widths(cfg)
    lq, lk, heads, sb = cfg.len_q, cfg.len_k, cfg.heads, w["score_bits"]
    # the datapath first (it numbers the register stages), then the header that states them
    body = _Writer()
    pipe = _Pipe(body, levels)
    _front_end(body, pipe, cfg, weights, False, opts)
    stage = pipe.close("scores")
    body(f"    // ---- stage {stage}: output register (holds the last result)")
    body("    always_ff @(posedge ap_clk) begin")
    body(f"        if (stage_en[{stage}]) begin")
    _loops(
        body,
        12,
        [("h", heads), ("i", lq), ("j", lk)],
        [f"s[((h*{lq} + i)*{lk} + j)*{sb} +: {sb}] <= sc[h][i][j];"],
    )
    body("        end")
    body("    end")
    body("endmodule")
    body("")
    body("`default_nettype wire")
    out = _Writer()
    _header(out, cfg, top, "alignment stage (scores only)", w, pipe)
    _ports(
        out,
        cfg,
        top,
        [
            f"S: {heads} x {lq} x {lk} signed {sb}-bit scores,",
            f"   element (h, i, j) at [((h*{lq} + i)*{lk} + j)*{sb} +: {sb}];",
            "   held until the next result",
        ],
        "s",
        heads * lq * lk * sb,
    )
    _control(out, pipe.latency, "s")
    out.lines += body.lines
    return out.text(), pipe
