"""Emitter of the attention level (the whole core, outputs z).

After the front end (emit_alignment): the masks, softmax weights from the exp table, the sum
and the numerator, the recip_normalize.sv leaf, and the output projection W_O.
"""

from __future__ import annotations

import numpy as np

from eatt.config import CoreConfig
from eatt.quant.golden import CoreWeights, derive_formats, exp_table, recip_table
from eatt.rtl_sim.emit_alignment import _front_end
from eatt.rtl_sim.emit_top import _const_matmul, _control, _header, _ports
from eatt.rtl_sim.pipeline import _Pipe
from eatt.rtl_sim.sv_writer import _lit, _loops, _Writer
from eatt.rtl_sim.widths import attention_widths, mask_bits


def _sum_numerator(out: _Writer, cfg: CoreConfig, tb: int, nb: int) -> None:
    """E = sum_j e and N = sum_j e_j V_j as one loop (a chain over j): adder_levels 0."""
    heads, lq, lk, dh = cfg.heads, cfg.len_q, cfg.len_k, cfg.d_head
    out("    always_comb begin")
    body = [
        f"e_sum_c[h][i] = {tb}'d0;",
        f"for (int t = 0; t < {dh}; t++) numer_c[h][i][t] = {_lit(0, nb)};",
        f"for (int j = 0; j < {lk}; j++) begin",
        f"    e_sum_c[h][i] = e_sum_c[h][i] + {tb}'(e2[h][i][j]);",
        f"    for (int t = 0; t < {dh}; t++) begin",
        "        numer_c[h][i][t] = numer_c[h][i][t]",
        f"            + {nb}'($signed({{1'b0, e2[h][i][j]}})) * {nb}'(v2[j][h*{dh} + t]);",
        "    end",
        "end",
    ]
    _loops(out, 8, [("h", heads), ("i", lq)], body)
    out("    end")


RECIP_NORMALIZE_FILE = "recip_normalize.sv"
#: the multiplier leaf recip_normalize instantiates when pipelined (PIPE 2)
PIECE_MULT_FILE = "piece_mult.sv"


def recip_normalize(
    out: _Writer,
    name: str,
    w: dict,
    lanes: int,
    recip_frac: int,
    at: str,
    numer: list[str],
    o: str = "o_norm",
    e_sum: str = "e_sum",
    recip: str | None = None,
    recip_index: str = "recip_index",
) -> None:
    """One recip_normalize leaf (rtl_sim/rtl/recip_normalize.sv) for the sum `e_sum{at}` and
    the numerators `numer` (lane t = numer[t]): it drives `recip_index{at}`, reads
    `recip{at} = recip_rom(recip_index{at})` back and writes `o_norm{at}` (lane t at
    [t*attn_bits +: attn_bits]). The caller declares those arrays and the ROM; every
    parameter is a golden width (attention_widths / window_widths). The other names are the
    arrays of a registered lookup (_registered_recip): ``recip`` given, R comes from it (no ROM
    read here) and the leaf's own index goes to ``recip_index``, unused."""
    params = {
        "LANES": lanes,
        "SUM_W": w["total_bits"],
        "NUMER_W": w["numer_bits"],
        "INDEX_W": w["recip_index_bits"],
        "RECIP_W": w["recip_bits"],
        "RECIP_FRAC": recip_frac,
        "PROD_W": w["prod_bits"],
        "OUT_W": w["attn_bits"],
    }
    if recip is None:
        recip = "recip"
        out(f"    assign recip{at} = recip_rom(recip_index{at});")
    out("    recip_normalize #(")
    out("        " + ", ".join(f".{k}({v})" for k, v in params.items()))
    out(f"    ) u_recip_normalize_{name} (")
    out(f"        .clk(ap_clk), .e_sum({e_sum}{at}), .numer({{{', '.join(reversed(numer))}}}),")
    out(f"        .recip_index({recip_index}{at}), .recip({recip}{at}), .o({o}{at})")
    out("    );")


def _registered_recip(out: _Writer, pipe, cfg: CoreConfig, w: dict) -> None:
    """adder_levels >= 1: a register between the reciprocal lookup and the product N x R (the
    critical path of the unrolled core at OSU 0.18 um ran from E through the leading-one
    search, the table and the product into O). A one-lane leaf on E gives the table index; R,
    E and N are registered (one inner stage of the normalize segment); the leaves on the
    registered values compute O (their own index output unused)."""
    heads, lq, dh = cfg.heads, cfg.len_q, cfg.dim // cfg.heads
    ki, rb, tb, nb, ob = (w[k] for k in ("recip_index_bits", "recip_bits", "total_bits",
                                         "numer_bits", "attn_bits"))  # fmt: skip
    out("    /* verilator lint_off UNUSEDSIGNAL */  // the index leaf's O, the O leaves' index")
    out(f"    logic [{ob - 1}:0] o_index_leaf [{heads}][{lq}];")
    out(f"    logic [{ki - 1}:0] recip_index_unused [{heads}][{lq}];")
    out("    /* verilator lint_on UNUSEDSIGNAL */")
    for h, i in np.ndindex(heads, lq):
        recip_normalize(
            out, f"index_h{h}_q{i}", w, 1, cfg.recip_frac, f"[{h}][{i}]", [f"{nb}'d0"],
            o="o_index_leaf",
        )  # fmt: skip
    pipe.extra = max(pipe.extra, 1)
    out(f"    logic [{rb - 1}:0] recip_nrm_r0 [{heads}][{lq}];")
    out(f"    logic [{tb - 1}:0] e_sum_nrm_r0 [{heads}][{lq}];")
    out(f"    logic signed [{nb - 1}:0] numer_nrm_r0 [{heads}][{lq}][{dh}];")
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{pipe.base}]) begin")
    body = ["recip_nrm_r0[h][i] <= recip[h][i];", "e_sum_nrm_r0[h][i] <= e_sum[h][i];"]
    _loops(out, 12, [("h", heads), ("i", lq)], body)
    _loops(out, 12, [("h", heads), ("i", lq), ("t", dh)],
           ["numer_nrm_r0[h][i][t] <= numer[h][i][t];"])  # fmt: skip
    out("        end")
    out("    end")
    for h, i in np.ndindex(heads, lq):
        at = f"[{h}][{i}]"
        out(f"    // O of head {h}, query {i} from the registered R, E and N")
        recip_normalize(
            out, f"h{h}_q{i}", w, dh, cfg.recip_frac, at,
            [f"numer_nrm_r0{at}[{t}]" for t in range(dh)],
            e_sum="e_sum_nrm_r0", recip="recip_nrm_r0", recip_index="recip_index_unused",
        )  # fmt: skip


#: register stages of the generated attention datapath: Q/K/V, scores, exp, sum/numerator,
#: normalized attention output, output projection
ATTENTION_LATENCY = 6


def _masks(out: _Writer, cfg: CoreConfig, stage: int) -> bool:
    """The mask inputs (length, offset), registered along the pipeline with their vector up to
    the scores stage `stage`, and visible[i][j] (golden visible_keys) from them; False when the
    core takes none."""
    bits = mask_bits(cfg)
    if not bits:
        return False
    lq, lk = cfg.len_q, cfg.len_k
    out("    // ---- masks: the per-call inputs travel with their vector to the softmax")
    for name, b in bits.items():
        out(f"    logic [{b - 1}:0] {name}_r [{stage + 1}];")
        out("    always_ff @(posedge ap_clk) begin")
        out(f"        if (stage_en[0]) {name}_r[0] <= {name};")
        for k in range(1, stage + 1):
            out(f"        if (stage_en[{k}]) {name}_r[{k}] <= {name}_r[{k - 1}];")
        out("    end")
    out(f"    logic visible [{lq}][{lk}];  // key j gets weight in query i's softmax")
    for i in range(lq):
        for j in range(lk):
            terms = []
            if "length" in bits:
                terms.append(f"(length_r[{stage}] > {bits['length']}'d{j})")
            if "offset" in bits and j > i:
                terms.append(f"(offset_r[{stage}] >= {bits['offset']}'d{j - i})")
            cond = " && ".join(terms) or "1'b1"
            out(f"    assign visible[{i}][{j}] = {cond};")
    out("")
    return True


def _attention_sv(
    cfg: CoreConfig, weights: CoreWeights, top: str, opts: dict, levels: int
) -> tuple[str, _Pipe]:
    f = derive_formats(cfg)
    w = attention_widths(cfg, f)
    lq, lk, dim, heads, dh = cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, cfg.d_head
    sb, vb, db, iw = w["score_bits"], w["v_bits"], w["diff_bits"], w["exp_index_bits"]
    ew, tb, nb, ki = w["exp_bits"], w["total_bits"], w["numer_bits"], w["recip_index_bits"]
    rb, ob = w["recip_bits"], w["attn_bits"]
    oab, zb, rf = w["out_acc_bits"], w["out_bits"], cfg.recip_frac
    out = _Writer()  # the datapath first (it numbers the register stages), the header last
    pipe = _Pipe(out, levels)
    _front_end(out, pipe, cfg, weights, True, opts)

    v0 = pipe.delay_array("v0", f"logic signed [{vb - 1}:0]", [("j", lk), ("d", dim)])
    stage = pipe.close("scores")
    out(f"    // ---- stage {stage}: scores and V")
    out(f"    logic signed [{sb - 1}:0] s1 [{heads}][{lq}][{lk}];")
    out(f"    logic signed [{vb - 1}:0] v1 [{lk}][{dim}];")
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{stage}]) begin")
    _loops(out, 12, [("h", heads), ("i", lq), ("j", lk)], ["s1[h][i][j] <= sc[h][i][j];"])
    _loops(out, 12, [("j", lk), ("d", dim)], [f"v1[j][d] <= {v0}[j][d];"])
    out("        end")
    out("    end")
    out("")
    masked = _masks(out, cfg, stage)
    out(f"    // ---- softmax weights: e = EXP[(max_j S - S) >> {f.exp_shift}], 0 past the table")
    out(f"    //      ({cfg.exp_table_size} entries, EXP[0] = 2**{cfg.exp_frac})")
    if masked:
        out("    //      max and weights over the visible keys only (key 0 always is); e = 0 for")
        out("    //      a hidden key")
    out.rom("exp_rom", iw, ew, exp_table(cfg))
    out(f"    logic signed [{sb - 1}:0] smax [{heads}][{lq}];")
    out(f"    logic signed [{sb}:0] sdiff [{heads}][{lq}][{lk}];  // in [0, {2 * f.score_bound}]")
    out(f"    logic [{ew - 1}:0] ec [{heads}][{lq}][{lk}];")
    out("    always_comb begin")
    visible = "visible[i][j] && " if masked else ""
    exp = f"exp_rom({iw}'(sdiff[h][i][j][{db - 1}:0] >> {f.exp_shift}))"
    body = [
        "smax[h][i] = s1[h][i][0];",
        f"for (int j = 1; j < {lk}; j++) begin",
        f"    if ({visible}s1[h][i][j] > smax[h][i]) smax[h][i] = s1[h][i][j];",
        "end",
        f"for (int j = 0; j < {lk}; j++) begin",
        f"    sdiff[h][i][j] = {sb + 1}'(smax[h][i]) - {sb + 1}'(s1[h][i][j]);",
        (
            f"    ec[h][i][j] = visible[i][j] ? {exp} : {ew}'d0;"
            if masked
            else f"    ec[h][i][j] = {exp};"
        ),
        "end",
    ]
    _loops(out, 8, [("h", heads), ("i", lq)], body)
    out("    end")
    out("")
    stage = pipe.close("softmax")
    out(f"    // ---- stage {stage}: softmax weights and V")
    out(f"    logic [{ew - 1}:0] e2 [{heads}][{lq}][{lk}];")
    out(f"    logic signed [{vb - 1}:0] v2 [{lk}][{dim}];")
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{stage}]) begin")
    _loops(out, 12, [("h", heads), ("i", lq), ("j", lk)], ["e2[h][i][j] <= ec[h][i][j];"])
    _loops(out, 12, [("j", lk), ("d", dim)], ["v2[j][d] <= v1[j][d];"])
    out("        end")
    out("    end")
    out("")
    out(f"    // ---- sum E = sum_j e_j ({tb} bits) and numerator N = sum_j e_j V_j ({nb} bits)")
    out(f"    logic [{tb - 1}:0] e_sum_c [{heads}][{lq}];")
    out(f"    logic signed [{nb - 1}:0] numer_c [{heads}][{lq}][{dh}];")
    if pipe.levels:  # balanced trees over j (the products e * V are not cut)
        for h, i in np.ndindex(heads, lq):
            leaves = [(f"{tb}'(e2[{h}][{i}][{j}])", 0, 0, 0) for j in range(lk)]
            root = pipe.tree(f"e_sum_{h}_{i}", leaves, True, tb, signed=False)
            pipe.result(f"e_sum_c[{h}][{i}]", tb, f"e_sum_{h}_{i}", root, tb, signed=False)
            for t in range(dh):
                leaves = [
                    (f"{nb}'($signed({{1'b0, e2[{h}][{i}][{j}]}})) * {nb}'(v2[{j}][{h * dh + t}])",)
                    + (0, 0, 0)
                    for j in range(lk)
                ]
                root = pipe.tree(f"numer_{h}_{i}_{t}", leaves, True, nb)
                pipe.result(f"numer_c[{h}][{i}][{t}]", nb, f"numer_{h}_{i}_{t}", root, nb)
    else:
        _sum_numerator(out, cfg, tb, nb)
    stage = pipe.close("sum")
    out("")
    out(f"    // ---- stage {stage}: sum and numerator")
    out(f"    logic [{tb - 1}:0] e_sum [{heads}][{lq}];")
    out(f"    logic signed [{nb - 1}:0] numer [{heads}][{lq}][{dh}];")
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{stage}]) begin")
    _loops(out, 12, [("h", heads), ("i", lq)], ["e_sum[h][i] <= e_sum_c[h][i];"])
    _loops(out, 12, [("h", heads), ("i", lq), ("t", dh)], ["numer[h][i][t] <= numer_c[h][i][t];"])
    out("        end")
    out("    end")
    out("")
    out("    // ---- normalize O = N / E per head and query (recip_normalize.sv): the leaf finds")
    out(f"    //      the table index of E, recip_rom ({cfg.recip_table_size} entries) gives R,")
    out(f"    //      O = clamp(round_half_up(N * R / 2**({rf} + floor(log2 E)))) into {ob} bits")
    out.rom("recip_rom", ki, rb, recip_table(cfg))
    out(f"    logic [{dh * ob - 1}:0] o_norm [{heads}][{lq}];  // O[t] at [t*{ob} +: {ob}]")
    out(f"    logic [{ki - 1}:0] recip_index [{heads}][{lq}];")
    out(f"    logic [{rb - 1}:0] recip [{heads}][{lq}];")
    if pipe.levels:
        _registered_recip(out, pipe, cfg, w)
    else:
        for h, i in np.ndindex(heads, lq):
            recip_normalize(
                out, f"h{h}_q{i}", w, dh, rf, f"[{h}][{i}]",
                [f"numer[{h}][{i}][{t}]" for t in range(dh)],
            )  # fmt: skip
    out("")
    stage = pipe.close("normalize")
    out(f"    // ---- stage {stage}: attention output O, heads concatenated in column order")
    out(f"    logic signed [{ob - 1}:0] o4 [{lq}][{dim}];")
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{stage}]) begin")
    _loops(
        out,
        12,
        [("h", heads), ("i", lq), ("t", dh)],
        [f"o4[i][h*{dh} + t] <= o_norm[h][i][t*{ob} +: {ob}];"],
    )
    out("        end")
    out("    end")
    out("")
    out(f"    // ---- output projection Z = O @ W_O: {oab}-bit accumulators")
    out(f"    //      (|acc| <= out_acc_bound = {f.out_acc_bound})")
    out(f"    logic signed [{oab - 1}:0] za [{lq}][{dim}];")
    _const_matmul(out, pipe, "za", "o4", lq, weights.wo, oab, "W_O")
    out("")
    stage = pipe.close("output")
    out(
        f"    // ---- stage {stage}: requantize (>>> {f.out_shift}) into {zb} bits, output register"
    )
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{stage}]) begin")
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
    head = _Writer()
    _header(head, cfg, top, "whole core (attention outputs)", w, pipe)
    _ports(
        head,
        cfg,
        top,
        [
            f"Z: {lq} x {dim} signed {zb}-bit outputs (after W_O and out_shift),",
            f"   element (i, d) at [(i*{dim} + d)*{zb} +: {zb}]; held until the next result",
        ],
        "z",
        lq * dim * zb,
        mask_bits(cfg),
    )
    _control(head, pipe.latency, "z")
    head.lines += out.lines
    return head.text(), pipe
