// folded_attention: the whole attention core, folded: LANES keys and SIMD features per cycle.
//
// Computes eatt.quant.golden.GoldenCore(cfg, weights).forward(x, y, masks) bit for bit, for
// each mechanism SCORE (eatt.mechanisms rtl_score): 0 E-ATT (L1 scores, Q/K as sums of selected
// weight rows), 1 vanilla (dot products), 2 the Dense Synthesizer (scores from the hidden layer
// H = relu(X W_1) against W_2's columns, a ROM: no keys), 3 the Random Synthesizer, RandInit
// (the scores are a ROM, R: no Q, no K), one vector (len_q query tokens x, len_k key tokens y,
// the mask inputs) at a time, reusing a small datapath over many cycles instead of unrolling
// every operation (docs/folded.md):
//
//   load     the SIMD-wide beats of x then y from s_axis into x_mem / y_mem (one per cycle)
//   proj     K = requant(xb(y) @ W_K), V = requant(y @ W_V), Q = requant(xb(x) @ W_Q): one
//            weight tile per cycle and walk (folded_proj_walk). vanilla: one multiply walk,
//            K, V, Q in turn; Dense: V, then H in Q's place; RandInit: V only. E-ATT: a
//            multiply walk (V, S x PE, M = S / PE slots of DC^2 cycles a key token) and
//            beside it a select walk (S x S, no multiplier) doing that token's K in step (one
//            y read for both) and a Q token in each other slot
//   per query i, per head h:
//     score  LANES keys at a time, SIMD features per cycle (folded_score_lane): S[j], max_j S;
//            SC chunks a key block: HC of the head (E-ATT, vanilla), DC of the whole hidden
//            token (Dense: lane l against W_2's column h LEN_K + j), 1 (RandInit: R read)
//     exp    LANES keys per cycle: e[j] = EXP[(max S - S[j]) >> EXP_SHIFT], E = sum_j e[j]
//     numer  SIMD features x LANES keys per cycle: N[t] = sum_j e[j] V[j][t], then
//            O = N / E (recip_normalize, the reciprocal table) into a_mem
//   post     Z = requant(O @ W_O) on the multiply walk, into the Z memory
//   out      the SIMD-wide beats of Z on m_axis (one per cycle while m_axis_tready)
//
// The phases overlap across vectors: four units, each on its own vector, hand them on through
// memories of two banks (a vector in each; bank b of vector n: b = n mod 2, the unit's
// pointer toggling after each vector), a full flag per bank between producer and consumer:
//
//   loader     s_axis -> x, y [ld_b]                      (xy_full)
//   walks      pre: x, y -> Q, K, V [pre_b]               (qkv_full)
//              post: O [post_b] -> Z [post_b]             (z_full)
//   attention  Q, K, V [att_b] -> O [att_b]               (a_full)
//   out        Z [out_b] -> m_axis
//
// The walks are shared by pre and post: they take a vector's pre when one is loaded and its
// Q/K/V bank is free, its post when its O is ready and its Z bank is free, owing at most two
// posts (`owed`: with two owed, the older post waits; with one, pre goes first when both
// could), so that in a stream the walks alternate post of vector n and pre of vector n + 2
// while attention computes vector n + 1 (docs/folded.md, "Overlapped phases"). Each phase
// runs at one step per cycle, so the cycles follow from the sizes exactly (rtl_sim/folding.py
// `folded_cycles` and `folded_schedule`, in metadata.json):
//
//   DC = DIM / SIMD, HC = D_HEAD / SIMD, KB = LEN_K / LANES, M = SIMD / PE
//   pre     = vanilla (2 LEN_K + LEN_Q) DC^2 + 6, Dense (LEN_K + LEN_Q) DC^2 + 4,
//             RandInit LEN_K DC^2 + 2, E-ATT (M LEN_K + max(0, LEN_Q - (M - 1) LEN_K)) DC^2 + 2
//   post    = LEN_Q DC^2 + 2, E-ATT M LEN_Q DC^2 + 2     (2: a walk's drain cycles)
//   attn    = LEN_Q HEADS (KB SC + KB + KB HC + 9)  (9: three drain cycles for each of scores,
//                                                 exp, numerators; stages 1-3 below)
//   latency = (LEN_Q + LEN_K) DC + pre + attn + post + 4   (one vector alone: + 1 cycle a
//             hand-over between units, + 1 reading the first Z word)
//   II      = max(pre + post + 2, attn + 1, (LEN_Q + LEN_K) DC, LEN_Q DC + 1)
//             (the busiest unit, + 1 a job: no stall on either stream, the stream settled)
//
// Memories, each an instance with synchronous reads, the address presented a cycle ahead
// (folded_ram: written here; folded_rom: the $readmemh files next to the RTL), a memory macro
// from MACRO_ROWS words (folded_macro: priced per access by eatt power; an FPGA's block RAM),
// flip-flops below: the weights are ROMs in the walks (one SIMD x SIMD tile per word, or
// SIMD x PE for E-ATT's V and O; folded_proj_walk.sv has the order; WQ_FILE..WO_FILE, Dense's
// W_1 in WQ_FILE), the Synthesizers' score weights a ROM of their own (WS_FILE: Dense's W_2,
// LANES columns x SIMD rows a word at (h KB + jb) DC + c; RandInit's R, LANES scores a word at
// (h LEN_Q + i) KB + jb; rtl_sim/folded.py score_rom_words);
// EXP_FILE and RECIP_FILE hold the softmax tables. K and V are banked by key (key j in bank
// j mod LANES) so that LANES keys are read in one cycle; the token memories are written one
// SIMD-wide word per cycle.
//
// Streams (AXI4-Stream, tready backpressure on both sides): a vector is LEN_Q*DC beats of x
// then LEN_K*DC beats of y on s_axis (token by token, SIMD elements of IN_W bits per beat,
// element t at [t*IN_W +: IN_W]); s_axis_tuser of its first beat carries the mask inputs
// (length at [0 +: LEN_W], offset at [LEN_W +: OFF_W]; ignored where the config has no such
// mask); tlast marks its last beat (the engine counts beats, it does not need it). The result
// is LEN_Q*DC beats of Z on m_axis (SIMD elements of OUT_W bits), tlast on the last.
//
// Every width is a golden width (eatt.quant.golden.Formats), passed by the generated wrapper.

`default_nettype none

module folded_attention #(
    parameter int SCORE       = 0,    // the mechanism (eatt.mechanisms rtl_score): SCORE_L1,
                                      // SCORE_DOT, SCORE_DENSE or SCORE_RANDINIT below
    parameter int LEN_Q       = 2,    // query tokens
    parameter int LEN_K       = 4,    // key tokens
    parameter int DIM         = 8,    // model dimension
    parameter int HEADS       = 2,    // heads (D_HEAD = DIM / HEADS)
    parameter int LANES       = 2,    // keys scored per cycle (divides LEN_K)
    parameter int SIMD        = 2,    // features per cycle (divides D_HEAD)
    parameter int PE          = 2,    // E-ATT: V/O columns per cycle (divides SIMD); vanilla: unused
    parameter int IN_W        = 8,    // bits of an input code, signed
    parameter int TAU         = 16,   // binarization threshold: x > TAU (cfg.tau_int)
    parameter int W_W         = 8,    // bits of a weight, signed
    parameter int ACC_W       = 24,   // projection accumulators (max of q/v/out_acc_bits)
    parameter int Q_SHIFT     = 0,    // Q, K = acc >>> Q_SHIFT
    parameter int QK_W        = 12,   // bits of Q, K codes (qk_code_bits)
    parameter int V_SHIFT     = 0,    // V = acc >>> V_SHIFT
    parameter int V_W         = 12,   // bits of V codes (v_code_bits)
    parameter int SCORE_W     = 18,   // bits of a score (score_bits)
    parameter int EXP_SHIFT   = 0,    // table index = (max S - S) >> EXP_SHIFT
    parameter int EXP_SIZE    = 256,  // entries of the exp table
    parameter int EXP_W       = 11,   // bits of an exp entry, unsigned (exp_bits)
    parameter int SUM_W       = 14,   // bits of E, unsigned (esum_bits)
    parameter int NUMER_W     = 26,   // bits of a numerator N, signed (numer_bits)
    parameter int RIDX_W      = 8,    // reciprocal table index bits (recip_index_bits)
    parameter int RECIP_W     = 13,   // bits of a reciprocal entry (recip_bits)
    parameter int RECIP_FRAC  = 12,   // fraction bits of the reciprocal (cfg.recip_frac)
    parameter int PROD_W      = 40,   // bits of N * R + half (prod_bits)
    parameter int ATTN_W      = 12,   // bits of the attention output O (attn_bits)
    parameter int O_SHIFT     = 0,    // Z = acc >>> O_SHIFT
    parameter int OUT_W       = 12,   // bits of an output code (out_code_bits)
    parameter int KEY_PADDING = 0,    // 1: key j visible only if j < length
    parameter int CAUSAL      = 0,    // 1: key j visible to query i only if j <= i + offset
    parameter int LEN_W       = 3,    // bits of the length field of s_axis_tuser
    parameter int OFF_W       = 2,    // bits of the offset field of s_axis_tuser
    // $readmemh files next to the RTL, those its mechanism reads named by the wrapper (none by
    // default: Yosys elaborates every module at its defaults as it reads it)
    parameter     WQ_FILE     = "",
    parameter     WK_FILE     = "",
    parameter     WV_FILE     = "",
    parameter     WO_FILE     = "",
    parameter     WS_FILE     = "",   // Dense's W_2 or RandInit's R
    parameter     EXP_FILE    = "",
    parameter     RECIP_FILE  = "",
    parameter int MACRO_ROWS  = 32,   // memories of at least this many words are macros
    parameter int ADDER_LEVELS = 0    // >= 1: pipelined for a clock (the walks' and lanes' trees,
                                      // block-RAM reads, the lanes' max, N x R; docs/folded.md)
) (
    input  wire logic                     clk,
    input  wire logic                     rst,  // synchronous, active high

    input  wire logic [SIMD*IN_W-1:0]     s_axis_tdata,
    input  wire logic                     s_axis_tvalid,
    output logic                          s_axis_tready,
    /* verilator lint_off UNUSEDSIGNAL */  // framing is by count
    input  wire logic                     s_axis_tlast,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic [LEN_W+OFF_W-1:0]   s_axis_tuser,

    output logic      [SIMD*OUT_W-1:0]    m_axis_tdata,
    output logic                          m_axis_tvalid,
    input  wire logic                     m_axis_tready,
    output logic                          m_axis_tlast
);
    // The counters are exactly as wide as their ranges and are compared with, and added to,
    // int parameters (32 bits) in the address and loop expressions: exact, so Verilator's
    // width warnings on those mixes are off for this module (slang compiles it clean).
    /* verilator lint_off WIDTHEXPAND */
    /* verilator lint_off WIDTHTRUNC */
    localparam int D_HEAD = DIM / HEADS;
    localparam int DC     = DIM / SIMD;       // SIMD-wide chunks of a token
    localparam int HC     = D_HEAD / SIMD;    // chunks of a head
    localparam int KB     = LEN_K / LANES;    // blocks of LANES keys
    // the mechanisms (SCORE): E-ATT's L1 (binarize, select rows of W_Q / W_K, L1 scores),
    // vanilla's dot product, Dense (H = relu(X W_1); S = H W_2), RandInit (S = R)
    localparam int SCORE_L1 = 0, SCORE_DOT = 1, SCORE_DENSE = 2, SCORE_RANDINIT = 3;
    localparam bit L1 = (SCORE == SCORE_L1);
    localparam bit DENSE = (SCORE == SCORE_DENSE);
    localparam bit RANDINIT = (SCORE == SCORE_RANDINIT);
    localparam bit QK = (SCORE == SCORE_L1 || SCORE == SCORE_DOT);  // Q against K memories
    localparam bit SYNTH = DENSE || RANDINIT;  // a score ROM (WS_FILE)
    localparam int MUL_COLS = L1 ? PE : SIMD;  // the multiply walk's columns
    // the multiply walk's passes before attention (2 bits each, the first at [1:0]; PASS_*)
    // and the ROMs it reads: E-ATT V (K and Q on the select walk); vanilla K, V, Q; Dense V,
    // then H in the Q pass (W_1, relu); RandInit V. O after attention for all.
    localparam int N_PRE = (SCORE == SCORE_DOT) ? 3 : DENSE ? 2 : 1;
    localparam logic [5:0] PRE = (SCORE == SCORE_DOT) ? 6'b10_01_00
                               : DENSE ? 6'b00_10_01 : 6'b00_00_01;
    localparam logic [3:0] USES = (SCORE == SCORE_DOT) ? 4'b1111 : DENSE ? 4'b1110 : 4'b1010;
    localparam int M      = SIMD / MUL_COLS;  // its pieces of a SIMD-wide V or Z word
    localparam int SC     = QK ? HC : DENSE ? DC : 1;  // the score phase's chunks a key block
    localparam int IN_BEATS  = (LEN_Q + LEN_K) * DC;
    localparam int OUT_BEATS = LEN_Q * DC;
    localparam int EXP_A  = (EXP_SIZE > 1) ? $clog2(EXP_SIZE) : 1;
    // counter widths: a counter over [0, n) has CW(n) bits
    localparam int LEN_MAX = (LEN_Q > LEN_K) ? LEN_Q : LEN_K;
    localparam int IN_CW   = (IN_BEATS > 1) ? $clog2(IN_BEATS) : 1;
    localparam int OUT_CW  = (OUT_BEATS > 1) ? $clog2(OUT_BEATS) : 1;
    localparam int TOK_CW  = (LEN_MAX > 1) ? $clog2(LEN_MAX) : 1;
    localparam int LANE_CW = (LANES > 1) ? $clog2(LANES) : 1;
    localparam int KB_CW   = (KB > 1) ? $clog2(KB) : 1;
    localparam int DC_CW   = (DC > 1) ? $clog2(DC) : 1;
    localparam int C_MAX   = (SC > HC) ? SC : HC;  // the chunk counters' range (scores, numer)
    localparam int C_CW   = (C_MAX > 1) ? $clog2(C_MAX) : 1;
    localparam int Q_CW    = (LEN_Q > 1) ? $clog2(LEN_Q) : 1;
    localparam int H_CW    = (HEADS > 1) ? $clog2(HEADS) : 1;
    localparam int M_CW    = (M > 1) ? $clog2(M) : 1;

    // the attention unit's phases; PASS_* name the four projections (folded_proj_walk)
    typedef enum logic [1:0] { S_IDLE, S_SCORE, S_EXP, S_NUMER } state_t;
    localparam logic [1:0] PASS_K = 2'd0, PASS_V = 2'd1, PASS_Q = 2'd2, PASS_O = 2'd3;

    state_t     state;  // the attention unit

    // -- the units' hand-over: two banks per buffer, a full flag each, a pointer per unit ------
    logic [1:0] xy_full, qkv_full, a_full, z_full;
    logic       ld_b, pre_b, att_b, post_b, out_b;  // the bank each unit is on
    logic [1:0] owed;              // vectors the walks did pre for and not yet post
    logic       walk_pre, walk_post;  // the walks' job (at most one)
    logic       pre_go, post_go, pre_ready, post_ready, att_go, att_end;
    logic       out_end;

    // -- memories (folded_ram / folded_rom: macros from MACRO_ROWS words, else flip-flops) -------
    // x_mem: query tokens, chunk c of token i at i*DC + c; y_mem: key tokens; q_mem: Q codes;
    // a_mem: attention outputs O (heads concatenated). The K, V banks, the scores and softmax
    // weights are per lane (g_lane), Z in M pieces (g_zsub).
    localparam int QA_W = ((LEN_Q * DC) > 1) ? $clog2(LEN_Q * DC) : 1;  // x, q, a, z addresses
    localparam int KA_W = ((LEN_K * DC) > 1) ? $clog2(LEN_K * DC) : 1;  // y addresses
    localparam int BA_W = ((KB * DC) > 1) ? $clog2(KB * DC) : 1;        // K, V bank addresses
    localparam int SA_W = (KB > 1) ? $clog2(KB) : 1;                    // score, weight banks
    // the buffers between units hold two vectors: bank b's words after bank 0's depth words
    localparam int QD = LEN_Q * DC, YD = LEN_K * DC, BD = KB * DC;  // words of a bank
    function automatic int unsigned banked(input logic b, input int unsigned depth,
                                           input int unsigned addr);
        banked = addr + (b ? depth : 0);
    endfunction

    // -- load: s_axis into x_mem, y_mem -----------------------------------------------------------
    logic [IN_CW-1:0]  in_cnt;   // beats of this vector so far
    logic [OUT_CW-1:0] out_cnt;  // output beats so far
    // the mask inputs travel with the vector: loaded beside x, y; handed to the Q/K/V bank
    logic [LEN_W-1:0] length, ld_length [2], att_length [2];
    logic [OFF_W-1:0] offset, ld_offset [2], att_offset [2];
    assign length = att_length[att_b];
    assign offset = att_offset[att_b];

    assign s_axis_tready = !xy_full[ld_b];

    logic in_beat;
    assign in_beat = s_axis_tvalid && s_axis_tready;
    // the words the walks read: x (Q) and y (K, V) at (rd_tok, rd_rc), O for the O pass
    logic [SIMD*IN_W-1:0]   x_word, y_word;
    logic [SIMD*ATTN_W-1:0] a_word;
    logic                   x_re, y_re, a_re;
    logic [TOK_CW-1:0]      x_rd_tok;
    logic [DC_CW-1:0]       x_rd_rc;

    // -- projections: the walks (folded_proj_walk), one weight tile per cycle each ----------------
    // vanilla: one multiply walk (K, V, Q; O after attention). E-ATT: a select walk (K, Q) and a
    // multiply walk PE columns wide (V; O after attention) at the same time.
    logic start_pre, start_post, pre_done, post_done;
    // K and Q come from a walk SIMD columns wide, V and O from one PE columns wide
    logic                 vo_valid;
    logic [1:0]           vo_pass;
    logic [TOK_CW-1:0]    vo_tok;
    logic [LANE_CW-1:0]   vo_lane;
    logic [KB_CW-1:0]     vo_blk;
    logic [DC_CW-1:0]     vo_cc;
    logic [M_CW-1:0]      vo_sub;
    /* verilator lint_off UNUSEDSIGNAL */  // K's bank address (no K: Dense); RandInit: no K, Q
    logic                 qk_valid;
    logic [1:0]           qk_pass;
    logic [TOK_CW-1:0]    qk_tok;
    logic [LANE_CW-1:0]   qk_lane;
    logic [KB_CW-1:0]     qk_blk;
    logic [DC_CW-1:0]     qk_cc;
    logic [SIMD*QK_W-1:0] qk_code;
    /* verilator lint_on UNUSEDSIGNAL */
    logic [MUL_COLS*V_W-1:0]    v_code;
    logic [MUL_COLS*OUT_W-1:0]  z_code;

    assign start_pre = pre_go;

    // the multiply walk: V then O (E-ATT, PE columns), or K, V, Q then O (vanilla, PE = SIMD)
    logic m_fin, m_valid;
    logic [1:0] m_pass;
    logic [TOK_CW-1:0] m_tok, m_rd_tok;
    logic [LANE_CW-1:0] m_lane;
    logic [KB_CW-1:0] m_blk;
    logic [DC_CW-1:0] m_cc, m_rd_rc;
    logic [MUL_COLS*QK_W-1:0] m_qk;  // vanilla's K and Q (E-ATT's come from the select walk)
    logic m_rd_x;  // vanilla: the multiply walk reads x (its Q pass)

    folded_proj_walk #(
        .SIMD(SIMD), .COLS(MUL_COLS), .DIM(DIM), .LEN_Q(LEN_Q), .LEN_K(LEN_K), .LANES(LANES),
        .SELECT(0), .N_PRE(N_PRE), .PRE(PRE), .POST(1), .USES(USES), .RELU(DENSE ? 1 : 0),
        .IN_W(IN_W), .TAU(TAU), .W_W(W_W), .ATTN_W(ATTN_W), .ACC_W(ACC_W),
        .Q_SHIFT(Q_SHIFT), .QK_W(QK_W), .V_SHIFT(V_SHIFT), .V_W(V_W), .O_SHIFT(O_SHIFT),
        .OUT_W(OUT_W), .WQ_FILE(WQ_FILE), .WK_FILE(WK_FILE), .WV_FILE(WV_FILE),
        .WO_FILE(WO_FILE), .MACRO_ROWS(MACRO_ROWS), .ADDER_LEVELS(ADDER_LEVELS)
    ) u_multiply (
        .clk(clk), .rst(rst), .start_pre(start_pre), .start_post(start_post),
        .finishing(m_fin),
        .rd_tok(m_rd_tok), .rd_rc(m_rd_rc),
        .x_word(x_word), .y_word(y_word), .o_word(a_word),
        .rd_x(m_rd_x), .rd_y(y_re), .rd_o(a_re),
        .wr_valid(m_valid), .wr_pass(m_pass), .wr_tok(m_tok), .wr_lane(m_lane),
        .wr_blk(m_blk), .wr_cc(m_cc), .wr_sub(vo_sub), .wr_qk(m_qk),
        .wr_v(v_code), .wr_z(z_code)
    );
    assign {vo_valid, vo_pass, vo_tok, vo_lane, vo_blk, vo_cc} =
        {m_valid, m_pass, m_tok, m_lane, m_blk, m_cc};
    assign post_done = m_fin && walk_post;

    if (L1) begin : g_select  // the select walk: K then Q, at the same time as V
        logic s_fin;
        logic [TOK_CW-1:0] s_rd_tok;
        logic [DC_CW-1:0] s_rd_rc;
        /* verilator lint_off UNUSEDSIGNAL */  // it writes only K and Q codes, SIMD wide
        logic s_sub;
        logic [SIMD*V_W-1:0] s_v;
        logic [SIMD*OUT_W-1:0] s_z;
        logic [MUL_COLS*QK_W-1:0] m_qk_unused;
        logic s_rd_y, s_rd_o, m_rd_x_unused;
        /* verilator lint_on UNUSEDSIGNAL */

        folded_proj_walk #(
            .SIMD(SIMD), .COLS(SIMD), .DIM(DIM), .LEN_Q(LEN_Q), .LEN_K(LEN_K), .LANES(LANES),
            .SELECT(1), .SLOTS(M), .USES(4'b0101),
            .IN_W(IN_W), .TAU(TAU), .W_W(W_W), .ATTN_W(ATTN_W), .ACC_W(ACC_W),
            .Q_SHIFT(Q_SHIFT), .QK_W(QK_W), .V_SHIFT(V_SHIFT), .V_W(V_W), .O_SHIFT(O_SHIFT),
            .OUT_W(OUT_W), .WQ_FILE(WQ_FILE), .WK_FILE(WK_FILE), .WV_FILE(WV_FILE),
            .WO_FILE(WO_FILE), .MACRO_ROWS(MACRO_ROWS), .ADDER_LEVELS(ADDER_LEVELS)
        ) u_select (
            .clk(clk), .rst(rst), .start_pre(start_pre), .start_post(start_post),
            .finishing(s_fin),
            .rd_tok(s_rd_tok), .rd_rc(s_rd_rc),
            // K of token t is read in step with the multiply walk's V of token t: one y port
            .x_word(x_word), .y_word(y_word), .o_word('0),
            .rd_x(x_re), .rd_y(s_rd_y), .rd_o(s_rd_o),
            .wr_valid(qk_valid), .wr_pass(qk_pass), .wr_tok(qk_tok), .wr_lane(qk_lane),
            .wr_blk(qk_blk), .wr_cc(qk_cc), .wr_sub(s_sub), .wr_qk(qk_code),
            .wr_v(s_v), .wr_z(s_z)
        );
        assign m_qk_unused = m_qk;
        assign m_rd_x_unused = m_rd_x;
        assign {x_rd_tok, x_rd_rc} = {s_rd_tok, s_rd_rc};
        // the select walk ends last: (M LEN_K + the Q tokens left) slots, against V's M LEN_K
        assign pre_done = s_fin && walk_pre;
    end else begin : g_one_walk  // the others: K and Q (Dense: H) from the multiply walk too
        assign {qk_valid, qk_pass, qk_tok, qk_lane, qk_blk, qk_cc, qk_code} =
            {m_valid, m_pass, m_tok, m_lane, m_blk, m_cc, m_qk};
        assign pre_done = m_fin && walk_pre;
        assign {x_re, x_rd_tok, x_rd_rc} = {m_rd_x, m_rd_tok, m_rd_rc};
    end

    // the token memories: x (written first) and y, from the stream; RandInit reads no x (its
    // scores are R: the x beats are taken and dropped)
    if (!RANDINIT) begin : g_x_mem
        folded_ram #(
            .WIDTH(SIMD*IN_W), .DEPTH(2*LEN_Q*DC), .MACRO_ROWS(MACRO_ROWS), .AW(QA_W+1)
        ) x_mem (
            .clk(clk), .we(in_beat && in_cnt < LEN_Q * DC),
            .waddr((QA_W+1)'(banked(ld_b, QD, in_cnt))),
            .wdata(s_axis_tdata), .re(x_re),
            .raddr((QA_W+1)'(banked(pre_b, QD, x_rd_tok*DC + x_rd_rc))),
            .rdata(x_word)
        );
    end else begin : g_no_x
        /* verilator lint_off UNUSEDSIGNAL */
        logic x_unused;
        /* verilator lint_on UNUSEDSIGNAL */
        assign x_unused = x_re ^ (|x_rd_tok) ^ (|x_rd_rc);
        assign x_word = '0;
    end
    folded_ram #(
        .WIDTH(SIMD*IN_W), .DEPTH(2*LEN_K*DC), .MACRO_ROWS(MACRO_ROWS), .AW(KA_W+1)
    ) y_mem (
        .clk(clk), .we(in_beat && in_cnt >= LEN_Q * DC),
        .waddr((KA_W+1)'(banked(ld_b, YD, in_cnt - LEN_Q * DC))), .wdata(s_axis_tdata), .re(y_re),
        .raddr((KA_W+1)'(banked(pre_b, YD, m_rd_tok*DC + m_rd_rc))), .rdata(y_word)
    );
    // Z in M pieces of PE columns, read back as SIMD-wide beats
    wire [SIMD*OUT_W-1:0] z_word;
    logic            z_re;     // read the next Z word (out)
    logic [OUT_CW:0] rd_cnt;   // Z words read
    logic            out_valid;  // m_axis holds a word
    for (genvar m = 0; m < M; m++) begin : g_zsub
        folded_ram #(
            .WIDTH(MUL_COLS*OUT_W), .DEPTH(2*LEN_Q*DC), .MACRO_ROWS(MACRO_ROWS), .AW(QA_W+1)
        ) z_sub (
            .clk(clk), .we(vo_valid && vo_pass == PASS_O && vo_sub == m),
            .waddr((QA_W+1)'(banked(post_b, QD, vo_tok*DC + vo_cc))), .wdata(z_code),
            .re(z_re), .raddr((QA_W+1)'(banked(out_b, QD, rd_cnt))),
            .rdata(z_word[m*MUL_COLS*OUT_W +: MUL_COLS*OUT_W])
        );
    end

    // -- attention: per query qi and head hh, scores, exp, numerators -----------------------------
    // Each phase is a pipeline of four stages: stage 0 (the counters) addresses the memories
    // and stages 1-3 (p1_* .. p3_*: valid, key block, feature chunk) follow it a cycle apart:
    //   scores      1: the lanes' chunk sums (part_r)  2: S accumulates (s_bank)  3: max S
    //   exp         1: the exp table is addressed  2: e (e_bank), E  3: the reciprocal of E
    //   numerators  1: the products e V (prod_r)  2: N accumulates  3: O = N / E (a_mem)
    // drain counts the three cycles after stage 0's last; the next phase starts after them.
    // ADDER_LEVELS >= 1 (for a clock): the scores' stage 1 takes S_EXTRA more cycles (q and k
    // registered as read, the lane's terms and its tree every ADDER_LEVELS levels: the lane's
    // chunk sum reaches part_r S_EXTRA cycles later, and its stage 2 with it, through x_tap)
    // and a stage 4 (stage 3 registers the block's max over the lanes, stage 4 updates max S);
    // exp's stage 1 takes E_EXTRA = 2 more (S registered as read, then the exp table's word)
    // and the numerators' N_EXTRA = 1 (e and V registered as read); x_line carries the items;
    // exp drains two more cycles (E's leading one, then the reciprocal's index registered:
    // recip_normalize PIPE); the numerators have a stage 4: stage 3 registers N x R, stage 4
    // shifts, rounds, clamps and writes a_mem; R is registered after its table (read in exp's
    // last cycle, used from the numerators' stage 3).
    logic [Q_CW-1:0]  qi;      // query
    logic [H_CW-1:0]  hh;      // head
    logic [KB_CW-1:0] jb;      // key block
    logic [C_CW-1:0] dc, tc;  // feature chunk of the head (scores, numerators)
    localparam int FILL = 3;                       // stages after stage 0: drain cycles
    localparam int NORM_PIPE = (ADDER_LEVELS > 0) ? 1 : 0;
    localparam int E_EXTRA = (ADDER_LEVELS > 0) ? 2 : 0;  // exp: S and the exp word registered
    localparam int N_EXTRA = (ADDER_LEVELS > 0) ? 1 : 0;  // numerators: e and V registered
    localparam int FILL_N = FILL + N_EXTRA + NORM_PIPE;  // the numerators' drain cycles
    localparam int FILL_E = FILL + E_EXTRA + 2 * NORM_PIPE;  // exp's (+ the index's two)
    // the score lane's adder levels (RandInit's has none: its score is read)
    localparam int S_TREE = (SIMD > 1 && !RANDINIT) ? $clog2(SIMD) : 0;
    localparam int S_EXTRA = (ADDER_LEVELS > 0)  // the q/k register + the lane's stages
                           ? 2 + ((S_TREE > 0) ? (S_TREE - 1) / ADDER_LEVELS : 0) : 0;
    localparam int MAX_PIPE = (ADDER_LEVELS > 0) ? 1 : 0;  // the block's max registered
    localparam int FILL_S = FILL + S_EXTRA + MAX_PIPE;  // the scores' drain cycles
    localparam int FILL_MAX = (FILL_S > FILL_E) ? ((FILL_S > FILL_N) ? FILL_S : FILL_N)
                            : ((FILL_E > FILL_N) ? FILL_E : FILL_N);
    localparam int DRAIN_W = $clog2(FILL_MAX + 1);
    logic [DRAIN_W-1:0] drain;
    logic             drained;                     // the phase's last drain cycle
    logic             sc0, ex0, nm0;               // stage 0 of scores, exp, numerators
    logic             p1_v, p2_v, p3_v, p4_v;      // the stage holds an item
    logic [KB_CW-1:0] p1_jb, p2_jb, p3_jb, p4_jb;
    logic [C_CW-1:0] p1_c, p2_c, p3_c, p4_c;      // the chunk: dc (scores), tc (numerators)
    logic [1:0]       p1_ph, p2_ph, p3_ph, p4_ph;  // the phase (state) of the stage's item
    logic [LANES-1:0] p2_hit;                      // the lane's exp word is its weight
    /* verilator lint_off UNUSEDSIGNAL */  // (ADDER_LEVELS >= 1: vis_pre_jb instead)
    logic [KB_CW-1:0] vis_jb;                      // the block visible[] is of
    /* verilator lint_on UNUSEDSIGNAL */
    logic             ea_v;                        // exp addresses its table (its item)
    logic [KB_CW-1:0] ea_jb;
    logic [SIMD*QK_W-1:0]    q_word;
    localparam int K_W = DENSE ? W_W : QK_W;     // a lane's k: K codes, or W_2 (Dense)
    logic [SIMD*K_W-1:0]     k_word [LANES];
    logic [SIMD*V_W-1:0]     v_word [LANES];
    logic signed [SCORE_W-1:0] s_next [LANES];   // the key's score with this chunk
    logic signed [SCORE_W-1:0] s_hold [LANES];   // its running sum (stage 3: the score)
    logic signed [SCORE_W-1:0] s_read [LANES];   // the stored score (exp phase)
    logic [EXP_W-1:0]        e_next [LANES];     // the key's softmax weight (exp phase)
    logic [EXP_W-1:0]        e_read [LANES];     // the stored weight (numer phase)
    logic                    visible [LANES];
    logic signed [SCORE_W-1:0] smax, smax_next;   // max over the visible keys so far
    logic [SUM_W-1:0]        esum, esum_next;     // E
    logic signed [NUMER_W-1:0] numer [SIMD];
    logic signed [NUMER_W-1:0] numer_next [SIMD];
    logic [SIMD*NUMER_W-1:0] numer_packed;
    logic [RIDX_W-1:0]       recip_index;
    logic [SIMD*ATTN_W-1:0]  o_word;

    // key j is visible to query i: j < length (key padding), j <= i + offset (causal); every
    // input an argument (a continuous assign is sensitive to its arguments only)
    function automatic logic is_visible(input int unsigned j, input logic [LEN_W-1:0] len,
                                        input logic [Q_CW-1:0] i, input logic [OFF_W-1:0] off);
        is_visible = (KEY_PADDING == 0 || j < 32'(len))
                  && (CAUSAL == 0 || j <= 32'(i) + 32'(off));
    endfunction

    assign sc0 = (state == S_SCORE) && (drain == 0);
    assign ex0 = (state == S_EXP) && (drain == 0);
    assign nm0 = (state == S_NUMER) && (drain == 0);
    assign drained = (drain == DRAIN_W'((state == S_NUMER) ? FILL_N
                                : (state == S_SCORE) ? FILL_S : FILL_E));
    // the max (stage 3), exp (its table's address: stage 1, E_EXTRA - 1 cycles later)
    assign vis_jb = (state == S_SCORE) ? p3_jb : ea_jb;
    // ADDER_LEVELS >= 1: visible[] registered, from the items a cycle before vis_jb's (p3_jb
    // is p2_jb a cycle later; ea_jb, at E_EXTRA = 2, is p1_jb a cycle later). The phase, the
    // query and the masks hold while a phase's items are in flight (a phase changes after its
    // drain), so the flags equal the combinational ones: the key compares leave the path from
    // the phase state into the max tree and the exp table's read enables.
    /* verilator lint_off UNUSEDSIGNAL */  // read with ADDER_LEVELS only
    logic [KB_CW-1:0] vis_pre_jb;
    /* verilator lint_on UNUSEDSIGNAL */
    assign vis_pre_jb = (state == S_SCORE) ? p2_jb : p1_jb;

    /* verilator lint_off UNUSEDSIGNAL */  // (RandInit has no lane)
    logic [SIMD*QK_W-1:0] q_in;  // q as the lanes take it: registered with ADDER_LEVELS
    /* verilator lint_on UNUSEDSIGNAL */
    if (ADDER_LEVELS > 0) begin : g_q_reg
        always_ff @(posedge clk) q_in <= q_word;
    end else begin : g_q
        assign q_in = q_word;
    end
    // Q (Dense: H, the whole token) of the query, the head's chunks (Dense: all DC chunks)
    if (!RANDINIT) begin : g_q_mem
        folded_ram #(
            .WIDTH(SIMD*QK_W), .DEPTH(2*LEN_Q*DC), .MACRO_ROWS(MACRO_ROWS), .AW(QA_W+1)
        ) q_mem (
            .clk(clk), .we(qk_valid && qk_pass == PASS_Q),
            .waddr((QA_W+1)'(banked(pre_b, QD, qk_tok*DC + qk_cc))), .wdata(qk_code),
            .re(sc0), .raddr((QA_W+1)'(banked(att_b, QD, qi*DC + (QK ? hh*HC : 0) + dc))),
            .rdata(q_word)
        );
    end else begin : g_no_q
        assign q_word = '0;
    end

    // the Synthesizers' score weights (WS_FILE), read with q: Dense's W_2, a word the SIMD
    // rows of chunk dc of LANES columns h LEN_K + jb LANES + l (lane l's k); RandInit's R,
    // a word the LANES scores of query qi, head hh, keys jb LANES + l
    localparam int WS_WIDTH = DENSE ? LANES * SIMD * W_W : LANES * W_W;
    localparam int WS_DEPTH = DENSE ? HEADS * KB * DC : HEADS * LEN_Q * KB;
    localparam int WS_A = (WS_DEPTH > 1) ? $clog2(WS_DEPTH) : 1;
    /* verilator lint_off UNUSEDSIGNAL */  // (E-ATT, vanilla: no score ROM)
    logic [WS_WIDTH-1:0] ws_word;
    /* verilator lint_on UNUSEDSIGNAL */
    if (SYNTH) begin : g_ws_rom
        logic [WS_A-1:0] ws_addr;
        assign ws_addr = DENSE ? WS_A'((hh * KB + jb) * DC + dc)
                               : WS_A'((hh * LEN_Q + qi) * KB + jb);
        folded_rom #(
            .WIDTH(WS_WIDTH), .DEPTH(WS_DEPTH), .SYNC(1), .FILE(WS_FILE),
            .MACRO_ROWS(MACRO_ROWS), .AW(WS_A)
        ) ws_rom (.clk(clk), .re(sc0), .addr(ws_addr), .data(ws_word));
    end else begin : g_no_ws
        assign ws_word = '0;
    end

    // the softmax tables: exp, one read port a lane (read in exp's stage 1); the reciprocal
    logic [LANES*EXP_A-1:0] exp_addr;
    logic [LANES-1:0]       exp_re;
    logic [LANES*EXP_W-1:0] exp_data;
    logic [RECIP_W-1:0]     recip;
    folded_rom #(
        .WIDTH(EXP_W), .DEPTH(EXP_SIZE), .READS(LANES), .SYNC(1), .FILE(EXP_FILE),
        .MACRO_ROWS(MACRO_ROWS), .AW(EXP_A)
    ) exp_rom (.clk(clk), .re(exp_re), .addr(exp_addr), .data(exp_data));

    for (genvar l = 0; l < LANES; l++) begin : g_lane
        // k_bank: K of keys j = b*LANES + l, chunk at b*DC + c; v_bank: V in M pieces of PE
        // columns; s_bank: the scores of this query and head; e_bank: their softmax weights
        wire  [SIMD*V_W-1:0]       v_cat;
        logic signed [SCORE_W-1:0] s_acc;
        logic signed [SCORE_W-1:0] part_l, part_r;  // the chunk's sum, registered
        logic signed [SCORE_W:0]   zdiff;           // max S - S (>= 0 for a visible key)
        logic signed [SCORE_W:0]   exp_index;
        int unsigned               key;

        if (QK) begin : g_k_bank
            folded_ram #(
                .WIDTH(SIMD*QK_W), .DEPTH(2*KB*DC), .MACRO_ROWS(MACRO_ROWS), .AW(BA_W+1)
            ) k_bank (
                .clk(clk), .we(qk_valid && qk_pass == PASS_K && qk_lane == l),
                .waddr((BA_W+1)'(banked(pre_b, BD, qk_blk*DC + qk_cc))), .wdata(qk_code),
                .re(sc0), .raddr((BA_W+1)'(banked(att_b, BD, jb*DC + hh*HC + dc))),
                .rdata(k_word[l])
            );
        end else if (DENSE) begin : g_w2
            assign k_word[l] = ws_word[l*SIMD*W_W +: SIMD*W_W];
        end else begin : g_no_k
            assign k_word[l] = '0;
        end
        for (genvar m = 0; m < M; m++) begin : g_vsub
            folded_ram #(
                .WIDTH(MUL_COLS*V_W), .DEPTH(2*KB*DC), .MACRO_ROWS(MACRO_ROWS), .AW(BA_W+1)
            ) v_bank (
                .clk(clk), .we(vo_valid && vo_pass == PASS_V && vo_lane == l && vo_sub == m),
                .waddr((BA_W+1)'(banked(pre_b, BD, vo_blk*DC + vo_cc))), .wdata(v_code),
                .re(nm0), .raddr((BA_W+1)'(banked(att_b, BD, jb*DC + hh*HC + tc))),
                .rdata(v_cat[m*MUL_COLS*V_W +: MUL_COLS*V_W])
            );
        end
        assign v_word[l] = v_cat;

        // the lane's inputs: as read, or registered (ADDER_LEVELS: the block RAM's output)
        /* verilator lint_off UNUSEDSIGNAL */  // (RandInit has no lane)
        logic [SIMD*K_W-1:0] k_in;
        /* verilator lint_on UNUSEDSIGNAL */
        if (ADDER_LEVELS > 0) begin : g_k_reg
            always_ff @(posedge clk) k_in <= k_word[l];
        end else begin : g_k
            assign k_in = k_word[l];
        end
        if (!RANDINIT) begin : g_score_lane
            folded_score_lane #(
                .SIMD(SIMD), .QK_W(QK_W), .K_W(K_W), .SCORE_W(SCORE_W), .L1(L1 ? 1 : 0),
                .LEVELS(ADDER_LEVELS)
            ) u_score (
                .clk(clk), .q(q_in), .k(k_in), .part(part_l)
            );
        end else begin : g_r  // RandInit: the score is R's entry (S_EXTRA cycles as a lane)
            logic signed [W_W-1:0] r;
            assign r = ws_word[l*W_W +: W_W];
            if (ADDER_LEVELS > 0) begin : g_r_reg  // read register, then the terms' one
                logic signed [W_W-1:0] r_q, r_t;
                always_ff @(posedge clk) {r_q, r_t} <= {r, r_q};
                assign part_l = SCORE_W'(r_t);
            end else begin : g_r_wire
                assign part_l = SCORE_W'(r);
            end
        end
        assign s_next[l] = ((p2_c == 0) ? SCORE_W'(0) : s_acc) + part_r;
        assign s_hold[l] = s_acc;

        if (ADDER_LEVELS > 0) begin : g_vis_reg
            logic vis_r;
            assign key = vis_pre_jb * LANES + l;
            always_ff @(posedge clk) vis_r <= is_visible(key, length, qi, offset);
            assign visible[l] = vis_r;
        end else begin : g_vis
            assign key = vis_jb * LANES + l;
            assign visible[l] = is_visible(key, length, qi, offset);
        end
        folded_ram #(.WIDTH(SCORE_W), .DEPTH(KB), .MACRO_ROWS(MACRO_ROWS), .AW(SA_W)) s_bank (
            .clk(clk), .we(p2_v && p2_ph == S_SCORE && p2_c == SC - 1), .waddr(SA_W'(p2_jb)),
            .wdata(s_next[l]), .re(ex0), .raddr(SA_W'(jb)), .rdata(s_read[l])
        );
        // S and the exp word as exp's stages take them: registered as read with ADDER_LEVELS
        // (a block RAM's clock-to-output gets a cycle of its own; e and V: g_numer)
        logic signed [SCORE_W-1:0] s_in;
        logic [EXP_W-1:0] exp_in;
        if (ADDER_LEVELS > 0) begin : g_read_reg
            always_ff @(posedge clk) begin
                s_in <= s_read[l];
                exp_in <= exp_data[l*EXP_W +: EXP_W];
            end
        end else begin : g_read
            assign {s_in, exp_in} = {s_read[l], exp_data[l*EXP_W +: EXP_W]};
        end
        assign zdiff = (SCORE_W + 1)'(smax) - (SCORE_W + 1)'(s_in);
        assign exp_index = zdiff >>> EXP_SHIFT;
        assign exp_addr[l*EXP_A +: EXP_A] = exp_index[EXP_A-1:0];
        assign exp_re[l] = (state == S_EXP) && ea_v && visible[l] && 32'(exp_index) < EXP_SIZE;
        assign e_next[l] = p2_hit[l] ? exp_in : EXP_W'(0);
        folded_ram #(.WIDTH(EXP_W), .DEPTH(KB), .MACRO_ROWS(MACRO_ROWS), .AW(SA_W)) e_bank (
            .clk(clk), .we(p2_v && p2_ph == S_EXP), .waddr(SA_W'(p2_jb)), .wdata(e_next[l]),
            .re(nm0), .raddr(SA_W'(jb)), .rdata(e_read[l])
        );

        always_ff @(posedge clk) begin
            part_r <= part_l;  // (q and k hold between reads: no enable needed)
            if (rst) s_acc <= '0;
            else if (p2_v && p2_ph == S_SCORE) s_acc <= s_next[l];
        end
    end

    // the max over the visible keys: a balanced tree over the lanes (a visible flag with each
    // value; continuous assigns: Icarus loops on an always_comb that reads back what it writes
    // here), then with the max so far. Key 0 is always visible, so block 0 starts from its
    // block's max. With ADDER_LEVELS the block's max is registered (stage 4 updates smax).
    localparam int MT_L = (LANES > 1) ? $clog2(LANES) : 0;
    localparam int MT_N = 1 << MT_L;
    for (genvar lv = 0; lv <= MT_L; lv++) begin : g_max
        logic [(MT_N >> lv)*(SCORE_W+1)-1:0] m;  // {visible, value} of each node
        for (genvar i = 0; i < (MT_N >> lv); i++) begin : g_node
            if (lv == 0) begin : g_leaf
                if (i < LANES) begin : g_lane_leaf
                    assign m[i*(SCORE_W+1) +: SCORE_W+1] = {visible[i], s_hold[i]};
                end else begin : g_pad
                    assign m[i*(SCORE_W+1) +: SCORE_W+1] = '0;
                end
            end else begin : g_pair
                logic [SCORE_W:0] a, b;
                assign a = g_max[lv-1].m[2*i*(SCORE_W+1) +: SCORE_W+1];
                assign b = g_max[lv-1].m[(2*i+1)*(SCORE_W+1) +: SCORE_W+1];
                assign m[i*(SCORE_W+1) +: SCORE_W+1] =
                    (a[SCORE_W] && (!b[SCORE_W]
                        || $signed(a[SCORE_W-1:0]) >= $signed(b[SCORE_W-1:0]))) ? a : b;
            end
        end
    end
    logic [SCORE_W:0]    bmax;     // {any visible, max} of the block (stage 3)
    logic [SCORE_W:0]    bmax_q;   // as smax's update sees it
    logic [KB_CW-1:0]    max_jb;   // the block of that update
    logic                max_v;    // the update's item (the head's last chunk of the block)
    assign bmax = g_max[MT_L].m;
    if (MAX_PIPE != 0) begin : g_bmax_reg
        always_ff @(posedge clk) bmax_q <= bmax;
        assign {max_v, max_jb} = {p4_v && p4_ph == S_SCORE && p4_c == SC - 1, p4_jb};
    end else begin : g_bmax
        assign bmax_q = bmax;
        assign {max_v, max_jb} = {p3_v && p3_ph == S_SCORE && p3_c == SC - 1, p3_jb};
    end
    assign smax_next = (max_jb == 0 || (bmax_q[SCORE_W] && $signed(bmax_q[SCORE_W-1:0]) > smax))
                     ? bmax_q[SCORE_W-1:0] : smax;

    // the sum E: the lanes' weights in a balanced tree, then E so far
    logic [LANES*SUM_W-1:0] e_terms;
    logic [SUM_W-1:0]       e_block;  // the block's sum
    for (genvar l = 0; l < LANES; l++) begin : g_reduce
        assign e_terms[l*SUM_W +: SUM_W] = SUM_W'(e_next[l]);
    end
    folded_adder_tree #(.TERMS(LANES), .W(SUM_W)) u_esum (
        .clk(clk), .terms(e_terms), .sum(e_block)
    );
    assign esum_next = ((p2_jb == 0) ? SUM_W'(0) : esum) + e_block;

    // e * V at its exact width (e unsigned, V signed)
    function automatic logic signed [EXP_W+V_W:0] weighted(
        input logic [EXP_W-1:0] e, input logic signed [V_W-1:0] v);
        weighted = $signed({1'b0, e}) * v;
    endfunction

    for (genvar t = 0; t < SIMD; t++) begin : g_numer
        logic signed [NUMER_W-1:0] total;  // the block's sum of e V
        logic signed [EXP_W+V_W:0] prod_r [LANES];  // stage 1: e V of each lane

        logic [EXP_W-1:0] e_q [LANES];  // e and V registered as read (ADDER_LEVELS)
        logic signed [V_W-1:0] v_q [LANES];
        always_ff @(posedge clk) begin  // (e and V hold between reads: no enable needed)
            for (int l = 0; l < LANES; l++) begin
                e_q[l] <= e_read[l];
                v_q[l] <= v_word[l][t*V_W +: V_W];
                prod_r[l] <= (N_EXTRA > 0) ? weighted(e_q[l], v_q[l])
                                           : weighted(e_read[l], v_word[l][t*V_W +: V_W]);
            end
        end
        // the lanes' products in a balanced tree, then N so far
        logic [LANES*NUMER_W-1:0] n_terms;
        for (genvar l = 0; l < LANES; l++) begin : g_term
            assign n_terms[l*NUMER_W +: NUMER_W] = NUMER_W'(prod_r[l]);
        end
        folded_adder_tree #(.TERMS(LANES), .W(NUMER_W)) u_nsum (
            .clk(clk), .terms(n_terms), .sum(total)
        );
        assign numer_next[t] = ((p2_jb == 0) ? NUMER_W'(0) : numer[t]) + total;
        assign numer_packed[t*NUMER_W +: NUMER_W] = numer[t];  // stage 3: N of the chunk
        always_ff @(posedge clk) begin
            if (rst) numer[t] <= '0;
            else if (p2_v && p2_ph == S_NUMER) numer[t] <= numer_next[t];
        end
    end

    // O = N / E; R = RECIP[index of E] is read once per query and head, in exp's last cycle
    // (with ADDER_LEVELS the index follows E by two cycles: exp's drain has them)
    // R as the normalization reads it: registered after its table with ADDER_LEVELS
    logic [RECIP_W-1:0] recip_q;
    if (NORM_PIPE != 0) begin : g_recip_reg
        always_ff @(posedge clk) recip_q <= recip;
    end else begin : g_recip
        assign recip_q = recip;
    end
    recip_normalize #(
        .LANES(SIMD), .SUM_W(SUM_W), .NUMER_W(NUMER_W), .INDEX_W(RIDX_W), .RECIP_W(RECIP_W),
        .RECIP_FRAC(RECIP_FRAC), .PROD_W(PROD_W), .OUT_W(ATTN_W), .PIPE(NORM_PIPE)
    ) u_normalize (
        .clk(clk), .e_sum(esum), .numer(numer_packed), .recip_index(recip_index),
        .recip(recip_q), .o(o_word)
    );
    // O of stage 3 (stage 4 with ADDER_LEVELS): its valid item, key block and chunk
    logic             o_v;
    logic [KB_CW-1:0] o_jb;
    logic [C_CW-1:0] o_c;
    assign {o_v, o_jb, o_c} = (NORM_PIPE != 0) ? {p4_v && p4_ph == S_NUMER, p4_jb, p4_c}
                                               : {p3_v && p3_ph == S_NUMER, p3_jb, p3_c};
    folded_rom #(
        .WIDTH(RECIP_W), .DEPTH(2**RIDX_W), .SYNC(1), .FILE(RECIP_FILE),
        .MACRO_ROWS(MACRO_ROWS), .AW(RIDX_W)
    ) recip_rom (
        .clk(clk), .re(state == S_EXP && drained), .addr(recip_index), .data(recip)
    );

    folded_ram #(
        .WIDTH(SIMD*ATTN_W), .DEPTH(2*LEN_Q*DC), .MACRO_ROWS(MACRO_ROWS), .AW(QA_W+1)
    ) a_mem (
        .clk(clk), .we(o_v && o_jb == KB - 1),
        .waddr((QA_W+1)'(banked(att_b, QD, qi*DC + hh*HC + o_c))), .wdata(o_word),
        .re(a_re), .raddr((QA_W+1)'(banked(post_b, QD, m_rd_tok*DC + m_rd_rc))), .rdata(a_word)
    );

    // -- out: the Z pieces on m_axis, each word read a cycle before it is offered ----------------
    assign z_re = z_full[out_b] && (rd_cnt < OUT_BEATS) && (!out_valid || m_axis_tready);
    assign m_axis_tvalid = out_valid;
    assign m_axis_tdata  = z_word;
    assign m_axis_tlast  = (out_cnt == OUT_BEATS - 1);
    assign out_end = out_valid && m_axis_tready && (out_cnt == OUT_BEATS - 1);

    // -- the hand-over: each unit starts a vector when its input bank is full and its output
    // bank free (the flags set at the end of the producer's last cycle, seen the cycle after)
    assign pre_ready  = xy_full[pre_b] && !qkv_full[pre_b];
    assign post_ready = a_full[post_b] && !z_full[post_b];
    assign pre_go  = !walk_pre && !walk_post && (owed != 2) && pre_ready;
    assign post_go = !walk_pre && !walk_post && post_ready
                  && (owed == 2 || (owed == 1 && !pre_ready));
    assign start_post = post_go;
    assign att_go  = (state == S_IDLE) && qkv_full[att_b] && !a_full[att_b];
    assign att_end = (state == S_NUMER) && drained && (hh == HEADS - 1) && (qi == LEN_Q - 1);

    always_ff @(posedge clk) begin
        if (rst) begin
            {xy_full, qkv_full, a_full, z_full} <= '0;
            {ld_b, pre_b, att_b, post_b, out_b} <= '0;
            {owed, walk_pre, walk_post} <= '0;
            in_cnt <= 0;
            out_cnt <= 0;
            rd_cnt <= 0;
            out_valid <= 1'b0;
            for (int b = 0; b < 2; b++) begin
                {ld_length[b], ld_offset[b], att_length[b], att_offset[b]} <= '0;
            end
        end else begin
            // loader: the vector's beats into bank ld_b
            if (in_beat) begin
                if (in_cnt == 0) begin
                    ld_length[ld_b] <= s_axis_tuser[0 +: LEN_W];
                    ld_offset[ld_b] <= s_axis_tuser[LEN_W +: OFF_W];
                end
                if (in_cnt == IN_BEATS - 1) begin
                    in_cnt <= 0;
                    xy_full[ld_b] <= 1'b1;
                    ld_b <= !ld_b;
                end else begin
                    in_cnt <= in_cnt + 1;
                end
            end
            // walks: pre takes x, y [pre_b] to Q, K, V [pre_b]; post O [post_b] to Z [post_b]
            if (pre_go) begin
                walk_pre <= 1'b1;
                owed <= owed + 1;
                att_length[pre_b] <= ld_length[pre_b];
                att_offset[pre_b] <= ld_offset[pre_b];
            end
            if (post_go) begin
                walk_post <= 1'b1;
                owed <= owed - 1;
            end
            if (pre_done) begin
                walk_pre <= 1'b0;
                xy_full[pre_b] <= 1'b0;
                qkv_full[pre_b] <= 1'b1;
                pre_b <= !pre_b;
            end
            if (post_done) begin
                walk_post <= 1'b0;
                a_full[post_b] <= 1'b0;
                z_full[post_b] <= 1'b1;
                post_b <= !post_b;
            end
            // attention: Q, K, V [att_b] to O [att_b]
            if (att_end) begin
                qkv_full[att_b] <= 1'b0;
                a_full[att_b] <= 1'b1;
                att_b <= !att_b;
            end
            // out: Z [out_b] on m_axis
            if (z_re) begin
                rd_cnt <= rd_cnt + 1;
                out_valid <= 1'b1;
            end else if (m_axis_tready) begin
                out_valid <= 1'b0;
            end
            if (out_valid && m_axis_tready) out_cnt <= out_end ? 0 : out_cnt + 1;
            if (out_end) begin
                rd_cnt <= 0;
                z_full[out_b] <= 1'b0;
                out_b <= !out_b;
            end
        end
    end

    // -- the attention unit: per query and head, scores, exp, numerators -----------------------
    // stage 1's items, X_LEN cycles back (beside the pipelined reads and sums): each phase's
    // stage 2 takes its own tap (scores S_EXTRA, exp E_EXTRA, numerators N_EXTRA), exp's
    // table is addressed from tap E_EXTRA - 1 (ea_*)
    localparam int P_W = 3 + KB_CW + C_CW;  // {valid, phase, key block, chunk}
    localparam int X_LEN = (S_EXTRA > E_EXTRA) ? S_EXTRA : E_EXTRA;  // >= N_EXTRA
    logic [(X_LEN+1)*P_W-1:0] x_tap;  // tap i at [i*P_W +: P_W]: stage 1's item i cycles ago
    logic [P_W-1:0] p2_in;
    logic [C_CW-1:0] ea_c_unused;
    logic [1:0]       ea_ph_unused;
    logic [LANES-1:0] hit_in;  // exp_re as stage 2 takes it
    assign x_tap[0 +: P_W] = {p1_v, p1_ph, p1_jb, p1_c};
    for (genvar i = 1; i <= X_LEN; i++) begin : g_x_line
        logic [P_W-1:0] q;
        always_ff @(posedge clk) q <= rst ? '0 : x_tap[(i-1)*P_W +: P_W];
        assign x_tap[i*P_W +: P_W] = q;
    end
    assign p2_in = (state == S_SCORE) ? x_tap[S_EXTRA*P_W +: P_W]
                 : (state == S_EXP) ? x_tap[E_EXTRA*P_W +: P_W] : x_tap[N_EXTRA*P_W +: P_W];
    assign {ea_v, ea_ph_unused, ea_jb, ea_c_unused} = x_tap[((E_EXTRA > 0) ? E_EXTRA - 1 : 0)*P_W +: P_W];
    if (E_EXTRA > 1) begin : g_hit_reg  // the exp word registered: its hit flag a cycle later
        always_ff @(posedge clk) hit_in <= rst ? '0 : exp_re;
    end else begin : g_hit
        assign hit_in = exp_re;
    end
    always_ff @(posedge clk) begin
        if (rst) begin
            {p1_v, p2_v, p3_v, p1_jb, p2_jb, p3_jb, p1_c, p2_c, p3_c, p2_hit} <= '0;
            {p4_v, p4_jb, p4_c, p1_ph, p2_ph, p3_ph, p4_ph} <= '0;
        end else begin
            {p1_v, p1_ph, p1_jb, p1_c} <= {sc0 || ex0 || nm0, state, jb,
                                           (state == S_SCORE) ? dc : tc};
            {p2_v, p2_ph, p2_jb, p2_c, p2_hit} <= {p2_in, hit_in};
            {p3_v, p3_ph, p3_jb, p3_c} <= {p2_v, p2_ph, p2_jb, p2_c};
            {p4_v, p4_ph, p4_jb, p4_c} <= {p3_v, p3_ph, p3_jb, p3_c};
        end
    end
    always_ff @(posedge clk) begin
        if (rst) begin
            state <= S_IDLE;
            {qi, hh, jb, dc, tc, drain} <= '0;
            smax <= '0;
            esum <= '0;
        end else begin
            if (max_v) smax <= smax_next;
            if (p2_v && p2_ph == S_EXP) esum <= esum_next;
            if (drain != 0) drain <= drained ? 0 : drain + 1;  // (set to 1 as stage 0 ends)
            case (state)
                S_IDLE: if (att_go) state <= S_SCORE;
                S_SCORE: if (drain == 0) begin  // dc fastest, then the key block
                    dc <= (dc == SC - 1) ? 0 : dc + 1;
                    if (dc == SC - 1) begin
                        jb <= (jb == KB - 1) ? 0 : jb + 1;
                        if (jb == KB - 1) drain <= 1;
                    end
                end else if (drained) begin
                    state <= S_EXP;
                end
                S_EXP: if (drain == 0) begin
                    jb <= (jb == KB - 1) ? 0 : jb + 1;
                    if (jb == KB - 1) drain <= 1;
                end else if (drained) begin  // (its last: the reciprocal's read)
                    state <= S_NUMER;
                end
                S_NUMER: if (drain == 0) begin  // jb fastest, then the feature chunk
                    jb <= (jb == KB - 1) ? 0 : jb + 1;
                    if (jb == KB - 1) begin
                        tc <= (tc == HC - 1) ? 0 : tc + 1;
                        if (tc == HC - 1) drain <= 1;
                    end
                end else if (drained) begin  // then the head, the query
                    state <= S_SCORE;
                    hh <= (hh == HEADS - 1) ? 0 : hh + 1;
                    if (hh == HEADS - 1) begin
                        qi <= (qi == LEN_Q - 1) ? 0 : qi + 1;
                        if (qi == LEN_Q - 1) state <= S_IDLE;  // att_end
                    end
                end
                default: state <= S_IDLE;
            endcase
        end
    end
    /* verilator lint_on WIDTHTRUNC */
    /* verilator lint_on WIDTHEXPAND */
endmodule

`default_nettype wire
