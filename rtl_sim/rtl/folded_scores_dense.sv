// folded_scores_dense: the score front end of the Dense Synthesizer (Tay et al.) in the
// folded engine's attention unit (folded_attend.sv): S[h][i][j] = H[i] . W_2[:, h LEN_K + j],
// H = relu(X W_1) the hidden layer (the multiply walk's Q pass with RELU), no keys.
//
// It holds H (len_q tokens, the whole token: DC chunks), of two banks, a vector in each: the
// walk writes it chunk by chunk into bank pre_b (qk_*, PASS_Q); and W_2 as a ROM (FILE), a
// word the SIMD rows of chunk c of the LANES columns h LEN_K + jb LANES + l (lane l's), at
// (h KB + jb) DC + c (rtl_sim/folded.py score_rom_words). A read (re: query qi, head hh, key
// block jb, chunk c of the hidden token) gives each lane's partial score of the chunk, the
// dot product of SIMD hidden codes with SIMD weights (folded_score_lane, K_W = W_W), on
// `part` the cycle after the read, or with ADDER_LEVELS a cycle more plus the lane's stages.
// Bit-exact with the golden model's scores: rtl_sim/tb/folded_attend tests it in the unit.

`default_nettype none

module folded_scores_dense #(
    /* verilator lint_off UNUSEDPARAM */
    parameter int SCORE       = 0,   // (2: Dense)
    /* verilator lint_on UNUSEDPARAM */
    parameter int LEN_Q       = 2,   // query tokens
    parameter int LEN_K       = 4,   // key tokens
    parameter int DIM         = 8,   // model dimension
    parameter int HEADS       = 2,   // heads
    parameter int LANES       = 2,   // keys scored per cycle (divides LEN_K)
    parameter int SIMD        = 2,   // features per cycle (divides DIM / HEADS)
    parameter int W_W         = 8,   // bits of a weight of W_2
    parameter int QK_W        = 12,  // bits of a hidden code
    parameter     FILE        = "",  // W_2's $readmemh file (none at the defaults)
    parameter int SCORE_W     = 18,  // bits of a score
    parameter int MACRO_ROWS  = 32,  // memories of at least this many words are macros
    parameter int ADDER_LEVELS = 0,  // >= 1: reads registered, the lanes pipelined
    // the counters' widths (folded_attend sets them)
    parameter int TOK_CW = 1, LANE_CW = 1, KB_CW = 1, DC_CW = 1, Q_CW = 1, H_CW = 1, C_CW = 1
) (
    input  wire logic                     clk,
    input  wire logic                     pre_b,     // the bank the walk writes
    input  wire logic                     qk_valid,  // a chunk of H (folded_proj_walk)
    input  wire logic [1:0]               qk_pass,
    input  wire logic [TOK_CW-1:0]        qk_tok,
    /* verilator lint_off UNUSEDSIGNAL */  // (no K: no lane or key block written)
    input  wire logic [LANE_CW-1:0]       qk_lane,
    input  wire logic [KB_CW-1:0]         qk_blk,
    /* verilator lint_on UNUSEDSIGNAL */
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
    localparam int DC = DIM / SIMD, KB = LEN_K / LANES;
    localparam int QA_W = $clog2(2 * LEN_Q * DC), QD = LEN_Q * DC;  // two banks
    localparam int WS_DEPTH = HEADS * KB * DC;
    localparam int WS_A = (WS_DEPTH > 1) ? $clog2(WS_DEPTH) : 1;
    localparam logic [1:0] PASS_Q = 2'd2;  // folded_proj_walk
    function automatic int unsigned banked(input logic b, input int unsigned depth,
                                           input int unsigned addr);
        banked = addr + (b ? depth : 0);
    endfunction

    // H of the query, chunk c; as the lanes take it (registered: ADDER_LEVELS)
    logic [SIMD*QK_W-1:0] q_word, q_in;
    folded_ram #(
        .WIDTH(SIMD*QK_W), .DEPTH(2*LEN_Q*DC), .MACRO_ROWS(MACRO_ROWS), .AW(QA_W)
    ) q_mem (
        .clk(clk), .we(qk_valid && qk_pass == PASS_Q),
        .waddr(QA_W'(banked(pre_b, QD, qk_tok*DC + qk_cc))), .wdata(qk_code),
        .re(re), .raddr(QA_W'(banked(att_b, QD, qi*DC + c))), .rdata(q_word)
    );
    // W_2: chunk c of the block's LANES columns, read with H
    logic [LANES*SIMD*W_W-1:0] ws_word;
    folded_rom #(
        .WIDTH(LANES*SIMD*W_W), .DEPTH(WS_DEPTH), .SYNC(1), .FILE(FILE),
        .MACRO_ROWS(MACRO_ROWS), .AW(WS_A)
    ) ws_rom (.clk(clk), .re(re), .addr(WS_A'((hh * KB + jb) * DC + c)), .data(ws_word));
    if (ADDER_LEVELS > 0) begin : g_q_reg  // twice: the block RAM's register, then the lanes'
        logic [SIMD*QK_W-1:0] q_arr;
        always_ff @(posedge clk) {q_arr, q_in} <= {q_word, q_arr};
    end else begin : g_q
        assign q_in = q_word;
    end

    for (genvar l = 0; l < LANES; l++) begin : g_lane
        logic [SIMD*W_W-1:0] k_in;  // W_2's column of lane l, chunk c
        if (ADDER_LEVELS > 0) begin : g_k_reg  // twice, as H
            logic [SIMD*W_W-1:0] k_arr;
            always_ff @(posedge clk) {k_arr, k_in} <= {ws_word[l*SIMD*W_W +: SIMD*W_W], k_arr};
        end else begin : g_k
            assign k_in = ws_word[l*SIMD*W_W +: SIMD*W_W];
        end
        folded_score_lane #(
            .SIMD(SIMD), .QK_W(QK_W), .K_W(W_W), .SCORE_W(SCORE_W), .L1(0),
            .LEVELS(ADDER_LEVELS)
        ) u_score (
            .clk(clk), .q(q_in), .k(k_in), .part(part[l*SCORE_W +: SCORE_W])
        );
    end
    /* verilator lint_on WIDTHTRUNC */
    /* verilator lint_on WIDTHEXPAND */
endmodule

`default_nettype wire
