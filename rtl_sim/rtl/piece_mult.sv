// piece_mult: a x b exactly, in multipliers no wider than a DSP block's 18 x 18 bits, their
// products registered: the leaf behind every multiply the pipelined builds (adder_levels >= 1)
// cut for a clock (recip_normalize.sv's N x R at PIPE 2, folded_attend.sv's e x V,
// folded_proj_tile.sv's wide products).
//
// a (signed) is cut into PIECE-bit pieces, unsigned but the signed top one; each piece times b
// (signed, B_W <= 18 for one DSP multiplier a piece) is registered; `product` is their sum,
// each shifted into place: a x b of the inputs one cycle earlier, at its exact width. The
// pieces' adder is left combinational: the caller registers `product` (or feeds its own adder
// tree) in the next cycle, so on an FPGA no fabric adder shares a cycle with the trip to the
// DSP row and back.
//
// Testbench: rtl_sim/tb/piece_mult/test_piece_mult.py.

`default_nettype none

module piece_mult #(
    parameter int A_W   = 26,  // bits of a, signed (cut into pieces)
    parameter int B_W   = 14,  // bits of b, signed (an unsigned operand: {1'b0, it})
    parameter int PIECE = 17,  // bits of a piece: an 18-bit signed multiplier port less its sign
    // derived (not set by the caller)
    parameter int NP    = (A_W - 1 + PIECE - 1) / PIECE  // pieces, >= 1
) (
    input  wire logic                     clk,
    input  wire logic signed [A_W-1:0]    a,
    input  wire logic signed [B_W-1:0]    b,
    output logic      signed [A_W+B_W-1:0] product  // a x b of the last cycle's inputs
);
    localparam int TOP_W = A_W - (NP - 1) * PIECE;  // the signed top piece's bits
    localparam int PP_W  = PIECE + 1 + B_W;          // a piece's product
    logic signed [PP_W-1:0] pp_q [NP];
    /* verilator lint_off UNUSEDSIGNAL */  // the top piece is read from a itself
    logic [NP*PIECE-1:0] a_wide;  // a's bits, padded (no select outside it)
    /* verilator lint_on UNUSEDSIGNAL */
    assign a_wide = (NP * PIECE)'(a);
    always_ff @(posedge clk) begin
        for (int k = 0; k < NP - 1; k++) begin
            pp_q[k] <= PP_W'($signed({1'b0, a_wide[k*PIECE +: PIECE]}) * b);
        end
        pp_q[NP-1] <= PP_W'($signed(a[A_W-1 -: TOP_W]) * b);
    end
    always_comb begin
        product = '0;
        for (int k = 0; k < NP; k++) begin
            product = product + ((A_W + B_W)'(pp_q[k]) <<< (k * PIECE));
        end
    end
endmodule

`default_nettype wire
