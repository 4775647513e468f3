// l1_score_row: one E-ATT score, S = -sum_t |q[t] - k[t]| over the LANES features of a head.
//
// The L1 score of Eq. 10 without a multiplier (eatt.quant.golden.l1_scores_int). Per lane
// d = q - k and, with p = (d >= 0),
//
//   -|d| = (d ^ {DW{p}}) + p                (one's complement, then +1)
//
// The xor folds into the LUTs of the adder the term feeds, and p becomes that adder's carry-in
// (a + b + p is one carry chain in Yosys' xc7 mapping): a tree of LANES terms has LANES - 1
// adders for the LANES - 1 carry-ins, so lane 0 keeps an explicit negate (d < 0 ? d : -d).
// The tree is balanced and pairwise: level l + 1 node m adds level l nodes 2m and 2m + 1 (an odd
// node at the end passes up), depth $clog2(LANES); the adder whose right child starts at lane u
// takes lane u's p (every lane but 0 is the first lane of exactly one right child). Each adder
// is a node of the (* keep *) vector `sums`: without it Yosys merges the whole sum into one
// multi-operand $macc and maps it to LUT compressors (measured worse, docs/rtl.md).
//
// Widths: every subtract and adder is exactly as wide as the values it can carry. DIFF_MAX
// gives, per lane, the bound of |q - k| that the generator derives from the actual constant
// weights (the column bounds of Q and K, rtl_sim/generate.py `_eatt_scores`): lane t's subtract
// has signed_bits(DIFF_MAX[t]) bits, a node over lanes [a, b] signed_bits of the sum of its
// terms' bounds (DIFF_MAX[t] + 1 for t > 0, DIFF_MAX[0] for lane 0) and of its carry-ins.
// Every instance of one head has the same parameters, so synthesis elaborates one module per head.
//
// Purely combinational: the caller registers `score` (the alignment and attention tops in
// their score stage, the window unit in its buffer). rtl_sim/generate.py instantiates it per
// (head, query, key) for the default E-ATT datapath with adder_levels 0 (the pipelined trees of
// adder_levels >= 1 and the datapath variants, scores "abs" / "min" and tree "chain", stay
// inline in the generated top); rtl_sim/window.py once per head, DIFF_MAX at the full code
// range (its keys come from memory, without weight bounds).
//
// Testbench: rtl_sim/tb/l1_score_row/test_l1_score_row.py.

`default_nettype none

module l1_score_row #(
    parameter int LANES   = 8,   // features of one head (d_head)
    parameter int IN_W    = 12,  // bits of each q, k lane, signed (golden qk_code_bits)
    parameter int SCORE_W = 16,  // bits of the score, signed (golden score_bits)
    // per lane t, the largest |q[t] - k[t]| (at [t*32 +: 32]): sizes the subtracts and adders
    parameter logic [LANES*32-1:0] DIFF_MAX = {LANES{32'd4095}}
) (
    input  wire logic [LANES*IN_W-1:0] q,      // q[t] at [t*IN_W +: IN_W]
    input  wire logic [LANES*IN_W-1:0] k,      // k[t] at [t*IN_W +: IN_W]
    output logic signed [SCORE_W-1:0]  score   // -sum_t |q[t] - k[t]|
);
    // bits of a signed integer holding every value in [-bound, bound] (golden signed_bits);
    // functions assign to their name, no `return`: Yosys' front end reads them so
    function automatic int signed_bits(input int bound);
        signed_bits = 1;
        for (int n = 1; n < 31; n++) begin
            if ((1 << (n - 1)) <= bound) signed_bits = n + 1;
        end
    endfunction

    // bits of the tree node over lanes [first, last]: its terms' bounds and its carry-ins
    function automatic int node_bits(input int first, input int last);
        int lo;
        lo = 0;
        for (int t = first; t <= last; t++) begin
            lo = lo + int'(DIFF_MAX[t*32 +: 32]) + ((t > 0) ? 1 : 0);
        end
        node_bits = signed_bits((lo > last - first) ? lo : last - first);
    endfunction

    localparam int LEVELS = $clog2(LANES);            // adder levels of the tree
    localparam int TREE_W = node_bits(0, LANES - 1);  // the root, the widest node

    // every node of the tree, sign-extended to TREE_W: level l node m at
    // [(l*LANES + m)*TREE_W +: TREE_W]; level 0 are the terms -|d| - p (lane 0: -|d|), a level
    // has ceil(LANES / 2**l) nodes and its other slots are 0
    /* verilator lint_off UNUSEDSIGNAL */  // each node is read at its own width only
    logic [(LEVELS+1)*LANES*TREE_W-1:0] nodes;
    /* verilator lint_on UNUSEDSIGNAL */
    /* verilator lint_off UNUSEDSIGNAL */  // p[0]: lane 0 has no carry-in
    logic [LANES-1:0] p;  // the carry-ins p = (d >= 0)
    /* verilator lint_on UNUSEDSIGNAL */

    for (genvar t = 0; t < LANES; t++) begin : g_lane
        localparam int DW = signed_bits(int'(DIFF_MAX[t*32 +: 32]));
        /* verilator lint_off UNUSEDSIGNAL */  // a lane reads only the bits its bound needs
        logic signed [IN_W-1:0] q_t, k_t;
        /* verilator lint_on UNUSEDSIGNAL */
        logic signed [DW-1:0]   d, a;  // d = q - k, a = the term

        assign q_t = q[t*IN_W +: IN_W];
        assign k_t = k[t*IN_W +: IN_W];
        assign d   = DW'(q_t) - DW'(k_t);
        if (t == 0) begin : g_negate
            assign a    = d[DW-1] ? d : -d;
            assign p[t] = 1'b0;
        end else begin : g_ones_complement
            assign a    = d ^ {DW{~d[DW-1]}};
            assign p[t] = ~d[DW-1];
        end
        assign nodes[t*TREE_W +: TREE_W] = TREE_W'(a);
    end

    for (genvar l = 1; l <= LEVELS; l++) begin : g_level
        localparam int SPAN  = 1 << l;  // lanes under a node of this level
        localparam int NODES = (LANES + SPAN - 1) / SPAN;
        for (genvar m = 0; m < LANES; m++) begin : g_node
            localparam int AT    = (l * LANES + m) * TREE_W;             // this node
            localparam int LEFT  = ((l - 1) * LANES + 2 * m) * TREE_W;   // its children
            localparam int RIGHT = LEFT + TREE_W;
            localparam int FIRST = m * SPAN;                             // its lanes
            localparam int LAST  = (FIRST + SPAN - 1 < LANES) ? FIRST + SPAN - 1 : LANES - 1;
            localparam int U     = FIRST + SPAN / 2;  // first lane of the right child
            if (m >= NODES) begin : g_none
                assign nodes[AT +: TREE_W] = '0;
            end else if (U >= LANES) begin : g_pass  // no right child: the left one passes up
                assign nodes[AT +: TREE_W] = nodes[LEFT +: TREE_W];
            end else begin : g_add  // left + right + the right child's first carry-in
                localparam int W = node_bits(FIRST, LAST);
                (* keep *) logic signed [W-1:0] sum;
                assign sum = W'($signed(nodes[LEFT +: TREE_W])) + W'($signed(nodes[RIGHT +: TREE_W]))
                           + W'($signed({1'b0, p[U]}));
                assign nodes[AT +: TREE_W] = TREE_W'(sum);
            end
        end
    end

    assign score = SCORE_W'($signed(nodes[LEVELS*LANES*TREE_W +: TREE_W]));
endmodule

`default_nettype wire
