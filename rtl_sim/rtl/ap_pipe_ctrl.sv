// ap_pipe_ctrl: block-level handshake of a fixed-latency, fully pipelined datapath.
//
// The protocol is the one Vitis HLS generates for a pipelined top function with
// ap_ctrl_hs (UG1399 "Block-Level Control Protocols"):
//   - the producer raises ap_start with valid inputs and holds both until it sees ap_ready;
//   - ap_ready is high in the cycle in which the inputs are read (here: every cycle in which
//     ap_start is high and reset is low: initiation interval 1, the pipeline never stalls);
//   - ap_done is high for one cycle per accepted start, exactly LATENCY cycles after the
//     cycle in which that start was accepted; the outputs are valid in that cycle;
//   - ap_idle is high while no start is pending and the pipeline is empty.
// ap_rst is synchronous and active high; it empties the pipeline (in-flight results are
// dropped and never signalled by ap_done). Data registers need no reset.
//
// stage_en[k] is the load enable of pipeline register stage k (stage 0 samples the inputs,
// stage LATENCY-1 is the output register): a stage only toggles when it carries a vector,
// so idle stages hold their value and do not switch.

`default_nettype none

module ap_pipe_ctrl #(
    // Register stages from the inputs to the output register (ap_start to ap_done, cycles).
    parameter int LATENCY = 2
) (
    input  wire logic               ap_clk,
    input  wire logic               ap_rst,    // synchronous, active high
    input  wire logic               ap_start,
    output logic                    ap_done,
    output logic                    ap_idle,
    output logic                    ap_ready,
    output logic [LATENCY-1:0]      stage_en   // load enable of each register stage
);
    // valid[k]: register stage k holds a live vector (after the last clock edge)
    logic [LATENCY-1:0] valid;
    logic               accept;

    assign accept   = ap_start && !ap_rst;
    assign ap_ready = accept;
    // stage 0 loads on an accepted start, stage k when stage k-1 holds a live vector
    assign stage_en = LATENCY'({valid, accept});

    always_ff @(posedge ap_clk) begin
        if (ap_rst) begin
            valid <= '0;
        end else begin
            valid <= stage_en;
        end
    end

    assign ap_done = valid[LATENCY-1];
    assign ap_idle = !ap_start && (valid == '0);
endmodule

`default_nettype wire
