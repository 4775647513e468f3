"""Front ends of the Synthesizer mechanisms (eatt.mechanisms.dense, .randinit) in the unrolled
RTL: inputs, V, stage 0 registers and the scores ``sc [heads][len_q][len_k]`` that the
alignment and attention tops take from any front end (rtl_sim/emit_alignment.py ``_front_end``
for the query-key mechanisms). Each is named by its mechanism's ``rtl_front``.

- dense: H = relu((X W_1) >>> q_shift) registered at stage 0 (the hidden layer, qk bits), then
  S = H W_2 with constant weights (W_2 (dim, heads * len_k): column h * len_k + j is head h's
  key j). Y feeds only V.
- randinit: S is the constant matrix R (a weight, input-independent); X feeds nothing and Y
  only V.
"""

from __future__ import annotations

from eatt.config import CoreConfig
from eatt.quant.golden import CoreWeights, derive_formats
from eatt.rtl_sim.emit_top import _const_matmul, _inputs, _stage0, _values
from eatt.rtl_sim.pipeline import _Pipe
from eatt.rtl_sim.sv_writer import _lit, _Writer


def _unused(out: _Writer, names: list[str]) -> None:
    """Inputs a front end does not read (Verilator's -Wall would flag them)."""
    for name in names:
        out(f"    wire _unused_{name} = &{{1'b0, {name}}};")
    out("")


def dense_front(
    out: _Writer, pipe: _Pipe, cfg: CoreConfig, weights: CoreWeights, with_v: bool, opts: dict
) -> None:
    f = derive_formats(cfg)
    lq, lk, dim, heads = cfg.len_q, cfg.len_k, cfg.dim, cfg.heads
    aw, qs, qb, sb = f.q_acc_bits, f.q_shift, f.qk_code_bits, f.score_bits
    _inputs(out, cfg, ("x", "y") if with_v else ("x",))
    if not with_v:
        _unused(out, ["y"])
    out(f"    // ---- hidden layer X @ W_1: {aw}-bit accumulators (|acc| <= {f.q_acc_bound})")
    out(f"    logic signed [{aw - 1}:0] ha [{lq}][{dim}];")
    _const_matmul(out, pipe, "ha", "xe", lq, weights.w1, aw, "W_1")
    values = _values(out, pipe, cfg, weights) if with_v else []
    out("")
    out(f"    // ---- stage 0: relu of the hidden layer shifted by {qs} (floor), into {qb} bits")
    out(f"    logic signed [{qb - 1}:0] hq [{lq}][{dim}];")
    _stage0(out, pipe, [("hq", "ha", lq, dim, qb, qs), *values], relu=("hq",))
    out(f"    // ---- scores S = H @ W_2 ({dim} x {heads * lk}): head h's key j in column h*{lk}+j")
    out(f"    logic signed [{sb - 1}:0] sf [{lq}][{heads * lk}];")
    _const_matmul(out, pipe, "sf", "hq", lq, weights.w2, sb, "W_2")
    out(f"    logic signed [{sb - 1}:0] sc [{heads}][{lq}][{lk}];")
    for h in range(heads):
        for i in range(lq):
            for j in range(lk):
                out(f"    assign sc[{h}][{i}][{j}] = sf[{i}][{h * lk + j}];")
    out("")


def randinit_front(
    out: _Writer, pipe: _Pipe, cfg: CoreConfig, weights: CoreWeights, with_v: bool, opts: dict
) -> None:
    f = derive_formats(cfg)
    lq, lk, heads, sb = cfg.len_q, cfg.len_k, cfg.heads, f.score_bits
    _unused(out, ["x"] if with_v else ["x", "y"])
    if with_v:
        _inputs(out, cfg, ("y",))
        values = _values(out, pipe, cfg, weights)
        out("")
        out("    // ---- stage 0: V")
    else:
        values = []
        out("    // ---- stage 0: nothing to register (the scores are constants)")
    _stage0(out, pipe, values)
    r = weights.r.reshape(heads, lq, lk)
    out(f"    // ---- scores: the learned matrix R, {heads} x {lq} x {lk} constants")
    out(f"    logic signed [{sb - 1}:0] sc [{heads}][{lq}][{lk}];")
    for h in range(heads):
        for i in range(lq):
            for j in range(lk):
                out(f"    assign sc[{h}][{i}][{j}] = {_lit(int(r[h, i, j]), sb)};")
    out("")


#: the front ends by a mechanism's rtl_front name
FRONTS = {"dense": dense_front, "randinit": randinit_front}
