// folded_max_tree: the largest of TERMS signed values among those flagged visible, in a
// balanced tree, for the folded engine's attention unit (folded_attend.sv: the max over a key
// block's visible scores, one value a lane).
//
// Each node keeps {visible, value} of its left child when that is visible and not smaller
// than a visible right one, else of its right child; the values are padded with invisible zeros to the next
// power of two. `any`: some value is visible; `max` is then the largest visible one. Purely
// combinational (continuous assigns: Icarus loops on an always_comb that reads back what it
// writes here).
//
// Testbench: rtl_sim/tb/folded_max_tree/test_folded_max_tree.py.

`default_nettype none

module folded_max_tree #(
    parameter int TERMS = 4,  // values compared
    parameter int W     = 8   // bits of each value, signed
) (
    input  wire logic [TERMS-1:0]   visible,  // value t takes part when visible[t]
    input  wire logic [TERMS*W-1:0] values,   // value t at [t*W +: W]
    output logic                    any,
    output logic      [W-1:0]       max
);
    localparam int L = (TERMS > 1) ? $clog2(TERMS) : 0;  // levels of the tree
    localparam int N = 1 << L;                            // its leaves

    for (genvar lv = 0; lv <= L; lv++) begin : g_max
        logic [(N >> lv)*(W+1)-1:0] m;  // {visible, value} of each node
        for (genvar i = 0; i < (N >> lv); i++) begin : g_node
            if (lv == 0) begin : g_leaf
                if (i < TERMS) begin : g_value
                    assign m[i*(W+1) +: W+1] = {visible[i], values[i*W +: W]};
                end else begin : g_pad
                    assign m[i*(W+1) +: W+1] = '0;
                end
            end else begin : g_pair
                logic [W:0] a, b;
                assign a = g_max[lv-1].m[2*i*(W+1) +: W+1];
                assign b = g_max[lv-1].m[(2*i+1)*(W+1) +: W+1];
                assign m[i*(W+1) +: W+1] =
                    (a[W] && (!b[W] || $signed(a[W-1:0]) >= $signed(b[W-1:0]))) ? a : b;
            end
        end
    end
    assign {any, max} = g_max[L].m;
endmodule

`default_nettype wire
