"""Windowed single-head cross-attention: Luong global / local-m / local-p, Flexible Attention.

Papers: Luong et al. (2015), "Effective Approaches to Attention-based NMT" (global attention with
the dot / general / concat scores of Eq. 8; local attention over ``[p_t - D, p_t + D]`` with
``p_t = t`` (local-m) or ``p_t = S sigmoid(v_p^T tanh(W_p h_t))`` (local-p, Eq. 9) and the
Gaussian weight ``exp(-(s - p_t)^2 / (2 sigma^2))``, ``sigma = D / 2`` (Eq. 10)); Shu & Nakayama
(2017), "An Empirical Study of Adequate Vision Span for Attention-Based NMT" (Flexible Attention:
focus ``p_t = sum_s a_t(s) s`` (Eq. 4), penalty ``g(t) (s - p_{t-1})^2 / (2 sigma^2)`` inside the
softmax (Eq. 5-7), strength ``g(t) = sigmoid(v_g^T tanh(W_g [h; i_t]) + b_g)`` (Eq. 8), test-time
threshold tau: only ``s in (p_{t-1} - sigma sqrt(2 tau / g), p_{t-1} + sigma sqrt(2 tau / g))``
is scored (Sec. 3.1), fine-tuning term ``-beta mean_t g(t)`` (Eq. 9)). The ``eatt`` score is
E-ATT's (Wan et al., 2022, Eq. 4 and 10): ``-||W_q f(h) - W_k f(hbar)||_1 / sqrt(d)``, binarized
inputs and an L1 distance, usable inside every form.

Layout as in ``torch.nn`` / ``torch.nn.functional``: the functions below hold the math, and
:class:`WindowedAttention` holds the parameters and the per-sentence decoding state.

Conventions: positions are 0-based source indices; ``padding`` is (B, S) bool with True = pad,
and the source of row b is its first ``lengths[b]`` positions (padding at the end). Windowed forms
at a decoding step gather only the window's keys and values (:func:`gather_window`), never a
masked full-length computation, and add the number of positions they score to ``state["scored"]``
(the *vision span* of the Flexible paper). ``counts`` (L0Drop's compacted memory, Algorithm 1)
add ``log(count)`` to each score, so one row standing for N pruned rows weighs as N of them.

Deviations, on purpose: the dot and general scores are scaled by ``1/sqrt(d)`` (Vaswani et al.)
so that they train in a Transformer too; the local window is ``[c - D, c + D]`` around the
integer ``c = round(p_t)`` clipped to the source (2D + 1 positions), the Gaussian uses the real
``p_t``; a Flexible window that holds no integer position keeps the one nearest ``p_{t-1}``.

The window unit's forms (docs/window.md, "Models on the unit"), each a switch: ``gaussian=
"inside"`` puts local-p's Gaussian inside the softmax as the log-domain penalty
``-(s - p_t)^2 / (2 sigma^2)`` (Flexible Attention's Eq. 7 form: the weights sum to 1) instead of
multiplying it in after; ``round_p`` uses the window centre ``c`` in the Gaussian as well, with
the gradient of the real ``p_t`` (straight-through), and for Flexible rounds the focus
``p_{t-1}`` the same way; ``g_levels`` puts Flexible's ``g(t)`` on the unit's level grid.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from . import functional as F
from .config import WINDOW_GAUSSIANS, WINDOW_KINDS, WINDOW_SCORES, ModelConfig
from .l0drop import counted_softmax

__all__ = [
    "WINDOW_KINDS",
    "WINDOW_SCORES",
    "WindowedAttention",
    "cross_attention",
    "flexible_penalty",
    "flexible_window",
    "gather_window",
    "gaussian_penalty",
    "gaussian_weight",
    "local_window",
    "luong_scores",
    "mean_strength",
    "reorder_state",
    "rounded_center",
    "strength_levels",
    "vision_span",
]


#: L1 kernel for E-ATT scores (eatt.model.functional.l1_scores): cdist, no per-shape compiling
L1_IMPL = "cdist"


# -- math ----------------------------------------------------------------------------------------
def luong_scores(
    score: str, q: Tensor, k: Tensor, v_a: Tensor | None = None, scale: float = 1.0
) -> Tensor:
    """Scores (B, T, S) of queries q (B, T, d) against keys k (B, S, d) (Luong Eq. 8, E-ATT).

    ``q`` and ``k`` are already projected (see :class:`WindowedAttention`): dot and general are
    ``q . k * scale``; concat is ``v_a^T tanh(q + k)`` (``W_a [h; hbar]`` split into its query
    and memory halves); eatt is ``-||q - k||_1 * scale``.
    """
    if score in ("dot", "general"):
        return torch.matmul(q, k.transpose(-1, -2)) * scale
    if score == "concat":
        if v_a is None:
            raise ValueError("concat scores need v_a")
        return torch.tanh(q[:, :, None, :] + k[:, None, :, :]) @ v_a
    if score == "eatt":
        return F.l1_scores(q, k, impl=L1_IMPL) * scale
    raise ValueError(f"unknown score {score!r}; choose from {WINDOW_SCORES}")


def local_window(center: Tensor, half: int, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """[start, end) of the window [c - D, c + D] around integer centers c (B,), clipped to
    [0, lengths); the center itself is clipped first, so the window is never empty."""
    c = torch.minimum(center.clamp(min=0), lengths - 1)
    return (c - half).clamp(min=0), torch.minimum(c + half + 1, lengths)


def flexible_window(
    p_prev: Tensor, g: Tensor, sigma: float, tau: float, lengths: Tensor
) -> tuple[Tensor, Tensor]:
    """[start, end) of the positions whose penalty ``g (s - p)^2 / (2 sigma^2)`` is < tau:
    the open interval ``p_{t-1} -+ sigma sqrt(2 tau / g(t))`` (Sec. 3.1), clipped to the source.
    g = 0 gives the whole source; an interval with no integer keeps the position nearest p."""
    radius = sigma * torch.sqrt(2.0 * tau / g.to(torch.float64))  # g = 0 -> inf
    p = p_prev.to(torch.float64)
    high = lengths.to(torch.float64)
    start = (torch.floor(p - radius) + 1).clamp(min=0).minimum(high).to(torch.long)
    end = torch.ceil(p + radius).clamp(min=0).minimum(high).to(torch.long)
    nearest = torch.minimum(torch.round(p).to(torch.long).clamp(min=0), lengths - 1)
    empty = start >= end
    start = torch.where(empty, nearest, start)
    end = torch.where(empty, nearest + 1, end)
    return start, end


def gather_window(x: Tensor, start: Tensor, end: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Rows start..end-1 of x (B, S, ...) per batch row, padded to the widest window.

    Returns (gathered (B, W, ...), positions (B, W) long, valid (B, W) bool). Slots beyond a
    row's window repeat its first position (never a position outside the window), so the values
    there are finite whatever lies outside; callers mask them with ``valid``.
    """
    width = int((end - start).max().item()) if start.numel() else 0
    width = max(width, 1)
    positions = start[:, None] + torch.arange(width, device=start.device)
    valid = positions < end[:, None]
    positions = torch.where(valid, positions, start[:, None])
    index = positions.view(*positions.shape, *([1] * (x.dim() - 2)))
    index = index.expand(*positions.shape, *x.shape[2:])
    return x.gather(1, index), positions, valid


def gaussian_weight(positions: Tensor, center: Tensor, sigma: float) -> Tensor:
    """Luong Eq. 10's ``exp(-(s - p_t)^2 / (2 sigma^2))`` for positions (B, ...) and p_t."""
    return torch.exp(-gaussian_penalty(positions, center, sigma))


def gaussian_penalty(positions: Tensor, center: Tensor, sigma: float) -> Tensor:
    """The Gaussian in the log domain, ``(s - p_t)^2 / (2 sigma^2)``: subtracted from the
    scores inside the softmax (``gaussian="inside"``, the window unit's position term)."""
    diff = positions.to(center.dtype) - center
    return diff.square() / (2.0 * sigma * sigma)


def rounded_center(p_t: Tensor, lengths: Tensor) -> Tensor:
    """``c = round(p_t)`` clipped to [0, length - 1] (the window's centre, the unit's integer
    p) with the gradient of ``p_t`` (straight-through)."""
    upper = (lengths - 1).to(p_t.dtype)
    c = torch.minimum(torch.round(p_t.detach()).clamp(min=0), upper)
    return p_t + (c - p_t).detach()


def flexible_penalty(positions: Tensor, p_prev: Tensor, g: Tensor, sigma: float) -> Tensor:
    """Flexible Attention's penalty (Eq. 5-6): ``g(t) (s - p_{t-1})^2 / (2 sigma^2)``."""
    diff = positions.to(p_prev.dtype) - p_prev
    return g * diff.square() / (2.0 * sigma * sigma)


def strength_levels(g: Tensor, levels: int) -> Tensor:
    """g(t) on the window unit's grid ``l / levels``, ``l = round(g levels)`` in [0, levels],
    with the gradient of g (straight-through): the unit's g input."""
    scaled = g * levels
    return (scaled + (torch.round(scaled.detach()).clamp(0, levels) - scaled).detach()) / levels


def reorder_state(state: dict, index: Tensor) -> dict:
    """Select batch rows ``index`` of every tensor in a decoding state (beam search)."""
    return {k: (v.index_select(0, index) if isinstance(v, Tensor) else v) for k, v in state.items()}


def vision_span(state: dict) -> float:
    """Average vision span: positions scored per decoding step, averaged over steps and rows."""
    steps = state.get("steps", 0)
    if not steps:
        return 0.0
    return float(state["scored"].double().mean().item()) / steps


def mean_strength(state: dict, real: Tensor | None = None) -> Tensor:
    """Flexible's strength term of Eq. 9, a scalar tensor with gradient; 0 for other kinds.

    With ``real`` (B, T), True at the target positions that are not padding (those the
    decoded steps ran on): Eq. 9's per-sentence form, ``sum_i (1/T_i) sum_t g_i(t)`` over the
    batch's sentences, divided by the batch's target tokens, the trainer's normalisation of
    the cross entropy (so beta weighs it as the paper's J, whose NLL is summed over tokens).
    Without: the mean of g(t) over every decoded step and row (padding included).
    """
    steps = state.get("steps", 0)
    if not steps or "g_sum" not in state:
        return state["scored"].new_zeros((), dtype=torch.float32)
    if real is None or not state.get("g_steps"):
        return state["g_sum"].mean() / steps
    g = torch.stack(state["g_steps"], 1)  # (B, T)
    mask = real[:, : g.shape[1]].to(g.dtype)
    per_sentence = (g * mask).sum(1) / mask.sum(1).clamp(min=1)
    return per_sentence.sum() / mask.sum().clamp(min=1)


def _softmax(scores: Tensor, valid: Tensor, counts: Tensor | None = None) -> Tensor:
    """Softmax over the last dim of already-masked scores; a row with no valid slot (all of a
    compacted memory's rows padding) gets zero weights instead of NaN. With ``counts`` (L0Drop's
    compacted memory) it is Algorithm 1's :func:`~eatt.model.l0drop.counted_softmax`."""
    if counts is not None:
        return counted_softmax(scores, counts, ~valid)
    empty = ~valid.any(-1, keepdim=True)
    return torch.softmax(scores.masked_fill(empty, 0.0), dim=-1).masked_fill(~valid, 0.0)


# -- module --------------------------------------------------------------------------------------
class WindowedAttention(nn.Module):
    """One single-head cross-attention of a windowed kind, for one decoder.

    Args:
        kind: one of :data:`WINDOW_KINDS`.
        score: one of :data:`WINDOW_SCORES`.
        query_dim / memory_dim: sizes of the decoder state h and of an encoder row hbar.
        window_d: D of local-m / local-p.
        sigma: sigma of the position term: local-p's Gaussian (Eq. 10) or Flexible's penalty
            (Eq. 6); None = the paper's choice, D / 2 (Luong) or 1.5 (Flexible, Sec. 5.2).
        tau: Flexible's test-time threshold (None = infinity).
        binarize_tau: E-ATT's binarization threshold (Eq. 4) for the eatt score.
        g_input_dim: size of the extra input i_t of the strength g(t) (Eq. 8); 0 = g from h only.
        gaussian: local-p's Gaussian "after" the softmax (Luong Eq. 10) or "inside" it.
        round_p: the centre on an integer source position (straight-through), as the window
            unit takes it: local-p's Gaussian centred on the integer window centre, Flexible's
            focus p_{t-1} rounded (in the penalty and the window).
        g_levels: Flexible's g(t) rounded to l / g_levels (straight-through), the unit's g
            input; 0 = the real g(t).
    """

    def __init__(
        self,
        kind: str,
        score: str,
        query_dim: int,
        memory_dim: int,
        window_d: int = 10,
        sigma: float | None = None,
        tau: float | None = None,
        binarize_tau: float = 1.0,
        train_tau: float | None = None,
        g_input_dim: int = 0,
        gaussian: str = "after",
        round_p: bool = False,
        g_levels: int = 0,
    ) -> None:
        super().__init__()
        if gaussian not in WINDOW_GAUSSIANS:
            raise ValueError(f"unknown gaussian {gaussian!r}; choose from {WINDOW_GAUSSIANS}")
        if kind not in WINDOW_KINDS:
            raise ValueError(f"unknown windowed kind {kind!r}; choose from {WINDOW_KINDS}")
        if score not in WINDOW_SCORES:
            raise ValueError(f"unknown score {score!r}; choose from {WINDOW_SCORES}")
        if score == "dot" and query_dim != memory_dim:
            raise ValueError(
                f"dot scores need query_dim == memory_dim, got {query_dim}, {memory_dim}"
            )
        if window_d < 0:
            raise ValueError(f"window_d must be >= 0, got {window_d}")
        if sigma is None:
            sigma = 1.5 if kind == "flexible" else window_d / 2.0
        if not sigma > 0:
            raise ValueError(f"sigma must be > 0, got {sigma}")
        for name, value in (("tau", tau), ("train_tau", train_tau)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0 (None = infinity), got {value}")
        self.kind, self.score = kind, score
        self.query_dim, self.memory_dim = query_dim, memory_dim
        self.window_d = int(window_d)
        self.sigma = float(sigma)
        self.tau = None if tau is None or math.isinf(tau) else float(tau)
        #: Flexible's window in training (None: none, the paper's procedure)
        self.train_tau = None if train_tau is None or math.isinf(train_tau) else float(train_tau)
        self.binarize_tau = float(binarize_tau)
        self.g_input_dim = int(g_input_dim)
        self.gaussian, self.round_p = gaussian, bool(round_p)
        if g_levels < 0:
            raise ValueError(f"g_levels must be >= 0, got {g_levels}")
        self.g_levels = int(g_levels)
        self.scale = query_dim**-0.5
        d = query_dim
        if score == "general":
            self.w_a = nn.Linear(memory_dim, d, bias=False)
        elif score == "concat":
            # W_a [h; hbar] = W_a_query h + W_a_memory hbar
            self.w_a_query = nn.Linear(query_dim, d, bias=False)
            self.w_a_memory = nn.Linear(memory_dim, d, bias=False)
            self.v_a = nn.Parameter(torch.randn(d) * d**-0.5)
        elif score == "eatt":
            self.q_proj = nn.Linear(query_dim, d, bias=False)
            self.k_proj = nn.Linear(memory_dim, d, bias=False)
        if kind == "local-p":
            self.w_p = nn.Linear(query_dim, d, bias=False)
            self.v_p = nn.Linear(d, 1, bias=False)
        if kind == "flexible":
            self.w_g = nn.Linear(query_dim + self.g_input_dim, d, bias=False)
            self.v_g = nn.Linear(d, 1, bias=True)  # its bias is b_g
        #: set by the owner to force g(t) (tests, analysis); None = computed (Eq. 8)
        self.fixed_strength: float | None = None
        self.reset_counters()

    def reset_counters(self) -> None:
        """Zero the eval-mode vision-span counters (positions scored, row-steps decoded)."""
        self.total_scored = 0
        self.total_row_steps = 0

    def extra_repr(self) -> str:
        extra = ""
        if self.kind == "local-p":
            extra = f", gaussian={self.gaussian}, round_p={self.round_p}"
        elif self.kind == "flexible":
            extra = f", round_p={self.round_p}, g_levels={self.g_levels}"
        return (
            f"kind={self.kind}, score={self.score}, query_dim={self.query_dim}, "
            f"memory_dim={self.memory_dim}, D={self.window_d}, sigma={self.sigma}, tau={self.tau}"
            + extra
        )

    # -- pieces --------------------------------------------------------------------------------
    def _keys(self, memory: Tensor) -> Tensor:
        if self.score == "dot":
            return memory
        if self.score == "general":
            return self.w_a(memory)
        if self.score == "concat":
            return self.w_a_memory(memory)
        return self.k_proj(F.binarize(memory, self.binarize_tau))

    def _queries(self, h: Tensor) -> Tensor:
        if self.score in ("dot", "general"):
            return h
        if self.score == "concat":
            return self.w_a_query(h)
        return self.q_proj(F.binarize(h, self.binarize_tau))

    def _scores(self, q: Tensor, keys: Tensor) -> Tensor:
        v_a = self.v_a if self.score == "concat" else None
        return luong_scores(self.score, q, keys, v_a, self.scale)

    def predicted_position(self, h: Tensor, lengths: Tensor) -> Tensor:
        """local-p's p_t = S sigmoid(v_p^T tanh(W_p h_t)) (Luong Eq. 9), in [0, S]."""
        s = lengths.to(h.dtype).view(-1, *([1] * (h.dim() - 2)))
        return s * torch.sigmoid(self.v_p(torch.tanh(self.w_p(h)))).squeeze(-1)

    def strength(self, h: Tensor, g_input: Tensor | None = None) -> Tensor:
        """Flexible's g(t) = sigmoid(v_g^T tanh(W_g [h; i_t]) + b_g) (Eq. 8), shape h[..., 0]."""
        if self.fixed_strength is not None:
            return h.new_full(h.shape[:-1], float(self.fixed_strength))
        if self.g_input_dim:
            if g_input is None:
                raise ValueError("this Flexible attention was built with g_input_dim; pass g_input")
            h = torch.cat([h, g_input], dim=-1)
        return torch.sigmoid(self.v_g(torch.tanh(self.w_g(h)))).squeeze(-1)

    def _gaussian_center(self, p_t: Tensor, lengths: Tensor) -> Tensor:
        """The Gaussian's centre: the real p_t, or the window centre with round_p."""
        return rounded_center(p_t, lengths) if self.round_p else p_t

    # -- decoding state ------------------------------------------------------------------------
    def init_state(self, memory: Tensor, padding: Tensor, counts: Tensor | None = None) -> dict:
        """Per-sentence state: projected keys, the memory (pad rows zeroed), lengths, counters."""
        if memory.dim() != 3 or padding.shape != memory.shape[:2]:
            raise ValueError(
                f"memory must be (B, S, D) and padding (B, S), got {tuple(memory.shape)} "
                f"and {tuple(padding.shape)}"
            )
        batch = memory.shape[0]
        if counts is not None:
            if counts.shape != padding.shape:
                raise ValueError(f"counts must be (B, S) like padding, got {tuple(counts.shape)}")
            padding = padding | counts.eq(0)
        lengths = (~padding).sum(1).clamp(min=1)
        state = {
            "keys": self._keys(memory),
            "memory": memory,
            "padding": padding,
            "lengths": lengths,
            "p_prev": memory.new_zeros(batch),  # p_0 = 0: decoding starts at the source start
            "scored": torch.zeros(batch, dtype=torch.long, device=memory.device),
            "g_sum": memory.new_zeros(batch),
            "t": 0,
            "steps": 0,
        }
        if counts is not None:
            # multiplicities for the counted softmax (count 0, an empty slot, is padding too)
            state["counts"] = counts
        return state

    reorder_state = staticmethod(reorder_state)
    vision_span = staticmethod(vision_span)
    mean_strength = staticmethod(mean_strength)

    def _window(
        self, state: dict, g: Tensor | None, p_t: Tensor | None
    ) -> tuple[Tensor, Tensor] | None:
        """[start, end) of the positions to score at this step, None = the whole source."""
        lengths = state["lengths"]
        if self.kind == "local-m":
            center = torch.full_like(lengths, state["t"])
            return local_window(center, self.window_d, lengths)
        if self.kind == "local-p":
            return local_window(torch.round(p_t.detach()).to(torch.long), self.window_d, lengths)
        tau = self.train_tau if self.training else self.tau
        if self.kind == "flexible" and tau is not None:  # the window's edges carry no gradient
            return flexible_window(state["p_prev"].detach(), g.detach(), self.sigma, tau, lengths)
        return None

    def step(self, h: Tensor, state: dict, g_input: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """One decoding step t: (context (B, Dm), weights (B, S)); advances ``state``."""
        batch, seq = state["padding"].shape
        if h.dim() != 2 or h.shape[0] != batch:
            raise ValueError(f"h must be ({batch}, {self.query_dim}), got {tuple(h.shape)}")
        g = self.strength(h, g_input) if self.kind == "flexible" else None
        if g is not None and self.g_levels:
            g = strength_levels(g, self.g_levels)
        p_t = self.predicted_position(h, state["lengths"]) if self.kind == "local-p" else None
        window = self._window(state, g, p_t)
        counts = state.get("counts")
        if window is None:
            keys, values = state["keys"], state["memory"]
            positions = torch.arange(seq, device=h.device).expand(batch, seq)
            valid = ~state["padding"]
        else:
            start, end = window
            keys, positions, valid = gather_window(state["keys"], start, end)
            values = gather_window(state["memory"], start, end)[0]
            valid = valid & ~state["padding"].gather(1, positions)
            counts = None if counts is None else counts.gather(1, positions)
        scores = self._scores(self._queries(h)[:, None, :], keys)[:, 0]
        if g is not None:
            scores = scores - flexible_penalty(
                positions, state["p_prev"][:, None], g[:, None], self.sigma
            )
        center = None if p_t is None else self._gaussian_center(p_t, state["lengths"])
        if center is not None and self.gaussian == "inside":
            scores = scores - gaussian_penalty(positions, center[:, None], self.sigma)
        scores = scores.masked_fill(~valid, float("-inf"))
        a = _softmax(scores, valid, counts)
        if center is not None and self.gaussian == "after":
            a = a * gaussian_weight(positions, center[:, None], self.sigma)
        # masked slots have a = 0 and finite values; where() keeps 0 * inf out of the sum
        values = torch.where(valid[..., None], values, values.new_zeros(()))
        context = torch.einsum("bw,bwd->bd", a, values)
        weights = a.new_zeros(batch, seq).scatter_add(1, positions, a)
        if self.kind == "flexible":
            focus = (a * positions.to(a.dtype)).sum(-1)  # Eq. 4
            state["p_prev"] = rounded_center(focus, state["lengths"]) if self.round_p else focus
            state["g_sum"] = state["g_sum"] + g
            if self.training:  # Eq. 9 per sentence (mean_strength): g(t) of every step
                state.setdefault("g_steps", []).append(g)
        state["scored"] = state["scored"] + valid.sum(-1)
        if not self.training:
            self.total_scored += int(valid.sum())
            self.total_row_steps += batch
        state["t"] += 1
        state["steps"] += 1
        return context, weights

    def attend_all(
        self, h: Tensor, state: dict, g_input: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """All target positions t .. t+T-1 of h (B, T, Dq) at once: (context (B, T, Dm),
        weights (B, T, S)). Global, local-m and local-p compute the window as a mask over the
        full source (training; same numbers as :meth:`step`); Flexible needs p_{t-1}, so it
        runs :meth:`step` over t, which is exact."""
        if self.kind == "flexible":
            outs = [
                self.step(h[:, i], state, None if g_input is None else g_input[:, i])
                for i in range(h.shape[1])
            ]
            return torch.stack([o[0] for o in outs], 1), torch.stack([o[1] for o in outs], 1)
        batch, steps = h.shape[:2]
        seq = state["padding"].shape[1]
        lengths = state["lengths"]
        scores = self._scores(self._queries(h), state["keys"])
        positions = torch.arange(seq, device=h.device)
        valid = (~state["padding"])[:, None, :].expand(batch, steps, seq)
        if self.kind in ("local-m", "local-p"):
            if self.kind == "local-m":
                t = torch.arange(state["t"], state["t"] + steps, device=h.device)
                center = t[None, :].expand(batch, steps)
            else:
                p_t = self.predicted_position(h, lengths)
                center = torch.round(p_t.detach()).to(torch.long)
            start, end = local_window(center, self.window_d, lengths[:, None])
            inside = (positions >= start[..., None]) & (positions < end[..., None])
            valid = valid & inside
        if self.kind == "local-p":
            center = self._gaussian_center(p_t, lengths[:, None])[..., None]
            if self.gaussian == "inside":
                scores = scores - gaussian_penalty(positions, center, self.sigma)
        scores = scores.masked_fill(~valid, float("-inf"))
        counts = state.get("counts")
        a = _softmax(scores, valid, None if counts is None else counts[:, None, :])
        if self.kind == "local-p" and self.gaussian == "after":
            a = a * gaussian_weight(positions, center, self.sigma)
        values = state["memory"].masked_fill(state["padding"][..., None], 0.0)
        context = torch.matmul(a, values)
        state["scored"] = state["scored"] + valid.sum((1, 2))
        state["t"] += steps
        state["steps"] += steps
        return context, a


def cross_attention(
    cfg: ModelConfig, query_dim: int, memory_dim: int, g_input_dim: int = 0
) -> WindowedAttention:
    """The cross-attention that ``cfg`` describes: its windowed cross kind, or ``global`` when
    the cross kind is not a windowed one (an LSTM model with the default config)."""
    kind = cfg.attention_of("cross")
    return WindowedAttention(
        kind if kind in WINDOW_KINDS else "global",
        cfg.window_score,
        query_dim,
        memory_dim,
        window_d=cfg.window_d,
        sigma=cfg.window_sigma,
        tau=cfg.flexible_tau,
        train_tau=cfg.flexible_train_tau,
        binarize_tau=cfg.tau,
        g_input_dim=g_input_dim,
        gaussian=cfg.window_gaussian or "after",
        round_p=bool(cfg.window_p_round),
        g_levels=cfg.flexible_g_levels if cfg.window_g_round else 0,
    )
