"""The mechanism interface and the integer arithmetic every mechanism shares.

A :class:`Mechanism` is one way of computing attention scores (the seed papers' word for it).
It owns its alignment: the weights it learns (``layers``), its integer scores from the core's
integer inputs (``align``: the golden model), its formats (the accumulator, the score bound),
the float error its requantization can add, its operation counts, the differentiable
surrogate of QAT (``surrogate``, on torch tensors it is handed: this module stays numpy-only)
and its facets at the other levels: the float PyTorch module (loaded lazily by
``"module:attribute"`` path, the signature checked), the HLS score type and the RTL score
leaf. What follows the scores (softmax over the visible keys, the weighted values, W_O) is the
core's and the same for every mechanism.

The mechanisms that score a query against a key, Q and K projected first (E-ATT's L1 and the
dot product), share :class:`QueryKey`; the Synthesizer's (Dense, RandInit) derive their scores
without keys.
"""

from __future__ import annotations

import importlib
import inspect
import math
from dataclasses import dataclass
from types import SimpleNamespace

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


def requantize(acc: np.ndarray, shift: int) -> np.ndarray:
    """Drop `shift` LSBs with an arithmetic right shift (floor), as the hardware does."""
    return acc >> shift if shift else acc


def split_heads(t: np.ndarray, heads: int):
    """(n, len, heads * w) -> (n, heads, len, w): head h owns columns h*w:(h+1)*w (numpy or
    torch)."""
    n, length, width = t.shape
    return t.reshape(n, length, heads, width // heads).swapaxes(1, 2)


def scale_of(d_head: int) -> float:
    """The scores' 1/sqrt(d_head) (Eq. 10; Vaswani et al. Eq. 1)."""
    return 1.0 / math.sqrt(d_head)


# -- the interface -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mechanism:
    """One score function and its facets (module docstring). Subclasses give the math."""

    #: the config's score_kind, and the CoreConfig kind that uses it
    name: str
    kind: str
    #: its name in reports and headings ("E-ATT", "vanilla", ...)
    title: str
    #: where it comes from
    paper: str
    #: the float reference module (its leading parameters: dim, heads)
    float_module: str
    #: Q and K are projected from binarized inputs (x > tau): additions only
    binarized: bool = False
    #: the scores are scaled by 1/sqrt(d_head) before the softmax (the exp table holds it)
    scaled: bool = True
    #: the HLS layer's score choice (nnet_attention_core.h) and the RTL score leaf's SCORE
    #: value; None: the mechanism has no kernel at that level yet (the flow stops before it)
    hls_score: str | None = None
    rtl_score: int | None = None
    #: the folded engine (rtl_sim/rtl/folded_attention.sv, nnet_folded_attention.h) has it
    folded: bool = False
    #: the folded engine's multiply walk: its passes before attention, in order ("k", "v":
    #: len_k tokens; "q": len_q tokens); E-ATT's select walk does K and Q beside its "v"
    folded_passes: tuple[str, ...] = ("k", "v", "q")
    #: its multiply walk's "q" pass ends in a relu (Dense's hidden layer, on the requantized code)
    folded_relu: bool = False
    #: the folded engine's ROM files of this mechanism's weights: (its parameter, the weight);
    #: W_V and W_O (WV_FILE, WO_FILE) every core has
    folded_roms: tuple[tuple[str, str], ...] = (("WQ_FILE", "wq"), ("WK_FILE", "wk"))
    #: the HLS header of its score type where it has one of its own (hls/templates)
    hls_header: str | None = None
    #: its front end in the unrolled RTL (rtl_sim/emit_synthesizer.py FRONTS) where it has one
    #: of its own; None: the query-key front end (rtl_sim/emit_alignment.py)
    rtl_front: str | None = None

    # what it learns ----------------------------------------------------------------------------
    def layers(self, cfg) -> tuple[tuple[str, str, int, int], ...]:
        """Its weights as linear layers: (weight name, module attribute, in, out) each; the
        integer weight is (in, out) in input -> output order (the golden model's), the module
        attribute names the float module's ``nn.Linear`` (and the QAT core's QuantLinear)."""
        raise NotImplementedError

    @property
    def weight_names(self) -> tuple[str, ...]:
        """Its weights' names (those of ``layers``, which depend on the sizes only)."""
        sizes = SimpleNamespace(dim=1, heads=1, len_q=1, len_k=1)
        return tuple(name for name, _, _, _ in self.layers(sizes))

    def weight_shapes(self, cfg) -> dict[str, tuple[int, int]]:
        """Its weights' shapes, by name."""
        return {name: (n_in, n_out) for name, _, n_in, n_out in self.layers(cfg)}

    # the math ---------------------------------------------------------------------------------
    def q_accumulator(self, cfg) -> tuple[int, float]:
        """(bound, lsb) of its projection's accumulator (Q and K, or the hidden layer): the
        widest value it can reach; requantized by the formats' q_shift into qk_bits."""
        raise NotImplementedError

    def score_format(self, cfg, qk_abs: int, q_lsb: float) -> tuple[int, float]:
        """(bound, lsb) of an integer score, given requantized codes |c| <= qk_abs of q_lsb
        (the lsb before the 1/sqrt(d_head) scale)."""
        raise NotImplementedError

    def align(self, cfg, formats, weights, x: np.ndarray, y: np.ndarray) -> dict:
        """The integer alignment of a block of inputs x (n, len_q, dim), y (n, len_k, dim):
        its stages by name, ending with ``scores`` (n, heads, len_q, len_k)."""
        raise NotImplementedError

    def qk_error(self, cfg, weights, delta: float) -> float:
        """Largest change of an (unscaled) real score when each requantized projection drops
        less than ``delta`` to its floor, for cfg and its integer weights."""
        raise NotImplementedError

    def alignment_ops(self, len_q, len_k, dim, heads, density) -> tuple:
        """(additions, multiplications, selections) of the alignment as the hardware core
        counts them (eatt.model.energy.core_counts); ``density``: the share of ones in a
        binarized input row."""
        raise NotImplementedError

    def surrogate(self, core, xq, yq, v, mask):
        """QAT's differentiable alignment and softmax (torch, through the QuantAttentionCore
        ``core``'s layers and steps): quantized inputs xq, yq, values v (n, heads, len_k,
        d_head), a bool may-attend mask or None -> the attention output (n, heads, len_q,
        d_head) before W_O."""
        raise NotImplementedError

    def paper_ops(self, length: int, dim: int) -> dict[str, tuple[int, int, int]]:
        """(additions, multiplications, selections) by level as E-ATT's Appendix A counts them
        for self-attention of ``length`` tokens of width ``dim``: ``alignment`` (the scores),
        ``attention`` (+ the V projection and the weighted sum of the values) and ``block``
        (+ the output projection and the FFN, d -> 4d -> d: 9 l d^2 multiply-adds)."""
        raise NotImplementedError

    # the folded engine (rtl_sim/rtl/folded_attention.sv) ------------------------------------
    def folded_score_chunks(self, cfg, simd: int) -> int:
        """Cycles the score phase spends on a block of keys, one per SIMD-wide chunk a lane
        consumes: a head's d_head / simd (Q against K)."""
        return cfg.d_head // simd

    def folded_lane_terms(self, simd: int) -> int:
        """Terms a score lane adds in a cycle (its adder tree; the pipeline's stages follow); 0:
        no lane, the score is read."""
        return simd

    def score_rom_words(self, cfg, weights, lanes: int, simd: int) -> np.ndarray | None:
        """The folded engine's score ROM (WS_FILE) as (words, fields) integer codes of
        weight_bits, field 0 least significant; None where the scores come from Q and K."""
        return None

    def scale(self, d_head: int) -> float:
        """The scores' scale: 1/sqrt(d_head), or 1 where the mechanism has none."""
        return scale_of(d_head) if self.scaled else 1.0

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

    def float_mismatch(self, float_module) -> str | None:
        """Why a float module of this mechanism's class has no hardware core (one line), or
        None."""
        return None

    def float_options(self, cfg) -> dict:
        """Keyword arguments of its float module beyond (dim, heads)."""
        return {}

    def float_core(self, cfg):
        """The float reference module (torch) of a config of this mechanism."""
        return self.load("float_module")(cfg.dim, cfg.heads, **self.float_options(cfg))

    def float_weights(self, cfg, float_module) -> dict:
        """The float module's alignment weights as (in, out) tensors by weight name (ValueError
        naming a setting the hardware cannot hold, e.g. a bias)."""
        out = {}
        for name, attr, _, _ in self.layers(cfg):
            linear = getattr(float_module, attr)
            if linear.bias is not None:
                raise ValueError(f"bias: {attr} has a bias; the hardware core has none")
            out[name] = linear.weight.detach().T
        return out

    def set_float_weights(self, cfg, float_module, weights: dict) -> None:
        """Copy real (in, out) tensors by weight name into the float module (under no_grad)."""
        for name, attr, _, _ in self.layers(cfg):
            getattr(float_module, attr).weight.copy_(weights[name].T)


def macs_by_level(alignment: int, attention: int, ld2: int) -> dict[str, tuple[int, int, int]]:
    """Appendix A's levels of a mechanism whose every term is a multiply-add: the alignment's
    and the attention's MACs; the block adds 9 l d^2 (``ld2`` = l d^2) of W_O and the FFN."""
    levels = {"alignment": alignment, "attention": attention}
    levels["block"] = attention + 9 * ld2
    return {level: (macs, macs, 0) for level, macs in levels.items()}


#: facets loaded so far, by path
_LOADED: dict = {}
#: the leading parameters each lazily loaded facet must take
FACET_PARAMETERS = {
    "float_module": ("dim", "heads"),
    "attend": ("q", "k", "v"),  # QueryKey's
    "softmax": ("scores", "v"),  # Synthesized's
}


@dataclass(frozen=True)
class QueryKey(Mechanism):
    """A mechanism scoring projected queries Q = X W_Q against projected keys K = Y W_K, per
    head (``scores_int`` / ``scores_real`` say how)."""

    #: the torch attention function of the float reference and the QAT surrogate
    attend: str = ""

    def layers(self, cfg):
        return (("wq", "q_proj", cfg.dim, cfg.dim), ("wk", "k_proj", cfg.dim, cfg.dim))

    def scores_int(self, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Integer scores S[..., i, j] of query rows q and key rows k (no 1/sqrt(d) scale)."""
        raise NotImplementedError

    def scores_real(self, q, k):
        """The same on real numbers, for the float references: numpy arrays or torch tensors
        (operators and methods both have)."""
        return self.scores_int(q, k)

    def inputs_for_qk(self, x: np.ndarray, tau_int: int) -> np.ndarray:
        """What Q and K are projected from: the binarized inputs, or the inputs themselves."""
        return binarize_int(x, tau_int) if self.binarized else x

    def project_qk(self, cfg, formats, weights, x, y) -> tuple[np.ndarray, np.ndarray]:
        """Q and K: (n, len, dim) integer codes, requantized by q_shift."""
        xs, ys = self.inputs_for_qk(x, cfg.tau_int), self.inputs_for_qk(y, cfg.tau_int)
        q = requantize(matmul_int(xs, weights.wq), formats.q_shift)
        return q, requantize(matmul_int(ys, weights.wk), formats.q_shift)

    def align(self, cfg, formats, weights, x, y):
        q, k = self.project_qk(cfg, formats, weights, x, y)
        s = self.scores_int(split_heads(q, cfg.heads), split_heads(k, cfg.heads))
        return {"q": q, "k": k, "scores": s}

    def surrogate(self, core, xq, yq, v, mask):
        xs = core.select(xq)
        ys = xs if yq is xq else core.select(yq)
        q, k = core.project("q", xs), core.project("k", ys)
        heads = core.cfg.heads
        attend = self.load("attend")
        o, _ = attend(split_heads(q, heads), split_heads(k, heads), v, mask=mask, scale=core.scale)
        return o

    def float_options(self, cfg):
        return {"tau": cfg.tau} if self.binarized else {}


@dataclass(frozen=True)
class Synthesized(Mechanism):
    """A Synthesizer mechanism (Tay et al., ICML 2021): scores over key positions derived
    without keys (``align`` gives them), then the softmax of the float reference's
    ``softmax`` function (scores, v, mask) in QAT's surrogate. No 1/sqrt(d_head) scale."""

    softmax: str = "eatt.model.synthesizer:synthesized_attention"
    scaled: bool = False

    def synthesized_scores(self, core, xq):
        """QAT's real scores (n, heads, len_q, len_k) of quantized queries xq (torch)."""
        raise NotImplementedError

    def weights_at_rows(self, cfg, weights: dict, start: int, count: int) -> dict:
        """The integer weights (by name) of this core cut to ``count`` query rows that sit at
        rows start.. of a core of ``cfg`` (a decoding call's rows, docs/models.md): the same
        weights where the scores depend on the query's input only (Dense)."""
        return weights

    def surrogate(self, core, xq, yq, v, mask):
        scores = self.synthesized_scores(core, xq)
        o, _ = self.load("softmax")(scores, v, mask)
        return o
