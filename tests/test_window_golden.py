"""The window unit's golden model (quant/window.py) against a plain-Python reading of
docs/window.md, the E-ATT core at full width, and L0Drop's compaction (Algorithm 1)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eatt.config import ConfigError, CoreConfig, default_config
from eatt.quant.golden import GoldenCore, exp_table, random_inputs, random_weights, recip_table
from eatt.quant.window import (
    WindowGolden,
    compact_memory,
    core_config,
    derive_window_formats,
    penalty_table,
    random_window_inputs,
)

BASE = dict(kind="window", len_q=1, len_k=12, dim=4, heads=2, window_d=3)


def window_cfg(**changes) -> CoreConfig:
    return CoreConfig.from_dict({**BASE, **changes})


def reference_step(cfg: CoreConfig, wq, x, p, w, keys, values, counts, length, g) -> list:
    """docs/window.md step by step for one step: Python ints and loops only (no floats)."""
    f = derive_window_formats(cfg).core
    exp_t, rec_t = (
        [int(v) for v in exp_table(core_config(cfg))],
        [int(v) for v in recip_table(core_config(cfg))],
    )
    pen_t = penalty_table(cfg).tolist()
    dim, dh, heads = cfg.dim, cfg.d_head, cfg.heads
    xs = [1 if v > cfg.tau_int else 0 for v in x] if cfg.window_score == "eatt" else list(x)
    q = [sum(xs[i] * int(wq[i][j]) for i in range(dim)) >> f.q_shift for j in range(dim)]
    lo, hi = max(p - w, 0), min(p + w, length - 1)
    level = g if cfg.position == "flexible" else 0
    out, focus = [], []
    for h in range(heads):
        cols = range(h * dh, (h + 1) * dh)
        logits = {}
        for s in range(lo, hi + 1):
            if cfg.window_score == "eatt":
                score = -sum(abs(q[c] - int(keys[s][c])) for c in cols)
            else:
                score = sum(q[c] * int(keys[s][c]) for c in cols)
            logits[s] = score - pen_t[level][abs(s - p)]
        top = max(logits.values())
        e = {}
        for s, z in logits.items():
            k = (top - z) >> f.exp_shift
            e[s] = int(counts[s]) * (exp_t[k] if k < len(exp_t) else 0)
        total = sum(e.values())
        n = total.bit_length() - 1
        kbits = f.recip_index_bits
        top_bits = total >> (n - kbits) if n >= kbits else total << (kbits - n)
        r = rec_t[top_bits - (1 << kbits)]
        shift = f.recip_frac + n
        for c in cols:
            numer = sum(e[s] * int(values[s][c]) for s in e)
            o = (numer * r + (1 << (shift - 1))) >> shift
            out.append(min(max(o, -(2 ** (cfg.v_bits - 1))), 2 ** (cfg.v_bits - 1) - 1))
        # Flexible's focus (Eq. 4): the weighted mean row, through the same reciprocal
        offset = (sum(e[s] * (s - lo) for s in e) * r + (1 << (shift - 1))) >> shift
        focus.append(lo + min(offset, 2 ** (cfg.v_bits - 1) - 1, hi - lo))
    return out + focus if cfg.position == "flexible" else out


def check_against_reference(cfg: CoreConfig, n: int, seed: int) -> None:
    weights = random_weights(cfg, seed)
    golden = WindowGolden(cfg, weights)
    inp = random_window_inputs(cfg, n, seed)
    got = golden.forward(**inp)
    if cfg.position == "flexible":  # O, then the focus F per head
        got = np.concatenate(golden.forward(**inp, with_focus=True), axis=1)
    for i in range(n):
        step = {k: v[i] for k, v in inp.items()}
        step = {k: (int(v) if np.ndim(v) == 0 else v.tolist()) for k, v in step.items()}
        expected = reference_step(cfg, weights.wq.tolist(), **step)
        assert got[i].tolist() == expected, f"step {i}: {step['p']=} {step['w']=}"


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"window_score": "dot"},
        {"position": "flexible", "g_levels": 3},
        {"position": "none", "heads": 1},
        {"window_score": "dot", "position": "flexible", "window_sigma": 1.5, "window_d": 5},
        {"window_d": 0},
        {"window_d": 20, "qk_bits": 6, "v_bits": 6, "exp_table_size": 16, "exp_frac": 4},
    ],
)
def test_matches_reference(changes):
    check_against_reference(window_cfg(**changes), n=60, seed=len(changes))


def test_focus_is_the_rounded_mean_row_of_the_window():
    """Flexible Eq. 4, p_t = sum_s a_t(s) s: F is that mean rounded, within one row where the
    table reciprocal rounds the other way (at a half), and always inside the window."""
    cfg = window_cfg(position="flexible", window_d=5, len_k=16)
    golden = WindowGolden(cfg, random_weights(cfg, 5))
    inp = random_window_inputs(cfg, 3000, seed=6)
    out = golden.forward(**inp, intermediates=True)
    o, focus = golden.forward(**inp, with_focus=True)
    assert (o == out["attn"]).all() and (focus == out["focus"]).all()
    assert focus.shape == (3000, cfg.heads)
    e = out["exp"]
    mean = (e * np.arange(cfg.len_k)).sum(-1) / e.sum(-1)
    assert np.abs(focus - mean).max() <= 0.5 + 1e-9 + 1  # half a row, and one at a tie
    assert (focus != np.floor(mean + 0.5)).mean() < 0.02
    lo = np.maximum(inp["p"] - inp["w"], 0)
    hi = np.minimum(inp["p"] + inp["w"], inp["length"] - 1)
    assert ((focus >= lo[:, None]) & (focus <= hi[:, None])).all()
    with pytest.raises(ValueError, match="with_focus: only a unit with position flexible"):
        WindowGolden(window_cfg(), random_weights(window_cfg(), 5)).forward(
            **random_window_inputs(window_cfg(), 2), with_focus=True
        )
    assert "focus" not in WindowGolden(window_cfg(), random_weights(window_cfg(), 5)).forward(
        **random_window_inputs(window_cfg(), 2), intermediates=True
    )


def test_focus_needs_v_bits_that_hold_the_window():
    """F is O's normalization clamped into v_bits: a window of more rows than that holds is
    refused in one line (it would saturate F)."""
    with pytest.raises(ConfigError, match="v_bits: the focus output F"):
        window_cfg(position="flexible", window_d=11, len_k=16, v_bits=4)
    window_cfg(position="gaussian", window_d=11, len_k=16, v_bits=4)  # no focus: fine


def test_default_config_and_many_vectors():
    cfg = default_config("window")
    weights = random_weights(cfg, 3)
    golden = WindowGolden(cfg, weights)
    inp = random_window_inputs(cfg, 2000, seed=3)
    out = golden.forward(**inp, intermediates=True)
    # every vector: the window mask is exactly [max(p-w,0), min(p+w,length-1)]
    pos = np.arange(cfg.len_k)
    lo = np.maximum(inp["p"] - inp["w"], 0)
    hi = np.minimum(inp["p"] + inp["w"], inp["length"] - 1)
    assert (out["mask"] == ((pos >= lo[:, None]) & (pos <= hi[:, None]))).all()
    assert np.abs(out["attn"]).max() < 2 ** (cfg.v_bits - 1) + 1
    check_against_reference(cfg, n=100, seed=4)


def test_only_the_window_is_read():
    cfg = window_cfg()
    golden = WindowGolden(cfg, random_weights(cfg, 1))
    inp = random_window_inputs(cfg, 200, seed=1)
    base = golden.forward(**inp)
    mask = golden.forward(**inp, intermediates=True)["mask"]
    rng = np.random.default_rng(0)
    changed = dict(inp)
    for name in ("keys", "values"):
        noise = rng.integers(-50, 51, size=inp[name].shape)
        changed[name] = np.where(mask[:, :, None], inp[name], np.clip(inp[name] + noise, -500, 500))
    changed["counts"] = np.where(mask, inp["counts"], 7)
    assert (golden.forward(**changed) == base).all()


def test_windows_at_both_edges_and_w_zero():
    cfg = window_cfg(position="none")
    golden = WindowGolden(cfg, random_weights(cfg, 2))
    inp = random_window_inputs(cfg, 4, seed=2)
    lk, d = cfg.len_k, cfg.window_d
    for p, w in [(0, d), (lk - 1, d), (1, d), (lk - 2, d), (5, 0)]:
        steps = {**inp, "p": np.full(4, p), "w": np.full(4, w), "length": np.full(4, lk)}
        steps["counts"] = np.ones_like(inp["counts"])
        m = golden.forward(**steps, intermediates=True)["mask"]
        assert m.sum(axis=1).tolist() == [min(p + w, lk - 1) - max(p - w, 0) + 1] * 4
        check = [
            reference_step(
                cfg, golden.weights.wq, steps["x"][i], p, w, steps["keys"][i],
                steps["values"][i], steps["counts"][i], lk, 0,
            )
            for i in range(4)
        ]  # fmt: skip
        assert golden.forward(**steps).tolist() == check
    # w = 0: one row, softmax weight 1: O is V_p up to the reciprocal's relative error
    # (2**-(K+1) + 2**-recip_frac, docs/golden.md) and the final rounding
    steps = {**inp, "p": np.full(4, 5), "w": np.zeros(4, dtype=int), "length": np.full(4, lk)}
    o = golden.forward(**steps)
    v = steps["values"][:, 5]
    rel = 2.0 ** -(golden.formats.core.recip_index_bits + 1) + 2.0**-cfg.recip_frac
    assert (np.abs(o - v) <= np.abs(v) * rel + 1).all()


def test_full_window_equals_the_core():
    """w >= l_k with no position term: the whole memory, exactly GoldenCore's attention output."""
    cfg = window_cfg(window_d=16, position="none")
    assert cfg.window_rows == cfg.len_k
    core_cfg = core_config(cfg).replace(len_q=1)
    weights = random_weights(cfg, 5)
    core = GoldenCore(core_cfg, weights)
    x, y = random_inputs(core_cfg, 300, seed=5)
    mid = core.forward(x, y, intermediates=True)
    golden = WindowGolden(cfg, weights)
    o = golden.forward(
        x[:, 0], p=np.full(300, 4), w=np.full(300, 16), keys=mid["k"], values=mid["v"]
    )
    assert (o == mid["attn"][:, 0]).all()


@pytest.mark.parametrize("score", ["eatt", "dot"])
def test_compaction_equals_gated_memory(score):
    """L0Drop Algorithm 1: N' kept rows + one zero row with count N - N' = the full gated
    memory (N - N' zero rows), for every gate pattern drawn."""
    cfg = window_cfg(window_score=score, position="none", window_d=12)
    golden = WindowGolden(cfg, random_weights(cfg, 6))
    rng = np.random.default_rng(6)
    inp = random_window_inputs(cfg, 150, seed=6)
    n, lk = 150, cfg.len_k
    gates = rng.random((n, lk)) < rng.random((n, 1))  # sparsity from 0 to 1 per memory
    gates[:, 0] |= ~gates.any(axis=1)  # at least one kept row
    keys = np.where(gates[:, :, None], inp["keys"], 0)
    values = np.where(gates[:, :, None], inp["values"], 0)
    full = golden.forward(inp["x"], np.zeros(n, int), np.full(n, 12), keys, values)
    ck, cv, cc, clen = zip(
        *(compact_memory(keys[i], values[i], gates[i]) for i in range(n)), strict=True
    )
    clen = np.asarray(clen)
    assert (clen == gates.sum(axis=1) + (gates.sum(axis=1) < lk)).all()
    compact = golden.forward(
        inp["x"], np.zeros(n, int), np.full(n, 12), np.stack(ck), np.stack(cv), np.stack(cc), clen
    )
    assert (compact == full).all()
    assert (gates.sum(axis=1) < lk).sum() > 100  # the zero row was exercised


def test_penalty_table():
    cfg = window_cfg(window_d=4)
    f = derive_window_formats(cfg)
    t = penalty_table(cfg)
    assert t.shape == (1, 5) and t[0, 0] == 0 and (np.diff(t[0]) >= 0).all()
    # local-p: (s - p)^2 / (2 sigma^2) with sigma = D/2 = 2 -> d = 4 gives 2 in logit
    assert abs(t[0, 4] * f.core.score_lsb - 2.0) <= f.core.score_lsb / 2
    flex = penalty_table(window_cfg(position="flexible", g_levels=4, window_sigma=1.5))
    assert flex.shape == (5, 4) and (flex[0] == 0).all()
    assert (np.diff(flex, axis=0) >= 0).all()
    assert (penalty_table(window_cfg(position="none")) == 0).all()
    assert (t <= f.penalty_cap).all()


def test_config_window_keys():
    cfg = default_config("window")
    assert cfg.kind == "window" and cfg.len_q == 1 and cfg.window_d == 2
    assert CoreConfig.from_dict(cfg.to_dict()) == cfg
    assert "window_d" not in default_config().to_dict()
    for bad, key in [
        ({"len_q": 2}, "len_q"),
        ({"window_score": "cos"}, "window_score"),
        ({"position": "box"}, "position"),
        ({"window_d": -1}, "window_d"),
        ({"window_sigma": 0}, "window_sigma"),
        ({"count_bits": 0}, "count_bits"),
    ]:
        with pytest.raises(ConfigError, match=key):
            window_cfg(**bad)
    with pytest.raises(ConfigError, match="window_d: only for kind window"):
        CoreConfig.from_dict({**BASE, "kind": "eatt"})


def test_bad_inputs():
    cfg = window_cfg()
    golden = WindowGolden(cfg, random_weights(cfg, 0))
    inp = random_window_inputs(cfg, 3, seed=0)
    for name, value, match in [
        ("p", np.array([0, 12, 1]), "p must lie"),
        ("w", np.array([0, 4, 1]), "w has values"),
        ("counts", np.zeros((3, 12), int), "counts has values"),
        ("keys", np.zeros((3, 11, 4), int), "keys has shape"),
        ("x", np.full((3, 4), 0.5), "x must hold integers"),
    ]:
        with pytest.raises(ValueError, match=match):
            golden.forward(**{**inp, name: value})
    with pytest.raises(ValueError, match="kind"):
        WindowGolden(core_config(cfg), random_weights(cfg, 0))


@settings(max_examples=15, deadline=None)
@given(
    score=st.sampled_from(["eatt", "dot"]),
    position=st.sampled_from(["none", "gaussian", "flexible"]),
    len_k=st.integers(1, 10),
    heads=st.sampled_from([1, 2]),
    window_d=st.integers(0, 6),
    qk_bits=st.integers(4, 12),
    count_bits=st.integers(1, 6),
    seed=st.integers(0, 1000),
)
def test_hypothesis_configs(score, position, len_k, heads, window_d, qk_bits, count_bits, seed):
    cfg = window_cfg(
        window_score=score,
        position=position,
        len_k=len_k,
        heads=heads,
        window_d=window_d,
        qk_bits=qk_bits,
        count_bits=count_bits,
    )
    check_against_reference(cfg, n=8, seed=seed)


def test_compact_memory_refuses_a_count_wider_than_count_bits():
    keys = np.arange(40).reshape(10, 4)
    gates = np.zeros(10, dtype=np.int64)
    gates[0] = 1  # 9 rows pruned: a 3-bit count holds at most 7
    with pytest.raises(ValueError, match="count_bits: 9 pruned rows"):
        compact_memory(keys, keys, gates, count_bits=3)
    _, _, counts, rows = compact_memory(keys, keys, gates, count_bits=4)
    assert rows == 2 and counts[1] == 9
