// folded_macro: one memory of the folded engine as a memory macro (an SRAM or ROM array): the
// behavioural model simulation runs, and the black box `eatt power` synthesizes around.
//
// A RAM (INIT_FILE "") has one write port (we, waddr, wdata); a ROM (INIT_FILE a $readmemh file
// next to the RTL) ignores it. READS read ports: SYNC = 0 reads asynchronously (rdata follows
// raddr, as the engine's register files do), SYNC = 1 registers the word of the address
// presented with re high (rdata holds otherwise). re marks the cycles a port's word is used:
// the model's read count, and, with SYNC = 1, its enable. The words are not reset.
//
// With EATT_MACRO_BLACKBOX defined (eatt power's Yosys read, rtl_sim/power.py) the module is an
// empty (* blackbox *): synthesis keeps each instance as a cell with its parameters, so the
// netlist's logic and registers are measured gate by gate and the macros priced per access
// (rtl_sim/memory_energy.py). With EATT_MEMORY_COUNT defined (the gate-level simulation's copy
// of this file) each instance counts the cycles it is written (we) and read (each port's re)
// in `writes` and `reads` and appends them to memories.txt in the run folder when the
// simulation ends ("<instance path> <reads> <writes>"; rtl_sim/gate_activity.py reads it).
//
// Testbench: through the engine (rtl_sim/tb/test_folded.py) and tests/test_memory_macros.py.

`default_nettype none

`ifdef EATT_MACRO_BLACKBOX
(* blackbox *)
`endif
module folded_macro #(
    parameter int WIDTH     = 8,   // bits of a word
    parameter int DEPTH     = 32,  // words
    parameter int READS     = 1,   // read ports
    parameter int SYNC      = 0,   // 1: registered read data
    parameter     INIT_FILE = "",  // a ROM's contents ($readmemh); "" = a RAM
    parameter int AW        = (DEPTH > 1) ? $clog2(DEPTH) : 1
) (
    input  wire logic                   clk,
    /* verilator lint_off UNUSEDSIGNAL */  // a ROM has no write port; re only counts (SYNC 0)
    input  wire logic                   we,
    input  wire logic [AW-1:0]          waddr,
    input  wire logic [WIDTH-1:0]       wdata,
    input  wire logic [READS-1:0]       re,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic [READS*AW-1:0]    raddr,
    output logic      [READS*WIDTH-1:0] rdata
);
`ifndef EATT_MACRO_BLACKBOX
    localparam bit ROM = (INIT_FILE != "");
    // no_rw_check: a word is never read in the cycle it is written (checked below in
    // simulation), so Yosys maps the RAM onto a block RAM as it is, without the bypass
    // registers and multiplexers that would give a same-cycle read the old word (on an ECP5:
    // 31 flip-flops, 39 LUTs and a LUT level after each DP16KD)
    (* no_rw_check *) logic [WIDTH-1:0] mem [DEPTH];

    if (ROM) begin : g_rom
        initial $readmemh(INIT_FILE, mem);
    end else begin : g_ram
        always_ff @(posedge clk) begin
            if (we) mem[waddr] <= wdata;
        end
    end

    for (genvar r = 0; r < READS; r++) begin : g_read
        if (SYNC != 0) begin : g_sync
            always_ff @(posedge clk) begin
                if (re[r]) rdata[r*WIDTH +: WIDTH] <= mem[raddr[r*AW +: AW]];
            end
        end else begin : g_async
            assign rdata[r*WIDTH +: WIDTH] = mem[raddr[r*AW +: AW]];
        end
    end

`ifndef SYNTHESIS
    if (!ROM && SYNC != 0) begin : g_rw_check  // the contract no_rw_check relies on
        for (genvar r = 0; r < READS; r++) begin : g_port
            always @(posedge clk) begin
                if (we === 1'b1 && re[r] === 1'b1 && waddr === raddr[r*AW +: AW]) begin
                    $fatal(1, "%m: word %0d read in the cycle it is written", waddr);
                end
            end
        end
    end
`endif

`ifdef EATT_MEMORY_COUNT
    logic [63:0] reads = '0, writes = '0;  // (a longint is no VPI object in Icarus)
    always @(posedge clk) begin
        if (!ROM && we === 1'b1) writes <= writes + 1;
        reads <= reads + 64'($countones(re));  // the ports reading (an x bit is none)
    end
    integer count_fd;
    final begin  // one line an instance, at the simulation's end, in either simulator
        count_fd = $fopen("memories.txt", "a");
        $fwrite(count_fd, "%m %0d %0d\n", reads, writes);
        $fclose(count_fd);
    end
`endif
`endif
endmodule

`default_nettype wire
