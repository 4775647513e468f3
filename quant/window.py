"""Golden model of the windowed cross-attention unit: one decoding step (kind ``window``).

The ground truth of ``eatt rtl`` for kind window (rtl_sim/window.py) and of the later
Brevitas/QONNX/hls4ml levels. docs/window.md derives the arithmetic; in short, per step:

    Q  = (f(x) W_Q) >> q_shift   (E-ATT score: f = Eq. 4 binarization, rows of W_Q selected)
       = (x W_Q)    >> q_shift   (dot score baseline)
    window  s in [lo, hi] = [max(p - w, 0), min(p + w, length - 1)]   (Luong local-p, Eq. 9;
            w <= D is an input, so Flexible's sigma sqrt(2 tau / g(t)) fits, its Sec. 3)
    S'[h][s] = S[h][s] - P[g][|s - p|]    S = -sum|Q - K_s| (E-ATT Eq. 10) or Q . K_s (dot)
            P = position term in score units from a table (no multiplier):
              gaussian (local-p Eq. 10):  (s - p)^2 / (2 sigma^2),  sigma = D / 2
              flexible (Flexible Eq. 5-7): g (s - p)^2 / (2 sigma^2), g = level / g_levels
    counted softmax (L0Drop Algorithm 1, lines 5-8):
            e_s = c_s * EXP[(max S' - S'_s) >> exp_shift]   (0 past the table)
            O = clamp(round_half_up(sum_s e_s V_s / sum_s e_s))  as GoldenCore.weighted_values
    focus (position flexible only; Flexible Eq. 4, p_t = sum_s a_t(s) s, the next step's p):
            F = lo + min(round_half_up(sum_s e_s (s - lo) / sum_s e_s), hi - lo)
            through the same reciprocal as O, one per head

The memory holds l_k = len_k rows of keys K and values V that are already projected (integer
codes in the core's Q/K and V formats: the encoder side computes them once per sentence) and a
count per row (1 = an ordinary row; L0Drop's compacted memory is N' kept rows plus one zero row
with count N - N'). ``length`` <= l_k rows are valid. The output is the attention output O
(the context vector, V's format; the output projection W_O / Luong's W_c is outside the unit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eatt.config import CoreConfig, WindowConfig
from eatt.mechanisms import mechanism_of
from eatt.quant.golden import (
    SOFTMAX_WIDTHS,
    CoreWeights,
    Formats,
    GoldenCore,
    derive_formats,
    matmul_int,
    reciprocal,
    requantize,
    round_half_up,
    signed_bits,
    softmax_bounds,
    unsigned_bits,
)

#: names of the per-step inputs, in the order of WindowGolden.forward
STEP_INPUTS = ("x", "p", "w", "keys", "values", "counts", "length", "g")


def core_config(cfg: WindowConfig) -> CoreConfig:
    """The eatt/vanilla core config whose formats and tables the window unit shares."""
    if not isinstance(cfg, WindowConfig):
        raise ValueError(f"kind: expected window, got {cfg.kind}")
    return cfg.core()


@dataclass(frozen=True)
class WindowFormats:
    """The core's Formats plus the widths of the window unit (docs/window.md)."""

    core: Formats
    qk_code_bits: int  # signed width of a key code (and of Q): bits(q_acc_bound) - q_shift
    v_code_bits: int  # signed width of a value code: bits(v_acc_bound) - v_shift
    window_rows: int  # most rows one window reads: min(2 D + 1, len_k)
    count_max: int  # 2**count_bits - 1
    penalty_cap: int  # P is saturated here: any larger value gives e = 0 all the same
    penalty_max: int  # largest table entry (<= penalty_cap)
    diff_bound: int  # max S' - S' lies in [0, diff_bound]
    sigma: float
    # -- widths of the unit's integers (hls/ and rtl_sim/window.py only read these) -----------
    penalty_bits: int  # P in [0, penalty_max] (unsigned)
    logit_bound: int  # S' = S - P in [-(score_bound + penalty_max), score_bound]
    logit_bits: int
    diff_bits: int  # max S' - S' (unsigned)
    exp_index_bits: int  # (max S' - S') >> exp_shift
    exp_table_bits: int  # log2(exp_table_size): the exp ROM's address
    count_bits: int
    weighted_bits: int  # e * c <= 2**exp_frac * count_max (unsigned)
    esum_bound: int  # E <= window_rows * 2**exp_frac * count_max
    esum_bits: int
    norm_bits: int
    numer_bound: int  # |N| <= esum_bound * 2**(v_code_bits - 1)
    numer_bits: int
    recip_bits: int
    prod_bound: int  # |N * R + 2**(recip_frac + n - 1)|
    prod_bits: int
    attn_bits: int  # O, clamped into cfg.v_bits
    addr_bits: int  # a row address 0 .. len_k - 1 (and p)
    len_bits: int  # length 1 .. len_k
    w_bits: int  # w 0 .. window_d
    dist_bits: int  # |s - p| 0 .. window_d
    index_bits: int  # a window buffer entry 0 .. window_rows - 1
    rows_bits: int  # rows read 0 .. window_rows
    g_bits: int  # Flexible level 0 .. g_levels
    # -- the focus F (position flexible; Flexible Eq. 4): sum_s e_s (s - lo) through the reciprocal
    focus_numer_bound: int  # sum_s e_s (s - lo) <= esum_bound * (window_rows - 1)
    focus_numer_bits: int  # signed, as the reciprocal leaf's numerators
    focus_prod_bits: int  # |F_N * R + 2**(recip_frac + n - 1)|, signed
    int_bits: int  # signed width of the integer inputs' port type (HLS)

    def to_dict(self) -> dict:
        data = dict(self.__dict__)
        data["core"] = self.core.to_dict()
        return data


def derive_window_formats(cfg: CoreConfig) -> WindowFormats:
    f = derive_formats(core_config(cfg))
    table = penalty_table(cfg, f)
    cap = 2 * f.score_bound + (cfg.exp_table_size << f.exp_shift)
    pmax = int(table.max())
    rows, count_max = cfg.window_rows, 2**cfg.count_bits - 1
    diff_bits = unsigned_bits(2 * f.score_bound + pmax)
    soft = softmax_bounds(
        rows, count_max, cfg.exp_frac, f.v_code_bits, cfg.recip_frac, f.recip_index_bits
    )
    half = cfg.window_d
    focus_numer = soft["esum_bound"] * (rows - 1)
    focus_prod = focus_numer * 2**cfg.recip_frac + 2 ** (cfg.recip_frac + soft["esum_bits"] - 2)
    return WindowFormats(
        core=f,
        qk_code_bits=f.qk_code_bits,
        v_code_bits=f.v_code_bits,
        window_rows=rows,
        count_max=count_max,
        penalty_cap=cap,
        penalty_max=pmax,
        diff_bound=2 * f.score_bound + pmax,
        sigma=window_sigma(cfg),
        penalty_bits=unsigned_bits(pmax),
        logit_bound=f.score_bound + pmax,
        logit_bits=signed_bits(f.score_bound + pmax),
        diff_bits=diff_bits,
        exp_index_bits=max(1, diff_bits - f.exp_shift),
        exp_table_bits=int(cfg.exp_table_size).bit_length() - 1,
        count_bits=cfg.count_bits,
        weighted_bits=soft["weighted_bits"],
        **{key: soft[key] for key in SOFTMAX_WIDTHS},
        attn_bits=cfg.v_bits,
        addr_bits=unsigned_bits(cfg.len_k - 1),
        len_bits=unsigned_bits(cfg.len_k),
        w_bits=unsigned_bits(half),
        dist_bits=unsigned_bits(half),
        index_bits=unsigned_bits(rows - 1),
        rows_bits=unsigned_bits(rows),
        g_bits=unsigned_bits(cfg.g_levels),
        focus_numer_bound=focus_numer,
        focus_numer_bits=signed_bits(focus_numer),
        focus_prod_bits=signed_bits(focus_prod),
        int_bits=signed_bits(max(cfg.len_k, count_max, half, cfg.g_levels)),
    )


def window_sigma(cfg: WindowConfig) -> float:
    """sigma of the position term: the config's, or each paper's pick (as the model's
    window_sigma): D / 2 for gaussian (Luong et al. 2015, local-p), 1.5 for flexible (Shu &
    Nakayama, Sec. 5.2)."""
    if cfg.window_sigma is not None:
        return float(cfg.window_sigma)
    return 1.5 if cfg.position == "flexible" else cfg.window_d / 2


def penalty_levels(cfg: CoreConfig) -> int:
    """Rows of the position table: g_levels + 1 for flexible (level 0 = g 0), else 1."""
    return cfg.g_levels + 1 if cfg.position == "flexible" else 1


def penalty_table(cfg: CoreConfig, formats: Formats | None = None) -> np.ndarray:
    """P[level][d] for d = |s - p| in [0, D]: the position term in score units (integers).

    P = round_half_up(g (d^2 / (2 sigma^2)) / score_lsb), saturated at penalty_cap (a larger
    penalty already sends every such row past the exp table, because the centre row p is always
    in the window with P = 0). gaussian: one level, g = 1; flexible: g = level / g_levels;
    none: all zero. sigma = 0 (D = 0) only ever sees d = 0.
    """
    f = formats or derive_formats(core_config(cfg))
    levels = penalty_levels(cfg)
    d = np.arange(cfg.window_d + 1, dtype=np.float64)
    cap = 2 * f.score_bound + (cfg.exp_table_size << f.exp_shift)
    if cfg.position == "none":
        return np.zeros((levels, len(d)), dtype=np.int64)
    sigma = window_sigma(cfg)
    if sigma == 0:
        return np.zeros((levels, len(d)), dtype=np.int64)
    if cfg.position == "gaussian":
        g = np.ones(1)
    else:
        g = np.arange(levels, dtype=np.float64) / cfg.g_levels
    logit = g[:, None] * d[None, :] ** 2 / (2.0 * sigma**2)
    return np.minimum(round_half_up(np.minimum(logit / f.score_lsb, 2.0 * cap)), cap)


def has_focus(cfg: CoreConfig) -> bool:
    """Whether the unit outputs the focus F beside O: position flexible (its next p)."""
    return getattr(cfg, "position", None) == "flexible"


def window_bounds(p, w, length):
    """[lo, hi] of the rows a step reads: [p - w, p + w] intersected with [0, length)."""
    return np.maximum(p - w, 0), np.minimum(p + w, length - 1)


class WindowGolden:
    """Bit-exact model of one decoding step: config + integer W_Q -> attention output O.

    ``weights`` is a CoreWeights (only W_Q is used: K and V come projected in the memory).
    """

    def __init__(self, cfg: CoreConfig, weights: CoreWeights):
        if not isinstance(cfg, WindowConfig):
            raise ValueError(f"kind: WindowGolden needs kind window, got {cfg.kind}")
        self.cfg = cfg
        self.core = GoldenCore(core_config(cfg), weights)
        self.weights = weights
        self.formats = derive_window_formats(cfg)
        self.penalty_table = penalty_table(cfg, self.formats.core)

    def project_q(self, x: np.ndarray) -> np.ndarray:
        """Q (n, dim): binarized row selection (E-ATT) or multiply-accumulate (dot)."""
        cfg, f = self.cfg, self.formats.core
        xs = mechanism_of(cfg).inputs_for_qk(x, cfg.tau_int)
        return requantize(xs @ self.weights.wq, f.q_shift)

    def project_memory(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """K and V codes (n, len, dim) of memory rows y (n, len, dim) (input codes): the encoder
        side of the unit, once per sentence, the core's projections (golden.md steps 1-3):
        ``K = (f(Y) W_K) >> q_shift`` (E-ATT: rows of W_K selected) or ``(Y W_K) >> q_shift``
        (dot), ``V = (Y W_V) >> v_shift``. Uses the weights' W_K and W_V."""
        y = np.asarray(y, dtype=np.int64)
        ys = mechanism_of(self.cfg).inputs_for_qk(y, self.cfg.tau_int)
        keys = requantize(matmul_int(ys, self.weights.wk), self.formats.core.q_shift)
        return keys, self.core.project_v(y)

    def scores(self, q: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """S (n, heads, len_k) over every memory row (the window mask comes later)."""
        qh = self.core.split_heads(q[:, None, :])[:, :, 0, :]  # (n, heads, d_head)
        kh = self.core.split_heads(keys)  # (n, heads, len_k, d_head)
        return mechanism_of(self.cfg).scores_int(qh[:, :, None, :], kh)[:, :, 0, :]

    def forward(
        self,
        x,
        p,
        w,
        keys,
        values,
        counts=None,
        length=None,
        g=None,
        intermediates: bool = False,
        with_focus: bool = False,
    ):
        """One step per vector: x (n, dim); p, w, length, g (n,); keys, values (n, len_k, dim);
        counts (n, len_k). counts None = 1, length None = len_k, g None = level g_levels.
        Returns O (n, dim); with_focus=True (position flexible) (O, F) with F (n, heads) the
        focus rows; with intermediates=True a dict (q, scores, penalty, logits, mask, exp,
        attn, and focus when the unit has one)."""
        x, p, w, keys, values, counts, length, g = self.check_inputs(
            x, p, w, keys, values, counts, length, g
        )
        cfg, f = self.cfg, self.formats.core
        q = self.project_q(x)
        s = self.scores(q, keys)
        pos = np.arange(cfg.len_k)[None, :]
        lo, hi = window_bounds(p, w, length)
        mask = (pos >= lo[:, None]) & (pos <= hi[:, None])  # (n, len_k)
        dist = np.minimum(np.abs(pos - p[:, None]), cfg.window_d)
        level = g if cfg.position == "flexible" else np.zeros_like(g)
        pen = self.penalty_table[level[:, None], dist]  # (n, len_k)
        logits = s - pen[:, None, :]
        floor = np.int64(np.iinfo(np.int64).min // 4)
        top = np.where(mask[:, None, :], logits, floor).max(axis=-1, keepdims=True)
        idx = (top - logits) >> f.exp_shift
        inside = mask[:, None, :] & (idx < f.exp_table_size)
        e = np.where(inside, self.core.exp_table[np.clip(idx, 0, f.exp_table_size - 1)], 0)
        ce = e * counts[:, None, :]  # counted softmax weights (L0Drop Algorithm 1)
        o = self.core.weighted_values(ce[:, :, None, :], values)[:, 0, :]
        if with_focus and not has_focus(cfg):
            raise ValueError("with_focus: only a unit with position flexible has a focus output")
        focus = self.focus(ce, lo, hi) if has_focus(cfg) else None
        if intermediates:
            extra = {} if focus is None else {"focus": focus}
            return {
                **extra,
                "q": q,
                "scores": s,
                "penalty": pen,
                "logits": logits,
                "mask": mask,
                "exp": ce,
                "attn": o,
            }
        return (o, focus) if with_focus else o

    def focus(self, ce: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """F (n, heads): Flexible's p_t = sum_s a_t(s) s (Eq. 4) as an integer row of the window,
        ``lo + min(clamp(round_half_up(sum_s e_s (s - lo) * R / 2**(recip_frac + n))), hi - lo)``
        with the counted weights e (n, heads, len_k, 0 outside the window) and the reciprocal R
        of E = sum_s e_s: one more lane of O's normalization (GoldenCore.weighted_values), so
        clamped into O's v_bits first (which changes nothing while window_rows <= 2**(v_bits -
        1))."""
        f = self.formats.core
        offset = np.maximum(np.arange(self.cfg.len_k)[None, :] - lo[:, None], 0)  # (n, len_k)
        numer = (ce * offset[:, None, :]).sum(axis=-1)  # (n, heads), e = 0 outside the window
        recip, n = reciprocal(ce.sum(axis=-1), self.core.recip_table, f.recip_index_bits)
        shift = self.cfg.recip_frac + n
        rounded = (numer * recip + (np.int64(1) << (shift - 1))) >> shift
        rounded = np.minimum(rounded, 2 ** (self.cfg.v_bits - 1) - 1)  # >= 0
        return lo[:, None] + np.minimum(rounded, (hi - lo)[:, None])

    def check_inputs(self, x, p, w, keys, values, counts=None, length=None, g=None):
        """Shapes, integer dtypes and ranges; one-line ValueError naming the input."""
        cfg, wf = self.cfg, self.formats
        x = np.asarray(x)
        if x.ndim == 1:
            x = x[None]
        n = len(x)
        lk, dim = cfg.len_k, cfg.dim

        def arr(name, value, shape, default):
            t = np.full(shape, default, dtype=np.int64) if value is None else np.asarray(value)
            if t.ndim == len(shape) - 1 and n == 1:
                t = t[None]
            if t.ndim == 0 and shape == (n,):
                t = np.full(shape, t)
            if t.shape != shape:
                raise ValueError(f"inputs: {name} has shape {t.shape}, expected {shape}")
            if t.size and not np.issubdtype(t.dtype, np.integer):
                raise ValueError(f"inputs: {name} must hold integers")
            return t.astype(np.int64)

        x = arr("x", x, (n, dim), 0)
        keys = arr("keys", keys, (n, lk, dim), 0)
        values = arr("values", values, (n, lk, dim), 0)
        counts = arr("counts", counts, (n, lk), 1)
        length = arr("length", length, (n,), lk)
        p = arr("p", p, (n,), 0)
        w = arr("w", w, (n,), 0)
        g = arr("g", g, (n,), cfg.g_levels)

        def check(name, t, lo, hi):
            if t.size and (t.min() < lo or t.max() > hi):
                raise ValueError(f"inputs: {name} has values outside [{lo}, {hi}]")

        check("x", x, -(2 ** (cfg.in_bits - 1)), 2 ** (cfg.in_bits - 1) - 1)
        kb, vb = wf.qk_code_bits, wf.v_code_bits
        check("keys", keys, -(2 ** (kb - 1)), 2 ** (kb - 1) - 1)
        check("values", values, -(2 ** (vb - 1)), 2 ** (vb - 1) - 1)
        check("counts", counts, 1, wf.count_max)
        check("length", length, 1, lk)
        check("w", w, 0, cfg.window_d)
        check("g", g, 0, cfg.g_levels)
        if n and (p.min() < 0 or (p >= length).any()):
            raise ValueError("inputs: p must lie in [0, length - 1] (the centre is a memory row)")
        return x, p, w, keys, values, counts, length, g


def compact_memory(keys, values, gates, len_k: int | None = None, count_bits: int | None = None):
    """L0Drop Algorithm 1 lines 1-4 on one memory: drop the rows whose gate is 0, append one
    zero row with count N - N' (only if a row was dropped). keys, values (N, dim), gates (N,).

    Returns (keys, values, counts, length) padded with zero rows (count 1) to len_k rows
    (default N); length = N' + (1 if N' < N else 0). The kept rows keep their gated values
    (the caller passes codes of the gated encodings). With ``count_bits`` (the config's), a
    count N - N' that the unit's count field cannot hold is a ValueError, not a silent clamp.
    """
    keys, values, gates = np.asarray(keys), np.asarray(values), np.asarray(gates)
    n, dim = keys.shape
    kept = np.flatnonzero(gates != 0)
    rows = len(kept) + (1 if len(kept) < n else 0)
    len_k = n if len_k is None else len_k
    if rows > len_k:
        raise ValueError(f"compact_memory: {rows} rows do not fit len_k={len_k}")
    if count_bits is not None and n - len(kept) > 2**count_bits - 1:
        raise ValueError(
            f"count_bits: {n - len(kept)} pruned rows do not fit a {count_bits}-bit count"
        )
    k = np.zeros((len_k, dim), dtype=np.int64)
    v = np.zeros((len_k, dim), dtype=np.int64)
    c = np.ones(len_k, dtype=np.int64)
    k[: len(kept)], v[: len(kept)] = keys[kept], values[kept]
    if len(kept) < n:
        c[len(kept)] = n - len(kept)  # the zero row stands for every pruned encoding
    return k, v, c, rows


def random_window_inputs(cfg: CoreConfig, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """n random steps, each with its own memory (a dict of STEP_INPUTS arrays).

    A mix that covers the edges: windows at both sequence ends, w = 0, w = D, short memories
    (length < len_k), queries near tau (E-ATT binarization), extreme codes, and every fourth
    step a compacted memory (a zero row with a count > 1, L0Drop Algorithm 1).
    """
    rng = np.random.default_rng(seed)
    wf = derive_window_formats(cfg)
    lk, dim, d = cfg.len_k, cfg.dim, cfg.window_d
    ilo, ihi = -(2 ** (cfg.in_bits - 1)), 2 ** (cfg.in_bits - 1) - 1
    x = rng.integers(ilo, ihi + 1, size=(n, dim))
    near = np.clip(cfg.tau_int + rng.integers(-3, 4, size=x.shape), ilo, ihi)
    x = np.where((np.arange(n) % 2 == 1)[:, None], near, x)
    kb, vb = wf.qk_code_bits, wf.v_code_bits
    keys = rng.integers(-(2 ** (kb - 1)), 2 ** (kb - 1), size=(n, lk, dim))
    # half of the memories hold keys close to each other, so the softmax is not one-hot
    narrow = rng.integers(-4, 5, size=(n, lk, dim)) + rng.integers(-50, 51, size=(n, 1, dim))
    keys = np.where((np.arange(n) % 2 == 0)[:, None, None], np.clip(narrow, *_range(kb)), keys)
    values = rng.integers(-(2 ** (vb - 1)), 2 ** (vb - 1), size=(n, lk, dim))
    values[rng.random(n) < 0.1] = 2 ** (vb - 1) - 1
    length = np.where(rng.random(n) < 0.3, rng.integers(1, lk + 1, size=n), lk)
    counts = np.ones((n, lk), dtype=np.int64)
    for i in range(0, n, 4):  # compacted memory: a zero row with count N - N'
        z = int(rng.integers(0, length[i]))
        keys[i, z], values[i, z] = 0, 0
        counts[i, z] = int(rng.integers(1, wf.count_max + 1))
    p = (rng.random(n) * length).astype(np.int64)
    edge = rng.random(n)
    p = np.where(edge < 0.15, 0, np.where(edge < 0.3, length - 1, p))
    w = rng.integers(0, d + 1, size=n)
    pick = rng.random(n)
    w = np.where(pick < 0.1, 0, np.where(pick < 0.3, d, w))
    g = rng.integers(0, cfg.g_levels + 1, size=n)
    return {
        "x": x.astype(np.int64),
        "p": p.astype(np.int64),
        "w": w.astype(np.int64),
        "keys": keys.astype(np.int64),
        "values": values.astype(np.int64),
        "counts": counts,
        "length": length.astype(np.int64),
        "g": g.astype(np.int64),
    }


def _range(bits: int) -> tuple[int, int]:
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


__all__ = [
    "STEP_INPUTS",
    "WindowFormats",
    "WindowGolden",
    "compact_memory",
    "core_config",
    "derive_window_formats",
    "has_focus",
    "penalty_table",
    "random_window_inputs",
    "window_bounds",
    "window_sigma",
]
