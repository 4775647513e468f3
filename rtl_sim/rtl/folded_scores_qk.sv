// folded_scores_qk: the score front end of the query-key mechanisms in the folded engine's
// attention unit (folded_attend.sv): E-ATT's L1 distance (SCORE 0) and the dot product (1).
//
// It holds Q (len_q tokens) and the K banks (key j in bank j mod LANES, so that LANES keys
// are read in one cycle), each of two banks, a vector in each: the walks write them chunk by
// chunk into bank pre_b (qk_*; PASS_K with its lane and key block, PASS_Q with its token);
// the score phase reads bank att_b. A read (re, the score phase's stage 0: query qi, head
// hh, key block jb, feature chunk c of the head) gives each lane's partial score of the
// chunk, -sum |q - k| or sum q k over SIMD features (folded_score_lane), on `part` the
// cycle after the read, or with ADDER_LEVELS two cycles more (q and k registered twice as
// read: on an ECP5 the first is the block RAM's output register, rtl_sim/ecp5_outreg.py, the
// second sits beside the lanes) plus the lane's stages (folded_score_lane LEVELS).
// Bit-exact with the golden model's scores: rtl_sim/tb/folded_attend tests it inside the
// unit.

`default_nettype none

module folded_scores_qk #(
    parameter int SCORE       = 0,   // 0: E-ATT's L1 distance; 1: the dot product
    parameter int LEN_Q       = 2,   // query tokens
    parameter int LEN_K       = 4,   // key tokens
    parameter int DIM         = 8,   // model dimension
    parameter int HEADS       = 2,   // heads
    parameter int LANES       = 2,   // keys scored per cycle (divides LEN_K)
    parameter int SIMD        = 2,   // features per cycle (divides DIM / HEADS)
    /* verilator lint_off UNUSEDPARAM */
    parameter int W_W         = 8,   // (the front ends' common parameters; unused)
    /* verilator lint_on UNUSEDPARAM */
    parameter int QK_W        = 12,  // bits of Q, K codes
    /* verilator lint_off UNUSEDPARAM */
    parameter     FILE        = "",  // (no ROM)
    /* verilator lint_on UNUSEDPARAM */
    parameter int SCORE_W     = 18,  // bits of a score
    parameter int MACRO_ROWS  = 32,  // memories of at least this many words are macros
    parameter int ADDER_LEVELS = 0,  // >= 1: reads registered, the lanes pipelined
    // the counters' widths (folded_attend sets them)
    parameter int TOK_CW = 1, LANE_CW = 1, KB_CW = 1, DC_CW = 1, Q_CW = 1, H_CW = 1, C_CW = 1
) (
    input  wire logic                     clk,
    input  wire logic                     pre_b,     // the bank the walks write
    input  wire logic                     qk_valid,  // a chunk of K or Q (folded_proj_walk)
    input  wire logic [1:0]               qk_pass,
    input  wire logic [TOK_CW-1:0]        qk_tok,
    input  wire logic [LANE_CW-1:0]       qk_lane,
    input  wire logic [KB_CW-1:0]         qk_blk,
    input  wire logic [DC_CW-1:0]         qk_cc,
    input  wire logic [SIMD*QK_W-1:0]     qk_code,
    input  wire logic                     att_b,     // the bank the score phase reads
    input  wire logic                     re,
    input  wire logic [Q_CW-1:0]          qi,
    input  wire logic [H_CW-1:0]          hh,
    input  wire logic [KB_CW-1:0]         jb,
    input  wire logic [C_CW-1:0]          c,
    output logic      [LANES*SCORE_W-1:0] part      // lane l's at [l*SCORE_W +: SCORE_W]
);
    /* verilator lint_off WIDTHEXPAND */
    /* verilator lint_off WIDTHTRUNC */
    localparam int DC = DIM / SIMD, HC = DIM / HEADS / SIMD, KB = LEN_K / LANES;
    localparam int QA_W = $clog2(2 * LEN_Q * DC), BA_W = $clog2(2 * KB * DC);  // two banks
    localparam int QD = LEN_Q * DC, BD = KB * DC;  // words of a bank
    localparam logic [1:0] PASS_K = 2'd0, PASS_Q = 2'd2;  // folded_proj_walk
    function automatic int unsigned banked(input logic b, input int unsigned depth,
                                           input int unsigned addr);
        banked = addr + (b ? depth : 0);
    endfunction

    // Q of the query, chunk c of head hh; q as the lanes take it (registered: ADDER_LEVELS)
    logic [SIMD*QK_W-1:0] q_word, q_in;
    folded_ram #(
        .WIDTH(SIMD*QK_W), .DEPTH(2*LEN_Q*DC), .MACRO_ROWS(MACRO_ROWS), .AW(QA_W)
    ) q_mem (
        .clk(clk), .we(qk_valid && qk_pass == PASS_Q),
        .waddr(QA_W'(banked(pre_b, QD, qk_tok*DC + qk_cc))), .wdata(qk_code),
        .re(re), .raddr(QA_W'(banked(att_b, QD, qi*DC + hh*HC + c))), .rdata(q_word)
    );
    if (ADDER_LEVELS > 0) begin : g_q_reg  // twice: the block RAM's register, then the lanes'
        logic [SIMD*QK_W-1:0] q_arr;
        always_ff @(posedge clk) {q_arr, q_in} <= {q_word, q_arr};
    end else begin : g_q
        assign q_in = q_word;
    end

    for (genvar l = 0; l < LANES; l++) begin : g_lane
        // K of keys j = b*LANES + l, chunk at b*DC + c
        logic [SIMD*QK_W-1:0] k_word, k_in;
        folded_ram #(
            .WIDTH(SIMD*QK_W), .DEPTH(2*KB*DC), .MACRO_ROWS(MACRO_ROWS), .AW(BA_W)
        ) k_bank (
            .clk(clk), .we(qk_valid && qk_pass == PASS_K && qk_lane == l),
            .waddr(BA_W'(banked(pre_b, BD, qk_blk*DC + qk_cc))), .wdata(qk_code),
            .re(re), .raddr(BA_W'(banked(att_b, BD, jb*DC + hh*HC + c))), .rdata(k_word)
        );
        if (ADDER_LEVELS > 0) begin : g_k_reg  // twice, as q
            logic [SIMD*QK_W-1:0] k_arr;
            always_ff @(posedge clk) {k_arr, k_in} <= {k_word, k_arr};
        end else begin : g_k
            assign k_in = k_word;
        end
        folded_score_lane #(
            .SIMD(SIMD), .QK_W(QK_W), .K_W(QK_W), .SCORE_W(SCORE_W), .L1(SCORE == 0 ? 1 : 0),
            .LEVELS(ADDER_LEVELS)
        ) u_score (
            .clk(clk), .q(q_in), .k(k_in), .part(part[l*SCORE_W +: SCORE_W])
        );
    end
    /* verilator lint_on WIDTHTRUNC */
    /* verilator lint_on WIDTHEXPAND */
endmodule

`default_nettype wire
