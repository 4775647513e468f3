"""The core's unrolled RTL levels: a core config + integer weights -> SystemVerilog +
metadata.json (the core unit's ``generate_rtl`` stage for levels alignment and attention,
through rtl_sim/folded.py: generate_core_levels).

``generate_core_rtl(cfg, weights, out_dir, level="alignment" | "attention")`` writes a directory
that a simulator or a synthesizer can use on its own ("An RTL directory", docs/rtl.md):

    metadata.json          config, level, interface, latency, formats, ``sources`` (top first)
    <kind>_<level>.sv      generated top: the datapath with the weights as constants
    ap_pipe_ctrl.sv        hand-written block-level handshake (copied from rtl_sim/rtl/)
    l1_score_row.sv        hand-written E-ATT score -sum |q - k| of one (head, query, key)
                           (the default E-ATT datapath with adder_levels 0)
    recip_normalize.sv     hand-written O = N / E with the reciprocal table (attention level)
    piece_mult.sv          hand-written DSP-sized multiplier, for recip_normalize's PIPE 2

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
``adder_levels`` N >= 1 (BuildOptions; _Pipe) cuts the adder trees of the projections, the
scores, the sum and numerator and W_O so that at most N adder levels lie between two registers:
a segment whose deepest tree has D levels gains ceil(D / N) - 1 register stages (docs/rtl.md,
"Pipelining for a clock"); 0 is the fixed pipeline above, byte for byte.

The entry point of every unit is eatt.rtl_sim.generate.generate_rtl (which dispatches through
the registry, eatt/units.py); this file writes the unrolled core, and its pieces live beside it:

    widths.py          the datapath widths (from the golden Formats) and the port lists
    sv_writer.py       _Writer (lines of SystemVerilog), sized literals, for loops
    pipeline.py        _Pipe: the register stages, the adder trees cut for adder_levels
    emit_top.py        the header, ports and ap_pipe_ctrl instance every top shares
    eatt_datapath.py   the E-ATT Q/K projections and L1 scores (EATT_DATAPATH)
    emit_alignment.py  the front end (inputs, Q/K/V, scores) and the alignment top
    emit_attention.py  the attention top (softmax weights, normalize, W_O)
    rtldir.py          an RTL directory on disk: write_rtl_dir, load_metadata, load_weights
"""

from __future__ import annotations

import os
from pathlib import Path

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig
from eatt.mechanisms import mechanism_of
from eatt.quant.golden import CoreWeights, derive_formats
from eatt.rtl_sim.eatt_datapath import L1_SCORE_ROW_FILE, _eatt_datapath, _l1_leaf
from eatt.rtl_sim.emit_alignment import _alignment_sv
from eatt.rtl_sim.emit_attention import PIECE_MULT_FILE, RECIP_NORMALIZE_FILE, _attention_sv
from eatt.rtl_sim.rtldir import CTRL_FILE, write_rtl_dir
from eatt.rtl_sim.widths import alignment_interface, attention_interface

LEVELS = ("alignment", "attention")


def generate_core_rtl(
    cfg: CoreConfig,
    weights: CoreWeights,
    out_dir: str | os.PathLike,
    level: str = "alignment",
    options: BuildOptions | None = None,
) -> dict:
    """Write the RTL of one core into out_dir; return the metadata (also in metadata.json).

    Called through generate_rtl (which checks the options and out_dir first). Of the options:
    datapath overrides keys of EATT_DATAPATH (E-ATT only: how Q/K and the scores are
    built; every choice is bit-exact, they differ in resources).
    adder_levels: 0 = the fixed pipeline (ALIGNMENT_LATENCY / ATTENTION_LATENCY); N >= 1 = at
    most N adder levels between registers in the adder trees (_Pipe), a longer latency, II 1.
    The directory is built beside out_dir and renamed into place, so a reader never sees half
    of it, and a second generation into the same directory leaves no stale file behind.
    """
    if level not in LEVELS:
        raise ValueError(f"level: must be one of {', '.join(LEVELS)}, got {level!r}")
    options = BuildOptions() if options is None else options
    adder_levels = options.adder_levels
    opts = _eatt_datapath(options.datapath)
    binarized = mechanism_of(cfg).binarized  # E-ATT's datapath options
    if adder_levels and binarized and opts["scores"] == "min":
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
        hand_written += [RECIP_NORMALIZE_FILE, PIECE_MULT_FILE]
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
    if binarized:
        meta["eatt_datapath"] = opts
    write_rtl_dir(out, {top_file: text}, hand_written, weights, meta)
    return meta
