"""RTL generation: a core config + integer weights -> SystemVerilog + metadata.json.

``generate_rtl(cfg, weights, out_dir, level="alignment" | "attention")`` writes a directory that a
simulator or a synthesizer can use on its own (DESIGN.md section 4, "An RTL directory"):

    metadata.json          config, level, interface, latency, formats, ``sources`` (top first)
    <kind>_<level>.sv      generated top: the datapath with the weights as constants
    ap_pipe_ctrl.sv        hand-written block-level handshake (copied from rtl_sim/rtl/)
    weights.npz            the integer weights (the golden model needs them to check the RTL)

The arithmetic is the golden model's (eatt.quant.golden.GoldenCore), bit for bit. Alignment
(``GoldenCore.alignment``, scores out):

    E-ATT  xb = x > tau_int                      qa[i][j] = sum_d (xb[i][d] ? W_Q[d][j] : 0)
    dot                                          qa[i][j] = sum_d x[i][d] * W_Q[d][j]
           q = qa >>> q_shift  (floor)  (K likewise from y and W_K)
    E-ATT  s[h][i][j] = -sum_t |q[i][h*dh+t] - k[j][h*dh+t]|
    dot    s[h][i][j] =  sum_t  q[i][h*dh+t] * k[j][h*dh+t]

Attention (``GoldenCore.forward``, the whole core, outputs z): the same Q/K/scores, and

    v = (y @ W_V) >>> v_shift
    e[h][i][j] = EXP[(max_j s - s) >> exp_shift]          (case-statement ROM, 0 past the table)
    E = sum_j e,  N[t] = sum_j e_j v[j][h*dh+t]
    n = leading one of E, R = RECIP[the recip_index_bits bits below it]  (case-statement ROM)
    o = clamp((N * R + 2**(recip_frac+n-1)) >>> (recip_frac + n))  into v_bits
    z = (concat_h(o) @ W_O) >>> out_shift

Widths come from eatt.quant.golden.Formats (``alignment_widths``, ``attention_widths``). Every
expression is evaluated at a width that holds its exact value (all operands signed, sized
explicitly), so nothing wraps. The weights are constants: E-ATT's Q/K projection is a
mux-and-add per weight (no multiplier); constant products (dot's Q/K, both cores' V and W_O)
are left to synthesis; the variable products (dot scores, e * V, N * R) are multipliers.

Pipelines (II 1, ap_pipe_ctrl): alignment 2 register stages (Q/K, scores: latency 2);
attention 6 (Q/K/V, scores, exp, sum and numerator, normalized output, W_O: latency 6).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from eatt.config import CoreConfig
from eatt.quant.golden import (
    CoreWeights,
    Formats,
    derive_formats,
    exp_table,
    recip_table,
    signed_bits,
)

RTL_DIR = Path(__file__).parent / "rtl"
CTRL_FILE = "ap_pipe_ctrl.sv"
LEVELS = ("alignment", "attention")
#: register stages of the generated alignment datapath (ap_start accepted -> ap_done)
ALIGNMENT_LATENCY = 2


def _lit(value: int, width: int) -> str:
    """A signed SystemVerilog literal of the given width (the value must fit)."""
    value = int(value)
    if not -(2 ** (width - 1)) <= value < 2 ** (width - 1):
        raise AssertionError(f"literal {value} does not fit {width} signed bits")
    return f"{width}'sd{value}" if value >= 0 else f"-{width}'sd{-value}"


def alignment_widths(cfg: CoreConfig, formats: Formats | None = None) -> dict[str, int]:
    """Bit widths of the alignment datapath, all derived from the golden model's Formats."""
    f = formats or derive_formats(cfg)
    acc_bits = signed_bits(f.q_acc_bound)  # |Q| before the shift <= q_acc_bound
    qk_bits = acc_bits - f.q_shift  # what the arithmetic shift leaves (<= cfg.qk_bits)
    return {
        "in_bits": cfg.in_bits,
        "acc_bits": acc_bits,
        "q_shift": f.q_shift,
        "qk_bits": qk_bits,
        "score_bits": signed_bits(f.score_bound),
    }


def alignment_interface(cfg: CoreConfig) -> dict:
    """The port list of the alignment top (also written to metadata.json)."""
    w = alignment_widths(cfg)
    return {
        "protocol": "ap_ctrl_hs",
        "clock": "ap_clk",
        "reset": {"name": "ap_rst", "active": "high", "kind": "synchronous"},
        "control": ["ap_start", "ap_done", "ap_idle", "ap_ready"],
        "inputs": {
            "x": {
                "shape": [cfg.len_q, cfg.dim],
                "element_bits": cfg.in_bits,
                "signed": True,
                "width": cfg.len_q * cfg.dim * cfg.in_bits,
                "packing": "element (i, d) at bits [(i*dim + d)*in_bits +: in_bits]",
            },
            "y": {
                "shape": [cfg.len_k, cfg.dim],
                "element_bits": cfg.in_bits,
                "signed": True,
                "width": cfg.len_k * cfg.dim * cfg.in_bits,
                "packing": "element (j, d) at bits [(j*dim + d)*in_bits +: in_bits]",
            },
        },
        "outputs": {
            "s": {
                "shape": [cfg.heads, cfg.len_q, cfg.len_k],
                "element_bits": w["score_bits"],
                "signed": True,
                "width": cfg.heads * cfg.len_q * cfg.len_k * w["score_bits"],
                "packing": (
                    "element (h, i, j) at bits [((h*len_q + i)*len_k + j)*score_bits +: score_bits]"
                ),
                "valid": "s_vld",
            }
        },
        "widths": w,
    }


def attention_widths(cfg: CoreConfig, formats: Formats | None = None) -> dict[str, int]:
    """Bit widths of the whole-core datapath (attention level), from the golden Formats."""
    f = formats or derive_formats(cfg)
    w = alignment_widths(cfg, f)
    v_acc_bits = signed_bits(f.v_acc_bound)
    v_bits = v_acc_bits - f.v_shift  # |V| < 2**(v_bits-1) (<= cfg.v_bits)
    diff_max = 2 * f.score_bound  # max_j S - S lies in [0, 2 * score_bound]
    diff_bits = max(1, diff_max.bit_length())  # unsigned
    total_bits = (cfg.len_k * 2**cfg.exp_frac).bit_length()  # E <= len_k * 2**exp_frac
    numer_bits = signed_bits(cfg.len_k * 2**cfg.exp_frac * 2 ** (v_bits - 1))
    recip_bits = cfg.recip_frac + 1  # RECIP[i] <= 2**recip_frac, unsigned
    # N * R as signed (recip zero-extended by one bit), plus the rounding half (< 2**shift)
    prod_bits = max(numer_bits + recip_bits + 1, cfg.recip_frac + total_bits) + 1
    out_acc_bits = signed_bits(f.out_acc_bound)
    w.update(
        v_acc_bits=v_acc_bits,
        v_shift=f.v_shift,
        v_bits=v_bits,
        diff_bits=diff_bits,
        exp_shift=f.exp_shift,
        exp_index_bits=max(1, diff_bits - f.exp_shift),
        exp_bits=cfg.exp_frac + 1,
        total_bits=total_bits,
        numer_bits=numer_bits,
        recip_index_bits=f.recip_index_bits,
        recip_bits=recip_bits,
        prod_bits=prod_bits,
        attn_bits=cfg.v_bits,  # O is clamped into cfg.v_bits (golden weighted_values)
        out_acc_bits=out_acc_bits,
        out_shift=f.out_shift,
        out_bits=out_acc_bits - f.out_shift,
    )
    return w


def attention_interface(cfg: CoreConfig) -> dict:
    """The port list of the attention top (also written to metadata.json)."""
    iface = alignment_interface(cfg)
    w = attention_widths(cfg)
    zb = w["out_bits"]
    iface["outputs"] = {
        "z": {
            "shape": [cfg.len_q, cfg.dim],
            "element_bits": zb,
            "signed": True,
            "width": cfg.len_q * cfg.dim * zb,
            "packing": "element (i, d) at bits [(i*dim + d)*out_bits +: out_bits]",
            "valid": "z_vld",
        }
    }
    iface["widths"] = w
    return iface


class _Writer:
    """Collects lines of SystemVerilog; small helpers for the repeated shapes."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str = "") -> None:
        self.lines.append(line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def rom(self, name: str, index_bits: int, value_bits: int, table: np.ndarray) -> None:
        """A constant table as a function with a case statement (0 outside the entries)."""
        self(f"    function automatic logic [{value_bits - 1}:0] {name}(")
        self(f"        input logic [{index_bits - 1}:0] idx);")
        self("        case (idx)")
        for i, value in enumerate(table.tolist()):
            if i >= 2**index_bits:
                break
            if value:
                self(f"            {index_bits}'d{i}: {name} = {value_bits}'d{int(value)};")
        self(f"            default: {name} = {value_bits}'d0;")
        self("        endcase")
        self("    endfunction")


def _header(out: _Writer, cfg: CoreConfig, top: str, what: str, widths: dict, latency: int):
    out(f"// {top}: {what} of one {cfg.kind!r} attention core.")
    out("// GENERATED by eatt.rtl_sim.generate from the config and integer weights: do not edit.")
    ref = "alignment(x, y)" if what.startswith("alignment") else "forward(x, y)"
    out(f"// Bit-exact with eatt.quant.golden.GoldenCore(cfg, weights).{ref}.")
    out(f"// config: {json.dumps(cfg.to_dict(), sort_keys=True)}")
    out(f"// widths: {json.dumps(widths, sort_keys=True)}")
    out(f"// Interface: see docs/rtl.md and metadata.json (ap_ctrl_hs, II = 1, latency {latency}).")
    out("")
    out("`default_nettype none")
    out("")


def _ports(out: _Writer, cfg: CoreConfig, top: str, comment: list[str], port: str, width: int):
    lq, lk, dim, ib = cfg.len_q, cfg.len_k, cfg.dim, cfg.in_bits
    out(f"module {top} (")
    out("    input  wire logic ap_clk,")
    out("    input  wire logic ap_rst,  // synchronous, active high")
    out("    input  wire logic ap_start,")
    out("    output logic      ap_done,")
    out("    output logic      ap_idle,")
    out("    output logic      ap_ready,")
    out(f"    // X: {lq} x {dim} signed {ib}-bit, element (i, d) at [(i*{dim} + d)*{ib} +: {ib}]")
    out(f"    input  wire logic [{lq * dim * ib - 1}:0] x,")
    out(f"    // Y: {lk} x {dim} signed {ib}-bit, element (j, d) at [(j*{dim} + d)*{ib} +: {ib}]")
    out(f"    input  wire logic [{lk * dim * ib - 1}:0] y,")
    for line in comment:
        out(f"    // {line}")
    out(f"    output logic [{width - 1}:0] {port},")
    out(f"    output logic      {port}_vld  // = ap_done: {port} holds a new result in this cycle")
    out(");")


def _control(out: _Writer, latency: int, port: str) -> None:
    out(f"    logic [{latency - 1}:0] stage_en;")
    out("")
    out(f"    ap_pipe_ctrl #(.LATENCY({latency})) u_ctrl (")
    out("        .ap_clk(ap_clk), .ap_rst(ap_rst), .ap_start(ap_start), .ap_done(ap_done),")
    out("        .ap_idle(ap_idle), .ap_ready(ap_ready), .stage_en(stage_en)")
    out("    );")
    out(f"    assign {port}_vld = ap_done;")
    out("")


def _const_matmul(out, cfg, dst, src, rows, mat, acc_bits, wname, select):
    """dst[i][j] = sum_d src[i][d] * mat[d][j] with constant weights (zero weights skipped);
    select=True: src is a 0/1 bit and each term a constant-or-zero mux (no multiplier)."""
    out(f"    // {wname}")
    for i in range(rows):
        for j in range(mat.shape[1]):
            terms = []
            for d in range(mat.shape[0]):
                wv = int(mat[d, j])
                if wv == 0:
                    continue
                if select:
                    terms.append(f"({src}[{i}][{d}] ? {_lit(wv, acc_bits)} : {_lit(0, acc_bits)})")
                else:
                    terms.append(f"{acc_bits}'({src}[{i}][{d}]) * {_lit(wv, acc_bits)}")
            rhs = " + ".join(terms) if terms else _lit(0, acc_bits)
            out(f"    assign {dst}[{i}][{j}] = {rhs};")


def _loops(out: _Writer, indent: int, dims: list[tuple[str, int]], body: list[str]) -> None:
    """Nested for loops over (variable, count) around body lines."""
    pad = " " * indent
    for depth, (var, count) in enumerate(dims):
        out(f"{pad}{'    ' * depth}for (int {var} = 0; {var} < {count}; {var}++) begin")
    for line in body:
        out(f"{pad}{'    ' * len(dims)}{line}")
    for depth in reversed(range(len(dims))):
        out(f"{pad}{'    ' * depth}end")


def _front_end(out: _Writer, cfg: CoreConfig, weights: CoreWeights, with_v: bool) -> None:
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
    _const_matmul(out, cfg, "qa", "xb" if eatt else "xe", lq, weights.wq, aw, "W_Q", eatt)
    _const_matmul(out, cfg, "ka", "yb" if eatt else "ye", lk, weights.wk, aw, "W_K", eatt)
    if with_v:
        aw_v, vs = signed_bits(f.v_acc_bound), f.v_shift
        vb = aw_v - vs
        out(f"    // ---- values V = Y @ W_V: {aw_v}-bit accumulators (|acc| <= {f.v_acc_bound})")
        out(f"    logic signed [{aw_v - 1}:0] va [{lk}][{dim}];")
        _const_matmul(out, cfg, "va", "ye", lk, weights.wv, aw_v, "W_V", False)
    out("")
    out(f"    // ---- stage 0: requantize, arithmetic right shift by {qs} (floor), into {qb} bits")
    out(f"    logic signed [{qb - 1}:0] q [{lq}][{dim}];")
    out(f"    logic signed [{qb - 1}:0] k [{lk}][{dim}];")
    if with_v:
        out(f"    //      V: shift by {vs} into {vb} bits")
        out(f"    logic signed [{vb - 1}:0] v0 [{lk}][{dim}];")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (stage_en[0]) begin")
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
        out(f"    // ---- scores (Eq. 10): S = -sum |q - k| per head, d_head = {dh}")
        out(f"    function automatic logic signed [{sb - 1}:0] abs_diff(")
        out(f"        input logic signed [{qb - 1}:0] a, input logic signed [{qb - 1}:0] b);")
        out(f"        // |a - b| <= 2**{qb} - 1 fits {qb + 1} signed bits")
        out(f"        logic signed [{qb}:0] diff, mag;")
        out(f"        diff = {qb + 1}'(a) - {qb + 1}'(b);")
        out(f"        mag = diff[{qb}] ? -diff : diff;")
        out(f"        abs_diff = {sb}'(mag);  // (no `return`: Yosys does not read it)")
        out("    endfunction")
        term = f"- abs_diff(q[i][h*{dh} + t], k[j][h*{dh} + t])"
    else:
        out(f"    // ---- scores: S = q . k per head, d_head = {dh}")
        out(f"    function automatic logic signed [{sb - 1}:0] product(")
        out(f"        input logic signed [{qb - 1}:0] a, input logic signed [{qb - 1}:0] b);")
        out(f"        product = {sb}'(a) * {sb}'(b);")
        out("    endfunction")
        term = f"+ product(q[i][h*{dh} + t], k[j][h*{dh} + t])"
    out(f"    logic signed [{sb - 1}:0] sc [{heads}][{lq}][{lk}];")
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


def _alignment_sv(cfg: CoreConfig, weights: CoreWeights, top: str) -> str:
    w = alignment_widths(cfg)
    lq, lk, heads, sb = cfg.len_q, cfg.len_k, cfg.heads, w["score_bits"]
    out = _Writer()
    _header(out, cfg, top, "alignment stage (scores only)", w, ALIGNMENT_LATENCY)
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
    _control(out, ALIGNMENT_LATENCY, "s")
    _front_end(out, cfg, weights, with_v=False)
    out("    // ---- stage 1: output register (holds the last result)")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (stage_en[1]) begin")
    _loops(
        out,
        12,
        [("h", heads), ("i", lq), ("j", lk)],
        [f"s[((h*{lq} + i)*{lk} + j)*{sb} +: {sb}] <= sc[h][i][j];"],
    )
    out("        end")
    out("    end")
    out("endmodule")
    out("")
    out("`default_nettype wire")
    return out.text()


#: register stages of the generated attention datapath: Q/K/V, scores, exp, sum/numerator,
#: normalized attention output, output projection
ATTENTION_LATENCY = 6


def _attention_sv(cfg: CoreConfig, weights: CoreWeights, top: str) -> str:
    f = derive_formats(cfg)
    w = attention_widths(cfg, f)
    lq, lk, dim, heads, dh = cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, cfg.d_head
    sb, vb, db, iw = w["score_bits"], w["v_bits"], w["diff_bits"], w["exp_index_bits"]
    ew, tb, nb, ki = w["exp_bits"], w["total_bits"], w["numer_bits"], w["recip_index_bits"]
    rb, pb, ob = w["recip_bits"], w["prod_bits"], w["attn_bits"]
    oab, zb, rf = w["out_acc_bits"], w["out_bits"], cfg.recip_frac
    out = _Writer()
    _header(out, cfg, top, "whole core (attention outputs)", w, ATTENTION_LATENCY)
    _ports(
        out,
        cfg,
        top,
        [
            f"Z: {lq} x {dim} signed {zb}-bit outputs (after W_O and out_shift),",
            f"   element (i, d) at [(i*{dim} + d)*{zb} +: {zb}]; held until the next result",
        ],
        "z",
        lq * dim * zb,
    )
    _control(out, ATTENTION_LATENCY, "z")
    _front_end(out, cfg, weights, with_v=True)

    out("    // ---- stage 1: scores and V")
    out(f"    logic signed [{sb - 1}:0] s1 [{heads}][{lq}][{lk}];")
    out(f"    logic signed [{vb - 1}:0] v1 [{lk}][{dim}];")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (stage_en[1]) begin")
    _loops(out, 12, [("h", heads), ("i", lq), ("j", lk)], ["s1[h][i][j] <= sc[h][i][j];"])
    _loops(out, 12, [("j", lk), ("d", dim)], ["v1[j][d] <= v0[j][d];"])
    out("        end")
    out("    end")
    out("")
    out(f"    // ---- softmax weights: e = EXP[(max_j S - S) >> {f.exp_shift}], 0 past the table")
    out(f"    //      ({cfg.exp_table_size} entries, EXP[0] = 2**{cfg.exp_frac})")
    out.rom("exp_rom", iw, ew, exp_table(cfg))
    out(f"    logic signed [{sb - 1}:0] smax [{heads}][{lq}];")
    out(f"    logic signed [{sb}:0] sdiff [{heads}][{lq}][{lk}];  // in [0, {2 * f.score_bound}]")
    out(f"    logic [{ew - 1}:0] ec [{heads}][{lq}][{lk}];")
    out("    always_comb begin")
    body = [
        "smax[h][i] = s1[h][i][0];",
        f"for (int j = 1; j < {lk}; j++) begin",
        "    if (s1[h][i][j] > smax[h][i]) smax[h][i] = s1[h][i][j];",
        "end",
        f"for (int j = 0; j < {lk}; j++) begin",
        f"    sdiff[h][i][j] = {sb + 1}'(smax[h][i]) - {sb + 1}'(s1[h][i][j]);",
        f"    ec[h][i][j] = exp_rom({iw}'(sdiff[h][i][j][{db - 1}:0] >> {f.exp_shift}));",
        "end",
    ]
    _loops(out, 8, [("h", heads), ("i", lq)], body)
    out("    end")
    out("")
    out("    // ---- stage 2: softmax weights and V")
    out(f"    logic [{ew - 1}:0] e2 [{heads}][{lq}][{lk}];")
    out(f"    logic signed [{vb - 1}:0] v2 [{lk}][{dim}];")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (stage_en[2]) begin")
    _loops(out, 12, [("h", heads), ("i", lq), ("j", lk)], ["e2[h][i][j] <= ec[h][i][j];"])
    _loops(out, 12, [("j", lk), ("d", dim)], ["v2[j][d] <= v1[j][d];"])
    out("        end")
    out("    end")
    out("")
    out(f"    // ---- sum E = sum_j e_j ({tb} bits) and numerator N = sum_j e_j V_j ({nb} bits)")
    out(f"    logic [{tb - 1}:0] tc [{heads}][{lq}];")
    out(f"    logic signed [{nb - 1}:0] nc [{heads}][{lq}][{dh}];")
    out("    always_comb begin")
    body = [
        f"tc[h][i] = {tb}'d0;",
        f"for (int t = 0; t < {dh}; t++) nc[h][i][t] = {_lit(0, nb)};",
        f"for (int j = 0; j < {lk}; j++) begin",
        f"    tc[h][i] = tc[h][i] + {tb}'(e2[h][i][j]);",
        f"    for (int t = 0; t < {dh}; t++) begin",
        "        nc[h][i][t] = nc[h][i][t]",
        f"            + {nb}'($signed({{1'b0, e2[h][i][j]}})) * {nb}'(v2[j][h*{dh} + t]);",
        "    end",
        "end",
    ]
    _loops(out, 8, [("h", heads), ("i", lq)], body)
    out("    end")
    out("")
    out("    // ---- stage 3: sum and numerator")
    out(f"    logic [{tb - 1}:0] t3 [{heads}][{lq}];")
    out(f"    logic signed [{nb - 1}:0] n3 [{heads}][{lq}][{dh}];")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (stage_en[3]) begin")
    _loops(out, 12, [("h", heads), ("i", lq)], ["t3[h][i] <= tc[h][i];"])
    _loops(out, 12, [("h", heads), ("i", lq), ("t", dh)], ["n3[h][i][t] <= nc[h][i][t];"])
    out("        end")
    out("    end")
    out("")
    lb = max(1, (tb - 1).bit_length())  # bits of the leading-one position
    sw = (rf + tb - 1).bit_length()  # bits of the shift amount recip_frac + n
    out("    // ---- reciprocal: n = floor(log2 E) (leading one), idx = the")
    out(f"    //      {ki} bits below it, R = RECIP[idx] ({cfg.recip_table_size} entries)")
    out(f"    //      O = clamp(round_half_up(N * R / 2**({rf} + n))) into {ob} bits")
    out.rom("recip_rom", ki, rb, recip_table(cfg))
    lo, hi = -(2 ** (ob - 1)), 2 ** (ob - 1) - 1
    out(f"    logic [{lb - 1}:0] lead [{heads}][{lq}];")
    out(f"    logic [{tb - 1}:0] norm [{heads}][{lq}];  // E << ({tb - 1} - n): leading one on top")
    out(f"    logic [{tb + ki - 2}:0] frac [{heads}][{lq}];  // the bits below it, zero-padded")
    out(f"    logic [{rb - 1}:0] rc [{heads}][{lq}];")
    out(f"    logic [{sw - 1}:0] shift [{heads}][{lq}];")
    out(f"    logic signed [{pb - 1}:0] rnd [{heads}][{lq}][{dh}];  // N * R + 2**(shift-1)")
    out(f"    logic signed [{pb - 1}:0] quo [{heads}][{lq}][{dh}];  // rnd >>> shift")
    out(f"    logic signed [{ob - 1}:0] oc [{heads}][{lq}][{dh}];")
    out("    always_comb begin")
    body = [
        f"lead[h][i] = {lb}'d0;",
        f"for (int b = 0; b < {tb}; b++) begin",
        f"    if (t3[h][i][b]) lead[h][i] = {lb}'(b);",
        "end",
        f"norm[h][i] = t3[h][i] << ({lb}'d{tb - 1} - lead[h][i]);",
    ]
    if tb > 1:
        body.append(f"frac[h][i] = {{norm[h][i][{tb - 2}:0], {ki}'d0}};")
    else:
        body.append(f"frac[h][i] = {ki}'d0;")
    body += [
        f"rc[h][i] = recip_rom(frac[h][i][{tb + ki - 2}:{tb - 1}]);",
        f"shift[h][i] = {sw}'d{rf} + {sw}'(lead[h][i]);",
        f"for (int t = 0; t < {dh}; t++) begin",
        f"    rnd[h][i][t] = {pb}'(n3[h][i][t]) * {pb}'($signed({{1'b0, rc[h][i]}}))",
        f"        + ({pb}'sd1 <<< (shift[h][i] - {sw}'d1));",
        "    quo[h][i][t] = rnd[h][i][t] >>> shift[h][i];",
        f"    if (quo[h][i][t] > {_lit(hi, pb)}) oc[h][i][t] = {_lit(hi, ob)};",
        f"    else if (quo[h][i][t] < {_lit(lo, pb)}) oc[h][i][t] = {_lit(lo, ob)};",
        f"    else oc[h][i][t] = {ob}'(quo[h][i][t]);",
        "end",
    ]
    _loops(out, 8, [("h", heads), ("i", lq)], body)
    out("    end")
    out("")
    out("    // ---- stage 4: attention output O, heads concatenated in column order")
    out(f"    logic signed [{ob - 1}:0] o4 [{lq}][{dim}];")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (stage_en[4]) begin")
    _loops(out, 12, [("h", heads), ("i", lq), ("t", dh)], [f"o4[i][h*{dh} + t] <= oc[h][i][t];"])
    out("        end")
    out("    end")
    out("")
    out(f"    // ---- output projection Z = O @ W_O: {oab}-bit accumulators")
    out(f"    //      (|acc| <= out_acc_bound = {f.out_acc_bound})")
    out(f"    logic signed [{oab - 1}:0] za [{lq}][{dim}];")
    _const_matmul(out, cfg, "za", "o4", lq, weights.wo, oab, "W_O", False)
    out("")
    out(f"    // ---- stage 5: requantize (>>> {f.out_shift}) into {zb} bits, output register")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (stage_en[5]) begin")
    _loops(
        out,
        12,
        [("i", lq), ("d", dim)],
        [f"z[(i*{dim} + d)*{zb} +: {zb}] <= {zb}'(za[i][d] >>> {f.out_shift});"],
    )
    out("        end")
    out("    end")
    out("endmodule")
    out("")
    out("`default_nettype wire")
    return out.text()


def generate_rtl(
    cfg: CoreConfig, weights: CoreWeights, out_dir: str | os.PathLike, level: str = "alignment"
) -> dict:
    """Write the RTL of one core into out_dir; return the metadata (also in metadata.json).

    The directory is built beside out_dir and renamed into place, so a reader never sees half
    of it, and a second generation into the same directory leaves no stale file behind.
    """
    if level not in LEVELS:
        raise ValueError(f"level: must be one of {', '.join(LEVELS)}, got {level!r}")
    weights.check(cfg)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a directory")
    top = f"{cfg.kind}_{level}"
    top_file = f"{top}.sv"
    if level == "alignment":
        text, iface = _alignment_sv(cfg, weights, top), alignment_interface(cfg)
        latency = ALIGNMENT_LATENCY
    else:
        text, iface = _attention_sv(cfg, weights, top), attention_interface(cfg)
        latency = ATTENTION_LATENCY
    meta = {
        "generator": "eatt.rtl_sim.generate",
        "level": level,
        "kind": cfg.kind,
        "config": cfg.to_dict(),
        "top": top,
        "sources": [top_file, CTRL_FILE],
        "weights": "weights.npz",
        "interface": iface,
        "latency_cycles": latency,
        "ii_cycles": 1,
        "formats": derive_formats(cfg).to_dict(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / top_file).write_text(text)
        shutil.copyfile(RTL_DIR / CTRL_FILE, tmp / CTRL_FILE)
        np.savez(tmp / "weights.npz", **weights.as_dict())
        (tmp / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
        tmp.chmod(0o755)
        if out.exists():
            # swap: move the old directory aside, the new one in, then delete the old one
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.replace(out, old / "d")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta


def load_metadata(out_dir: str | os.PathLike) -> dict:
    """metadata.json of an RTL directory; ValueError (one line) when it is missing or bad."""
    out = Path(out_dir)
    path = out / "metadata.json"
    if not path.is_file():
        raise ValueError(f"{out}: not an RTL directory (no metadata.json); run `eatt rtl` first")
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    for key in ("config", "level", "top", "sources", "weights", "interface"):
        if key not in meta:
            raise ValueError(f"{path}: missing key '{key}'")
    for rel in [*meta["sources"], meta["weights"]]:
        if not (out / rel).is_file():
            raise ValueError(f"{out}: metadata lists {rel} but the file is missing")
    top_text = (out / meta["sources"][0]).read_text()
    if f"module {meta['top']}" not in top_text:
        raise ValueError(f"{out}: top module {meta['top']} is not in {meta['sources'][0]}")
    return meta


def load_weights(out_dir: str | os.PathLike, meta: dict) -> CoreWeights:
    with np.load(Path(out_dir) / meta["weights"]) as data:
        return CoreWeights(*(data[name].astype(np.int64) for name in CoreWeights.NAMES))
