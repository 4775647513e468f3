"""Tests of eatt.model.attention: vanilla and E-ATT modules, Table 5 variants."""

import math

import pytest
import torch
from torch import nn

from eatt.model.attention import (
    ATTENTION_VARIANTS,
    DotProductAttention,
    EAttention,
    attention_variant,
)
from eatt.model.functional import binarize, l1_scores

DIM, HEADS = 16, 4


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _x(batch=2, length=5, dtype=torch.float64):
    # spread inputs so that some, not all, features pass tau = 1
    return 1.5 * torch.randn(batch, length, DIM, dtype=dtype)


def _module(cls=EAttention, **kw):
    return cls(DIM, HEADS, **kw).double()


def _all_variants():
    return [_module(DotProductAttention)] + [
        _module(selection=s, score=c) for s in ("binary", "linear") for c in ("l1", "dot")
    ]


def test_parameter_names_shapes_and_no_bias():
    for m in _all_variants():
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            layer = getattr(m, name)
            assert isinstance(layer, nn.Linear)
            assert layer.weight.shape == (DIM, DIM) and layer.bias is None
        assert m.scale == pytest.approx(1 / math.sqrt(DIM // HEADS))
    assert _module(bias=True).q_proj.bias is not None


def test_binary_selection_queries_keys():
    m = _module(tau=0.5)
    x, y = _x(), _x(length=7)
    q, k = m.queries_keys(x, y)
    bx, by = binarize(x, 0.5), binarize(y, 0.5)
    torch.testing.assert_close(q, bx @ m.q_proj.weight.T)
    torch.testing.assert_close(k, by @ m.k_proj.weight.T)
    # Eq. 6-9: each Q row is the sum of the W_Q^T rows selected by the ones in f(x)
    i, j = 1, 3
    rows = m.q_proj.weight.T[bx[i, j].bool()]
    torch.testing.assert_close(q[i, j], rows.sum(0))
    lq, lk = _module(selection="linear").queries_keys(x, y)
    assert not torch.equal(lq, q)


def test_module_matches_manual_computation():
    m = _module()
    x, y = _x(), _x(length=7)
    out, w = m(x, y, need_weights=True)
    q = (binarize(x, 1.0) @ m.q_proj.weight.T).view(2, 5, HEADS, -1).transpose(1, 2)
    k = (binarize(y, 1.0) @ m.k_proj.weight.T).view(2, 7, HEADS, -1).transpose(1, 2)
    v = (y @ m.v_proj.weight.T).view(2, 7, HEADS, -1).transpose(1, 2)
    ref_w = torch.softmax(l1_scores(q, k) / math.sqrt(DIM // HEADS), -1)
    ref = (ref_w @ v).transpose(1, 2).reshape(2, 5, DIM) @ m.o_proj.weight.T
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(out, ref)


def test_table5_variants_differ_as_expected():
    torch.manual_seed(1)
    base = _module()
    x = _x()
    weights = {}
    for sel in ("binary", "linear"):
        for score in ("l1", "dot"):
            m = _module(selection=sel, score=score)
            m.load_state_dict(base.state_dict())
            weights[sel, score] = m(x, need_weights=True)[1]
    for a in weights:
        for b in weights:
            if a != b:
                assert not torch.allclose(weights[a], weights[b]), (a, b)
    # linear x dot is exactly vanilla attention
    vanilla = _module(DotProductAttention)
    vanilla.load_state_dict(base.state_dict())
    torch.testing.assert_close(vanilla(x, need_weights=True)[1], weights["linear", "dot"])


def test_attention_variant_names():
    assert set(ATTENTION_VARIANTS) == {"vanilla", "eatt", "binary-dot", "linear-l1"}
    assert type(attention_variant("vanilla", DIM, HEADS)) is DotProductAttention
    m = attention_variant("eatt", DIM, HEADS, tau=0.5)
    assert (m.selection, m.score, m.tau) == ("binary", "l1", 0.5)
    m = attention_variant("binary-dot", DIM, HEADS)
    assert (m.selection, m.score) == ("binary", "dot")
    m = attention_variant("linear-l1", DIM, HEADS)
    assert (m.selection, m.score) == ("linear", "l1")
    with pytest.raises(ValueError, match="unknown"):
        attention_variant("dense", DIM, HEADS)


@pytest.mark.parametrize("masked", [False, True])
def test_dot_product_attention_matches_multihead_attention(masked):
    ours = _module(DotProductAttention)
    ref = nn.MultiheadAttention(DIM, HEADS, bias=False, batch_first=True).double()
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
        )
        ref.out_proj.weight.copy_(ours.o_proj.weight)
    x, y = _x(), _x(length=7)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    if masked:
        pad[1, 5:] = True
    out, w = ours(x, y, key_padding_mask=pad, need_weights=True)
    ref_out, ref_w = ref(x, y, y, key_padding_mask=pad, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(w, ref_w)
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)  # MHA: True = blocked
    ref_out, _ = ref(x, x, x, attn_mask=causal)
    torch.testing.assert_close(ours(x, causal=True), ref_out)


@pytest.mark.parametrize("module", _all_variants(), ids=lambda m: repr(m).replace("\n", ""))
def test_shapes_self_and_cross(module):
    x, y = _x(batch=3, length=5), _x(batch=3, length=9)
    assert module(x).shape == (3, 5, DIM)
    out, w = module(x, y, need_weights=True)
    assert out.shape == (3, 5, DIM) and w.shape == (3, HEADS, 5, 9)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, HEADS, 5, dtype=torch.float64))


@pytest.mark.parametrize("module", _all_variants(), ids=lambda m: repr(m).replace("\n", ""))
def test_key_padding_mask_hides_padded_keys(module):
    x, y = _x(), _x(length=7)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[0, 4:] = True
    pad[1, 6:] = True
    out, w = module(x, y, key_padding_mask=pad, need_weights=True)
    assert torch.all(w.masked_select(pad[:, None, None, :]) == 0)
    y2 = y.clone()
    y2[pad] = 100 * torch.randn_like(y2[pad])  # padded keys/values change arbitrarily
    torch.testing.assert_close(module(x, y2, key_padding_mask=pad), out)


@pytest.mark.parametrize("module", _all_variants(), ids=lambda m: repr(m).replace("\n", ""))
def test_causal_output_ignores_the_future(module):
    x = _x(length=6)
    out = module(x, causal=True)
    x2 = x.clone()
    x2[:, 4:] = 3 * torch.randn(2, 2, DIM, dtype=torch.float64)
    out2 = module(x2, causal=True)
    torch.testing.assert_close(out2[:, :4], out[:, :4])
    assert not torch.allclose(out2[:, 4:], out[:, 4:])
    _, w = module(x, causal=True, need_weights=True)
    assert torch.all(w.triu(1) == 0)


def test_fully_padded_sequence_gives_zeros_not_nan():
    m = _module()
    x = _x()
    pad = torch.zeros(2, 5, dtype=torch.bool)
    pad[1] = True
    out = m(x, key_padding_mask=pad)
    assert not torch.isnan(out).any()
    assert torch.all(out[1] == 0)  # no bias: zero context -> zero output


@pytest.mark.parametrize("score", ["l1", "dot"])
def test_gradient_flows_through_the_surrogate(score):
    m = _module(score=score)
    x = _x().requires_grad_()
    y = _x(length=7).requires_grad_()
    # only Q/K paths reach x (x is the query source); y also feeds V
    m(x, y).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    assert m.q_proj.weight.grad.abs().sum() > 0 and m.k_proj.weight.grad.abs().sum() > 0
    # cross-attention: x only feeds q_proj, so x.grad = surrogate * (grad w.r.t. f(x)), Eq. 5
    x.grad = None
    selected = []
    hook = m.q_proj.register_forward_hook(lambda mod, inp, out: selected.append(inp[0]))
    out = m(x, y)
    hook.remove()
    selected[0].retain_grad()
    out.sum().backward()
    surrogate = math.sqrt(2 / math.pi) * torch.exp(-2 * (x.detach() - m.tau) ** 2)
    torch.testing.assert_close(x.grad, selected[0].grad * surrogate)


def test_errors():
    with pytest.raises(ValueError, match="dim=10.*heads=4"):
        EAttention(10, 4)
    with pytest.raises(ValueError, match="dim=10.*heads=3"):
        DotProductAttention(10, 3)
    with pytest.raises(ValueError):
        EAttention(DIM, HEADS, selection="ternary")
    with pytest.raises(ValueError):
        EAttention(DIM, HEADS, score="l2")
    m = _module()
    with pytest.raises(ValueError, match="causal"):
        m(_x(length=5), _x(length=7), causal=True)
    with pytest.raises(ValueError):
        m(torch.randn(2, 5, DIM + 1, dtype=torch.float64))
    with pytest.raises(ValueError):
        m(_x(batch=2), _x(batch=3))
    with pytest.raises(ValueError):
        m(_x(), key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError):
        m(_x(), key_padding_mask=torch.zeros(2, 5))


def test_float32_default_dtype_works():
    m = EAttention(DIM, HEADS)
    out = m(torch.randn(2, 5, DIM))
    assert out.dtype == torch.float32 and out.shape == (2, 5, DIM)
