// folded_ram: a memory of the folded engine written while it runs (tokens, Q, K, V, O, Z,
// scores, softmax weights): one write port, READS synchronous read ports: the word of the
// address presented with re high is on rdata in the next cycle, and stays there while re is
// low (a block RAM's or an SRAM macro's read; the engine presents each address a cycle ahead).
// A word written in one cycle can be read from the next (its read is sampled at the end of
// that cycle); the engine never reads a word in the cycle it is written. DEPTH >= MACRO_ROWS
// words: a memory macro (folded_macro, priced per access by eatt power); fewer: flip-flops with
// a registered read (a register file: smaller than the smallest array CACTI models, 32 rows;
// docs/power.md "Memories").
//
// re marks and enables the reads (the macro's read count). The words are not reset: the engine
// reads only what it wrote in this call.
//
// Testbench: through the engine (rtl_sim/tb/test_folded.py) and tests/test_memory_macros.py.

`default_nettype none

module folded_ram #(
    parameter int WIDTH      = 8,
    parameter int DEPTH      = 4,
    parameter int READS      = 1,
    parameter int MACRO_ROWS = 32,  // the fewest words a macro has
    parameter int AW         = (DEPTH > 1) ? $clog2(DEPTH) : 1
) (
    input  wire logic                   clk,
    input  wire logic                   we,
    input  wire logic [AW-1:0]          waddr,
    input  wire logic [WIDTH-1:0]       wdata,
    input  wire logic [READS-1:0]       re,
    input  wire logic [READS*AW-1:0]    raddr,
    output logic      [READS*WIDTH-1:0] rdata
);
    if (DEPTH >= MACRO_ROWS) begin : g_macro
        folded_macro #(.WIDTH(WIDTH), .DEPTH(DEPTH), .READS(READS), .SYNC(1), .AW(AW)) u_macro (
            .clk(clk), .we(we), .waddr(waddr), .wdata(wdata), .re(re), .raddr(raddr),
            .rdata(rdata)
        );
    end else begin : g_flops
        logic [WIDTH-1:0] mem [DEPTH];
        always_ff @(posedge clk) begin
            if (we) mem[waddr] <= wdata;
        end
        for (genvar r = 0; r < READS; r++) begin : g_read
            always_ff @(posedge clk) begin
                if (re[r]) rdata[r*WIDTH +: WIDTH] <= mem[raddr[r*AW +: AW]];
            end
        end
    end
endmodule

`default_nettype wire
