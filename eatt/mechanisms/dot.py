"""Vanilla attention's alignment, the peer: S = q . k of projected queries and keys (scaled
dot-product attention, Vaswani et al. 2017)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eatt.mechanisms.base import QueryKey, macs_by_level, matmul_int


@dataclass(frozen=True)
class Dot(QueryKey):
    """Vanilla: S = q . k (multiply-accumulates)."""

    def q_accumulator(self, cfg):
        bound = cfg.dim * 2 ** (cfg.in_bits - 1) * cfg.weight_max
        return bound, 2.0 ** -(cfg.weight_frac + cfg.in_frac)

    def score_format(self, cfg, qk_abs, q_lsb):
        return cfg.d_head * qk_abs * qk_abs, q_lsb * q_lsb

    def scores_int(self, q, k):
        return matmul_int(q, np.swapaxes(k, -1, -2))

    def scores_real(self, q, k):
        return q @ k.swapaxes(-1, -2)

    def alignment_ops(self, len_q, len_k, dim, heads, density):
        # the projections, then the products of the scores
        macs = (len_q + len_k) * dim * dim + len_q * len_k * dim
        return macs, macs, 0

    def qk_error(self, cfg, weights, delta):
        x_abs = 2.0 ** (cfg.in_bits - 1) * 2.0**-cfg.in_frac
        m_q = np.abs(weights.wq).sum(axis=0) * 2.0**-cfg.weight_frac * x_abs
        m_k = np.abs(weights.wk).sum(axis=0) * 2.0**-cfg.weight_frac * x_abs
        per_dim = delta * (m_q + m_k) + delta * delta  # |q k - q^ k^| per product
        return per_dim.reshape(cfg.heads, cfg.d_head).sum(axis=1).max()

    def paper_ops(self, length, dim):  # Vaswani et al. 2017: every term is a multiply-add
        ld2, l2d = length * dim * dim, length * length * dim
        return macs_by_level(2 * ld2 + l2d, 3 * ld2 + 2 * l2d, ld2)


DOT = Dot(
    name="dot",
    kind="vanilla",
    title="vanilla",
    paper="Vaswani et al. 2017, scaled dot-product attention",
    float_module="eatt.model.attention:DotProductAttention",
    attend="eatt.model.functional:dot_attention",
    hls_score="dot",
    rtl_score=1,
    folded=True,
)
