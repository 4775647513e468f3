"""Tests of eatt.model.windowed (Luong global / local-m / local-p, Flexible Attention, E-ATT
scores): the windows and the mechanisms on their own (their use as the Transformer's
cross-attention: tests/test_windowed_seq2seq.py)."""

import math

import pytest
import torch

from eatt.config import ConfigError
from eatt.model.seq2seq import ModelConfig
from eatt.model.windowed import (
    WINDOW_KINDS,
    WINDOW_SCORES,
    WindowedAttention,
    cross_attention,
    flexible_window,
    gather_window,
    local_window,
    reorder_state,
    strength_levels,
)

B, S, T, D = 3, 12, 7, 8


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _inputs(dtype=torch.float64):
    memory = torch.randn(B, S, D, dtype=dtype)
    padding = torch.zeros(B, S, dtype=torch.bool)
    padding[1, 9:] = True
    padding[2, 4:] = True
    h = torch.randn(B, T, D, dtype=dtype)
    return memory, padding, h


def _module(kind, score="general", **kw):
    return WindowedAttention(kind, score, D, D, **kw).double().eval()


# -- windows -------------------------------------------------------------------------------------
def test_local_window_bounds_at_the_edges():
    lengths = torch.tensor([12, 12, 12, 5, 1])
    center = torch.tensor([0, 11, 30, 3, 0])
    start, end = local_window(center, 2, lengths)
    assert start.tolist() == [0, 9, 9, 1, 0]
    assert end.tolist() == [3, 12, 12, 5, 1]
    # D = 0: exactly the (clipped) center
    start, end = local_window(center, 0, lengths)
    assert (end - start).tolist() == [1] * 5
    assert start.tolist() == [0, 11, 11, 3, 0]


def test_flexible_window_is_the_open_interval_of_penalty_below_tau():
    lengths = torch.tensor([20, 20, 20, 20])
    p_prev = torch.tensor([5.0, 0.0, 19.0, 7.5])
    g = torch.tensor([1.0, 1.0, 0.0, 1e6])
    sigma, tau = 1.5, 1.0
    start, end = flexible_window(p_prev, g, sigma, tau, lengths)
    for b in range(4):
        pen = [g[b] * (s - p_prev[b]) ** 2 / (2 * sigma**2) for s in range(20)]
        inside = [s for s in range(20) if pen[s] < tau]
        if not inside:  # tiny window without an integer: the nearest position
            inside = [min(int(round(float(p_prev[b]))), 19)]
        assert list(range(int(start[b]), int(end[b]))) == inside
    assert (int(start[2]), int(end[2])) == (0, 20)  # g = 0: the whole source


def test_gather_window_reads_only_inside():
    x = torch.arange(2 * 6, dtype=torch.float64).view(2, 6, 1)
    start, end = torch.tensor([1, 4]), torch.tensor([4, 5])
    got, pos, valid = gather_window(x, start, end)
    assert pos.tolist() == [[1, 2, 3], [4, 4, 4]]
    assert valid.tolist() == [[True, True, True], [True, False, False]]
    assert got[..., 0].tolist() == [[1.0, 2.0, 3.0], [10.0, 10.0, 10.0]]


# -- the mechanisms ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", WINDOW_KINDS)
@pytest.mark.parametrize("score", WINDOW_SCORES)
def test_step_equals_all_at_once_and_weights_sum(kind, score):
    memory, padding, h = _inputs()
    m = _module(kind, score, window_d=2)
    ctx_all, w_all = m.attend_all(h, m.init_state(memory, padding))
    state = m.init_state(memory, padding)
    steps = [m.step(h[:, t], state) for t in range(T)]
    torch.testing.assert_close(torch.stack([c for c, _ in steps], 1), ctx_all)
    torch.testing.assert_close(torch.stack([w for _, w in steps], 1), w_all)
    assert not bool(w_all.masked_select(padding[:, None, :].expand_as(w_all)).ne(0).any())
    sums = w_all.sum(-1)
    if kind == "local-p":  # Gaussian-weighted after the softmax (Luong Eq. 10): <= 1
        assert bool((sums <= 1 + 1e-9).all()) and bool((sums > 0).all())
    else:
        torch.testing.assert_close(sums, torch.ones_like(sums))


@pytest.mark.parametrize("gaussian", ["after", "inside"])
@pytest.mark.parametrize("round_p", [False, True])
def test_local_p_unit_forms(gaussian, round_p):
    """The window unit's forms of local-p (gaussian inside the softmax, an integer centre):
    one step equals all at once; inside, the weights sum to 1 and are the softmax of the
    scores minus (s - c)^2 / (2 sigma^2); round_p keeps the gradient to the predictor."""
    memory, padding, h = _inputs()
    m = _module("local-p", "eatt", window_d=2, gaussian=gaussian, round_p=round_p)
    h.requires_grad_(True)
    ctx_all, w_all = m.attend_all(h, m.init_state(memory, padding))
    state = m.init_state(memory, padding)
    steps = [m.step(h[:, t], state) for t in range(T)]
    torch.testing.assert_close(torch.stack([c for c, _ in steps], 1), ctx_all)
    torch.testing.assert_close(torch.stack([w for _, w in steps], 1), w_all)
    sums = w_all.sum(-1)
    if gaussian == "inside":
        torch.testing.assert_close(sums, torch.ones_like(sums))
    ctx_all.sum().backward()
    assert m.w_p.weight.grad is not None and bool(m.w_p.weight.grad.ne(0).any())
    with torch.no_grad():  # the weights by hand, row 0, step 0
        lengths = (~padding).sum(1)
        p_t = m.predicted_position(h[:, 0], lengths)
        c = float(torch.clamp(torch.round(p_t[0]), 0, int(lengths[0]) - 1))
        center = c if round_p else float(p_t[0])
        keys = m._keys(memory)[0]
        scores = m._scores(m._queries(h[:, 0])[:1, None, :], keys[None])[0, 0]
        pos = torch.arange(S, dtype=torch.float64)
        gauss = (pos - center) ** 2 / (2 * m.sigma**2)
        inside_window = (pos >= c - 2) & (pos <= c + 2) & ~padding[0]
        if gaussian == "inside":
            want = torch.softmax((scores - gauss).masked_fill(~inside_window, -math.inf), -1)
        else:
            want = torch.softmax(scores.masked_fill(~inside_window, -math.inf), -1)
            want = want * torch.exp(-gauss)
        torch.testing.assert_close(w_all[0, 0], want)


def test_local_p_unit_form_keys_are_checked():
    with pytest.raises(ValueError, match="gaussian"):
        _module("local-p", gaussian="before")
    with pytest.raises(ConfigError, match="window_gaussian"):
        ModelConfig(cross="local-p", window_gaussian="before")


@pytest.mark.parametrize("kind", ["local-m", "local-p", "flexible"])
@pytest.mark.parametrize("score", WINDOW_SCORES)
def test_positions_outside_the_window_are_never_read(kind, score):
    memory, padding, h = _inputs()
    padding[:] = False
    m = _module(kind, score, window_d=1, tau=0.5)
    if kind == "flexible":
        m.fixed_strength = 1.0  # window p_{t-1} +- 1.5: at most 3 positions
    state = m.init_state(memory, padding)
    reads = []
    for t in range(T):
        before = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in state.items()}
        ctx, weights = m.step(h[:, t], state)
        touched = weights.ne(0)
        reads.append((before, h[:, t], ctx, touched))
    for before, ht, ctx, touched in reads:
        # poison every position that the step gave no weight to, in memory and keys alike
        poisoned = dict(before)
        for key in ("memory", "keys"):
            bad = before[key].clone()
            bad[~touched] = math.nan
            bad[~touched & (torch.rand(B, S) < 0.5)] = math.inf
            poisoned[key] = bad
        again, _ = m.step(ht, poisoned)
        assert bool(torch.isfinite(again).all())
        torch.testing.assert_close(again, ctx)


def test_windowed_steps_score_only_the_window():
    memory, padding, h = _inputs()
    m = _module("local-m", window_d=2)
    state = m.init_state(memory, padding)
    for t in range(T):
        m.step(h[:, t], state)
    lengths = (~padding).sum(1)
    expected = [
        sum(min(min(t, n - 1) + 2, n - 1) - max(min(t, n - 1) - 2, 0) + 1 for t in range(T))
        for n in lengths.tolist()
    ]
    assert state["scored"].tolist() == expected
    assert m.vision_span(state) == pytest.approx(sum(expected) / (B * T))
    g = _module("global")
    state = g.init_state(memory, padding)
    for t in range(T):
        g.step(h[:, t], state)
    assert g.vision_span(state) == pytest.approx(float(lengths.double().mean()))
    assert g.total_scored == int(lengths.sum()) * T and g.total_row_steps == B * T


@pytest.mark.parametrize("score", WINDOW_SCORES)
def test_flexible_with_zero_strength_is_global_attention(score):
    memory, padding, h = _inputs()
    glob = _module("global", score)
    flex = WindowedAttention("flexible", score, D, D, tau=0.3).double().eval()
    flex.load_state_dict(glob.state_dict(), strict=False)
    flex.fixed_strength = 0.0
    a, wa = glob.attend_all(h, glob.init_state(memory, padding))
    b, wb = flex.attend_all(h, flex.init_state(memory, padding))
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(wa, wb)


def test_flexible_threshold_narrows_the_window_and_tracks_the_focus():
    memory, padding, h = _inputs()
    m = _module("flexible", tau=0.5)
    m.fixed_strength = 1.0
    state = m.init_state(memory, padding)
    for t in range(T):
        _, w = m.step(h[:, t], state)
        focus = (w * torch.arange(S, dtype=w.dtype)).sum(-1)  # Eq. 4
        torch.testing.assert_close(state["p_prev"], focus)
    assert m.vision_span(state) <= 3.0  # radius sigma sqrt(2 tau / g) = 1.5: <= 3 integers
    m.tau = None
    state = m.init_state(memory, padding)
    for t in range(T):
        m.step(h[:, t], state)
    assert m.vision_span(state) == pytest.approx(float((~padding).sum(1).double().mean()))


@pytest.mark.parametrize("round_p", [False, True])
@pytest.mark.parametrize("g_levels", [0, 8])
def test_flexible_unit_forms(round_p, g_levels):
    """The window unit's forms of Flexible: round_p makes the focus p_{t-1} an integer source
    position (straight-through; the penalty and the window use it), g_levels puts g(t) on the
    unit's grid l / levels (straight-through); both keep the gradient to g's predictor."""
    memory, padding, h = _inputs()
    m = _module("flexible", "dot", tau=1.0, round_p=round_p, g_levels=g_levels)
    lengths = (~padding).sum(1)
    state = m.init_state(memory, padding)
    for t in range(T):
        g = m.strength(h[:, t])
        if g_levels:  # the window of the level, not of the real g(t)
            g = strength_levels(g, g_levels)
            torch.testing.assert_close(g * g_levels, torch.round(g * g_levels))
        p_prev = state["p_prev"].clone()
        _, w = m.step(h[:, t], state)
        start, end = flexible_window(p_prev, g, m.sigma, 1.0, lengths)
        pos = torch.arange(S)
        outside = (pos < start[:, None]) | (pos >= end[:, None])
        assert bool(w.masked_select(outside).eq(0).all())
        focus = (w * pos.to(w.dtype)).sum(-1)  # Eq. 4
        if round_p:
            focus = torch.minimum(torch.round(focus), (lengths - 1).to(w.dtype))
        torch.testing.assert_close(state["p_prev"], focus)
    m.train()
    h.requires_grad_(True)
    state = m.init_state(memory, padding)
    ctx = torch.stack([m.step(h[:, t], state)[0] for t in range(T)], 1)
    ctx.sum().backward()
    assert bool(m.w_g.weight.grad.ne(0).any())


def test_flexible_window_in_training_cuts_as_decoding_does():
    """train_tau (flexible_train_tau): in training the window of tau = train_tau is applied as
    decoding applies tau (positions outside get weight 0), its edges carry no gradient while
    g's predictor still learns through the penalty; eval uses tau, not train_tau."""
    memory, padding, h = _inputs()
    m = _module("flexible", tau=None, train_tau=1.0).train()
    m.fixed_strength = 1.0
    lengths = (~padding).sum(1)
    state = m.init_state(memory, padding)
    for t in range(T):
        p_prev = state["p_prev"].detach().clone()
        _, w = m.step(h[:, t], state)
        start, end = flexible_window(p_prev, torch.ones(B, dtype=w.dtype), m.sigma, 1.0, lengths)
        pos = torch.arange(S)
        outside = (pos < start[:, None]) | (pos >= end[:, None])
        assert bool(w.masked_select(outside).eq(0).all())
    assert m.vision_span(state) <= 5.0  # radius 1.5 sqrt(2) = 2.12: at most 5 integers
    m.eval()  # decoding: tau (None = the whole source), not train_tau
    state = m.init_state(memory, padding)
    for t in range(T):
        m.step(h[:, t], state)
    assert m.vision_span(state) == pytest.approx(float(lengths.double().mean()))
    m = _module("flexible", "dot", train_tau=1.6).train()  # g(t) predicted: it gets a gradient
    state = m.init_state(memory, padding)
    ctx = torch.stack([m.step(h[:, t], state)[0] for t in range(T)], 1)
    ctx.sum().backward()
    assert bool(m.w_g.weight.grad.ne(0).any())
    with pytest.raises(ValueError, match="train_tau must be > 0"):
        _module("flexible", train_tau=0.0)


def test_flexible_train_tau_key_is_checked():
    base = dict(dim=16, heads=2, max_len=12)
    cfg = ModelConfig(cross="flexible", flexible_train_tau=1.6, **base)
    assert cross_attention(cfg, 16, 16).train_tau == 1.6
    assert cross_attention(cfg.replace(flexible_train_tau=None), 16, 16).train_tau is None
    with pytest.raises(ConfigError, match="^flexible_train_tau: only flexible has a window"):
        ModelConfig(cross="quant-flexible", flexible_train_tau=1.6, **base)
    with pytest.raises(ConfigError, match="^flexible_train_tau: must be > 0"):
        ModelConfig(cross="flexible", flexible_train_tau=-1.0, **base)


def test_flexible_unit_form_keys_are_checked():
    base = dict(dim=16, heads=2, max_len=12, window_score="dot")
    cfg = ModelConfig(cross="flexible", window_p_round=True, window_g_round=True, **base)
    attn = cross_attention(cfg, 16, 16)
    assert (attn.round_p, attn.g_levels) == (True, 8)
    assert cross_attention(cfg.replace(window_g_round=None), 16, 16).g_levels == 0
    with pytest.raises(ConfigError, match="^window_g_round: only flexible and quant-flexible"):
        ModelConfig(cross="local-p", window_g_round=True, **base)
    with pytest.raises(ConfigError, match="window_g_round: must be true"):
        ModelConfig(cross="flexible", window_g_round="yes", **base)
    with pytest.raises(ConfigError, match="^window_g_round: quant-flexible takes g"):
        ModelConfig(cross="quant-flexible", window_g_round=False, **base)
    with pytest.raises(ConfigError, match="^window_p_round: quant-flexible centres its focus"):
        ModelConfig(cross="quant-flexible", window_p_round=False, **base)
    ModelConfig(cross="quant-flexible", window_p_round=True, window_g_round=True, **base)
    with pytest.raises(ValueError, match="g_levels must be >= 0"):
        _module("flexible", g_levels=-1)


def test_local_p_position_stays_in_the_source():
    memory, padding, h = _inputs()
    m = _module("local-p")
    lengths = (~padding).sum(1)
    for scale in (0.0, 1.0, 1e4, -1e4):
        p = m.predicted_position(h * scale + scale, lengths)
        assert bool((p >= 0).all()) and bool((p <= lengths[:, None].double()).all())


def test_counts_add_log_count_to_the_scores():
    memory, padding, h = _inputs()
    m = _module("global", "dot")
    counts = torch.ones(B, S, dtype=torch.long)
    counts[:, 0] = 3
    # row 0 counted three times == three copies of row 0
    tripled = torch.cat([memory[:, :1], memory[:, :1], memory], 1)
    pad3 = torch.cat([padding[:, :1], padding[:, :1], padding], 1)
    a, _ = m.step(h[:, 0], m.init_state(memory, padding, counts))
    b, _ = m.step(h[:, 0], m.init_state(tripled, pad3))
    torch.testing.assert_close(a, b)


def test_reorder_state_selects_rows():
    memory, padding, h = _inputs()
    m = _module("flexible")
    state = m.init_state(memory, padding)
    m.step(h[:, 0], state)
    index = torch.tensor([2, 2, 0])
    picked = reorder_state(state, index)
    assert picked["t"] == state["t"] and picked["steps"] == state["steps"]
    assert torch.equal(picked["p_prev"], state["p_prev"][index])
    assert torch.equal(picked["memory"], memory[index])
    # a reordered state continues like the selected rows would
    a, _ = m.step(h[index, 1], picked)
    b, _ = m.step(h[:, 1], state)
    torch.testing.assert_close(a, b[index])


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(ValueError, match="unknown windowed kind"):
        WindowedAttention("local-x", "dot", D, D)
    with pytest.raises(ValueError, match="dot scores need"):
        WindowedAttention("global", "dot", D, D + 1)
    with pytest.raises(ValueError, match="tau must be > 0"):
        WindowedAttention("flexible", "dot", D, D, tau=0.0)
    with pytest.raises(ConfigError, match="valid for cross only"):
        ModelConfig(dec_self="local-m")
    with pytest.raises(ConfigError, match="window_score"):
        ModelConfig(cross="global", window_score="cosine")
    with pytest.raises(ConfigError, match="flexible_tau"):
        ModelConfig(cross="flexible", flexible_tau=-1.0)
    with pytest.raises(ConfigError, match="l0drop_rule"):
        ModelConfig(l0drop_rule="freq")
    m = cross_attention(ModelConfig(cross="flexible", flexible_tau=0.8), D, D, g_input_dim=4)
    assert m.kind == "flexible" and m.tau == 0.8 and m.sigma == 1.5
    with pytest.raises(ValueError, match="g_input"):
        m.step(torch.randn(B, D), m.init_state(torch.randn(B, S, D), torch.zeros(B, S).bool()))
    assert cross_attention(ModelConfig(), D, D).kind == "global"
