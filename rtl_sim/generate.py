"""RTL generation: a core config + integer weights -> SystemVerilog + metadata.json.

``generate_rtl(cfg, weights, out_dir, level="alignment")`` writes a directory that a simulator or a
synthesizer can use on its own (DESIGN.md section 4, "An RTL directory"):

    metadata.json          config, level, interface, latency, formats, ``sources`` (top first)
    <kind>_alignment.sv    generated top: the datapath with the weights as constants
    ap_pipe_ctrl.sv        hand-written block-level handshake (copied from rtl_sim/rtl/)
    weights.npz            the integer weights (the golden model needs them to check the RTL)

The arithmetic is the golden model's (eatt.quant.golden.GoldenCore.alignment), bit for bit:

    E-ATT  xb = x > tau_int                      qa[i][j] = sum_d (xb[i][d] ? W_Q[d][j] : 0)
    dot                                          qa[i][j] = sum_d x[i][d] * W_Q[d][j]
           q = qa >>> q_shift  (floor)  (K likewise from y and W_K)
    E-ATT  s[h][i][j] = -sum_t |q[i][h*dh+t] - k[j][h*dh+t]|
    dot    s[h][i][j] =  sum_t  q[i][h*dh+t] * k[j][h*dh+t]

Widths come from eatt.quant.golden.Formats: the accumulator holds +-q_acc_bound, the shifted
Q/K hold what the shift leaves of it, the score port holds +-score_bound. Every expression is
evaluated at a width that holds its exact value (all operands signed, sized explicitly), so
nothing wraps. The weights are constants: E-ATT's projection is a mux-and-add per weight (no
multiplier), the dot core's are constant multiplications that synthesis turns into adders.

Pipeline: two register stages (Q/K, then the score register that drives the output port), so
latency = 2 cycles and the initiation interval is 1.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from eatt.config import CoreConfig
from eatt.quant.golden import CoreWeights, Formats, derive_formats, signed_bits

RTL_DIR = Path(__file__).parent / "rtl"
CTRL_FILE = "ap_pipe_ctrl.sv"
LEVELS = ("alignment",)
#: register stages of the generated alignment datapath (ap_start accepted -> ap_done)
ALIGNMENT_LATENCY = 2


def _lit(value: int, width: int) -> str:
    """A signed SystemVerilog literal of the given width (the value must fit)."""
    value = int(value)
    if not -(2 ** (width - 1)) <= value < 2 ** (width - 1):
        raise AssertionError(f"literal {value} does not fit {width} signed bits")
    return f"{width}'sd{value}" if value >= 0 else f"-{width}'sd{-value}"


def alignment_widths(cfg: CoreConfig, formats: Formats | None = None) -> dict[str, int]:
    """Bit widths of the alignment datapath, all derived from the golden model's Formats."""
    f = formats or derive_formats(cfg)
    acc_bits = signed_bits(f.q_acc_bound)  # |Q| before the shift <= q_acc_bound
    qk_bits = acc_bits - f.q_shift  # what the arithmetic shift leaves (<= cfg.qk_bits)
    return {
        "in_bits": cfg.in_bits,
        "acc_bits": acc_bits,
        "q_shift": f.q_shift,
        "qk_bits": qk_bits,
        "score_bits": signed_bits(f.score_bound),
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


def _alignment_sv(cfg: CoreConfig, weights: CoreWeights, top: str) -> str:
    f = derive_formats(cfg)
    w = alignment_widths(cfg, f)
    lq, lk, dim, heads, dh = cfg.len_q, cfg.len_k, cfg.dim, cfg.heads, cfg.d_head
    ib, aw, qs, qb, sb = w["in_bits"], w["acc_bits"], w["q_shift"], w["qk_bits"], w["score_bits"]
    eatt = cfg.kind == "eatt"
    xw, yw, sw = lq * dim * ib, lk * dim * ib, heads * lq * lk * sb
    lines: list[str] = []
    emit = lines.append

    emit(f"// {top}: alignment stage of one {cfg.kind!r} attention core (scores only).")
    emit("// GENERATED by eatt.rtl_sim.generate from the config and integer weights: do not edit.")
    emit("// Bit-exact with eatt.quant.golden.GoldenCore(cfg, weights).alignment(x, y).")
    emit(f"// config: {json.dumps(cfg.to_dict(), sort_keys=True)}")
    emit(f"// widths: {json.dumps(w, sort_keys=True)}")
    emit("// Interface: see docs/rtl.md and metadata.json (ap_ctrl_hs, II = 1, latency 2).")
    emit("")
    emit("`default_nettype none")
    emit("")
    emit(f"module {top} (")
    emit("    input  wire logic ap_clk,")
    emit("    input  wire logic ap_rst,  // synchronous, active high")
    emit("    input  wire logic ap_start,")
    emit("    output logic      ap_done,")
    emit("    output logic      ap_idle,")
    emit("    output logic      ap_ready,")
    emit(f"    // X: {lq} x {dim} signed {ib}-bit, element (i, d) at [(i*{dim} + d)*{ib} +: {ib}]")
    emit(f"    input  wire logic [{xw - 1}:0] x,")
    emit(f"    // Y: {lk} x {dim} signed {ib}-bit, element (j, d) at [(j*{dim} + d)*{ib} +: {ib}]")
    emit(f"    input  wire logic [{yw - 1}:0] y,")
    emit(f"    // S: {heads} x {lq} x {lk} signed {sb}-bit scores,")
    emit(f"    //    element (h, i, j) at [((h*{lq} + i)*{lk} + j)*{sb} +: {sb}];")
    emit("    //    held until the next result")
    emit(f"    output logic [{sw - 1}:0] s,")
    emit("    output logic      s_vld  // = ap_done: s holds a new result in this cycle")
    emit(");")
    emit(f"    logic [{ALIGNMENT_LATENCY - 1}:0] stage_en;")
    emit("")
    emit(f"    ap_pipe_ctrl #(.LATENCY({ALIGNMENT_LATENCY})) u_ctrl (")
    emit("        .ap_clk(ap_clk), .ap_rst(ap_rst), .ap_start(ap_start), .ap_done(ap_done),")
    emit("        .ap_idle(ap_idle), .ap_ready(ap_ready), .stage_en(stage_en)")
    emit("    );")
    emit("    assign s_vld = ap_done;")
    emit("")
    emit("    // ---- inputs as signed elements")
    emit(f"    logic signed [{ib - 1}:0] xe [{lq}][{dim}];")
    emit(f"    logic signed [{ib - 1}:0] ye [{lk}][{dim}];")
    for name, length in (("x", lq), ("y", lk)):
        for i in range(length):
            for d in range(dim):
                lo = (i * dim + d) * ib
                emit(f"    assign {name}e[{i}][{d}] = {name}[{lo + ib - 1}:{lo}];")
    emit("")
    if eatt:
        tau = cfg.tau_int
        emit(f"    // ---- binarize (Eq. 4, strict): xb = x > tau_int = {tau}")
        emit(f"    logic xb [{lq}][{dim}];")
        emit(f"    logic yb [{lk}][{dim}];")
        emit("    always_comb begin")
        for name, length in (("x", lq), ("y", lk)):
            emit(f"        for (int i = 0; i < {length}; i++) begin")
            emit(f"            for (int d = 0; d < {dim}; d++) begin")
            emit(f"                {name}b[i][d] = {ib + 1}'({name}e[i][d]) > {_lit(tau, ib + 1)};")
            emit("            end")
            emit("        end")
        emit("    end")
        emit("")
    emit(f"    // ---- projections Q = X @ W_Q, K = Y @ W_K: {aw}-bit accumulators")
    emit(f"    //      (|acc| <= q_acc_bound = {f.q_acc_bound})")
    emit(f"    logic signed [{aw - 1}:0] qa [{lq}][{dim}];")
    emit(f"    logic signed [{aw - 1}:0] ka [{lk}][{dim}];")
    for acc, src, length, mat, wname in (
        ("qa", "x", lq, weights.wq, "W_Q"),
        ("ka", "y", lk, weights.wk, "W_K"),
    ):
        emit(f"    // {wname}")
        for i in range(length):
            for j in range(dim):
                terms = []
                for d in range(dim):
                    wv = int(mat[d, j])
                    if wv == 0:
                        continue
                    if eatt:
                        terms.append(f"({src}b[{i}][{d}] ? {_lit(wv, aw)} : {_lit(0, aw)})")
                    else:
                        terms.append(f"{aw}'({src}e[{i}][{d}]) * {_lit(wv, aw)}")
                rhs = " + ".join(terms) if terms else _lit(0, aw)
                emit(f"    assign {acc}[{i}][{j}] = {rhs};")
    emit("")
    emit(f"    // ---- stage 0: requantize, arithmetic right shift by {qs} (floor), into {qb} bits")
    emit(f"    logic signed [{qb - 1}:0] q [{lq}][{dim}];")
    emit(f"    logic signed [{qb - 1}:0] k [{lk}][{dim}];")
    emit("    always_ff @(posedge ap_clk) begin")
    emit("        if (stage_en[0]) begin")
    for dst, src, length in (("q", "qa", lq), ("k", "ka", lk)):
        emit(f"            for (int i = 0; i < {length}; i++) begin")
        emit(f"                for (int j = 0; j < {dim}; j++) begin")
        emit(f"                    {dst}[i][j] <= {qb}'({src}[i][j] >>> {qs});")
        emit("                end")
        emit("            end")
    emit("        end")
    emit("    end")
    emit("")
    if eatt:
        emit(f"    // ---- scores (Eq. 10): S = -sum |q - k| per head, d_head = {dh}")
        emit(f"    function automatic logic signed [{sb - 1}:0] abs_diff(")
        emit(f"        input logic signed [{qb - 1}:0] a, input logic signed [{qb - 1}:0] b);")
        emit(f"        // |a - b| <= 2**{qb} - 1 fits {qb + 1} signed bits")
        emit(f"        logic signed [{qb}:0] diff, mag;")
        emit(f"        diff = {qb + 1}'(a) - {qb + 1}'(b);")
        emit(f"        mag = diff[{qb}] ? -diff : diff;")
        emit(f"        abs_diff = {sb}'(mag);  // (no `return`: Yosys does not read it)")
        emit("    endfunction")
    else:
        emit(f"    // ---- scores: S = q . k per head, d_head = {dh}")
        emit(f"    function automatic logic signed [{sb - 1}:0] product(")
        emit(f"        input logic signed [{qb - 1}:0] a, input logic signed [{qb - 1}:0] b);")
        emit(f"        product = {sb}'(a) * {sb}'(b);")
        emit("    endfunction")
    emit(f"    logic signed [{sb - 1}:0] sc [{heads}][{lq}][{lk}];")
    emit("    always_comb begin")
    emit(f"        for (int h = 0; h < {heads}; h++) begin")
    emit(f"            for (int i = 0; i < {lq}; i++) begin")
    emit(f"                for (int j = 0; j < {lk}; j++) begin")
    emit(f"                    sc[h][i][j] = {_lit(0, sb)};")
    emit(f"                    for (int t = 0; t < {dh}; t++) begin")
    if eatt:
        term = f"- abs_diff(q[i][h*{dh} + t], k[j][h*{dh} + t])"
    else:
        term = f"+ product(q[i][h*{dh} + t], k[j][h*{dh} + t])"
    emit(f"                        sc[h][i][j] = sc[h][i][j] {term};")
    emit("                    end")
    emit("                end")
    emit("            end")
    emit("        end")
    emit("    end")
    emit("")
    emit("    // ---- stage 1: output register (holds the last result)")
    emit("    always_ff @(posedge ap_clk) begin")
    emit("        if (stage_en[1]) begin")
    emit(f"            for (int h = 0; h < {heads}; h++) begin")
    emit(f"                for (int i = 0; i < {lq}; i++) begin")
    emit(f"                    for (int j = 0; j < {lk}; j++) begin")
    emit(f"                        s[((h*{lq} + i)*{lk} + j)*{sb} +: {sb}] <= sc[h][i][j];")
    emit("                    end")
    emit("                end")
    emit("            end")
    emit("        end")
    emit("    end")
    emit("endmodule")
    emit("")
    emit("`default_nettype wire")
    return "\n".join(lines) + "\n"


def generate_rtl(
    cfg: CoreConfig, weights: CoreWeights, out_dir: str | os.PathLike, level: str = "alignment"
) -> dict:
    """Write the RTL of one core into out_dir; return the metadata (also in metadata.json).

    The directory is built beside out_dir and renamed into place, so a reader never sees half
    of it, and a second generation into the same directory leaves no stale file behind.
    """
    if level not in LEVELS:
        raise ValueError(f"level: must be one of {', '.join(LEVELS)}, got {level!r}")
    weights.check(cfg)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a directory")
    top = f"{cfg.kind}_alignment"
    top_file = f"{top}.sv"
    meta = {
        "generator": "eatt.rtl_sim.generate",
        "level": level,
        "kind": cfg.kind,
        "config": cfg.to_dict(),
        "top": top,
        "sources": [top_file, CTRL_FILE],
        "weights": "weights.npz",
        "interface": alignment_interface(cfg),
        "latency_cycles": ALIGNMENT_LATENCY,
        "ii_cycles": 1,
        "formats": derive_formats(cfg).to_dict(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / top_file).write_text(_alignment_sv(cfg, weights, top))
        shutil.copyfile(RTL_DIR / CTRL_FILE, tmp / CTRL_FILE)
        np.savez(tmp / "weights.npz", **weights.as_dict())
        (tmp / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
        tmp.chmod(0o755)
        if out.exists():
            # swap: move the old directory aside, the new one in, then delete the old one
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.replace(out, old / "d")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta


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
    with np.load(Path(out_dir) / meta["weights"]) as data:
        return CoreWeights(*(data[name].astype(np.int64) for name in CoreWeights.NAMES))
