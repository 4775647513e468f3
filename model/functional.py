"""Stateless math of E-ATT (Wan et al., Findings of ACL 2022, Eq. 4-10).

The modules in :mod:`eatt.model.attention` hold the parameters and call these functions,
mirroring the ``torch.nn`` / ``torch.nn.functional`` split.

* :func:`binarize` -- threshold function f (Eq. 4) with the Gaussian surrogate gradient (Eq. 5).
* :func:`l1_scores` -- negative pairwise L1 distance -||Q_i - K_j||_1 (Eq. 10), memory-lean.
* :func:`l1_attention` / :func:`dot_attention` -- softmax attention with L1 or dot-product
  scores (Eq. 10 / Eq. 2) followed by the weighted sum of values (Eq. 3).

Masks follow one convention everywhere in this module: a bool tensor broadcastable to
``(batch, heads, len_q, len_k)`` where ``True`` means "this query may attend to this key".
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = [
    "L1_CHUNK_ELEMENTS",
    "L1_COMPILE_MIN_ELEMENTS",
    "L1_IMPL",
    "binarize",
    "dot_attention",
    "l1_attention",
    "l1_scores",
]

# Upper bound (in elements) on the (chunk, len_k, d) temporaries of the L1 score kernels:
# 32M float32 elements = 128 MiB, whatever len_q is.
L1_CHUNK_ELEMENTS = 1 << 25

# Default L1 kernel (see l1_scores). "auto" uses torch.compile'd fused loops for workloads of at
# least L1_COMPILE_MIN_ELEMENTS (batch * len_q * len_k * d) -- there they run ~5x faster than
# aten's cdist kernels, and the one-off compile (seconds) pays for itself -- and cdist below.
L1_IMPL = "auto"
L1_COMPILE_MIN_ELEMENTS = 1 << 22

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# --------------------------------------------------------------------------------------------
# Feature selection with discreteness (Sec. 3.1)
# --------------------------------------------------------------------------------------------
class _Binarize(torch.autograd.Function):
    """f(x) = 1[x > tau] forward; sqrt(2/pi) exp(-2 (x - tau)^2) surrogate backward."""

    @staticmethod
    def forward(ctx, x: Tensor, tau: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.tau = tau
        return (x > tau).to(x.dtype)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        (x,) = ctx.saved_tensors
        # Eq. 5 writes the surrogate in terms of Z; it peaks at the threshold, so we evaluate it
        # at the pre-threshold input, which is what Wu et al. (2018) do for spiking activations.
        surrogate = torch.exp(-2.0 * (x - ctx.tau).square()).mul_(_SQRT_2_OVER_PI)
        return grad * surrogate, None


def binarize(x: Tensor, tau: float = 1.0) -> Tensor:
    """Threshold function f of Eq. 4: ``1`` where ``x > tau`` (strictly), else ``0``.

    The result has ``x.dtype``. Its gradient is the Gaussian surrogate of Eq. 5,
    ``grad * sqrt(2/pi) * exp(-2 (x - tau)^2)``; ``tau`` is a fixed float (no gradient).
    """
    if not torch.is_floating_point(x):
        raise TypeError(f"binarize expects a floating point tensor, got {x.dtype}")
    return _Binarize.apply(x, float(tau))


# --------------------------------------------------------------------------------------------
# Pairwise L1 distance (Sec. 3.2)
# --------------------------------------------------------------------------------------------
def _blocks(n: int, len_q: int, row_elements: int, budget: int) -> Iterator[tuple[slice, slice]]:
    """Yield (batch slice, query slice) blocks whose temporary has <= ``budget`` elements.

    ``row_elements`` is the temporary size of one query row (len_k * d).
    """
    rows = max(1, min(len_q, budget // max(1, row_elements)))
    batches = max(1, budget // max(1, rows * row_elements)) if rows == len_q else 1
    for b0 in range(0, n, batches):
        for i0 in range(0, len_q, rows):
            yield slice(b0, b0 + batches), slice(i0, i0 + rows)


_IMPLS = ("auto", "cdist", "torch", "compiled")


def _fused_distance(q: Tensor, k: Tensor) -> Tensor:
    return (q.unsqueeze(-2) - k.unsqueeze(-3)).abs().sum(-1)


def _fused_grads(g: Tensor, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
    weighted_sign = (q.unsqueeze(-2) - k.unsqueeze(-3)).sign() * g.unsqueeze(-1)
    return weighted_sign.sum(-2), -weighted_sign.sum(-3)


# torch.compile'd versions of the two functions above: Inductor fuses difference, sign/abs and
# the reductions into one loop nest, so the (c, len_k, d) tensor is never written to memory.
_compiled: dict[str, object] = {}


def _compiled_fn(name: str):
    if name not in _compiled:
        fn = _fused_distance if name == "distance" else _fused_grads
        _compiled[name] = torch.compile(fn, dynamic=False)
    return _compiled[name]


def _compile_available() -> bool:
    return not _compiled.get("broken", False)


def _pick_impl(impl: str | None, q: Tensor, k: Tensor) -> str:
    impl = L1_IMPL if impl is None else impl
    if impl not in _IMPLS:
        raise ValueError(f"impl must be one of {_IMPLS}, got {impl!r}")
    if impl != "auto":
        return impl
    if q.dtype not in (torch.float32, torch.float64):
        return "torch"
    work = q.shape[0] * q.shape[1] * k.shape[1] * q.shape[2]
    if work >= L1_COMPILE_MIN_ELEMENTS and _compile_available():
        return "compiled_or_cdist"  # compiled, but a failed compile falls back to cdist
    return "cdist"


def _run_compiled(name: str, impl: str, *args: Tensor):
    try:
        return _compiled_fn(name)(*args)
    except Exception as err:  # no C++ compiler, unsupported platform, ...
        if impl == "compiled":
            raise
        _compiled["broken"] = True
        warnings.warn(f"torch.compile of the L1 kernel failed, using cdist: {err}", stacklevel=3)
        return None


def _l1_distance_block(q: Tensor, k: Tensor, impl: str) -> Tensor:
    """||q_i - k_j||_1 for q (n, c, d), k (n, len_k, d)."""
    if impl.startswith("compiled"):
        out = _run_compiled("distance", impl, q, k)
        if out is not None:
            return out
        impl = "cdist"
    if impl == "cdist":
        # The p=1 kernel sums |q - k| directly (no matmul expansion), so it is exact and never
        # materialises the (c, len_k, d) difference tensor.
        return torch.cdist(q, k, p=1.0)
    return (q.unsqueeze(-2) - k.unsqueeze(-3)).abs_().sum(-1)


def _l1_distance_grads(g: Tensor, q: Tensor, k: Tensor, impl: str) -> tuple[Tensor, Tensor]:
    """Gradients of sum_ij g_ij ||q_i - k_j||_1: (sum_j g_ij s_ij, -sum_i g_ij s_ij), s = sign."""
    if impl.startswith("compiled"):
        out = _run_compiled("grads", impl, g, q, k)
        if out is not None:
            return out
        impl = "cdist"
    if impl == "cdist":
        # aten's p=1 backward is grad * sign(q_i - k_j) summed over j (sign(0) = 0); its
        # distance argument is only read for p > 1, so a zero placeholder stands in for the
        # distances we chose not to keep (gradcheck in tests/test_functional.py guards this).
        zeros = torch.zeros_like(g)
        g_q = torch.ops.aten._cdist_backward(g, q, k, 1.0, zeros)
        g_k = torch.ops.aten._cdist_backward(g.mT.contiguous(), k, q, 1.0, zeros.mT.contiguous())
        return g_q, g_k
    sign = (q.unsqueeze(-2) - k.unsqueeze(-3)).sign_()  # (n, c, len_k, d)
    g_q = (g.unsqueeze(-2) @ sign).squeeze(-2)  # (n, c, 1, len_k) @ (n, c, len_k, d)
    g_k = -(g.mT.unsqueeze(-2) @ sign.transpose(-3, -2)).squeeze(-2)
    return g_q, g_k


class _L1Scores(torch.autograd.Function):
    """-||q_i - k_j||_1 over (n, len, d) inputs; saves only q and k for backward."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, budget: int, impl: str) -> Tensor:
        ctx.save_for_backward(q, k)
        ctx.budget, ctx.impl = budget, impl
        n, len_q, d = q.shape
        len_k = k.shape[1]
        blocks = list(_blocks(n, len_q, len_k * d, budget))
        if len(blocks) == 1:  # common case: no copy into a preallocated result
            return _l1_distance_block(q, k, impl).neg_()
        out = q.new_empty(n, len_q, len_k)
        for b, i in blocks:
            out[b, i] = _l1_distance_block(q[b, i], k[b], impl)
        return out.neg_()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, None, None]:
        q, k = ctx.saved_tensors
        n, len_q, d = q.shape
        len_k = k.shape[1]
        grad = grad.contiguous()
        grad_q = torch.empty_like(q)
        grad_k = torch.zeros_like(k)
        for b, i in _blocks(n, len_q, len_k * d, ctx.budget):
            g_q, g_k = _l1_distance_grads(grad[b, i], q[b, i], k[b], ctx.impl)
            # scores are the *negative* distance
            grad_q[b, i] = g_q.neg_()
            grad_k[b] -= g_k
        return grad_q, grad_k, None, None


def l1_scores(
    q: Tensor, k: Tensor, *, chunk_elements: int | None = None, impl: str | None = None
) -> Tensor:
    """Negative pairwise L1 distance ``-||q_i - k_j||_1`` (the score of Eq. 10, unscaled).

    Args:
        q: ``(..., len_q, d)`` queries.
        k: ``(..., len_k, d)`` keys; leading dims broadcast against ``q``'s.
        chunk_elements: bound on the ``(chunk, len_k, d)`` temporaries (default
            :data:`L1_CHUNK_ELEMENTS`); work is split over batch and ``len_q`` to respect it.
        impl: ``"cdist"`` (``torch.cdist(p=1)`` and its aten backward kernel), ``"torch"``
            (plain broadcast / sign-matmul, the reference), ``"compiled"`` (``torch.compile``'d
            fused loops; first call per shape compiles) or ``"auto"``: compiled for float32/64
            workloads of at least :data:`L1_COMPILE_MIN_ELEMENTS` (falling back to cdist, with a
            warning, if compiling fails), cdist for smaller float32/64 ones, torch otherwise.
            ``None`` means the module default :data:`L1_IMPL`.

    Returns:
        ``(..., len_q, len_k)`` scores. Only ``q`` and ``k`` are kept for backward -- never a
        ``(len_q, len_k, d)`` tensor. Gradients use ``sign(0) = 0``; double backward is not
        supported.
    """
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share the feature dim, got {q.shape} and {k.shape}")
    if q.dtype != k.dtype:
        raise TypeError(f"q and k must share a dtype, got {q.dtype} and {k.dtype}")
    budget = L1_CHUNK_ELEMENTS if chunk_elements is None else int(chunk_elements)
    if budget < 1:
        raise ValueError(f"chunk_elements must be positive, got {chunk_elements}")
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    (len_q, d), len_k = q.shape[-2:], k.shape[-2]
    # expand is a view; autograd sums the gradient back over broadcast dims for us
    n = math.prod(batch)
    q3 = q.expand(*batch, len_q, d).reshape(n, len_q, d)
    k3 = k.expand(*batch, len_k, d).reshape(n, len_k, d)
    if q3.numel() == 0 or k3.numel() == 0:
        # nothing to compare (or d == 0: distance 0); keep the result attached to the graph
        empty = q3.sum(-1, keepdim=True) * 0 + k3.sum(-1).unsqueeze(-2) * 0
        return empty.reshape(*batch, len_q, len_k)
    scores = _L1Scores.apply(q3, k3, budget, _pick_impl(impl, q3, k3))
    return scores.view(*batch, len_q, len_k)


# --------------------------------------------------------------------------------------------
# Attention (Eq. 2/10 + Eq. 3)
# --------------------------------------------------------------------------------------------
def _attend(scores: Tensor, v: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """Softmax over keys with an optional may-attend mask, then the weighted sum of values."""
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True = may attend), got {mask.dtype}")
    scores = scores.masked_fill(~mask, float("-inf"))
    empty = ~mask.any(dim=-1, keepdim=True)
    if bool(empty.any()):
        # softmax of an all -inf row is NaN; a query that sees no key attends to nothing
        weights = torch.softmax(scores.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)
    else:
        weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share d_head, got {q.shape} and {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must share len_k, got {k.shape} and {v.shape}")


def _scale(q: Tensor, scale: float | None) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def l1_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, scale: float | None = None
) -> tuple[Tensor, Tensor]:
    """E-ATT attention: ``softmax(-||Q_i - K_j||_1 * scale) V`` (Eq. 10 and Eq. 3).

    Args:
        q: ``(batch, heads, len_q, d_head)``.
        k, v: ``(batch, heads, len_k, d_head)``.
        mask: optional bool tensor broadcastable to ``(batch, heads, len_q, len_k)``;
            ``True`` = may attend. Masked scores become ``-inf``; a query row with no visible
            key gets all-zero weights (and a zero output), not NaN.
        scale: score scale, default ``1 / sqrt(d_head)``.

    Returns:
        ``(output (batch, heads, len_q, d_head), weights (batch, heads, len_q, len_k))``.
    """
    _check_qkv(q, k, v)
    return _attend(l1_scores(q, k) * _scale(q, scale), v, mask)


def dot_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, scale: float | None = None
) -> tuple[Tensor, Tensor]:
    """Vanilla attention: ``softmax(Q K^T * scale) V`` (Eq. 2 and Eq. 3).

    Same arguments, mask convention and returns as :func:`l1_attention`.
    """
    _check_qkv(q, k, v)
    return _attend((q @ k.mT) * _scale(q, scale), v, mask)
