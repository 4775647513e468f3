// folded_proj_walk: one projection datapath of the folded attention engine: it walks the
// weights of its passes (K, V, Q before attention, O after it) one SIMD x COLS tile per cycle,
// accumulates each column chunk over the row chunks and hands out the requantized codes.
//
// The engine (folded_attention.sv) holds one or two of these:
//
//   vanilla  one multiply walk, COLS = SIMD: K, V, Q, then O
//   Dense    one multiply walk, COLS = SIMD: V, then the hidden layer relu(X W_1) in the Q
//            pass (RELU = 1: its codes floored at 0), then O
//   RandInit one multiply walk, COLS = SIMD: V, then O
//   E-ATT    a multiply walk, COLS = PE: V, then O; and beside it a select walk, COLS = SIMD
//            (binarized rows selected, no multiplier), SLOTS = SIMD / PE: for each key token,
//            its K in step with the multiply walk's V of that token (the same y chunks, read
//            once), then one Q token in each of the other SLOTS - 1 slots (g_interleave). With
//            PE = SIMD / 2 and LEN_Q <= LEN_K, K and Q take exactly V's cycles (docs/folded.md,
//            "Two projection walks").
//
// A multiply walk (SELECT = 0) runs its passes PRE (N_PRE of them) on start_pre and O (if POST)
// on start_post. Per pass (tokens T = LEN_K for K and V, LEN_Q for Q and O): for each token,
// each column chunk (DIM / COLS of them: cc SIMD-wide chunks of M = SIMD / COLS pieces sub),
// each row chunk rc (DC = DIM / SIMD): one tile, rows rc*SIMD.., columns (cc*M + sub)*COLS..
// (the ROM word (cc*M + sub)*DC + rc, written by rtl_sim/folded.py weight_tiles). Then DRAIN
// cycles drain the pipeline. A pass takes T * DC * (DIM / COLS) + DRAIN cycles. The select walk
// (SELECT = 1) has its own order (g_interleave) and DRAIN drain cycles at the end. `finishing`
// is high in the drain cycle that ends the phase. DRAIN = 2 + EXTRA + W_REG + DRAIN_PAD
// (rtl_sim/folding.py walk_drain).
//
// Stage 0: the counters address the ROMs (folded_rom: synchronous read, block RAM; the pass's
// ROM reads only while the walk walks it) and the engine's token memory (rd_tok, rd_rc, with
// rd_x / rd_y / rd_o its read enables). Stage 1 (p1_*): the token chunk comes in from the
// engine's memories and the tile computes its partial sums (registered). Stage 2 (p2_*): they
// are added into acc, and the last row chunk raises wr_valid with the codes of columns
// (wr_cc * M + wr_sub) * COLS .. + COLS-1, M = SIMD / COLS: wr_cc is the SIMD-wide chunk (the
// engine's memory word), wr_sub the COLS-wide piece of it.
//
// ADDER_LEVELS = N >= 1 (the build's adder_levels, for a clock): EXTRA more stages between
// stage 1 and stage 2: the memories' words are registered twice as they arrive (block RAM's
// clock-to-output, then the way across the part, each a cycle of its own), then again after
// the pass's operand, select bits and ROM word are chosen from them, and the tile registers
// its terms and its adder tree after every N levels (folded_proj_tile STAGES; a multiply
// walk's products with a register on each side of the multiplier: MUL_REGS 3, two stages
// more). The control travels beside the data in a delay line; each pass drains EXTRA more
// cycles, the select walk two more than its own (DRAIN_PAD), so both walks drain alike (the
// engine ends the phase on the select walk's `finishing`). ADDER_LEVELS = 0: no extra stage
// (EXTRA = 0).
//
// Every width is a golden width (eatt.quant.golden.Formats), passed down by the engine.
//
// Testbench: rtl_sim/tb/folded_proj_walk/test_folded_proj_walk.py (and through the engine:
// rtl_sim/tb/test_folded.py, tests/test_folded.py).

`default_nettype none

module folded_proj_walk #(
    parameter int SIMD    = 2,    // input features per cycle (rows of the tile)
    parameter int COLS    = 2,    // output columns per cycle (divides SIMD)
    parameter int DIM     = 8,
    parameter int LEN_Q   = 2,
    parameter int LEN_K   = 4,
    parameter int LANES   = 2,    // the engine's key banks (key j in bank j mod LANES)
    parameter int SELECT  = 0,    // 1: E-ATT's select walk (K, Q; g_interleave); 0: a multiply
                                  // walk (its PRE passes, then O if POST; g_passes)
    parameter int N_PRE   = 3,    // multiply walk: passes before attention
    parameter logic [5:0] PRE = 6'b10_01_00,  // those passes, 2 bits each, first at [1:0]
    parameter int POST    = 1,    // multiply walk: 1: the O pass after attention
    parameter int SLOTS   = 1,    // select walk: the multiply walk beside it is SLOTS times
                                  // narrower (slots of DC x DC tiles per key token)
    parameter logic [3:0] USES = 4'b0000,  // bit p: pass p is walked (its ROM is read; the
                                           // caller names them: no file is read by default)
    parameter int RELU    = 0,    // 1: the Q pass's codes are max(code, 0) (Dense's hidden layer)
    parameter int IN_W    = 8,
    parameter int TAU     = 16,
    parameter int W_W     = 8,
    parameter int ATTN_W  = 12,
    parameter int ACC_W   = 24,
    parameter int Q_SHIFT = 0,
    parameter int QK_W    = 12,
    parameter int V_SHIFT = 0,
    parameter int V_W     = 12,
    parameter int O_SHIFT = 0,
    parameter int OUT_W   = 12,
    parameter     WQ_FILE = "wq.mem",
    parameter     WK_FILE = "wk.mem",
    parameter     WV_FILE = "wv.mem",
    parameter     WO_FILE = "wo.mem",
    parameter int MACRO_ROWS = 32,  // ROMs of at least this many words are memory macros
    parameter int ADDER_LEVELS = 0, // >= 1: registered reads, the tile's tree cut every N levels
    // derived (not set by the engine)
    parameter int DC      = DIM / SIMD,
    parameter int M       = SIMD / COLS,
    parameter int TOK_CW  = ((LEN_Q > LEN_K ? LEN_Q : LEN_K) > 1)
                          ? $clog2(LEN_Q > LEN_K ? LEN_Q : LEN_K) : 1,
    parameter int LANE_CW = (LANES > 1) ? $clog2(LANES) : 1,
    parameter int KB_CW   = (LEN_K / LANES > 1) ? $clog2(LEN_K / LANES) : 1,
    parameter int DC_CW   = (DC > 1) ? $clog2(DC) : 1,
    parameter int M_CW    = (M > 1) ? $clog2(M) : 1,
    parameter int TREE_L  = (SIMD > 1) ? $clog2(SIMD) : 0,  // the tile's adder levels
    parameter int MUL_REGS = (ADDER_LEVELS > 0) ? 3 : 1,  // cycles of the tile's products
    parameter int EXTRA   = (ADDER_LEVELS > 0)  // the three read registers + the tile's stages
                          ? 4 + ((TREE_L > 0) ? (TREE_L - 1) / ADDER_LEVELS : 0)
                            + ((SELECT == 0) ? MUL_REGS - 1 : 0) : 0,
    parameter int W_REG   = (ADDER_LEVELS > 0) ? 1 : 0,  // the chunk registered (g_wr_reg)
    parameter int DRAIN_PAD = (SELECT != 0) ? MUL_REGS - 1 : 0,  // as a multiply walk drains
    parameter int DRAIN   = 2 + EXTRA + W_REG + DRAIN_PAD
) (
    input  wire logic                     clk,
    input  wire logic                     rst,
    input  wire logic                     start_pre,   // begin the passes before attention
    /* verilator lint_off UNUSEDSIGNAL */  // (the select walk has no O pass)
    input  wire logic                     start_post,  // begin the O pass
    /* verilator lint_on UNUSEDSIGNAL */
    output logic                          finishing,   // the drain cycle that ends the phase

    // the token chunk stage 1 reads (x for Q, y for K and V, the attention output for O)
    output logic      [TOK_CW-1:0]        rd_tok,
    output logic      [DC_CW-1:0]         rd_rc,
    input  wire logic [SIMD*IN_W-1:0]     x_word,
    input  wire logic [SIMD*IN_W-1:0]     y_word,
    input  wire logic [SIMD*ATTN_W-1:0]   o_word,
    output logic                          rd_x,     // stage 1 uses x_word / y_word / o_word
    output logic                          rd_y,
    output logic                          rd_o,

    // a finished column chunk
    output logic                          wr_valid,
    output logic      [1:0]               wr_pass,
    output logic      [TOK_CW-1:0]        wr_tok,
    output logic      [LANE_CW-1:0]       wr_lane,  // wr_tok mod LANES
    output logic      [KB_CW-1:0]         wr_blk,   // wr_tok / LANES
    output logic      [DC_CW-1:0]         wr_cc,    // SIMD-wide column chunk
    output logic      [M_CW-1:0]          wr_sub,   // COLS-wide piece of it
    output logic      [COLS*QK_W-1:0]     wr_qk,
    output logic      [COLS*V_W-1:0]      wr_v,
    output logic      [COLS*OUT_W-1:0]    wr_z
);
    /* verilator lint_off WIDTHEXPAND */
    /* verilator lint_off WIDTHTRUNC */
    localparam logic [1:0] PASS_K = 2'd0, PASS_V = 2'd1, PASS_Q = 2'd2, PASS_O = 2'd3;
    localparam int A_W   = (IN_W > ATTN_W) ? IN_W : ATTN_W;  // multiply operands
    localparam int WORDS = DC * DC * M;                      // tiles of one weight matrix
    localparam int LAST  = N_PRE + POST - 1;                 // index of the last pass
    localparam int PI_W  = 2;                                // pass index: 0..3
    localparam int DN_W  = $clog2(DRAIN);                    // drain counter (DRAIN >= 2)

    typedef enum logic [1:0] { W_IDLE, W_WALK, W_DRAIN } wstate_t;
    wstate_t           wstate;
    /* verilator lint_off UNUSEDSIGNAL */  // (the select walk: its slots instead)
    logic [PI_W-1:0]   pi;       // index of the pass: 0..N_PRE-1, then N_PRE for O
    /* verilator lint_on UNUSEDSIGNAL */
    logic [1:0]        pass;
    logic [TOK_CW-1:0]  tok;
    logic [LANE_CW-1:0] tok_lane;
    logic [KB_CW-1:0]   tok_blk;
    logic [DC_CW-1:0]   cc, rc;
    logic [M_CW-1:0]    sub;


    // -- the weight ROMs (synchronous reads, folded_rom: a macro at MACRO_ROWS words) ----------
    logic walk_valid;  // stage 0 reads a tile of a pass this cycle
    localparam int WA_W = $clog2(WORDS > 1 ? WORDS : 2);
    logic [WA_W-1:0] waddr;
    assign waddr = (cc * M + sub) * DC + rc;

    localparam int TILE_W = SIMD * COLS * W_W;
    wire [4*TILE_W-1:0] rom_words;  // the word read for pass p at [p*TILE_W +: TILE_W]
    for (genvar p = 0; p < 4; p++) begin : g_rom
        if (USES[p]) begin : g_used
            folded_rom #(
                .WIDTH(TILE_W), .DEPTH(WORDS), .SYNC(1), .MACRO_ROWS(MACRO_ROWS), .AW(WA_W),
                .FILE(p == PASS_K ? WK_FILE : p == PASS_V ? WV_FILE
                      : p == PASS_Q ? WQ_FILE : WO_FILE)
            ) rom (
                .clk(clk), .re(walk_valid && pass == 2'(p)), .addr(waddr),
                .data(rom_words[p*TILE_W +: TILE_W])
            );
        end else begin : g_unused
            assign rom_words[p*TILE_W +: TILE_W] = '0;
        end
    end

    // -- stage 1: the tile (its partial sums registered); stage 2: the accumulators, the codes --
    logic               p1_valid, p1_first, p1_last;
    logic               p2_valid, p2_first, p2_last;
    logic [1:0]         p2_pass;
    logic [TOK_CW-1:0]  p2_tok;
    logic [LANE_CW-1:0] p2_lane;
    logic [KB_CW-1:0]   p2_blk;
    logic [DC_CW-1:0]   p2_cc;
    logic [M_CW-1:0]    p2_sub;
    logic [1:0]         p1_pass;
    logic [TOK_CW-1:0]  p1_tok;
    logic [LANE_CW-1:0] p1_lane;
    logic [KB_CW-1:0]   p1_blk;
    logic [DC_CW-1:0]   p1_cc;
    /* verilator lint_off UNUSEDSIGNAL */  // (the row chunk: p1_first / p1_last say it)
    logic [DC_CW-1:0]   p1_rc;
    /* verilator lint_on UNUSEDSIGNAL */
    logic [M_CW-1:0]    p1_sub;

    // the token chunk is read in stage 0, beside the tile (the engine's memories, like the
    // ROMs, read synchronously): its word is there in stage 1
    assign rd_tok  = tok;
    assign rd_rc   = rc;
    assign rd_x    = walk_valid && USES[PASS_Q] && pass == PASS_Q;
    assign rd_y    = walk_valid && (pass == PASS_K || pass == PASS_V);
    assign rd_o    = walk_valid && USES[PASS_O] && pass == PASS_O;

    logic [SIMD-1:0]      sel;      // binarized input bits (E-ATT Q, K)
    logic [SIMD*A_W-1:0]  operand;  // the input chunk, each element sign-extended to A_W
    logic [COLS*ACC_W-1:0] part, part_r;  // the tile's sums, registered (stage 2)
    logic signed [ACC_W-1:0] acc [COLS];

    // the words stage 1 reads: as they arrive, or (ADDER_LEVELS >= 1) registered first, so
    // each memory's block RAM (its clock-to-output) has a cycle of its own before the operand's
    // multiplexer, the select bits' compare and the choice of the pass's ROM word (an ECP5
    // flow moves these registers into the block RAMs: rtl_sim/ecp5_outreg.py); the pass with
    // them (the unused passes' ROM words are constants, their registers none)
    logic [SIMD*IN_W-1:0]   x_src, y_src;
    logic [SIMD*ATTN_W-1:0] o_src;
    logic [1:0]             pass_src;
    logic [4*TILE_W-1:0]    rom_src;
    logic [TILE_W-1:0]      w_src;
    if (ADDER_LEVELS > 0) begin : g_word_reg
        // twice: the first register is the block RAM's own on an ECP5 (its output register),
        // the second sits beside the operands' multiplexers across the part from it
        logic [SIMD*IN_W-1:0]   x_arr, y_arr;
        logic [SIMD*ATTN_W-1:0] o_arr;
        logic [1:0]             pass_arr;
        logic [4*TILE_W-1:0]    rom_arr;
        always_ff @(posedge clk) begin
            {x_arr, y_arr, o_arr, pass_arr, rom_arr}
                <= {x_word, y_word, o_word, p1_pass, rom_words};
            {x_src, y_src, o_src, pass_src, rom_src} <= {x_arr, y_arr, o_arr, pass_arr, rom_arr};
        end
    end else begin : g_word_wire
        assign {x_src, y_src, o_src, pass_src, rom_src}
            = {x_word, y_word, o_word, p1_pass, rom_words};
    end
    // the pass's word by constant part-selects: Verilator 5.049 stopped with an internal error
    // on the variable one (rom_src[pass_src*TILE_W +: TILE_W]) at the paper's 32k-bit tiles
    always_comb begin
        case (pass_src)
            2'd0: w_src = rom_src[0*TILE_W +: TILE_W];
            2'd1: w_src = rom_src[1*TILE_W +: TILE_W];
            2'd2: w_src = rom_src[2*TILE_W +: TILE_W];
            default: w_src = rom_src[3*TILE_W +: TILE_W];
        endcase
    end

    for (genvar r = 0; r < SIMD; r++) begin : g_operand
        logic signed [IN_W-1:0] token_in;
        // only the passes this walk has select a source (USES is a constant: a walk without
        // Q reads no x, one without O no attention output, so synthesis keeps no such port)
        assign token_in = (USES[PASS_Q] && pass_src == PASS_Q)
            ? x_src[r*IN_W +: IN_W] : y_src[r*IN_W +: IN_W];
        assign sel[r] = (32'(token_in) > TAU);  // Eq. 4, strict
        assign operand[r*A_W +: A_W] = (USES[PASS_O] && pass_src == PASS_O)
            ? A_W'($signed(o_src[r*ATTN_W +: ATTN_W])) : A_W'(token_in);
    end

    // the tile's inputs: as chosen in stage 1, or registered (ADDER_LEVELS >= 1)
    logic [SIMD-1:0]           t_sel;
    logic [SIMD*A_W-1:0]       t_operand;
    logic [SIMD*COLS*W_W-1:0]  t_w;
    if (ADDER_LEVELS > 0) begin : g_read_reg
        always_ff @(posedge clk) {t_sel, t_operand, t_w} <= {sel, operand, w_src};
    end else begin : g_read_wire
        assign {t_sel, t_operand, t_w} = {sel, operand, w_src};
    end

    folded_proj_tile #(
        .SIMD(SIMD), .COLS(COLS), .A_W(A_W), .W_W(W_W), .ACC_W(ACC_W), .SELECT(SELECT),
        .LEVELS(ADDER_LEVELS), .MUL_REGS(MUL_REGS)
    ) u_tile (
        .clk(clk), .sel(t_sel), .a(t_operand), .w(t_w), .part(part)
    );

    /* verilator lint_off UNDRIVEN */  // (ADDER_LEVELS = 0: the codes go straight out)
    /* verilator lint_off UNUSEDSIGNAL */
    logic [COLS*QK_W-1:0]  code_qk;  // the chunk's codes as computed (stage 2)
    logic [COLS*V_W-1:0]   code_v;
    logic [COLS*OUT_W-1:0] code_z;
    /* verilator lint_on UNUSEDSIGNAL */
    /* verilator lint_on UNDRIVEN */
    for (genvar c = 0; c < COLS; c++) begin : g_acc
        logic signed [ACC_W-1:0] acc_next;
        /* verilator lint_off UNUSEDSIGNAL */  // each pass keeps its code's width
        logic signed [ACC_W-1:0] shifted;
        /* verilator lint_on UNUSEDSIGNAL */
        assign acc_next = (p2_first ? ACC_W'(0) : acc[c]) + $signed(part_r[c*ACC_W +: ACC_W]);
        assign shifted = acc_next >>> ((USES[PASS_V] && p2_pass == PASS_V) ? V_SHIFT
                                     : (USES[PASS_O] && p2_pass == PASS_O) ? O_SHIFT : Q_SHIFT);
        // Dense's hidden layer: relu after the requantization (a floor: the same either way),
        // on the code's sign bit (the formats keep the code within QK_W bits)
        logic [QK_W-1:0] qk_c;
        assign qk_c = (RELU != 0 && p2_pass == PASS_Q && shifted[QK_W-1])
            ? QK_W'(0) : shifted[QK_W-1:0];
        if (ADDER_LEVELS > 0) begin : g_code  // registered below (g_wr_reg)
            assign code_qk[c*QK_W +: QK_W]  = qk_c;
            assign code_v[c*V_W +: V_W]     = shifted[V_W-1:0];
            assign code_z[c*OUT_W +: OUT_W] = shifted[OUT_W-1:0];
        end else begin : g_code_out  // straight out (the netlist of the unpipelined walk as
            // it was: written through code_* it maps differently, and its clock-gated
            // gate-level simulation disagreed; see docs/power.md "Clock gating")
            assign wr_qk[c*QK_W +: QK_W]  = qk_c;
            assign wr_v[c*V_W +: V_W]     = shifted[V_W-1:0];
            assign wr_z[c*OUT_W +: OUT_W] = shifted[OUT_W-1:0];
        end
        always_ff @(posedge clk) begin
            if (rst) acc[c] <= '0;
            else if (p2_valid) acc[c] <= acc_next;
        end
    end

    // the chunk to the engine's memories: as computed, or (ADDER_LEVELS >= 1) registered
    // first, the codes' adder and requantization a cycle apart from the block RAMs they are
    // written to across the part (each pass drains a cycle more: W_REG)
    if (ADDER_LEVELS > 0) begin : g_wr_reg
        always_ff @(posedge clk) begin
            wr_valid <= !rst && p2_valid && p2_last;
            {wr_pass, wr_tok, wr_lane, wr_blk, wr_cc, wr_sub} <=
                {p2_pass, p2_tok, p2_lane, p2_blk, p2_cc, p2_sub};
            {wr_qk, wr_v, wr_z} <= {code_qk, code_v, code_z};
        end
    end else begin : g_wr_wire
        assign wr_valid = p2_valid && p2_last;
        assign wr_pass  = p2_pass;
        assign wr_tok   = p2_tok;
        assign wr_lane  = p2_lane;
        assign wr_blk   = p2_blk;
        assign wr_cc    = p2_cc;
        assign wr_sub   = p2_sub;
    end

    // -- stage 0 -> stage 1 ------------------------------------------------------------------------

    always_ff @(posedge clk) begin
        if (rst) begin
            {p1_valid, p1_first, p1_last, p1_pass} <= '0;
            {p1_tok, p1_lane, p1_blk, p1_cc, p1_rc, p1_sub} <= '0;
        end else begin
            p1_valid <= walk_valid;
            p1_first <= (rc == 0);
            p1_last  <= (rc == DC - 1);
            p1_pass  <= pass;
            {p1_tok, p1_lane, p1_blk, p1_cc, p1_rc, p1_sub}
                <= {tok, tok_lane, tok_blk, cc, rc, sub};
        end
    end
    // stage 1's control, and the same EXTRA cycles later (beside the tile's sums)
    localparam int CTRL_W = 5 + TOK_CW + LANE_CW + KB_CW + DC_CW + M_CW;
    logic [CTRL_W-1:0] c1, cx;
    assign c1 = {p1_valid, p1_first, p1_last, p1_pass, p1_tok, p1_lane, p1_blk, p1_cc, p1_sub};
    if (EXTRA > 0) begin : g_delay
        logic [CTRL_W-1:0] line [EXTRA];
        always_ff @(posedge clk) begin
            if (rst) begin
                for (int i = 0; i < EXTRA; i++) line[i] <= '0;
            end else begin
                line[0] <= c1;
                for (int i = 1; i < EXTRA; i++) line[i] <= line[i - 1];
            end
        end
        assign cx = line[EXTRA - 1];
    end else begin : g_no_delay
        assign cx = c1;
    end
    always_ff @(posedge clk) begin  // stage 1 (+ EXTRA) -> stage 2
        part_r <= part;  // (the words hold between reads: no enable needed)
        if (rst) begin
            {p2_valid, p2_first, p2_last, p2_pass} <= '0;
            {p2_tok, p2_lane, p2_blk, p2_cc, p2_sub} <= '0;
        end else begin
            {p2_valid, p2_first, p2_last, p2_pass, p2_tok, p2_lane, p2_blk, p2_cc, p2_sub} <= cx;
        end
    end

    if (SELECT == 0) begin : g_passes
        // -- control: the passes in turn; in each, rc fastest, then sub, then cc, then the
        // token; DRAIN drain cycles per pass
        logic last_tile;
        logic [DN_W-1:0] dn;  // drain cycles done
        logic drain_end;  // the last drain cycle (stage 2 writes the pass's last chunk)
        assign drain_end = (dn == DN_W'(DRAIN - 1));
        assign last_tile = (rc == DC - 1) && (sub == M - 1) && (cc == DC - 1)
            && (tok == ((pass == PASS_K || pass == PASS_V) ? LEN_K : LEN_Q) - 1);
        assign pass = (pi >= N_PRE) ? PASS_O : PRE[2*pi +: 2];
        assign finishing = (wstate == W_DRAIN) && drain_end && (pi == N_PRE - 1 || pi == LAST);
        assign walk_valid = (wstate == W_WALK);

        always_ff @(posedge clk) begin
            if (rst) begin
                wstate <= W_IDLE;
                pi <= '0;
                dn <= '0;
                {tok, tok_lane, tok_blk, cc, rc, sub} <= '0;
            end else begin
                case (wstate)
                    W_IDLE: begin
                        if (start_pre && N_PRE > 0) begin
                            wstate <= W_WALK;
                            pi <= '0;
                        end else if (start_post && POST != 0) begin
                            wstate <= W_WALK;
                            pi <= PI_W'(N_PRE);
                        end
                    end
                    W_WALK: begin
                        rc <= (rc == DC - 1) ? 0 : rc + 1;
                        if (rc == DC - 1) begin
                            sub <= (sub == M - 1) ? 0 : sub + 1;
                            if (sub == M - 1) begin
                                cc <= (cc == DC - 1) ? 0 : cc + 1;
                                if (cc == DC - 1) begin
                                    if (last_tile) begin
                                        {tok, tok_lane, tok_blk} <= '0;
                                        wstate <= W_DRAIN;
                                    end else begin
                                        tok <= tok + 1;
                                        tok_lane <= (tok_lane == LANES - 1) ? 0 : tok_lane + 1;
                                        if (tok_lane == LANES - 1) tok_blk <= tok_blk + 1;
                                    end
                                end
                            end
                        end
                    end
                    W_DRAIN: begin  // stages 1 (+ EXTRA) and 2 of the pass's last tile
                        dn <= drain_end ? '0 : dn + 1;
                        if (finishing) begin
                            wstate <= W_IDLE;
                        end else if (drain_end) begin
                            pi <= pi + 1;
                            wstate <= W_WALK;
                        end
                    end
                    default: wstate <= W_IDLE;
                endcase
            end
        end
    end else begin : g_interleave
        // -- control of E-ATT's select walk beside a multiply walk SLOTS times narrower: per key
        // token t, SLOTS slots of DC x DC tiles (rc fastest, then cc): slot 0 is K of token t,
        // read in step with the multiply walk's V of token t (the same y chunk every cycle, so
        // the engine reads y once for both); slots 1..SLOTS-1 each take the next Q token, or
        // idle when none is left. After the last key token, the Q tokens left, one a slot.
        // DRAIN drain cycles at the end.
        logic [TOK_CW:0] ktok, qtok;  // key tokens done, query tokens started
        logic [$clog2(SLOTS > 1 ? SLOTS : 2)-1:0] slot;
        logic tail, slot_end, k_slot;
        logic [DN_W-1:0] dn;  // drain cycles done
        logic drain_end;  // the last drain cycle (stage 2 writes the last chunk)
        logic [TOK_CW:0] k_next, q_next;
        logic [$clog2(SLOTS > 1 ? SLOTS : 2)-1:0] slot_next;
        // the token flags as registers, set with the counters they are of (ktok == LEN_K,
        // !tail && slot == 0, qtok < LEN_Q): the compares leave the paths from the counters
        // to the walk's reads and its valid, which an FPGA's placement spreads over the part
        logic q_left;
        assign drain_end = (dn == DN_W'(DRAIN - 1));

        assign pass = k_slot ? PASS_K : PASS_Q;
        assign tok = k_slot ? TOK_CW'(ktok) : TOK_CW'(qtok);
        assign sub = '0;
        assign finishing = (wstate == W_DRAIN) && drain_end;
        assign walk_valid = (wstate == W_WALK) && (k_slot || q_left);
        assign slot_end = (rc == DC - 1) && (cc == DC - 1);
        assign q_next = qtok + ((!k_slot && q_left) ? 1 : 0);
        assign k_next = ktok + ((!tail && slot == SLOTS - 1) ? 1 : 0);
        assign slot_next = (!tail && slot != SLOTS - 1) ? slot + 1 : 0;

        always_ff @(posedge clk) begin
            if (rst) begin
                wstate <= W_IDLE;
                pi <= '0;
                dn <= '0;
                {ktok, qtok, slot, tok_lane, tok_blk, cc, rc} <= '0;
                {tail, k_slot, q_left} <= 3'b011;
            end else begin
                case (wstate)
                    W_IDLE: if (start_pre) wstate <= W_WALK;
                    W_WALK: begin
                        rc <= (rc == DC - 1) ? 0 : rc + 1;
                        if (rc == DC - 1) cc <= (cc == DC - 1) ? 0 : cc + 1;
                        if (slot_end) begin
                            qtok <= q_next;
                            ktok <= k_next;
                            slot <= slot_next;
                            tail <= (k_next == LEN_K);
                            k_slot <= (k_next != LEN_K) && (slot_next == 0);
                            q_left <= (q_next < LEN_Q);
                            if (!tail && slot == SLOTS - 1) begin  // the next key token
                                tok_lane <= (tok_lane == LANES - 1) ? 0 : tok_lane + 1;
                                if (tok_lane == LANES - 1) tok_blk <= tok_blk + 1;
                            end
                            // the last slot: the counters start over now (the drain reads
                            // none of them), so their enables leave the drain counter out
                            if (k_next == LEN_K && q_next == LEN_Q) begin
                                wstate <= W_DRAIN;
                                {ktok, qtok, slot, tok_lane, tok_blk} <= '0;
                                {tail, k_slot, q_left} <= 3'b011;
                            end
                        end
                    end
                    W_DRAIN: begin  // stages 1 (+ EXTRA) and 2 of the last tile
                        dn <= drain_end ? '0 : dn + 1;
                        if (drain_end) wstate <= W_IDLE;
                    end
                    default: wstate <= W_IDLE;
                endcase
            end
        end
    end
    /* verilator lint_on WIDTHTRUNC */
    /* verilator lint_on WIDTHEXPAND */
endmodule

`default_nettype wire
