"""Synthesizer attention (Tay et al., "Synthesizer: Rethinking Self-Attention for Transformer
Models", ICML 2021): the Dense and Random ("RandInit") variants the E-ATT paper compares with
(its Tables 2 and 6).

Neither computes query-key dot products:

* :class:`DenseSynthesizer` -- each query row predicts its own scores over key *positions*
  with a two-layer MLP, ``B_i = W_2 relu(W_1 x_i + b_1) + b_2`` (Tay et al. Eq. 2), one
  ``(max_len)``-wide score row per head, truncated to the actual number of keys.
* :class:`RandomSynthesizer` -- a trained ``(heads, max_len, max_len)`` score matrix
  ("RandInit": randomly initialized, then trained), indexed by query and key position.

Both then take ``softmax(B) V`` with the same mask convention as
:mod:`eatt.model.functional` and share the vanilla module's value and output projections
(``v_proj``, ``o_proj``). Their weights are shaped by ``max_len``; more keys (or, for RandInit,
query positions) than that raise a ValueError.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["DenseSynthesizer", "RandomSynthesizer", "synthesized_attention"]


def synthesized_attention(
    scores: Tensor, v: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """``softmax(scores) v`` with an optional bool may-attend mask (True = may attend).

    ``scores`` ``(batch, heads, len_q, len_k)``; a query that sees no key gets zero weights.
    """
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
        empty = ~mask.any(dim=-1, keepdim=True)
        if bool(empty.any()):
            scores = scores.masked_fill(empty, 0.0)
            weights = torch.softmax(scores, dim=-1).masked_fill(empty, 0.0)
            return weights @ v, weights
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


class _Synthesizer(nn.Module):
    def __init__(self, dim: int, heads: int, max_len: int, bias: bool = False) -> None:
        super().__init__()
        if heads <= 0 or dim <= 0 or dim % heads != 0:
            raise ValueError(
                f"dim must be a positive multiple of heads, got dim={dim}, heads={heads}"
            )
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        self.dim, self.heads, self.max_len = dim, heads, max_len
        self.d_head = dim // heads
        self.v_proj = nn.Linear(dim, dim, bias=bias)
        self.o_proj = nn.Linear(dim, dim, bias=bias)

    def check_length(self, len_k: int, q_end: int | None = None) -> None:
        if len_k > self.max_len:
            raise ValueError(
                f"{type(self).__name__}: {len_k} keys exceed max_len={self.max_len} "
                "(the synthesizer's weights are shaped by max_len)"
            )
        if q_end is not None and q_end > self.max_len:
            raise ValueError(
                f"{type(self).__name__}: query position {q_end - 1} exceeds max_len={self.max_len}"
            )

    def scores(self, x: Tensor, len_k: int, q_offset: int = 0) -> Tensor:
        """Synthesized scores ``(batch, heads, len_q, len_k)`` for queries ``x``."""
        raise NotImplementedError

    def forward(
        self,
        x: Tensor,
        y: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        visible: Tensor | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Same signature and conventions as :class:`eatt.model.attention.EAttention`
        (``visible``: ``(batch, len_q, len_k)`` bool, True = query i may attend to key j)."""
        y = x if y is None else y
        (batch, len_q), len_k = x.shape[:2], y.shape[1]
        mask = None
        if key_padding_mask is not None:
            mask = ~key_padding_mask[:, None, None, :]
        if causal:
            keep = torch.ones(len_q, len_k, dtype=torch.bool, device=x.device).tril()
            mask = keep if mask is None else mask & keep
        if visible is not None:
            if visible.dtype != torch.bool or tuple(visible.shape) != (batch, len_q, len_k):
                raise ValueError(
                    f"visible must be bool (batch, len_q, len_k) = {(batch, len_q, len_k)}, "
                    f"got {visible.dtype} {tuple(visible.shape)}"
                )
            mask = visible[:, None] if mask is None else mask & visible[:, None]
        v = self.v_proj(y).view(batch, len_k, self.heads, self.d_head).transpose(1, 2)
        out, weights = synthesized_attention(self.scores(x, len_k), v, mask)
        out = self.o_proj(out.transpose(1, 2).reshape(batch, len_q, self.dim))
        return (out, weights) if need_weights else out


class DenseSynthesizer(_Synthesizer):
    """Dense Synthesizer: per-head scores over key positions from the query row alone."""

    def __init__(
        self, dim: int, heads: int, max_len: int, bias: bool = False, mlp_bias: bool = True
    ) -> None:
        super().__init__(dim, heads, max_len, bias)
        # F(x) = W_2 relu(W_1 x + b_1) + b_2; W_1 is d x d, W_2 maps d to heads * max_len;
        # mlp_bias=False: no b_1, b_2 (the hardware core, eatt.mechanisms.dense)
        self.w1 = nn.Linear(dim, dim, bias=mlp_bias)
        self.w2 = nn.Linear(dim, heads * max_len, bias=mlp_bias)

    def scores(self, x: Tensor, len_k: int, q_offset: int = 0) -> Tensor:
        self.check_length(len_k)
        batch, len_q, _ = x.shape
        b = self.w2(torch.relu(self.w1(x))).view(batch, len_q, self.heads, self.max_len)
        return b[..., :len_k].transpose(1, 2)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, heads={self.heads}, max_len={self.max_len}"


class RandomSynthesizer(_Synthesizer):
    """Random Synthesizer ("RandInit"): a trained score matrix per head, shaped by max_len."""

    def __init__(self, dim: int, heads: int, max_len: int, bias: bool = False) -> None:
        super().__init__(dim, heads, max_len, bias)
        self.random_scores = nn.Parameter(torch.randn(heads, max_len, max_len) * 0.02)

    def scores(self, x: Tensor, len_k: int, q_offset: int = 0) -> Tensor:
        len_q = x.shape[1]
        self.check_length(len_k, q_offset + len_q)
        r = self.random_scores[:, q_offset : q_offset + len_q, :len_k]
        return r.unsqueeze(0).expand(x.shape[0], -1, -1, -1)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, heads={self.heads}, max_len={self.max_len}"
