"""Emitter of the alignment level (scores out) and of the front end both levels share.

``_front_end``: inputs, binarization (E-ATT), the Q/K (and V) projections, the first register
stage and the scores; ``_alignment_sv``: the whole alignment top.
"""

from __future__ import annotations

import numpy as np

from eatt.config import CoreConfig
from eatt.quant.golden import CoreWeights, derive_formats
from eatt.rtl_sim.eatt_datapath import _eatt_projection, _eatt_scores
from eatt.rtl_sim.emit_top import _const_matmul, _control, _header, _ports
from eatt.rtl_sim.pipeline import _Pipe
from eatt.rtl_sim.sv_writer import _lit, _loops, _Writer
from eatt.rtl_sim.widths import alignment_widths

#: register stages of the generated alignment datapath (ap_start accepted -> ap_done)
ALIGNMENT_LATENCY = 2


def _front_end(
    out: _Writer, pipe: _Pipe, cfg: CoreConfig, weights: CoreWeights, with_v: bool, opts: dict
) -> None:
    """Inputs, binarization (E-ATT), Q/K (and V) projections, stage 0 registers, scores sc."""
    f = derive_formats(cfg)
    w = alignment_widths(cfg, f)
    lq, lk, dim, heads, dh = cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, cfg.d_head
    ib, aw, qs, qb, sb = w["in_bits"], w["acc_bits"], w["q_shift"], w["qk_bits"], w["score_bits"]
    eatt = cfg.kind == "eatt"
    out("    // ---- inputs as signed elements")
    out(f"    logic signed [{ib - 1}:0] xe [{lq}][{dim}];")
    out(f"    logic signed [{ib - 1}:0] ye [{lk}][{dim}];")
    for name, length in (("x", lq), ("y", lk)):
        for i in range(length):
            for d in range(dim):
                lo = (i * dim + d) * ib
                out(f"    assign {name}e[{i}][{d}] = {name}[{lo + ib - 1}:{lo}];")
    out("")
    if eatt:
        tau = cfg.tau_int
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
    if with_v:
        aw_v, vs = f.v_acc_bits, f.v_shift
        vb = aw_v - vs
        out(f"    // ---- values V = Y @ W_V: {aw_v}-bit accumulators (|acc| <= {f.v_acc_bound})")
        out(f"    logic signed [{aw_v - 1}:0] va [{lk}][{dim}];")
        _const_matmul(out, pipe, "va", "ye", lk, weights.wv, aw_v, "W_V")
    out("")
    out(f"    // ---- stage 0: requantize, arithmetic right shift by {qs} (floor), into {qb} bits")
    out(f"    logic signed [{qb - 1}:0] q [{lq}][{dim}];")
    out(f"    logic signed [{qb - 1}:0] k [{lk}][{dim}];")
    if with_v:
        out(f"    //      V: shift by {vs} into {vb} bits")
        out(f"    logic signed [{vb - 1}:0] v0 [{lk}][{dim}];")
    stage = pipe.close("projection")
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{stage}]) begin")
    regs = [("q", "qa", lq, qb, qs), ("k", "ka", lk, qb, qs)]
    if with_v:
        regs.append(("v0", "va", lk, vb, vs))
    for dst, src, length, bits, shift in regs:
        _loops(
            out,
            12,
            [("i", length), ("j", dim)],
            [f"{dst}[i][j] <= {bits}'({src}[i][j] >>> {shift});"],
        )
    out("        end")
    out("    end")
    out("")
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
