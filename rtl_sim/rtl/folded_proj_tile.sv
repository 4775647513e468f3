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
// With SELECT = 1 a binarized input only selects weight rows to add: no multiplier. Every
// term is sign-extended to ACC_W bits, which hold the whole accumulated dot product (the
// caller passes the golden accumulator width), so nothing wraps.
//
// Purely combinational: the caller accumulates `part` over the row tiles and registers it.
//
// Testbench: rtl_sim/tb/folded_proj_tile/test_folded_proj_tile.py.

`default_nettype none

module folded_proj_tile #(
    parameter int SIMD   = 4,   // rows of the tile (input features)
    parameter int COLS   = SIMD,  // columns of the tile (output columns)
    parameter int A_W    = 8,   // bits of each input a[r], signed (SELECT = 0)
    parameter int W_W    = 8,   // bits of each weight, signed
    parameter int ACC_W  = 24,  // bits of each partial sum, signed
    parameter int SELECT = 0    // 1: rows selected by sel (E-ATT); 0: a[r] * w[r][c]
) (
    /* verilator lint_off UNUSEDSIGNAL */  // SELECT reads sel only, the products a only
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

    for (genvar c = 0; c < COLS; c++) begin : g_col
        logic signed [ACC_W-1:0] sum;

        always_comb begin
            sum = '0;
            for (int r = 0; r < SIMD; r++) begin
                if (SELECT != 0) begin
                    if (sel[r]) sum = sum + ACC_W'($signed(w[(r*COLS + c)*W_W +: W_W]));
                end else begin
                    sum = sum + ACC_W'(product(a[r*A_W +: A_W], w[(r*COLS + c)*W_W +: W_W]));
                end
            end
        end
        assign part[c*ACC_W +: ACC_W] = sum;
    end
endmodule

`default_nettype wire
