// folded_attend: the folded engine's attention unit (folded_attention.sv): per query and head,
// the scores of LANES keys a cycle, the softmax weights, the numerators and O = N / E.
//
// It holds the memories between the walks and attention, each of two banks, a vector in each
// (the engine's hand-over, folded_attention.sv): the mechanism's score front end's (Q and the
// K banks: folded_scores_qk.sv; Dense's hidden layer H and W_2: folded_scores_dense.sv;
// RandInit's R: folded_scores_randinit.sv), the V banks (key j in bank j mod LANES, so LANES
// keys are read in one cycle), the softmax tables (EXP_FILE, RECIP_FILE) and O (a_mem). The
// walks write Q, K (qk_*) and V (vo_*) into bank pre_b as they finish each chunk; attention
// reads bank att_b; the walks' post pass reads O from bank post_b (a_re, a_rd_tok, a_rd_rc;
// a_word the next cycle). A vector: `ready` (its Q/K/V bank full, its O bank free) while the
// unit is idle starts it; `done` is high in its last cycle, O then written.
//
//   per query i, per head h:
//     score  LANES keys at a time (the front end's lanes): S[j], max_j S; SC chunks a key
//            block: HC of the head (E-ATT, vanilla), DC of the whole hidden token (Dense: lane
//            l against W_2's column h LEN_K + j), 1 (RandInit: R read)
//     exp    LANES keys per cycle: e[j] = EXP[(max S - S[j]) >> EXP_SHIFT], E = sum_j e[j]
//     numer  SIMD features x LANES keys per cycle: N[t] = sum_j e[j] V[j][t], then
//            O = N / E (recip_normalize, the reciprocal table) into a_mem
//
// A vector takes LEN_Q HEADS (KB SC + KB + KB HC + FILL) cycles (FILL: the phases' drain
// cycles, 9 at ADDER_LEVELS 0; rtl_sim/folding.py attention_fill) from the edge that takes
// `ready` to the end of `done`'s cycle. Bit-exact with eatt.quant.golden.GoldenCore's
// softmax_weights and weighted_values on the Q, K (or H, or R) and V it is given;
// rtl_sim/tb/folded_attend tests it alone, with each front end.

`default_nettype none

module folded_attend #(
    parameter int SCORE       = 0,    // the mechanism: its score front end (below)
    parameter int LEN_Q       = 2,    // query tokens
    parameter int LEN_K       = 4,    // key tokens
    parameter int DIM         = 8,    // model dimension
    parameter int HEADS       = 2,    // heads (D_HEAD = DIM / HEADS)
    parameter int LANES       = 2,    // keys scored per cycle (divides LEN_K)
    parameter int SIMD        = 2,    // features per cycle (divides D_HEAD)
    parameter int PE          = 2,    // E-ATT: V columns a walk's word (divides SIMD)
    parameter int W_W         = 8,    // bits of a weight, signed (Dense's W_2, RandInit's R)
    parameter int QK_W        = 12,   // bits of Q, K codes (qk_code_bits)
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
    parameter int KEY_PADDING = 0,    // 1: key j visible only if j < length
    parameter int CAUSAL      = 0,    // 1: key j visible to query i only if j <= i + offset
    parameter int LEN_W       = 3,    // bits of length
    parameter int OFF_W       = 2,    // bits of offset
    parameter     WS_FILE     = "",   // Dense's W_2 or RandInit's R ($readmemh, none by default)
    parameter     EXP_FILE    = "",
    parameter     RECIP_FILE  = "",
    parameter int MACRO_ROWS  = 32,   // memories of at least this many words are macros
    parameter int ADDER_LEVELS = 0,   // >= 1: pipelined for a clock (docs/folded.md)
    // the mechanism's score phase (Mechanism.folded_score_chunks, folded_lane_terms)
    parameter int SC          = DIM / HEADS / SIMD,  // chunks a key block
    parameter int LANE_TERMS  = SIMD,  // terms a score lane adds (0: the score is read)
    // derived (left at their defaults, as verilog-axis' KEEP_WIDTH): the port widths
    parameter int MUL_COLS = PE,  // the multiply walk's columns (V; PE = SIMD but for E-ATT)
    parameter int TOK_CW  = ((LEN_Q > LEN_K ? LEN_Q : LEN_K) > 1)
                          ? $clog2(LEN_Q > LEN_K ? LEN_Q : LEN_K) : 1,
    parameter int LANE_CW = (LANES > 1) ? $clog2(LANES) : 1,
    parameter int KB_CW   = ((LEN_K / LANES) > 1) ? $clog2(LEN_K / LANES) : 1,
    parameter int DC_CW   = ((DIM / SIMD) > 1) ? $clog2(DIM / SIMD) : 1,
    parameter int M_CW    = ((SIMD / MUL_COLS) > 1) ? $clog2(SIMD / MUL_COLS) : 1
) (
    input  wire logic                    clk,
    input  wire logic                    rst,  // synchronous, active high
    input  wire logic                    ready,     // bank att_b: Q/K/V full, O free
    output logic                         done,      // the vector's last cycle
    input  wire logic                    att_b,     // the bank attention is on
    input  wire logic [LEN_W-1:0]        length,    // its mask inputs
    input  wire logic [OFF_W-1:0]        offset,
    // the walks' chunks, into bank pre_b (folded_proj_walk wr_*): K and Q (Dense: H) codes,
    // SIMD wide; V codes, MUL_COLS wide (piece vo_sub of a SIMD-wide word)
    input  wire logic                    pre_b,
    /* verilator lint_off UNUSEDSIGNAL */  // (RandInit: no Q, K; Dense: no K; V: no token)
    input  wire logic                    qk_valid,
    input  wire logic [1:0]              qk_pass,
    input  wire logic [TOK_CW-1:0]       qk_tok,
    input  wire logic [LANE_CW-1:0]      qk_lane,
    input  wire logic [KB_CW-1:0]        qk_blk,
    input  wire logic [DC_CW-1:0]        qk_cc,
    input  wire logic [SIMD*QK_W-1:0]    qk_code,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic                    vo_valid,
    input  wire logic [1:0]              vo_pass,
    input  wire logic [LANE_CW-1:0]      vo_lane,
    input  wire logic [KB_CW-1:0]        vo_blk,
    input  wire logic [DC_CW-1:0]        vo_cc,
    input  wire logic [M_CW-1:0]         vo_sub,
    input  wire logic [MUL_COLS*V_W-1:0]      v_code,
    // O for the walks' post pass, from bank post_b: token a_rd_tok, chunk a_rd_rc
    input  wire logic                    post_b,
    input  wire logic                    a_re,
    input  wire logic [TOK_CW-1:0]       a_rd_tok,
    input  wire logic [DC_CW-1:0]        a_rd_rc,
    output logic      [SIMD*ATTN_W-1:0]  a_word
);
    // Counters exactly as wide as their ranges, mixed with int parameters (folded_attention.sv)
    /* verilator lint_off WIDTHEXPAND */
    /* verilator lint_off WIDTHTRUNC */
    localparam int D_HEAD = DIM / HEADS;
    localparam int DC     = DIM / SIMD;       // SIMD-wide chunks of a token
    localparam int HC     = D_HEAD / SIMD;    // chunks of a head
    localparam int KB     = LEN_K / LANES;    // blocks of LANES keys
    // the mechanisms' score front ends (eatt.mechanisms rtl_score): E-ATT's L1 and the dot
    // product (Q against K), Dense (H against W_2), RandInit (R read)
    localparam int SCORE_L1 = 0, SCORE_DOT = 1, SCORE_DENSE = 2, SCORE_RANDINIT = 3;
    localparam int EXP_A  = (EXP_SIZE > 1) ? $clog2(EXP_SIZE) : 1;
    localparam int C_MAX  = (SC > HC) ? SC : HC;  // the chunk counters' range (scores, numer)
    localparam int C_CW   = (C_MAX > 1) ? $clog2(C_MAX) : 1;
    localparam int Q_CW   = (LEN_Q > 1) ? $clog2(LEN_Q) : 1;
    localparam int H_CW   = (HEADS > 1) ? $clog2(HEADS) : 1;
    localparam int SA_W = (KB > 1) ? $clog2(KB) : 1;                    // score, weight banks
    typedef enum logic [1:0] { S_IDLE, S_SCORE, S_EXP, S_NUMER } state_t;
    localparam logic [1:0] PASS_V = 2'd1;  // folded_proj_walk's V pass

    state_t state;
    logic   att_go;
    assign att_go = (state == S_IDLE) && ready;

    // -- attention: per query qi and head hh, scores, exp, numerators -----------------------------
    // Each phase is a pipeline of four stages: stage 0 (the counters) addresses the memories
    // and stages 1-3 (p1_* .. p3_*: valid, key block, feature chunk) follow it a cycle apart:
    //   scores      1: the lanes' chunk sums (part_r)  2: S accumulates (s_bank)  3: max S
    //   exp         1: the exp table is addressed  2: e (e_bank), E  3: the reciprocal of E
    //   numerators  1: the products e V (folded_numer)  2: N accumulates  3: O = N / E (a_mem)
    // drain counts the three cycles after stage 0's last; the next phase starts after them.
    // ADDER_LEVELS >= 1 (for a clock): the scores' stage 1 takes S_EXTRA more cycles (q and k
    // registered twice as read, the lane's terms and its tree every ADDER_LEVELS levels: the
    // lane's chunk sum reaches part_r S_EXTRA cycles later, and its stage 2 with it, through
    // x_tap) and MAX_PIPE more after stage 3 (the block's max over the lanes registered every
    // ADDER_LEVELS compare levels, then max S updated); exp's stage 1 takes E_EXTRA = 4 more
    // (S registered as read, the table's index, then the exp table's word twice) and the
    // numerators' N_EXTRA = 5 (e and V registered twice as read, then e x V in multipliers
    // of at most 18 bits with a register on each side, piece_mult REGS 3); x_tap carries the
    // items; exp drains two more cycles (E's leading one, then the reciprocal's index
    // registered: recip_normalize PIPE); the numerators have stages 4-9 (recip_normalize PIPE
    // 3): stage 3 registers N and R beside the multipliers, 4-6 N x R's pieces (their operands,
    // products, products again), 7 N x R, 8 its shift by a multiple of 4 and the clamp's
    // compares, and stage 9 shifts the rest, rounds, clamps and writes a_mem;
    // R is registered after its table (read in exp's last cycle, used from stage 3).
    logic [Q_CW-1:0]  qi;      // query
    logic [H_CW-1:0]  hh;      // head
    logic [KB_CW-1:0] jb;      // key block
    logic [C_CW-1:0] dc, tc;  // feature chunk of the head (scores, numerators)
    localparam int FILL = 3;                       // stages after stage 0: drain cycles
    localparam int NORM_PIPE = (ADDER_LEVELS > 0) ? 1 : 0;
    // recip_normalize's PIPE and its cycles from N to O (PIPE 3: N and R, N x R's pieces with a
    // register on each side, N x R, its coarse shift registered)
    localparam int NORM_MODE = (ADDER_LEVELS > 0) ? 3 : 0;
    localparam int NORM_LAT = (ADDER_LEVELS > 0) ? 7 : 0;  // + O's register (folded_norm)
    // exp: S, the table's index and the exp word registered
    localparam int E_READS = (ADDER_LEVELS > 0) ? 2 : 0;  // registers on the exp word as read
    localparam int E_EXTRA = (ADDER_LEVELS > 0) ? 2 + E_READS : 0;
    localparam int E_ADDR = (E_EXTRA > 0) ? E_EXTRA - E_READS : 0;  // x_tap addressing it
    // numerators: e and V registered, then e x V's DSP-sized pieces (piece_mult REGS 3)
    localparam int N_EXTRA = (ADDER_LEVELS > 0) ? 5 : 0;
    localparam int FILL_N = FILL + N_EXTRA + NORM_LAT;  // the numerators' drain cycles
    localparam int FILL_E = FILL + E_EXTRA + 2 * NORM_PIPE;  // exp's (+ the index's two)
    // the score lane's adder levels (none where the score is read: LANE_TERMS 0)
    localparam int S_TREE = (LANE_TERMS > 1) ? $clog2(LANE_TERMS) : 0;
    localparam int S_EXTRA = (ADDER_LEVELS > 0)  // the q/k registers + the lane's stages
                           ? 3 + ((S_TREE > 0) ? (S_TREE - 1) / ADDER_LEVELS : 0) : 0;
    // the block's max over the lanes: registered every ADDER_LEVELS compare levels and after
    // the last (folded_max_tree STAGES; one lane: its score registered)
    localparam int MAX_L = (LANES > 1) ? $clog2(LANES) : 0;
    localparam int MAX_PIPE = (ADDER_LEVELS == 0) ? 0
                            : (MAX_L > 0) ? (MAX_L + ADDER_LEVELS - 1) / ADDER_LEVELS : 1;
    localparam int FILL_S = FILL + S_EXTRA + MAX_PIPE;  // the scores' drain cycles
    localparam int FILL_MAX = (FILL_S > FILL_E) ? ((FILL_S > FILL_N) ? FILL_S : FILL_N)
                            : ((FILL_E > FILL_N) ? FILL_E : FILL_N);
    localparam int DRAIN_W = $clog2(FILL_MAX + 1);
    logic [DRAIN_W-1:0] drain;
    logic             drained;                     // the phase's last drain cycle
    logic             sc0, ex0, nm0;               // stage 0 of scores, exp, numerators
    logic             p1_v, p2_v, p3_v;            // the stage holds an item
    logic [KB_CW-1:0] p1_jb, p2_jb, p3_jb;
    logic [C_CW-1:0] p1_c, p2_c, p3_c;            // the chunk: dc (scores), tc (numerators)
    logic [1:0]       p1_ph, p2_ph, p3_ph;         // the phase (state) of the stage's item
    // ADDER_LEVELS: the first chunk (scores) or key block (exp, numerators) of stage 2's item,
    // registered beside p2 for its phase's accumulator alone (three flags: none merged away)
    logic             first_s, first_e, first_n;
    logic [LANES-1:0] p2_hit;                      // the lane's exp word is its weight
    /* verilator lint_off UNUSEDSIGNAL */  // (ADDER_LEVELS >= 1: vis_pre_jb instead)
    logic [KB_CW-1:0] vis_jb;                      // the block visible[] is of
    /* verilator lint_on UNUSEDSIGNAL */
    logic             ea_v;                        // exp addresses its table (its item)
    logic [KB_CW-1:0] ea_jb;
    logic signed [SCORE_W-1:0] s_next [LANES];   // the key's score with this chunk
    logic signed [SCORE_W-1:0] s_hold [LANES];   // its running sum (stage 3: the score)
    logic signed [SCORE_W-1:0] s_read [LANES];   // the stored score (exp phase)
    logic [EXP_W-1:0]        e_next [LANES];     // the key's softmax weight (exp phase)
    logic [EXP_W-1:0]        e_read [LANES];     // the stored weight (numer phase)
    logic                    visible [LANES];
    logic signed [SCORE_W-1:0] smax, smax_next;   // max over the visible keys so far
    logic [SUM_W-1:0]        esum, esum_next;     // E
    logic [SIMD*NUMER_W-1:0] numer_packed;  // N of the chunk (folded_numer)

    // key j is visible to query i: j < length (key padding), j <= i + offset (causal); every
    // input an argument (a continuous assign is sensitive to its arguments only)
    function automatic logic is_visible(input int unsigned j, input logic [LEN_W-1:0] len,
                                        input logic [Q_CW-1:0] i, input logic [OFF_W-1:0] off);
        is_visible = (KEY_PADDING == 0 || j < 32'(len))
                  && (CAUSAL == 0 || j <= 32'(i) + 32'(off));
    endfunction

    // at0: no drain cycle under way (drain == 0), the phase's stage 0 walking; with
    // ADDER_LEVELS two registers set with the counter (its compare leaves the paths from it),
    // at0 for the phase's control, at0_p for stage 0's valid and the memories' read enables,
    // which sit apart on a part (kept apart: no merge)
    logic at0, at0_p, last0;
    assign last0 = (state == S_SCORE) ? (dc == SC - 1) && (jb == KB - 1)  // stage 0's last
                 : (state == S_EXP) ? (jb == KB - 1)
                 : (state == S_NUMER) && (jb == KB - 1) && (tc == HC - 1);
    if (ADDER_LEVELS > 0) begin : g_at0_reg
        logic at0_next;
        assign at0_next = at0 ? !last0 : drained;
        always_ff @(posedge clk) at0 <= rst || at0_next;
        (* keep *) always_ff @(posedge clk) at0_p <= rst || at0_next;
    end else begin : g_at0
        assign {at0, at0_p} = {2{drain == 0}};
    end
    assign sc0 = (state == S_SCORE) && at0_p;
    assign ex0 = (state == S_EXP) && at0_p;
    assign nm0 = (state == S_NUMER) && at0_p;
    assign drained = (drain == DRAIN_W'((state == S_NUMER) ? FILL_N
                                : (state == S_SCORE) ? FILL_S : FILL_E));
    // the max (stage 3), exp (its table's address: stage 1, E_ADDR cycles later)
    assign vis_jb = (state == S_SCORE) ? p3_jb : ea_jb;
    // ADDER_LEVELS >= 1: visible[] registered, from the items a cycle before vis_jb's (p3_jb
    // is p2_jb a cycle later; ea_jb, at E_ADDR = 2, is x_tap 1's a cycle later). The phase, the
    // query and the masks hold while a phase's items are in flight (a phase changes after its
    // drain), so the flags equal the combinational ones: the key compares leave the path from
    // the phase state into the max tree and the exp table's read enables.
    /* verilator lint_off UNUSEDSIGNAL */  // read with ADDER_LEVELS only
    logic [KB_CW-1:0] vis_pre_jb;
    logic [KB_CW-1:0] ev_pre_jb;  // exp's item a cycle before it addresses the table
    /* verilator lint_on UNUSEDSIGNAL */
    assign vis_pre_jb = (state == S_SCORE) ? p2_jb : ev_pre_jb;

    // the scores of the mechanism (its front end): each lane's chunk sum, S_EXTRA cycles
    // after the score phase's stage 0 read it (with ADDER_LEVELS; the cycle after without)
    logic [LANES*SCORE_W-1:0] parts;
    // Each front end takes the same parameters and ports: a mechanism's is a branch here.
`define FOLDED_SCORES(FRONT) \
        FRONT #( \
            .SCORE(SCORE), .LEN_Q(LEN_Q), .LEN_K(LEN_K), .DIM(DIM), .HEADS(HEADS), \
            .LANES(LANES), .SIMD(SIMD), .W_W(W_W), .QK_W(QK_W), .FILE(WS_FILE), \
            .SCORE_W(SCORE_W), .MACRO_ROWS(MACRO_ROWS), .ADDER_LEVELS(ADDER_LEVELS), \
            .TOK_CW(TOK_CW), .LANE_CW(LANE_CW), .KB_CW(KB_CW), .DC_CW(DC_CW), .Q_CW(Q_CW), \
            .H_CW(H_CW), .C_CW(C_CW) \
        ) u_scores ( \
            .clk(clk), .pre_b(pre_b), .qk_valid(qk_valid), .qk_pass(qk_pass), \
            .qk_tok(qk_tok), .qk_lane(qk_lane), .qk_blk(qk_blk), .qk_cc(qk_cc), \
            .qk_code(qk_code), .att_b(att_b), .re(sc0), .qi(qi), .hh(hh), .jb(jb), .c(dc), \
            .part(parts) \
        );
    if (SCORE == SCORE_L1 || SCORE == SCORE_DOT) begin : g_qk
        `FOLDED_SCORES(folded_scores_qk)
    end else if (SCORE == SCORE_DENSE) begin : g_dense
        `FOLDED_SCORES(folded_scores_dense)
    end else if (SCORE == SCORE_RANDINIT) begin : g_randinit
        `FOLDED_SCORES(folded_scores_randinit)
    end
`undef FOLDED_SCORES

    // the softmax tables: exp, one read port a lane (read in exp's stage 1); the reciprocal
    logic [LANES*EXP_A-1:0] exp_addr;
    logic [LANES-1:0]       exp_re;
    logic [LANES*EXP_W-1:0] exp_data;
    folded_rom #(
        .WIDTH(EXP_W), .DEPTH(EXP_SIZE), .READS(LANES), .SYNC(1), .FILE(EXP_FILE),
        .MACRO_ROWS(MACRO_ROWS), .AW(EXP_A)
    ) exp_rom (.clk(clk), .re(exp_re), .addr(exp_addr), .data(exp_data));

    // V: key j in lane j mod LANES, pieces of MUL_COLS columns (folded_v_banks), read in the
    // numerators' stage 0
    logic [LANES*SIMD*V_W-1:0] v_cat_all;  // lane l's chunk at [l*SIMD*V_W +: SIMD*V_W]
    folded_v_banks #(
        .LANES(LANES), .SIMD(SIMD), .MUL_COLS(MUL_COLS), .V_W(V_W), .KB(KB), .DC(DC),
        .MACRO_ROWS(MACRO_ROWS), .ADDER_LEVELS(ADDER_LEVELS)
    ) u_vbanks (
        .clk(clk), .pre_b(pre_b), .we(vo_valid && vo_pass == PASS_V), .lane(vo_lane),
        .blk(vo_blk), .cc(vo_cc), .sub(vo_sub), .wdata(v_code), .att_b(att_b), .re(nm0),
        .rd_blk(jb), .rd_cc(DC_CW'(hh*HC + tc)), .v(v_cat_all)
    );

    for (genvar l = 0; l < LANES; l++) begin : g_lane
        // s_bank: the scores of this query and head; e_bank: their softmax weights
        logic signed [SCORE_W-1:0] s_acc;
        logic signed [SCORE_W-1:0] part_l, part_r;  // the chunk's sum, registered
        logic signed [SCORE_W:0]   zdiff;           // max S - S (>= 0 for a visible key)
        logic signed [SCORE_W:0]   exp_index;
        int unsigned               key;

        assign part_l = parts[l*SCORE_W +: SCORE_W];
        assign s_next[l] = (first_s ? SCORE_W'(0) : s_acc) + part_r;
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
        // (a block RAM's clock-to-output gets a cycle of its own), the exp word twice (the
        // table's block RAM register, then one beside E and e_bank; e and V: folded_numer)
        logic signed [SCORE_W-1:0] s_in;
        logic [EXP_W-1:0] exp_in;
        if (ADDER_LEVELS > 0) begin : g_read_reg
            logic [EXP_W-1:0] exp_a;
            always_ff @(posedge clk) begin
                s_in <= s_read[l];
                {exp_a, exp_in} <= {exp_data[l*EXP_W +: EXP_W], exp_a};
            end
        end else begin : g_read
            assign {s_in, exp_in} = {s_read[l], exp_data[l*EXP_W +: EXP_W]};
        end
        assign zdiff = (SCORE_W + 1)'(smax) - (SCORE_W + 1)'(s_in);
        assign exp_index = zdiff >>> EXP_SHIFT;
        // the table's index and whether it is in the table: registered with ADDER_LEVELS
        // (the subtract and the range compare get a cycle before the block RAM's address and
        // enable)
        logic [EXP_A-1:0] idx_q;
        logic             in_table;
        if (ADDER_LEVELS > 0) begin : g_index_reg
            always_ff @(posedge clk) begin
                idx_q <= exp_index[EXP_A-1:0];
                in_table <= 32'(exp_index) < EXP_SIZE;
            end
        end else begin : g_index
            assign {idx_q, in_table} = {exp_index[EXP_A-1:0], 32'(exp_index) < EXP_SIZE};
        end
        assign exp_addr[l*EXP_A +: EXP_A] = idx_q;
        assign exp_re[l] = (state == S_EXP) && ea_v && visible[l] && in_table;
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

    // the max over the visible keys: the block's (folded_max_tree over the lanes), then with
    // the max so far. Key 0 is always visible, so block 0 starts from its block's max. With
    // ADDER_LEVELS the block's max is registered (stage 4 updates smax).
    logic [LANES-1:0]         vis_cat;
    logic [LANES*SCORE_W-1:0] s_cat;
    for (genvar l = 0; l < LANES; l++) begin : g_max_in
        assign {vis_cat[l], s_cat[l*SCORE_W +: SCORE_W]} = {visible[l], s_hold[l]};
    end
    logic [SCORE_W:0]    bmax;     // {any visible, max} of the block (MAX_PIPE after stage 3)
    logic                max_first;  // the update's block is the first (key block 0)
    logic                max_v;    // the update's item (the head's last chunk of the block)
    logic [SCORE_W:0] bmax_t;  // the tree's output (one lane with ADDER_LEVELS: registered)
    folded_max_tree #(.TERMS(LANES), .W(SCORE_W), .LEVELS(ADDER_LEVELS)) u_max (
        .clk(clk), .visible(vis_cat), .values(s_cat), .any(bmax_t[SCORE_W]),
        .max(bmax_t[SCORE_W-1:0])
    );
    if (MAX_PIPE != 0 && MAX_L == 0) begin : g_bmax_reg
        always_ff @(posedge clk) bmax <= bmax_t;
    end else begin : g_bmax
        assign bmax = bmax_t;
    end
    // stage 3's item MAX_PIPE cycles on, beside the tree: {update, first block}
    logic [2*(MAX_PIPE+1)-1:0] m_line;  // stage 3's item i cycles ago at [2*i +: 2]
    assign m_line[1:0] = {p3_v && p3_ph == S_SCORE && p3_c == SC - 1, p3_jb == 0};
    for (genvar i = 1; i <= MAX_PIPE; i++) begin : g_m_line
        logic [1:0] q;
        always_ff @(posedge clk) q <= rst ? '0 : m_line[2*(i-1) +: 2];
        assign m_line[2*i +: 2] = q;
    end
    assign {max_v, max_first} = m_line[2*MAX_PIPE +: 2];
    assign smax_next = (max_first || (bmax[SCORE_W] && $signed(bmax[SCORE_W-1:0]) > smax))
                     ? bmax[SCORE_W-1:0] : smax;

    // the sum E: the lanes' weights in a balanced tree, then E so far
    logic [LANES*SUM_W-1:0] e_terms;
    logic [SUM_W-1:0]       e_block;  // the block's sum
    for (genvar l = 0; l < LANES; l++) begin : g_reduce
        assign e_terms[l*SUM_W +: SUM_W] = SUM_W'(e_next[l]);
    end
    folded_adder_tree #(.TERMS(LANES), .W(SUM_W)) u_esum (
        .clk(clk), .terms(e_terms), .sum(e_block)
    );
    assign esum_next = (first_e ? SUM_W'(0) : esum) + e_block;

    // the numerators N[t] = sum_j e[j] V[j][t] of the chunk (stage 2 adds the block's; N holds
    // from stage 3 on): folded_numer, e and V as read
    logic [LANES*EXP_W-1:0]      e_cat;
    for (genvar l = 0; l < LANES; l++) begin : g_numer_in
        assign e_cat[l*EXP_W +: EXP_W] = e_read[l];
    end
    folded_numer #(
        .LANES(LANES), .SIMD(SIMD), .EXP_W(EXP_W), .V_W(V_W), .NUMER_W(NUMER_W),
        .EXTRA(N_EXTRA), .READS(2)
    ) u_numer (
        .clk(clk), .rst(rst), .e(e_cat), .v(v_cat_all), .acc(p2_v && p2_ph == S_NUMER),
        .first(first_n), .numer(numer_packed)
    );

    // O = N / E into a_mem (folded_norm): R = RECIP[index of E] is read once per query and
    // head, in exp's last cycle (with ADDER_LEVELS the index follows E by two cycles: exp's
    // drain has them); stage 3's numerator items, O written NORM_LAT cycles later
    folded_norm #(
        .SIMD(SIMD), .LEN_Q(LEN_Q), .DC(DC), .HC(HC), .KB(KB), .SUM_W(SUM_W),
        .NUMER_W(NUMER_W), .RIDX_W(RIDX_W), .RECIP_W(RECIP_W), .RECIP_FRAC(RECIP_FRAC),
        .PROD_W(PROD_W), .ATTN_W(ATTN_W), .RECIP_FILE(RECIP_FILE), .MACRO_ROWS(MACRO_ROWS),
        .PIPE(NORM_MODE), .LAT(NORM_LAT), .Q_CW(Q_CW), .TOK_CW(TOK_CW), .DC_CW(DC_CW),
        .H_CW(H_CW), .KB_CW(KB_CW), .C_CW(C_CW)
    ) u_norm (
        .clk(clk), .rst(rst), .esum(esum), .recip_re(state == S_EXP && drained),
        .item(p3_v && p3_ph == S_NUMER), .item_jb(p3_jb), .item_c(p3_c),
        .numer(numer_packed), .att_b(att_b), .qi(qi), .hh(hh), .post_b(post_b), .a_re(a_re),
        .a_rd_tok(a_rd_tok), .a_rd_rc(a_rd_rc), .a_word(a_word)
    );

    // -- the attention unit: per query and head, scores, exp, numerators -----------------------
    // stage 1's items, X_LEN cycles back (beside the pipelined reads and sums): each phase's
    // stage 2 takes its own tap (scores S_EXTRA, exp E_EXTRA, numerators N_EXTRA), exp's
    // table is addressed from tap E_ADDR (ea_*)
    localparam int P_W = 3 + KB_CW + C_CW;  // {valid, phase, key block, chunk}
    localparam int X_SE = (S_EXTRA > E_EXTRA) ? S_EXTRA : E_EXTRA;
    localparam int X_LEN = (X_SE > N_EXTRA) ? X_SE : N_EXTRA;
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
    assign {ea_v, ea_ph_unused, ea_jb, ea_c_unused} = x_tap[E_ADDR*P_W +: P_W];
    assign ev_pre_jb = x_tap[((E_ADDR > 0) ? E_ADDR - 1 : 0)*P_W + C_CW +: KB_CW];
    if (E_READS > 0) begin : g_hit_reg  // the exp word registered twice: its hit flag too
        logic [LANES-1:0] hit_a;
        always_ff @(posedge clk) {hit_a, hit_in} <= rst ? '0 : {exp_re, hit_a};
    end else begin : g_hit
        assign hit_in = exp_re;
    end
    always_ff @(posedge clk) begin
        if (rst) begin
            {p1_v, p2_v, p3_v, p1_jb, p2_jb, p3_jb, p1_c, p2_c, p3_c, p2_hit} <= '0;
            {p1_ph, p2_ph, p3_ph} <= '0;
        end else begin
            {p1_v, p1_ph, p1_jb, p1_c} <= {sc0 || ex0 || nm0, state, jb,
                                           (state == S_SCORE) ? dc : tc};
            {p2_v, p2_ph, p2_jb, p2_c, p2_hit} <= {p2_in, hit_in};
            {p3_v, p3_ph, p3_jb, p3_c} <= {p2_v, p2_ph, p2_jb, p2_c};
        end
    end
    if (ADDER_LEVELS > 0) begin : g_first_reg
        logic [1:0] in_ph;
        logic [KB_CW-1:0] in_jb;
        logic [C_CW-1:0] in_c;
        /* verilator lint_off UNUSEDSIGNAL */
        logic in_v_unused;
        /* verilator lint_on UNUSEDSIGNAL */
        assign {in_v_unused, in_ph, in_jb, in_c} = p2_in;
        always_ff @(posedge clk) begin
            first_s <= in_ph == S_SCORE && in_c == 0;
            first_e <= in_ph == S_EXP && in_jb == 0;
            first_n <= in_ph == S_NUMER && in_jb == 0;
        end
    end else begin : g_first
        assign {first_s, first_e, first_n} = {p2_c == 0, p2_jb == 0, p2_jb == 0};
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
            if (!at0) drain <= drained ? 0 : drain + 1;
            else if (last0) drain <= 1;  // stage 0's last item: the drain begins
            case (state)
                S_IDLE: if (att_go) state <= S_SCORE;
                S_SCORE: if (at0) begin  // dc fastest, then the key block
                    dc <= (dc == SC - 1) ? 0 : dc + 1;
                    if (dc == SC - 1) jb <= (jb == KB - 1) ? 0 : jb + 1;
                end else if (drained) begin
                    state <= S_EXP;
                end
                S_EXP: if (at0) begin
                    jb <= (jb == KB - 1) ? 0 : jb + 1;
                end else if (drained) begin  // (its last: the reciprocal's read)
                    state <= S_NUMER;
                end
                S_NUMER: if (at0) begin  // jb fastest, then the feature chunk
                    jb <= (jb == KB - 1) ? 0 : jb + 1;
                    if (jb == KB - 1) tc <= (tc == HC - 1) ? 0 : tc + 1;
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
    assign done = (state == S_NUMER) && drained && (hh == HEADS - 1) && (qi == LEN_Q - 1);
    /* verilator lint_on WIDTHTRUNC */
    /* verilator lint_on WIDTHEXPAND */
endmodule

`default_nettype wire
