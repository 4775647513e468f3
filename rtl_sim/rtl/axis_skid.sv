// axis_skid: an AXI4-Stream register slice (a skid buffer): every output a register, so a
// stream crossing the part (from the pins to the engine, or back) costs a route, not a route
// and the logic on either side. Beats pass in order, none lost or repeated, under any pattern
// of tvalid and tready; one cycle of latency; full throughput (a beat every cycle while the
// sink takes them).
//
// The beat (tdata, tlast, tuser packed into W bits by the caller) goes into the output
// register when it is empty or being taken; s_tready is registered and falls only when a beat
// is parked in the skid register (the output full and not taken while a beat arrived); the
// parked beat moves to the output as the sink takes the one there.
//
// Used by the pin wrapper of a folded engine (rtl_sim/pin_wrappers.py axis_top: one on s_axis, one on
// m_axis). Testbench: rtl_sim/tb/axis_skid (random valid and ready on both sides against a
// queue, Verilator and Icarus).

`default_nettype none

module axis_skid #(
    parameter int W = 8  // bits of a beat
) (
    input  wire logic         clk,
    input  wire logic         rst,  // synchronous, active high
    input  wire logic [W-1:0] s_data,
    input  wire logic         s_valid,
    output logic              s_ready,
    output logic      [W-1:0] m_data,
    output logic              m_valid,
    input  wire logic         m_ready
);
    logic [W-1:0] skid;    // a beat parked while the output was full and not taken
    logic         parked;
    assign s_ready = !parked;

    always_ff @(posedge clk) begin
        if (rst) begin
            {m_valid, parked} <= '0;
        end else begin
            if (!m_valid || m_ready) begin  // the output register is free this edge
                m_valid <= parked || s_valid;
                parked <= 1'b0;
            end else if (s_valid && !parked) begin  // full and kept: park the arriving beat
                parked <= 1'b1;
            end
        end
    end
    always_ff @(posedge clk) begin
        if (!m_valid || m_ready) m_data <= parked ? skid : s_data;
        if (m_valid && !m_ready && s_valid && !parked) skid <= s_data;
    end
endmodule

`default_nettype wire
