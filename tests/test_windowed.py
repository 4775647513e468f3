"""Tests of eatt.model.windowed (Luong global / local-m / local-p, Flexible Attention, E-ATT
scores) and of its use as the Transformer's cross-attention."""

import math

import pytest
import torch

from eatt.config import ConfigError
from eatt.model.data import BOS, EOS, PAD
from eatt.model.evaluate import beam_search, greedy_decode, translate_with_stats
from eatt.model.seq2seq import ModelConfig, Seq2Seq, build_model, load_checkpoint
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


# -- in the Transformer --------------------------------------------------------------------------
SRC_V, TGT_V = 19, 23


def _seq2seq(kind, **kw):
    cfg = ModelConfig(
        dim=16, heads=2, ffn_dim=32, dropout=0.0, cross=kind, window_d=2, max_len=24, **kw
    )
    return Seq2Seq(cfg, SRC_V, TGT_V).double().eval()


def _batch(batch=3, src_len=9, tgt_len=6):
    src = torch.randint(4, SRC_V, (batch, src_len))
    src[:, -1] = EOS
    src[0, 5:] = PAD
    src[0, 4] = EOS
    tgt = torch.randint(4, TGT_V, (batch, tgt_len))
    tgt[:, 0] = BOS
    return src, tgt


@pytest.mark.parametrize(
    "kind, score, tau",
    [(k, "general", None) for k in WINDOW_KINDS]
    + [("flexible", "eatt", 0.8), ("local-p", "concat", None), ("local-m", "dot", None)],
)
def test_transformer_incremental_decoding_equals_full(kind, score, tau):
    model = _seq2seq(kind, window_score=score, flexible_tau=tau)
    src, tgt = _batch()
    full = model(src, tgt)
    memory, padding = model.encode(src)
    cache = model.init_cache()
    steps = [model.decode(tgt[:, t : t + 1], memory, padding, cache, offset=t) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-9, atol=1e-9)
    assert greedy_decode(model, src, max_len=8) == greedy_decode(
        model, src, max_len=8, incremental=False
    )
    wide = beam_search(model, src, beam=3, max_len=8)
    assert len(wide) == 3


def test_flexible_trains_and_reports_its_strength():
    model = _seq2seq("flexible", flexible_beta=0.1).train()
    src, tgt = _batch()
    tgt[1, 4:] = PAD  # a shorter target: its padded steps do not count
    logits = model(src, tgt)
    aux = model.aux_losses()
    assert set(aux) == {"flexible_g"} and 0 < float(aux["flexible_g"].detach()) < 1
    # Eq. 9 per sentence: sum_i (1/T_i) sum_t g_i(t) over real target steps, / target tokens
    real = tgt.ne(PAD)
    per_layer = []
    for layer in model.decoder:
        g = torch.stack(layer.cross_attn.last_state["g_steps"], 1).detach()
        sentence = (g * real).sum(1) / real.sum(1)
        per_layer.append(sentence.sum() / real.sum())
    assert float(aux["flexible_g"].detach()) == pytest.approx(float(torch.stack(per_layer).mean()))
    (logits.logsumexp(-1).mean() - aux["flexible_g"]).backward()
    # a direct decode (another batch) refreshes the target mask the term averages over
    memory, padding = model.encode(src[:2])
    model.decode(tgt[:2], memory, padding)
    assert model.aux_losses()["flexible_g"].shape == ()
    assert model.decoder[0].cross_attn.core.v_g.bias.grad is not None
    assert _seq2seq("local-p").aux_losses() == {}


def test_vision_span_through_evaluation():
    model = _seq2seq("flexible", flexible_tau=0.3)
    for layer in model.decoder:
        layer.cross_attn.core.fixed_strength = 1.0
    src, _ = _batch()

    class _Batch:
        def __init__(self, src):
            self.src, self.index = src, list(range(src.shape[0]))

    _, stats = translate_with_stats(model, [_Batch(src)], beam=1, device=torch.device("cpu"))
    assert 1.0 <= stats["vision_span"] <= 3.0
    assert stats["sparsity_rate"] is None and stats["decode_seconds"] > 0
    model = _seq2seq("global")
    _, stats = translate_with_stats(model, [_Batch(src)], beam=2, device=torch.device("cpu"))
    lengths = (~src.eq(PAD)).sum(1).double()
    assert lengths.min() <= stats["vision_span"] <= lengths.max()


def test_build_model_and_cross_only():
    assert isinstance(build_model(ModelConfig(dim=16, heads=2), SRC_V, TGT_V), Seq2Seq)
    names = {n for n, _ in _seq2seq("local-p").named_parameters()}
    assert "decoder.0.cross_attn.core.w_p.weight" in names
    assert "decoder.0.cross_attn.o_proj.weight" in names


# -- L0Drop in the Transformer -------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["vanilla", "eatt"])
def test_transformer_compacted_memory_decodes_like_the_gated_memory(kind):
    model = Seq2Seq(
        ModelConfig(dim=16, heads=2, ffn_dim=32, dropout=0.0, attention=kind, l0drop=True),
        SRC_V,
        TGT_V,
    ).double()
    model.eval()
    with torch.no_grad():  # close about half of the gates
        model.l0drop.w.copy_(torch.randn(16, dtype=torch.float64) * 3)
    src, tgt = _batch()
    memory, padding, counts = model.encode_for_decoding(src)
    gated, gpad = model.encode(src)
    closed = model.gate_stats[0]
    assert 0 < closed < model.gate_stats[1]
    assert memory.shape[1] < gated.shape[1] or bool(counts.gt(1).any())
    torch.testing.assert_close(
        model.decode(tgt, memory, padding, counts=counts), model.decode(tgt, gated, gpad)
    )
    model.compact_memory = False
    assert model.encode_for_decoding(src)[2] is None
    model.compact_memory = True
    src_only = type("B", (), {"src": src, "index": list(range(3))})
    _, stats = translate_with_stats(model, [src_only], beam=2, device=torch.device("cpu"))
    assert 0 < stats["sparsity_rate"] < 1
    model.train()
    model(src, tgt)
    assert set(model.aux_losses()) == {"l0"}


def test_transformer_rule_pattern_gates():
    cfg = ModelConfig(dim=16, heads=2, ffn_dim=32, l0drop=True, l0drop_rule="group")
    model = Seq2Seq(cfg, SRC_V, TGT_V).eval()
    src, tgt = _batch()
    memory, padding, counts = model.encode_for_decoding(src)
    real = (~src.eq(PAD)).sum(1)
    # group keeps 1-based odd positions: ceil(n / 2) rows, then the zero row
    for b, n in enumerate(real.tolist()):
        kept = (n + 1) // 2
        assert bool(counts[b, :kept].eq(1).all()) and int(counts[b, kept]) == n // 2
    assert model.aux_losses() == {}


# -- the LSTM checkpoint and the quick experiments -----------------------------------------------
def _tiny_data():
    from eatt.model.data import TaskConfig

    return TaskConfig(
        n_train=60, n_dev=8, n_test=8, max_len=8, n_nouns=6, n_verbs=3, n_adjs=3, seed=5
    )


@pytest.mark.parametrize(
    "model",
    [
        {
            "arch": "lstm",
            "dim": 16,
            "enc_layers": 1,
            "dec_layers": 1,
            "cross": "flexible",
            "flexible_beta": 0.1,
            "flexible_tau": 1.0,
        },
        {
            "dim": 16,
            "heads": 2,
            "ffn_dim": 32,
            "enc_layers": 1,
            "dec_layers": 1,
            "cross": "local-p",
            "l0drop": True,
            "l0drop_lambda": 0.5,
        },
        {
            "dim": 16,
            "heads": 2,
            "ffn_dim": 32,
            "enc_layers": 1,
            "dec_layers": 1,
            "cross": "quant-local-p",
            "window_score": "eatt",
            "max_len": 16,
        },
    ],
)
def test_train_and_evaluate_windowed_and_lstm_checkpoints(tmp_path, model):
    from eatt.model.evaluate import evaluate
    from eatt.model.seq2seq import load_checkpoint
    from eatt.model.train import TrainConfig, train

    cfg = ModelConfig.from_dict(model)
    summary = train(
        cfg,
        TrainConfig(steps=3, eval_every=0, progress=False, max_tokens=256, data=_tiny_data()),
        tmp_path,
    )
    loaded = load_checkpoint(summary["checkpoint"])[0]
    assert type(loaded).__name__ == ("LSTMSeq2Seq" if cfg.arch == "lstm" else "Seq2Seq")
    result = evaluate(summary["checkpoint"], beam=2, device="cpu")
    assert result["arch"] == cfg.arch and result["vision_span"] > 0
    assert result["decode_seconds"] > 0 and 0 <= result["bleu"] <= 100
    if cfg.l0drop:
        assert 0.0 <= result["sparsity_rate"] <= 1.0
    else:
        assert result["sparsity_rate"] is None
    wide = evaluate(
        summary["checkpoint"], beam=2, device="cpu", model_overrides={"flexible_tau": None}
    )
    if cfg.cross == "flexible":  # tau = infinity scores the whole source
        assert wide["vision_span"] >= result["vision_span"]


@pytest.mark.parametrize(
    "name",
    [
        "window",
        "window-lstm",
        "flexible-train-window",
        "window-eatt",
        "window-unit",
        "flexible-unit",
        "l0drop",
        "l0drop-redundant",
        "l0drop-unit",
        "qat",
    ],
)
def test_quick_staged_experiments_write_their_tables(tmp_path, monkeypatch, name):
    from eatt.model import experiments
    from eatt.model.experiments import base as sizes

    monkeypatch.setattr(sizes, "_QUICK_TRAIN", sizes._QUICK_TRAIN.replace(steps=3))
    monkeypatch.setattr(sizes, "_QUICK_DATA", _tiny_data())
    report = experiments.run_experiment(name, quick=True, out_dir=tmp_path, quiet=True)
    table = (tmp_path / name / "results.md").read_text()
    saved = (tmp_path / name / "results.json").read_text()
    assert '"rows"' in saved and table.startswith(f"{name} (quick)")
    rows = {r["label"]: r for r in report["rows"]}
    if report["plot"] is not None:
        assert (tmp_path / name / f"{name}.png").stat().st_size > 0
    if name == "window-lstm":
        assert report["model"]["arch"] == "lstm" and report["model"]["window_score"] == "concat"
        assert report["train"]["peak_lr"] == experiments.window.LSTM_PEAK_LR  # the LSTM's
        assert not any(label.startswith("quant-") for label in rows)
    if name == "window":  # the unit's kinds beside the float ones, checked as exported
        unit = rows["quant-local-p (the unit, dot)"]
        assert unit["hardware"]["exported"]["hypotheses_differ"] == 0
        assert 1 <= unit["vision_span"] <= 2 * experiments.WINDOW_D + 1
        for tau in ("inf", "on dev"):  # Flexible on the unit: its focus is the next centre
            for score in ("dot", "eatt"):
                flex = rows[f"quant-flexible (the unit, {score}), tau {'= ' * (tau == 'inf')}{tau}"]
                assert flex["hardware"]["exported"]["hypotheses_differ"] == 0
        for score, stage in report["flexible"].items():  # beta picked on dev from the grid
            assert [b["beta"] for b in stage["beta_search"]] == [0.1, 1.0]
            name = "flexible" if score == "general" else f"flexible {score}"
            assert f"{name} fine-tuned (beta {stage['beta']:g}), tau on dev" in rows
        assert "eatt scores, beta picked on dev:" in table
        assert set(report["flexible"]) == {"general", "eatt"}
        assert "eatt scores: window" in table and "(eatt scores) over tau" in table
    if name == "flexible-train-window":  # each beta with and without the window in training
        assert list(rows)[:2] == ["flexible, tau = inf", "flexible, tau on dev"]
        for score, stage in report["flexible"].items():
            grid = [(b["beta"], b["train_tau"]) for b in stage["beta_search"]]
            assert grid == [(0.1, None), (0.1, 1.6), (1.0, None), (1.0, 1.6)]
            assert f"{score} scores, beta picked on dev:" in table
        assert "beta 1, window in training at tau 1.6: tau" in table
        assert report["flexible_train_taus"] == [None, 1.6]
        assert not any(label.startswith(("global", "local", "quant-")) for label in rows)
        # every tau picked within 0.5 dev BLEU of the best fine-tune at tau = inf
        for stage in report["flexible"].values():
            best = max(b["dev_bleu_inf"] for b in stage["beta_search"])
            assert stage["dev_bleu_reference"] == best
            for b in stage["beta_search"]:
                assert b["tau"] is None or b["dev_bleu"] >= best - 0.5
        # --resume: the finished runs are reused (not trained again), the report is the same
        runs = sorted((tmp_path / name / "runs").glob("*/best.pt"))
        stamps = [p.stat().st_mtime_ns for p in runs]
        again = experiments.run_experiment(name, quick=True, out_dir=tmp_path, quiet=True,
                                           resume=True)  # fmt: skip
        assert [p.stat().st_mtime_ns for p in runs] == stamps
        keep = ("label", "tau", "bleu", "vision_span")  # decode_seconds: the machine's
        assert [{k: r[k] for k in keep} for r in again["rows"]] == [
            {k: r[k] for k in keep} for r in report["rows"]
        ]
        with pytest.raises(ValueError, match="^--resume: only the staged experiments"):
            experiments.run_experiment("ablation", quick=True, out_dir=tmp_path, resume=True)
    if name in ("window", "window-lstm"):
        assert list(rows)[:4] == ["global", "local-m", "local-p", "flexible, tau = inf"]
        assert [c["tau"] for c in report["curve"]] == list(experiments.TAUS)
        spans = [c["vision_span"] for c in report["curve"]]
        assert spans[0] <= spans[-1]  # tau 0.3 vs 999 (the outputs may differ in between)
        assert rows["local-m"]["vision_span"] <= 2 * experiments.WINDOW_D + 1
        assert rows["global"]["vision_span"] == pytest.approx(
            rows["flexible, tau = inf"]["vision_span"]
        )
        assert "Target: Flexible cuts" in table
    if name == "window-eatt":
        assert {r["score"] for r in report["rows"]} == {"dot", "eatt"}
        units = [r for r in report["rows"] if r.get("window") == "unit"]
        assert [r["label"] for r in units][:3] == [
            "quant-local-p dot (the unit)", "quant-local-p eatt (the unit)",
            "quant-flexible dot (the unit)",
        ]  # fmt: skip
        assert all(r["hardware"]["exported"]["hypotheses_differ"] == 0 for r in units)
        assert "quant-flexible eatt, tau = 1: 0" in table
        # its models are independent: two Ray workers give the same rows, in the same order
        # (local-p's four models: float and unit, dot and E-ATT scores)
        monkeypatch.setattr(experiments.window_eatt, "QUICK_KINDS", ("local-p",))
        again = experiments.run_experiment(
            name, quick=True, out_dir=tmp_path / "w2", quiet=True, workers=2
        )
        keep = ("label", "bleu", "vision_span")
        assert [{k: r[k] for k in keep} for r in again["rows"]] == [
            {k: r[k] for k in keep} for r in report["rows"] if "local-p" in r["label"]
        ]
    if name == "window-unit":
        assert list(rows) == [
            "local-p eatt, luong",
            "local-p eatt, inside, integer p",
            "quant-local-p eatt, the unit",
        ]
        assert "| inside | integer |" in table
        unit = rows["quant-local-p eatt, the unit"]["hardware"]
        assert unit["exported"]["hypotheses_differ"] == 0
        assert "0 differ as exported" in table
    if name == "flexible-unit":
        assert list(rows) == [
            "flexible dot, paper",
            "flexible dot, paper, tau on dev",
            "flexible dot, integer focus, g levels",
            "flexible dot, integer focus, g levels, tau on dev",
            "quant-flexible dot, the unit",
            "quant-flexible dot, the unit, tau on dev",
        ]
        for label in ("quant-flexible dot, the unit", "quant-flexible dot, the unit, tau on dev"):
            assert rows[label]["hardware"]["exported"]["hypotheses_differ"] == 0
        assert "0 differ as exported" in table and "| flexible dot, paper | inf |" in table
    if name in ("l0drop", "l0drop-redundant"):
        assert list(rows)[:2] == ["no pruning", "no pruning, fine-tuned"] and "rule group" in rows
        assert report["task"] == ("redundant" if name.endswith("redundant") else "dense")
        assert report["data"]["redundant"] == (report["task"] == "redundant")
        scratch = rows["L0Drop lambda 0.3, from scratch (ramp)"]
        assert scratch["scratch"] and 0.0 <= scratch["sparsity_rate"] <= 1.0
        costs = report["break_even"]
        assert costs["sentences"] == 5 and costs["q10"] <= costs["q40"] <= costs["q75"]
        assert report["target"]["break_even_lambda_40"] == costs["lambda_40"]
        assert "Break-even lambda of the unpruned model (5 test sentences)" in table
        assert report["target"]["bleu_reference"] == rows["no pruning, fine-tuned"]["bleu"]
        assert 0.3 < rows["rule group"]["sparsity_rate"] < 0.7  # odd positions only
        timing = report["timing"][0]
        assert timing["same_output"] and timing["seconds_full"] > 0
        assert "| source length | compacted length |" in table
        assert report["fine_tune_steps"] >= 1
        payload = load_checkpoint(tmp_path / name / "runs" / "lambda_0.5" / "best.pt")[3]
        assert payload["train_config"]["init_checkpoint"].endswith("no_pruning/best.pt")
    if name == "l0drop-unit":
        assert list(rows) == ["no pruning", "L0Drop lambda 0.5", "rule group"]
        assert report["steps"] == 6  # twice the (test's) base steps
        for row in rows.values():
            assert row["hardware"]["exported"]["hypotheses_differ"] == 0
        assert report["data"]["redundant"] and report["model"]["cross"] == "quant-global"
        group = rows["rule group"]  # every other position: the unit reads about half the rows
        assert 0.3 < group["sparsity_rate"] < 0.7 and group["cycles_ratio"] < 0.8
        assert "rows (cycles) per step" in table
    if name == "qat":
        assert list(rows) == [
            "float eatt",
            "float eatt, fine-tuned",
            "quant-eatt w8, PTQ",
            "quant-eatt w8, QAT",
            "quant-eatt w4, PTQ",
            "quant-eatt w4, QAT",
        ]
        assert rows["quant-eatt w4, QAT"]["bits"] == 4 and "Target: quantized E-ATT" in table
        assert rows["quant-eatt w8, QAT"]["steps"] == rows["float eatt, fine-tuned"]["steps"]
        payload = load_checkpoint(tmp_path / name / "runs" / "quant-eatt_w8" / "best.pt")[3]
        assert payload["train_config"]["init_checkpoint"].endswith("float_eatt/best.pt")
        assert payload["model_config"]["attention"] == "quant-eatt"


@pytest.mark.parametrize(
    "keys, weight, param",
    [
        ({"cross": "flexible"}, "flexible_beta", "decoder.0.cross_attn.core.v_g.bias"),
        ({"l0drop": True}, "l0drop_lambda", "l0drop.w"),
    ],
)
def test_training_applies_the_aux_loss_weights(tmp_path, keys, weight, param):
    from eatt.model.seq2seq import load_checkpoint
    from eatt.model.train import TrainConfig, train

    got = []
    for value in (0.0, 5.0):
        cfg = ModelConfig(
            dim=16, heads=2, ffn_dim=32, enc_layers=1, dec_layers=1, **keys, **{weight: value}
        )
        tc = TrainConfig(steps=3, eval_every=0, progress=False, max_tokens=256, data=_tiny_data())
        summary = train(cfg, tc, tmp_path / str(value))
        got.append(dict(load_checkpoint(summary["checkpoint"])[0].named_parameters())[param])
    assert not torch.equal(got[0], got[1])


def test_resume_reuses_a_run_saved_before_a_key_was_added(tmp_path):
    """--resume reads a finished run's configs as a checkpoint load does: a model key added
    since (here flexible_train_tau) takes its default, so the run is the same model."""
    import json

    from eatt.model.data import synthetic_task
    from eatt.model.experiments.staged import _window_sizes, finished_run

    data_cfg, model, train_cfg, _ = _window_sizes(True)
    data = synthetic_task(data_cfg)
    cfg = model.replace(cross="flexible")
    stored = cfg.to_dict()
    del stored["flexible_train_tau"]  # written before the key existed
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.json").write_text(json.dumps({"steps": train_cfg.steps}))
    (run / "best.pt").write_bytes(b"")
    payload = {"train_config": train_cfg.to_dict(), "data_fingerprint": data.fingerprint()}
    torch.save({**payload, "model_config": stored, "step": train_cfg.steps}, run / "last.pt")
    done = finished_run(cfg, train_cfg, run, data)
    assert done is not None and done["checkpoint"] == str(run / "best.pt")
    # another value of the new key, another model, or an unreadable config: trained again
    assert finished_run(cfg.replace(flexible_train_tau=1.6), train_cfg, run, data) is None
    assert finished_run(cfg.replace(flexible_beta=0.123), train_cfg, run, data) is None
    unknown = {**stored, "no_such_key": 1}
    torch.save({**payload, "model_config": unknown, "step": train_cfg.steps}, run / "last.pt")
    assert finished_run(cfg, train_cfg, run, data) is None
