"""Golden model vs the float PyTorch module, within a bound derived from the formats.

The float module (EAttention / DotProductAttention from eatt.model) gets the golden model's
weights dequantized, and the inputs dequantized, so the only differences are the golden model's
declared lossy steps. `float_error_bound` adds up what each step can contribute (derivation in
docs/golden.md, section "Float bound"); a result outside it means one of the two is wrong.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from eatt.config import CoreConfig
from eatt.mechanisms import mechanism_of
from eatt.quant.golden import CoreWeights, GoldenCore, derive_formats, visible_keys


def to_float_module(cfg: CoreConfig, weights: CoreWeights, dtype=None):
    """The float twin of a core: same weights as real numbers, in float64 by default."""
    dtype = dtype or torch.float64
    mechanism = mechanism_of(cfg)
    module = mechanism.float_core(cfg).to(torch.float64)
    lsb = 2.0**-cfg.weight_frac
    # golden weights are (in, out) as in Q = X W (Eq. 1); nn.Linear stores (out, in)
    real = {k: torch.from_numpy(w.astype(np.float64) * lsb) for k, w in weights.as_dict().items()}
    with torch.no_grad():
        mechanism.set_float_weights(cfg, module, real)
        for name, proj in (("wv", "v_proj"), ("wo", "o_proj")):
            getattr(module, proj).weight.copy_(real[name].T)
    return module.to(dtype).eval()


def float_forward(
    cfg: CoreConfig, weights: CoreWeights, x: np.ndarray, y: np.ndarray, masks: dict | None = None
) -> np.ndarray:
    """Run the float module on dequantized integer inputs (and the core's mask inputs, as
    GoldenCore.forward takes them); returns real outputs (numpy)."""
    module = to_float_module(cfg, weights)
    scale = 2.0**-cfg.in_frac
    vis = visible_keys(cfg, len(x), masks or {})
    with torch.no_grad():
        xt = torch.from_numpy(np.asarray(x, dtype=np.float64) * scale)
        yt = torch.from_numpy(np.asarray(y, dtype=np.float64) * scale)
        visible = None if vis is None else torch.from_numpy(vis[:, 0])
        return module(xt, yt, visible=visible).numpy()


def float_error_bound(cfg: CoreConfig, weights: CoreWeights) -> float:
    """Largest |golden output (real) - float output| any input can produce, in real units."""
    f = derive_formats(cfg)
    w_lsb = 2.0**-cfg.weight_frac
    x_abs = 2.0 ** (cfg.in_bits - 1) * 2.0**-cfg.in_frac

    # |V| of the float model, per column (weights are constants, so use them), and of V-hat.
    m_v = (np.abs(weights.wv).sum(axis=0) * w_lsb * x_abs).max()
    m_vhat = m_v + f.v_lsb  # V-hat = floor(V / lsb) * lsb lies in (V - lsb, V]

    # Q, K requantization by floor: each element drops less than delta.
    mech = mechanism_of(cfg)
    _, acc_lsb = mech.q_accumulator(cfg)
    delta = (2**f.q_shift - 1) * acc_lsb
    eps_qk = mech.scale(cfg.d_head) * mech.qk_error(cfg, weights, delta)

    # The exp table reads the left edge of a bin of 2**exp_shift score units: a logit moves up
    # by at most (2**exp_shift - 1) score units. Logit shifts within [a, b] change each softmax
    # weight by a factor within exp(+-(b - a)), so the weights move by at most exp(b - a) - 1
    # in total variation (sum of |p' - p|).
    bin_width = (2**f.exp_shift - 1) * f.score_lsb
    shift = 2 * eps_qk + bin_width  # past ~709 expm1 overflows: the cap below applies anyway
    tv_logits = math.expm1(shift) if shift < 700 else math.inf
    # Rounding each exp to an integer (error <= 1/2, and past the table the value is < 1/2):
    # sum |p' - p| <= 2 * sum|e' - e| / E' with E' >= 2**exp_frac (the max entry is EXP[0]).
    tv_round = cfg.len_k / 2.0**cfg.exp_frac
    # Reciprocal: bin middle (relative error <= 2**-(k+1)) and entry rounding (<= 2**-recip_frac).
    rel_recip = 2.0 ** -(f.recip_index_bits + 1) + 2.0**-cfg.recip_frac
    # Total variation never exceeds 2 (two distributions): at coarse formats the bound then
    # says only "anywhere in V's range", which is the truth for logits that large.
    tv = min(2.0, tv_logits + tv_round)
    err_attn = (
        tv * m_vhat  # weights moved: sum (p' - p) V-hat
        + f.v_lsb  # V requantized by floor
        + m_vhat * rel_recip  # |O| <= max |V-hat| before scaling
        + 0.5 * f.v_lsb  # round half up
        + f.v_lsb  # clamp to the v_bits range (the float value may sit within one LSB above it)
    )
    # Output projection: error spreads through |W_O| column sums, then the floor of out_shift.
    wo_col = np.abs(weights.wo).sum(axis=0).max() * w_lsb
    return float(wo_col * err_attn + f.out_lsb)


def compare_with_float(
    cfg: CoreConfig, weights: CoreWeights, x: np.ndarray, y: np.ndarray, masks: dict | None = None
) -> dict:
    """Golden vs float on the given vectors: max error, the bound, and whether it holds."""
    golden = GoldenCore(cfg, weights)
    out_real = golden.forward(x, y, masks=masks) * golden.formats.out_lsb
    ref = float_forward(cfg, weights, x, y, masks)
    err = np.abs(out_real - ref)
    bound = float_error_bound(cfg, weights)
    worst = np.unravel_index(int(np.argmax(err)), err.shape) if err.size else (0,)
    return {
        "vectors": int(len(np.asarray(x).reshape(-1, cfg.len_q, cfg.dim))),
        "max_abs_error": float(err.max(initial=0.0)),
        "bound": bound,
        "out_lsb": golden.formats.out_lsb,
        "within_bound": bool(err.max(initial=0.0) <= bound),
        "worst_vector": int(worst[0]),
    }
