// folded_scores_randinit: the score front end of the Random Synthesizer, RandInit (Tay et
// al.), in the folded engine's attention unit (folded_attend.sv): S[h][i][j] = R[h][i][j], a
// learned matrix, no queries or keys.
//
// R is a ROM (FILE), a word the LANES scores of query qi, head hh, keys jb LANES + l, at
// (h LEN_Q + i) KB + jb (rtl_sim/folded.py score_rom_words). A read (re: the score phase's
// stage 0) gives each lane's score on `part` as a one-term lane would: the cycle after the
// read, or with ADDER_LEVELS three cycles later (the read registered twice, then the term's
// register), so that the unit's pipeline is the same for every mechanism. Bit-exact with the
// golden model's scores: rtl_sim/tb/folded_attend tests it inside the unit.

`default_nettype none

module folded_scores_randinit #(
    /* verilator lint_off UNUSEDPARAM */
    parameter int SCORE       = 0,   // (3: RandInit)
    /* verilator lint_on UNUSEDPARAM */
    parameter int LEN_Q       = 2,   // query tokens
    parameter int LEN_K       = 4,   // key tokens
    /* verilator lint_off UNUSEDPARAM */
    parameter int DIM         = 8,   // model dimension
    /* verilator lint_on UNUSEDPARAM */
    parameter int HEADS       = 2,   // heads
    parameter int LANES       = 2,   // keys scored per cycle (divides LEN_K)
    parameter int SIMD        = 2,   // features per cycle (divides DIM / HEADS)
    parameter int W_W         = 8,   // bits of an entry of R
    parameter int QK_W        = 12,  // bits of a Q code (qk_code's)
    parameter     FILE        = "",  // R's $readmemh file (none at the defaults)
    parameter int SCORE_W     = 18,  // bits of a score
    parameter int MACRO_ROWS  = 32,  // memories of at least this many words are macros
    parameter int ADDER_LEVELS = 0,  // >= 1: reads registered, the lanes pipelined
    // the counters' widths (folded_attend sets them)
    parameter int TOK_CW = 1, LANE_CW = 1, KB_CW = 1, DC_CW = 1, Q_CW = 1, H_CW = 1, C_CW = 1
) (
    input  wire logic                     clk,
    /* verilator lint_off UNUSEDSIGNAL */  // no Q, no K: nothing is written
    input  wire logic                     pre_b,
    input  wire logic                     qk_valid,
    input  wire logic [1:0]               qk_pass,
    input  wire logic [TOK_CW-1:0]        qk_tok,
    input  wire logic [LANE_CW-1:0]       qk_lane,
    input  wire logic [KB_CW-1:0]         qk_blk,
    input  wire logic [DC_CW-1:0]         qk_cc,
    input  wire logic [SIMD*QK_W-1:0]     qk_code,
    input  wire logic                     att_b,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic                     re,
    input  wire logic [Q_CW-1:0]          qi,
    input  wire logic [H_CW-1:0]          hh,
    input  wire logic [KB_CW-1:0]         jb,
    /* verilator lint_off UNUSEDSIGNAL */  // one chunk a key block
    input  wire logic [C_CW-1:0]          c,
    /* verilator lint_on UNUSEDSIGNAL */
    output logic      [LANES*SCORE_W-1:0] part      // lane l's at [l*SCORE_W +: SCORE_W]
);
    /* verilator lint_off WIDTHEXPAND */
    /* verilator lint_off WIDTHTRUNC */
    localparam int KB = LEN_K / LANES;
    localparam int WS_DEPTH = HEADS * LEN_Q * KB;
    localparam int WS_A = (WS_DEPTH > 1) ? $clog2(WS_DEPTH) : 1;

    logic [LANES*W_W-1:0] ws_word;
    folded_rom #(
        .WIDTH(LANES*W_W), .DEPTH(WS_DEPTH), .SYNC(1), .FILE(FILE),
        .MACRO_ROWS(MACRO_ROWS), .AW(WS_A)
    ) ws_rom (.clk(clk), .re(re), .addr(WS_A'((hh * LEN_Q + qi) * KB + jb)), .data(ws_word));

    for (genvar l = 0; l < LANES; l++) begin : g_lane
        logic signed [W_W-1:0] r;
        assign r = ws_word[l*W_W +: W_W];
        if (ADDER_LEVELS > 0) begin : g_r_reg  // the read registered twice, then the term's
            logic signed [W_W-1:0] r_a, r_q, r_t;
            always_ff @(posedge clk) {r_a, r_q, r_t} <= {r, r_a, r_q};
            assign part[l*SCORE_W +: SCORE_W] = SCORE_W'(r_t);
        end else begin : g_r_wire
            assign part[l*SCORE_W +: SCORE_W] = SCORE_W'(r);
        end
    end
    /* verilator lint_on WIDTHTRUNC */
    /* verilator lint_on WIDTHEXPAND */
endmodule

`default_nettype wire
