// folded_score_lane: one score lane of the folded attention engine, the partial score of one
// (query, key) pair over SIMD features of a head.
//
// As the golden model (eatt.quant.golden.l1_scores_int and GoldenCore.scores):
//
//   L1 = 1 (E-ATT, Eq. 10):  part = -sum_t |q[t] - k[t]|      subtract, negate, add only
//   L1 = 0 (vanilla):        part =  sum_t  q[t] * k[t]
//
// The engine (folded_attention.sv) runs LANES of these side by side, one key each, and adds
// the parts of the d_head / SIMD feature chunks of a head into the key's score. SCORE_W (the
// golden score_bits) holds the whole score of a head, so a part never wraps.
//
// Purely combinational: the caller accumulates and registers.
//
// Testbench: rtl_sim/tb/folded_score_lane/test_folded_score_lane.py.

`default_nettype none

module folded_score_lane #(
    parameter int SIMD    = 4,   // features per cycle
    parameter int QK_W    = 12,  // bits of each q, k feature, signed (golden qk_code_bits)
    parameter int SCORE_W = 18,  // bits of the part, signed (golden score_bits)
    parameter int L1      = 1    // 1: -sum |q - k| (E-ATT); 0: sum q * k (vanilla)
) (
    input  wire logic [SIMD*QK_W-1:0]  q,     // q[t] at [t*QK_W +: QK_W]
    input  wire logic [SIMD*QK_W-1:0]  k,     // k[t] at [t*QK_W +: QK_W]
    output logic signed [SCORE_W-1:0]  part
);
    // q[t] * k[t] at its exact width
    function automatic logic signed [2*QK_W-1:0] product(
        input logic signed [QK_W-1:0] x, input logic signed [QK_W-1:0] y);
        product = x * y;
    endfunction

    logic signed [QK_W:0] diff [SIMD];  // q[t] - k[t], one bit wider (L1)

    for (genvar t = 0; t < SIMD; t++) begin : g_diff
        assign diff[t] = (QK_W + 1)'($signed(q[t*QK_W +: QK_W]))
                       - (QK_W + 1)'($signed(k[t*QK_W +: QK_W]));
    end

    always_comb begin
        part = '0;
        for (int t = 0; t < SIMD; t++) begin
            if (L1 != 0) begin
                part = part - ((diff[t] < 0) ? -(SCORE_W'(diff[t])) : SCORE_W'(diff[t]));
            end else begin
                part = part + SCORE_W'(product(q[t*QK_W +: QK_W], k[t*QK_W +: QK_W]));
            end
        end
    end
endmodule

`default_nettype wire
