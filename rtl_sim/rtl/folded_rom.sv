// folded_rom: a read-only memory of the folded engine (the weight tiles, the softmax exp and
// reciprocal tables), its words from the $readmemh file FILE next to the RTL. SYNC = 1: the
// word of the address presented with re high is on data in the next cycle (block RAM style;
// data holds otherwise); SYNC = 0: data follows addr (re only marks the reads). READS ports.
// DEPTH >= MACRO_ROWS words: a memory macro (folded_macro, priced per access by eatt power);
// fewer: logic and flip-flops (synthesis folds the constants in).
//
// Testbench: through the engine (rtl_sim/tb/test_folded.py) and tests/test_memory_macros.py.

`default_nettype none

module folded_rom #(
    parameter int WIDTH      = 8,
    parameter int DEPTH      = 4,
    parameter int READS      = 1,
    parameter int SYNC       = 1,
    parameter     FILE       = "",  // the $readmemh file (the engine always names one)
    parameter int MACRO_ROWS = 32,  // the fewest words a macro has
    parameter int AW         = (DEPTH > 1) ? $clog2(DEPTH) : 1
) (
    input  wire logic                   clk,
    /* verilator lint_off UNUSEDSIGNAL */  // SYNC = 0: re only marks the reads
    input  wire logic [READS-1:0]       re,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic [READS*AW-1:0]    addr,
    output logic      [READS*WIDTH-1:0] data
);
    if (DEPTH >= MACRO_ROWS) begin : g_macro
        folded_macro #(
            .WIDTH(WIDTH), .DEPTH(DEPTH), .READS(READS), .SYNC(SYNC), .INIT_FILE(FILE), .AW(AW)
        ) u_macro (
            .clk(clk), .we(1'b0), .waddr('0), .wdata('0), .re(re), .raddr(addr), .rdata(data)
        );
    end else begin : g_flops
        logic [WIDTH-1:0] mem [DEPTH];
        if (FILE != "") begin : g_init  // (Yosys reads the file of the default too)
            initial $readmemh(FILE, mem);
        end
        for (genvar r = 0; r < READS; r++) begin : g_read
            if (SYNC != 0) begin : g_sync
                always_ff @(posedge clk) begin
                    if (re[r]) data[r*WIDTH +: WIDTH] <= mem[addr[r*AW +: AW]];
                end
            end else begin : g_async
                assign data[r*WIDTH +: WIDTH] = mem[addr[r*AW +: AW]];
            end
        end
    end
endmodule

`default_nettype wire
