"""The alignment stage traced with da4ml: its LUT estimate, its Verilog, and a dot-core peer.

da4ml (distributed arithmetic for ML) traces numpy-style fixed-point code into an adder graph:
every product of a variable with a constant becomes shifts and additions (the CMVM solver
shares partial sums), a product of two variables stays a ``multiplier``. We trace the golden
model's alignment arithmetic (quant/golden.py, ``project_qk`` then ``scores``) for both kinds:

    E-ATT:  Q = floor((X > tau) @ W_Q / 2**q_shift),  K likewise,  S = -sum |Q - K|
    dot:    Q = floor(X @ W_Q / 2**q_shift),          K likewise,  S = Q . K

and use the result three ways:

* :func:`estimate` -- da4ml's own cost (its LUT estimate) and adder depth, beside Yosys in
  ``eatt resources`` and in bench/rtl_compare.py;
* :func:`write_rtl` -- da4ml's pipelined Verilog in an RTL directory that
  :func:`eatt.rtl_sim.resources.resources` can synthesize. For the vanilla core this is the strong
  all-fabric-for-constants peer: constant-weight products as shift-add (no DSP48E1), only the
  l_q * l_k * d variable products Q.K left as multipliers (DSP48E1 in Yosys, fabric with
  ``-nodsp``);
* :func:`check` -- da4ml's compiled interpreter on random and edge vectors against the golden
  model, bit for bit, so the traced design is the same function as every other level.

Our generated E-ATT alignment (rtl_sim/generate.py) stays hand-structured: at (4, 8) it takes
fewer LUTs in Yosys than da4ml's trace of the same arithmetic (docs/rtl.md has the numbers).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from eatt.config import CoreConfig, atomic_write_text
from eatt.mechanisms import QueryKey, core_kinds, mechanism_of
from eatt.mechanisms.l1 import L1
from eatt.quant.golden import (
    CoreWeights,
    GoldenCore,
    derive_formats,
    edge_inputs,
    first_mismatch,
    random_inputs,
)

__all__ = ["check", "estimate", "trace_alignment", "write_rtl"]

#: da4ml's opcode of a product of two variables (da4ml.types.Op, codegen's ``multiplier``)
_MULTIPLY = 7


def _da4ml():
    """Import da4ml lazily (a one-line error when it is missing)."""
    try:
        from da4ml.codegen import RTLModel
        from da4ml.trace import FixedVariableArrayInput, HWConfig, comb_trace
        from da4ml.trace.ops import quantize
    except ImportError as err:  # pragma: no cover - da4ml is a declared dependency
        raise RuntimeError(f"da4ml is not installed ({err}); pip install da4ml") from None
    return FixedVariableArrayInput, HWConfig, comb_trace, quantize, RTLModel


def trace_alignment(cfg: CoreConfig, weights: CoreWeights):
    """da4ml CombLogic of the alignment: input (2, len, dim) codes -> scores (heads, l_q, l_k).

    The input vector is X (len_q x dim) then Y (len_k x dim), row-major, as integer codes of
    the <in_bits, in_frac> format; the outputs are the golden model's integer scores in the
    order of ``GoldenCore.scores(...)[i]`` flattened (head, query, key).
    """
    if cfg.kind not in core_kinds() or not isinstance(mechanism_of(cfg), QueryKey):
        raise ValueError(f"kind: da4ml traces the eatt and vanilla alignments, not {cfg.kind!r}")
    l1 = isinstance(mechanism_of(cfg), L1)
    weights.check(cfg)
    array_input, hwconfig, comb_trace, quantize, _ = _da4ml()
    f = derive_formats(cfg)
    n_in = (cfg.len_q + cfg.len_k) * cfg.dim
    inp = array_input((n_in,), hwconf=hwconfig(1, -1, -1))
    codes = quantize(inp, 1, cfg.in_bits - 1, 0)  # signed integers of in_bits bits
    x = codes[: cfg.len_q * cfg.dim].reshape(cfg.len_q, cfg.dim)
    y = codes[cfg.len_q * cfg.dim :].reshape(cfg.len_k, cfg.dim)
    if l1:
        x, y = x > cfg.tau_int, y > cfg.tau_int  # Eq. 4: strict >, 1-bit
    down = 2.0**-f.q_shift  # the requantizing shift is wiring; quantize() floors (TRN)
    q = quantize((x @ weights.wq.astype(np.float64)) * down, 1, cfg.qk_bits - 1, 0)
    k = quantize((y @ weights.wk.astype(np.float64)) * down, 1, cfg.qk_bits - 1, 0)
    heads = []
    for h in range(cfg.heads):
        cols = slice(h * cfg.d_head, (h + 1) * cfg.d_head)
        qh, kh = q[:, cols], k[:, cols]
        if l1:
            heads.append(-np.sum(np.abs(qh[:, None, :] - kh[None, :, :]), axis=-1))  # Eq. 10
        else:
            heads.append(qh @ kh.T)
    scores = np.stack(heads).ravel()
    return comb_trace(inp, scores)


def estimate(cfg: CoreConfig, weights: CoreWeights) -> dict:
    """da4ml's cost of the traced alignment.

    ``LUT_estimate`` is da4ml's cost (its LUT model of the adders, multipliers and muxes),
    ``adder_depth`` its longest path in adder delays, ``multipliers`` the products of two
    variables left after distributed arithmetic (0 for E-ATT: Eq. 6-10 need none).
    """
    comb = trace_alignment(cfg, weights)
    depth = comb.latency
    return {
        "LUT_estimate": int(round(comb.cost)),
        "adder_depth": float(max(depth)) if len(depth) else 0.0,
        "ops": len(comb.ops),
        "multipliers": sum(1 for op in comb.ops if op.opcode == _MULTIPLY),
        "tool": "da4ml",
    }


def check(cfg: CoreConfig, weights: CoreWeights, vectors: int = 1000, seed: int = 0) -> dict:
    """Run the trace in da4ml's interpreter on edge + random vectors; compare with golden."""
    comb = trace_alignment(cfg, weights)
    ex, ey = edge_inputs(cfg)
    rx, ry = random_inputs(cfg, vectors, seed=seed)
    x, y = np.concatenate([ex, rx]), np.concatenate([ey, ry])
    golden = GoldenCore(cfg, weights)
    q, k = golden.project_qk(x, y)
    expected = golden.scores(q, k).reshape(len(x), -1)
    data = np.concatenate([x.reshape(len(x), -1), y.reshape(len(y), -1)], axis=1)
    got = np.asarray(comb.predict(data.astype(np.float64), n_threads=1))
    got = np.rint(got).astype(np.int64).reshape(expected.shape)
    mismatch = first_mismatch(expected, got)
    return {
        "vectors": len(x),
        "mismatches": int(np.any(expected != got, axis=1).sum()),
        "first_mismatch": mismatch,
    }


def write_rtl(
    cfg: CoreConfig,
    weights: CoreWeights,
    out_dir: str | os.PathLike,
    latency_cutoff: float = 5.0,
) -> dict:
    """da4ml's pipelined Verilog of the alignment in ``out_dir`` with our metadata.json.

    ``latency_cutoff`` is da4ml's pipelining knob (adder delays per register stage). The
    directory is for synthesis (``eatt resources``); it has no ap_ctrl_hs handshake, so its
    interface says ``da4ml-pipeline`` and ``eatt sim`` does not drive it.
    """
    *_, rtl_model = _da4ml()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    comb = trace_alignment(cfg, weights)
    top = f"align_{cfg.kind}_da4ml"
    model = rtl_model(comb, top, out / "da4ml", latency_cutoff=latency_cutoff)
    model.write()
    src = out / "da4ml" / "src"
    stages = sorted(p.name for p in src.glob(f"{top}_stage*.v"))
    # static/lookup_table.v names a memory file that only exists when the design has tables
    static = sorted(p.name for p in (src / "static").glob("*.v") if p.name != "lookup_table.v")
    sources = [f"da4ml/src/{top}.v", *(f"da4ml/src/{s}" for s in stages)]
    sources += [f"da4ml/src/static/{s}" for s in static]
    np.savez(out / "weights.npz", **{n: getattr(weights, n) for n in CoreWeights.NAMES})
    meta = {
        "config": cfg.to_dict(),
        "level": "alignment",
        "top": top,
        "sources": sources,
        "weights": "weights.npz",
        "interface": {"protocol": "da4ml-pipeline", "clock": "clk"},
        "latency_cycles": len(model._pipe.solutions) if model._pipe is not None else 0,
        "generator": "da4ml",
        "da4ml": {"LUT_estimate": int(round(comb.cost)), "latency_cutoff": latency_cutoff},
    }
    atomic_write_text(out / "metadata.json", json.dumps(meta, indent=2) + "\n")
    return meta
