// window_unit: the windowed cross-attention unit, one decoding step per start (Luong local-p
// and Flexible Attention over a memory of K, V rows; docs/window.md).
//
// A step (ap_start with x, p, w, len[, g]) reads the rows [max(p - w, 0), min(p + w, len - 1)]
// one per cycle (window_ctrl.sv, the memory window_ram.sv), scores each row as it arrives
// (BINARIZED = 1, E-ATT Eq. 10: S = -sum_t |q - k| by l1_score_row.sv; BINARIZED = 0: the dot
// product q . k, d_head multipliers and an adder), subtracts the position term
// P[g level][|s - p|] (a table: Luong Eq. 10 / Flexible Eq. 7 in the log domain, no
// multiplier) and writes the logit, V row and count into a window buffer of ROWS entries while a
// running max is kept. Pass two reads the whole buffer at once: e = count * EXP[(max - S') >>
// EXP_SHIFT] (0 past the table and past the window), E = sum e, N = sum e V; the reciprocal and
// normalization are recip_normalize.sv, once per head. FLEXIBLE = 1 adds the focus F = lo +
// min(round(F_N / E), rows - 1), F_N = sum_j e_j j (Flexible Eq. 4, the next p) as one more
// lane of the same leaf. Latency rows + 3 cycles; the next step is accepted after rows cycles.
//
// The config's constants are not here: the query projection W_Q (window_q_proj: Q = f(x) W_Q
// before the shift, f the binarization x > tau of E-ATT Eq. 4 where BINARIZED) and the three
// tables (window_pen_rom, window_exp_rom, window_recip_rom: combinational lookups, READS
// ports each) are modules of the generated top window_attention.sv, written by
// eatt.rtl_sim.emit_window from the config and integer weights, as hls4ml keeps its weights
// and tables in the generated project and its nnet_utils generic. Every width is a golden
// format (eatt.rtl_sim.emit_window.window_widths); the unit is bit-exact with
// eatt.quant.window.WindowGolden.forward.
//
// Testbench: through the generated top (rtl_sim/tb/test_window.py, tests/test_window_rtl.py).

`default_nettype none

module window_unit #(
    parameter int DIM = 4, HEADS = 1, DH = 4,  // model width, heads, d_head
    parameter int LK = 8, ROWS = 3,  // memory rows, window buffer rows min(2 D + 1, LK)
    // formats (window_widths): input, Q accumulator, K/Q code, V code, count, score, penalty,
    // logit, logit difference, exp index, exp table index, exp, count x exp, E, N, reciprocal
    // index and entry, output
    parameter int IB = 8, AB = 12, QB = 8, VB = 8, CB = 4, SB = 12, PNB = 8, LB = 13,
    parameter int DB = 14, EIB = 8, EKB = 8, EW = 8, CEB = 12, TB = 16, NB = 20,
    parameter int KI = 6, RB = 8, OB = 8,
    // address, length, half-width, distance, buffer index, row count and g level bits
    parameter int ADB = 3, LNB = 4, WB = 2, DSB = 2, IXB = 2, RWB = 2, GW = 1,
    parameter int FNB = 8,  // the focus numerator F_N (FLEXIBLE)
    parameter int Q_SHIFT = 0, EXP_SHIFT = 0, EXP_SIZE = 256, RECIP_FRAC = 8,
    parameter int BINARIZED = 1, FLEXIBLE = 0,
    // the l1_score_row leaf (BINARIZED): its score bits and the bound of |q - k|, every lane's
    // (q and K are codes of the whole range)
    parameter int L1_SCORE_W = 8, L1_DIFF_MAX = 255,
    // the recip_normalize leaf: its lanes (DH, + 1 for F_N), numerator and product bits
    parameter int LEAF_LANES = 4, LEAF_NB = 20, LEAF_PB = 28
) (
    input  wire logic                  ap_clk,
    input  wire logic                  ap_rst,    // synchronous, active high
    input  wire logic                  ap_start,
    output logic                       ap_done,
    output logic                       ap_idle,
    output logic                       ap_ready,
    input  wire logic [DIM*IB-1:0]     x,         // query x, element d at [d*IB +: IB]
    input  wire logic [ADB-1:0]        p,         // window centre, p < len
    input  wire logic [WB-1:0]         w,         // half-width
    input  wire logic [LNB-1:0]        len,       // valid memory rows, 1 .. LK
    /* verilator lint_off UNUSEDSIGNAL */  // FLEXIBLE = 0: no strength level
    input  wire logic [GW-1:0]         g,         // strength level (FLEXIBLE)
    /* verilator lint_on UNUSEDSIGNAL */
    // memory write port: row mem_addr <= {mem_cnt, mem_v, mem_k} while idle
    input  wire logic                  mem_we,
    input  wire logic [ADB-1:0]        mem_addr,
    input  wire logic [DIM*QB-1:0]     mem_k,     // element d at [d*QB +: QB]
    input  wire logic [DIM*VB-1:0]     mem_v,     // element d at [d*VB +: VB]
    input  wire logic [CB-1:0]         mem_cnt,   // count >= 1
    output logic      [DIM*OB-1:0]     o,         // O, element d at [d*OB +: OB]
    output logic      [HEADS*ADB-1:0]  f,         // focus F, head h at [h*ADB +: ADB] (FLEXIBLE)
    output logic                       o_vld      // = ap_done
);
    localparam int ROW_W = DIM * (QB + VB) + CB;  // one memory row {count, V, K}
    localparam int SELB = (FLEXIBLE != 0 ? GW : 0) + DSB;  // the position table's index
    localparam int CMP_W = (OB > RWB ? OB : RWB) + 1;

    // ---- controller and memory
    logic [ADB-1:0] raddr;
    logic rd_en, item_vld, red_go, nrm_go;
    /* verilator lint_off UNUSEDSIGNAL */
    logic item_last;  // the controller's own; the buffer needs only item_idx
    /* verilator lint_on UNUSEDSIGNAL */
    logic [IXB-1:0] item_idx;
    logic [DSB-1:0] item_dist;
    logic [RWB-1:0] red_rows;

    window_ctrl #(.AB(ADB), .WB(WB), .LB(LNB), .DB(DSB), .IB(IXB), .RB(RWB)) u_ctrl (
        .ap_clk(ap_clk), .ap_rst(ap_rst), .ap_start(ap_start), .ap_done(ap_done),
        .ap_idle(ap_idle), .ap_ready(ap_ready), .p(p), .w(w), .len(len), .rd_en(rd_en),
        .raddr(raddr), .item_vld(item_vld), .item_idx(item_idx), .item_last(item_last),
        .item_dist(item_dist), .red_go(red_go), .red_rows(red_rows), .nrm_go(nrm_go)
    );
    assign o_vld = ap_done;

    logic [ROW_W-1:0] rdata;
    window_ram #(.DEPTH(LK), .AB(ADB), .WIDTH(ROW_W)) u_ram (
        .clk(ap_clk), .we(mem_we), .waddr(mem_addr), .wdata({mem_cnt, mem_v, mem_k}),
        .re(rd_en), .raddr(raddr), .rdata(rdata)
    );

    // ---- Q = (f(x) W_Q) >>> Q_SHIFT, registered with the accepted start
    logic [DIM*AB-1:0] qa;
    logic signed [QB-1:0] q [DIM];
    window_q_proj u_q_proj (.x(x), .qa(qa));
    always_ff @(posedge ap_clk) begin
        if (ap_ready) begin
            for (int d = 0; d < DIM; d++) q[d] <= QB'($signed(qa[d*AB +: AB]) >>> Q_SHIFT);
        end
    end
    /* verilator lint_off UNUSEDSIGNAL */  // FLEXIBLE = 0: no strength level
    logic [GW-1:0] g_r;
    /* verilator lint_on UNUSEDSIGNAL */
    always_ff @(posedge ap_clk) if (ap_ready) g_r <= g;

    // ---- one row per cycle: score, position term P[level][|s - p|] (docs/window.md)
    logic [SELB-1:0] pen_idx;
    logic [PNB-1:0] pen;
    if (FLEXIBLE != 0) begin : g_pen_flexible
        assign pen_idx = {g_r, item_dist};
    end else begin : g_pen_local
        assign pen_idx = item_dist;
    end
    window_pen_rom u_pen_rom (.addr(pen_idx), .data(pen));

    logic signed [QB-1:0] ke [DIM];
    logic signed [VB-1:0] ve [DIM];
    logic [CB-1:0] ce;
    logic signed [SB-1:0] sc [HEADS];
    logic signed [LB-1:0] lg [HEADS];
    always_comb begin
        for (int d = 0; d < DIM; d++) begin
            ke[d] = rdata[d*QB +: QB];
            ve[d] = rdata[DIM*QB + d*VB +: VB];
        end
        ce = rdata[DIM*(QB+VB) +: CB];
    end
    if (BINARIZED != 0) begin : g_l1  // S = -sum_t |q - k| per head (Eq. 10), the cores' leaf
        for (genvar h = 0; h < HEADS; h++) begin : g_head
            logic [DH*QB-1:0] q_row, k_row;  // lane t: element h*DH + t
            logic signed [L1_SCORE_W-1:0] score;  // sign-extended into sc
            for (genvar t = 0; t < DH; t++) begin : g_lane
                assign q_row[t*QB +: QB] = q[h*DH + t];
                assign k_row[t*QB +: QB] = ke[h*DH + t];
            end
            l1_score_row #(
                .LANES(DH), .IN_W(QB), .SCORE_W(L1_SCORE_W), .DIFF_MAX({DH{32'(L1_DIFF_MAX)}})
            ) u_score (.q(q_row), .k(k_row), .score(score));
            assign sc[h] = SB'(score);
        end
    end else begin : g_dot  // the dot product's multiply-accumulate
        // (a function of the two rows: the same sum as an always_comb that reads back its own
        // sc hung Icarus 11 with the Flexible focus sum's block beside it)
        function automatic logic signed [SB-1:0] dot_row(
            input logic [DH*QB-1:0] a, input logic [DH*QB-1:0] b
        );
            logic signed [SB-1:0] acc;
            acc = SB'(0);
            for (int t = 0; t < DH; t++) begin
                acc = acc + SB'($signed(a[t*QB +: QB])) * SB'($signed(b[t*QB +: QB]));
            end
            dot_row = acc;
        endfunction
        for (genvar h = 0; h < HEADS; h++) begin : g_head
            logic [DH*QB-1:0] q_row, k_row;  // lane t: element h*DH + t
            for (genvar t = 0; t < DH; t++) begin : g_lane
                assign q_row[t*QB +: QB] = q[h*DH + t];
                assign k_row[t*QB +: QB] = ke[h*DH + t];
            end
            assign sc[h] = dot_row(q_row, k_row);
        end
    end
    always_comb begin
        for (int h = 0; h < HEADS; h++) lg[h] = LB'(sc[h]) - LB'($signed({1'b0, pen}));
    end

    // ---- window buffer (ROWS rows) and running max of the logits. Pass two reads every
    //      entry: past the window the exp select is masked by the row's valid flag
    //      (j < red_rows), but the count and V rows enter products, and 0 * X is X in a
    //      4-state simulation, so those two are reset (free in FDRE)
    logic signed [LB-1:0] sbuf [ROWS][HEADS];
    logic signed [VB-1:0] vbuf [ROWS][DIM];
    logic [CB-1:0] cbuf [ROWS];
    logic signed [LB-1:0] mx [HEADS];
    always_ff @(posedge ap_clk) begin
        if (item_vld) begin
            for (int h = 0; h < HEADS; h++) begin
                sbuf[item_idx][h] <= lg[h];
                if (item_idx == IXB'(0) || lg[h] > mx[h]) mx[h] <= lg[h];
            end
        end
    end
    always_ff @(posedge ap_clk) begin
        if (ap_rst) begin
            for (int j = 0; j < ROWS; j++) begin
                for (int d = 0; d < DIM; d++) vbuf[j][d] <= '0;
                cbuf[j] <= '0;
            end
        end else if (item_vld) begin
            for (int d = 0; d < DIM; d++) vbuf[item_idx][d] <= ve[d];
            cbuf[item_idx] <= ce;
        end
    end

    // ---- pass two: e = count * EXP[(max - S') >> EXP_SHIFT] (0 past the table and past
    //      the window), E = sum e, N = sum e V, F_N = sum e j
    logic [HEADS*ROWS*EKB-1:0] e_idx;  // entry (h, j) at [(h*ROWS + j)*EKB +: EKB]
    logic [HEADS*ROWS*EW-1:0] e_val;
    logic e_hit [HEADS][ROWS];
    logic [CEB-1:0] cw [HEADS][ROWS];
    logic [DB-1:0] df;
    logic [EIB-1:0] ei;
    always_comb begin
        for (int h = 0; h < HEADS; h++) begin
            for (int j = 0; j < ROWS; j++) begin
                df = DB'((LB+1)'(mx[h]) - (LB+1)'(sbuf[j][h]));
                ei = EIB'(df >> EXP_SHIFT);
                e_idx[(h*ROWS + j)*EKB +: EKB] = EKB'(ei);
                e_hit[h][j] = j < (RWB+1)'(red_rows) && (EIB+1)'(ei) < (EIB+1)'(EXP_SIZE);
            end
        end
    end
    window_exp_rom u_exp_rom (.addr(e_idx), .data(e_val));
    logic [EW-1:0] ex;
    logic [TB-1:0] e_sum_c [HEADS];
    logic signed [NB-1:0] numer_c [HEADS][DH];
    always_comb begin
        for (int h = 0; h < HEADS; h++) begin
            e_sum_c[h] = TB'(0);
            for (int t = 0; t < DH; t++) numer_c[h][t] = NB'(0);
            for (int j = 0; j < ROWS; j++) begin
                ex = e_hit[h][j] ? e_val[(h*ROWS + j)*EW +: EW] : EW'(0);
                cw[h][j] = CEB'(ex) * CEB'(cbuf[j]);
                e_sum_c[h] = e_sum_c[h] + TB'(cw[h][j]);
                for (int t = 0; t < DH; t++) begin
                    numer_c[h][t] = numer_c[h][t]
                        + NB'($signed({1'b0, cw[h][j]})) * NB'(vbuf[j][h*DH + t]);
                end
            end
        end
    end
    logic [TB-1:0] e_sum [HEADS];
    logic signed [NB-1:0] numer [HEADS][DH];
    always_ff @(posedge ap_clk) begin
        if (red_go) begin
            for (int h = 0; h < HEADS; h++) begin
                e_sum[h] <= e_sum_c[h];
                for (int t = 0; t < DH; t++) numer[h][t] <= numer_c[h][t];
            end
        end
    end

    // ---- focus numerator F_N = sum_j e_j j (FLEXIBLE): cw shifted by each set bit of the
    //      constant j, adders and no multiplier; buffer entry 0 is row lo; lo and rows held
    //      per step like E
    /* verilator lint_off UNUSEDSIGNAL */  // FLEXIBLE = 0: none of them is read
    logic signed [FNB-1:0] fnum [HEADS];
    logic [ADB-1:0] lo_red;
    logic [RWB-1:0] rows_red;
    /* verilator lint_on UNUSEDSIGNAL */
    if (FLEXIBLE != 0) begin : g_focus_sum
        logic signed [FNB-1:0] fnum_c [HEADS];
        logic [ADB-1:0] raddr_d, lo_buf;
        always_comb begin
            for (int h = 0; h < HEADS; h++) begin
                fnum_c[h] = FNB'(0);
                for (int j = 0; j < ROWS; j++) begin
                    for (int b = 0; b < IXB; b++) begin
                        if (j[b]) fnum_c[h] = fnum_c[h] + (FNB'(cw[h][j]) << b);
                    end
                end
            end
        end
        always_ff @(posedge ap_clk) begin
            if (rd_en) raddr_d <= raddr;
            if (item_vld && item_idx == IXB'(0)) lo_buf <= raddr_d;
            if (red_go) begin
                lo_red   <= lo_buf;
                rows_red <= red_rows;
                for (int h = 0; h < HEADS; h++) fnum[h] <= fnum_c[h];
            end
        end
    end else begin : g_no_focus_sum
        always_comb begin
            for (int h = 0; h < HEADS; h++) fnum[h] = FNB'(0);
            lo_red = '0;
            rows_red = '0;
        end
    end

    // ---- normalize O = N / E per head (recip_normalize.sv): the leaf finds the table index
    //      of E, window_recip_rom gives R, O = clamp(round_half_up(N * R / 2**(RECIP_FRAC +
    //      floor(log2 E)))) into OB bits; FLEXIBLE: lane DH is F_N (the same reciprocal)
    logic [HEADS*KI-1:0] recip_index;
    logic [HEADS*RB-1:0] recip;
    logic [LEAF_LANES*OB-1:0] o_norm [HEADS];  // lane t at [t*OB +: OB]
    window_recip_rom u_recip_rom (.addr(recip_index), .data(recip));
    for (genvar h = 0; h < HEADS; h++) begin : g_norm
        logic [LEAF_LANES*LEAF_NB-1:0] numer_row;  // lane t at [t*LEAF_NB +: LEAF_NB]
        for (genvar t = 0; t < DH; t++) begin : g_lane
            assign numer_row[t*LEAF_NB +: LEAF_NB] = LEAF_NB'(numer[h][t]);
        end
        if (FLEXIBLE != 0) begin : g_focus_lane
            assign numer_row[DH*LEAF_NB +: LEAF_NB] = LEAF_NB'(fnum[h]);
        end
        recip_normalize #(
            .LANES(LEAF_LANES), .SUM_W(TB), .NUMER_W(LEAF_NB), .INDEX_W(KI), .RECIP_W(RB),
            .RECIP_FRAC(RECIP_FRAC), .PROD_W(LEAF_PB), .OUT_W(OB)
        ) u_recip_normalize (
            .clk(ap_clk), .e_sum(e_sum[h]), .numer(numer_row),
            .recip_index(recip_index[h*KI +: KI]), .recip(recip[h*RB +: RB]), .o(o_norm[h])
        );
    end
    always_ff @(posedge ap_clk) begin
        if (nrm_go) begin
            for (int h = 0; h < HEADS; h++) o[h*DH*OB +: DH*OB] <= o_norm[h][DH*OB-1:0];
        end
    end

    // ---- focus F = lo + min(lane DH of the leaf, rows - 1) per head, with O (FLEXIBLE)
    if (FLEXIBLE != 0) begin : g_focus
        logic [OB-1:0] f_norm [HEADS], f_off [HEADS];
        always_comb begin
            for (int h = 0; h < HEADS; h++) begin
                f_norm[h] = o_norm[h][DH*OB +: OB];  // >= 0: F_N and R are
                f_off[h] = (CMP_W'(f_norm[h]) < CMP_W'(rows_red))
                    ? f_norm[h] : OB'(rows_red - RWB'(1));
            end
        end
        always_ff @(posedge ap_clk) begin
            if (nrm_go) begin
                for (int h = 0; h < HEADS; h++) f[h*ADB +: ADB] <= lo_red + ADB'(f_off[h]);
            end
        end
    end else begin : g_no_focus
        assign f = '0;
    end
endmodule

`default_nettype wire
