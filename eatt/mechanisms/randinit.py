"""The Random Synthesizer's alignment, "RandInit" (Tay et al., ICML 2021; E-ATT's Table 2):
a learned score matrix per head, R (heads, len_q, len_k), randomly initialized and trained,
input-independent. Its scores cost no operation: the hardware reads them.

As a weight it is the linear layer ``r`` (heads * len_q, len_k) that one-hot query positions
would select rows of: S[h, i, j] = r[h * len_q + i, j], codes of <weight_bits, weight_frac>."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eatt.mechanisms.base import Synthesized, macs_by_level


@dataclass(frozen=True)
class RandInit(Synthesized):
    """RandInit: S[h, i, j] = R[h, i, j], the same for every input."""

    def layers(self, cfg):
        return (("r", "random", cfg.heads * cfg.len_q, cfg.len_k),)

    def q_accumulator(self, cfg):
        return 1, 1.0  # no projection: the formats' q_shift is 0 and unused

    def score_format(self, cfg, qk_abs, q_lsb):
        return cfg.weight_max, 2.0**-cfg.weight_frac

    def align(self, cfg, formats, weights, x, y):
        r = weights.r.reshape(cfg.heads, cfg.len_q, cfg.len_k)
        return {"scores": np.ascontiguousarray(np.broadcast_to(r, (len(x),) + r.shape))}

    def weights_at_rows(self, cfg, weights, start, count):
        r = np.asarray(weights["r"]).reshape(cfg.heads, cfg.len_q, cfg.len_k)
        rows = r[:, start : start + count].reshape(cfg.heads * count, cfg.len_k)
        return {**weights, "r": np.ascontiguousarray(rows)}

    def qk_error(self, cfg, weights, delta):
        return 0.0  # the scores are the weights themselves

    def alignment_ops(self, len_q, len_k, dim, heads, density):
        return 0, 0, 0

    def synthesized_scores(self, core, xq):
        cfg = core.cfg
        rows = core.random.weight.new_ones(cfg.heads * cfg.len_q).diag()  # one-hot positions
        r = core.random(rows).reshape(cfg.heads, cfg.len_q, cfg.len_k)
        return r.expand(xq.shape[0], -1, -1, -1)

    def float_options(self, cfg):
        return {"max_len": max(cfg.len_q, cfg.len_k)}

    def float_weights(self, cfg, float_module):
        if float_module.max_len < max(cfg.len_q, cfg.len_k):
            raise ValueError(
                f"len_q, len_k: the config says {cfg.len_q}, {cfg.len_k} but the float "
                f"module's max_len is {float_module.max_len}"
            )
        r = float_module.random_scores.detach()[:, : cfg.len_q, : cfg.len_k]
        return {"r": r.reshape(cfg.heads * cfg.len_q, cfg.len_k)}

    def set_float_weights(self, cfg, float_module, weights):
        float_module.random_scores.zero_()
        r = weights["r"].reshape(cfg.heads, cfg.len_q, cfg.len_k)
        float_module.random_scores[:, : cfg.len_q, : cfg.len_k] = r

    def paper_ops(self, length, dim):  # trained l x l scores: nothing to compute
        ld2, l2d = length * dim * dim, length * length * dim
        return macs_by_level(0, ld2 + l2d, ld2)


RANDINIT = RandInit(
    name="randinit",
    kind="randinit",
    title="RandInit",
    paper="Random Synthesizer (Tay et al., ICML 2021)",
    float_module="eatt.model.synthesizer:RandomSynthesizer",
    hls_score="randinit",
    hls_header="nnet_utils/nnet_randinit_score.h",
    rtl_front="randinit",
    folded=True,
)
