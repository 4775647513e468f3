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
//   attn     per query and head: the scores of LANES keys a cycle, max S, the softmax
//            weights and E, the numerators and O = N / E (the attention unit, folded_attend)
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
// EXP_FILE and RECIP_FILE hold the softmax tables (the attention unit's, with its Q, K, V,
// score, weight and O memories); the token memories are written one SIMD-wide word per cycle.
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
    parameter int SCORE       = 0,    // the mechanism (eatt.mechanisms rtl_score): its score
                                      // front end (folded_attend.sv)
    // what the mechanism asks of the walks and the score phase (rtl_sim/folded.py
    // walk_parameters, from its Mechanism facets): E-ATT's select walk (K and Q beside V);
    // the multiply walk's passes before attention (2 bits each, the first at [1:0]:
    // folded_proj_walk's PASS_*), the ROMs it reads (a bit a pass, O always) and Dense's relu
    // on the Q pass (its hidden layer); the score phase's chunks a key block, a lane's terms
    parameter int SELECT_WALK = 1,
    parameter int N_PRE       = 1,
    parameter logic [5:0] PRE = 6'b00_00_01,
    parameter logic [3:0] USES = 4'b1010,
    parameter int RELU        = 0,
    parameter int SC          = DIM / HEADS / SIMD,
    parameter int LANE_TERMS  = SIMD,
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
    localparam int DC     = DIM / SIMD;       // SIMD-wide chunks of a token
    localparam int KB     = LEN_K / LANES;    // blocks of LANES keys
    localparam int MUL_COLS = PE;  // the multiply walk's columns (PE = SIMD but for E-ATT)
    localparam bit READS_X = (SELECT_WALK != 0) || USES[2];  // a walk projects x (Q, or H)
    localparam int M      = SIMD / MUL_COLS;  // its pieces of a SIMD-wide V or Z word
    localparam int IN_BEATS  = (LEN_Q + LEN_K) * DC;
    // counter widths: a counter over [0, n) has CW(n) bits
    localparam int LEN_MAX = (LEN_Q > LEN_K) ? LEN_Q : LEN_K;
    localparam int IN_CW   = (IN_BEATS > 1) ? $clog2(IN_BEATS) : 1;
    localparam int TOK_CW  = (LEN_MAX > 1) ? $clog2(LEN_MAX) : 1;
    localparam int LANE_CW = (LANES > 1) ? $clog2(LANES) : 1;
    localparam int KB_CW   = (KB > 1) ? $clog2(KB) : 1;
    localparam int DC_CW   = (DC > 1) ? $clog2(DC) : 1;
    localparam int M_CW    = (M > 1) ? $clog2(M) : 1;

    // the output projection's pass (folded_proj_walk PASS_O)
    localparam logic [1:0] PASS_O = 2'd3;

    // -- the units' hand-over: two banks per buffer, a full flag each, a pointer per unit ------
    logic [1:0] xy_full, qkv_full, a_full, z_full;
    logic       ld_b, pre_b, att_b, post_b, out_b;  // the bank each unit is on
    logic [1:0] owed;              // vectors the walks did pre for and not yet post
    logic       walk_pre, walk_post;  // the walks' job (at most one)
    logic       pre_go, post_go, pre_ready, post_ready, att_end;
    logic       out_end;

    // -- memories (folded_ram / folded_rom: macros from MACRO_ROWS words, else flip-flops) -------
    // x_mem: query tokens, chunk c of token i at i*DC + c; y_mem: key tokens; Z is the output
    // unit's (folded_out), Q, K, V and O the attention unit's (folded_attend).
    localparam int QA_W = $clog2(2 * LEN_Q * DC);  // x addresses (two banks)
    localparam int KA_W = $clog2(2 * LEN_K * DC);  // y addresses (two banks)
    // the buffers between units hold two vectors: bank b's words after bank 0's depth words
    localparam int QD = LEN_Q * DC, YD = LEN_K * DC;  // words of a bank
    function automatic int unsigned banked(input logic b, input int unsigned depth,
                                           input int unsigned addr);
        banked = addr + (b ? depth : 0);
    endfunction

    // -- load: s_axis into x_mem, y_mem -----------------------------------------------------------
    logic [IN_CW-1:0]  in_cnt;   // beats of this vector so far
    // the mask inputs travel with the vector: loaded beside x, y; handed to the Q/K/V bank
    logic [LEN_W-1:0] length, ld_length [2], att_length [2];
    logic [OFF_W-1:0] offset, ld_offset [2], att_offset [2];
    assign length = att_length[att_b];
    assign offset = att_offset[att_b];

    assign s_axis_tready = !xy_full[ld_b];

    logic in_beat;
    assign in_beat = s_axis_tvalid && s_axis_tready;
    // the loader's writes into x, y [ld_b]: as each beat comes, or with ADDER_LEVELS a cycle
    // later from registers beside the memories (the beat's count no longer runs from the port
    // to the block RAMs across the part and back), the bank's full flag set with the last
    logic                 x_we, y_we, full_set, full_b;
    logic [QA_W-1:0]      x_wa;
    logic [KA_W-1:0]      y_wa;
    logic [SIMD*IN_W-1:0] in_data;
    if (ADDER_LEVELS > 0) begin : g_in_reg
        always_ff @(posedge clk) begin
            x_we <= !rst && in_beat && in_cnt < LEN_Q * DC;
            y_we <= !rst && in_beat && in_cnt >= LEN_Q * DC;
            full_set <= !rst && in_beat && in_cnt == IN_BEATS - 1;
            x_wa <= QA_W'(banked(ld_b, QD, in_cnt));
            y_wa <= KA_W'(banked(ld_b, YD, in_cnt - LEN_Q * DC));
            full_b <= ld_b;
            in_data <= s_axis_tdata;
        end
    end else begin : g_in_wire
        assign x_we = in_beat && in_cnt < LEN_Q * DC;
        assign y_we = in_beat && in_cnt >= LEN_Q * DC;
        assign full_set = in_beat && in_cnt == IN_BEATS - 1;
        assign x_wa = QA_W'(banked(ld_b, QD, in_cnt));
        assign y_wa = KA_W'(banked(ld_b, YD, in_cnt - LEN_Q * DC));
        assign full_b = ld_b;
        assign in_data = s_axis_tdata;
    end
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

    // the walks' start: the hand-over's decision (pre_go, post_go) as it is, or (ADDER_LEVELS
    // >= 1) registered, a copy beside each walk (kept apart: the decision reads the bank flags
    // across the part, and each walk's control sits by its own ROMs): each job starts a cycle
    // later (rtl_sim/folding.py walk_start); walk_pre / walk_post are set at the decision
    logic m_start_pre, m_start_post, s_start_pre, s_start_post;
    if (ADDER_LEVELS > 0) begin : g_start_reg
        (* keep *) logic [1:0] m_go;
        (* keep *) logic [1:0] s_go;
        always_ff @(posedge clk) begin
            m_go <= rst ? '0 : {start_pre, start_post};
            s_go <= rst ? '0 : {start_pre, start_post};
        end
        assign {m_start_pre, m_start_post} = m_go;
        assign {s_start_pre, s_start_post} = s_go;
    end else begin : g_start
        assign {m_start_pre, m_start_post} = {start_pre, start_post};
        assign {s_start_pre, s_start_post} = {start_pre, start_post};
    end
    /* verilator lint_off UNUSEDSIGNAL */  // (one walk: no select walk's start)
    logic s_start_unused;
    assign s_start_unused = s_start_pre ^ s_start_post;
    /* verilator lint_on UNUSEDSIGNAL */
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
        .SELECT(0), .N_PRE(N_PRE), .PRE(PRE), .POST(1), .USES(USES), .RELU(RELU),
        .IN_W(IN_W), .TAU(TAU), .W_W(W_W), .ATTN_W(ATTN_W), .ACC_W(ACC_W),
        .Q_SHIFT(Q_SHIFT), .QK_W(QK_W), .V_SHIFT(V_SHIFT), .V_W(V_W), .O_SHIFT(O_SHIFT),
        .OUT_W(OUT_W), .WQ_FILE(WQ_FILE), .WK_FILE(WK_FILE), .WV_FILE(WV_FILE),
        .WO_FILE(WO_FILE), .MACRO_ROWS(MACRO_ROWS), .ADDER_LEVELS(ADDER_LEVELS)
    ) u_multiply (
        .clk(clk), .rst(rst), .start_pre(m_start_pre), .start_post(m_start_post),
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

    if (SELECT_WALK != 0) begin : g_select  // the select walk: K then Q, beside V
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
            .clk(clk), .rst(rst), .start_pre(s_start_pre), .start_post(s_start_post),
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

    // the token memories: x (written first) and y, from the stream; no x where no walk
    // projects it (RandInit: its scores are R; the x beats are taken and dropped)
    if (READS_X) begin : g_x_mem
        folded_ram #(
            .WIDTH(SIMD*IN_W), .DEPTH(2*LEN_Q*DC), .MACRO_ROWS(MACRO_ROWS), .AW(QA_W)
        ) x_mem (
            .clk(clk), .we(x_we), .waddr(x_wa), .wdata(in_data), .re(x_re),
            .raddr(QA_W'(banked(pre_b, QD, x_rd_tok*DC + x_rd_rc))),
            .rdata(x_word)
        );
    end else begin : g_no_x
        /* verilator lint_off UNUSEDSIGNAL */
        logic x_unused;
        /* verilator lint_on UNUSEDSIGNAL */
        assign x_unused = x_re ^ (|x_rd_tok) ^ (|x_rd_rc) ^ x_we ^ (|x_wa);
        assign x_word = '0;
    end
    folded_ram #(
        .WIDTH(SIMD*IN_W), .DEPTH(2*LEN_K*DC), .MACRO_ROWS(MACRO_ROWS), .AW(KA_W)
    ) y_mem (
        .clk(clk), .we(y_we), .waddr(y_wa), .wdata(in_data), .re(y_re),
        .raddr(KA_W'(banked(pre_b, YD, m_rd_tok*DC + m_rd_rc))), .rdata(y_word)
    );
    // -- attention (folded_attend): Q/K/V [att_b] -> O [att_b]; it holds the Q, K, V and O
    // memories, the walks writing Q, K, V into bank pre_b and reading O from bank post_b
    folded_attend #(
        .SCORE(SCORE), .LEN_Q(LEN_Q), .LEN_K(LEN_K), .DIM(DIM), .HEADS(HEADS), .LANES(LANES),
        .SIMD(SIMD), .PE(PE), .W_W(W_W), .QK_W(QK_W), .V_W(V_W), .SCORE_W(SCORE_W),
        .EXP_SHIFT(EXP_SHIFT), .EXP_SIZE(EXP_SIZE), .EXP_W(EXP_W), .SUM_W(SUM_W),
        .NUMER_W(NUMER_W), .RIDX_W(RIDX_W), .RECIP_W(RECIP_W), .RECIP_FRAC(RECIP_FRAC),
        .PROD_W(PROD_W), .ATTN_W(ATTN_W), .KEY_PADDING(KEY_PADDING), .CAUSAL(CAUSAL),
        .LEN_W(LEN_W), .OFF_W(OFF_W), .WS_FILE(WS_FILE), .EXP_FILE(EXP_FILE),
        .RECIP_FILE(RECIP_FILE), .MACRO_ROWS(MACRO_ROWS), .ADDER_LEVELS(ADDER_LEVELS),
        .SC(SC), .LANE_TERMS(LANE_TERMS)
    ) u_attend (
        .clk(clk), .rst(rst), .ready(qkv_full[att_b] && !a_full[att_b]), .done(att_end),
        // (a mask the config does not take: a constant, so that synthesis drops its registers
        // across the unit's boundary: resources does not flatten)
        .att_b(att_b), .length(KEY_PADDING != 0 ? length : '0),
        .offset(CAUSAL != 0 ? offset : '0),
        .pre_b(pre_b), .qk_valid(qk_valid), .qk_pass(qk_pass), .qk_tok(qk_tok),
        .qk_lane(qk_lane), .qk_blk(qk_blk), .qk_cc(qk_cc), .qk_code(qk_code),
        .vo_valid(vo_valid), .vo_pass(vo_pass), .vo_lane(vo_lane), .vo_blk(vo_blk),
        .vo_cc(vo_cc), .vo_sub(vo_sub), .v_code(v_code),
        .post_b(post_b), .a_re(a_re), .a_rd_tok(m_rd_tok), .a_rd_rc(m_rd_rc), .a_word(a_word)
    );


    // -- out: Z [out_b] on m_axis (folded_out: the Z memory, written by the post walk into
    // bank post_b, its words read back as SIMD-wide beats)
    folded_out #(
        .SIMD(SIMD), .MUL_COLS(MUL_COLS), .OUT_W(OUT_W), .LEN_Q(LEN_Q), .DIM(DIM),
        .MACRO_ROWS(MACRO_ROWS), .ADDER_LEVELS(ADDER_LEVELS), .TOK_CW(TOK_CW)
    ) u_out (
        .clk(clk), .rst(rst), .post_b(post_b), .wr_en(vo_valid && vo_pass == PASS_O),
        .wr_tok(vo_tok), .wr_cc(vo_cc), .wr_sub(vo_sub), .wr_code(z_code),
        .out_b(out_b), .full(z_full[out_b]), .m_axis_tdata(m_axis_tdata),
        .m_axis_tvalid(m_axis_tvalid), .m_axis_tready(m_axis_tready),
        .m_axis_tlast(m_axis_tlast), .out_end(out_end)
    );

    // -- the hand-over: each unit starts a vector when its input bank is full and its output
    // bank free (the flags set at the end of the producer's last cycle, seen the cycle after)
    assign pre_ready  = xy_full[pre_b] && !qkv_full[pre_b];
    assign post_ready = a_full[post_b] && !z_full[post_b];
    assign pre_go  = !walk_pre && !walk_post && (owed != 2) && pre_ready;
    assign post_go = !walk_pre && !walk_post && post_ready
                  && (owed == 2 || (owed == 1 && !pre_ready));
    assign start_post = post_go;

    always_ff @(posedge clk) begin
        if (rst) begin
            {xy_full, qkv_full, a_full, z_full} <= '0;
            {ld_b, pre_b, att_b, post_b, out_b} <= '0;
            {owed, walk_pre, walk_post} <= '0;
            in_cnt <= 0;
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
                    ld_b <= !ld_b;
                end else begin
                    in_cnt <= in_cnt + 1;
                end
            end
            if (full_set) xy_full[full_b] <= 1'b1;  // (g_in_reg, g_in_wire)
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
            // out: Z [out_b] on m_axis (folded_out)
            if (out_end) begin
                z_full[out_b] <= 1'b0;
                out_b <= !out_b;
            end
        end
    end
    /* verilator lint_on WIDTHTRUNC */
    /* verilator lint_on WIDTHEXPAND */
endmodule

`default_nettype wire
