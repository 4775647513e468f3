// folded_norm: the attention unit's last step (folded_attend.sv): O = N / E of a SIMD-wide
// chunk of numerators with the reciprocal table (recip_normalize), into O's memory (a_mem, two
// banks of LEN_Q x DC SIMD-wide words: token i, chunk c at i*DC + c; bank 1 after bank 0),
// which the walks' post pass reads.
//
// Per query qi and head hh: `recip_re` reads R = RECIP[index of E] (once, after E is final:
// the exp phase's last cycle); then each numerator item (`item`: stage 3 of the numerator phase,
// its key block item_jb and the head's chunk item_c, N on `numer`) is normalized, and the
// block's last (item_jb == KB - 1: N complete) written to chunk hh*HC + item_c of token qi in
// bank att_b, LAT cycles after the item. E, qi, hh and att_b hold meanwhile (the unit changes
// them only after its numerator phase drains). Read: a_re with a_rd_tok, a_rd_rc of bank post_b;
// a_word the next cycle (folded_ram).
//
// PIPE: recip_normalize's (0: combinational, LAT 0; 3, the folded engine's ADDER_LEVELS: R
// registered after its table and N, R beside the multipliers, N x R in pieces with a register
// on each side, its coarse shift registered, then O registered before a_mem: LAT 7). The caller
// gives LAT, as its drain counts it (folded_attend NORM_LAT; rtl_sim/folding.py).
//
// Testbench: rtl_sim/tb/folded_norm (against eatt.quant.golden's reciprocal division).

`default_nettype none

module folded_norm #(
    parameter int SIMD       = 2,    // numerators a chunk
    parameter int LEN_Q      = 2,    // query tokens
    parameter int DC         = 2,    // SIMD-wide chunks of a token
    parameter int HC         = 1,    // chunks of a head
    parameter int KB         = 2,    // key blocks
    parameter int SUM_W      = 14,   // bits of E, unsigned
    parameter int NUMER_W    = 26,   // bits of N, signed
    parameter int RIDX_W     = 8,    // reciprocal table index bits
    parameter int RECIP_W    = 13,   // bits of a reciprocal entry
    parameter int RECIP_FRAC = 12,   // its fraction bits
    parameter int PROD_W     = 40,   // bits of N * R + half
    parameter int ATTN_W     = 12,   // bits of O
    parameter     RECIP_FILE = "",
    parameter int MACRO_ROWS = 32,   // memories of at least this many words are macros
    parameter int PIPE       = 0,    // recip_normalize's PIPE: 0 or 3 (above)
    parameter int LAT        = 0,    // cycles from an item to O written (0 or 7)
    // derived (left at their defaults): the port widths
    parameter int Q_CW   = (LEN_Q > 1) ? $clog2(LEN_Q) : 1,
    parameter int TOK_CW = Q_CW,
    parameter int DC_CW  = (DC > 1) ? $clog2(DC) : 1,
    parameter int H_CW   = ((DC / HC) > 1) ? $clog2(DC / HC) : 1,
    parameter int KB_CW  = (KB > 1) ? $clog2(KB) : 1,
    parameter int C_CW   = (HC > 1) ? $clog2(HC) : 1  // (the caller's may be wider)
) (
    input  wire logic                      clk,
    /* verilator lint_off UNUSEDSIGNAL */  // (LAT 0: no item line to reset)
    input  wire logic                      rst,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic [SUM_W-1:0]          esum,      // E of this query and head (>= 1)
    input  wire logic                      recip_re,  // read R (E final)
    input  wire logic                      item,      // a numerator item, N on numer
    input  wire logic [KB_CW-1:0]          item_jb,
    input  wire logic [C_CW-1:0]           item_c,
    input  wire logic [SIMD*NUMER_W-1:0]   numer,
    input  wire logic                      att_b,     // the bank O goes to
    input  wire logic [Q_CW-1:0]           qi,
    input  wire logic [H_CW-1:0]           hh,
    input  wire logic                      post_b,    // the bank read
    input  wire logic                      a_re,
    input  wire logic [TOK_CW-1:0]         a_rd_tok,
    input  wire logic [DC_CW-1:0]          a_rd_rc,
    output logic      [SIMD*ATTN_W-1:0]    a_word
);
    localparam int QD   = LEN_Q * DC;               // words of a bank
    localparam int QA_W = $clog2(2 * QD);           // an address (two banks)
    localparam int O_W  = 1 + KB_CW + C_CW;         // an item: {valid, key block, chunk}
    logic [RIDX_W-1:0]      recip_index;
    logic [RECIP_W-1:0]     recip, recip_q;
    logic [SIMD*ATTN_W-1:0] o_norm, o_word;        // O as normalized, as written

    folded_rom #(
        .WIDTH(RECIP_W), .DEPTH(2**RIDX_W), .SYNC(1), .FILE(RECIP_FILE),
        .MACRO_ROWS(MACRO_ROWS), .AW(RIDX_W)
    ) recip_rom (.clk(clk), .re(recip_re), .addr(recip_index), .data(recip));
    // R, O registered with PIPE (the table's block RAM, the clamp and a_mem's data input each
    // get a cycle: they sit apart on a part)
    if (PIPE != 0) begin : g_reg
        always_ff @(posedge clk) {recip_q, o_word} <= {recip, o_norm};
    end else begin : g_wire
        assign {recip_q, o_word} = {recip, o_norm};
    end
    recip_normalize #(
        .LANES(SIMD), .SUM_W(SUM_W), .NUMER_W(NUMER_W), .INDEX_W(RIDX_W), .RECIP_W(RECIP_W),
        .RECIP_FRAC(RECIP_FRAC), .PROD_W(PROD_W), .OUT_W(ATTN_W), .PIPE(PIPE)
    ) u_normalize (
        .clk(clk), .e_sum(esum), .numer(numer), .recip_index(recip_index), .recip(recip_q),
        .o(o_norm)
    );

    // the item LAT cycles on, beside the normalization
    logic [(LAT+1)*O_W-1:0] o_line;  // the item i cycles ago at [i*O_W +: O_W]
    logic             o_v;
    logic [KB_CW-1:0] o_jb;
    logic [C_CW-1:0]  o_c;
    assign o_line[0 +: O_W] = {item, item_jb, item_c};
    for (genvar i = 1; i <= LAT; i++) begin : g_o_line
        logic [O_W-1:0] q;
        always_ff @(posedge clk) q <= rst ? '0 : o_line[(i-1)*O_W +: O_W];
        assign o_line[i*O_W +: O_W] = q;
    end
    assign {o_v, o_jb, o_c} = o_line[LAT*O_W +: O_W];

    // Addresses exactly as wide as their ranges, mixed with int parameters
    /* verilator lint_off WIDTHEXPAND */
    /* verilator lint_off WIDTHTRUNC */
    logic [QA_W-1:0] waddr, raddr;
    assign waddr = QA_W'(qi * DC + hh * HC + o_c + (att_b ? QD : 0));
    assign raddr = QA_W'(a_rd_tok * DC + a_rd_rc + (post_b ? QD : 0));
    /* verilator lint_on WIDTHTRUNC */
    /* verilator lint_on WIDTHEXPAND */
    folded_ram #(
        .WIDTH(SIMD*ATTN_W), .DEPTH(2*QD), .MACRO_ROWS(MACRO_ROWS), .AW(QA_W)
    ) a_mem (
        .clk(clk), .we(o_v && o_jb == KB_CW'(KB - 1)), .waddr(waddr), .wdata(o_word),
        .re(a_re), .raddr(raddr), .rdata(a_word)
    );
endmodule

`default_nettype wire
