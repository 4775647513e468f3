// recip_normalize: the softmax division O = N / E of one attention row, with a reciprocal table.
//
// E (SUM_W bits, unsigned, >= 1) is the sum of the softmax weights of one query, N (LANES
// numerators of NUMER_W bits, signed) the weighted sums of the values. As the golden model
// (eatt.quant.golden.reciprocal and GoldenCore.weighted_values, docs/golden.md steps 7-8):
//
//   n      = floor(log2 E)                        leading one of E
//   index  = the INDEX_W bits of E below its leading one (zero-padded when n < INDEX_W)
//   R      = RECIP[index]                          1 / (1.index) in RECIP_FRAC fraction bits
//   O[t]   = clamp((N[t] * R + 2**(RECIP_FRAC + n - 1)) >>> (RECIP_FRAC + n))  into OUT_W bits
//
// The reciprocal table depends on the config (recip_frac, recip_table_size), not on this
// module's structure, and can have up to 2**16 entries: it stays with the generated top, which
// holds it as a case-statement ROM, drives `recip` from `recip_index` (a combinational lookup:
// no loop, recip_index depends on e_sum only) and so keeps every config-specific constant in the
// generated file. A packed-vector parameter would do too, but 2**16 entries of up to 21 bits
// pass Verilator's 65,536-bit limit on a constant.
//
// PIPE = 0: purely combinational; the caller registers `o` (the attention top in its normalize
// stage, the window unit with nrm_go), so its pipeline and latency are the caller's. PIPE = 1
// (the folded engine's adder_levels; E must hold from two cycles before the index is used to
// the last O: the engine's E is fixed through its numerator phase): the leading one of E is
// registered, then the table index and the shift from it (recip_index two clock edges after
// E); N * R is registered without the rounding half, and `o` follows N and R by a cycle:
//   O[t] = (clamp(N[t] * R >>> (RECIP_FRAC + n - 1)) + 1) >>> 1
// with the clamp into [2 * OUT_MIN, 2 * OUT_MAX]. floor((p + 2**(s-1)) / 2**s) equals
// floor((floor(p / 2**(s-1)) + 1) / 2) for every integer p, so O is the golden model's, and no
// adder for the half follows the multiplier; the clamp's bounds are scaled to N * R's (registered
// from E) and compared beside the shift, which only yields the low OUT_W + 1 bits. PIPE = 2
// (the folded engine's adder_levels on an FPGA, whose multipliers sit in a row of their own): N
// and R are registered again beside each lane's multipliers and N * R is cut into pieces of at
// most 18 x 18 bits (a MULT18X18D each, piece_mult.sv), whose products are registered before
// their sum: `o` follows N and R by three cycles. PIPE = 3: as 2 with a register on each side of
// each multiplier besides (piece_mult REGS 3), and the shift by s - 1 in two stages (by its
// multiple of 4, registered with the clamp's compares, then by the rest): `o` follows N and R
// by six cycles. Instantiated once per (head, query) by rtl_sim/generate.py (attention level),
// once per head by rtl_sim/window.py and once by the folded engine (folded_attention.sv).
// Every width comes from the golden formats (attention_widths / window_widths); PROD_W must
// hold |N * R| + 2**(RECIP_FRAC + SUM_W - 2) (golden prod_bits).
//
// Testbench: rtl_sim/tb/recip_normalize/test_recip_normalize.py.

`default_nettype none

module recip_normalize #(
    parameter int LANES      = 4,   // numerators sharing one sum E (d_head)
    parameter int SUM_W      = 12,  // bits of the sum E, unsigned (golden esum_bits)
    parameter int NUMER_W    = 20,  // bits of each numerator N, signed (golden numer_bits)
    parameter int INDEX_W    = 8,   // reciprocal table index bits, 2**INDEX_W entries
    parameter int RECIP_W    = 13,  // bits of a table entry R, unsigned (golden recip_bits)
    parameter int RECIP_FRAC = 12,  // fraction bits of R (cfg.recip_frac)
    parameter int PROD_W     = 34,  // bits of N * R + the rounding half, signed (prod_bits)
    parameter int OUT_W      = 8,   // bits of each output O, signed, clamped (golden attn_bits)
    parameter int PIPE       = 0    // 1: E's leading one, the index and N * R registered;
                                    // 2: also N, R and N * R's DSP-sized pieces (for an FPGA)
                                    // 3: 2 with registers on both sides of each piece,
                                    //    the shift in two stages
) (
    /* verilator lint_off UNUSEDSIGNAL */  // PIPE = 0 reads no clock
    input  wire logic                     clk,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic [SUM_W-1:0]         e_sum,        // E >= 1
    input  wire logic [LANES*NUMER_W-1:0] numer,        // N[t] at [t*NUMER_W +: NUMER_W]
    output logic      [INDEX_W-1:0]       recip_index,  // table index of E
    input  wire logic [RECIP_W-1:0]       recip,        // RECIP[recip_index], from the caller
    output logic      [LANES*OUT_W-1:0]   o             // O[t] at [t*OUT_W +: OUT_W]
);
    // bits of the leading-one position n <= SUM_W - 1, and of the shift RECIP_FRAC + n
    localparam int LEAD_W  = (SUM_W > 1) ? $clog2(SUM_W) : 1;
    localparam int SHIFT_W = $clog2(RECIP_FRAC + SUM_W);
    // the clamp bounds of O, at PROD_W and at OUT_W bits
    localparam logic signed [PROD_W-1:0] PROD_MAX = PROD_W'({(OUT_W - 1){1'b1}});
    localparam logic signed [PROD_W-1:0] PROD_MIN = ~PROD_MAX;
    localparam logic signed [OUT_W-1:0]  OUT_MAX  = {1'b0, {(OUT_W - 1){1'b1}}};
    localparam logic signed [OUT_W-1:0]  OUT_MIN  = {1'b1, {(OUT_W - 1){1'b0}}};
    localparam logic signed [PROD_W-1:0] ONE      = PROD_W'(1);

    logic [LEAD_W-1:0]        lead;      // n = floor(log2 E)
    logic [LEAD_W-1:0]        lead_q;    // n as the index and the shift use it
    logic [SUM_W-1:0]         norm;      // E << (SUM_W - 1 - n): the leading one on top
    /* verilator lint_off UNUSEDSIGNAL */  // only the INDEX_W bits below the top are read
    logic [SUM_W+INDEX_W-1:0] norm_ext;  // norm with INDEX_W zeros below
    /* verilator lint_on UNUSEDSIGNAL */
    logic [INDEX_W-1:0]       index;     // the table index of E

    always_comb begin
        lead = '0;
        for (int b = 0; b < SUM_W; b++) begin
            if (e_sum[b]) lead = LEAD_W'(b);
        end
    end
    assign norm     = e_sum << (LEAD_W'(SUM_W - 1) - lead_q);
    assign norm_ext = {norm, INDEX_W'(0)};
    assign index    = norm_ext[SUM_W+INDEX_W-2 -: INDEX_W];

    if (PIPE != 0) begin : g_pipe
        // the bounds of floor(N * R / 2**(s-1)) that still round into OUT_W bits, and the same
        // bounds on N * R itself (scaled by 2**(s-1), at TW bits: they never wrap), so the
        // clamp compares the product in parallel with its shift:
        //   floor(p / 2**(s-1)) > TWICE_MAX  iff  p >= (TWICE_MAX + 1) * 2**(s-1)
        //   floor(p / 2**(s-1)) < TWICE_MIN  iff  p <  TWICE_MIN * 2**(s-1)
        localparam int TW = PROD_W + OUT_W + 2;
        localparam logic signed [PROD_W-1:0] TWICE_MAX = PROD_MAX <<< 1;
        localparam logic signed [PROD_W-1:0] TWICE_MIN = PROD_MIN <<< 1;
        localparam logic signed [TW-1:0] OVER = TW'(TWICE_MAX) + TW'(1);
        localparam logic signed [TW-1:0] UNDER = TW'(TWICE_MIN);
        logic [SHIFT_W-1:0] shift_m1;  // RECIP_FRAC + n - 1: the shift before the last halving
        logic [SHIFT_W-1:0] shift_n;   // the same from lead_q, for the bounds
        logic signed [TW-1:0] over_at, under_at;  // OVER and UNDER times 2**(s-1)
        assign shift_n = SHIFT_W'(RECIP_FRAC - 1) + SHIFT_W'(lead_q);
        always_ff @(posedge clk) begin
            lead_q <= lead;
            recip_index <= index;
            shift_m1 <= shift_n;
            over_at <= OVER <<< shift_n;
            under_at <= UNDER <<< shift_n;
        end
        for (genvar t = 0; t < LANES; t++) begin : g_lane
            logic signed [NUMER_W-1:0]       n_t;
            /* verilator lint_off UNUSEDSIGNAL */  // PROD_W may drop its sign extension
            logic signed [NUMER_W+RECIP_W:0] product;    // N * R at its exact width
            logic signed [PROD_W-1:0]        part;       // floor(N * R / 2**(s-1)): its low bits
            /* verilator lint_on UNUSEDSIGNAL */
            logic signed [PROD_W-1:0]        product_q;  // registered
            logic signed [OUT_W:0]           twice;      // part clamped: 2 O or 2 O + 1
            logic signed [OUT_W+1:0]         up;         // twice + 1
            logic                            over, under;

            assign n_t = numer[t*NUMER_W +: NUMER_W];
            if (PIPE >= 2) begin : g_pieces
                // N and R registered beside this lane's multipliers (R's copy a lane: no
                // fanout across the DSP row), then N x R in multipliers of at most 18 x 18
                // bits, their products registered (piece_mult.sv)
                logic signed [NUMER_W-1:0] n_q;
                logic [RECIP_W-1:0]        r_q;
                always_ff @(posedge clk) {n_q, r_q} <= {n_t, recip};
                piece_mult #(.A_W(NUMER_W), .B_W(RECIP_W + 1), .REGS((PIPE >= 3) ? 3 : 1)) u_mul (
                    .clk(clk), .a(n_q), .b({1'b0, r_q}), .product(product)
                );
            end else begin : g_whole
                assign product = n_t * $signed({1'b0, recip});
            end
            always_ff @(posedge clk) product_q <= PROD_W'(product);
            if (PIPE >= 3) begin : g_shift2
                // the shift in two stages: by its high bits (a multiple of 4) as N x R leaves
                // its register, the bits the rest reads and the clamp's compares registered,
                // then by its low two bits (shift_m1 holds while E does)
                localparam int PC_W = OUT_W + 4;  // (OUT_W + 1) bits from up to 3 bits in
                logic signed [PC_W-1:0] coarse_q;
                logic                   over_q, under_q;
                logic [SHIFT_W-1:0]     coarse_by;  // s - 1 less its low two bits
                logic [1:0]             fine_by;    // its low two bits
                /* verilator lint_off UNUSEDSIGNAL */  // the bits above PC_W are not read
                logic signed [PROD_W-1:0] coarse;   // N x R >>> coarse_by, at N x R's width
                /* verilator lint_on UNUSEDSIGNAL */
                // (no cast right after a unary operator: Yosys' parser read `~SHIFT_W'(3)`
                // otherwise than the simulators, and its netlist shifted by something else)
                assign fine_by = shift_m1[1:0];
                assign coarse_by = shift_m1 - SHIFT_W'(fine_by);
                assign coarse = product_q >>> coarse_by;
                always_ff @(posedge clk) begin
                    coarse_q <= coarse[PC_W-1:0];
                    over_q <= TW'(product_q) >= over_at;
                    under_q <= TW'(product_q) < under_at;
                end
                assign part  = PROD_W'(coarse_q) >>> fine_by;
                assign over  = over_q;
                assign under = under_q;
            end else begin : g_shift1
                assign part  = product_q >>> shift_m1;
                assign over  = TW'(product_q) >= over_at;
                assign under = TW'(product_q) < under_at;
            end
            assign twice = over ? (OUT_W + 1)'(TWICE_MAX)
                         : under ? (OUT_W + 1)'(TWICE_MIN) : $signed(part[OUT_W:0]);
            assign up    = (OUT_W + 2)'(twice) + (OUT_W + 2)'(1);
            assign o[t*OUT_W +: OUT_W] = OUT_W'(up >>> 1);
        end
    end else begin : g_comb
        logic [SHIFT_W-1:0]       shift;  // RECIP_FRAC + n
        logic signed [PROD_W-1:0] half;   // 2**(shift - 1): rounds half up
        assign lead_q      = lead;
        assign recip_index = index;
        assign shift       = SHIFT_W'(RECIP_FRAC) + SHIFT_W'(lead);
        assign half        = ONE <<< (shift - SHIFT_W'(1));
        for (genvar t = 0; t < LANES; t++) begin : g_lane
            logic signed [NUMER_W-1:0]       n_t;
            /* verilator lint_off UNUSEDSIGNAL */  // PROD_W may drop its sign extension
            logic signed [NUMER_W+RECIP_W:0] product;   // N * R at its exact width
            /* verilator lint_on UNUSEDSIGNAL */
            logic signed [PROD_W-1:0]        rounded;   // N * R + 2**(shift - 1)
            logic signed [PROD_W-1:0]        quotient;  // rounded >>> shift

            assign n_t      = numer[t*NUMER_W +: NUMER_W];
            assign product  = n_t * $signed({1'b0, recip});
            assign rounded  = PROD_W'(product) + half;
            assign quotient = rounded >>> shift;
            assign o[t*OUT_W +: OUT_W] = (quotient > PROD_MAX) ? OUT_MAX
                                       : (quotient < PROD_MIN) ? OUT_MIN
                                       : OUT_W'(quotient);
        end
    end
endmodule

`default_nettype wire
