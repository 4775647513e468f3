"""Tests of eatt.model.functional: Eq. 4-5 (binarize) and Eq. 10 (L1 scores) + attention."""

import math

import pytest
import torch

from eatt.model import functional as F
from eatt.model.functional import binarize, dot_attention, l1_attention, l1_scores

EAGER_IMPLS = ["cdist", "torch"]


def _naive_l1(q, k):
    return -(q.unsqueeze(-2) - k.unsqueeze(-3)).abs().sum(-1)


def _tie_free(*shape, seed=0):
    # distinct, well separated values: no q_id == k_jd ties where |.| has no derivative
    g = torch.Generator().manual_seed(seed)
    n = math.prod(shape)
    return (torch.randperm(4 * n, generator=g)[:n].double() / n).view(*shape)


# --- binarize (Eq. 4-5) ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_binarize_forward_is_strict_threshold(dtype):
    x = torch.tensor([-1.0, 0.0, 0.5, 1.0, 1.0 + 1e-6, 3.0], dtype=dtype)
    out = binarize(x, tau=1.0)
    assert out.dtype == dtype
    assert out.tolist() == [0.0, 0.0, 0.0, 0.0, 1.0, 1.0]  # x == tau gives 0
    assert binarize(x, tau=0.0).tolist() == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("tau", [0.0, 0.5, 1.0, -0.3])
def test_binarize_backward_is_gaussian_surrogate(tau):
    x = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    g = torch.randn(5, 7, dtype=torch.float64)
    binarize(x, tau).backward(g)
    expected = g * math.sqrt(2 / math.pi) * torch.exp(-2 * (x.detach() - tau) ** 2)
    torch.testing.assert_close(x.grad, expected)
    # peak sqrt(2/pi) at the threshold
    xt = torch.tensor([tau], dtype=torch.float64, requires_grad=True)
    binarize(xt, tau).sum().backward()
    assert xt.grad.item() == pytest.approx(math.sqrt(2 / math.pi))


def test_binarize_rejects_integers():
    with pytest.raises(TypeError):
        binarize(torch.arange(3))


# --- l1_scores (Eq. 10) ---------------------------------------------------------------------
@pytest.mark.parametrize("impl", ["cdist", "torch", "auto"])
def test_l1_scores_matches_python_loop(impl):
    q = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    k = torch.randn(2, 3, 6, 5, dtype=torch.float64)
    out = l1_scores(q, k, impl=impl)
    assert out.shape == (2, 3, 4, 6)
    for b in range(2):
        for h in range(3):
            for i in range(4):
                for j in range(6):
                    ref = -sum(abs(q[b, h, i, c].item() - k[b, h, j, c].item()) for c in range(5))
                    assert out[b, h, i, j].item() == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("impl", EAGER_IMPLS)
@pytest.mark.parametrize("chunk_elements", [None, 1, 7, 40])
def test_l1_scores_gradcheck(impl, chunk_elements):
    # chunk_elements=1 forces one query row per block; 40 mixes rows and batch blocks
    q = _tie_free(2, 3, 4, seed=1).requires_grad_()
    k = _tie_free(2, 5, 4, seed=2).requires_grad_()

    def fn(q, k):
        return l1_scores(q, k, impl=impl, chunk_elements=chunk_elements)

    assert torch.autograd.gradcheck(fn, (q, k))
    out = fn(q, k)
    g = torch.randn_like(out)
    gq, gk = torch.autograd.grad(out, (q, k), g)
    rq, rk = torch.autograd.grad(_naive_l1(q, k), (q, k), g)
    torch.testing.assert_close(gq, rq)
    torch.testing.assert_close(gk, rk)
    torch.testing.assert_close(out, _naive_l1(q, k))


@pytest.mark.parametrize("impl", EAGER_IMPLS)
def test_l1_scores_ties_use_sign_zero(impl):
    q = torch.tensor([[[1.0, 2.0]]], requires_grad=True)
    k = torch.tensor([[[1.0, 0.0], [3.0, 2.0]]], requires_grad=True)
    l1_scores(q, k, impl=impl).sum().backward()
    # d/dq of -(|1-1| + |2-0|) - (|1-3| + |2-2|) = -(0, 1) - (-1, 0)
    assert q.grad.tolist() == [[[1.0, -1.0]]]
    assert k.grad.tolist() == [[[0.0, 1.0], [-1.0, 0.0]]]


def test_l1_scores_float32_broadcast_and_chunked_agree():
    q = torch.randn(3, 2, 9, 8)
    k = torch.randn(1, 2, 5, 8)  # broadcasts over the first dim
    full = l1_scores(q, k)
    torch.testing.assert_close(full, _naive_l1(q, k), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(l1_scores(q, k, chunk_elements=3, impl="torch"), full)
    qq, kk = q.clone().requires_grad_(), k.clone().requires_grad_()
    l1_scores(qq, kk, chunk_elements=50).sum().backward()
    assert kk.grad.shape == k.shape


@pytest.mark.parametrize("impl", EAGER_IMPLS)
def test_l1_scores_saves_no_pairwise_difference_tensor(impl):
    len_q, len_k, d = 12, 10, 16
    q = torch.randn(2, len_q, d, requires_grad=True)
    k = torch.randn(2, len_k, d, requires_grad=True)
    saved = []

    def pack(t):
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = l1_scores(q, k, impl=impl)
    assert saved and max(saved) < len_q * len_k * d
    out.sum().backward()


def test_l1_scores_errors():
    with pytest.raises(ValueError):
        l1_scores(torch.randn(2, 3), torch.randn(2, 4))
    with pytest.raises(ValueError):
        l1_scores(torch.randn(2, 3), torch.randn(2, 3), impl="nope")
    with pytest.raises(ValueError):
        l1_scores(torch.randn(2, 3), torch.randn(2, 3), chunk_elements=0)


def test_l1_scores_empty():
    out = l1_scores(torch.randn(2, 0, 3), torch.randn(2, 4, 3))
    assert out.shape == (2, 0, 4)


def test_l1_scores_compiled_matches_cdist(monkeypatch):
    # the torch.compile path is exercised on a tiny tensor: compiling costs a few seconds once
    pytest.importorskip("torch._inductor")
    q = _tie_free(1, 3, 4, seed=3).float().requires_grad_()
    k = _tie_free(1, 2, 4, seed=4).float().requires_grad_()
    try:
        out = l1_scores(q, k, impl="compiled")
    except Exception as err:  # pragma: no cover - environment without a working compiler
        pytest.skip(f"torch.compile unavailable: {err}")
    g = torch.randn_like(out)
    gq, gk = torch.autograd.grad(out, (q, k), g)
    rq, rk = torch.autograd.grad(l1_scores(q, k, impl="cdist"), (q, k), g)
    torch.testing.assert_close(out, _naive_l1(q, k))
    torch.testing.assert_close(gq, rq)
    torch.testing.assert_close(gk, rk)
    # auto picks compiled only above the size threshold
    monkeypatch.setattr(F, "L1_COMPILE_MIN_ELEMENTS", 1)
    torch.testing.assert_close(l1_scores(q, k), out)


# --- attention --------------------------------------------------------------------------------
def _qkv(b=2, h=3, lq=5, lk=6, d=4, dtype=torch.float64):
    return (
        torch.randn(b, h, lq, d, dtype=dtype),
        torch.randn(b, h, lk, d, dtype=dtype),
        torch.randn(b, h, lk, d, dtype=dtype),
    )


def test_dot_attention_matches_sdpa():
    q, k, v = _qkv()
    out, w = dot_attention(q, k, v)
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 5, dtype=torch.float64))
    mask = torch.rand(2, 1, 5, 6) > 0.3
    mask[..., 0] = True
    out, _ = dot_attention(q, k, v, mask=mask, scale=0.7)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.7)
    torch.testing.assert_close(out, ref)


def test_l1_attention_definition():
    q, k, v = _qkv()
    out, w = l1_attention(q, k, v)
    ref_w = torch.softmax(_naive_l1(q, k) / 2.0, dim=-1)  # 1/sqrt(d_head = 4)
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(out, ref_w @ v)
    _, w2 = l1_attention(q, k, v, scale=1.0)
    torch.testing.assert_close(w2, torch.softmax(_naive_l1(q, k), dim=-1))


@pytest.mark.parametrize("attention", [l1_attention, dot_attention])
def test_padding_mask(attention):
    q, k, v = _qkv()
    keep = torch.ones(2, 6, dtype=torch.bool)
    keep[0, 4:] = False
    mask = keep[:, None, None, :]
    out, w = attention(q, k, v, mask=mask)
    assert torch.all(w[0, ..., 4:] == 0)
    ref, _ = attention(q[:1], k[:1, :, :4], v[:1, :, :4])
    torch.testing.assert_close(out[:1], ref)


@pytest.mark.parametrize("attention", [l1_attention, dot_attention])
def test_causal_mask_and_fully_masked_row(attention):
    q, k, v = _qkv(lq=5, lk=5)
    q.requires_grad_()
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    _, w = attention(q, k, v, mask=causal)
    assert torch.all(w.triu(1) == 0)
    mask = causal.clone()
    mask[2] = False  # query 2 sees nothing
    out, w = attention(q, k, v, mask=mask)
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    assert torch.all(out[:, :, 2] == 0) and torch.all(w[:, :, 2] == 0)
    out.sum().backward()
    assert not torch.isnan(q.grad).any()
    assert torch.all(q.grad[:, :, 2] == 0)


def test_mask_must_be_bool():
    q, k, v = _qkv()
    with pytest.raises(TypeError):
        l1_attention(q, k, v, mask=torch.ones(5, 6))


def test_qkv_shape_errors():
    q, k, v = _qkv()
    with pytest.raises(ValueError):
        dot_attention(q, k, v[:, :, :3])
    with pytest.raises(ValueError):
        l1_attention(q[..., :3], k, v)
