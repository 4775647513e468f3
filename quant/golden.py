"""The fixed-point golden model: the one ground truth of every hardware level.

A numpy, integer-exact model of one attention core (eatt.config.CoreConfig) with integer weights.
Brevitas eval, QONNX execution, hls4ml C simulation and RTL simulation must all equal
``GoldenCore.forward`` bit for bit. docs/golden.md derives every width below; the short version:

    X, Y        signed <in_bits, in_frac> integers
    E-ATT:  Xb = X > tau_int (Eq. 4)        Q = Xb @ W_Q  (rows selected and added, Eq. 6-9)
    dot:                                    Q = X  @ W_Q  (a multiply-accumulate)
    Q, K        requantized by an arithmetic right shift q_shift (floor) into qk_bits
    V = Y @ W_V requantized by v_shift into v_bits
    per head h: S = -sum |Q - K| (E-ATT, Eq. 10)   or   S = Q . K (dot)
    softmax:    z = S - max_j S;  e = EXP[(-z) >> exp_shift] (0 past the table)
                E = sum_j e;  numerator N = sum_j e_j V_j
                1/E ~ RECIP[mantissa index of E] * 2**-(recip_frac + n),  n = floor(log2 E)
                O = clamp(round_half_up(N * RECIP / 2**(recip_frac + n)))  into v_bits
    Z = concat_h(O) @ W_O requantized by out_shift into out_bits

Every accumulator is an exact integer whose bound is known from the config, so nothing can
overflow silently; the only lossy steps are the declared shifts, the two tables and the final
rounding, and the float comparison bound (eatt.quant.float_check) accounts for each of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from eatt.config import CoreConfig
from eatt.mechanisms import (  # noqa: F401 - the integer helpers, re-exported
    binarize_int,
    l1_scores_int,
    matmul_int,
    mechanism_of,
    requantize,
    split_heads,
)
from eatt.quant.stimuli import (  # noqa: F401 - re-exported: every check's vectors and reports
    edge_inputs,
    edge_masks,
    first_mismatch,
    random_inputs,
    random_masks,
    vector_masks,
    vector_report,
)

#: vectors processed per numpy block (bounds the (block, heads, len_q, len_k, d_head) L1 temporary)
_BLOCK_ELEMENTS = 1 << 22


def signed_bits(bound: int) -> int:
    """Bits of a signed two's-complement integer holding every value in [-bound, bound]."""
    return int(bound).bit_length() + 1


def unsigned_bits(bound: int) -> int:
    """Bits of an unsigned integer holding every value in [0, bound] (at least 1)."""
    return max(1, int(bound).bit_length())


#: the widths of softmax_bounds every unit's formats carry (the sum, numerator, normalization)
SOFTMAX_WIDTHS = (
    "esum_bound",
    "esum_bits",
    "norm_bits",
    "numer_bound",
    "numer_bits",
    "recip_bits",
    "prod_bound",
    "prod_bits",
)


def softmax_bounds(
    rows: int, weight_max: int, exp_frac: int, v_code_bits: int, recip_frac: int, index_bits: int
) -> dict[str, int]:
    """Bounds and widths of the sum, numerator and normalization (docs/golden.md, steps 6-8).

    ``rows`` terms, each weighted by ``e * c`` with ``e <= 2**exp_frac`` and a count
    ``c <= weight_max`` (1 for the core), values ``V`` in signed ``v_code_bits``.
    """
    exp_bound = 2**exp_frac
    weighted_bound = exp_bound * weight_max  # one term's weight e * c
    esum_bound = rows * weighted_bound  # E
    esum_bits = unsigned_bits(esum_bound)
    numer_bound = esum_bound * 2 ** (v_code_bits - 1)  # |N| <= E * |V|
    recip_bound = 2**recip_frac  # RECIP[i] <= 2**recip_frac
    # the rounding half 2**(recip_frac + n - 1) with n = floor(log2 E) <= esum_bits - 1
    round_bound = 2 ** (recip_frac + esum_bits - 2)
    prod_bound = numer_bound * recip_bound + round_bound  # |N * R + half|
    return {
        "exp_bits": unsigned_bits(exp_bound),
        "weighted_bits": unsigned_bits(weighted_bound),
        "esum_bound": esum_bound,
        "esum_bits": esum_bits,
        # E normalized so that its leading one is on top, with index_bits bits below it
        "norm_bits": max(esum_bits, index_bits + 1),
        "numer_bound": numer_bound,
        "numer_bits": signed_bits(numer_bound),
        "recip_bits": unsigned_bits(recip_bound),
        "prod_bound": prod_bound,
        "prod_bits": signed_bits(prod_bound),
    }


def round_half_up(x: np.ndarray | float) -> np.ndarray:
    """floor(x + 1/2): the rounding of a hardware adder that adds half an LSB, then truncates."""
    return np.floor(np.asarray(x, dtype=np.float64) + 0.5).astype(np.int64)


@dataclass(frozen=True)
class Formats:
    """Widths, shifts and scales derived from a config: the contract between all levels."""

    q_acc_bound: int  # |Q|, |K| before requantization (integer units of the accumulator)
    q_shift: int  # arithmetic right shift that brings Q, K into qk_bits
    q_lsb: float  # real value of one unit of the requantized Q, K
    v_acc_bound: int
    v_shift: int
    v_lsb: float  # real value of one unit of V and of the attention output O
    score_bound: int  # |S| for any Q, K in qk_bits
    score_lsb: float  # real logit of one score unit (includes the 1/sqrt(d_head) scale)
    exp_shift: int  # table index = (-z) >> exp_shift
    exp_table_size: int
    exp_frac: int
    recip_index_bits: int
    recip_frac: int
    out_acc_bound: int
    out_shift: int
    out_lsb: float  # real value of one unit of the core's output
    # -- widths of every integer of the datapath (hls/ and rtl_sim/ only read these) ----------
    in_bits: int  # X, Y codes
    q_acc_bits: int  # Q, K accumulators: bits(q_acc_bound)
    qk_code_bits: int  # Q, K after the shift: q_acc_bits - q_shift (<= cfg.qk_bits)
    diff_bits: int  # Q - K (E-ATT): qk_code_bits + 1
    score_bits: int  # S: bits(score_bound)
    zdiff_bound: int  # max_j S - S lies in [0, 2 * score_bound] (unsigned)
    zdiff_bits: int
    exp_index_bits: int  # zdiff >> exp_shift
    v_acc_bits: int  # V accumulator: bits(v_acc_bound)
    v_code_bits: int  # V after the shift: v_acc_bits - v_shift (<= cfg.v_bits)
    exp_bits: int  # e <= 2**exp_frac (unsigned)
    esum_bound: int  # E <= len_k * 2**exp_frac
    esum_bits: int  # unsigned
    norm_bits: int  # E with its leading one on top (HLS reciprocal index)
    numer_bound: int  # |N| <= esum_bound * 2**(v_code_bits - 1)
    numer_bits: int
    recip_bits: int  # RECIP <= 2**recip_frac (unsigned)
    prod_bound: int  # |N * R + 2**(recip_frac + n - 1)|
    prod_bits: int
    attn_bits: int  # O, clamped into cfg.v_bits
    out_acc_bits: int  # O @ W_O: bits(out_acc_bound)
    out_code_bits: int  # Z: out_acc_bits - out_shift (<= cfg.out_bits)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def derive_formats(cfg: CoreConfig) -> Formats:
    """All widths from the config alone (worst case over every weight in range)."""
    wmax = cfg.weight_max
    x_abs = 2 ** (cfg.in_bits - 1)  # most negative input, in integer units
    mech = mechanism_of(cfg)
    q_acc_bound, q_acc_lsb = mech.q_accumulator(cfg)
    q_shift = max(0, signed_bits(q_acc_bound) - cfg.qk_bits)
    q_lsb = q_acc_lsb * 2.0**q_shift

    v_acc_bound = cfg.dim * x_abs * wmax
    v_shift = max(0, signed_bits(v_acc_bound) - cfg.v_bits)
    v_lsb = 2.0 ** -(cfg.weight_frac + cfg.in_frac) * 2.0**v_shift

    qk_abs = 2 ** (cfg.qk_bits - 1)
    score_bound, score_lsb = mech.score_format(cfg, qk_abs, q_lsb)
    score_lsb *= mech.scale(cfg.d_head)  # 1/sqrt(d_head), where the mechanism scales
    # The exp table must reach either past every possible -z (span 2 * score_bound), or far
    # enough that exp(-x) * 2**exp_frac < 1/2, where every further entry would round to 0.
    span = 2 * score_bound
    far = math.log(2.0) * (cfg.exp_frac + 1)
    exp_shift = 0
    while cfg.exp_table_size * 2**exp_shift <= span and (
        cfg.exp_table_size * 2**exp_shift * score_lsb <= far
    ):
        exp_shift += 1

    out_acc_bound = cfg.dim * 2 ** (cfg.v_bits - 1) * wmax
    out_shift = max(0, signed_bits(out_acc_bound) - cfg.out_bits)
    out_lsb = v_lsb * 2.0**-cfg.weight_frac * 2.0**out_shift

    q_acc_bits = signed_bits(q_acc_bound)
    qk_code_bits = q_acc_bits - q_shift
    v_acc_bits = signed_bits(v_acc_bound)
    v_code_bits = v_acc_bits - v_shift
    recip_index_bits = int(cfg.recip_table_size).bit_length() - 1
    zdiff_bits = unsigned_bits(2 * score_bound)
    soft = softmax_bounds(cfg.len_k, 1, cfg.exp_frac, v_code_bits, cfg.recip_frac, recip_index_bits)
    out_acc_bits = signed_bits(out_acc_bound)
    return Formats(
        q_acc_bound=q_acc_bound,
        q_shift=q_shift,
        q_lsb=q_lsb,
        v_acc_bound=v_acc_bound,
        v_shift=v_shift,
        v_lsb=v_lsb,
        score_bound=score_bound,
        score_lsb=score_lsb,
        exp_shift=exp_shift,
        exp_table_size=cfg.exp_table_size,
        exp_frac=cfg.exp_frac,
        recip_index_bits=recip_index_bits,
        recip_frac=cfg.recip_frac,
        out_acc_bound=out_acc_bound,
        out_shift=out_shift,
        out_lsb=out_lsb,
        in_bits=cfg.in_bits,
        q_acc_bits=q_acc_bits,
        qk_code_bits=qk_code_bits,
        diff_bits=qk_code_bits + 1,
        score_bits=signed_bits(score_bound),
        zdiff_bound=2 * score_bound,
        zdiff_bits=zdiff_bits,
        exp_index_bits=max(1, zdiff_bits - exp_shift),
        v_acc_bits=v_acc_bits,
        v_code_bits=v_code_bits,
        exp_bits=soft["exp_bits"],
        **{key: soft[key] for key in SOFTMAX_WIDTHS},
        attn_bits=cfg.v_bits,
        out_acc_bits=out_acc_bits,
        out_code_bits=out_acc_bits - out_shift,
    )


def exp_table(cfg: CoreConfig) -> np.ndarray:
    """EXP[k] = round_half_up(2**exp_frac * exp(-k * 2**exp_shift * score_lsb)); EXP[0] = 2**ef.

    Each entry is the exp of its bin's left edge, so a logit inside the bin is moved up by
    less than one bin width (2**exp_shift * score_lsb); float_check accounts for that.
    """
    f = derive_formats(cfg)
    k = np.arange(cfg.exp_table_size, dtype=np.float64)
    return round_half_up(2.0**cfg.exp_frac * np.exp(-k * 2.0**f.exp_shift * f.score_lsb))


def recip_table(cfg: CoreConfig) -> np.ndarray:
    """RECIP[i] = round_half_up(2**recip_frac / (1 + (i + 1/2) / 2**k)): 1/m at the bin middle."""
    k = int(cfg.recip_table_size).bit_length() - 1
    i = np.arange(cfg.recip_table_size, dtype=np.float64)
    return round_half_up(2.0**cfg.recip_frac / (1.0 + (i + 0.5) / 2.0**k))


def weight_shapes(cfg: CoreConfig) -> dict[str, tuple[int, int]]:
    """The shapes of a core's integer weights by name: its mechanism's (E-ATT and dot: wq, wk;
    dense: w1, w2; randinit: r), then the core's W_V and W_O (dim, dim)."""
    shapes = mechanism_of(cfg).weight_shapes(cfg)
    return {**shapes, "wv": (cfg.dim, cfg.dim), "wo": (cfg.dim, cfg.dim)}


class CoreWeights:
    """Integer weights by name, each in input -> output order (Q = X @ wq, as in Eq. 1): the
    mechanism's own (weight_shapes) and the core's wv, wo. ``CoreWeights(wq, wk, wv, wo)`` (the
    query-key mechanisms' four, by position) or by name, ``CoreWeights(w1=.., w2=.., wv=..,
    wo=..)``; each is an attribute (``weights.wq``)."""

    #: the query-key mechanisms' weights, in the order CoreWeights(wq, wk, wv, wo) takes them
    NAMES = ("wq", "wk", "wv", "wo")

    def __init__(self, *arrays: np.ndarray, **named: np.ndarray) -> None:
        if len(arrays) > len(self.NAMES):
            raise TypeError(f"CoreWeights takes at most {len(self.NAMES)} weights by position")
        by_position = dict(zip(self.NAMES, arrays, strict=False))
        if clash := set(by_position) & set(named):
            raise TypeError(f"CoreWeights: {sorted(clash)[0]} given twice")
        self.__dict__["_arrays"] = {**by_position, **named}

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("_arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(f"CoreWeights has no weight {name!r} (it has {', '.join(arrays)})")

    def __setattr__(self, name: str, value: np.ndarray) -> None:
        self._arrays[name] = value

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}={tuple(np.shape(v))}" for k, v in self._arrays.items())
        return f"CoreWeights({shapes})"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._arrays)

    def as_dict(self) -> dict[str, np.ndarray]:
        return dict(self._arrays)

    def replace(self, **changes: np.ndarray) -> CoreWeights:
        """A copy with the named weights replaced (the others shared)."""
        return CoreWeights(**{**self._arrays, **changes})

    def check(self, cfg: CoreConfig) -> None:
        wanted = weight_shapes(cfg)
        takes = f"kind {cfg.kind} takes {', '.join(wanted)}"
        for name in wanted:
            if name not in self._arrays:
                raise ValueError(f"weights: missing {name} ({takes})")
        for name, w in self._arrays.items():
            if name not in wanted:
                raise ValueError(f"weights: {name} is not a weight of this core ({takes})")
            if np.shape(w) != wanted[name]:
                shape = wanted[name]
                raise ValueError(f"weights: {name} has shape {np.shape(w)}, expected {shape}")
            if np.abs(w).max(initial=0) > cfg.weight_max:
                raise ValueError(
                    f"weights: {name} exceeds the {cfg.weight_bits}-bit narrow range "
                    f"+-{cfg.weight_max}"
                )


def random_weights(cfg: CoreConfig, seed: int = 0) -> CoreWeights:
    """Deterministic random integer weights (uniform over the narrow range) for a config."""
    rng = np.random.default_rng(seed)
    w = {
        name: rng.integers(-cfg.weight_max, cfg.weight_max + 1, size=shape, dtype=np.int64)
        for name, shape in weight_shapes(cfg).items()
    }
    return CoreWeights(**w)


#: the per-call mask inputs of a core, in this order (CoreConfig.mask_inputs: the ones it takes)
MASK_INPUTS = ("length", "offset")


def visible_keys(cfg: CoreConfig, n: int, masks: dict[str, np.ndarray]) -> np.ndarray | None:
    """(n, 1, len_q, len_k) booleans: key j gets weight in query i's softmax (j < length and
    j <= i + offset); None when the core takes no mask (every key visible)."""
    if not cfg.mask_inputs:
        return None
    j = np.arange(cfg.len_k)
    vis = np.ones((n, cfg.len_q, cfg.len_k), dtype=bool)
    if "length" in masks:
        vis &= j[None, None, :] < masks["length"][:, None, None]
    if "offset" in masks:
        i = np.arange(cfg.len_q)
        vis &= j[None, None, :] <= i[None, :, None] + masks["offset"][:, None, None]
    return vis[:, None]


def check_masks(cfg: CoreConfig, n: int, masks: dict | None) -> dict[str, np.ndarray]:
    """The mask inputs of n vectors as int64 arrays (n,), the defaults filled in (length len_k,
    offset len_k - 1: nothing hidden); ValueError (one line) for a mask the core does not take
    or a value out of range."""
    masks = dict(masks or {})
    for name in masks:
        if name not in cfg.mask_inputs:
            what = {"length": "key_padding", "offset": "causal"}.get(name)
            why = f"the config has no {what}" if what else f"known: {', '.join(MASK_INPUTS)}"
            raise ValueError(f"inputs: {name}: {why}")
    bounds = {"length": (1, cfg.len_k), "offset": (0, cfg.len_k - 1)}
    out = {}
    for name in cfg.mask_inputs:
        lo, hi = bounds[name]
        if masks.get(name) is None:
            out[name] = np.full(n, hi, dtype=np.int64)
            continue
        t = np.asarray(masks[name])
        if t.ndim == 0:
            t = np.full(n, t)
        if t.shape != (n,) or not np.issubdtype(t.dtype, np.integer):
            raise ValueError(f"inputs: {name} must be {n} integers, got {t.dtype} {t.shape}")
        if t.size and (t.min() < lo or t.max() > hi):
            raise ValueError(f"inputs: {name} has values outside [{lo}, {hi}]")
        out[name] = t.astype(np.int64)
    return out


def reciprocal(total: np.ndarray, table: np.ndarray, index_bits: int) -> tuple[np.ndarray, ...]:
    """Normalize total (>= 1) to 1.m * 2**n and look up 1/(1.m): returns (RECIP[idx], n)."""
    n = np.floor(np.log2(total.astype(np.float64))).astype(np.int64)
    # log2 of an int64 in float64 can be off by one right at powers of two: fix it exactly.
    n = np.where((np.int64(1) << n) > total, n - 1, n)
    n = np.where((np.int64(1) << (n + 1)) <= total, n + 1, n)
    top = np.where(
        n >= index_bits,
        total >> np.maximum(n - index_bits, 0),
        total << np.maximum(index_bits - n, 0),
    )
    idx = top - (1 << index_bits)
    return table[idx], n


class GoldenCore:
    """The bit-exact model of one core: config + integer weights -> integer outputs."""

    def __init__(self, cfg: CoreConfig, weights: CoreWeights):
        weights.check(cfg)
        self.cfg = cfg
        self.weights = weights
        self.mechanism = mechanism_of(cfg)
        self.formats = derive_formats(cfg)
        self.exp_table = exp_table(cfg)
        self.recip_table = recip_table(cfg)

    # -- the stages, each on a block of vectors -----------------------------------------------
    def project_qk(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Q and K of a query-key mechanism (E-ATT, dot)."""
        return self.mechanism.project_qk(self.cfg, self.formats, self.weights, x, y)

    def project_v(self, y: np.ndarray) -> np.ndarray:
        return requantize(matmul_int(y, self.weights.wv), self.formats.v_shift)

    def split_heads(self, t: np.ndarray) -> np.ndarray:
        """(n, len, dim) -> (n, heads, len, d_head): head h owns columns h*d_head:(h+1)*d_head."""
        return split_heads(t, self.cfg.heads)

    def scores(self, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        """The scores of a query-key mechanism from Q and K."""
        return self.mechanism.scores_int(self.split_heads(q), self.split_heads(k))

    def softmax_weights(self, s: np.ndarray, visible: np.ndarray | None = None) -> np.ndarray:
        """Unnormalized softmax weights e = EXP[(max S - S) >> exp_shift] (0 past the table).

        With ``visible`` (visible_keys), the max runs over the visible keys only and a hidden
        key's weight is 0; every query sees at least one key, so the sum stays >= EXP[0].
        """
        f = self.formats
        if visible is None:
            idx = (s.max(axis=-1, keepdims=True) - s) >> f.exp_shift
            inside = idx < f.exp_table_size
        else:
            low = np.iinfo(np.int64).min
            smax = np.where(visible, s, low).max(axis=-1, keepdims=True)
            idx = np.where(visible, smax - s, 0) >> f.exp_shift
            inside = visible & (idx < f.exp_table_size)
        return np.where(inside, self.exp_table[np.minimum(idx, f.exp_table_size - 1)], 0)

    def weighted_values(self, e: np.ndarray, v: np.ndarray) -> np.ndarray:
        """O = clamp(round_half_up(sum_j e_j V_j / sum_j e_j)) with the table reciprocal."""
        cfg, f = self.cfg, self.formats
        total = e.sum(axis=-1)  # (n, heads, len_q) >= 2**exp_frac: the max entry is EXP[0]
        numer = matmul_int(e, self.split_heads(v))  # (n, heads, len_q, d_head)
        recip, n = reciprocal(total, self.recip_table, f.recip_index_bits)
        shift = (f.recip_frac + n)[..., None]
        o = (numer * recip[..., None] + (np.int64(1) << (shift - 1))) >> shift
        lo, hi = -(2 ** (cfg.v_bits - 1)), 2 ** (cfg.v_bits - 1) - 1
        o = np.clip(o, lo, hi)
        nb, heads, len_q, d_head = o.shape
        return o.transpose(0, 2, 1, 3).reshape(nb, len_q, heads * d_head)

    def project_out(self, o: np.ndarray) -> np.ndarray:
        return requantize(matmul_int(o, self.weights.wo), self.formats.out_shift)

    # -- whole core -----------------------------------------------------------------------------
    def forward(
        self,
        x: np.ndarray,
        y: np.ndarray,
        intermediates: bool = False,
        masks: dict[str, np.ndarray] | None = None,
    ):
        """x: (n, len_q, dim), y: (n, len_k, dim) integers -> (n, len_q, dim) integer outputs.

        ``masks``: the per-call mask inputs the config takes (MASK_INPUTS: length (n,) with
        key_padding, offset (n,) with causal); a missing one hides nothing.
        With intermediates=True returns a dict of every stage (q, k, v, scores, exp, attn, out),
        which the lower levels use to report where a mismatch starts.
        """
        x, y = self._check_inputs(x, y)
        masks = check_masks(self.cfg, len(x), masks)
        per_vector = self.cfg.heads * self.cfg.len_q * self.cfg.len_k * max(self.cfg.d_head, 1)
        block = max(1, _BLOCK_ELEMENTS // per_vector)
        parts = [
            self._forward_block(
                x[i : i + block], y[i : i + block], {k: v[i : i + block] for k, v in masks.items()}
            )
            for i in range(0, len(x), block)
        ]
        if intermediates:
            return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
        return np.concatenate([p["out"] for p in parts])

    def alignment(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The alignment stage only (queries and keys in, integer scores (n, heads, lq, lk) out)."""
        x, y = self._check_inputs(x, y)
        return self.mechanism.align(self.cfg, self.formats, self.weights, x, y)["scores"]

    def _forward_block(self, x: np.ndarray, y: np.ndarray, masks: dict) -> dict[str, np.ndarray]:
        stages = self.mechanism.align(self.cfg, self.formats, self.weights, x, y)
        v = self.project_v(y)
        e = self.softmax_weights(stages["scores"], visible_keys(self.cfg, len(x), masks))
        o = self.weighted_values(e, v)
        return {**stages, "v": v, "exp": e, "attn": o, "out": self.project_out(o)}

    def _check_inputs(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.cfg
        x, y = np.asarray(x), np.asarray(y)
        if x.ndim == 2:
            x = x[None]
        if y.ndim == 2:
            y = y[None]
        for name, t, length in (("x", x, cfg.len_q), ("y", y, cfg.len_k)):
            if t.ndim != 3 or t.shape[1:] != (length, cfg.dim):
                raise ValueError(
                    f"inputs: {name} has shape {t.shape}, expected (n, {length}, {cfg.dim})"
                )
            if not np.issubdtype(t.dtype, np.integer):
                raise ValueError(f"inputs: {name} must hold integers (fixed-point codes)")
            lo, hi = -(2 ** (cfg.in_bits - 1)), 2 ** (cfg.in_bits - 1) - 1
            if t.size and (t.min() < lo or t.max() > hi):
                raise ValueError(f"inputs: {name} has values outside the {cfg.in_bits}-bit range")
        if len(x) != len(y):
            raise ValueError(f"inputs: x has {len(x)} vectors but y has {len(y)}")
        return x.astype(np.int64), y.astype(np.int64)
