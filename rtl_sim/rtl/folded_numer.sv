// folded_numer: the numerators of the folded engine's attention unit (folded_attend.sv): per
// query, head and feature chunk, N[t] = sum_j e[j] V[j][t] over the key blocks, LANES keys
// and SIMD features a cycle (eatt.quant.golden.GoldenCore.weighted_values before O = N / E).
//
// e (the lanes' softmax weights, unsigned) and v (each lane's SIMD-wide V word, signed) are
// the memories' words as read; their products e V, at their exact width, are registered
// (prod_r) EXTRA + 1 cycles later, summed over the lanes in a balanced tree, and N takes the
// sum when `acc` is high (N starts from it when `first` is: the chunk's first key block).
// `numer` holds N between its updates.
//
// EXTRA = 0: the products are formed from e and v directly. EXTRA >= 2 (the build's
// adder_levels): e and v are registered READS times as read (two: on an ECP5 the first is
// the block RAM's output register, rtl_sim/ecp5_outreg.py), then each product is made in
// multipliers of at most 18 x 18 bits with their registers (piece_mult.sv REGS EXTRA -
// READS): on an FPGA each
// piece is one MULT18X18D and the trips between the fabric and the DSP row are register to
// register.
//
// Testbench: rtl_sim/tb/folded_numer/test_folded_numer.py.

`default_nettype none

module folded_numer #(
    parameter int LANES   = 2,   // keys a cycle
    parameter int SIMD    = 2,   // features a cycle
    parameter int EXP_W   = 11,  // bits of a weight e, unsigned (exp_bits)
    parameter int V_W     = 12,  // bits of a V code, signed (v_code_bits)
    parameter int NUMER_W = 26,  // bits of N, signed (numer_bits: the sum fits)
    parameter int EXTRA   = 0,   // 0, or >= READS + 1: cycles before prod_r (above)
    parameter int READS   = 1    // EXTRA > 0: registers on e and v as read (1 or 2)
) (
    input  wire logic                        clk,
    input  wire logic                        rst,    // synchronous, active high
    input  wire logic [LANES*EXP_W-1:0]      e,      // lane l's e at [l*EXP_W +: EXP_W]
    input  wire logic [LANES*SIMD*V_W-1:0]   v,      // lane l's feature t at [(l*SIMD+t)*V_W]
    input  wire logic                        acc,    // N takes this cycle's sum over the lanes
    input  wire logic                        first,  // ... as its first term
    output logic      [SIMD*NUMER_W-1:0]     numer   // N[t] at [t*NUMER_W +: NUMER_W]
);
    for (genvar t = 0; t < SIMD; t++) begin : g_feature
        logic signed [NUMER_W-1:0] total;            // the lanes' sum of e V
        logic signed [NUMER_W-1:0] n_acc;            // N so far
        logic signed [EXP_W+V_W:0] prod_r [LANES];   // e V of each lane, registered
        logic signed [EXP_W+V_W:0] prod_d [LANES];   // what prod_r takes
        logic [LANES*NUMER_W-1:0]  terms;
        for (genvar l = 0; l < LANES; l++) begin : g_lane
            logic [EXP_W-1:0]      e_l;
            logic signed [V_W-1:0] v_l;
            assign e_l = e[l*EXP_W +: EXP_W];
            assign v_l = v[(l*SIMD + t)*V_W +: V_W];
            if (EXTRA > 1) begin : g_pieces  // e and V registered, then the pieces
                logic [EXP_W-1:0]      e_q;
                logic signed [V_W-1:0] v_q;
                if (READS > 1) begin : g_read2
                    logic [EXP_W-1:0]      e_a;
                    logic signed [V_W-1:0] v_a;
                    always_ff @(posedge clk) {e_a, v_a, e_q, v_q} <= {e_l, v_l, e_a, v_a};
                end else begin : g_read1
                    always_ff @(posedge clk) {e_q, v_q} <= {e_l, v_l};
                end
                piece_mult #(.A_W(V_W), .B_W(EXP_W + 1), .REGS(EXTRA - READS)) u_mul (
                    .clk(clk), .a(v_q), .b({1'b0, e_q}), .product(prod_d[l])
                );
            end else begin : g_whole
                // e V at its exact width (e unsigned, V signed), written out: as a function
                // call, Verilator 5 took e as signed here at 6 x 5 bits (Icarus did not)
                assign prod_d[l] = $signed({1'b0, e_l}) * v_l;
            end
            always_ff @(posedge clk) prod_r[l] <= prod_d[l];
            assign terms[l*NUMER_W +: NUMER_W] = NUMER_W'(prod_r[l]);
        end
        folded_adder_tree #(.TERMS(LANES), .W(NUMER_W)) u_sum (
            .clk(clk), .terms(terms), .sum(total)
        );
        always_ff @(posedge clk) begin
            if (rst) n_acc <= '0;
            else if (acc) n_acc <= (first ? NUMER_W'(0) : n_acc) + total;
        end
        assign numer[t*NUMER_W +: NUMER_W] = n_acc;
    end
endmodule

`default_nettype wire
