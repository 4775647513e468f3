"""RTL generation: a core config + integer weights -> SystemVerilog + metadata.json.

``generate_rtl(cfg, weights, out_dir, level="alignment" | "attention")`` writes a directory that a
simulator or a synthesizer can use on its own ("An RTL directory", docs/rtl.md):

    metadata.json          config, level, interface, latency, formats, ``sources`` (top first)
    <kind>_<level>.sv      generated top: the datapath with the weights as constants
    ap_pipe_ctrl.sv        hand-written block-level handshake (copied from rtl_sim/rtl/)
    l1_score_row.sv        hand-written E-ATT score -sum |q - k| of one (head, query, key)
                           (the default E-ATT datapath with adder_levels 0)
    recip_normalize.sv     hand-written O = N / E with the reciprocal table (attention level)

The hand-written leaves (rtl_sim/rtl/, docs/rtl.md "Hierarchy") hold the arithmetic every config
shares; the generated top holds what is specific to the config and the weights (the ROMs, the
constants, the bounds and widths passed as the leaves' parameters) and the register stages.
    weights.npz            the integer weights (the golden model needs them to check the RTL)

The arithmetic is the golden model's (eatt.quant.golden.GoldenCore), bit for bit. Alignment
(``GoldenCore.alignment``, scores out):

    E-ATT  xb = x > tau_int                      qa[i][j] = sum_d (xb[i][d] ? W_Q[d][j] : 0)
    dot                                          qa[i][j] = sum_d x[i][d] * W_Q[d][j]
           q = qa >>> q_shift  (floor)  (K likewise from y and W_K)
    E-ATT  s[h][i][j] = -sum_t |q[i][h*dh+t] - k[j][h*dh+t]|
    dot    s[h][i][j] =  sum_t  q[i][h*dh+t] * k[j][h*dh+t]

Attention (``GoldenCore.forward``, the whole core, outputs z): the same Q/K/scores, and

    v = (y @ W_V) >>> v_shift
    e[h][i][j] = EXP[(max_j s - s) >> exp_shift]          (case-statement ROM, 0 past the table)
    E = sum_j e,  N[t] = sum_j e_j v[j][h*dh+t]
    n = leading one of E, R = RECIP[the recip_index_bits bits below it]  (case-statement ROM)
    o = clamp((N * R + 2**(recip_frac+n-1)) >>> (recip_frac + n))  into v_bits
    z = (concat_h(o) @ W_O) >>> out_shift

Widths come from eatt.quant.golden.Formats (``alignment_widths``, ``attention_widths``). Every
expression is evaluated at a width that holds its exact value (all operands signed, sized
explicitly), so nothing wraps. The weights are constants: E-ATT's Q/K projection is
distributed arithmetic (per column, tables of the subset sums of up to 6 weights indexed by the
binarized inputs, then added; no multiplier), its scores a subtract and a one's-complement
negate folded into the adder tree, every width from the bounds of the actual weights
(EATT_DATAPATH, docs/rtl.md "E-ATT datapath"); constant products (dot's Q/K, both cores' V and
W_O) are left to synthesis; the variable products (dot scores, e * V, N * R) are multipliers.

Pipelines (II 1, ap_pipe_ctrl): alignment 2 register stages (Q/K, scores: latency 2);
attention 6 (Q/K/V, scores, exp, sum and numerator, normalized output, W_O: latency 6).
``adder_levels=N >= 1`` (_Pipe) cuts the adder trees of the projections, the scores, the sum and
numerator and W_O so that at most N adder levels lie between two registers: a segment whose
deepest tree has D levels gains ceil(D / N) - 1 register stages (docs/rtl.md, "Pipelining for a
clock"); 0 is the fixed pipeline above, byte for byte.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from eatt.config import CoreConfig, atomic_write_text
from eatt.outdir import OutputError, check_output_dir, replaced_dir
from eatt.quant.golden import (
    CoreWeights,
    Formats,
    derive_formats,
    exp_table,
    recip_table,
    signed_bits,
)
from eatt.units import unit_for

RTL_DIR = Path(__file__).parent / "rtl"
CTRL_FILE = "ap_pipe_ctrl.sv"
LEVELS = ("alignment", "attention")
#: register stages of the generated alignment datapath (ap_start accepted -> ap_done)
ALIGNMENT_LATENCY = 2


def _lit(value: int, width: int) -> str:
    """A signed SystemVerilog literal of the given width (the value must fit)."""
    value = int(value)
    if not -(2 ** (width - 1)) <= value < 2 ** (width - 1):
        raise AssertionError(f"literal {value} does not fit {width} signed bits")
    return f"{width}'sd{value}" if value >= 0 else f"-{width}'sd{-value}"


def alignment_widths(cfg: CoreConfig, formats: Formats | None = None) -> dict[str, int]:
    """Bit widths of the alignment datapath: read from the golden model's Formats."""
    f = formats or derive_formats(cfg)
    return {
        "in_bits": f.in_bits,
        "acc_bits": f.q_acc_bits,  # |Q| before the shift <= q_acc_bound
        "q_shift": f.q_shift,
        "qk_bits": f.qk_code_bits,  # what the arithmetic shift leaves (<= cfg.qk_bits)
        "score_bits": f.score_bits,
    }


def alignment_interface(cfg: CoreConfig) -> dict:
    """The port list of the alignment top (also written to metadata.json)."""
    w = alignment_widths(cfg)
    return {
        "protocol": "ap_ctrl_hs",
        "clock": "ap_clk",
        "reset": {"name": "ap_rst", "active": "high", "kind": "synchronous"},
        "control": ["ap_start", "ap_done", "ap_idle", "ap_ready"],
        "inputs": {
            "x": {
                "shape": [cfg.len_q, cfg.dim],
                "element_bits": cfg.in_bits,
                "signed": True,
                "width": cfg.len_q * cfg.dim * cfg.in_bits,
                "packing": "element (i, d) at bits [(i*dim + d)*in_bits +: in_bits]",
            },
            "y": {
                "shape": [cfg.len_k, cfg.dim],
                "element_bits": cfg.in_bits,
                "signed": True,
                "width": cfg.len_k * cfg.dim * cfg.in_bits,
                "packing": "element (j, d) at bits [(j*dim + d)*in_bits +: in_bits]",
            },
        },
        "outputs": {
            "s": {
                "shape": [cfg.heads, cfg.len_q, cfg.len_k],
                "element_bits": w["score_bits"],
                "signed": True,
                "width": cfg.heads * cfg.len_q * cfg.len_k * w["score_bits"],
                "packing": (
                    "element (h, i, j) at bits [((h*len_q + i)*len_k + j)*score_bits +: score_bits]"
                ),
                "valid": "s_vld",
            }
        },
        "widths": w,
    }


def attention_widths(cfg: CoreConfig, formats: Formats | None = None) -> dict[str, int]:
    """Bit widths of the whole-core datapath (attention level): read from the golden Formats."""
    f = formats or derive_formats(cfg)
    w = alignment_widths(cfg, f)
    w.update(
        v_acc_bits=f.v_acc_bits,
        v_shift=f.v_shift,
        v_bits=f.v_code_bits,  # |V| <= 2**(v_bits-1) (<= cfg.v_bits)
        diff_bits=f.zdiff_bits,  # max_j S - S in [0, 2 * score_bound], unsigned
        exp_shift=f.exp_shift,
        exp_index_bits=f.exp_index_bits,
        exp_bits=f.exp_bits,
        total_bits=f.esum_bits,  # E <= len_k * 2**exp_frac
        numer_bits=f.numer_bits,
        recip_index_bits=f.recip_index_bits,
        recip_bits=f.recip_bits,  # RECIP[i] <= 2**recip_frac, unsigned
        prod_bits=f.prod_bits,  # N * R + 2**(recip_frac + n - 1)
        attn_bits=f.attn_bits,  # O is clamped into cfg.v_bits (golden weighted_values)
        out_acc_bits=f.out_acc_bits,
        out_shift=f.out_shift,
        out_bits=f.out_code_bits,
    )
    return w


def mask_bits(cfg: CoreConfig) -> dict[str, int]:
    """Width of each mask input port the core takes (golden MASK_INPUTS): length in
    [1, len_k], offset in [0, len_k - 1], unsigned (the QONNX file's UINT widths)."""
    bits = {"length": cfg.len_k.bit_length(), "offset": max(1, (cfg.len_k - 1).bit_length())}
    return {m: bits[m] for m in cfg.mask_inputs}


def attention_interface(cfg: CoreConfig) -> dict:
    """The port list of the attention top (also written to metadata.json)."""
    iface = alignment_interface(cfg)
    for name, bits in mask_bits(cfg).items():
        iface["inputs"][name] = {
            "shape": [],
            "element_bits": bits,
            "signed": False,
            "width": bits,
            "packing": "one unsigned integer per vector, sampled with x and y",
        }
    w = attention_widths(cfg)
    zb = w["out_bits"]
    iface["outputs"] = {
        "z": {
            "shape": [cfg.len_q, cfg.dim],
            "element_bits": zb,
            "signed": True,
            "width": cfg.len_q * cfg.dim * zb,
            "packing": "element (i, d) at bits [(i*dim + d)*out_bits +: out_bits]",
            "valid": "z_vld",
        }
    }
    iface["widths"] = w
    return iface


class _Writer:
    """Collects lines of SystemVerilog; small helpers for the repeated shapes."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str = "") -> None:
        self.lines.append(line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def rom(self, name: str, index_bits: int, value_bits: int, table: np.ndarray) -> None:
        """A constant table as a function with a case statement (0 outside the entries)."""
        self(f"    function automatic logic [{value_bits - 1}:0] {name}(")
        self(f"        input logic [{index_bits - 1}:0] idx);")
        self("        case (idx)")
        for i, value in enumerate(table.tolist()):
            if i >= 2**index_bits:
                break
            if value:
                self(f"            {index_bits}'d{i}: {name} = {value_bits}'d{int(value)};")
        self(f"            default: {name} = {value_bits}'d0;")
        self("        endcase")
        self("    endfunction")


def _header(out: _Writer, cfg: CoreConfig, top: str, what: str, widths: dict, pipe: _Pipe):
    latency = pipe.latency
    out(f"// {top}: {what} of one {cfg.kind!r} attention core.")
    out("// GENERATED by eatt.rtl_sim.generate from the config and integer weights: do not edit.")
    ref = "alignment(x, y)" if what.startswith("alignment") else "forward(x, y)"
    out(f"// Bit-exact with eatt.quant.golden.GoldenCore(cfg, weights).{ref}.")
    out(f"// config: {json.dumps(cfg.to_dict(), sort_keys=True)}")
    out(f"// widths: {json.dumps(widths, sort_keys=True)}")
    if pipe.levels:
        n = pipe.levels
        out(f"// adder_levels {n}: at most {n} adder levels between registers in the adder trees;")
        out(f"// register stages added per segment: {json.dumps(pipe.segments)}")
    out(f"// Interface: see docs/rtl.md and metadata.json (ap_ctrl_hs, II = 1, latency {latency}).")
    out("")
    out("`default_nettype none")
    out("")


def _ports(
    out: _Writer,
    cfg: CoreConfig,
    top: str,
    comment: list[str],
    port: str,
    width: int,
    masks: dict[str, int] | None = None,
):
    lq, lk, dim, ib = cfg.len_q, cfg.len_k, cfg.dim, cfg.in_bits
    out(f"module {top} (")
    out("    input  wire logic ap_clk,")
    out("    input  wire logic ap_rst,  // synchronous, active high")
    out("    input  wire logic ap_start,")
    out("    output logic      ap_done,")
    out("    output logic      ap_idle,")
    out("    output logic      ap_ready,")
    out(f"    // X: {lq} x {dim} signed {ib}-bit, element (i, d) at [(i*{dim} + d)*{ib} +: {ib}]")
    out(f"    input  wire logic [{lq * dim * ib - 1}:0] x,")
    out(f"    // Y: {lk} x {dim} signed {ib}-bit, element (j, d) at [(j*{dim} + d)*{ib} +: {ib}]")
    out(f"    input  wire logic [{lk * dim * ib - 1}:0] y,")
    what = {
        "length": f"valid keys: key j gets weight only if j < length (1 .. {lk})",
        "offset": f"causal offset: query i sees keys j <= i + offset (0 .. {lk - 1})",
    }
    for name, bits in (masks or {}).items():
        out(f"    // {what[name]}")
        out(f"    input  wire logic [{bits - 1}:0] {name},")
    for line in comment:
        out(f"    // {line}")
    out(f"    output logic [{width - 1}:0] {port},")
    out(f"    output logic      {port}_vld  // = ap_done: {port} holds a new result in this cycle")
    out(");")


def _control(out: _Writer, latency: int, port: str) -> None:
    out(f"    logic [{latency - 1}:0] stage_en;")
    out("")
    out(f"    ap_pipe_ctrl #(.LATENCY({latency})) u_ctrl (")
    out("        .ap_clk(ap_clk), .ap_rst(ap_rst), .ap_start(ap_start), .ap_done(ap_done),")
    out("        .ap_idle(ap_idle), .ap_ready(ap_ready), .stage_en(stage_en)")
    out("    );")
    out(f"    assign {port}_vld = ap_done;")
    out("")


def _const_matmul(out, pipe, dst, src, rows, mat, acc_bits, wname):
    """dst[i][j] = sum_d src[i][d] * mat[d][j] with constant weights (zero weights skipped)."""
    out(f"    // {wname}")
    for i in range(rows):
        for j in range(mat.shape[1]):
            terms = []
            for d in range(mat.shape[0]):
                wv = int(mat[d, j])
                if wv != 0:
                    terms.append(f"{acc_bits}'({src}[{i}][{d}]) * {_lit(wv, acc_bits)}")
            if pipe.levels and terms:  # a balanced tree of the products (not cut inside)
                leaves = [(t, 0, 0, 0) for t in terms]
                root = pipe.tree(f"{dst}_{i}_{j}", leaves, True, acc_bits)
                pipe.result(f"{dst}[{i}][{j}]", acc_bits, f"{dst}_{i}_{j}", root, acc_bits)
                continue
            rhs = " + ".join(terms) if terms else _lit(0, acc_bits)
            out(f"    assign {dst}[{i}][{j}] = {rhs};")


# -- E-ATT alignment datapath ----------------------------------------------------------------------
#: how the E-ATT Q/K projection and L1 scores are built (metadata.json "eatt_datapath").
#: Every choice is bit-exact; they differ in resources. Measured with Yosys synth_xilinx at
#: alignment 4x8 (docs/rtl.md, "E-ATT datapath"): the defaults are the cheapest in LUTs.
EATT_DATAPATH = {
    # "rom": distributed arithmetic: per column, the binarized inputs of up to rom_inputs rows
    #        (nonzero weights only) index a constant table of their subset sums (one LUT per
    #        output bit up to 6 inputs), and the chunk results are added;
    # "select": one constant-or-zero mux and one adder input per weight
    "projection": "rom",
    "rom_inputs": 6,
    # "xor": -|d| = (d ^ {n{d >= 0}}) + (d >= 0): the xor folds into the next adder's LUTs and
    #        the +1 is that adder's carry-in; "abs": subtract, conditional negate;
    #        "min": -sum|q - k| = 2 sum min(q, k) - sum q - sum k, row sums once per query/key
    "scores": "xor",
    # "balanced": adder trees of depth ceil(log2(terms)); "chain": one term after the other
    "tree": "balanced",
    # "weights": every width from the bounds of the actual constant weights (per column);
    # "config": the worst case over every weight in range (Formats), as the ports are sized
    "widths": "weights",
}
_DATAPATH_CHOICES = {
    "projection": ("rom", "select"),
    "scores": ("xor", "abs", "min"),
    "tree": ("balanced", "chain"),
    "widths": ("weights", "config"),
}


def _eatt_datapath(options: dict | None) -> dict:
    opts = {**EATT_DATAPATH, **(options or {})}
    for key, value in opts.items():
        if key == "rom_inputs":
            if not isinstance(value, int) or not 1 <= value <= 12:
                raise ValueError(f"eatt_datapath: rom_inputs must be 1..12, got {value!r}")
        elif key not in _DATAPATH_CHOICES:
            raise ValueError(f"eatt_datapath: unknown key {key!r}")
        elif value not in _DATAPATH_CHOICES[key]:
            raise ValueError(f"eatt_datapath: {key} must be one of {_DATAPATH_CHOICES[key]}")
    return opts


def _bits(lo: int, hi: int) -> int:
    """Signed bits holding every integer in [lo, hi]."""
    return signed_bits(max(-lo, hi, 0))


def _sum_tree(
    terms: list[tuple[str, int, int]], balanced: bool, width: int | None = None
) -> tuple[str, int, int]:
    """Sum of signed (expression, lo, hi) terms; every partial sum is sized to its own bound
    (or to a fixed width), so the adders are only as wide as the values they can carry."""
    if len(terms) == 1:
        return terms[0]
    if balanced:
        half = (len(terms) + 1) // 2
        left, right = _sum_tree(terms[:half], True, width), _sum_tree(terms[half:], True, width)
    else:
        left, right = _sum_tree(terms[:-1], False, width), terms[-1]
    lo, hi = left[1] + right[1], left[2] + right[2]
    n = width or _bits(lo, hi)
    # signed operands, each sign-extended to n bits: the add happens at n bits
    return f"{n}'({left[0]}) + {n}'({right[0]})", lo, hi


def _column_bounds(mat: np.ndarray, c: int) -> tuple[int, int]:
    col = mat[:, c].astype(np.int64)
    return int(col[col < 0].sum()), int(col[col > 0].sum())


def _eatt_projection(out, pipe, opts, src, dst, rows, mat, acc_bits, fname):
    """dst[i][c] = sum_d (src[i][d] ? mat[d][c] : 0) with binary src; returns the (lo, hi)
    bound of every column (from the weights, or the worst case with widths='config')."""
    dim = mat.shape[0]
    full = 2 ** (acc_bits - 1) - 1
    fixed = acc_bits if opts["widths"] == "config" else None  # the old full-width adders
    bounds = []
    for c in range(mat.shape[1]):
        lo, hi = _column_bounds(mat, c)
        if opts["widths"] == "config":
            lo, hi = -full, full
        bounds.append((lo, hi))
    if opts["projection"] == "select":
        out(f"    // one constant-or-zero mux and one adder input per nonzero weight ({fname})")
        for c in range(mat.shape[1]):
            lo, hi = bounds[c]
            for i in range(rows):
                terms = []
                for d in range(dim):
                    w = int(mat[d, c])
                    if w:
                        n = acc_bits if opts["widths"] == "config" else _bits(lo, hi)
                        terms.append(
                            (
                                f"({src}[{i}][{d}] ? {_lit(w, n)} : {_lit(0, n)})",
                                min(w, 0),
                                max(w, 0),
                            )
                        )
                if pipe.levels and terms:
                    _pipe_sum(pipe, f"{dst}[{i}][{c}]", acc_bits, f"{dst}_{i}_{c}", terms, opts)
                    continue
                rhs = _sum_tree(terms, opts["tree"] == "balanced", fixed)[0] if terms else "0"
                out(f"    assign {dst}[{i}][{c}] = {acc_bits}'({rhs});")
        return bounds
    k = opts["rom_inputs"]
    out(f"    // distributed arithmetic ({fname}): per column, the binarized inputs of up to {k}")
    out("    // rows with a nonzero weight index a table of the subset sums of those weights")
    out("    // (one LUT per output bit for <= 6 inputs); the chunk results are added")
    for c in range(mat.shape[1]):
        nz = [d for d in range(dim) if mat[d, c] != 0]
        nchunks = -(-len(nz) // k) if nz else 0
        chunks = [nz[g * len(nz) // nchunks : (g + 1) * len(nz) // nchunks] for g in range(nchunks)]
        calls = []
        for g, rows_g in enumerate(chunks):
            ws = [int(mat[d, c]) for d in rows_g]
            glo, ghi = sum(w for w in ws if w < 0), sum(w for w in ws if w > 0)
            n = acc_bits if opts["widths"] == "config" else _bits(glo, ghi)
            name = f"{fname.lower().replace('_', '')}_c{c}_g{g}"
            nb = len(rows_g)
            out(f"    // {fname} column {c}, rows {rows_g} (bit b of idx = row {rows_g}[b])")
            out(f"    function automatic logic signed [{n - 1}:0] {name}(")
            out(f"        input logic [{nb - 1}:0] idx);")
            out("        case (idx)")
            for m in range(1, 2**nb):
                v = sum(ws[b] for b in range(nb) if m >> b & 1)
                if v:
                    out(f"            {nb}'d{m}: {name} = {_lit(v, n)};")
            out(f"            default: {name} = {_lit(0, n)};")
            out("        endcase")
            out("    endfunction")
            calls.append((name, rows_g, glo, ghi))
        for i in range(rows):
            terms = []
            for name, rows_g, glo, ghi in calls:
                idx = ", ".join(f"{src}[{i}][{d}]" for d in reversed(rows_g))
                terms.append((f"{name}({{{idx}}})", glo, ghi))
            if pipe.levels and terms:
                _pipe_sum(pipe, f"{dst}[{i}][{c}]", acc_bits, f"{dst}_{i}_{c}", terms, opts)
                continue
            rhs = _sum_tree(terms, opts["tree"] == "balanced", fixed)[0] if terms else "0"
            out(f"    assign {dst}[{i}][{c}] = {acc_bits}'({rhs});")
    return bounds


def _pipe_sum(pipe, lhs, acc_bits, name, terms, opts):
    """A projection sum of ROM/mux leaves (no adder inside) through the pipelined tree."""
    fixed = acc_bits if opts["widths"] == "config" else None
    leaves = [(expr, lo, hi, 0) for expr, lo, hi in terms]
    root = pipe.tree(name, leaves, opts["tree"] == "balanced", fixed)
    pipe.result(lhs, acc_bits, name, root, fixed)


def _eatt_scores(out, pipe, cfg, opts, qbounds, kbounds, qb, sb):
    """sc[h][i][j] = -sum_t |q[i][h*dh+t] - k[j][h*dh+t]| (q, k in qb bits; columns bounded by
    qbounds, kbounds); every width from those bounds."""
    lq, lk, heads, dh = cfg.len_q, cfg.len_k, cfg.heads, cfg.d_head
    balanced = opts["tree"] == "balanced"
    out(f"    logic signed [{sb - 1}:0] sc [{heads}][{lq}][{lk}];")
    if opts["scores"] == "min":
        out("    // ---- scores (Eq. 10) with shared row sums: |a - b| = a + b - 2 min(a, b), so")
        out("    //      S = 2 sum_t min(q, k) - sum_t q - sum_t k; sum_t q once per query")
        for h in range(heads):
            for name, rows, b in (("q", lq, qbounds), ("k", lk, kbounds)):
                cols = range(h * dh, (h + 1) * dh)
                lo, hi = sum(b[c][0] for c in cols), sum(b[c][1] for c in cols)
                n = _bits(lo, hi)
                out(f"    logic signed [{n - 1}:0] {name}sum{h} [{rows}];  // in [{lo}, {hi}]")
                for i in range(rows):
                    terms = [(f"{name}[{i}][{c}]", b[c][0], b[c][1]) for c in cols]
                    out(f"    assign {name}sum{h}[{i}] = {n}'({_sum_tree(terms, balanced)[0]});")
        for h in range(heads):
            cols = range(h * dh, (h + 1) * dh)
            qlo, qhi = sum(qbounds[c][0] for c in cols), sum(qbounds[c][1] for c in cols)
            klo, khi = sum(kbounds[c][0] for c in cols), sum(kbounds[c][1] for c in cols)
            for i in range(lq):
                for j in range(lk):
                    terms = []
                    for c in cols:
                        (a_lo, a_hi), (b_lo, b_hi) = qbounds[c], kbounds[c]
                        dlo, dhi = a_lo - b_hi, a_hi - b_lo
                        n, mlo, mhi = _bits(dlo, dhi), min(a_lo, b_lo), min(a_hi, b_hi)
                        d, m = f"diff_q{i}_k{j}_c{c}", f"min_q{i}_k{j}_c{c}"
                        out("    /* verilator lint_off UNUSEDSIGNAL */  // only the sign is used")
                        out(f"    logic signed [{n - 1}:0] {d};  // q - k in [{dlo}, {dhi}]")
                        out("    /* verilator lint_on UNUSEDSIGNAL */")
                        mb = _bits(mlo, mhi)
                        out(f"    logic signed [{mb - 1}:0] {m};  // min(q, k)")
                        out(f"    assign {d} = {n}'(q[{i}][{c}]) - {n}'(k[{j}][{c}]);")
                        out(f"    assign {m} = {mb}'({d}[{n - 1}] ? q[{i}][{c}] : k[{j}][{c}]);")
                        terms.append((m, mlo, mhi))
                    m, mlo, mhi = _sum_tree(terms, balanced)
                    lo, hi = 2 * mlo - qhi - khi, 2 * mhi - qlo - klo
                    n = _bits(lo, hi)
                    out(
                        f"    assign sc[{h}][{i}][{j}] = {sb}'({n}'({n}'({n}'({m}) <<< 1)"
                        f" - {n}'(qsum{h}[{i}]) - {n}'(ksum{h}[{j}])));"
                    )
        out("")
        return
    xor = opts["scores"] == "xor"
    if _l1_leaf(cfg, opts, pipe.levels):
        _l1_score_rows(out, cfg, qbounds, kbounds, qb, sb)
        return
    if xor:
        out("    // ---- scores (Eq. 10): S = -sum_t |q - k|. With d = q - k and p = (d >= 0),")
        out("    //      -|d| = (d ^ {n{p}}) + p (one's complement): the xor folds into the LUTs")
        out("    //      of the adder it feeds, and each p is that adder's carry-in (a + b + p is")
        out("    //      one carry chain); a tree of T terms has T - 1 adders, so the first term")
        out("    //      keeps the negate. (* keep *) stops Yosys from merging the tree into one")
        out("    //      multi-operand sum, which it would map to LUT compressors.")
        if pipe.levels:
            out("    //      Pipelined (adder_levels): the first term is min(q - k, k - q), two")
            out("    //      subtracts side by side, so every leaf is one adder level deep.")
    elif pipe.levels:
        out("    // ---- scores (Eq. 10): S = -sum_t |q - k|, -|q - k| = min(q - k, k - q)")
    else:
        out("    // ---- scores (Eq. 10): S = -sum_t |q - k| (subtract, conditional negate)")
    for h in range(heads):
        for i in range(lq):
            for j in range(lk):
                terms, bits = [], []
                for c in range(h * dh, (h + 1) * dh):
                    (a_lo, a_hi), (b_lo, b_hi) = qbounds[c], kbounds[c]
                    dlo, dhi = a_lo - b_hi, a_hi - b_lo
                    n = _bits(dlo, dhi)
                    dmax = max(-dlo, dhi)
                    d, a = f"diff_q{i}_k{j}_c{c}", f"term_q{i}_k{j}_c{c}"
                    out(f"    logic signed [{n - 1}:0] {d}, {a};  // d = q - k in [{dlo}, {dhi}]")
                    out(f"    assign {d} = {n}'(q[{i}][{c}]) - {n}'(k[{j}][{c}]);")
                    if xor and terms:  # a = -|d| - p
                        out(f"    assign {a} = $signed({d} ^ {{{n}{{~{d}[{n - 1}]}}}});")
                        terms.append((a, -dmax - 1, 0))
                        bits.append(f"$signed({{1'b0, ~{d}[{n - 1}]}})")
                    elif pipe.levels:  # a = -|d| = min(q - k, k - q): one adder level
                        e = f"rdiff_q{i}_k{j}_c{c}"
                        out(f"    logic signed [{n - 1}:0] {e};  // k - q")
                        out(f"    assign {e} = {n}'(k[{j}][{c}]) - {n}'(q[{i}][{c}]);")
                        out(f"    assign {a} = {d}[{n - 1}] ? {d} : {e};")
                        terms.append((a, -dmax, 0))
                    else:  # a = -|d|
                        out(f"    assign {a} = {d}[{n - 1}] ? {d} : -{d};")
                        terms.append((a, -dmax, 0))
                if pipe.levels:  # every leaf is one subtract deep
                    name = f"score_h{h}_q{i}_k{j}"
                    root = pipe.tree(
                        name,
                        [(*t, 1) for t in terms],
                        balanced,
                        bits=[(b, 0, 1, 1) for b in bits] if xor else None,
                    )
                    pipe.result(f"sc[{h}][{i}][{j}]", sb, name, root)
                    continue
                if xor:
                    total = _carry_in_tree(out, f"score_h{h}_q{i}_k{j}", terms, bits, balanced)[0]
                else:
                    total = _sum_tree(terms, balanced)[0]
                out(f"    assign sc[{h}][{i}][{j}] = {sb}'({total});")
    out("")


L1_SCORE_ROW_FILE = "l1_score_row.sv"


def _l1_leaf(cfg: CoreConfig, opts: dict, levels: int) -> bool:
    """The E-ATT scores come from the l1_score_row leaf: the default datapath (xor terms, a
    balanced tree) with adder_levels 0; pipelined trees and the variants stay inline."""
    return (
        cfg.kind == "eatt" and opts["scores"] == "xor" and opts["tree"] == "balanced" and not levels
    )


def l1_score_row_parameters(qbounds, kbounds, qk_bits: int, score_bits: int) -> dict:
    """The l1_score_row parameters of one head: qbounds[t], kbounds[t] = (lo, hi) of lane t's
    q and k (from the weights' column bounds). DIFF_MAX (a SystemVerilog literal, lane 0 last)
    holds the bound of |q - k| per lane; SCORE_W is the root adder's width (the bounds' sum),
    at most score_bits: above it the score's bits are sign copies, which the top sees."""
    bounds = [
        max(b_hi - a_lo, a_hi - b_lo, 0)
        for (a_lo, a_hi), (b_lo, b_hi) in zip(qbounds, kbounds, strict=True)
    ]
    lanes = len(bounds)
    root = _bits(-(sum(bounds) + lanes - 1), lanes - 1)  # l1_score_row.sv node_bits(0, LANES - 1)
    return {
        "LANES": lanes,
        "IN_W": qk_bits,
        "SCORE_W": min(root, score_bits),
        "DIFF_MAX": "{" + ", ".join(f"32'd{b}" for b in reversed(bounds)) + "}",
        "diff_max": bounds,
    }


def _l1_score_rows(out, cfg, qbounds, kbounds, qb, sb):
    """sc[h][i][j] by one l1_score_row leaf (rtl_sim/rtl/l1_score_row.sv) per head, query and
    key: the default E-ATT scores (xor terms with carry-ins, balanced tree, adder_levels 0).
    Only the per-lane bounds of |q - k| (from the weights' column bounds) are config-specific."""
    lq, lk, heads, dh = cfg.len_q, cfg.len_k, cfg.heads, cfg.d_head
    out("    // ---- scores (Eq. 10): S = -sum_t |q - k| per head, query and key, l1_score_row.sv")
    out(
        "    //      (one's-complement terms, carry-in adders, a balanced tree); DIFF_MAX: per lane"
    )
    out("    //      the bound of |q - k| from the weights' column bounds, which sizes its adders")
    out(f"    logic [{dh * qb - 1}:0] q_row [{heads}][{lq}];  // lane t: q[i][h*{dh} + t]")
    out(f"    logic [{dh * qb - 1}:0] k_row [{heads}][{lk}];")
    for h in range(heads):
        cols = range(h * dh, (h + 1) * dh)
        for name, rows in (("q", lq), ("k", lk)):
            for i in range(rows):
                lanes = ", ".join(f"{name}[{i}][{c}]" for c in reversed(cols))
                out(f"    assign {name}_row[{h}][{i}] = {{{lanes}}};")
        p = l1_score_row_parameters([qbounds[c] for c in cols], [kbounds[c] for c in cols], qb, sb)
        sw = p["SCORE_W"]
        out(f"    logic signed [{sw - 1}:0] score_h{h} [{lq}][{lk}];  // sign-extended into sc")
        out(f"    localparam logic [{dh * 32 - 1}:0] DIFF_MAX_H{h} = {p['DIFF_MAX']};")
        for i, j in np.ndindex(lq, lk):
            out(
                f"    l1_score_row #(.LANES({dh}), .IN_W({qb}), .SCORE_W({sw}), "
                f".DIFF_MAX(DIFF_MAX_H{h}))"
            )
            out(
                f"        u_score_h{h}_q{i}_k{j} (.q(q_row[{h}][{i}]), .k(k_row[{h}][{j}]), "
                f".score(score_h{h}[{i}][{j}]));"
            )
            out(f"    assign sc[{h}][{i}][{j}] = {sb}'(score_h{h}[{i}][{j}]);")
    out("")


def _carry_in_tree(out, name, terms, bits, balanced):
    """Named adders L + R + p over (expression, lo, hi) terms, one 1-bit p per adder
    (len(bits) == len(terms) - 1), each kept as its own carry chain; returns (name, lo, hi)."""
    if len(terms) == 1:
        return terms[0]
    half = (len(terms) + 1) // 2 if balanced else len(terms) - 1
    left = _carry_in_tree(out, f"{name}l", terms[:half], bits[: half - 1], balanced)
    right = _carry_in_tree(out, f"{name}r", terms[half:], bits[half - 1 : -1], balanced)
    lo, hi = left[1] + right[1], left[2] + right[2] + 1
    n = _bits(lo, hi)
    out(f"    (* keep *) logic signed [{n - 1}:0] {name};")
    out(f"    assign {name} = {n}'({left[0]}) + {n}'({right[0]}) + {n}'({bits[-1]});")
    return name, lo, hi


# -- pipelining for a clock (adder_levels) ---------------------------------------------------------
class _Pipe:
    """The register stages of one datapath, numbered as the writer goes (ap_pipe_ctrl stage_en).

    The datapath is a row of segments, each ending in a fixed register stage (alignment:
    projections | scores; attention: projections | scores | softmax weights | sum, numerator |
    normalize | output projection). adder_levels = 0: no register inside a segment (the fixed
    pipeline). adder_levels = N >= 1: the adder trees of a segment get registers wherever a sum
    would take more than N adder levels since the last register (ROM lookups, multipliers and
    the leaf's own subtract are not cut: a leaf brings 0 or 1 level); an operand that arrives
    stages earlier than its partner is delayed, and at the end of the segment every tree result
    (and any value passed through it, such as V) is delayed to the segment's deepest tree, so
    all values of a stage belong to the same vector and the II stays 1.
    """

    def __init__(self, out: _Writer, levels: int) -> None:
        self.out, self.levels = out, levels
        self.base = 0  # stage_en index of the first register inside the open segment
        self.extra = 0  # registers inside the open segment (its deepest tree)
        self.roots: list[tuple] = []  # tree results of the open segment, assigned at close
        self.segments: dict[str, int] = {}  # segment -> registers inside it (metadata)
        self.max_levels = 0  # most adder levels between two registers in any tree

    def reg(self, name: str, expr: str, bits: int, signed: bool, stage: int) -> str:
        """A register inside the open segment, loaded from `expr` at its inner stage `stage`."""
        sign = "signed " if signed else ""
        self.out(f"    logic {sign}[{bits - 1}:0] {name};")
        self.out(
            f"    always_ff @(posedge ap_clk) if (stage_en[{self.base + stage}]) "
            f"{name} <= {bits}'({expr});"
        )
        return name

    def delay(self, name: str, sig: tuple, to: int, bits: int, signed: bool) -> tuple:
        """sig = (expr, lo, hi, stage, levels) registered until it reaches stage `to`."""
        expr, lo, hi, stage, lev = sig
        while stage < to:
            expr = self.reg(f"{name}_r{stage}", expr, bits, signed, stage)
            stage, lev = stage + 1, 0
        return expr, lo, hi, stage, lev

    def tree(
        self,
        name: str,
        terms: list[tuple[str, int, int, int]],
        balanced: bool,
        width: int | None = None,
        bits: list[tuple[str, int, int, int]] | None = None,
        signed: bool = True,
    ) -> tuple:
        """Sum of leaves (expression, lo, hi, levels) split as _sum_tree splits them; with `bits`
        (one 1-bit carry-in per adder, as _carry_in_tree) every adder is a named (* keep *)
        carry chain. Returns (expression, lo, hi, stage, levels) of the sum."""

        def size(lo: int, hi: int) -> int:
            return width or _bits(lo, hi)

        def rec(path: str, terms: list, cin: list | None) -> tuple:
            if len(terms) == 1:
                expr, lo, hi, lev = terms[0]
                self.max_levels = max(self.max_levels, lev)
                return expr, lo, hi, 0, lev
            half = (len(terms) + 1) // 2 if balanced else len(terms) - 1
            left = rec(f"{path}l", terms[:half], cin[: half - 1] if cin else None)
            right = rec(f"{path}r", terms[half:], cin[half - 1 : -1] if cin else None)
            ops = [(f"{path}l", left), (f"{path}r", right)]
            if cin:
                expr, lo, hi, lev = cin[-1]
                ops.append((f"{path}c", (expr, lo, hi, 0, lev)))
            # the adder sits in the latest operand's stage, one stage later if that operand
            # already went through `levels` adders; earlier operands are delayed to it
            stage = max(op[3] for _, op in ops)
            lev = max(op[4] for _, op in ops if op[3] == stage)
            if lev >= self.levels:
                stage, lev = stage + 1, 0
            exprs = [self.delay(p, op, stage, size(op[1], op[2]), signed)[0] for p, op in ops]
            lo, hi = sum(op[1] for _, op in ops), sum(op[2] for _, op in ops)
            n = size(lo, hi)
            expr = " + ".join(f"{n}'({e})" for e in exprs)
            if cin:
                self.out(f"    (* keep *) logic signed [{n - 1}:0] {path};")
                self.out(f"    assign {path} = {expr};")
                expr = path
            self.max_levels = max(self.max_levels, lev + 1)
            return expr, lo, hi, stage, lev + 1

        root = rec(name, terms, bits)
        self.extra = max(self.extra, root[3])
        return root

    def result(self, lhs: str, bits: int, name: str, root: tuple, width=None, signed=True):
        """`assign lhs = bits'(root)` once the segment closes (after the delay to its end)."""
        self.roots.append((lhs, bits, name, root, width or _bits(root[1], root[2]), signed))

    def delay_array(self, name: str, decl: str, dims: list[tuple[str, int]]) -> str:
        """An array that passes through the open segment beside its trees: delayed by the
        segment's inner registers (declared `decl name_rS [..]`); returns the delayed name."""
        src = name
        for s in range(self.extra):
            dst = f"{name}_r{s}"
            shape = "".join(f"[{n}]" for _, n in dims)
            index = "".join(f"[{v}]" for v, _ in dims)
            self.out(f"    {decl} {dst} {shape};")
            self.out("    always_ff @(posedge ap_clk) begin")
            self.out(f"        if (stage_en[{self.base + s}]) begin")
            _loops(self.out, 12, dims, [f"{dst}{index} <= {src}{index};"])
            self.out("        end")
            self.out("    end")
            src = dst
        return src

    def close(self, segment: str) -> int:
        """End the open segment: its tree results, delayed to its deepest tree, are assigned;
        returns the stage_en index of the fixed register stage that ends it."""
        for lhs, bits, name, root, width, signed in self.roots:
            expr = self.delay(name, root, self.extra, width, signed)[0]
            self.out(f"    assign {lhs} = {bits}'({expr});")
        stage = self.base + self.extra
        self.segments[segment] = self.extra
        self.base, self.extra, self.roots = stage + 1, 0, []
        return stage

    @property
    def latency(self) -> int:
        return self.base


def _loops(out: _Writer, indent: int, dims: list[tuple[str, int]], body: list[str]) -> None:
    """Nested for loops over (variable, count) around body lines."""
    pad = " " * indent
    for depth, (var, count) in enumerate(dims):
        out(f"{pad}{'    ' * depth}for (int {var} = 0; {var} < {count}; {var}++) begin")
    for line in body:
        out(f"{pad}{'    ' * len(dims)}{line}")
    for depth in reversed(range(len(dims))):
        out(f"{pad}{'    ' * depth}end")


def _front_end(
    out: _Writer, pipe: _Pipe, cfg: CoreConfig, weights: CoreWeights, with_v: bool, opts: dict
) -> None:
    """Inputs, binarization (E-ATT), Q/K (and V) projections, stage 0 registers, scores sc."""
    f = derive_formats(cfg)
    w = alignment_widths(cfg, f)
    lq, lk, dim, heads, dh = cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, cfg.d_head
    ib, aw, qs, qb, sb = w["in_bits"], w["acc_bits"], w["q_shift"], w["qk_bits"], w["score_bits"]
    eatt = cfg.kind == "eatt"
    out("    // ---- inputs as signed elements")
    out(f"    logic signed [{ib - 1}:0] xe [{lq}][{dim}];")
    out(f"    logic signed [{ib - 1}:0] ye [{lk}][{dim}];")
    for name, length in (("x", lq), ("y", lk)):
        for i in range(length):
            for d in range(dim):
                lo = (i * dim + d) * ib
                out(f"    assign {name}e[{i}][{d}] = {name}[{lo + ib - 1}:{lo}];")
    out("")
    if eatt:
        tau = cfg.tau_int
        out(f"    // ---- binarize (Eq. 4, strict): xb = x > tau_int = {tau}")
        out(f"    logic xb [{lq}][{dim}];")
        out(f"    logic yb [{lk}][{dim}];")
        out("    always_comb begin")
        for name, length in (("x", lq), ("y", lk)):
            _loops(
                out,
                8,
                [("i", length), ("d", dim)],
                [f"{name}b[i][d] = {ib + 1}'({name}e[i][d]) > {_lit(tau, ib + 1)};"],
            )
        out("    end")
        out("")
    out(f"    // ---- projections Q = X @ W_Q, K = Y @ W_K: {aw}-bit accumulators")
    out(f"    //      (|acc| <= q_acc_bound = {f.q_acc_bound})")
    out(f"    logic signed [{aw - 1}:0] qa [{lq}][{dim}];")
    out(f"    logic signed [{aw - 1}:0] ka [{lk}][{dim}];")
    if eatt:
        qbounds = _eatt_projection(out, pipe, opts, "xb", "qa", lq, weights.wq, aw, "W_Q")
        kbounds = _eatt_projection(out, pipe, opts, "yb", "ka", lk, weights.wk, aw, "W_K")
    else:
        _const_matmul(out, pipe, "qa", "xe", lq, weights.wq, aw, "W_Q")
        _const_matmul(out, pipe, "ka", "ye", lk, weights.wk, aw, "W_K")
    if with_v:
        aw_v, vs = f.v_acc_bits, f.v_shift
        vb = aw_v - vs
        out(f"    // ---- values V = Y @ W_V: {aw_v}-bit accumulators (|acc| <= {f.v_acc_bound})")
        out(f"    logic signed [{aw_v - 1}:0] va [{lk}][{dim}];")
        _const_matmul(out, pipe, "va", "ye", lk, weights.wv, aw_v, "W_V")
    out("")
    out(f"    // ---- stage 0: requantize, arithmetic right shift by {qs} (floor), into {qb} bits")
    out(f"    logic signed [{qb - 1}:0] q [{lq}][{dim}];")
    out(f"    logic signed [{qb - 1}:0] k [{lk}][{dim}];")
    if with_v:
        out(f"    //      V: shift by {vs} into {vb} bits")
        out(f"    logic signed [{vb - 1}:0] v0 [{lk}][{dim}];")
    stage = pipe.close("projection")
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{stage}]) begin")
    regs = [("q", "qa", lq, qb, qs), ("k", "ka", lk, qb, qs)]
    if with_v:
        regs.append(("v0", "va", lk, vb, vs))
    for dst, src, length, bits, shift in regs:
        _loops(
            out,
            12,
            [("i", length), ("j", dim)],
            [f"{dst}[i][j] <= {bits}'({src}[i][j] >>> {shift});"],
        )
    out("        end")
    out("    end")
    out("")
    if eatt:
        # the bounds of q = qa >>> qs (floor) per column; 'config': the whole qb-bit range
        if opts["widths"] == "config":
            qbounds = kbounds = [(-(2 ** (qb - 1)), 2 ** (qb - 1) - 1)] * dim
        else:
            qbounds = [(lo >> qs, hi >> qs) for lo, hi in qbounds]
            kbounds = [(lo >> qs, hi >> qs) for lo, hi in kbounds]
        _eatt_scores(out, pipe, cfg, opts, qbounds, kbounds, qb, sb)
        return
    out(f"    // ---- scores: S = q . k per head, d_head = {dh}")
    out(f"    function automatic logic signed [{sb - 1}:0] product(")
    out(f"        input logic signed [{qb - 1}:0] a, input logic signed [{qb - 1}:0] b);")
    out(f"        product = {sb}'(a) * {sb}'(b);")
    out("    endfunction")
    term = f"+ product(q[i][h*{dh} + t], k[j][h*{dh} + t])"
    out(f"    logic signed [{sb - 1}:0] sc [{heads}][{lq}][{lk}];")
    if pipe.levels:  # a balanced tree of the products (the multipliers are not cut)
        for h, i, j in np.ndindex(heads, lq, lk):
            name = f"score_h{h}_q{i}_k{j}"
            leaves = [
                (f"product(q[{i}][{c}], k[{j}][{c}])", 0, 0, 0) for c in range(h * dh, (h + 1) * dh)
            ]
            pipe.result(f"sc[{h}][{i}][{j}]", sb, name, pipe.tree(name, leaves, True, sb), sb)
        out("")
        return
    out("    always_comb begin")
    body = [
        f"sc[h][i][j] = {_lit(0, sb)};",
        f"for (int t = 0; t < {dh}; t++) begin",
        f"    sc[h][i][j] = sc[h][i][j] {term};",
        "end",
    ]
    _loops(out, 8, [("h", heads), ("i", lq), ("j", lk)], body)
    out("    end")
    out("")


def _alignment_sv(
    cfg: CoreConfig, weights: CoreWeights, top: str, opts: dict, levels: int
) -> tuple[str, _Pipe]:
    w = alignment_widths(cfg)
    lq, lk, heads, sb = cfg.len_q, cfg.len_k, cfg.heads, w["score_bits"]
    # the datapath first (it numbers the register stages), then the header that states them
    body = _Writer()
    pipe = _Pipe(body, levels)
    _front_end(body, pipe, cfg, weights, False, opts)
    stage = pipe.close("scores")
    body(f"    // ---- stage {stage}: output register (holds the last result)")
    body("    always_ff @(posedge ap_clk) begin")
    body(f"        if (stage_en[{stage}]) begin")
    _loops(
        body,
        12,
        [("h", heads), ("i", lq), ("j", lk)],
        [f"s[((h*{lq} + i)*{lk} + j)*{sb} +: {sb}] <= sc[h][i][j];"],
    )
    body("        end")
    body("    end")
    body("endmodule")
    body("")
    body("`default_nettype wire")
    out = _Writer()
    _header(out, cfg, top, "alignment stage (scores only)", w, pipe)
    _ports(
        out,
        cfg,
        top,
        [
            f"S: {heads} x {lq} x {lk} signed {sb}-bit scores,",
            f"   element (h, i, j) at [((h*{lq} + i)*{lk} + j)*{sb} +: {sb}];",
            "   held until the next result",
        ],
        "s",
        heads * lq * lk * sb,
    )
    _control(out, pipe.latency, "s")
    out.lines += body.lines
    return out.text(), pipe


def _sum_numerator(out: _Writer, cfg: CoreConfig, tb: int, nb: int) -> None:
    """E = sum_j e and N = sum_j e_j V_j as one loop (a chain over j): adder_levels 0."""
    heads, lq, lk, dh = cfg.heads, cfg.len_q, cfg.len_k, cfg.d_head
    out("    always_comb begin")
    body = [
        f"e_sum_c[h][i] = {tb}'d0;",
        f"for (int t = 0; t < {dh}; t++) numer_c[h][i][t] = {_lit(0, nb)};",
        f"for (int j = 0; j < {lk}; j++) begin",
        f"    e_sum_c[h][i] = e_sum_c[h][i] + {tb}'(e2[h][i][j]);",
        f"    for (int t = 0; t < {dh}; t++) begin",
        "        numer_c[h][i][t] = numer_c[h][i][t]",
        f"            + {nb}'($signed({{1'b0, e2[h][i][j]}})) * {nb}'(v2[j][h*{dh} + t]);",
        "    end",
        "end",
    ]
    _loops(out, 8, [("h", heads), ("i", lq)], body)
    out("    end")


RECIP_NORMALIZE_FILE = "recip_normalize.sv"


def recip_normalize(
    out: _Writer, name: str, w: dict, lanes: int, recip_frac: int, at: str, numer: list[str]
) -> None:
    """One recip_normalize leaf (rtl_sim/rtl/recip_normalize.sv) for the sum `e_sum{at}` and
    the numerators `numer` (lane t = numer[t]): it drives `recip_index{at}`, reads
    `recip{at} = recip_rom(recip_index{at})` back and writes `o_norm{at}` (lane t at
    [t*attn_bits +: attn_bits]). The caller declares those arrays and the ROM; every
    parameter is a golden width (attention_widths / window_widths)."""
    params = {
        "LANES": lanes,
        "SUM_W": w["total_bits"],
        "NUMER_W": w["numer_bits"],
        "INDEX_W": w["recip_index_bits"],
        "RECIP_W": w["recip_bits"],
        "RECIP_FRAC": recip_frac,
        "PROD_W": w["prod_bits"],
        "OUT_W": w["attn_bits"],
    }
    out(f"    assign recip{at} = recip_rom(recip_index{at});")
    out("    recip_normalize #(")
    out("        " + ", ".join(f".{k}({v})" for k, v in params.items()))
    out(f"    ) u_recip_normalize_{name} (")
    out(f"        .e_sum(e_sum{at}), .numer({{{', '.join(reversed(numer))}}}),")
    out(f"        .recip_index(recip_index{at}), .recip(recip{at}), .o(o_norm{at})")
    out("    );")


#: register stages of the generated attention datapath: Q/K/V, scores, exp, sum/numerator,
#: normalized attention output, output projection
ATTENTION_LATENCY = 6


def _masks(out: _Writer, cfg: CoreConfig, stage: int) -> bool:
    """The mask inputs (length, offset), registered along the pipeline with their vector up to
    the scores stage `stage`, and visible[i][j] (golden visible_keys) from them; False when the
    core takes none."""
    bits = mask_bits(cfg)
    if not bits:
        return False
    lq, lk = cfg.len_q, cfg.len_k
    out("    // ---- masks: the per-call inputs travel with their vector to the softmax")
    for name, b in bits.items():
        out(f"    logic [{b - 1}:0] {name}_r [{stage + 1}];")
        out("    always_ff @(posedge ap_clk) begin")
        out(f"        if (stage_en[0]) {name}_r[0] <= {name};")
        for k in range(1, stage + 1):
            out(f"        if (stage_en[{k}]) {name}_r[{k}] <= {name}_r[{k - 1}];")
        out("    end")
    out(f"    logic visible [{lq}][{lk}];  // key j gets weight in query i's softmax")
    for i in range(lq):
        for j in range(lk):
            terms = []
            if "length" in bits:
                terms.append(f"(length_r[{stage}] > {bits['length']}'d{j})")
            if "offset" in bits and j > i:
                terms.append(f"(offset_r[{stage}] >= {bits['offset']}'d{j - i})")
            cond = " && ".join(terms) or "1'b1"
            out(f"    assign visible[{i}][{j}] = {cond};")
    out("")
    return True


def _attention_sv(
    cfg: CoreConfig, weights: CoreWeights, top: str, opts: dict, levels: int
) -> tuple[str, _Pipe]:
    f = derive_formats(cfg)
    w = attention_widths(cfg, f)
    lq, lk, dim, heads, dh = cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, cfg.d_head
    sb, vb, db, iw = w["score_bits"], w["v_bits"], w["diff_bits"], w["exp_index_bits"]
    ew, tb, nb, ki = w["exp_bits"], w["total_bits"], w["numer_bits"], w["recip_index_bits"]
    rb, ob = w["recip_bits"], w["attn_bits"]
    oab, zb, rf = w["out_acc_bits"], w["out_bits"], cfg.recip_frac
    out = _Writer()  # the datapath first (it numbers the register stages), the header last
    pipe = _Pipe(out, levels)
    _front_end(out, pipe, cfg, weights, True, opts)

    v0 = pipe.delay_array("v0", f"logic signed [{vb - 1}:0]", [("j", lk), ("d", dim)])
    stage = pipe.close("scores")
    out(f"    // ---- stage {stage}: scores and V")
    out(f"    logic signed [{sb - 1}:0] s1 [{heads}][{lq}][{lk}];")
    out(f"    logic signed [{vb - 1}:0] v1 [{lk}][{dim}];")
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{stage}]) begin")
    _loops(out, 12, [("h", heads), ("i", lq), ("j", lk)], ["s1[h][i][j] <= sc[h][i][j];"])
    _loops(out, 12, [("j", lk), ("d", dim)], [f"v1[j][d] <= {v0}[j][d];"])
    out("        end")
    out("    end")
    out("")
    masked = _masks(out, cfg, stage)
    out(f"    // ---- softmax weights: e = EXP[(max_j S - S) >> {f.exp_shift}], 0 past the table")
    out(f"    //      ({cfg.exp_table_size} entries, EXP[0] = 2**{cfg.exp_frac})")
    if masked:
        out("    //      max and weights over the visible keys only (key 0 always is); e = 0 for")
        out("    //      a hidden key")
    out.rom("exp_rom", iw, ew, exp_table(cfg))
    out(f"    logic signed [{sb - 1}:0] smax [{heads}][{lq}];")
    out(f"    logic signed [{sb}:0] sdiff [{heads}][{lq}][{lk}];  // in [0, {2 * f.score_bound}]")
    out(f"    logic [{ew - 1}:0] ec [{heads}][{lq}][{lk}];")
    out("    always_comb begin")
    visible = "visible[i][j] && " if masked else ""
    exp = f"exp_rom({iw}'(sdiff[h][i][j][{db - 1}:0] >> {f.exp_shift}))"
    body = [
        "smax[h][i] = s1[h][i][0];",
        f"for (int j = 1; j < {lk}; j++) begin",
        f"    if ({visible}s1[h][i][j] > smax[h][i]) smax[h][i] = s1[h][i][j];",
        "end",
        f"for (int j = 0; j < {lk}; j++) begin",
        f"    sdiff[h][i][j] = {sb + 1}'(smax[h][i]) - {sb + 1}'(s1[h][i][j]);",
        (
            f"    ec[h][i][j] = visible[i][j] ? {exp} : {ew}'d0;"
            if masked
            else f"    ec[h][i][j] = {exp};"
        ),
        "end",
    ]
    _loops(out, 8, [("h", heads), ("i", lq)], body)
    out("    end")
    out("")
    stage = pipe.close("softmax")
    out(f"    // ---- stage {stage}: softmax weights and V")
    out(f"    logic [{ew - 1}:0] e2 [{heads}][{lq}][{lk}];")
    out(f"    logic signed [{vb - 1}:0] v2 [{lk}][{dim}];")
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{stage}]) begin")
    _loops(out, 12, [("h", heads), ("i", lq), ("j", lk)], ["e2[h][i][j] <= ec[h][i][j];"])
    _loops(out, 12, [("j", lk), ("d", dim)], ["v2[j][d] <= v1[j][d];"])
    out("        end")
    out("    end")
    out("")
    out(f"    // ---- sum E = sum_j e_j ({tb} bits) and numerator N = sum_j e_j V_j ({nb} bits)")
    out(f"    logic [{tb - 1}:0] e_sum_c [{heads}][{lq}];")
    out(f"    logic signed [{nb - 1}:0] numer_c [{heads}][{lq}][{dh}];")
    if pipe.levels:  # balanced trees over j (the products e * V are not cut)
        for h, i in np.ndindex(heads, lq):
            leaves = [(f"{tb}'(e2[{h}][{i}][{j}])", 0, 0, 0) for j in range(lk)]
            root = pipe.tree(f"e_sum_{h}_{i}", leaves, True, tb, signed=False)
            pipe.result(f"e_sum_c[{h}][{i}]", tb, f"e_sum_{h}_{i}", root, tb, signed=False)
            for t in range(dh):
                leaves = [
                    (f"{nb}'($signed({{1'b0, e2[{h}][{i}][{j}]}})) * {nb}'(v2[{j}][{h * dh + t}])",)
                    + (0, 0, 0)
                    for j in range(lk)
                ]
                root = pipe.tree(f"numer_{h}_{i}_{t}", leaves, True, nb)
                pipe.result(f"numer_c[{h}][{i}][{t}]", nb, f"numer_{h}_{i}_{t}", root, nb)
    else:
        _sum_numerator(out, cfg, tb, nb)
    stage = pipe.close("sum")
    out("")
    out(f"    // ---- stage {stage}: sum and numerator")
    out(f"    logic [{tb - 1}:0] e_sum [{heads}][{lq}];")
    out(f"    logic signed [{nb - 1}:0] numer [{heads}][{lq}][{dh}];")
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{stage}]) begin")
    _loops(out, 12, [("h", heads), ("i", lq)], ["e_sum[h][i] <= e_sum_c[h][i];"])
    _loops(out, 12, [("h", heads), ("i", lq), ("t", dh)], ["numer[h][i][t] <= numer_c[h][i][t];"])
    out("        end")
    out("    end")
    out("")
    out("    // ---- normalize O = N / E per head and query (recip_normalize.sv): the leaf finds")
    out(f"    //      the table index of E, recip_rom ({cfg.recip_table_size} entries) gives R,")
    out(f"    //      O = clamp(round_half_up(N * R / 2**({rf} + floor(log2 E)))) into {ob} bits")
    out.rom("recip_rom", ki, rb, recip_table(cfg))
    out(f"    logic [{dh * ob - 1}:0] o_norm [{heads}][{lq}];  // O[t] at [t*{ob} +: {ob}]")
    out(f"    logic [{ki - 1}:0] recip_index [{heads}][{lq}];")
    out(f"    logic [{rb - 1}:0] recip [{heads}][{lq}];")
    for h, i in np.ndindex(heads, lq):
        recip_normalize(
            out,
            f"h{h}_q{i}",
            w,
            dh,
            rf,
            f"[{h}][{i}]",
            [f"numer[{h}][{i}][{t}]" for t in range(dh)],
        )
    out("")
    stage = pipe.close("normalize")
    out(f"    // ---- stage {stage}: attention output O, heads concatenated in column order")
    out(f"    logic signed [{ob - 1}:0] o4 [{lq}][{dim}];")
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{stage}]) begin")
    _loops(
        out,
        12,
        [("h", heads), ("i", lq), ("t", dh)],
        [f"o4[i][h*{dh} + t] <= o_norm[h][i][t*{ob} +: {ob}];"],
    )
    out("        end")
    out("    end")
    out("")
    out(f"    // ---- output projection Z = O @ W_O: {oab}-bit accumulators")
    out(f"    //      (|acc| <= out_acc_bound = {f.out_acc_bound})")
    out(f"    logic signed [{oab - 1}:0] za [{lq}][{dim}];")
    _const_matmul(out, pipe, "za", "o4", lq, weights.wo, oab, "W_O")
    out("")
    stage = pipe.close("output")
    out(
        f"    // ---- stage {stage}: requantize (>>> {f.out_shift}) into {zb} bits, output register"
    )
    out("    always_ff @(posedge ap_clk) begin")
    out(f"        if (stage_en[{stage}]) begin")
    _loops(
        out,
        12,
        [("i", lq), ("d", dim)],
        [f"z[(i*{dim} + d)*{zb} +: {zb}] <= {zb}'(za[i][d] >>> {f.out_shift});"],
    )
    out("        end")
    out("    end")
    out("endmodule")
    out("")
    out("`default_nettype wire")
    head = _Writer()
    _header(head, cfg, top, "whole core (attention outputs)", w, pipe)
    _ports(
        head,
        cfg,
        top,
        [
            f"Z: {lq} x {dim} signed {zb}-bit outputs (after W_O and out_shift),",
            f"   element (i, d) at [(i*{dim} + d)*{zb} +: {zb}]; held until the next result",
        ],
        "z",
        lq * dim * zb,
        mask_bits(cfg),
    )
    _control(head, pipe.latency, "z")
    head.lines += out.lines
    return head.text(), pipe


def generate_rtl(
    cfg: CoreConfig,
    weights: CoreWeights,
    out_dir: str | os.PathLike,
    level: str = "alignment",
    eatt_datapath: dict | None = None,
    adder_levels: int = 0,
    source: dict | None = None,
    folding: dict | None = None,
) -> dict:
    """Write the RTL of cfg's unit into out_dir; return the metadata (also in metadata.json).

    Dispatches to the unit's generator (eatt.units: generate_core_rtl for kinds eatt and
    vanilla, rtl_sim.window.generate_window_rtl for the window unit) after the checks every
    unit shares. ``source`` (JSON-ready: the QONNX file, and the checkpoint and layer it was
    taken from) is recorded in metadata.json. ``folding`` ({"lanes": P, "simd": S, "pe": N}) is
    for the core's level folded (rtl_sim/folded.py).
    """
    if isinstance(adder_levels, bool) or not isinstance(adder_levels, int) or adder_levels < 0:
        raise ValueError(f"adder_levels: must be an integer >= 0, got {adder_levels!r}")
    check_output_dir(out_dir, "RTL", legacy=_legacy_rtl_dir)  # refuse before any work
    generate = unit_for(cfg).load("generate_rtl")
    meta = generate(
        cfg,
        weights,
        out_dir,
        level=level,
        eatt_datapath=eatt_datapath,
        adder_levels=adder_levels,
        **({"folding": folding} if folding else {}),
    )
    if source is not None:  # the folder is ours now: add the provenance to its metadata
        meta["source"] = source
        atomic_write_text(Path(out_dir) / "metadata.json", json.dumps(meta, indent=2) + "\n")
    return meta


def generate_core_rtl(
    cfg: CoreConfig,
    weights: CoreWeights,
    out_dir: str | os.PathLike,
    level: str = "alignment",
    eatt_datapath: dict | None = None,
    adder_levels: int = 0,
) -> dict:
    """Write the RTL of one core into out_dir; return the metadata (also in metadata.json).

    Called through generate_rtl (which checks adder_levels and out_dir first).

    eatt_datapath overrides keys of EATT_DATAPATH (E-ATT only: how Q/K and the scores are
    built; every choice is bit-exact, they differ in resources).
    adder_levels: 0 = the fixed pipeline (ALIGNMENT_LATENCY / ATTENTION_LATENCY); N >= 1 = at
    most N adder levels between registers in the adder trees (_Pipe), a longer latency, II 1.
    The directory is built beside out_dir and renamed into place, so a reader never sees half
    of it, and a second generation into the same directory leaves no stale file behind.
    """
    if level not in LEVELS:
        raise ValueError(f"level: must be one of {', '.join(LEVELS)}, got {level!r}")
    opts = _eatt_datapath(eatt_datapath)
    if adder_levels and cfg.kind == "eatt" and opts["scores"] == "min":
        raise ValueError("adder_levels: the 'min' scores have no pipelined form; use xor or abs")
    weights.check(cfg)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a directory")
    top = f"{cfg.kind}_{level}"
    top_file = f"{top}.sv"
    if level == "alignment":
        text, pipe = _alignment_sv(cfg, weights, top, opts, adder_levels)
        iface = alignment_interface(cfg)
    else:
        text, pipe = _attention_sv(cfg, weights, top, opts, adder_levels)
        iface = attention_interface(cfg)
    latency = pipe.latency
    # the hand-written leaves the top instantiates (rtl_sim/rtl/, docs/rtl.md "Hierarchy")
    hand_written = [CTRL_FILE]
    if _l1_leaf(cfg, opts, adder_levels):
        hand_written.append(L1_SCORE_ROW_FILE)
    if level == "attention":
        hand_written.append(RECIP_NORMALIZE_FILE)
    meta = {
        "generator": "eatt.rtl_sim.generate",
        "level": level,
        "kind": cfg.kind,
        "config": cfg.to_dict(),
        "top": top,
        "sources": [top_file, *hand_written],
        "weights": "weights.npz",
        "interface": iface,
        "latency_cycles": latency,
        "ii_cycles": 1,
        # registers inside the adder trees: adder_levels = N >= 1 leaves at most N adder levels
        # between two registers; tree_stages: the registers each segment gained
        "adder_levels": adder_levels,
        "tree_stages": pipe.segments,
        "formats": derive_formats(cfg).to_dict(),
    }
    if adder_levels:  # counted by _Pipe as it cuts the trees (<= adder_levels)
        meta["max_adder_levels_per_stage"] = pipe.max_levels
    if cfg.kind == "eatt":
        meta["eatt_datapath"] = opts
    write_rtl_dir(out, {top_file: text}, hand_written, weights, meta)
    return meta


#: what an RTL folder held besides its sources before the marker: run results and builds
_LEGACY_RTL_EXTRA = {"metadata.json", "weights.npz", "sim", "sim_build", "synth", "da4ml"}


def _legacy_rtl_dir(path: Path) -> bool:
    """An RTL folder written before the output marker: its metadata.json names our generator
    and it holds nothing but what eatt writes there (a user's file makes it not ours)."""
    try:
        meta = json.loads((path / "metadata.json").read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(meta, dict) or not str(meta.get("generator", "")).startswith(
        ("eatt", "da4ml")
    ):
        return False
    sources = {str(s).split("/")[0] for s in meta.get("sources", [])}
    return {p.name for p in path.iterdir()} <= sources | _LEGACY_RTL_EXTRA


@contextmanager
def _no_sim_running(out: Path):
    """Hold `eatt sim`'s folder lock while the folder is replaced; refuse if a simulation of
    it is running (it would lose its folder halfway)."""
    from eatt.rtl_sim.procs import try_lock

    lock = Path(out) / "sim" / ".lock"
    fd = try_lock(lock) if lock.is_file() else None
    if lock.is_file() and fd is None:
        raise OutputError(f"{out}: an eatt sim of this folder is running; wait for it to end")
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def write_rtl_dir(
    out: Path, generated: dict[str, str], hand_written: list[str], weights: CoreWeights, meta: dict
) -> None:
    """An RTL directory, all or nothing (eatt.outdir.replaced_dir): the generated files, copies
    of hand-written ones from rtl_sim/rtl/, weights.npz and metadata.json are written to a
    temporary directory beside `out`, which then replaces `out` (a reader never sees half of it,
    no stale file stays). A folder eatt did not make is refused (OutputError), never replaced."""
    with _no_sim_running(out), replaced_dir(out, "RTL", legacy=_legacy_rtl_dir) as tmp:
        for name, text in generated.items():
            (tmp / name).write_text(text)
        for name in hand_written:
            shutil.copyfile(RTL_DIR / name, tmp / name)
        np.savez(tmp / "weights.npz", **weights.as_dict())
        (tmp / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")


def load_metadata(out_dir: str | os.PathLike) -> dict:
    """metadata.json of an RTL directory; ValueError (one line) when it is missing or bad."""
    out = Path(out_dir)
    path = out / "metadata.json"
    if not path.is_file():
        raise ValueError(f"{out}: not an RTL directory (no metadata.json); run `eatt rtl` first")
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    for key in ("config", "level", "top", "sources", "weights", "interface"):
        if key not in meta:
            raise ValueError(f"{path}: missing key '{key}'")
    for rel in [*meta["sources"], meta["weights"]]:
        if not (out / rel).is_file():
            raise ValueError(f"{out}: metadata lists {rel} but the file is missing")
    top_text = (out / meta["sources"][0]).read_text()
    if f"module {meta['top']}" not in top_text:
        raise ValueError(f"{out}: top module {meta['top']} is not in {meta['sources'][0]}")
    return meta


def load_weights(out_dir: str | os.PathLike, meta: dict) -> CoreWeights:
    path = Path(out_dir) / meta["weights"]
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [name for name in CoreWeights.NAMES if name not in data.files]
            if missing:
                raise ValueError(f"{path}: no array {missing[0]!r} (has {', '.join(data.files)})")
            return CoreWeights(*(data[name].astype(np.int64) for name in CoreWeights.NAMES))
    except (OSError, EOFError, ValueError, AttributeError) as err:
        if isinstance(err, ValueError) and str(err).startswith(str(path)):
            raise
        why = "not an .npz archive" if "pickle" in str(err) else str(err).splitlines()[0]
        raise ValueError(f"{path}: not a weights file written by eatt rtl ({why})") from None
