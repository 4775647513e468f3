// folded_out: the folded engine's output unit (folded_attention.sv): the Z memory, two banks
// of a vector each, written by the output projection in pieces, read back as the SIMD-wide
// beats of m_axis.
//
// Z is M = SIMD / MUL_COLS memories (z_sub, folded_ram), one per MUL_COLS-wide piece of a word:
// the post walk writes piece wr_sub of token wr_tok's chunk wr_cc into bank post_b (word
// wr_tok*DC + wr_cc); when bank out_b is full (`full`, the engine's flag) its OUT_BEATS =
// LEN_Q*DC words go out in order on m_axis (AXI4-Stream, tready backpressure), tlast on the
// last; `out_end` is high in the cycle the last beat is taken (the engine frees the bank).
//
// ADDER_LEVELS = 0: a word is read in the cycle before it is offered, the read enable from
// m_axis_tready. ADDER_LEVELS >= 1 (for a clock): the words are read ahead into a FIFO of
// OUT_DEPTH words, each read decided a cycle ahead from registers alone (its enable and
// address registered, a copy beside each piece's memory), each word registered as it leaves
// its memory (a block RAM's clock-to-output is most of a cycle): m_axis_tready no longer runs
// into the memories' enables, and the first beat comes 3 cycles later (rtl_sim/folding.py
// out_extra).
//
// Testbench: rtl_sim/tb/folded_out/test_folded_out.py.

`default_nettype none

module folded_out #(
    parameter int SIMD         = 2,  // elements of a beat
    parameter int MUL_COLS     = 2,  // elements of a written piece (divides SIMD)
    parameter int OUT_W        = 8,  // bits of an element
    parameter int LEN_Q        = 2,  // tokens of a vector
    parameter int DIM          = 4,  // elements of a token
    parameter int MACRO_ROWS   = 0,  // folded_ram: a macro from this many words (0: flip-flops)
    parameter int ADDER_LEVELS = 0,  // >= 1: read ahead through the FIFO (module doc)
    // derived (left at their defaults, as verilog-axis' KEEP_WIDTH): the port widths; the
    // engine passes TOK_CW, its token counters' width
    parameter int DC     = DIM / SIMD,  // beats of a token
    parameter int M      = SIMD / MUL_COLS,
    parameter int TOK_CW = (LEN_Q > 1) ? $clog2(LEN_Q) : 1,
    parameter int DC_CW  = (DC > 1) ? $clog2(DC) : 1,
    parameter int M_CW   = (M > 1) ? $clog2(M) : 1
) (
    input  wire logic                      clk,
    input  wire logic                      rst,
    // the post walk's pieces into bank post_b
    input  wire logic                      post_b,
    input  wire logic                      wr_en,
    input  wire logic [TOK_CW-1:0]         wr_tok,
    input  wire logic [DC_CW-1:0]          wr_cc,
    input  wire logic [M_CW-1:0]           wr_sub,
    input  wire logic [MUL_COLS*OUT_W-1:0] wr_code,
    // bank out_b holds a whole vector: its beats on m_axis
    input  wire logic                      out_b,
    input  wire logic                      full,
    output logic      [SIMD*OUT_W-1:0]     m_axis_tdata,
    output logic                           m_axis_tvalid,
    input  wire logic                      m_axis_tready,
    output logic                           m_axis_tlast,
    output logic                           out_end  // the vector's last beat taken
);
    // Counters exactly as wide as their ranges, mixed with int parameters (folded_attention.sv)
    /* verilator lint_off WIDTHEXPAND */
    /* verilator lint_off WIDTHTRUNC */
    localparam int OUT_BEATS = LEN_Q * DC;
    localparam int OUT_CW    = (OUT_BEATS > 1) ? $clog2(OUT_BEATS) : 1;
    localparam int QA_W      = $clog2(2 * LEN_Q * DC);  // addresses (two banks)
    localparam int QD        = LEN_Q * DC;              // words of a bank
    function automatic int unsigned banked(input logic b, input int unsigned depth,
                                           input int unsigned addr);
        banked = addr + (b ? depth : 0);
    endfunction

    wire  [SIMD*OUT_W-1:0] z_word;
    logic [M-1:0]          z_re;     // read the next word (a copy a piece)
    logic [M*QA_W-1:0]     z_raddr;  // its address (a copy a piece)
    logic [OUT_CW:0]       rd_cnt;   // words read
    logic [OUT_CW-1:0]     out_cnt;  // beats taken
    logic                  out_valid;  // m_axis holds a word
    logic                  out_pop;    // m_axis takes it
    for (genvar m = 0; m < M; m++) begin : g_zsub
        folded_ram #(
            .WIDTH(MUL_COLS*OUT_W), .DEPTH(2*LEN_Q*DC), .MACRO_ROWS(MACRO_ROWS), .AW(QA_W)
        ) z_sub (
            .clk(clk), .we(wr_en && wr_sub == m),
            .waddr(QA_W'(banked(post_b, QD, wr_tok*DC + wr_cc))), .wdata(wr_code),
            .re(z_re[m]), .raddr(z_raddr[m*QA_W +: QA_W]),
            .rdata(z_word[m*MUL_COLS*OUT_W +: MUL_COLS*OUT_W])
        );
    end

    localparam int OUT_DEPTH = 8;  // > the words in flight: the decision, read, data, landing
    if (ADDER_LEVELS == 0) begin : g_out_direct
        logic re;
        assign re = full && (rd_cnt < OUT_BEATS) && (!out_valid || m_axis_tready);
        assign z_re = {M{re}};
        assign z_raddr = {M{QA_W'(banked(out_b, QD, rd_cnt))}};
        assign m_axis_tdata = z_word;
        always_ff @(posedge clk) begin
            if (rst) begin
                {rd_cnt, out_valid} <= '0;
            end else begin
                if (re) begin
                    rd_cnt <= rd_cnt + 1;
                    out_valid <= 1'b1;
                end else if (m_axis_tready) begin
                    out_valid <= 1'b0;
                end
                if (out_end) rd_cnt <= 0;
            end
        end
    end else begin : g_out_ahead
        logic [SIMD*OUT_W-1:0] fifo [OUT_DEPTH];
        logic [SIMD*OUT_W-1:0] z_q;  // z_word registered as it leaves the memories
        logic [2:0] head, tail;  // (OUT_DEPTH 8)
        logic [3:0] used;        // words in the FIFO
        logic       issued;      // a read is on the memories' enables this cycle
        logic       arrives;     // its word is on z_word this cycle
        logic       lands;       // and on z_q this cycle
        logic       ahead;       // decide a read for the next cycle
        assign ahead = full && (rd_cnt < OUT_BEATS)
                    && (used + 4'(issued) + 4'(arrives) + 4'(lands) < 4'(OUT_DEPTH));
        for (genvar m = 0; m < M; m++) begin : g_re
            (* keep *) always_ff @(posedge clk) begin
                z_re[m] <= !rst && ahead;
                z_raddr[m*QA_W +: QA_W] <= QA_W'(banked(out_b, QD, rd_cnt));
            end
        end
        assign out_valid = (used != 0);
        assign m_axis_tdata = fifo[head];
        always_ff @(posedge clk) begin
            if (arrives) z_q <= z_word;
            if (lands) fifo[tail] <= z_q;
            if (rst) begin
                {head, tail, used, issued, arrives, lands, rd_cnt} <= '0;
            end else begin
                issued <= ahead;
                arrives <= issued;
                lands <= arrives;
                if (lands) tail <= tail + 1;
                if (out_pop) head <= head + 1;
                used <= used + 4'(lands) - 4'(out_pop);
                if (out_end) rd_cnt <= 0;
                else if (ahead) rd_cnt <= rd_cnt + 1;
            end
        end
    end
    assign out_pop = out_valid && m_axis_tready;
    assign m_axis_tvalid = out_valid;
    assign m_axis_tlast  = (out_cnt == OUT_BEATS - 1);
    assign out_end = out_pop && (out_cnt == OUT_BEATS - 1);
    always_ff @(posedge clk) begin
        if (rst) out_cnt <= '0;
        else if (out_pop) out_cnt <= out_end ? '0 : out_cnt + 1;
    end
    /* verilator lint_on WIDTHTRUNC */
    /* verilator lint_on WIDTHEXPAND */
endmodule

`default_nettype wire
