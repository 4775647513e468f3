// folded_attention: the whole attention core, folded: LANES keys and SIMD features per cycle.
//
// Computes eatt.quant.golden.GoldenCore(cfg, weights).forward(x, y, masks) bit for bit, for
// both kinds (E-ATT: L1 scores, Q/K as sums of selected weight rows; vanilla: dot products),
// one vector (len_q query tokens x, len_k key tokens y, the mask inputs) at a time, reusing a
// small datapath over many cycles instead of unrolling every operation (docs/folded.md):
//
//   load     the SIMD-wide beats of x then y from s_axis into x_mem / y_mem (one per cycle)
//   proj K   K = requant(xb(y) @ W_K)  one SIMD x SIMD weight tile per cycle (folded_proj_tile)
//   proj V   V = requant(y @ W_V)      the same walk over W_V
//   proj Q   Q = requant(xb(x) @ W_Q)
//   per query i, per head h:
//     score  LANES keys at a time, SIMD features per cycle (folded_score_lane): S[j], max_j S
//     exp    LANES keys per cycle: e[j] = EXP[(max S - S[j]) >> EXP_SHIFT], E = sum_j e[j]
//     numer  SIMD features x LANES keys per cycle: N[t] = sum_j e[j] V[j][t], then
//            O = N / E (recip_normalize, the reciprocal table) into a_mem
//   proj O   Z = requant(O @ W_O) into z_mem
//   out      the SIMD-wide beats of Z on m_axis (one per cycle while m_axis_tready)
//
// The phases run one after another, each at one step per cycle, so the cycles follow from the
// sizes exactly (rtl_sim/folded.py `folded_cycles`, in metadata.json):
//
//   DC = DIM / SIMD, HC = D_HEAD / SIMD, KB = LEN_K / LANES
//   compute = (2 LEN_K + 2 LEN_Q) DC^2 + 4 + LEN_Q HEADS (2 KB HC + KB)
//   II      = (LEN_Q + LEN_K) DC + compute + LEN_Q DC     (no stalls on either stream)
//
// Memories: the weights are synchronous ROMs (one SIMD x SIMD tile per word, tile (row chunk
// rc, column chunk cc) at word cc*DC + rc), read from the $readmemh files WQ_FILE..WO_FILE
// written next to the RTL; EXP_FILE and RECIP_FILE hold the softmax tables. K and V are
// banked by key (key j in bank j mod LANES) so that LANES keys are read in one cycle; the
// token memories are written one SIMD-wide word per cycle and read asynchronously.
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
    parameter int KIND_EATT   = 1,    // 1: E-ATT (binarize, L1 scores); 0: vanilla (dot)
    parameter int LEN_Q       = 2,    // query tokens
    parameter int LEN_K       = 4,    // key tokens
    parameter int DIM         = 8,    // model dimension
    parameter int HEADS       = 2,    // heads (D_HEAD = DIM / HEADS)
    parameter int LANES       = 2,    // keys scored per cycle (divides LEN_K)
    parameter int SIMD        = 2,    // features per cycle (divides D_HEAD)
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
    parameter     WQ_FILE     = "wq.mem",     // $readmemh files, next to the RTL
    parameter     WK_FILE     = "wk.mem",
    parameter     WV_FILE     = "wv.mem",
    parameter     WO_FILE     = "wo.mem",
    parameter     EXP_FILE    = "exp.mem",
    parameter     RECIP_FILE  = "recip.mem"
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
    localparam int A_W    = (IN_W > ATTN_W) ? IN_W : ATTN_W;  // projection operands
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
    localparam int HC_CW   = (HC > 1) ? $clog2(HC) : 1;
    localparam int Q_CW    = (LEN_Q > 1) ? $clog2(LEN_Q) : 1;
    localparam int H_CW    = (HEADS > 1) ? $clog2(HEADS) : 1;

    // the phases; PASS_* name the four projections
    typedef enum logic [2:0] {
        S_LOAD, S_PROJ, S_DRAIN, S_SCORE, S_EXP, S_NUMER, S_OUT
    } state_t;
    localparam logic [1:0] PASS_K = 2'd0, PASS_V = 2'd1, PASS_Q = 2'd2, PASS_O = 2'd3;

    state_t     state;
    logic [1:0] pass;

    // -- memories -------------------------------------------------------------------------------
    logic [SIMD*SIMD*W_W-1:0] wq_rom [DC*DC];
    logic [SIMD*SIMD*W_W-1:0] wk_rom [DC*DC];
    logic [SIMD*SIMD*W_W-1:0] wv_rom [DC*DC];
    logic [SIMD*SIMD*W_W-1:0] wo_rom [DC*DC];
    logic [EXP_W-1:0]         exp_rom [EXP_SIZE];
    logic [RECIP_W-1:0]       recip_rom [2**RIDX_W];

    initial begin
        $readmemh(WQ_FILE, wq_rom);
        $readmemh(WK_FILE, wk_rom);
        $readmemh(WV_FILE, wv_rom);
        $readmemh(WO_FILE, wo_rom);
        $readmemh(EXP_FILE, exp_rom);
        $readmemh(RECIP_FILE, recip_rom);
    end

    logic [SIMD*IN_W-1:0]   x_mem [LEN_Q*DC];  // query tokens, chunk c of token i at i*DC + c
    logic [SIMD*IN_W-1:0]   y_mem [LEN_K*DC];  // key tokens
    logic [SIMD*QK_W-1:0]   q_mem [LEN_Q*DC];  // Q codes
    logic [SIMD*ATTN_W-1:0] a_mem [LEN_Q*DC];  // attention outputs O (heads concatenated)
    logic [SIMD*OUT_W-1:0]  z_mem [LEN_Q*DC];  // outputs Z

    // -- load: s_axis into x_mem, y_mem -----------------------------------------------------------
    logic [IN_CW-1:0]  in_cnt;   // beats of this vector so far
    logic [OUT_CW-1:0] out_cnt;  // output beats so far
    logic [LEN_W-1:0] length;
    logic [OFF_W-1:0] offset;

    assign s_axis_tready = (state == S_LOAD);

    always_ff @(posedge clk) begin
        if (s_axis_tvalid && s_axis_tready) begin
            if (in_cnt < LEN_Q * DC) x_mem[in_cnt] <= s_axis_tdata;
            else y_mem[in_cnt - LEN_Q * DC] <= s_axis_tdata;
        end
    end

    // -- projections: one SIMD x SIMD weight tile per cycle ----------------------------------------
    // stage 0: the counters address the weight ROMs; stage 1 (p1_*): the tile's partial sums
    // are added into acc, and the last row chunk writes the requantized column chunk
    logic [TOK_CW-1:0]  tok;       // token
    logic [LANE_CW-1:0] tok_lane;  // its key bank (tok mod LANES)
    logic [KB_CW-1:0]   tok_blk;   // and block (tok / LANES)
    logic [DC_CW-1:0]   cc, rc;    // column and row chunk of the weight tile
    logic        p1_valid, p1_first, p1_last;
    logic [1:0]  p1_pass;
    logic [TOK_CW-1:0]  p1_tok;
    logic [LANE_CW-1:0] p1_lane;
    logic [KB_CW-1:0]   p1_blk;
    logic [DC_CW-1:0]   p1_cc, p1_rc;
    logic [SIMD*SIMD*W_W-1:0] wq_word, wk_word, wv_word, wo_word, w_word;

    always_ff @(posedge clk) begin  // synchronous ROM reads (block RAM)
        wq_word <= wq_rom[cc*DC + rc];
        wk_word <= wk_rom[cc*DC + rc];
        wv_word <= wv_rom[cc*DC + rc];
        wo_word <= wo_rom[cc*DC + rc];
    end

    logic [SIMD*IN_W-1:0]   p1_x, p1_y;
    logic [SIMD*ATTN_W-1:0] p1_o;
    logic [SIMD-1:0]        sel;       // binarized input bits (E-ATT Q, K)
    logic [SIMD*A_W-1:0]    operand;   // the input chunk, each element sign-extended to A_W
    logic [SIMD*ACC_W-1:0]  mul_part, sel_part, part;
    logic signed [ACC_W-1:0] acc [SIMD];
    logic signed [ACC_W-1:0] acc_next [SIMD];
    logic [SIMD*QK_W-1:0]   qk_code;
    logic [SIMD*V_W-1:0]    v_code;
    logic [SIMD*OUT_W-1:0]  z_code;
    logic                   p1_write;

    assign p1_x = x_mem[p1_tok*DC + p1_rc];
    assign p1_y = y_mem[p1_tok*DC + p1_rc];
    assign p1_o = a_mem[p1_tok*DC + p1_rc];
    assign w_word = (p1_pass == PASS_K) ? wk_word : (p1_pass == PASS_V) ? wv_word
                  : (p1_pass == PASS_Q) ? wq_word : wo_word;

    for (genvar r = 0; r < SIMD; r++) begin : g_operand
        logic signed [IN_W-1:0] token_in;
        assign token_in = (p1_pass == PASS_Q) ? p1_x[r*IN_W +: IN_W] : p1_y[r*IN_W +: IN_W];
        assign sel[r] = (32'(token_in) > TAU);  // Eq. 4, strict
        assign operand[r*A_W +: A_W] = (p1_pass == PASS_O)
            ? A_W'($signed(p1_o[r*ATTN_W +: ATTN_W])) : A_W'(token_in);
    end

    folded_proj_tile #(.SIMD(SIMD), .A_W(A_W), .W_W(W_W), .ACC_W(ACC_W), .SELECT(0)) u_mul_tile (
        .sel(sel), .a(operand), .w(w_word), .part(mul_part)
    );
    if (KIND_EATT != 0) begin : g_select
        folded_proj_tile #(.SIMD(SIMD), .A_W(A_W), .W_W(W_W), .ACC_W(ACC_W), .SELECT(1))
        u_sel_tile (.sel(sel), .a(operand), .w(w_word), .part(sel_part));
        assign part = (p1_pass == PASS_K || p1_pass == PASS_Q) ? sel_part : mul_part;
    end else begin : g_multiply
        assign sel_part = '0;
        assign part = mul_part;
    end

    for (genvar c = 0; c < SIMD; c++) begin : g_acc
        /* verilator lint_off UNUSEDSIGNAL */  // each pass keeps its code's width
        logic signed [ACC_W-1:0] shifted;
        /* verilator lint_on UNUSEDSIGNAL */
        assign acc_next[c] = (p1_first ? ACC_W'(0) : acc[c]) + $signed(part[c*ACC_W +: ACC_W]);
        assign shifted = acc_next[c] >>> ((p1_pass == PASS_V) ? V_SHIFT
                                        : (p1_pass == PASS_O) ? O_SHIFT : Q_SHIFT);
        assign qk_code[c*QK_W +: QK_W]  = shifted[QK_W-1:0];
        assign v_code[c*V_W +: V_W]     = shifted[V_W-1:0];
        assign z_code[c*OUT_W +: OUT_W] = shifted[OUT_W-1:0];
        always_ff @(posedge clk) begin
            if (rst) acc[c] <= '0;
            else if (p1_valid) acc[c] <= acc_next[c];
        end
    end
    assign p1_write = p1_valid && p1_last;

    always_ff @(posedge clk) begin
        if (p1_write && p1_pass == PASS_Q) q_mem[p1_tok*DC + p1_cc] <= qk_code;
        if (p1_write && p1_pass == PASS_O) z_mem[p1_tok*DC + p1_cc] <= z_code;
    end

    // -- attention: per query qi and head hh, scores, exp, numerators ---------------------------------
    logic [Q_CW-1:0]  qi;      // query
    logic [H_CW-1:0]  hh;      // head
    logic [KB_CW-1:0] jb;      // key block
    logic [HC_CW-1:0] dc, tc;  // feature chunk of the head (scores, numerators)
    logic [SIMD*QK_W-1:0]    q_word;
    logic [SIMD*QK_W-1:0]    k_word [LANES];
    logic [SIMD*V_W-1:0]     v_word [LANES];
    logic signed [SCORE_W-1:0] s_next [LANES];   // the key's score with this chunk
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

    assign q_word = q_mem[qi*DC + hh*HC + dc];

    for (genvar l = 0; l < LANES; l++) begin : g_lane
        logic [SIMD*QK_W-1:0]      k_bank [KB*DC];  // K of keys j = b*LANES + l, chunk at b*DC + c
        logic [SIMD*V_W-1:0]       v_bank [KB*DC];
        logic signed [SCORE_W-1:0] s_bank [KB];     // scores of this query and head
        logic [EXP_W-1:0]          e_bank [KB];     // their softmax weights
        logic signed [SCORE_W-1:0] s_acc;
        logic signed [SCORE_W-1:0] part_l;
        logic signed [SCORE_W:0]   zdiff;           // max S - S (>= 0 for a visible key)
        logic signed [SCORE_W:0]   exp_index;
        int unsigned               key;

        always_ff @(posedge clk) begin
            if (p1_write && p1_pass == PASS_K && p1_lane == l) k_bank[p1_blk*DC + p1_cc] <= qk_code;
            if (p1_write && p1_pass == PASS_V && p1_lane == l) v_bank[p1_blk*DC + p1_cc] <= v_code;
        end
        assign k_word[l] = k_bank[jb*DC + hh*HC + dc];
        assign v_word[l] = v_bank[jb*DC + hh*HC + tc];

        folded_score_lane #(.SIMD(SIMD), .QK_W(QK_W), .SCORE_W(SCORE_W), .L1(KIND_EATT)) u_score (
            .q(q_word), .k(k_word[l]), .part(part_l)
        );
        assign s_next[l] = ((dc == 0) ? SCORE_W'(0) : s_acc) + part_l;

        assign key = jb * LANES + l;
        assign visible[l] = (KEY_PADDING == 0 || key < 32'(length))
                         && (CAUSAL == 0 || key <= qi + 32'(offset));
        assign s_read[l] = s_bank[jb];
        assign zdiff = (SCORE_W + 1)'(smax) - (SCORE_W + 1)'(s_read[l]);
        assign exp_index = zdiff >>> EXP_SHIFT;
        assign e_next[l] = (visible[l] && 32'(exp_index) < EXP_SIZE)
                         ? exp_rom[exp_index[EXP_A-1:0]] : EXP_W'(0);
        assign e_read[l] = e_bank[jb];

        always_ff @(posedge clk) begin
            if (rst) s_acc <= '0;
            else if (state == S_SCORE) s_acc <= s_next[l];
        end
        always_ff @(posedge clk) begin
            if (state == S_SCORE && dc == HC - 1) s_bank[jb] <= s_next[l];
            if (state == S_EXP) e_bank[jb] <= e_next[l];
        end
    end

    // the max over the visible keys and the sum E, as chains over the lanes (continuous
    // assigns: Icarus loops on an always_comb that reads back what it writes here). Key 0 is
    // always visible, so block 0 starts the max from lane 0.
    logic [(LANES+1)*SCORE_W-1:0] max_chain;
    logic [(LANES+1)*SUM_W-1:0]   sum_chain;

    assign max_chain[0 +: SCORE_W] = (jb == 0) ? s_next[0] : smax;
    assign sum_chain[0 +: SUM_W]   = (jb == 0) ? SUM_W'(0) : esum;
    for (genvar l = 0; l < LANES; l++) begin : g_reduce
        logic signed [SCORE_W-1:0] so_far;
        assign so_far = max_chain[l*SCORE_W +: SCORE_W];
        assign max_chain[(l+1)*SCORE_W +: SCORE_W] =
            (visible[l] && s_next[l] > so_far) ? s_next[l] : so_far;
        assign sum_chain[(l+1)*SUM_W +: SUM_W] = sum_chain[l*SUM_W +: SUM_W] + SUM_W'(e_next[l]);
    end
    assign smax_next = max_chain[LANES*SCORE_W +: SCORE_W];
    assign esum_next = sum_chain[LANES*SUM_W +: SUM_W];

    // e * V at its exact width (e unsigned, V signed)
    function automatic logic signed [EXP_W+V_W:0] weighted(
        input logic [EXP_W-1:0] e, input logic signed [V_W-1:0] v);
        weighted = $signed({1'b0, e}) * v;
    endfunction

    for (genvar t = 0; t < SIMD; t++) begin : g_numer
        logic signed [NUMER_W-1:0] total;  // one variable per block (no shared array written)

        always_comb begin
            total = (jb == 0) ? NUMER_W'(0) : numer[t];
            for (int l = 0; l < LANES; l++) begin
                total = total + NUMER_W'(weighted(e_read[l], v_word[l][t*V_W +: V_W]));
            end
        end
        assign numer_next[t] = total;
        assign numer_packed[t*NUMER_W +: NUMER_W] = numer_next[t];
        always_ff @(posedge clk) begin
            if (rst) numer[t] <= '0;
            else if (state == S_NUMER) numer[t] <= numer_next[t];
        end
    end

    recip_normalize #(
        .LANES(SIMD), .SUM_W(SUM_W), .NUMER_W(NUMER_W), .INDEX_W(RIDX_W), .RECIP_W(RECIP_W),
        .RECIP_FRAC(RECIP_FRAC), .PROD_W(PROD_W), .OUT_W(ATTN_W)
    ) u_normalize (
        .e_sum(esum), .numer(numer_packed), .recip_index(recip_index),
        .recip(recip_rom[recip_index]), .o(o_word)
    );

    always_ff @(posedge clk) begin
        if (state == S_NUMER && jb == KB - 1) a_mem[qi*DC + hh*HC + tc] <= o_word;
    end

    // -- out: z_mem on m_axis -------------------------------------------------------------------
    assign m_axis_tvalid = (state == S_OUT);
    assign m_axis_tdata  = z_mem[out_cnt];
    assign m_axis_tlast  = (out_cnt == OUT_BEATS - 1);

    // -- control --------------------------------------------------------------------------------
    always_ff @(posedge clk) begin
        if (rst) begin
            state <= S_LOAD;
            pass <= PASS_K;
            in_cnt <= 0;
            out_cnt <= 0;
            length <= '0;
            offset <= '0;
            {tok, tok_lane, tok_blk, cc, rc} <= '0;
            {p1_valid, p1_first, p1_last, p1_pass} <= '0;
            {p1_tok, p1_lane, p1_blk, p1_cc, p1_rc} <= '0;
            {qi, hh, jb, dc, tc} <= '0;
            smax <= '0;
            esum <= '0;
        end else begin
            // stage 1 of the projections follows stage 0 by one cycle
            p1_valid <= (state == S_PROJ);
            p1_first <= (rc == 0);
            p1_last  <= (rc == DC - 1);
            p1_pass  <= pass;
            {p1_tok, p1_lane, p1_blk, p1_cc, p1_rc} <= {tok, tok_lane, tok_blk, cc, rc};

            case (state)
                S_LOAD: if (s_axis_tvalid) begin
                    if (in_cnt == 0) begin
                        length <= s_axis_tuser[0 +: LEN_W];
                        offset <= s_axis_tuser[LEN_W +: OFF_W];
                    end
                    if (in_cnt == IN_BEATS - 1) begin
                        in_cnt <= 0;
                        state <= S_PROJ;
                        pass <= PASS_K;
                    end else begin
                        in_cnt <= in_cnt + 1;
                    end
                end
                S_PROJ: begin  // rc fastest, then cc, then the token
                    rc <= (rc == DC - 1) ? 0 : rc + 1;
                    if (rc == DC - 1) begin
                        cc <= (cc == DC - 1) ? 0 : cc + 1;
                        if (cc == DC - 1) begin
                            if (tok == ((pass == PASS_K || pass == PASS_V) ? LEN_K : LEN_Q) - 1)
                            begin
                                {tok, tok_lane, tok_blk} <= '0;
                                state <= S_DRAIN;
                            end else begin
                                tok <= tok + 1;
                                tok_lane <= (tok_lane == LANES - 1) ? 0 : tok_lane + 1;
                                if (tok_lane == LANES - 1) tok_blk <= tok_blk + 1;
                            end
                        end
                    end
                end
                S_DRAIN: begin  // stage 1 writes the last chunk of the pass
                    case (pass)
                        PASS_K: begin pass <= PASS_V; state <= S_PROJ; end
                        PASS_V: begin pass <= PASS_Q; state <= S_PROJ; end
                        PASS_Q: state <= S_SCORE;
                        default: state <= S_OUT;
                    endcase
                end
                S_SCORE: begin  // dc fastest, then the key block
                    dc <= (dc == HC - 1) ? 0 : dc + 1;
                    if (dc == HC - 1) begin
                        smax <= smax_next;
                        jb <= (jb == KB - 1) ? 0 : jb + 1;
                        if (jb == KB - 1) state <= S_EXP;
                    end
                end
                S_EXP: begin
                    esum <= esum_next;
                    jb <= (jb == KB - 1) ? 0 : jb + 1;
                    if (jb == KB - 1) state <= S_NUMER;
                end
                S_NUMER: begin  // jb fastest, then the feature chunk, head, query
                    jb <= (jb == KB - 1) ? 0 : jb + 1;
                    if (jb == KB - 1) begin
                        tc <= (tc == HC - 1) ? 0 : tc + 1;
                        if (tc == HC - 1) begin
                            state <= S_SCORE;
                            hh <= (hh == HEADS - 1) ? 0 : hh + 1;
                            if (hh == HEADS - 1) begin
                                qi <= (qi == LEN_Q - 1) ? 0 : qi + 1;
                                if (qi == LEN_Q - 1) begin
                                    state <= S_PROJ;
                                    pass <= PASS_O;
                                end
                            end
                        end
                    end
                end
                S_OUT: if (m_axis_tready) begin
                    if (out_cnt == OUT_BEATS - 1) begin
                        out_cnt <= 0;
                        state <= S_LOAD;
                    end else begin
                        out_cnt <= out_cnt + 1;
                    end
                end
                default: state <= S_LOAD;
            endcase
        end
    end
    /* verilator lint_on WIDTHTRUNC */
    /* verilator lint_on WIDTHEXPAND */
endmodule

`default_nettype wire
