// folded_proj_tile: one SIMD x COLS tile of a projection, the partial sums of COLS output
// columns over SIMD input rows, for the folded attention engine (folded_proj_walk.sv).
//
// The projections of the golden model (eatt.quant.golden.GoldenCore.project_qk / project_v /
// project_out) are token x weight-matrix products. The folded engine walks the (dim x dim)
// weights in SIMD x COLS tiles, one per cycle; this leaf gives, for the tile's rows r and
// columns c,
//
//   SELECT = 1 (E-ATT Q and K, Eq. 6-9):  part[c] = sum_r (sel[r] ? w[r][c] : 0)
//   SELECT = 0 (every other projection):  part[c] = sum_r a[r] * w[r][c]
//
// With SELECT = 1 a binarized input only selects weight rows to add: no multiplier. The adder
// tree of each column is as wide as the tile's own sums need (PART_W: a term's bits plus one per
// level, at most ACC_W) and its sum is sign-extended to ACC_W, the golden accumulator width of
// the whole dot product: nothing wraps (two's complement sums are exact modulo 2^PART_W, and the
// sum fits).
//
// LEVELS = 0: purely combinational; the caller registers `part`. LEVELS = N >= 1 (the build's
// adder_levels): the terms (products, selected rows) are registered, and the tree after every N
// of its levels but the last (folded_adder_tree.sv); `part` then follows the inputs by STAGES
// cycles. MUL_REGS = 3 (with LEVELS >= 1, SELECT = 0): every product is piece_mult's with a
// register on each side of its multiplier (its own copy of w[r][c] and a[r] in front, the
// product once more after), so the way from the walk's registers to the DSP row and back is
// register to register; two more STAGES.
//
// Testbench: rtl_sim/tb/folded_proj_tile/test_folded_proj_tile.py.

`default_nettype none

module folded_proj_tile #(
    parameter int SIMD   = 4,   // rows of the tile (input features)
    parameter int COLS   = SIMD,  // columns of the tile (output columns)
    parameter int A_W    = 8,   // bits of each input a[r], signed (SELECT = 0)
    parameter int W_W    = 8,   // bits of each weight, signed
    parameter int ACC_W  = 24,  // bits of each partial sum, signed
    parameter int SELECT = 0,   // 1: rows selected by sel (E-ATT); 0: a[r] * w[r][c]
    parameter int LEVELS = 0,   // 0: combinational; N: a register after every N adder levels
    parameter int MUL_REGS = 1, // cycles of a product (LEVELS >= 1, SELECT = 0): 1 or 3
    // derived (not set by the caller)
    parameter int L      = (SIMD > 1) ? $clog2(SIMD) : 0,  // levels of the adder tree
    /* verilator lint_off UNUSEDPARAM */  // its latency, for the reader and the caller
    parameter int STAGES = (LEVELS > 0)
                         ? 1 + ((L > 0) ? (L - 1) / LEVELS : 0) + ((SELECT == 0) ? MUL_REGS - 1 : 0)
                         : 0,
    /* verilator lint_on UNUSEDPARAM */
    parameter int TERM_W = (SELECT != 0) ? W_W : A_W + W_W,
    parameter int PART_W = (TERM_W + L < ACC_W) ? TERM_W + L : ACC_W
) (
    /* verilator lint_off UNUSEDSIGNAL */  // LEVELS = 0 reads no clock, SELECT sel or a only
    input  wire logic                      clk,
    input  wire logic [SIMD-1:0]           sel,   // binarized input bits (SELECT = 1)
    input  wire logic [SIMD*A_W-1:0]       a,     // a[r] at [r*A_W +: A_W] (SELECT = 0)
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic [SIMD*COLS*W_W-1:0]  w,     // w[r][c] at [(r*COLS + c)*W_W +: W_W]
    output logic      [COLS*ACC_W-1:0]     part   // part[c] at [c*ACC_W +: ACC_W]
);
    // a[r] * w[r][c] at its exact width (a multiplier as narrow as its operands)
    function automatic logic signed [A_W+W_W-1:0] product(
        input logic signed [A_W-1:0] x, input logic signed [W_W-1:0] y);
        product = x * y;
    endfunction

    // LEVELS >= 1 and an operand wider than an 18-bit multiplier port, or MUL_REGS 3: each
    // product is cut into multipliers of at most 18 x 18 bits whose products are registered in
    // place of the term (piece_mult.sv; the tree then registers no terms of its own)
    localparam int NP = (A_W - 1 + 17 - 1) / 17;  // a's pieces (piece_mult NP)
    localparam bit PIECES = (SELECT == 0) && (LEVELS > 0) && (NP > 1 || MUL_REGS > 1);
    for (genvar c = 0; c < COLS; c++) begin : g_col
        logic [SIMD*PART_W-1:0] terms;  // row r's term at [r*PART_W +: PART_W]
        logic [PART_W-1:0]      sum;
        for (genvar r = 0; r < SIMD; r++) begin : g_term
            if (SELECT != 0) begin : g_sel
                assign terms[r*PART_W +: PART_W] = sel[r]
                    ? PART_W'($signed(w[(r*COLS + c)*W_W +: W_W])) : '0;
            end else if (PIECES) begin : g_pieces
                logic signed [A_W+W_W-1:0] whole;  // a x w, its pieces registered
                piece_mult #(.A_W(A_W), .B_W(W_W), .REGS(MUL_REGS)) u_mul (
                    .clk(clk), .a(a[r*A_W +: A_W]), .b(w[(r*COLS + c)*W_W +: W_W]),
                    .product(whole)
                );
                assign terms[r*PART_W +: PART_W] = PART_W'(whole);
            end else begin : g_mul
                assign terms[r*PART_W +: PART_W] =
                    PART_W'(product(a[r*A_W +: A_W], w[(r*COLS + c)*W_W +: W_W]));
            end
        end
        folded_adder_tree #(
            .TERMS(SIMD), .W(PART_W), .LEVELS(LEVELS), .REG_TERMS(PIECES ? 0 : 1)
        ) u_tree (
            .clk(clk), .terms(terms), .sum(sum)
        );
        assign part[c*ACC_W +: ACC_W] = ACC_W'($signed(sum));
    end
endmodule

`default_nettype wire
