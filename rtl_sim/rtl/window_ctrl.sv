// window_ctrl: handshake and address generator of the windowed attention unit.
//
// Block-level protocol ap_ctrl_hs (as ap_pipe_ctrl.sv, Vitis UG1399): ap_ready is high in the
// cycle in which ap_start and the step inputs (p, w, len) are read; ap_done is high for one
// cycle per accepted step, when the outputs are valid; ap_idle is high while no start is
// pending and no step is in flight. ap_rst is synchronous, active high, and drops every step
// in flight (no ap_done follows). Every register of the controller is reset, so no output
// (the address included) is ever unknown after the first reset; rd_en gates the RAM read,
// which only happens for an issued window row.
//
// A step reads the rows [lo, hi] = [max(p - w, 0), min(p + w, len - 1)] (Luong local-p Eq. 9,
// clipped to the sequence): one RAM address per cycle, the first (lo) in the accepting cycle.
// A new step is accepted in the cycle after the last address of the previous one, so back to
// back steps start every hi - lo + 1 cycles while the tail of the previous step (the window
// reduction and the normalization) runs on.
//
// Pipeline (cycle of the accepted start = A, rows n = hi - lo + 1):
//   A + k      (k < n)  raddr = lo + k
//   A + k + 1           item_vld: row k's RAM data; item_idx = k, item_dist = |lo + k - p|,
//                       item_last on k = n - 1
//   A + n + 1           red_go: the window buffer is complete (red_rows = n rows)
//   A + n + 2           nrm_go: the reduced sums are valid
//   A + n + 3           ap_done: the output register is valid   (latency n + 3)

`default_nettype none

module window_ctrl #(
    parameter int AB = 4,  // address bits (len_k <= 2**AB)
    parameter int WB = 2,  // bits of the half-width input w
    parameter int LB = 5,  // bits of the length input len (1 .. len_k)
    parameter int DB = 2,  // bits of a distance |s - p| <= D
    parameter int IB = 3,  // bits of a window buffer index (< window rows)
    parameter int RB = 3   // bits of a window row count (<= window rows)
) (
    input  wire logic          ap_clk,
    input  wire logic          ap_rst,    // synchronous, active high
    input  wire logic          ap_start,
    output logic               ap_done,
    output logic               ap_idle,
    output logic               ap_ready,
    input  wire logic [AB-1:0] p,         // window centre, p < len
    input  wire logic [WB-1:0] w,         // effective half-width, w <= D
    input  wire logic [LB-1:0] len,       // valid memory rows, 1 <= len <= len_k
    output logic               rd_en,     // RAM read enable: a window row is issued
    output logic      [AB-1:0] raddr,     // RAM read address of this cycle
    output logic               item_vld,  // RAM data of a window row this cycle
    output logic      [IB-1:0] item_idx,  // its place in the window buffer
    output logic               item_last, // the last row of its step
    output logic      [DB-1:0] item_dist, // |s - p| of the row
    output logic               red_go,    // the window buffer is complete this cycle
    output logic      [RB-1:0] red_rows,  // rows of that window
    output logic               nrm_go     // the reduced sums are valid this cycle
);
    // holds p, w, p + w and len - 1 without wrapping
    localparam int SB = ((AB > LB ? AB : LB) > WB ? (AB > LB ? AB : LB) : WB) + 2;

    logic [SB-1:0] hi_wide, last_row;
    logic [AB-1:0] lo, hi;
    logic          accept, issue, busy, done;
    logic [AB-1:0] addr, hi_r, p_r, cur, cur_hi, cur_p;
    /* verilator lint_off UNUSEDSIGNAL */
    logic [AB-1:0] dist_wide;  // |s - p| <= w <= D < 2**DB: the bits above DB are always 0
    /* verilator lint_on UNUSEDSIGNAL */
    logic [IB-1:0] idx, cur_idx;

    // window bounds of the step offered on the inputs
    assign lo       = (SB'(p) > SB'(w)) ? AB'(SB'(p) - SB'(w)) : '0;
    assign hi_wide  = SB'(p) + SB'(w);
    assign last_row = SB'(len) - SB'(1);
    assign hi       = AB'((hi_wide > last_row) ? last_row : hi_wide);

    assign accept   = ap_start && !busy && !ap_rst;
    assign ap_ready = accept;
    assign issue    = accept || busy;
    assign cur      = accept ? lo : addr;
    assign cur_hi   = accept ? hi : hi_r;
    assign cur_p    = accept ? p : p_r;
    assign cur_idx  = accept ? '0 : idx;
    assign rd_en    = issue;
    assign raddr    = cur;
    assign dist_wide = (cur >= cur_p) ? cur - cur_p : cur_p - cur;

    // control and address registers, all reset (a few bits each)
    always_ff @(posedge ap_clk) begin
        if (ap_rst) begin
            busy      <= 1'b0;
            item_vld  <= 1'b0;
            red_go    <= 1'b0;
            nrm_go    <= 1'b0;
            done      <= 1'b0;
            addr      <= '0;
            hi_r      <= '0;
            p_r       <= '0;
            idx       <= '0;
            item_idx  <= '0;
            item_last <= 1'b0;
            item_dist <= '0;
            red_rows  <= '0;
        end else begin
            busy     <= issue && (cur != cur_hi);
            item_vld <= issue;
            red_go   <= item_vld && item_last;
            nrm_go   <= red_go;
            done     <= nrm_go;
            if (issue) begin
                addr      <= cur + AB'(1);
                hi_r      <= cur_hi;
                p_r       <= cur_p;
                idx       <= cur_idx + IB'(1);
                item_idx  <= cur_idx;
                item_last <= (cur == cur_hi);
                item_dist <= DB'(dist_wide);
            end
            if (item_vld && item_last) red_rows <= RB'(item_idx) + RB'(1);
        end
    end

    assign ap_done = done;
    assign ap_idle = !ap_start && !busy && !item_vld && !red_go && !nrm_go && !done;
endmodule

`default_nettype wire
