"""E-ATT's adder-only alignment (Wan et al., Findings of ACL 2022): Q and K projected from
binarized inputs (Eq. 4-9: rows of W selected and added), scored by the negative L1 distance
S = -sum_d |q_d - k_d| (Eq. 10)."""

from __future__ import annotations

from dataclasses import dataclass

from eatt.mechanisms.base import QueryKey, l1_scores_int


@dataclass(frozen=True)
class L1(QueryKey):
    """E-ATT: S = -sum_d |q_d - k_d| on Q, K projected from binarized inputs (Eq. 4, 10)."""

    def q_accumulator(self, cfg):
        # binarized inputs select rows of W_Q: at most dim rows of |w| <= weight_max are added
        return cfg.dim * cfg.weight_max, 2.0**-cfg.weight_frac

    def score_format(self, cfg, qk_abs, q_lsb):
        return cfg.d_head * (2 * qk_abs - 1), q_lsb  # |a - b| <= 2**qk_bits - 1

    def scores_int(self, q, k):
        return l1_scores_int(q, k)

    def scores_real(self, q, k):
        return -abs(q[..., :, None, :] - k[..., None, :, :]).sum(-1)

    def qk_error(self, cfg, weights, delta):
        # | |q - k| - |q^ - k^| | <= |dq - dk| <= delta, since dq, dk both lie in [0, delta]
        return cfg.d_head * delta

    def float_mismatch(self, float_module):
        selection, score = float_module.selection, float_module.score
        if (selection, score) != ("binary", "l1"):
            return (
                f"EAttention(selection={selection!r}, score={score!r}) has no hardware core "
                "(only selection='binary', score='l1' -> kind eatt)"
            )
        return None

    def alignment_ops(self, len_q, len_k, dim, heads, density):
        rows_in = len_q + len_k  # input rows that feed the Q and K projections
        pairs = len_q * len_k * dim  # per-head score terms, summed over heads
        selected = round(density * dim)  # expected ones per binarized input row
        accumulate = rows_in * max(selected - 1, 0) * dim  # the selected rows of W, added
        compare = rows_in * dim  # the binarization
        l1 = 2 * pairs  # subtract, then abs-and-accumulate
        return compare + accumulate + l1, 0, rows_in * dim * dim

    def paper_ops(self, length, dim):
        # Appendix A verbatim: the alignment needs only additions (2 l d binarization + l^2 d
        # L1); Q and K each select rows of a d x d weight for every one of l inputs: 2 l d^2
        # selections. The values and W_O (and the FFN) multiply as vanilla's do.
        ld2, l2d, ld = length * dim * dim, length * length * dim, length * dim
        sel = 2 * ld2
        return {
            "alignment": (2 * ld + l2d, 0, sel),
            "attention": (ld2 + 2 * ld + 2 * l2d, ld2 + l2d, sel),
            "block": (10 * ld2 + 2 * ld + 2 * l2d, 10 * ld2 + l2d, sel),
        }


EATT = L1(
    name="eatt",
    kind="eatt",
    title="E-ATT",
    paper="E-ATT (Wan et al., Findings of ACL 2022), Eq. 4 and 10",
    float_module="eatt.model.attention:EAttention",
    attend="eatt.model.functional:l1_attention",
    binarized=True,
    hls_score="l1",
    rtl_score=0,
    folded=True,
    folded_passes=("v",),  # K and Q on the select walk beside it
)
