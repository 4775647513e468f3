"""Each unit's golden self-check (the ``golden_check`` stage of eatt/units.py): widths hold on
real data, and the float model agrees. eatt.quant.check.golden_check dispatches to them.

Kinds of the core: random vectors plus edge vectors through GoldenCore, every intermediate
checked against the width docs/golden.md derives for it, and the outputs compared with the
float PyTorch twin within float_check.float_error_bound (core_golden_check).

Kind window (eatt.quant.window, docs/window.md): random steps (random_window_inputs) plus the
edge steps of quant.export.window_edge_inputs through WindowGolden, its intermediates checked
against derive_window_formats, and O compared with a float64 softmax over the same window
(exact position term g d^2 / (2 sigma^2), log counts, unshifted Q) within window_float_bound
(window_golden_check).
"""

from __future__ import annotations

import math

import numpy as np

from eatt.config import CoreConfig
from eatt.mechanisms import mechanism_of
from eatt.quant.float_check import compare_with_float
from eatt.quant.golden import (
    CoreWeights,
    GoldenCore,
    edge_inputs,
    random_inputs,
    vector_masks,
)
from eatt.quant.window import WindowGolden, derive_window_formats, window_bounds


def width_violations(golden: GoldenCore, stages: dict[str, np.ndarray]) -> list[str]:
    """Intermediates outside their declared range: each would be a silent overflow in hardware."""
    cfg, f = golden.cfg, golden.formats

    def signed(bits: int) -> tuple[int, int]:
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    limits = {
        "q": signed(cfg.qk_bits),  # the query-key mechanisms' projections
        "k": signed(cfg.qk_bits),
        "hidden": signed(cfg.qk_bits),  # Dense's hidden layer
        "v": signed(cfg.v_bits),
        "scores": (-f.score_bound, f.score_bound),
        "exp": (0, 2**cfg.exp_frac),
        "attn": signed(cfg.v_bits),
        "out": signed(cfg.out_bits),
    }
    problems = []
    for name, (lo, hi) in limits.items():
        t = stages.get(name, np.zeros(0))  # the stages the mechanism has
        if t.size and (t.min() < lo or t.max() > hi):
            problems.append(f"{name} in [{t.min()}, {t.max()}] exceeds [{lo}, {hi}]")
    return problems


def core_golden_check(
    cfg: CoreConfig, weights: CoreWeights, vectors: int = 1000, seed: int = 1
) -> dict:
    golden = GoldenCore(cfg, weights)
    x, y = random_inputs(cfg, vectors, seed=seed)
    ex, ey = edge_inputs(cfg)
    x, y = np.concatenate([x, ex]), np.concatenate([y, ey])
    masks = vector_masks(cfg, vectors, seed, len(ex))
    stages = golden.forward(x, y, intermediates=True, masks=masks)
    problems = width_violations(golden, stages)
    cmp = compare_with_float(cfg, weights, x, y, masks)
    f = golden.formats
    return {
        "config": cfg.to_dict(),
        "formats": f.to_dict(),
        "summary": [
            _formats_line(cfg, f)
            + f", out >> {f.out_shift} into {cfg.out_bits} bits (lsb {f.out_lsb:g})"
        ],
        "vectors": vectors,
        "edge_vectors": int(len(ex)),
        "width_violations": problems,
        "float": cmp,
        "ok": not problems and cmp["within_bound"],
    }


def window_float_forward(cfg: CoreConfig, weights: CoreWeights, steps: dict) -> np.ndarray:
    """The unit in float64 on the steps' codes: real O (n, dim).

    Q = x W_Q unshifted (binarized x for E-ATT), scores with the 1/sqrt(d_head) scale of the
    core, the exact position term g (s - p)^2 / (2 sigma^2) (local-p Eq. 10, Flexible Eq. 5-7),
    softmax over the window with weights c_s (L0Drop Algorithm 1), values V = codes * v_lsb.
    """
    wf = derive_window_formats(cfg)
    f = wf.core
    x = steps["x"]
    n = len(x)
    mech = mechanism_of(cfg)
    _, acc_lsb = mech.q_accumulator(cfg)
    q = mech.inputs_for_qk(x, cfg.tau_int) @ weights.wq * acc_lsb
    k = steps["keys"] * f.q_lsb
    v = steps["values"] * f.v_lsb
    qh = q.reshape(n, cfg.heads, 1, cfg.d_head)
    kh = k.reshape(n, cfg.len_k, cfg.heads, cfg.d_head).transpose(0, 2, 1, 3)
    vh = v.reshape(n, cfg.len_k, cfg.heads, cfg.d_head).transpose(0, 2, 1, 3)
    scale = 1.0 / np.sqrt(cfg.d_head)
    s = mech.scores_real(qh, kh)[:, :, 0, :] * scale  # (n, heads, len_k)
    p = steps["p"]
    pos = np.arange(cfg.len_k)[None, :]
    lo, hi = window_bounds(p, steps["w"], steps["length"])
    mask = (pos >= lo[:, None]) & (pos <= hi[:, None])
    if cfg.position == "none" or wf.sigma == 0:
        pen = np.zeros((n, cfg.len_k))
    else:
        g = steps["g"] / cfg.g_levels if cfg.position == "flexible" else np.ones(n)
        pen = g[:, None] * (pos - p[:, None]) ** 2 / (2.0 * wf.sigma**2)
    logits = s - pen[:, None, :] + np.log(steps["counts"].astype(np.float64))[:, None, :]
    logits = np.where(mask[:, None, :], logits, -np.inf)
    logits = logits - logits.max(-1, keepdims=True)
    a = np.exp(logits)
    a /= a.sum(-1, keepdims=True)
    o = (a[..., None] * vh).sum(-2)  # (n, heads, d_head)
    return o.reshape(n, cfg.dim)


def window_float_bound(
    cfg: CoreConfig, weights: CoreWeights, counted_rows=None, exp_total=None
) -> float | np.ndarray:
    """Largest |golden O (real) - float O| a step can produce (float_error_bound's argument,
    docs/golden.md "Float bound", over a window with counts).

    Without counted_rows (sum of the counts in the window) and exp_total (the golden sum of the
    counted exps, smallest over heads) the worst case of the config: window_rows rows of count
    count_max over a sum of 2**exp_frac; with them (arrays), the bound of each step."""
    wf = derive_window_formats(cfg)
    f = wf.core
    scale = 1.0 / math.sqrt(cfg.d_head)
    if mechanism_of(cfg).binarized:  # the L1 score of binarized-input projections
        delta = (2**f.q_shift - 1) * 2.0**-cfg.weight_frac
        eps_qk = scale * cfg.d_head * delta  # the floor of Q moves |q - k| by < delta
    else:
        delta = (2**f.q_shift - 1) * 2.0 ** -(cfg.weight_frac + cfg.in_frac)
        eps_qk = scale * cfg.d_head * delta * 2.0 ** (wf.qk_code_bits - 1) * f.q_lsb
    # logit shifts: Q's floor (both signs), the exp table's bin, the table's rounding of P
    spread = 2 * eps_qk + (2**f.exp_shift - 1) * f.score_lsb + f.score_lsb
    tv_logits = math.expm1(spread)
    # each counted exp is rounded (<= 1/2) or lies past the table (< its far end); E >= 2**ef
    far = 2.0**cfg.exp_frac * math.exp(-(cfg.exp_table_size << f.exp_shift) * f.score_lsb)
    if counted_rows is None:
        counted_rows, exp_total = wf.window_rows * wf.count_max, 2.0**cfg.exp_frac
    tv_round = 2 * np.asarray(counted_rows) * max(0.5, far) / np.asarray(exp_total)
    rel_recip = 2.0 ** -(f.recip_index_bits + 1) + 2.0**-cfg.recip_frac
    tv = np.minimum(2.0, tv_logits + tv_round)
    m_v = 2.0 ** (wf.v_code_bits - 1) * f.v_lsb
    bound = tv * m_v + m_v * rel_recip + 0.5 * f.v_lsb + f.v_lsb
    return float(bound) if np.ndim(bound) == 0 else bound


def window_golden_check(
    cfg: CoreConfig, weights: CoreWeights, vectors: int = 1000, seed: int = 1
) -> dict:
    """golden_check for kind window: widths of every intermediate, and O vs float64."""
    # qonnx/onnx: the window check's vectors come from export; the core's check needs neither
    from eatt.quant.window_export import window_vectors

    golden = WindowGolden(cfg, weights)
    wf = golden.formats
    f = wf.core
    steps, n_edge = window_vectors(cfg, vectors, seed)
    st = golden.forward(**steps, intermediates=True)
    mask = st["mask"][:, None, :]

    def signed(bits: int) -> tuple[int, int]:
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    limits = {
        "q": (signed(wf.qk_code_bits), st["q"]),
        "scores": ((-f.score_bound, f.score_bound), st["scores"]),
        "penalty": ((0, wf.penalty_max), st["penalty"]),
        "logits": (
            (-(f.score_bound + wf.penalty_max), f.score_bound),
            st["logits"][mask.repeat(cfg.heads, axis=1)],
        ),
        "exp": ((0, wf.count_max * 2**cfg.exp_frac), st["exp"]),
        "attn": (signed(cfg.v_bits), st["attn"]),
    }
    problems = []
    for name, ((lo, hi), t) in limits.items():
        if t.size and (t.min() < lo or t.max() > hi):
            problems.append(f"{name} in [{t.min()}, {t.max()}] exceeds [{lo}, {hi}]")
    err = np.abs(st["attn"] * f.v_lsb - window_float_forward(cfg, weights, steps)).max(axis=1)
    counted_rows = np.where(st["mask"], steps["counts"], 0).sum(axis=1)
    bounds = window_float_bound(cfg, weights, counted_rows, st["exp"].sum(-1).min(axis=1))
    worst = int(np.argmax(err / bounds)) if err.size else 0
    fl = {
        "vectors": int(len(err)),
        "max_abs_error": float(err.max(initial=0.0)),
        # the per-step bound (counts of the window) at the step closest to its bound
        "bound": float(bounds[worst]) if err.size else 0.0,
        "max_error_over_bound": float((err / bounds).max(initial=0.0)),
        "config_bound": window_float_bound(cfg, weights),
        "out_lsb": f.v_lsb,
        "within_bound": bool((err <= bounds).all()),
        "worst_vector": worst,
    }
    return {
        "config": cfg.to_dict(),
        "formats": wf.to_dict(),
        "summary": [
            f"  window: window_score={cfg.window_score} window_d={cfg.window_d} "
            f"position={cfg.position} count_bits={cfg.count_bits}, at most "
            f"{wf.window_rows} rows per step (attention output O, V's format"
            + (", and the focus F per head, the next p" if cfg.position == "flexible" else "")
            + ")",
            _formats_line(cfg, wf.core) + f", position table up to {wf.penalty_max} score units",
        ],
        "float_note": " (per step; worst step shown)",
        "vectors": vectors,
        "edge_vectors": int(n_edge),
        "width_violations": problems,
        "float": fl,
        "ok": not problems and fl["within_bound"],
    }


def _formats_line(cfg: CoreConfig, f) -> str:
    return (
        f"  formats: Q/K >> {f.q_shift} into {cfg.qk_bits} bits (lsb {f.q_lsb:g}), "
        f"V >> {f.v_shift} into {cfg.v_bits} bits (lsb {f.v_lsb:g}), exp index >> {f.exp_shift}"
    )
