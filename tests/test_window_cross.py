"""Tests of the quantized windowed cross-attention (kinds quant-local-m / quant-local-p,
eatt.quant.window_cross): at every decoding step the model's eval forward is the window unit's
golden model on the step's integer inputs, bit for bit (a trained layer through capture, RTL,
hls and flow: tests/test_window_cross_loop.py)."""

import numpy as np
import pytest
import torch

from eatt.config import ConfigError
from eatt.model.data import BOS, EOS, PAD
from eatt.model.evaluate import beam_search, greedy_decode, translate_with_stats
from eatt.model.seq2seq import ModelConfig, Seq2Seq
from eatt.model.windowed import WindowedAttention
from eatt.quant.golden import CoreWeights
from eatt.quant.window import WindowGolden
from eatt.quant.window_cross import QuantWindowedAttention, flexible_half_width, unit_weights

SRC_V, TGT_V, D = 20, 18, 2
CASES = [
    (k, s)
    for k in ("quant-local-p", "quant-local-m", "quant-global", "quant-flexible")
    for s in ("eatt", "dot")
]
#: the kinds whose window is the whole memory (quant-flexible without tau)
WHOLE = ("quant-global", "quant-flexible")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _model(kind, score, **kw):
    cfg = ModelConfig(
        **{
            "dim": 16,
            "heads": 2,
            "ffn_dim": 32,
            "enc_layers": 1,
            "dec_layers": 2,
            "dropout": 0.0,
            "cross": kind,
            "window_score": score,
            "window_d": D,
            "max_len": 12,
            "quant_weight_frac": 5,
            **kw,
        }
    )
    return Seq2Seq(cfg, SRC_V, TGT_V).eval()


def _batch():
    src = torch.randint(4, SRC_V, (3, 9))
    src[:, -1] = EOS
    src[0, 5:] = PAD
    src[0, 4] = EOS
    src[2, 2:] = PAD  # a 2-row memory: the window is clipped on both sides
    src[2, 1] = EOS
    tgt = torch.randint(4, TGT_V, (3, 7))
    tgt[:, 0] = BOS
    return src, tgt


def _record(model):
    """Every hardware step of every decoder layer: (layer, inputs, output codes)."""
    steps = []
    for i, layer in enumerate(model.decoder):
        core = layer.cross_attn.core
        core.probe = lambda inputs, o, i=i: steps.append((i, inputs, o))
    return steps


@pytest.mark.parametrize("kind, score", CASES)
def test_every_step_is_the_unit_bit_for_bit(kind, score):
    """A decoding step's context is the unit's O on the step's integer inputs: a WindowGolden
    built only from the exported integer weights gives the same codes; the inputs are the
    memory's projected codes, p = round(p_t) (local-p) or t (local-m), w = D."""
    model = _model(kind, score)
    src, tgt = _batch()
    steps = _record(model)
    memory, padding = model.encode(src)
    cache = model.init_cache()
    contexts = []
    hook = model.decoder[0].cross_attn.o_proj.register_forward_hook(
        lambda m, args, out: contexts.append(args[0].detach())
    )
    with torch.no_grad():
        for t in range(tgt.shape[1]):
            model.decode(tgt[:, t : t + 1], memory, padding, cache, offset=t)
    hook.remove()
    lengths = (~padding).sum(1).numpy()
    first = [s for s in steps if s[0] == 0]
    assert len(first) == tgt.shape[1] and len(steps) == 2 * tgt.shape[1]
    for t, (_, inputs, o) in enumerate(first):
        core = model.decoder[0].cross_attn.core
        golden = WindowGolden(core.cfg, unit_weights(core))
        assert np.array_equal(golden.forward(**inputs), o)
        # the context the decoder goes on with is O on V's grid
        got = contexts[t][:, 0].double().numpy() / core.formats.core.v_lsb
        assert np.array_equal(got, o.astype(np.float64))
        assert np.array_equal(inputs["length"], lengths)
        assert (inputs["w"] == core.cfg.window_d).all()
        assert (inputs["p"] < lengths).all() and (inputs["p"] >= 0).all()
        assert (inputs["counts"] == 1).all()
        if kind == "quant-global":  # the whole memory: p = 0, D = max_len - 1
            assert core.cfg.window_d == 11 and (inputs["p"] == 0).all()
        if kind == "quant-local-m":
            assert np.array_equal(inputs["p"], np.minimum(t, lengths - 1))
    # the memory codes are the core's projections of the encoder output's codes
    core = model.decoder[1].cross_attn.core
    w = unit_weights(core)
    y = core._codes(memory).numpy()
    keys, values = WindowGolden(core.cfg, CoreWeights(w.wq, w.wk, w.wv, w.wo)).project_memory(y)
    _, inputs, _ = steps[1]
    assert np.array_equal(inputs["keys"][:, : y.shape[1]], keys)
    assert np.array_equal(inputs["values"][:, : y.shape[1]], values)


@pytest.mark.parametrize("kind, score", CASES)
def test_incremental_equals_full_and_decoding_runs(kind, score):
    model = _model(kind, score)
    src, tgt = _batch()
    with torch.no_grad():
        full = model(src, tgt)
        memory, padding = model.encode(src)
        cache = model.init_cache()
        steps = [
            model.decode(tgt[:, t : t + 1], memory, padding, cache, offset=t) for t in range(7)
        ]
    # float32 self-attention sums differ in the last bits between the two paths
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-4, atol=1e-4)
    assert greedy_decode(model, src, max_len=8) == greedy_decode(
        model, src, max_len=8, incremental=False
    )
    assert len(beam_search(model, src, beam=3, max_len=8)) == 3

    class _Batch:
        def __init__(self, src):
            self.src, self.index = src, list(range(src.shape[0]))

    _, stats = translate_with_stats(model, [_Batch(src)], beam=2, device=torch.device("cpu"))
    assert 1.0 <= stats["vision_span"] <= (9 if kind in WHOLE else 2 * D + 1)


@pytest.mark.parametrize("kind, score", CASES)
def test_surrogate_trains_and_tracks_the_unit(kind, score):
    """Training runs the fake-quant surrogate (gradients reach the projections, local-p's
    predictor and Flexible's g(t), through its penalty and Eq. 9's term); in eval it stays near
    the unit (float softmax vs the exp table)."""
    model = _model(kind, score)
    src, tgt = _batch()
    model.train()
    loss = model(src, tgt).logsumexp(-1).mean()
    if kind == "quant-flexible":
        loss = loss - model.aux_losses()["flexible_g"]
    loss.backward()
    core = model.decoder[0].cross_attn.core
    extra = {"quant-local-p": ("w_p",), "quant-flexible": ("w_g", "v_g")}.get(kind, ())
    for name in ("q_proj", "k_proj", "v_proj", *extra):
        grad = getattr(core, name).weight.grad
        assert grad is not None and bool(grad.ne(0).any()), name
    model.eval()
    with torch.no_grad():
        hardware = model(src, tgt)
        model.set_arithmetic("surrogate")
        surrogate = model(src, tgt)
    assert not torch.equal(hardware, surrogate)
    assert float((hardware - surrogate).abs().max()) < 0.5 * float(hardware.abs().max())


# -- quant-flexible: Flexible Attention on the unit, its focus F the next step's p ------------
@pytest.mark.parametrize("score", ["eatt", "dot"])
def test_flexible_steps_are_the_unit_and_follow_its_focus(score):
    """Every quant-flexible step is the unit's golden model: O bit for bit, p the unit's focus
    F of the previous step (p_0 = 0), g the strength on the level grid, w from tau (Sec. 3.1)."""
    tau = 0.8
    model = _model("quant-flexible", score, flexible_tau=tau, flexible_g_levels=6)
    src, tgt = _batch()
    steps = _record(model)
    with torch.no_grad():
        model(src, tgt)
    core = model.decoder[0].cross_attn.core
    cfg = core.cfg
    assert (cfg.position, cfg.window_d, cfg.g_levels, core.tau) == ("flexible", 11, 6, tau)
    golden = WindowGolden(cfg, unit_weights(core))
    first = [s for s in steps if s[0] == 0]
    assert len(first) == tgt.shape[1]
    p = np.zeros(3, dtype=np.int64)
    for _, inputs, o in first:
        out, focus = golden.forward(**inputs, with_focus=True)
        assert np.array_equal(out, o)
        assert np.array_equal(inputs["p"], p)
        assert ((inputs["g"] >= 0) & (inputs["g"] <= 6)).all()
        half = flexible_half_width(inputs["g"], 6, core.sigma, tau, cfg.window_d)
        assert np.array_equal(inputs["w"], half)
        p = focus[:, 0]
    assert len({int(v) for _, inputs, _ in first for v in inputs["p"]}) > 1  # the focus moves
    # tau = inf: the whole memory every step
    model = _model("quant-flexible", score)
    steps = _record(model)
    with torch.no_grad():
        model(src, tgt)
    assert all((inputs["w"] == 11).all() for _, inputs, _ in steps)


def test_flexible_half_width_is_the_open_interval():
    """|s - p| < sigma sqrt(2 tau / g): w = ceil(r) - 1 within [0, D]; g = 0 or tau = inf: D."""
    levels, sigma, d = 4, 1.5, 9
    got = flexible_half_width(np.arange(5), levels, sigma, 1.0, d)
    radius = sigma * np.sqrt(2.0 / (np.arange(1, 5) / levels))  # 4.24, 3.0, 2.45, 2.12
    assert got[0] == d and got[1:].tolist() == (np.ceil(radius) - 1).astype(int).tolist()
    assert got.tolist() == [9, 4, 2, 2, 2]
    assert flexible_half_width(np.arange(5), levels, sigma, None, d).tolist() == [d] * 5
    assert flexible_half_width(np.array([4]), levels, sigma, 1e-6, d).tolist() == [0]
    assert flexible_half_width(np.array([1]), levels, sigma, 1e6, d).tolist() == [d]


def test_flexible_config():
    base = dict(dim=16, heads=2, max_len=12, window_score="dot")
    cfg = ModelConfig(cross="quant-flexible", **base).quant_window()
    assert (cfg.position, cfg.window_d, cfg.g_levels, cfg.heads) == ("flexible", 11, 8, 1)
    for bad in (0, 65, True):
        with pytest.raises(ConfigError, match="flexible_g_levels: must be an integer"):
            ModelConfig(cross="quant-flexible", flexible_g_levels=bad, **base)
    with pytest.raises(ConfigError, match="^l0drop: quant-flexible's window is on source"):
        ModelConfig(cross="quant-flexible", l0drop=True, **base)


def test_float_twin_has_the_unit_form():
    """quant-local-p's surrogate is the float local-p in the unit's form (Gaussian inside,
    integer centre) on the unit's grids: with the grids made fine, the two agree closely."""
    quant = _model("quant-local-p", "dot", quant_acc_bits=24)
    cfg = quant.cfg.replace(cross="local-p", window_gaussian="inside", window_p_round=True)
    float_model = Seq2Seq(cfg, SRC_V, TGT_V).eval()
    q_core, f_core = quant.decoder[0].cross_attn.core, float_model.decoder[0].cross_attn.core
    assert isinstance(f_core, WindowedAttention) and isinstance(q_core, QuantWindowedAttention)
    assert (f_core.gaussian, f_core.round_p) == ("inside", True)
    assert f_core.sigma == q_core.sigma == D / 2


@pytest.mark.parametrize(
    "kind", ["quant-local-p", "quant-local-m", "quant-global", "quant-flexible"]
)
def test_the_lstm_attention_on_the_unit(kind, tmp_path):
    """The LSTM encoder-decoder's attention as the window unit: every step the unit's golden
    model; the layer listed as a hardware one."""
    from eatt.model.data import Vocab
    from eatt.model.layers import checkpoint_layers
    from eatt.model.rnn import LSTMSeq2Seq
    from eatt.model.seq2seq import save_checkpoint

    cfg = ModelConfig(arch="lstm", dim=8, enc_layers=1, dec_layers=1, dropout=0.0, max_len=12,
                      cross=kind, window_score="eatt", window_d=D, tau=0.25)  # fmt: skip
    model = LSTMSeq2Seq(cfg, SRC_V, TGT_V).eval()
    src, tgt = _batch()
    steps = []
    model.attention.probe = lambda inputs, o: steps.append((inputs, o))
    with torch.no_grad():
        model(src, tgt)
    golden = WindowGolden(model.attention.cfg, unit_weights(model.attention))
    assert len(steps) == tgt.shape[1]
    p = np.zeros(3, dtype=np.int64)
    for inputs, o in steps:
        assert np.array_equal(golden.forward(**inputs), o)
        if kind == "quant-flexible":  # p is the unit's focus of the step before
            assert np.array_equal(inputs["p"], p)
            p = golden.forward(**inputs, with_focus=True)[1][:, 0]
    model.train()
    model(src, tgt).logsumexp(-1).mean().backward()
    assert bool(model.attention.v_proj.weight.grad.ne(0).any())  # (LSTM states sit below tau)
    vocab = Vocab([f"w{i}" for i in range(12)])
    model = LSTMSeq2Seq(cfg, len(vocab), len(vocab))
    path = tmp_path / "best.pt"
    save_checkpoint(path, model, vocab, vocab)
    assert [(x.name, x.kind, x.hardware) for x in checkpoint_layers(path)] == [
        ("decoder.0.cross", kind, True)
    ]


def test_config_errors_name_the_key():
    base = dict(dim=16, heads=2, max_len=12, window_d=D)
    with pytest.raises(ConfigError, match="^window_score: quant-local-p computes eatt or dot"):
        ModelConfig(cross="quant-local-p", window_score="general", **base)
    with pytest.raises(ConfigError, match="^window_gaussian: quant-local-p puts"):
        ModelConfig(cross="quant-local-p", window_score="eatt", window_gaussian="after", **base)
    with pytest.raises(ConfigError, match="^window_p_round: quant-local-p centres"):
        ModelConfig(cross="quant-local-p", window_score="eatt", window_p_round=False, **base)
    with pytest.raises(ConfigError, match="^quant_weight_bits"):
        ModelConfig(cross="quant-local-m", window_score="eatt", quant_weight_bits=1, **base)
    with pytest.raises(ConfigError, match="^attention: 'quant-local-p' is a windowed kind"):
        ModelConfig(attention="quant-local-p", **base)
    with pytest.raises(ConfigError, match="^window_gaussian: only local-p and quant-local-p"):
        ModelConfig(cross="local-m", window_gaussian="inside", **base)
    with pytest.raises(ConfigError, match="^window_p_round: only local-p"):
        ModelConfig(cross="global", window_p_round=True, **base)
    cfg = ModelConfig(cross="quant-local-p", window_score="eatt", **base)
    unit = cfg.quant_window()
    assert (unit.len_k, unit.dim, unit.heads, unit.position) == (12, 16, 1, "gaussian")
    assert cfg.windowed


def test_window_of_one_row_trains_without_nan():
    """D = 0 (sigma 0): the window is the centre alone; the surrogate adds no penalty (the
    unit's table is all zero) instead of dividing by zero."""
    model = _model("quant-local-p", "eatt", window_d=0).train()
    src, tgt = _batch()
    loss = model(src, tgt).logsumexp(-1).mean()
    loss.backward()
    assert bool(torch.isfinite(loss))
    assert bool(torch.isfinite(model.decoder[0].cross_attn.core.v_proj.weight.grad).all())


def test_the_golden_model_follows_the_weights():
    """The unit's golden model is kept between steps and rebuilt when a weight changes."""
    core = _model("quant-local-m", "eatt").decoder[0].cross_attn.core
    first = core.golden()
    assert core.golden() is first
    with torch.no_grad():
        core.q_proj.weight.mul_(0.5)
    again = core.golden()
    assert again is not first and np.array_equal(again.weights.wq, unit_weights(core).wq)


def test_memory_longer_than_the_unit_is_refused():
    model = _model("quant-local-m", "eatt")
    core = model.decoder[0].cross_attn.core
    with pytest.raises(ValueError, match="max_len = 12"):
        core.init_state(torch.zeros(1, 13, 16), torch.zeros(1, 13, dtype=torch.bool))
    bad = torch.zeros(1, 5, dtype=torch.bool)
    bad[0, 1] = True  # padding in the middle
    with pytest.raises(ValueError, match="^padding"):
        core.init_state(torch.zeros(1, 5, 16), bad)


# -- L0Drop's compacted memory on the unit -------------------------------------------------------
def test_l0drop_compaction_has_the_units_layout():
    """The model's compacted memory (Algorithm 1) and the unit's (compact_memory) put the same
    rows in the same slots with the same counts; the model's padding is a suffix (the unit's
    valid length)."""
    from eatt.model.l0drop import compact
    from eatt.quant.window import compact_memory

    gen = torch.Generator().manual_seed(2)
    memory = torch.randint(-50, 50, (4, 9, 3), generator=gen).double()
    gates = (torch.rand(4, 9, generator=gen) > 0.5).double()
    gates[1] = 1.0  # nothing pruned
    gates[2] = 0.0
    gates[2, 4] = 1.0  # one row kept
    padding = torch.zeros(4, 9, dtype=torch.bool)
    padding[0, 7:] = True
    padding[3, 5:] = True
    gates = gates.masked_fill(padding, 0.0)
    rows, counts, pad = compact(memory, gates, padding)
    for b in range(4):
        n = int((~padding[b]).sum())
        m = memory[b, :n].long().numpy()
        k, v, c, length = compact_memory(m, m, gates[b, :n].numpy(), len_k=rows.shape[1])
        assert length == int((~pad[b]).sum())
        assert np.array_equal(rows[b, :length].long().numpy(), k[:length])
        assert np.array_equal(counts[b, :length].numpy(), c[:length])


@pytest.mark.parametrize("score", ["eatt", "dot"])
def test_quant_global_decodes_on_the_compacted_memory(score):
    """quant-global with L0Drop: the unit gets Algorithm 1's compacted memory (kept rows, one
    zero row counting the pruned ones) and reads kept + 1 rows a step; its integer outputs equal
    those on the full gated memory bit for bit (the pruned rows are equal zero rows: the same
    exp code, counted once per row or once times their number)."""
    model = _model("quant-global", score, l0drop=True)
    with torch.no_grad():  # close about half of the gates
        model.l0drop.w.copy_(torch.randn(16) * 3)
    src, tgt = _batch()
    steps = _record(model)
    with torch.no_grad():
        memory, padding, counts = model.encode_for_decoding(src)
        compacted = model.decode(tgt, memory, padding, counts=counts)
        model.compact_memory = False
        full_memory, full_padding, none = model.encode_for_decoding(src)
        full = model.decode(tgt, full_memory, full_padding)
    assert counts is not None and none is None
    assert torch.equal(compacted, full)
    n = tgt.shape[1] * len(model.decoder)
    packed, wide = steps[:n], steps[n:]
    pruned = False
    for (_, a, o_a), (_, b, o_b) in zip(packed, wide, strict=True):
        assert np.array_equal(o_a, o_b)
        assert (a["length"] <= b["length"]).all() and a["counts"].sum() >= a["length"].min()
        for row in range(len(src)):  # the valid rows' counts add up to the source length
            assert a["counts"][row, : a["length"][row]].sum() == b["length"][row]
            pruned |= bool(a["length"][row] < b["length"][row])
    assert pruned
    # a local kind refuses L0Drop in one line
    with pytest.raises(ConfigError, match="^l0drop: quant-local-p's window is on source"):
        ModelConfig(cross="quant-local-p", window_score="eatt", l0drop=True)
