"""The windowed unit's generated SystemVerilog top (kind window): its widths and ports, and the
emitter of window_attention.sv, a thin wrapper that sets the hand-written unit's parameters
(rtl_sim/rtl/window_unit.sv: scores, position term, window buffer, softmax and weighted values)
and holds the config's constants as four small modules the unit instantiates (W_Q's projection
and the position, exp and reciprocal lookups). rtl_sim/window.py writes the folder and
simulates it; it re-exports these."""

from __future__ import annotations

import json

import numpy as np

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


#: the hand-written unit the generated top wraps (rtl_sim/rtl/window_unit.sv)
UNIT_FILE = "window_unit.sv"


def _window_sv(cfg: CoreConfig, weights: CoreWeights) -> str:
    """The generated top: window_unit with this config's parameters, and the config's
    constants as four small modules the unit instantiates (the query projection with W_Q and
    the position, exp and reciprocal tables as case-statement lookups)."""
    w = window_widths(cfg)
    flexible = cfg.position == "flexible"
    dim, heads, lk = cfg.dim, cfg.heads, cfg.len_k
    ib, qb, vb, cb, ob = w["in_bits"], w["qk_bits"], w["v_bits"], cfg.count_bits, w["attn_bits"]
    adb, lnb, wb, gb = w["addr_bits"], w["len_bits"], w["w_bits"], w["g_bits"]
    params = _unit_parameters(cfg, w)

    out = _Writer()
    out(f"// {TOP}: windowed cross-attention unit, one decoding step ({cfg.window_score} scores):")
    out(f"// {UNIT_FILE} with this config's parameters, and the config's constants (W_Q and the")
    out("// position, exp and reciprocal tables) as the four modules below it.")
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
    if not flexible:
        out("    /* verilator lint_off UNUSEDSIGNAL */  // local-p: the unit's focus output")
        out(f"    logic [{heads * adb - 1}:0] f;")
        out("    /* verilator lint_on UNUSEDSIGNAL */")
    out("    window_unit #(")
    out(",\n".join(f"        .{k}({v})" for k, v in params.items()))
    out("    ) u_unit (")
    out("        .ap_clk(ap_clk), .ap_rst(ap_rst), .ap_start(ap_start), .ap_done(ap_done),")
    out("        .ap_idle(ap_idle), .ap_ready(ap_ready), .x(x), .p(p), .w(w), .len(len),")
    tie = "g" if flexible else "'0"  # local-p: no strength level
    out(f"        .g({tie}), .mem_we(mem_we), .mem_addr(mem_addr),")
    out("        .mem_k(mem_k), .mem_v(mem_v), .mem_cnt(mem_cnt), .o(o), .f(f), .o_vld(o_vld)")
    out("    );")
    out("endmodule")
    out("")
    _q_projection(out, cfg, weights, w)
    pt = penalty_table(cfg, derive_window_formats(cfg).core)
    sel_bits = (gb if flexible else 0) + w["dist_bits"]
    pen = np.zeros(2**sel_bits, dtype=np.int64)
    for level in range(penalty_levels(cfg)):
        for dist in range(cfg.window_d + 1):
            pen[(level << w["dist_bits"]) | dist] = int(pt[level, dist])
    _rom_module(out, "window_pen_rom", "position term P[level][|s - p|] in score units (idx "
                "{g level, distance})", sel_bits, w["penalty_bits"], pen, 1)  # fmt: skip
    _rom_module(out, "window_exp_rom", f"exp table, {heads * cfg.window_rows} reads (head h, "
                "buffer row j: read h * rows + j)", w["exp_table_bits"], w["exp_bits"],
                exp_table(core_config(cfg)), heads * cfg.window_rows)  # fmt: skip
    _rom_module(out, "window_recip_rom", f"reciprocal table ({cfg.recip_table_size} entries), "
                "a read per head", w["recip_index_bits"], w["recip_bits"],
                recip_table(core_config(cfg)), heads)  # fmt: skip
    out("`default_nettype wire")
    return out.text()


def _unit_parameters(cfg: CoreConfig, w: dict) -> dict[str, int]:
    """window_unit.sv's parameters: the config's sizes and the golden widths."""
    f = derive_window_formats(cfg).core
    flexible = cfg.position == "flexible"
    binarized = mechanism_of(cfg).binarized
    qb, sb = w["qk_bits"], w["score_bits"]
    full = (-(2 ** (qb - 1)), 2 ** (qb - 1) - 1)  # q and K: codes of the whole range
    l1 = l1_score_row_parameters([full] * cfg.d_head, [full] * cfg.d_head, qb, sb)
    nb, pb = w["numer_bits"], w["prod_bits"]
    if flexible:  # the focus numerator is one more lane of the same leaf (one reciprocal)
        nb, pb = max(nb, w["focus_numer_bits"]), max(pb, w["focus_prod_bits"])
    names = {
        "IB": "in_bits", "AB": "acc_bits", "QB": "qk_bits", "VB": "v_bits", "SB": "score_bits",
        "PNB": "penalty_bits", "LB": "logit_bits", "DB": "diff_bits", "EIB": "exp_index_bits",
        "EKB": "exp_table_bits", "EW": "exp_bits", "CEB": "weighted_bits", "TB": "total_bits",
        "NB": "numer_bits", "KI": "recip_index_bits", "RB": "recip_bits", "OB": "attn_bits",
        "ADB": "addr_bits", "LNB": "len_bits", "WB": "w_bits", "DSB": "dist_bits",
        "IXB": "index_bits", "RWB": "rows_bits",
    }  # fmt: skip
    return {
        "DIM": cfg.dim, "HEADS": cfg.heads, "DH": cfg.d_head, "LK": cfg.len_k,
        "ROWS": w["window_rows"], "CB": cfg.count_bits,
        **{k: w[v] for k, v in names.items()},
        "GW": max(w["g_bits"], 1) if flexible else 1,
        "FNB": max(w["focus_numer_bits"], 1) if flexible else 1,
        "Q_SHIFT": f.q_shift, "EXP_SHIFT": f.exp_shift, "EXP_SIZE": cfg.exp_table_size,
        "RECIP_FRAC": cfg.recip_frac, "BINARIZED": int(binarized), "FLEXIBLE": int(flexible),
        "L1_SCORE_W": l1["SCORE_W"] if binarized else 1,
        "L1_DIFF_MAX": l1["diff_max"][0] if binarized else 1,  # the same in every lane
        "LEAF_LANES": cfg.d_head + int(flexible), "LEAF_NB": nb, "LEAF_PB": pb,
    }  # fmt: skip


def _q_projection(out: _Writer, cfg: CoreConfig, weights: CoreWeights, w: dict) -> None:
    """window_q_proj: qa = f(x) W_Q before the shift (the unit shifts and registers it), W_Q
    as constants (zero weights dropped); f is the binarization x > tau (Eq. 4) where the
    mechanism binarizes (a select per weight), else x itself (a product per weight)."""
    dim, ib, ab = cfg.dim, w["in_bits"], w["acc_bits"]
    binarized = mechanism_of(cfg).binarized
    what = "f(x) W_Q, f(x) = x > tau (Eq. 4)" if binarized else "x W_Q"
    out(f"// window_q_proj: {what}, before the unit's shift; W_Q as constants")
    out("module window_q_proj (")
    out(f"    input  wire logic [{dim * ib - 1}:0] x,   // element d at [d*{ib} +: {ib}]")
    out(f"    output logic      [{dim * ab - 1}:0] qa   // element j at [j*{ab} +: {ab}]")
    out(");")
    out(f"    logic signed [{ib - 1}:0] xe [{dim}];")
    if binarized:
        out(f"    logic xb [{dim}];  // Eq. 4: x > tau (tau_int = {cfg.tau_int})")
    out("    always_comb begin")
    out(f"        for (int d = 0; d < {dim}; d++) begin")
    out(f"            xe[d] = x[d*{ib} +: {ib}];")
    if binarized:
        out(f"            xb[d] = {ib + 2}'(xe[d]) > {_lit(cfg.tau_int, ib + 2)};")
    out("        end")
    out("    end")
    for j in range(dim):
        terms = []
        for d in range(dim):
            wv = int(weights.wq[d, j])
            if wv == 0:
                continue
            if binarized:
                terms.append(f"(xb[{d}] ? {_lit(wv, ab)} : {_lit(0, ab)})")
            else:
                terms.append(f"{ab}'(xe[{d}]) * {_lit(wv, ab)}")
        out(f"    assign qa[{j * ab} +: {ab}] = {' + '.join(terms) if terms else _lit(0, ab)};")
    out("endmodule")
    out("")


def _rom_module(
    out: _Writer, name: str, what: str, index_bits: int, value_bits: int, table, reads: int
) -> None:
    """A constant table as a module of `reads` combinational lookups (read r: addr and data
    at [r*bits +: bits]), 0 outside the entries."""
    out(f"// {name}: {what}")
    out(f"module {name} (")
    out(f"    input  wire logic [{reads * index_bits - 1}:0] addr,")
    out(f"    output logic      [{reads * value_bits - 1}:0] data")
    out(");")
    out.rom("lookup", index_bits, value_bits, np.asarray(table))
    out(f"    for (genvar r = 0; r < {reads}; r++) begin : g_read")
    out(f"        assign data[r*{value_bits} +: {value_bits}] = "
        f"lookup(addr[r*{index_bits} +: {index_bits}]);")  # fmt: skip
    out("    end")
    out("endmodule")
    out("")
