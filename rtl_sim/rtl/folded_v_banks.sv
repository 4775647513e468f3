// folded_v_banks: V as the folded engine's attention unit reads it (folded_attend.sv): LANES
// lanes (key j in lane j mod LANES, so LANES keys are read in one cycle), each of M pieces of
// MUL_COLS columns (the multiply walk's word; M = SIMD / MUL_COLS), two banks of KB x DC
// SIMD-wide chunks (key block b, chunk c at b*DC + c; bank 1 after bank 0).
//
// Write: the multiply walk's V pieces (folded_proj_walk wr_*): `we` with the piece's lane,
// key block, chunk and piece into bank pre_b. Read: `re` with key block rd_blk, chunk rd_cc
// of bank att_b; every lane's SIMD-wide chunk on v the next cycle (folded_ram).
//
// ADDER_LEVELS >= 1 (for a clock): the write is registered, each lane its own copy of the
// address and data and each piece's write enable decoded into a register of its own (kept
// apart: no merge), so the walk's one valid no longer fans out through the decode to every
// bank's block RAMs in a cycle (the ECP5 route's worst path at lanes 4: docs/pnr.md). A piece
// lands a cycle later; attention reads V only in its numerator phase, long after the walk's
// last write (folded_attention.sv's hand-over), so no cycle count changes.
//
// Testbench: rtl_sim/tb/folded_v_banks (random pieces in random order against a Python model,
// reads of the other bank while one is written).

`default_nettype none

module folded_v_banks #(
    parameter int LANES        = 2,   // keys read per cycle
    parameter int SIMD         = 2,   // columns of a chunk
    parameter int MUL_COLS     = 2,   // columns of a written piece (divides SIMD)
    parameter int V_W          = 8,   // bits of a V code
    parameter int KB           = 2,   // key blocks (LEN_K / LANES)
    parameter int DC           = 2,   // chunks of a token (DIM / SIMD)
    parameter int MACRO_ROWS   = 32,  // memories of at least this many words are macros
    parameter int ADDER_LEVELS = 0,   // >= 1: the write registered (above)
    // derived (left at their defaults): the port widths
    parameter int LANE_CW = (LANES > 1) ? $clog2(LANES) : 1,
    parameter int KB_CW   = (KB > 1) ? $clog2(KB) : 1,
    parameter int DC_CW   = (DC > 1) ? $clog2(DC) : 1,
    parameter int M_CW    = ((SIMD / MUL_COLS) > 1) ? $clog2(SIMD / MUL_COLS) : 1
) (
    input  wire logic                        clk,
    input  wire logic                        pre_b,   // the bank written
    input  wire logic                        we,
    input  wire logic [LANE_CW-1:0]          lane,
    input  wire logic [KB_CW-1:0]            blk,
    input  wire logic [DC_CW-1:0]            cc,
    input  wire logic [M_CW-1:0]             sub,
    input  wire logic [MUL_COLS*V_W-1:0]     wdata,
    input  wire logic                        att_b,   // the bank read
    input  wire logic                        re,
    input  wire logic [KB_CW-1:0]            rd_blk,
    input  wire logic [DC_CW-1:0]            rd_cc,
    output logic      [LANES*SIMD*V_W-1:0]   v        // lane l's chunk at [l*SIMD*V_W +:]
);
    localparam int M    = SIMD / MUL_COLS;
    localparam int BD   = KB * DC;                 // words of a bank
    localparam int BA_W = $clog2(2 * BD);          // an address (two banks)
    localparam int PW   = MUL_COLS * V_W;          // bits of a piece
    // Counters exactly as wide as their ranges, mixed with int parameters
    /* verilator lint_off WIDTHEXPAND */
    /* verilator lint_off WIDTHTRUNC */
    logic [BA_W-1:0] waddr, raddr;
    assign waddr = BA_W'(blk * DC + cc + (pre_b ? BD : 0));
    assign raddr = BA_W'(rd_blk * DC + rd_cc + (att_b ? BD : 0));
    /* verilator lint_on WIDTHTRUNC */
    /* verilator lint_on WIDTHEXPAND */

    for (genvar l = 0; l < LANES; l++) begin : g_lane
        logic [M-1:0]    l_we;      // piece m of this lane is written
        logic [BA_W-1:0] l_waddr;
        logic [PW-1:0]   l_wdata;
        if (ADDER_LEVELS > 0) begin : g_wr_reg
            (* keep *) logic [M-1:0]    we_q;
            (* keep *) logic [BA_W-1:0] waddr_q;
            (* keep *) logic [PW-1:0]   wdata_q;
            for (genvar m = 0; m < M; m++) begin : g_we
                always_ff @(posedge clk)
                    we_q[m] <= we && 32'(lane) == l && 32'(sub) == m;
            end
            always_ff @(posedge clk) {waddr_q, wdata_q} <= {waddr, wdata};
            assign {l_we, l_waddr, l_wdata} = {we_q, waddr_q, wdata_q};
        end else begin : g_wr
            for (genvar m = 0; m < M; m++) begin : g_we
                assign l_we[m] = we && 32'(lane) == l && 32'(sub) == m;
            end
            assign {l_waddr, l_wdata} = {waddr, wdata};
        end
        for (genvar m = 0; m < M; m++) begin : g_vsub
            folded_ram #(
                .WIDTH(PW), .DEPTH(2 * BD), .MACRO_ROWS(MACRO_ROWS), .AW(BA_W)
            ) v_bank (
                .clk(clk), .we(l_we[m]), .waddr(l_waddr), .wdata(l_wdata),
                .re(re), .raddr(raddr),
                .rdata(v[l*SIMD*V_W + m*PW +: PW])
            );
        end
    end
endmodule

`default_nettype wire
