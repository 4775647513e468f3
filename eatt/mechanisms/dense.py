"""The Dense Synthesizer's alignment (Tay et al., ICML 2021, Eq. 2; E-ATT's Table 2 prices it):
each query row predicts its own scores over the key positions with a two-layer projection,
S_i = relu(x_i W_1) W_2, W_1 (dim, dim) and W_2 (dim, heads * len_k), no keys involved.

On the integer grid: the hidden layer H = relu(X W_1) is requantized by the formats' q_shift
into qk_bits (a floor; relu first or last is the same), then S = H W_2 exactly. The hardware
core has no biases (the float twin is built without them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eatt.mechanisms.base import Synthesized, macs_by_level, matmul_int, requantize, split_heads


@dataclass(frozen=True)
class Dense(Synthesized):
    """Dense: S[h, i, j] = (relu(x_i W_1) W_2)[h * len_k + j]."""

    def layers(self, cfg):
        return (("w1", "w1", cfg.dim, cfg.dim), ("w2", "w2", cfg.dim, cfg.heads * cfg.len_k))

    def q_accumulator(self, cfg):
        bound = cfg.dim * 2 ** (cfg.in_bits - 1) * cfg.weight_max
        return bound, 2.0 ** -(cfg.weight_frac + cfg.in_frac)

    def score_format(self, cfg, qk_abs, q_lsb):
        # hidden codes lie in [0, qk_abs - 1] after the relu
        return cfg.dim * (qk_abs - 1) * cfg.weight_max, q_lsb * 2.0**-cfg.weight_frac

    def align(self, cfg, formats, weights, x, y):
        hidden = np.maximum(requantize(matmul_int(x, weights.w1), formats.q_shift), 0)
        scores = split_heads(matmul_int(hidden, weights.w2), cfg.heads)
        return {"hidden": hidden, "scores": scores}

    def qk_error(self, cfg, weights, delta):
        # each hidden unit drops less than delta: a score moves by at most delta * sum |w2|
        return float(delta * (np.abs(weights.w2).sum(axis=0).max() * 2.0**-cfg.weight_frac))

    def alignment_ops(self, len_q, len_k, dim, heads, density):
        macs = len_q * dim * dim + len_q * dim * heads * len_k  # W_1, then W_2
        return macs, macs, 0

    def synthesized_scores(self, core, xq):
        hidden = core.requantized("w1", xq, relu=True)
        return split_heads(core.w2(hidden), core.cfg.heads)

    def float_options(self, cfg):
        return {"max_len": cfg.len_k, "mlp_bias": False}

    def float_weights(self, cfg, float_module):
        for attr in ("w1", "w2"):
            if getattr(float_module, attr).bias is not None:
                raise ValueError(f"bias: {attr} has a bias; the hardware core has none")
        if float_module.max_len < cfg.len_k:
            raise ValueError(
                f"len_k: the config says {cfg.len_k} but the float module's max_len is "
                f"{float_module.max_len}"
            )
        w2 = float_module.w2.weight.detach().T.reshape(cfg.dim, cfg.heads, float_module.max_len)
        return {
            "w1": float_module.w1.weight.detach().T,
            "w2": w2[:, :, : cfg.len_k].reshape(cfg.dim, cfg.heads * cfg.len_k),
        }

    def folded_score_chunks(self, cfg, simd):
        return cfg.dim // simd  # a lane walks the whole hidden token against W_2's column

    def score_rom_words(self, cfg, weights, lanes, simd):
        # word (h KB + jb) DC + c: lane l's SIMD rows c*simd.. of W_2's column h len_k + j,
        # j = jb lanes + l, at fields l*simd + t
        kb, dc = cfg.len_k // lanes, cfg.dim // simd
        w2 = np.asarray(weights.w2).reshape(dc, simd, cfg.heads, kb, lanes)  # (c, t, h, jb, l)
        return w2.transpose(2, 3, 0, 4, 1).reshape(cfg.heads * kb * dc, lanes * simd)

    def paper_ops(self, length, dim):  # scores from X through W_1, W_2; no Q or K
        ld2, l2d = length * dim * dim, length * length * dim
        return macs_by_level(ld2 + l2d, 2 * ld2 + 2 * l2d, ld2)


DENSE = Dense(
    name="dense",
    kind="dense",
    title="Dense",
    paper="Dense Synthesizer (Tay et al., ICML 2021), Eq. 2",
    float_module="eatt.model.synthesizer:DenseSynthesizer",
    hls_score="dense",
    hls_header="nnet_utils/nnet_dense_score.h",
    rtl_front="dense",
    rtl_score=2,
    folded=True,
    folded_passes=("v", "q"),  # V, then the hidden layer in Q's place (relu)
    folded_relu=True,
    folded_roms=(("WQ_FILE", "w1"), ("WS_FILE", "w2")),
)
