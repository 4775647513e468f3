// folded_score_lane: one score lane of the folded attention engine, the partial score of one
// (query, key) pair over SIMD features of a head.
//
// As the golden model (eatt.quant.golden.l1_scores_int and GoldenCore.scores):
//
//   L1 = 1 (E-ATT, Eq. 10):  part = -sum_t |q[t] - k[t]|      subtract, negate, add only
//   L1 = 0 (vanilla):        part =  sum_t  q[t] * k[t]
//
// The engine (folded_attention.sv) runs LANES of these side by side, one key each, and adds
// the parts of the d_head / SIMD feature chunks of a head into the key's score. The Dense
// Synthesizer's lanes (L1 = 0, K_W = the weights' bits) take the hidden codes as q and a
// column of W_2 as k, over the dim / SIMD chunks of the whole token. SCORE_W (the
// golden score_bits) holds the whole score of a head, so a part never wraps. The terms are
// summed in a balanced tree as wide as a part needs (PART_W: a term's bits plus one per level,
// at most SCORE_W; exact, as the sum fits), then sign-extended to SCORE_W.
//
// LEVELS = 0: purely combinational; the caller accumulates and registers. LEVELS = N >= 1 (the
// engine's adder_levels): the terms are registered, and the tree after every N of its levels
// but the last (folded_adder_tree.sv); `part` then follows the inputs by STAGES cycles.
//
// Testbench: rtl_sim/tb/folded_score_lane/test_folded_score_lane.py.

`default_nettype none

module folded_score_lane #(
    parameter int SIMD    = 4,   // features per cycle
    parameter int QK_W    = 12,  // bits of each q feature, signed (golden qk_code_bits)
    parameter int K_W     = QK_W,  // bits of each k feature, signed (L1: QK_W)
    parameter int SCORE_W = 18,  // bits of the part, signed (golden score_bits)
    parameter int L1      = 1,   // 1: -sum |q - k| (E-ATT); 0: sum q * k (vanilla)
    parameter int LEVELS  = 0,   // 0: combinational; N: a register after every N adder levels
    // derived (not set by the caller)
    parameter int L       = (SIMD > 1) ? $clog2(SIMD) : 0,  // levels of the adder tree
    /* verilator lint_off UNUSEDPARAM */  // its latency, for the reader and the caller
    parameter int STAGES  = (LEVELS > 0) ? 1 + ((L > 0) ? (L - 1) / LEVELS : 0) : 0,
    /* verilator lint_on UNUSEDPARAM */
    // a term: -|q - k| >= -(2^QK_W - 1) in QK_W + 1 bits; q * k in QK_W + K_W bits
    parameter int TERM_W  = (L1 != 0) ? QK_W + 1 : QK_W + K_W,
    parameter int PART_W  = (TERM_W + L < SCORE_W) ? TERM_W + L : SCORE_W
) (
    /* verilator lint_off UNUSEDSIGNAL */  // LEVELS = 0 reads no clock
    input  wire logic                  clk,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic [SIMD*QK_W-1:0]  q,     // q[t] at [t*QK_W +: QK_W]
    input  wire logic [SIMD*K_W-1:0]   k,     // k[t] at [t*K_W +: K_W]
    output logic signed [SCORE_W-1:0]  part
);
    // q[t] * k[t] at its exact width
    function automatic logic signed [QK_W+K_W-1:0] product(
        input logic signed [QK_W-1:0] x, input logic signed [K_W-1:0] y);
        product = x * y;
    endfunction

    logic [SIMD*PART_W-1:0] terms;  // feature t's term at [t*PART_W +: PART_W]
    logic [PART_W-1:0]      sum;
    for (genvar t = 0; t < SIMD; t++) begin : g_term
        if (L1 != 0) begin : g_l1
            logic signed [QK_W:0] diff;  // q[t] - k[t], one bit wider
            assign diff = (QK_W + 1)'($signed(q[t*QK_W +: QK_W]))
                        - (QK_W + 1)'($signed(k[t*K_W +: QK_W]));
            assign terms[t*PART_W +: PART_W] = (diff < 0) ? PART_W'(diff) : -(PART_W'(diff));
        end else begin : g_dot
            assign terms[t*PART_W +: PART_W] =
                PART_W'(product(q[t*QK_W +: QK_W], k[t*K_W +: K_W]));
        end
    end
    folded_adder_tree #(.TERMS(SIMD), .W(PART_W), .LEVELS(LEVELS)) u_tree (
        .clk(clk), .terms(terms), .sum(sum)
    );
    assign part = SCORE_W'($signed(sum));
endmodule

`default_nettype wire
