// window_ram: the memory of the windowed attention unit, one row per address.
//
// A simple dual-port RAM with a synchronous read (the data of the address presented in cycle t
// with re high is on rdata in cycle t+1; rdata holds otherwise), written in the style that
// synthesis infers as block or distributed RAM (re is the block RAM's read enable). The words
// are not reset (a RAM reset is not free): a step only reads rows below its len, which the
// caller must have written; rdata is consumed only for an issued row (window_ctrl item_vld).
// A row packs the count, the value codes and the key codes of one memory position
// (rtl_sim/window.py, docs/window.md "Memory loading"). The write port loads the memory before
// ap_start; a write to a row that a running step reads is the caller's race.

`default_nettype none

module window_ram #(
    parameter int DEPTH = 16,  // rows (len_k)
    parameter int AB    = 4,   // address bits, DEPTH <= 2**AB
    parameter int WIDTH = 8    // bits of a row
) (
    input  wire logic             clk,
    input  wire logic             we,
    input  wire logic [AB-1:0]    waddr,
    input  wire logic [WIDTH-1:0] wdata,
    input  wire logic             re,
    input  wire logic [AB-1:0]    raddr,
    output logic      [WIDTH-1:0] rdata
);
    logic [WIDTH-1:0] mem [DEPTH];

    always_ff @(posedge clk) begin
        if (we) mem[waddr] <= wdata;
        if (re) rdata <= mem[raddr];
    end
endmodule

`default_nettype wire
