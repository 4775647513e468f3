"""Multi-head attention modules: vanilla (Vaswani et al., 2017) and E-ATT (Wan et al., 2022).

The modules only hold parameters and wire heads together; the math lives in
:mod:`eatt.model.functional`. Both modules expose the same parameter names
(``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``; ``nn.Linear(dim, dim)``, so
``Q = x @ q_proj.weight.T``), which is what the fixed-point golden model loads and compares.

Table 5 ablation grid of the paper, as :class:`EAttention` arguments::

    selection \\ score   "dot"              "l1"
    "linear"             vanilla            L1 only ("linear-l1")
    "binary"             discrete selection E-ATT ("eatt")
                         only ("binary-dot")
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from . import functional as F

__all__ = [
    "ATTENTION_VARIANTS",
    "DotProductAttention",
    "EAttention",
    "attention_variant",
    "variant_switches",
]


class _MultiHeadAttention(nn.Module):
    """Shared plumbing: projections, head split/concat, masks. Subclasses pick Q/K and scores."""

    def __init__(self, dim: int, heads: int, bias: bool = False) -> None:
        super().__init__()
        if heads <= 0 or dim <= 0 or dim % heads != 0:
            raise ValueError(
                f"dim must be a positive multiple of heads, got dim={dim}, heads={heads}"
            )
        self.dim = dim
        self.heads = heads
        self.d_head = dim // heads
        self.scale = 1.0 / math.sqrt(self.d_head)
        # The paper omits biases (footnote 1) and the hardware core has none.
        self.q_proj = nn.Linear(dim, dim, bias=bias)
        self.k_proj = nn.Linear(dim, dim, bias=bias)
        self.v_proj = nn.Linear(dim, dim, bias=bias)
        self.o_proj = nn.Linear(dim, dim, bias=bias)

    # hooks ------------------------------------------------------------------------------------
    def queries_keys(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        """Q from the query source x and K from the key source y, both ``(batch, len, dim)``."""
        return self.q_proj(x), self.k_proj(y)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None):
        return F.dot_attention(q, k, v, mask=mask, scale=self.scale)

    # plumbing ---------------------------------------------------------------------------------
    def _split(self, t: Tensor) -> Tensor:
        # head h owns the contiguous columns h*d_head:(h+1)*d_head
        batch, length, _ = t.shape
        return t.view(batch, length, self.heads, self.d_head).transpose(1, 2)

    def _mask(
        self,
        x: Tensor,
        y: Tensor,
        key_padding_mask: Tensor | None,
        causal: bool,
        visible: Tensor | None = None,
    ) -> Tensor | None:
        """May-attend mask broadcastable to (batch, heads, len_q, len_k), or None."""
        (batch, len_q), len_k = x.shape[:2], y.shape[1]
        mask = None
        if key_padding_mask is not None:
            if key_padding_mask.dtype != torch.bool:
                raise TypeError(
                    f"key_padding_mask must be bool (True = padding), got {key_padding_mask.dtype}"
                )
            if tuple(key_padding_mask.shape) != (batch, len_k):
                raise ValueError(
                    f"key_padding_mask must have shape (batch, len_k) = {(batch, len_k)}, "
                    f"got {tuple(key_padding_mask.shape)}"
                )
            mask = ~key_padding_mask[:, None, None, :]
        if causal:
            if len_q != len_k:
                raise ValueError(f"causal attention needs len_q == len_k, got {len_q} != {len_k}")
            keep = torch.ones(len_q, len_k, dtype=torch.bool, device=x.device).tril()
            mask = keep if mask is None else mask & keep
        if visible is not None:
            if visible.dtype != torch.bool or tuple(visible.shape) != (batch, len_q, len_k):
                raise ValueError(
                    f"visible must be bool (batch, len_q, len_k) = {(batch, len_q, len_k)}, "
                    f"got {visible.dtype} {tuple(visible.shape)}"
                )
            mask = visible[:, None] if mask is None else mask & visible[:, None]
        return mask

    def forward(
        self,
        x: Tensor,
        y: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        visible: Tensor | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from queries ``x`` to keys/values ``y``.

        Args:
            x: ``(batch, len_q, dim)`` query source.
            y: ``(batch, len_k, dim)`` key/value source; ``None`` means self-attention (y = x).
            key_padding_mask: ``(batch, len_k)`` bool, ``True`` = padding key (the
                ``nn.MultiheadAttention`` convention).
            causal: mask keys ``j > i`` (needs ``len_q == len_k``).
            need_weights: also return the per-head weights ``(batch, heads, len_q, len_k)``.
            visible: ``(batch, len_q, len_k)`` bool, ``True`` = query i may attend to key j
                (any pattern, as the hardware core's length and offset inputs make; every row
                needs one ``True``).

        Returns:
            ``(batch, len_q, dim)`` output, or ``(output, weights)`` if ``need_weights``.
        """
        if y is None:
            y = x
        for name, t in (("x", x), ("y", y)):
            if t.dim() != 3 or t.shape[-1] != self.dim:
                raise ValueError(f"{name} must be (batch, len, {self.dim}), got {tuple(t.shape)}")
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"x and y batch sizes differ: {x.shape[0]} != {y.shape[0]}")
        mask = self._mask(x, y, key_padding_mask, causal, visible)
        q, k = self.queries_keys(x, y)
        v = self.v_proj(y)
        out, weights = self._attend(self._split(q), self._split(k), self._split(v), mask)
        out = self.o_proj(out.transpose(1, 2).reshape(x.shape[0], x.shape[1], self.dim))
        return (out, weights) if need_weights else out


class DotProductAttention(_MultiHeadAttention):
    """Vanilla multi-head scaled dot-product attention (Eq. 1-3), no biases by default."""

    def extra_repr(self) -> str:
        return f"dim={self.dim}, heads={self.heads}"


class EAttention(_MultiHeadAttention):
    """E-ATT (Sec. 3) and its Table 5 ablations.

    Args:
        dim, heads, bias: as :class:`DotProductAttention`.
        tau: binarization threshold of Eq. 4 (the paper uses 1.0).
        selection: ``"binary"`` -> ``Q = f(X) W_Q``, ``K = f(Y) W_K`` (Eq. 4-9: with 0/1
            inputs the product only selects and adds rows of W); ``"linear"`` -> ``X W_Q``.
        score: ``"l1"`` -> ``-||Q_i - K_j||_1`` (Eq. 10); ``"dot"`` -> ``Q_i K_j^T`` (Eq. 2).

    Values and the output projection stay ordinary linear layers, as in the paper.
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        tau: float = 1.0,
        selection: str = "binary",
        score: str = "l1",
        bias: bool = False,
    ) -> None:
        if selection not in ("binary", "linear"):
            raise ValueError(f"selection must be 'binary' or 'linear', got {selection!r}")
        if score not in ("l1", "dot"):
            raise ValueError(f"score must be 'l1' or 'dot', got {score!r}")
        super().__init__(dim, heads, bias=bias)
        self.tau = float(tau)
        self.selection = selection
        self.score = score

    def queries_keys(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        if self.selection == "binary":
            x_bin = F.binarize(x, self.tau)
            # self-attention: one thresholded copy serves both Q and K
            y_bin = x_bin if y is x else F.binarize(y, self.tau)
            x, y = x_bin, y_bin
        return self.q_proj(x), self.k_proj(y)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None):
        fn = F.l1_attention if self.score == "l1" else F.dot_attention
        return fn(q, k, v, mask=mask, scale=self.scale)

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, heads={self.heads}, tau={self.tau}, "
            f"selection={self.selection!r}, score={self.score!r}"
        )


# Table 5 rows -> constructor keyword arguments (None = the vanilla module)
ATTENTION_VARIANTS: dict[str, dict[str, str] | None] = {
    "vanilla": None,
    "eatt": {"selection": "binary", "score": "l1"},
    "binary-dot": {"selection": "binary", "score": "dot"},  # discrete selection only
    "linear-l1": {"selection": "linear", "score": "l1"},  # L1 distance only
}


def variant_switches(name: str) -> tuple[bool, bool]:
    """EAttention's two switches of a Table 5 variant: (binary selection, L1 score).

    The vanilla variant (:class:`DotProductAttention`) has neither: linear selection, dot score.
    """
    if name not in ATTENTION_VARIANTS:
        raise ValueError(
            f"unknown attention variant {name!r}; choose from {list(ATTENTION_VARIANTS)}"
        )
    variant = ATTENTION_VARIANTS[name]
    if variant is None:
        return False, False
    return variant["selection"] == "binary", variant["score"] == "l1"


def attention_variant(name: str, dim: int, heads: int, **kw) -> nn.Module:
    """Build one of the paper's Table 5 variants by name.

    ``"vanilla"`` -> :class:`DotProductAttention` (``kw``: ``bias``); ``"eatt"``,
    ``"binary-dot"``, ``"linear-l1"`` -> :class:`EAttention` (``kw``: ``tau``, ``bias``).
    """
    if name not in ATTENTION_VARIANTS:
        raise ValueError(
            f"unknown attention variant {name!r}; choose from {list(ATTENTION_VARIANTS)}"
        )
    variant = ATTENTION_VARIANTS[name]
    if variant is None:
        return DotProductAttention(dim, heads, **kw)
    return EAttention(dim, heads, **variant, **kw)
