"""Attention mechanisms: the score functions, one object each, that every level asks.

A :class:`Mechanism` is one way of scoring a query against a key (the seed papers' word for it):
E-ATT's adder-only L1 score (``eatt``: Q and K projected from binarized inputs, S = -sum |q -
k|, E-ATT Eq. 4 and 10) and vanilla's dot product (``dot``: S = q . k, Vaswani et al. 2017).
Each says what its formats need (the accumulator of Q/K, the score bound), computes its integer
scores (the golden model) and its real scores (the float references), bounds the float error of
its Q/K requantization, and names its facets at the other levels: the float PyTorch module and
the torch attention function (loaded lazily by ``"module:attribute"`` path, with the signature
checked, so this module stays numpy-only), the HLS score type and the RTL score leaf.

A config names its mechanism by ``score_kind`` (CoreConfig: ``eatt`` for kind eatt, ``dot``
for kind vanilla; WindowConfig: its ``window_score``); :func:`mechanism_of` looks it up. The
integer helpers every mechanism shares (binarize_int, matmul_int, l1_scores_int) live here too;
eatt.quant.golden re-exports them. It sits beside eatt.units (the registry of hardware units):
the config, the float reference and every stage below it may ask it.
"""

from __future__ import annotations

import importlib
import inspect
import math
from dataclasses import dataclass

import numpy as np


# -- integer arithmetic the mechanisms share -------------------------------------------------------
def binarize_int(x: np.ndarray, tau_int: int) -> np.ndarray:
    """Eq. 4 on the integer grid: 1 where x > tau (x_int > floor(tau * 2**in_frac)), else 0."""
    return (x > tau_int).astype(np.int64)


def matmul_int(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of integer arrays, exact, as int64.

    Through float64 (BLAS) when ``inner * max|a| * max|b| < 2**53``: every product and partial
    sum is then an integer that float64 holds exactly, whatever the summation order; otherwise
    numpy's int64 matmul (several times slower).
    """
    if a.size and b.size:
        amax = max(abs(int(a.max())), abs(int(a.min())))
        bmax = max(abs(int(b.max())), abs(int(b.min())))
        if a.shape[-1] * amax * bmax < 2**53:
            return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64)
    return (a @ b).astype(np.int64, copy=False)


def l1_scores_int(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """S[..., i, j] = -sum_d |q[..., i, d] - k[..., j, d]| (Eq. 10 without the scale).

    Accumulated one feature d at a time (exact integers, so the order does not matter): no
    (..., len_q, len_k, d_head) temporary, several times faster than one reduction over it.
    """
    s = np.zeros(np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2]))
    s = s.astype(np.int64)
    for d in range(q.shape[-1]):
        s -= np.abs(q[..., :, d, None] - k[..., None, :, d])
    return s


# -- the mechanisms ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mechanism:
    """One score function and its facets (module docstring). Subclasses give the math."""

    #: the config's score_kind (and the CoreConfig kind that uses it)
    name: str
    kind: str
    #: Q and K are projected from binarized inputs (x > tau): additions only
    binarized: bool
    #: where it comes from
    paper: str
    #: the float reference module (eatt.model.attention) and the torch attention function
    float_module: str
    attend: str
    #: the HLS layer's score choice (nnet_attention_core.h) and the RTL score leaf's SCORE value
    hls_score: str
    rtl_score: int

    # the math -----------------------------------------------------------------------------------
    def q_accumulator(self, dim: int, weight_max: int, in_bits: int, weight_frac: int,
                      in_frac: int) -> tuple[int, float]:  # fmt: skip
        """(bound, lsb) of Q's and K's accumulator: the widest value X @ W_Q can reach."""
        raise NotImplementedError

    def score_format(self, d_head: int, qk_abs: int, q_lsb: float) -> tuple[int, float]:
        """(bound, lsb) of an integer score over d_head features of Q/K codes |c| <= qk_abs."""
        raise NotImplementedError

    def scores_int(self, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Integer scores S[..., i, j] of query rows q and key rows k (no 1/sqrt(d) scale)."""
        raise NotImplementedError

    def scores_real(self, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        """The same on real numbers, for the float references: numpy arrays or torch tensors
        (operators and methods both have)."""
        return self.scores_int(q, k)

    def qk_error(self, cfg, weights, delta: float) -> float:
        """Largest change of an (unscaled) real score when Q and K each drop less than
        ``delta`` to their floor (the requantization), for cfg and its integer weights."""
        raise NotImplementedError

    def alignment_ops(self, rows_in: int, dim: int, pairs: int, density: float) -> tuple:
        """(additions, multiplications, selections) of the alignment as the hardware core
        counts them (eatt.model.energy.core_counts): Q and K projected from ``rows_in`` input
        rows of ``dim``, then ``pairs`` per-feature score terms; ``density``: the share of ones
        in a binarized input row."""
        raise NotImplementedError

    def inputs_for_qk(self, x: np.ndarray, tau_int: int) -> np.ndarray:
        """What Q and K are projected from: the binarized inputs, or the inputs themselves."""
        return binarize_int(x, tau_int) if self.binarized else x

    # the facets at other levels -------------------------------------------------------------
    def load(self, facet: str):
        """The facet ``float_module`` or ``attend``, imported from its "module:attribute" path
        (torch only when asked), checked to take the arguments every mechanism's does."""
        path = getattr(self, facet)
        if path in _LOADED:
            return _LOADED[path]
        module, _, attr = path.partition(":")
        got = getattr(importlib.import_module(module), attr)
        wanted = FACET_PARAMETERS[facet]
        params = list(inspect.signature(got).parameters)
        if params[: len(wanted)] != list(wanted):
            raise TypeError(f"{path}: takes {params}, a mechanism's {facet} takes {wanted}")
        _LOADED[path] = got
        return got

    def float_core(self, dim: int, heads: int, tau: float):
        """The float reference module (torch) of this mechanism: ``tau`` where it binarizes."""
        options = {"tau": tau} if self.binarized else {}
        return self.load("float_module")(dim, heads, **options)


#: facets loaded so far, by path
_LOADED: dict = {}
#: the leading parameters each lazily loaded facet must take
FACET_PARAMETERS = {"float_module": ("dim", "heads"), "attend": ("q", "k", "v")}


class L1(Mechanism):
    """E-ATT: S = -sum_d |q_d - k_d| on Q, K projected from binarized inputs (Eq. 4, 10)."""

    def q_accumulator(self, dim, weight_max, in_bits, weight_frac, in_frac):
        # binarized inputs select rows of W_Q: at most dim rows of |w| <= weight_max are added
        return dim * weight_max, 2.0**-weight_frac

    def score_format(self, d_head, qk_abs, q_lsb):
        return d_head * (2 * qk_abs - 1), q_lsb  # |a - b| <= 2**qk_bits - 1

    def scores_int(self, q, k):
        return l1_scores_int(q, k)

    def scores_real(self, q, k):
        return -abs(q[..., :, None, :] - k[..., None, :, :]).sum(-1)

    def qk_error(self, cfg, weights, delta):
        # | |q - k| - |q^ - k^| | <= |dq - dk| <= delta, since dq, dk both lie in [0, delta]
        return cfg.d_head * delta

    def alignment_ops(self, rows_in, dim, pairs, density):
        selected = round(density * dim)  # expected ones per binarized input row
        accumulate = rows_in * max(selected - 1, 0) * dim  # the selected rows of W, added
        compare = rows_in * dim  # the binarization
        l1 = 2 * pairs  # subtract, then abs-and-accumulate
        return compare + accumulate + l1, 0, rows_in * dim * dim


class Dot(Mechanism):
    """Vanilla: S = q . k (scaled dot-product attention, Vaswani et al. 2017)."""

    def q_accumulator(self, dim, weight_max, in_bits, weight_frac, in_frac):
        return dim * 2 ** (in_bits - 1) * weight_max, 2.0 ** -(weight_frac + in_frac)

    def score_format(self, d_head, qk_abs, q_lsb):
        return d_head * qk_abs * qk_abs, q_lsb * q_lsb

    def scores_int(self, q, k):
        return matmul_int(q, np.swapaxes(k, -1, -2))

    def scores_real(self, q, k):
        return q @ k.swapaxes(-1, -2)

    def alignment_ops(self, rows_in, dim, pairs, density):
        macs = rows_in * dim * dim + pairs  # projections, then the products of the scores
        return macs, macs, 0

    def qk_error(self, cfg, weights, delta):
        x_abs = 2.0 ** (cfg.in_bits - 1) * 2.0**-cfg.in_frac
        m_q = np.abs(weights.wq).sum(axis=0) * 2.0**-cfg.weight_frac * x_abs
        m_k = np.abs(weights.wk).sum(axis=0) * 2.0**-cfg.weight_frac * x_abs
        per_dim = delta * (m_q + m_k) + delta * delta  # |q k - q^ k^| per product
        return per_dim.reshape(cfg.heads, cfg.d_head).sum(axis=1).max()


MECHANISMS: dict[str, Mechanism] = {
    m.name: m
    for m in (
        L1(
            name="eatt",
            kind="eatt",
            binarized=True,
            paper="E-ATT (Zhang et al. 2021), Eq. 4 and 10",
            float_module="eatt.model.attention:EAttention",
            attend="eatt.model.functional:l1_attention",
            hls_score="l1",
            rtl_score=0,
        ),
        Dot(
            name="dot",
            kind="vanilla",
            binarized=False,
            paper="Vaswani et al. 2017, scaled dot-product attention",
            float_module="eatt.model.attention:DotProductAttention",
            attend="eatt.model.functional:dot_attention",
            hls_score="dot",
            rtl_score=1,
        ),
    )
}


def mechanism_of(cfg) -> Mechanism:
    """The mechanism of a config (its ``score_kind``), of a score kind's name or of a core
    config's kind."""
    name = cfg if isinstance(cfg, str) else cfg.score_kind
    if name in MECHANISMS:
        return MECHANISMS[name]
    for mechanism in MECHANISMS.values():  # a core config's kind (vanilla: dot)
        if mechanism.kind == name:
            return mechanism
    known = ", ".join(MECHANISMS)
    raise ValueError(f"no attention mechanism {name!r} (known: {known})")


def scale_of(d_head: int) -> float:
    """The scores' 1/sqrt(d_head) (Eq. 10; Vaswani et al. Eq. 1)."""
    return 1.0 / math.sqrt(d_head)
