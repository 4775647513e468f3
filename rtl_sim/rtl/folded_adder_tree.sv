// folded_adder_tree: the sum of TERMS signed terms of W bits in a balanced tree, optionally
// pipelined, for the folded engine's projection tiles (folded_proj_tile.sv) and score lanes
// (folded_score_lane.sv).
//
// The terms are padded with zeros to the next power of two (L = ceil(log2 TERMS) levels) and
// added pairwise at W bits: the callers size W so that the sum fits (two's complement sums are
// exact modulo 2^W, so the intermediate sums may wrap and the result is still the sum).
//
// LEVELS = 0: purely combinational. LEVELS = N >= 1 (the build's adder_levels): the terms are
// registered (unless REG_TERMS = 0: the caller registered what they are made of), and the tree
// after every N of its levels but the last; `sum` then follows the terms by STAGES cycles.
//
// Testbench: rtl_sim/tb/folded_adder_tree/test_folded_adder_tree.py.

`default_nettype none

module folded_adder_tree #(
    parameter int TERMS  = 4,   // terms to add
    parameter int W      = 8,   // bits of each term and of the sum, signed
    parameter int LEVELS = 0,   // 0: combinational; N: a register after every N adder levels
    parameter int REG_TERMS = 1,  // with LEVELS: 1 registers the terms, 0 leaves it to the caller
    // derived (not set by the caller)
    parameter int L      = (TERMS > 1) ? $clog2(TERMS) : 0,  // levels of the tree
    /* verilator lint_off UNUSEDPARAM */  // its latency, for the reader and the caller
    parameter int STAGES = (LEVELS > 0) ? REG_TERMS + ((L > 0) ? (L - 1) / LEVELS : 0) : 0
    /* verilator lint_on UNUSEDPARAM */
) (
    /* verilator lint_off UNUSEDSIGNAL */  // LEVELS = 0 reads no clock
    input  wire logic              clk,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic [TERMS*W-1:0] terms,  // term t at [t*W +: W]
    output logic      [W-1:0]       sum
);
    localparam int N = 1 << L;  // the tree's leaves: the terms, zeros after them

    // level l: its 2^(L-l) values; d before its register
    for (genvar l = 0; l <= L; l++) begin : g_lvl
        localparam bit CUT = (LEVELS > 0)
                           && ((l == 0 && REG_TERMS != 0) || (l > 0 && l < L && l % LEVELS == 0));
        logic [(N >> l)*W-1:0] d, v;
        if (l == 0) begin : g_terms
            assign d = (N*W)'(terms);  // zero-extended: the padding terms are 0
        end else begin : g_sums
            for (genvar i = 0; i < (N >> l); i++) begin : g_sum
                assign d[i*W +: W] = g_lvl[l-1].v[2*i*W +: W] + g_lvl[l-1].v[(2*i+1)*W +: W];
            end
        end
        if (CUT) begin : g_reg
            always_ff @(posedge clk) v <= d;
        end else begin : g_wire
            assign v = d;
        end
    end
    assign sum = g_lvl[L].v;
endmodule

`default_nettype wire
