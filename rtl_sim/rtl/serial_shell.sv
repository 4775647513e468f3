// serial_shell: serial load of a core's inputs and shift-out of its outputs over a few pins, so
// that a core with more port bits than the FPGA package has pins can be placed with pins
// (rtl_sim/pnr.py generates the top that joins it to a core; docs/pnr.md "Wrapper").
//
// Host side, all synchronous to clk (rst: synchronous, active high):
//   - din_vld high for one cycle per chunk: din enters the input register, which shifts right
//     by PINS bits; after IN_CHUNKS = ceil(IN_W / PINS) chunks, chunk k (sent k-th, from 0)
//     sits at bits [k*PINS +: PINS] of core_in (the bits above IN_W of the last chunk are
//     dropped);
//   - go high for one cycle: the core is started on core_in (core_start held until
//     core_ready), busy goes high;
//   - when the core raises core_done, core_out is captured into the output register and busy
//     goes low; dout shows its bits [0 +: PINS]; dout_next high for one cycle shifts it right by
//     PINS bits (zeros enter at the top), so OUT_CHUNKS = ceil(OUT_W / PINS) reads give the
//     result, lowest bits first.
// The input register keeps its value while the core runs: a core that samples its inputs only
// at the accepted start (ap_ctrl_hs) and one that reads them until done both see them.

`default_nettype none

module serial_shell #(
    parameter int IN_W  = 16,  // the core's input bits (its input ports, concatenated)
    parameter int OUT_W = 8,   // the core's output bits
    parameter int PINS  = 8    // data pins each way
) (
    input  wire logic             clk,
    input  wire logic             rst,
    // host side
    input  wire logic [PINS-1:0]  din,
    input  wire logic             din_vld,
    input  wire logic             go,
    output logic                  busy,
    input  wire logic             dout_next,
    output logic      [PINS-1:0]  dout,
    // core side
    output logic      [IN_W-1:0]  core_in,
    output logic                  core_start,
    input  wire logic             core_ready,
    input  wire logic             core_done,
    input  wire logic [OUT_W-1:0] core_out
);
    localparam int IN_CHUNKS  = (IN_W + PINS - 1) / PINS;
    localparam int OUT_CHUNKS = (OUT_W + PINS - 1) / PINS;
    localparam int IN_REG     = IN_CHUNKS * PINS;
    localparam int OUT_REG    = OUT_CHUNKS * PINS;

    logic [IN_REG-1:0]  in_reg;
    logic [OUT_REG-1:0] out_reg;

    assign core_in = in_reg[IN_W-1:0];
    assign dout    = out_reg[PINS-1:0];

    if (IN_CHUNKS > 1) begin : g_in_shift
        always_ff @(posedge clk) if (din_vld) in_reg <= {din, in_reg[IN_REG-1:PINS]};
    end else begin : g_in_load
        always_ff @(posedge clk) if (din_vld) in_reg <= din;
    end

    always_ff @(posedge clk) begin
        if (rst) begin
            core_start <= 1'b0;
            busy       <= 1'b0;
        end else begin
            if (go) begin
                core_start <= 1'b1;
                busy       <= 1'b1;
            end else if (core_start && core_ready) begin
                core_start <= 1'b0;
            end
            if (core_done && !go) busy <= 1'b0;
        end
    end

    if (OUT_CHUNKS > 1) begin : g_out_shift
        always_ff @(posedge clk) begin
            if (core_done) out_reg <= OUT_REG'(core_out);
            else if (dout_next) out_reg <= {PINS'(0), out_reg[OUT_REG-1:PINS]};
        end
    end else begin : g_out_load
        always_ff @(posedge clk) begin
            if (core_done) out_reg <= OUT_REG'(core_out);
            else if (dout_next) out_reg <= '0;
        end
    end
endmodule

`default_nettype wire
