// folded_max_tree: the largest of TERMS signed values among those flagged visible, in a
// balanced tree, optionally pipelined, for the folded engine's attention unit
// (folded_attend.sv: the max over a key block's visible scores, one value a lane).
//
// Each node keeps {visible, value} of its left child when that is visible and not smaller
// than a visible right one, else of its right child; the values are padded with invisible
// zeros to the next power of two (L = ceil(log2 TERMS) levels). `any`: some value is visible;
// `max` is then the largest visible one.
//
// LEVELS = 0: purely combinational (continuous assigns: Icarus loops on an always_comb that
// reads back what it writes here). LEVELS = N >= 1 (the build's adder_levels): a register
// after every N levels of compares and after the last, so {any, max} follow the inputs by
// STAGES = ceil(L / N) cycles (none for one term: nothing is compared).
//
// Testbench: rtl_sim/tb/folded_max_tree/test_folded_max_tree.py.

`default_nettype none

module folded_max_tree #(
    parameter int TERMS  = 4,  // values compared
    parameter int W      = 8,  // bits of each value, signed
    parameter int LEVELS = 0,  // 0: combinational; N: a register after every N compare levels
    // derived (not set by the caller)
    parameter int L      = (TERMS > 1) ? $clog2(TERMS) : 0,  // levels of the tree
    /* verilator lint_off UNUSEDPARAM */  // its latency, for the reader and the caller
    parameter int STAGES = (LEVELS > 0) ? (L + LEVELS - 1) / LEVELS : 0
    /* verilator lint_on UNUSEDPARAM */
) (
    /* verilator lint_off UNUSEDSIGNAL */  // LEVELS = 0 reads no clock
    input  wire logic               clk,
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic [TERMS-1:0]   visible,  // value t takes part when visible[t]
    input  wire logic [TERMS*W-1:0] values,   // value t at [t*W +: W]
    output logic                    any,
    output logic      [W-1:0]       max
);
    localparam int N = 1 << L;  // its leaves

    // level lv: its 2^(L-lv) nodes {visible, value}; d before its register
    for (genvar lv = 0; lv <= L; lv++) begin : g_max
        localparam bit CUT = (LEVELS > 0) && lv > 0 && (lv % LEVELS == 0 || lv == L);
        logic [(N >> lv)*(W+1)-1:0] d, m;
        for (genvar i = 0; i < (N >> lv); i++) begin : g_node
            if (lv == 0) begin : g_leaf
                if (i < TERMS) begin : g_value
                    assign d[i*(W+1) +: W+1] = {visible[i], values[i*W +: W]};
                end else begin : g_pad
                    assign d[i*(W+1) +: W+1] = '0;
                end
            end else begin : g_pair
                logic [W:0] a, b;
                assign a = g_max[lv-1].m[2*i*(W+1) +: W+1];
                assign b = g_max[lv-1].m[(2*i+1)*(W+1) +: W+1];
                assign d[i*(W+1) +: W+1] =
                    (a[W] && (!b[W] || $signed(a[W-1:0]) >= $signed(b[W-1:0]))) ? a : b;
            end
        end
        if (CUT) begin : g_reg
            always_ff @(posedge clk) m <= d;
        end else begin : g_wire
            assign m = d;
        end
    end
    assign {any, max} = g_max[L].m;
endmodule

`default_nettype wire
