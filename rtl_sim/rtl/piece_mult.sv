// piece_mult: a x b exactly, in multipliers no wider than a DSP block's 18 x 18 bits, their
// products registered: the leaf behind every multiply the pipelined builds (adder_levels >= 1)
// cut for a clock (recip_normalize.sv's N x R at PIPE 2, folded_numer.sv's e x V,
// folded_proj_tile.sv's wide products).
//
// a (signed) is cut into PIECE-bit pieces, unsigned but the signed top one; each piece times b
// (signed, B_W <= 18 for one DSP multiplier a piece) is registered; `product` is their sum,
// each shifted into place, at its exact width: a x b of the inputs REGS cycles earlier. The
// pieces' adder is left combinational: the caller registers `product` (or feeds its own adder
// tree) in the next cycle, so on an FPGA no fabric adder shares a cycle with the trip to the
// DSP row and back.
//
// REGS = 1: the products registered at the multipliers. REGS = 3: a register on each side of
// each multiplier as well: the piece of a and a copy of b in front of it (the copies kept from
// being merged: each multiplier's own, so the placer may put them beside it) and its product
// once more before the sum, so the trips between the fabric and the DSP row are register to
// register and the multiplier's own path is short at both ends.
//
// Testbench: rtl_sim/tb/piece_mult/test_piece_mult.py.

`default_nettype none

module piece_mult #(
    parameter int A_W   = 26,  // bits of a, signed (cut into pieces)
    parameter int B_W   = 14,  // bits of b, signed (an unsigned operand: {1'b0, it})
    parameter int PIECE = 17,  // bits of a piece: an 18-bit signed multiplier port less its sign
    parameter int REGS  = 1,   // cycles from a, b to product: 1 or 3 (registers beside the DSP)
    // derived (not set by the caller)
    parameter int NP    = (A_W - 1 + PIECE - 1) / PIECE  // pieces, >= 1
) (
    input  wire logic                      clk,
    input  wire logic signed [A_W-1:0]     a,
    input  wire logic signed [B_W-1:0]     b,
    output logic      signed [A_W+B_W-1:0] product  // a x b of the inputs REGS cycles ago
);
    localparam int TOP_W = A_W - (NP - 1) * PIECE;  // the signed top piece's bits
    localparam int PP_W  = PIECE + 1 + B_W;          // a piece's product
    /* verilator lint_off UNUSEDSIGNAL */  // the top piece is read from a itself
    logic [NP*PIECE-1:0] a_wide;  // a's bits, padded (no select outside it)
    /* verilator lint_on UNUSEDSIGNAL */
    logic signed [PP_W-1:0] pp [NP];  // the pieces' products as the sum reads them
    assign a_wide = (NP * PIECE)'(a);
    for (genvar k = 0; k < NP; k++) begin : g_piece
        localparam int W = (k == NP - 1) ? TOP_W : PIECE + 1;  // the piece, signed
        logic signed [W-1:0] x, x_q;
        logic signed [B_W-1:0] y_q;
        logic signed [PP_W-1:0] pp_q;
        if (k == NP - 1) begin : g_top
            assign x = a[A_W-1 -: TOP_W];
        end else begin : g_low
            assign x = $signed({1'b0, a_wide[k*PIECE +: PIECE]});
        end
        if (REGS >= 3) begin : g_beside
            logic signed [PP_W-1:0] pp_q2;
            (* keep *) always_ff @(posedge clk) {x_q, y_q} <= {x, b};
            always_ff @(posedge clk) begin
                pp_q <= PP_W'(x_q * y_q);
                pp_q2 <= pp_q;
            end
            assign pp[k] = pp_q2;
        end else begin : g_at
            assign {x_q, y_q} = {x, b};
            always_ff @(posedge clk) pp_q <= PP_W'(x_q * y_q);
            assign pp[k] = pp_q;
        end
    end
    always_comb begin
        product = '0;
        for (int k = 0; k < NP; k++) begin
            product = product + ((A_W + B_W)'(pp[k]) <<< (k * PIECE));
        end
    end
endmodule

`default_nettype wire
