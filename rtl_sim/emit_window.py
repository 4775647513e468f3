"""The windowed unit's generated SystemVerilog top (kind window): its widths and ports, and the
emitter of window_attention.sv (the query projection, the window's scores, position penalty,
softmax over the window rows and the weighted values, around the hand-written controller and
RAM). rtl_sim/window.py writes the folder and simulates it; it re-exports these."""

from __future__ import annotations

import json

from eatt.config import CoreConfig
from eatt.mechanisms import mechanism_of
from eatt.quant.golden import CoreWeights, exp_table, recip_table
from eatt.quant.window import (
    core_config,
    derive_window_formats,
    has_focus,
    penalty_levels,
    penalty_table,
)
from eatt.rtl_sim.eatt_datapath import l1_score_row_parameters
from eatt.rtl_sim.emit_attention import recip_normalize
from eatt.rtl_sim.sv_writer import _lit, _Writer

TOP = "window_attention"


#: cycles from the accepted start to ap_done beyond the window rows (window_ctrl.sv)
LATENCY_EXTRA = 3


def window_widths(cfg: CoreConfig) -> dict[str, int]:
    """Every width of the unit: read from the golden model's formats (derive_window_formats)."""
    wf = derive_window_formats(cfg)
    f = wf.core
    return {
        "in_bits": f.in_bits,
        "acc_bits": f.q_acc_bits,
        "q_shift": f.q_shift,
        "qk_bits": wf.qk_code_bits,
        "v_bits": wf.v_code_bits,
        "count_bits": wf.count_bits,
        "score_bits": f.score_bits,
        "penalty_bits": wf.penalty_bits,
        "logit_bits": wf.logit_bits,
        "diff_bits": wf.diff_bits,
        "exp_shift": f.exp_shift,
        "exp_index_bits": wf.exp_index_bits,
        "exp_table_bits": wf.exp_table_bits,
        "exp_bits": f.exp_bits,
        "weighted_bits": wf.weighted_bits,
        "total_bits": wf.esum_bits,
        "numer_bits": wf.numer_bits,
        "recip_index_bits": f.recip_index_bits,
        "recip_bits": wf.recip_bits,
        "prod_bits": wf.prod_bits,
        "attn_bits": wf.attn_bits,
        "window_rows": wf.window_rows,
        "addr_bits": wf.addr_bits,
        "len_bits": wf.len_bits,
        "w_bits": wf.w_bits,
        "dist_bits": wf.dist_bits,
        "index_bits": wf.index_bits,
        "rows_bits": wf.rows_bits,
        "g_bits": wf.g_bits,
        "focus_numer_bits": wf.focus_numer_bits,
        "focus_prod_bits": wf.focus_prod_bits,
    }


def window_interface(cfg: CoreConfig) -> dict:
    """Ports of the window top (metadata.json "interface")."""
    w = window_widths(cfg)
    dim, qb, vb, cb = cfg.dim, w["qk_bits"], w["v_bits"], cfg.count_bits

    def port(bits: int, text: str, signed: bool = False, shape=None) -> dict:
        entry = {"width": bits, "signed": signed, "description": text}
        if shape is not None:
            entry["shape"] = shape
        return entry

    inputs = {
        "x": {
            **port(dim * cfg.in_bits, "the query (decoder state)", True, [dim]),
            "element_bits": cfg.in_bits,
            "packing": "element d at bits [d*in_bits +: in_bits]",
        },
        "p": port(w["addr_bits"], "window centre, 0 <= p < len"),
        "w": port(w["w_bits"], "effective half-width, 0 <= w <= window_d"),
        "len": port(w["len_bits"], "valid memory rows, 1 <= len <= len_k"),
    }
    if cfg.position == "flexible":
        inputs["g"] = port(w["g_bits"], "Flexible strength level: g = level / g_levels")
    return {
        "protocol": "ap_ctrl_hs",
        "clock": "ap_clk",
        "reset": {"name": "ap_rst", "active": "high", "kind": "synchronous"},
        "control": ["ap_start", "ap_done", "ap_idle", "ap_ready"],
        "inputs": inputs,
        "memory_write": {
            "description": (
                "one row per cycle with mem_we high, while the unit is idle (ap_idle); "
                "rows are read by later steps until rewritten"
            ),
            "mem_we": port(1, "write enable"),
            "mem_addr": port(w["addr_bits"], "row 0 .. len_k - 1"),
            "mem_k": {
                **port(dim * qb, "key codes of the row", True, [dim]),
                "element_bits": qb,
                "packing": "element d at bits [d*qk_bits +: qk_bits]",
            },
            "mem_v": {
                **port(dim * vb, "value codes of the row", True, [dim]),
                "element_bits": vb,
                "packing": "element d at bits [d*v_bits +: v_bits]",
            },
            "mem_cnt": port(cb, "row count >= 1 (L0Drop: N - N' for the zero row)"),
        },
        "outputs": {
            "o": {
                **port(dim * cfg.v_bits, "attention output O (V's format)", True, [dim]),
                "element_bits": cfg.v_bits,
                "packing": "element d at bits [d*attn_bits +: attn_bits]",
                "valid": "o_vld",
            },
            **(
                {
                    "f": {
                        **port(
                            cfg.heads * w["addr_bits"],
                            "focus F per head: the next step's p (Flexible Eq. 4)",
                            False,
                            [cfg.heads],
                        ),
                        "element_bits": w["addr_bits"],
                        "packing": "head h at bits [h*addr_bits +: addr_bits]",
                        "valid": "o_vld",
                    }
                }
                if has_focus(cfg)
                else {}
            ),
        },
        "widths": w,
    }


def _window_sv(cfg: CoreConfig, weights: CoreWeights) -> str:
    wf = derive_window_formats(cfg)
    f = wf.core
    w = window_widths(cfg)
    dim, heads, dh, lk = cfg.dim, cfg.heads, cfg.d_head, cfg.len_k
    ib, ab, qb, vb, cb = w["in_bits"], w["acc_bits"], w["qk_bits"], w["v_bits"], cfg.count_bits
    sb, pnb, lb, db = w["score_bits"], w["penalty_bits"], w["logit_bits"], w["diff_bits"]
    eib, ekb, ew, ceb = w["exp_index_bits"], w["exp_table_bits"], w["exp_bits"], w["weighted_bits"]
    tb, nb, ki, rb, ob = (
        w[k] for k in ("total_bits", "numer_bits", "recip_index_bits", "recip_bits", "attn_bits")
    )  # fmt: skip
    rows, adb, lnb, wb, dsb = (
        w["window_rows"], w["addr_bits"], w["len_bits"], w["w_bits"], w["dist_bits"]
    )  # fmt: skip
    ixb, rwb, gb = w["index_bits"], w["rows_bits"], w["g_bits"]
    rf = cfg.recip_frac
    flexible = cfg.position == "flexible"
    row_bits = dim * (qb + vb) + cb

    out = _Writer()
    out(f"// {TOP}: windowed cross-attention unit, one decoding step ({cfg.window_score} scores).")
    out("// GENERATED by eatt.rtl_sim.window from the config and integer weights: do not edit.")
    out("// Bit-exact with eatt.quant.window.WindowGolden(cfg, weights).forward.")
    out(f"// config: {json.dumps(cfg.to_dict(), sort_keys=True)}")
    out(f"// widths: {json.dumps(w, sort_keys=True)}")
    out(f"// Latency rows + {LATENCY_EXTRA} cycles, next start after rows cycles (window_ctrl.sv);")
    out("// memory write port and packing: docs/window.md, metadata.json.")
    out("")
    out("`default_nettype none")
    out("")
    out(f"module {TOP} (")
    out("    input  wire logic ap_clk,")
    out("    input  wire logic ap_rst,  // synchronous, active high")
    out("    input  wire logic ap_start,")
    out("    output logic      ap_done,")
    out("    output logic      ap_idle,")
    out("    output logic      ap_ready,")
    out(f"    // query x: {dim} signed {ib}-bit, element d at [d*{ib} +: {ib}]")
    out(f"    input  wire logic [{dim * ib - 1}:0] x,")
    out(f"    input  wire logic [{adb - 1}:0] p,    // window centre, p < len")
    out(f"    input  wire logic [{wb - 1}:0] w,    // half-width, w <= {cfg.window_d}")
    out(f"    input  wire logic [{lnb - 1}:0] len,  // valid memory rows, 1 .. {lk}")
    if flexible:
        out(f"    input  wire logic [{gb - 1}:0] g,    // strength level 0 .. {cfg.g_levels}")
    out("    // memory write port: row mem_addr <= {mem_cnt, mem_v, mem_k} while idle")
    out("    input  wire logic mem_we,")
    out(f"    input  wire logic [{adb - 1}:0] mem_addr,")
    out(f"    input  wire logic [{dim * qb - 1}:0] mem_k,  // element d at [d*{qb} +: {qb}]")
    out(f"    input  wire logic [{dim * vb - 1}:0] mem_v,  // element d at [d*{vb} +: {vb}]")
    out(f"    input  wire logic [{cb - 1}:0] mem_cnt,      // count >= 1")
    out(f"    // attention output O: {dim} signed {ob}-bit, element d at [d*{ob} +: {ob}]")
    out(f"    output logic [{dim * ob - 1}:0] o,")
    if flexible:
        out(f"    // focus F (Flexible Eq. 4): {heads} row(s), head h at [h*{adb} +: {adb}]")
        out(f"    output logic [{heads * adb - 1}:0] f,")
    out("    output logic o_vld  // = ap_done")
    out(");")
    out(f"    logic [{adb - 1}:0] raddr;")
    out("    logic rd_en, item_vld, red_go, nrm_go;")
    out("    /* verilator lint_off UNUSEDSIGNAL */")
    out("    logic item_last;  // the controller's own; the buffer needs only item_idx")
    out("    /* verilator lint_on UNUSEDSIGNAL */")
    out(f"    logic [{ixb - 1}:0] item_idx;")
    out(f"    logic [{dsb - 1}:0] item_dist;")
    out(f"    logic [{rwb - 1}:0] red_rows;")
    out("")
    out(f"    window_ctrl #(.AB({adb}), .WB({wb}), .LB({lnb}), .DB({dsb}), .IB({ixb}), .RB({rwb}))")
    out("    u_ctrl (")
    out("        .ap_clk(ap_clk), .ap_rst(ap_rst), .ap_start(ap_start), .ap_done(ap_done),")
    out("        .ap_idle(ap_idle), .ap_ready(ap_ready), .p(p), .w(w), .len(len), .rd_en(rd_en),")
    out("        .raddr(raddr), .item_vld(item_vld), .item_idx(item_idx), .item_last(item_last),")
    out("        .item_dist(item_dist), .red_go(red_go), .red_rows(red_rows), .nrm_go(nrm_go)")
    out("    );")
    out("    assign o_vld = ap_done;")
    out("")
    out(f"    logic [{row_bits - 1}:0] rdata;")
    out(f"    window_ram #(.DEPTH({lk}), .AB({adb}), .WIDTH({row_bits})) u_ram (")
    out("        .clk(ap_clk), .we(mem_we), .waddr(mem_addr), .wdata({mem_cnt, mem_v, mem_k}),")
    out("        .re(rd_en), .raddr(raddr), .rdata(rdata)")
    out("    );")
    out("")
    # -- Q projection, in the accepting cycle --------------------------------------------------
    out(f"    // ---- Q = ({'f(x)' if mechanism_of(cfg).binarized else 'x'} W_Q) >>> {f.q_shift}, "
        "registered with the accepted start")  # fmt: skip
    out(f"    logic signed [{ib - 1}:0] xe [{dim}];")
    out(f"    logic signed [{ab - 1}:0] qa [{dim}];")
    out(f"    logic signed [{qb - 1}:0] q [{dim}];")
    if mechanism_of(cfg).binarized:
        out(f"    logic xb [{dim}];  // Eq. 4: x > tau (tau_int = {cfg.tau_int})")
    out("    always_comb begin")
    out(f"        for (int d = 0; d < {dim}; d++) begin")
    out(f"            xe[d] = x[d*{ib} +: {ib}];")
    if mechanism_of(cfg).binarized:
        out(f"            xb[d] = {ib + 2}'(xe[d]) > {_lit(cfg.tau_int, ib + 2)};")
    out("        end")
    out("    end")
    for j in range(dim):
        terms = []
        for d in range(dim):
            wv = int(weights.wq[d, j])
            if wv == 0:
                continue
            if mechanism_of(cfg).binarized:
                terms.append(f"(xb[{d}] ? {_lit(wv, ab)} : {_lit(0, ab)})")
            else:
                terms.append(f"{ab}'(xe[{d}]) * {_lit(wv, ab)}")
        out(f"    assign qa[{j}] = {' + '.join(terms) if terms else _lit(0, ab)};")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (ap_ready) begin")
    out(f"            for (int d = 0; d < {dim}; d++) q[d] <= {qb}'(qa[d] >>> {f.q_shift});")
    out("        end")
    out("    end")
    if flexible:
        out(f"    logic [{gb - 1}:0] g_r;")
        out("    always_ff @(posedge ap_clk) if (ap_ready) g_r <= g;")
    out("")
    # -- one row per cycle: score, position term, buffer, running max ---------------------------
    pt = penalty_table(cfg, f)
    out("    // ---- position term P[level][|s - p|] in score units (docs/window.md)")
    sel_bits = (gb if flexible else 0) + dsb
    out(f"    function automatic logic [{pnb - 1}:0] pen_rom(input logic [{sel_bits - 1}:0] idx);")
    out("        case (idx)")
    for level in range(penalty_levels(cfg)):
        for dist in range(cfg.window_d + 1):
            value = int(pt[level, dist])
            if value:
                code = (level << dsb) | dist
                out(f"            {sel_bits}'d{code}: pen_rom = {pnb}'d{value};")
    out(f"            default: pen_rom = {pnb}'d0;")
    out("        endcase")
    out("    endfunction")
    out("")
    out(f"    logic signed [{qb - 1}:0] ke [{dim}];")
    out(f"    logic signed [{vb - 1}:0] ve [{dim}];")
    out(f"    logic [{cb - 1}:0] ce;")
    out(f"    logic [{pnb - 1}:0] pen;")
    out(f"    logic signed [{sb - 1}:0] sc [{heads}];")
    out(f"    logic signed [{lb - 1}:0] lg [{heads}];")
    if mechanism_of(cfg).binarized:  # the cores' score leaf, at the full range of the codes
        _window_l1_scores(out, cfg, qb, sb)
    out("    always_comb begin")
    out(f"        for (int d = 0; d < {dim}; d++) begin")
    out(f"            ke[d] = rdata[d*{qb} +: {qb}];")
    out(f"            ve[d] = rdata[{dim * qb} + d*{vb} +: {vb}];")
    out("        end")
    out(f"        ce = rdata[{dim * (qb + vb)} +: {cb}];")
    out(f"        pen = pen_rom({'{g_r, item_dist}' if flexible else 'item_dist'});")
    out(f"        for (int h = 0; h < {heads}; h++) begin")
    if not mechanism_of(cfg).binarized:  # the dot product's multiply-accumulate
        out(f"            sc[h] = {_lit(0, sb)};")
        out(f"            for (int t = 0; t < {dh}; t++) begin")
        out(f"                sc[h] = sc[h] + {sb}'(q[h*{dh} + t]) * {sb}'(ke[h*{dh} + t]);")
        out("            end")
    out(f"            lg[h] = {lb}'(sc[h]) - {lb}'($signed({{1'b0, pen}}));")
    out("        end")
    out("    end")
    out("")
    out(f"    // ---- window buffer ({rows} rows) and running max of the logits. Pass two reads")
    out("    //      every entry: past the window the exp select is masked by the row's valid")
    out("    //      flag (j < red_rows), but the count and V rows enter products, and 0 * X is")
    out("    //      X in a 4-state simulation, so those two are reset (free in FDRE)")
    out(f"    logic signed [{lb - 1}:0] sbuf [{rows}][{heads}];")
    out(f"    logic signed [{vb - 1}:0] vbuf [{rows}][{dim}];")
    out(f"    logic [{cb - 1}:0] cbuf [{rows}];")
    out(f"    logic signed [{lb - 1}:0] mx [{heads}];")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (item_vld) begin")
    out(f"            for (int h = 0; h < {heads}; h++) begin")
    out("                sbuf[item_idx][h] <= lg[h];")
    out(f"                if (item_idx == {ixb}'d0 || lg[h] > mx[h]) mx[h] <= lg[h];")
    out("            end")
    out("        end")
    out("    end")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (ap_rst) begin")
    out(f"            for (int j = 0; j < {rows}; j++) begin")
    out(f"                for (int d = 0; d < {dim}; d++) vbuf[j][d] <= '0;")
    out("                cbuf[j] <= '0;")
    out("            end")
    out("        end else if (item_vld) begin")
    out(f"            for (int d = 0; d < {dim}; d++) vbuf[item_idx][d] <= ve[d];")
    out("            cbuf[item_idx] <= ce;")
    out("        end")
    out("    end")
    out("")
    # -- pass two over the buffer ----------------------------------------------------------------
    out(f"    // ---- e = count * EXP[(max - S') >> {f.exp_shift}] (0 past the table and past the")
    out(f"    //      window), E = sum e ({tb} bits), N = sum e V ({nb} bits)")
    out.rom("exp_rom", ekb, ew, exp_table(core_config(cfg)))
    out(f"    logic [{db - 1}:0] df;")
    out(f"    logic [{eib - 1}:0] ei;")
    out(f"    logic [{ew - 1}:0] ex;")
    out(f"    logic [{ceb - 1}:0] cw;")
    out(f"    logic [{tb - 1}:0] e_sum_c [{heads}];")
    out(f"    logic signed [{nb - 1}:0] numer_c [{heads}][{dh}];")
    if flexible:  # the focus numerator sum_j e_j j, beside N (Flexible Eq. 4)
        fnb = w["focus_numer_bits"]
        out(f"    logic signed [{fnb - 1}:0] fnum_c [{heads}];")
    out("    always_comb begin")
    out(f"        for (int h = 0; h < {heads}; h++) begin")
    out(f"            e_sum_c[h] = {tb}'d0;")
    if flexible:
        out(f"            fnum_c[h] = {_lit(0, fnb)};")
    out(f"            for (int t = 0; t < {dh}; t++) numer_c[h][t] = {_lit(0, nb)};")
    out(f"            for (int j = 0; j < {rows}; j++) begin")
    out(f"                df = {db}'({lb + 1}'(mx[h]) - {lb + 1}'(sbuf[j][h]));")
    out(f"                ei = {eib}'(df >> {f.exp_shift});")
    inside = f"{eib + 1}'(ei) < {eib + 1}'d{cfg.exp_table_size}"
    out(f"                ex = (j < {rwb + 1}'(red_rows) && {inside})")
    out(f"                    ? exp_rom({ekb}'(ei)) : {ew}'d0;")
    out(f"                cw = {ceb}'(ex) * {ceb}'(cbuf[j]);")
    out(f"                e_sum_c[h] = e_sum_c[h] + {tb}'(cw);")
    if flexible:  # e_j j as cw shifted by each set bit of the constant j: adders, no multiplier
        out(f"                for (int b = 0; b < {ixb}; b++) begin")
        out(f"                    if (j[b]) fnum_c[h] = fnum_c[h] + ({fnb}'(cw) << b);")
        out("                end")
    out(f"                for (int t = 0; t < {dh}; t++) begin")
    out("                    numer_c[h][t] = numer_c[h][t]")
    out(f"                        + {nb}'($signed({{1'b0, cw}})) * {nb}'(vbuf[j][h*{dh} + t]);")
    out("                end")
    out("            end")
    out("        end")
    out("    end")
    out(f"    logic [{tb - 1}:0] e_sum [{heads}];")
    out(f"    logic signed [{nb - 1}:0] numer [{heads}][{dh}];")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (red_go) begin")
    out(f"            for (int h = 0; h < {heads}; h++) begin")
    out("                e_sum[h] <= e_sum_c[h];")
    out(f"                for (int t = 0; t < {dh}; t++) numer[h][t] <= numer_c[h][t];")
    out("            end")
    out("        end")
    out("    end")
    out("")
    if flexible:
        _window_focus_registers(out, cfg, w)
    # -- reciprocal and normalization: the core's leaf (recip_normalize.sv), once per head -----
    out("    // ---- normalize O = N / E per head (recip_normalize.sv): the leaf finds the table")
    out(f"    //      index of E, recip_rom ({cfg.recip_table_size} entries) gives R,")
    out(f"    //      O = clamp(round_half_up(N * R / 2**({rf} + floor(log2 E)))) into {ob} bits")
    out.rom("recip_rom", ki, rb, recip_table(core_config(cfg)))
    out(f"    logic [{ki - 1}:0] recip_index [{heads}];")
    out(f"    logic [{rb - 1}:0] recip [{heads}];")
    lanes, leaf = dh, w
    if flexible:  # the focus numerator is one more lane of the same leaf (one reciprocal)
        lanes += 1
        nw = max(nb, w["focus_numer_bits"])
        leaf = {**w, "numer_bits": nw, "prod_bits": max(w["prod_bits"], w["focus_prod_bits"])}
    out(f"    logic [{lanes * ob - 1}:0] o_norm [{heads}];  // lane t at [t*{ob} +: {ob}]")
    for h in range(heads):
        numer = [f"numer[{h}][{t}]" for t in range(dh)]
        if flexible:  # lane dh: F_N; every lane sign-extended to the leaf's NUMER_W
            numer = [f"{nw}'({n})" for n in numer] + [f"{nw}'(fnum[{h}])"]
        recip_normalize(out, f"h{h}", leaf, lanes, rf, f"[{h}]", numer)
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (nrm_go) begin")
    out(
        f"            for (int h = 0; h < {heads}; h++) "
        f"o[h*{dh * ob} +: {dh * ob}] <= o_norm[h][{dh * ob - 1}:0];"
    )
    out("        end")
    out("    end")
    if flexible:
        _window_focus(out, cfg, w)
    out("endmodule")
    out("")
    out("`default_nettype wire")
    return out.text()


def _window_focus_registers(out: _Writer, cfg: CoreConfig, w: dict) -> None:
    """What the focus F needs beside O's reduction (Flexible Eq. 4, WindowGolden.focus): the
    step's lo (the row of buffer entry 0) and rows, held per step like e_sum, and F_N =
    sum_j e_j j registered with red_go (its sum is in pass two, j a constant per entry)."""
    heads, adb, ixb, rwb = cfg.heads, w["addr_bits"], w["index_bits"], w["rows_bits"]
    out("    // ---- focus F = lo + min(round(F_N / E), rows - 1), F_N = sum_j e_j j (Flexible")
    out("    //      Eq. 4, the next p): buffer entry 0 is row lo; lo and rows held per step")
    out(f"    logic [{adb - 1}:0] raddr_d, lo_buf, lo_red;")
    out(f"    logic [{rwb - 1}:0] rows_red;")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (rd_en) raddr_d <= raddr;")
    out(f"        if (item_vld && item_idx == {ixb}'d0) lo_buf <= raddr_d;")
    out("        if (red_go) begin")
    out("            lo_red   <= lo_buf;")
    out("            rows_red <= red_rows;")
    out("        end")
    out("    end")
    out(f"    logic signed [{w['focus_numer_bits'] - 1}:0] fnum [{heads}];")
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (red_go) for (int h = 0; h < {heads}; h++) fnum[h] <= fnum_c[h];")
    out("    end")


def _window_focus(out: _Writer, cfg: CoreConfig, w: dict) -> None:
    """F = lo + min(lane dh of the reciprocal leaf, rows - 1) per head, with O."""
    heads, dh, ob = cfg.heads, cfg.d_head, w["attn_bits"]
    adb, rwb = w["addr_bits"], w["rows_bits"]
    cmp = max(ob, rwb) + 1
    out(f"    logic [{ob - 1}:0] f_norm [{heads}], f_off [{heads}];")
    out("    always_comb begin")
    out(f"        for (int h = 0; h < {heads}; h++) begin")
    out(f"            f_norm[h] = o_norm[h][{dh * ob} +: {ob}];  // >= 0: F_N and R are")
    out(f"            f_off[h] = ({cmp}'(f_norm[h]) < {cmp}'(rows_red))")
    out(f"                ? f_norm[h] : {ob}'(rows_red - {rwb}'d1);")
    out("        end")
    out("    end")
    out("    always_ff @(posedge ap_clk) begin")
    out("        if (nrm_go) begin")
    out(f"            for (int h = 0; h < {heads}; h++)")
    out(f"                f[h*{adb} +: {adb}] <= lo_red + {adb}'(f_off[h]);")
    out("        end")
    out("    end")


def _window_l1_scores(out: _Writer, cfg: CoreConfig, qb: int, sb: int) -> None:
    """sc[h] = -sum_t |q - k| of the row on rdata by the cores' l1_score_row leaf, one per
    head; q and K are codes of the whole qk range here (no weight bounds), so every lane's
    |q - k| bound is 2**qk_bits - 1."""
    heads, dh = cfg.heads, cfg.d_head
    full = (-(2 ** (qb - 1)), 2 ** (qb - 1) - 1)
    p = l1_score_row_parameters([full] * dh, [full] * dh, qb, sb)
    sw = p["SCORE_W"]
    out("    // ---- scores (Eq. 10): S = -sum_t |q - k| per head, l1_score_row.sv")
    out(f"    logic [{dh * qb - 1}:0] q_row [{heads}], k_row [{heads}];  // lane t: [h*{dh} + t]")
    out(f"    logic signed [{sw - 1}:0] score [{heads}];  // sign-extended into sc")
    for h in range(heads):
        for name, src in (("q", "q"), ("k", "ke")):
            lanes = ", ".join(f"{src}[{c}]" for c in reversed(range(h * dh, (h + 1) * dh)))
            out(f"    assign {name}_row[{h}] = {{{lanes}}};")
        params = f".LANES({dh}), .IN_W({qb}), .SCORE_W({sw}), .DIFF_MAX({p['DIFF_MAX']})"
        out(f"    l1_score_row #({params})")
        out(f"        u_score_h{h} (.q(q_row[{h}]), .k(k_row[{h}]), .score(score[{h}]));")
        out(f"    assign sc[{h}] = {sb}'(score[{h}]);")
