"""The golden model: against a plain-Python reading of docs/golden.md, its widths, its tables."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eatt.config import CoreConfig
from eatt.quant.check import golden_check, width_violations
from eatt.quant.golden import (
    CoreWeights,
    GoldenCore,
    derive_formats,
    edge_inputs,
    exp_table,
    first_mismatch,
    random_inputs,
    random_weights,
    recip_table,
    reciprocal,
)


def reference_forward(cfg: CoreConfig, w: CoreWeights, x, y) -> list:
    """docs/golden.md step by step, one vector, plain Python ints and loops (slow, obvious)."""
    f = derive_formats(cfg)
    exp_t, rec_t = [int(v) for v in exp_table(cfg)], [int(v) for v in recip_table(cfg)]
    wq, wk, wv, wo = (m.tolist() for m in (w.wq, w.wk, w.wv, w.wo))
    dim, dh = cfg.dim, cfg.d_head

    def matvec(row, m):
        return [sum(row[i] * m[i][j] for i in range(dim)) for j in range(dim)]

    def sel(row):
        return [1 if v > cfg.tau_int else 0 for v in row] if cfg.kind == "eatt" else row

    q = [[v >> f.q_shift for v in matvec(sel(r), wq)] for r in x.tolist()]
    k = [[v >> f.q_shift for v in matvec(sel(r), wk)] for r in y.tolist()]
    v = [[u >> f.v_shift for u in matvec(r, wv)] for r in y.tolist()]
    att = [[0] * dim for _ in range(cfg.len_q)]
    for h in range(cfg.heads):
        cols = range(h * dh, (h + 1) * dh)
        for i in range(cfg.len_q):
            if cfg.kind == "eatt":
                s = [-sum(abs(q[i][c] - k[j][c]) for c in cols) for j in range(cfg.len_k)]
            else:
                s = [sum(q[i][c] * k[j][c] for c in cols) for j in range(cfg.len_k)]
            top = max(s)
            idx = [(top - sj) >> f.exp_shift for sj in s]
            e = [exp_t[t] if t < cfg.exp_table_size else 0 for t in idx]
            total = sum(e)
            n = total.bit_length() - 1
            kb = f.recip_index_bits
            top_bits = total >> (n - kb) if n >= kb else total << (kb - n)
            r = rec_t[top_bits - (1 << kb)]
            sh = cfg.recip_frac + n
            for c in cols:
                numer = sum(e[j] * v[j][c] for j in range(cfg.len_k))
                o = (numer * r + (1 << (sh - 1))) >> sh
                att[i][c] = min(max(o, -(2 ** (cfg.v_bits - 1))), 2 ** (cfg.v_bits - 1) - 1)
    return [[u >> f.out_shift for u in matvec(row, wo)] for row in att]


CONFIGS = [
    CoreConfig("eatt", 4, 4, 8, 1),
    CoreConfig("eatt", 3, 5, 8, 2, tau=0.0),
    CoreConfig("eatt", 2, 6, 12, 3, tau=0.5, weight_bits=4, qk_bits=6, v_bits=8, out_bits=8),
    CoreConfig("vanilla", 4, 4, 8, 2),
    CoreConfig(
        "vanilla", 5, 3, 6, 1, weight_bits=4, qk_bits=8, exp_table_size=64, recip_table_size=16
    ),
    CoreConfig("eatt", 1, 1, 4, 1, exp_frac=4, recip_frac=4, recip_table_size=4),
]


@pytest.mark.parametrize(
    "cfg", CONFIGS, ids=lambda c: f"{c.kind}-{c.len_q}x{c.len_k}x{c.dim}h{c.heads}"
)
def test_golden_equals_plain_python_reference(cfg):
    w = random_weights(cfg, seed=3)
    x, y = random_inputs(cfg, 12, seed=4)
    ex, ey = edge_inputs(cfg)
    x, y = np.concatenate([x, ex[::5]]), np.concatenate([y, ey[::5]])
    got = GoldenCore(cfg, w).forward(x, y)
    want = np.array([reference_forward(cfg, w, a, b) for a, b in zip(x, y, strict=True)])
    assert first_mismatch(want, got) is None, first_mismatch(want, got)


def test_input_equal_to_tau_binarizes_to_zero():
    cfg = CoreConfig("eatt", 1, 1, 4, 1, tau=1.0)  # tau_int = 16 with in_frac = 4
    w = random_weights(cfg, 0)
    g = GoldenCore(cfg, w)
    at_tau = np.full((1, 1, 4), cfg.tau_int)
    above = at_tau + 1
    q_at, _ = g.project_qk(at_tau, at_tau)
    q_above, _ = g.project_qk(above, above)
    assert (q_at == 0).all()  # nothing selected: 1[x > tau] is 0 at x == tau (Eq. 4)
    assert (q_above == w.wq.sum(axis=0) >> g.formats.q_shift).all()


def test_tau_between_grid_points_uses_floor():
    cfg = CoreConfig("eatt", 1, 1, 4, 1, tau=1.03)  # 1.03 * 16 = 16.48 -> x_int > 16
    assert cfg.tau_int == 16
    cfg = CoreConfig("eatt", 1, 1, 4, 1, tau=-0.5)
    assert cfg.tau_int == -8


def test_tables():
    cfg = CoreConfig("eatt", 4, 4, 8, 1)
    e = exp_table(cfg)
    assert e[0] == 2**cfg.exp_frac and (np.diff(e) <= 0).all() and e.min() >= 0
    r = recip_table(cfg)
    assert (r > 2 ** (cfg.recip_frac - 1)).all() and (r <= 2**cfg.recip_frac).all()
    assert (np.diff(r) <= 0).all()


def test_exp_table_reaches_zero_or_covers_span():
    for cfg in CONFIGS:
        f = derive_formats(cfg)
        covers = cfg.exp_table_size * 2**f.exp_shift > 2 * f.score_bound
        far = cfg.exp_table_size * 2**f.exp_shift * f.score_lsb > math.log(2) * (cfg.exp_frac + 1)
        assert covers or far
        # ... and the shift is the smallest that does it (no resolution thrown away)
        if f.exp_shift:
            s = f.exp_shift - 1
            assert not (cfg.exp_table_size * 2**s > 2 * f.score_bound)
            assert not (cfg.exp_table_size * 2**s * f.score_lsb > math.log(2) * (cfg.exp_frac + 1))


@pytest.mark.parametrize("bits", [2, 3, 8])
def test_reciprocal_index_is_exact_at_powers_of_two(bits):
    table = np.arange(2**bits)  # identity: returns the index
    totals = np.array([1, 2, 3, 4, 7, 8, 9, 2**20 - 1, 2**20, 2**20 + 1, 2**40 + 12345])
    idx, n = reciprocal(totals, table, bits)
    for t, i, nn in zip(totals.tolist(), idx.tolist(), n.tolist(), strict=True):
        assert nn == t.bit_length() - 1
        top = t >> (nn - bits) if nn >= bits else t << (bits - nn)
        assert i == top - 2**bits


def _extreme_weights(cfg: CoreConfig, sign: int) -> CoreWeights:
    m = np.full((cfg.dim, cfg.dim), sign * cfg.weight_max, dtype=np.int64)
    return CoreWeights(m, -m, m, m)


@pytest.mark.parametrize("cfg", CONFIGS[:5], ids=lambda c: f"{c.kind}-{c.dim}")
@pytest.mark.parametrize("weights", ["random", "max", "min", "zero"])
def test_widths_hold_on_extreme_weights_and_edge_vectors(cfg, weights):
    if weights == "random":
        w = random_weights(cfg, 7)
    elif weights == "zero":
        z = np.zeros((cfg.dim, cfg.dim), dtype=np.int64)
        w = CoreWeights(z, z, z, z)
    else:
        w = _extreme_weights(cfg, 1 if weights == "max" else -1)
    g = GoldenCore(cfg, w)
    ex, ey = edge_inputs(cfg)
    x, y = random_inputs(cfg, 200, seed=1)
    stages = g.forward(np.concatenate([x, ex]), np.concatenate([y, ey]), intermediates=True)
    assert width_violations(g, stages) == []


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(["eatt", "vanilla"]),
    len_q=st.integers(1, 6),
    len_k=st.integers(1, 6),
    heads=st.integers(1, 3),
    d_head=st.integers(1, 5),
    in_bits=st.integers(3, 10),
    weight_bits=st.integers(2, 8),
    qk_bits=st.integers(3, 16),
    v_bits=st.integers(3, 16),
    tau=st.sampled_from([0.0, 0.5, 1.0, -1.0]),
    seed=st.integers(0, 2**16),
)
def test_generated_configs_match_reference_and_keep_widths(
    kind, len_q, len_k, heads, d_head, in_bits, weight_bits, qk_bits, v_bits, tau, seed
):
    tau = min(tau, (2 ** (in_bits - 1) - 1) / 4)  # keep tau inside the <in_bits, 2> range
    cfg = CoreConfig(
        kind,
        len_q,
        len_k,
        heads * d_head,
        heads,
        tau=tau,
        in_bits=in_bits,
        in_frac=2,
        weight_bits=weight_bits,
        qk_bits=qk_bits,
        v_bits=v_bits,
        out_bits=12,
        exp_table_size=32,
        exp_frac=8,
        recip_table_size=16,
        recip_frac=10,
    )
    w = random_weights(cfg, seed)
    x, y = random_inputs(cfg, 4, seed=seed + 1)
    g = GoldenCore(cfg, w)
    stages = g.forward(x, y, intermediates=True)
    assert width_violations(g, stages) == []
    want = np.array([reference_forward(cfg, w, a, b) for a, b in zip(x, y, strict=True)])
    assert first_mismatch(want, stages["out"]) is None


@pytest.mark.parametrize(
    "cfg", CONFIGS, ids=lambda c: f"{c.kind}-{c.len_q}x{c.len_k}x{c.dim}h{c.heads}"
)
def test_golden_within_derived_bound_of_float_model(cfg):
    r = golden_check(cfg, random_weights(cfg, 11), vectors=1000, seed=5)
    assert r["ok"], r


@pytest.mark.parametrize("kind", ["eatt", "vanilla"])
def test_bound_is_tight_at_high_precision(kind):
    """At wide formats the derived bound is a few output LSBs: it is not vacuous."""
    cfg = CoreConfig(
        kind,
        4,
        6,
        8,
        2,
        in_frac=6,
        weight_bits=6,
        qk_bits=24,
        v_bits=20,
        out_bits=24,
        exp_table_size=4096,
        exp_frac=16,
        recip_table_size=4096,
        recip_frac=18,
    )
    w = random_weights(cfg, 2)
    r = golden_check(cfg, w, vectors=500, seed=3)
    assert r["ok"], r
    out_scale = np.abs(GoldenCore(cfg, w).forward(*random_inputs(cfg, 200, 1))).max()
    assert r["float"]["bound"] <= 0.03 * out_scale * r["float"]["out_lsb"]


def test_the_bound_at_the_paper_size_is_the_cap_not_an_overflow():
    """Vanilla at the E-ATT paper's size (l 22, d 512, 8 heads): the logits' error bound passes
    exp's range (math.expm1 overflowed: eatt golden / eatt flow ended in an internal error);
    the total variation is capped at 2, so the bound is finite and holds."""
    cfg = CoreConfig("vanilla", 22, 22, 512, 8)
    r = golden_check(cfg, random_weights(cfg, 1), vectors=3, seed=1)
    assert r["ok"] and math.isfinite(r["float"]["bound"]), r


def test_first_mismatch_names_vector_index_expected_and_got():
    a = np.zeros((3, 2, 2), dtype=np.int64)
    b = a.copy()
    assert first_mismatch(a, b) is None
    b[1, 0, 1] = 5
    b[2, 1, 1] = 7
    msg = first_mismatch(a, b)
    assert "vector 1" in msg and "(0, 1)" in msg and "expected 0" in msg and "got 5" in msg
    assert msg.startswith("2 mismatching")


def test_weights_and_inputs_are_checked():
    cfg = CoreConfig("eatt", 2, 2, 4, 1, weight_bits=4)
    w = random_weights(cfg, 0)
    bad = CoreWeights(w.wq * 0 + 8, w.wk, w.wv, w.wo)  # 8 > 7, the 4-bit narrow range
    with pytest.raises(ValueError, match="wq exceeds the 4-bit"):
        GoldenCore(cfg, bad)
    g = GoldenCore(cfg, w)
    with pytest.raises(ValueError, match="x has shape"):
        g.forward(np.zeros((1, 3, 4), dtype=np.int64), np.zeros((1, 2, 4), dtype=np.int64))
    with pytest.raises(ValueError, match="outside the 8-bit range"):
        g.forward(np.full((1, 2, 4), 200), np.zeros((1, 2, 4), dtype=np.int64))


def test_random_weights_are_deterministic():
    cfg = CoreConfig("vanilla", 2, 2, 4, 1)
    a, b, c = random_weights(cfg, 1), random_weights(cfg, 1), random_weights(cfg, 2)
    assert all((a.as_dict()[n] == b.as_dict()[n]).all() for n in CoreWeights.NAMES)
    assert any((a.as_dict()[n] != c.as_dict()[n]).any() for n in CoreWeights.NAMES)


def clamp_case(kind: str) -> tuple[CoreConfig, CoreWeights, np.ndarray, np.ndarray]:
    """A core and inputs whose attention output must be clamped: every key row equal and V at
    its extreme, and E = 15 * 2**exp_frac, whose 2-entry reciprocal table over-estimates 1/E by
    7% (bin middle 1.75 for a mantissa of 1.875)."""
    cfg = CoreConfig(kind, 2, 15, 4, 1, recip_table_size=2)
    m = np.full((4, 4), cfg.weight_max, dtype=np.int64)
    lo, hi = -(2 ** (cfg.in_bits - 1)), 2 ** (cfg.in_bits - 1) - 1
    x = np.zeros((2, 2, 4), dtype=np.int64)
    y = np.stack([np.full((15, 4), lo), np.full((15, 4), hi)]).astype(np.int64)
    return cfg, CoreWeights(m, m, m, m), x, y


@pytest.mark.parametrize("kind", ["eatt", "vanilla"])
def test_output_clamp_is_reached_and_matches_reference(kind):
    cfg, w, x, y = clamp_case(kind)
    stages = GoldenCore(cfg, w).forward(x, y, intermediates=True)
    v_lo, v_hi = -(2 ** (cfg.v_bits - 1)), 2 ** (cfg.v_bits - 1) - 1
    assert (stages["v"] > v_lo).all() and (stages["v"] < v_hi).all()  # V itself is inside
    assert (stages["attn"][0] == v_lo).all() and (stages["attn"][1] == v_hi).all()  # clamped
    want = np.array([reference_forward(cfg, w, a, b) for a, b in zip(x, y, strict=True)])
    assert first_mismatch(want, stages["out"]) is None
