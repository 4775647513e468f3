"""The model's cross-attention on the window unit: kinds quant-global, quant-local-m,
quant-local-p, quant-flexible.

:class:`QuantWindowedAttention` is the cross-attention of a Transformer decoder layer whose
eval forward, at every decoding step, is the window unit's golden model (eatt.quant.window.
WindowGolden) bit for bit; docs/window.md ("Models on the unit") gives the decisions. Per
sentence (the encoder side, once):

    memory -> QuantIdentity <in_bits, in_frac>          (codes Y)
    K = (f(Y) W_K) >> q_shift   (E-ATT: Eq. 4 selection)   V = (Y W_V) >> v_shift
    (WindowGolden.project_memory: the core's projections, no multiplier in K for E-ATT)

Per decoding step t, the unit's inputs:

    x = the decoder state h on <in_bits, in_frac>;  w = D;  length = the source length
    p = local-m: min(t, length - 1) (Luong's p_t = t)
        local-p: round(p_t) clipped to the source, p_t = S sigmoid(v_p^T tanh(W_p h)) (Luong
                 Eq. 9; a float predictor outside the unit, as Flexible's g(t) is)
        global: 0, with D = max_len - 1: the window is the whole memory
        flexible: the unit's focus F of the previous step (Flexible Eq. 4, p_0 = 0), with
                 D = max_len - 1, g = round(g(t) levels) / levels from the float strength
                 predictor (Eq. 8, outside the unit) and w = ceil(sigma sqrt(2 tau / g)) - 1
                 clipped to [0, D] (the window of Sec. 3.1 around an integer p; tau = inf or
                 g = 0: w = D)
    position term: local-p's Gaussian inside the softmax from the unit's table (the Flexible
                   Attention Eq. 7 form), Flexible's g (s - p)^2 / (2 sigma^2) from the
                   unit's table (Eq. 5-7), none for local-m and global
    counts: 1, or with L0Drop (quant-global only) Algorithm 1's compacted memory: the kept
            rows, then one zero row counting the pruned ones, length = kept + 1; the unit's
            counted softmax, and rows read per step = the kept rows + 1

and the context is the unit's O (V's grid); the decoder layer's output projection follows outside
the unit. In training (and with ``arithmetic = "surrogate"``) a fake-quant surrogate carries the
gradient: the same projections with straight-through roundings, a float softmax of the same
logits with the Gaussian ``(s - p)^2 / (2 sigma^2)`` at the rounded p (gradient of the real p_t,
eatt.model.windowed.rounded_center) and the output rounded to V's grid. It is the float local-p
with ``window_gaussian: inside`` and ``window_p_round: true`` on the unit's grids. Flexible's
surrogate runs step by step (p_{t-1} is the previous step's focus): the focus sum_s a(s) s and
g(t)'s level rounded straight-through, the penalty and window of the unit.

The decoding-state interface is eatt.model.windowed.WindowedAttention's (init_state, step,
attend_all, reorder_state, vision_span, the eval counters), so the decoder runs either.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from brevitas.nn import QuantIdentity, QuantLinear
from torch import Tensor, nn

from eatt.config import WindowConfig
from eatt.mechanisms import mechanism_of
from eatt.model.windowed import (
    WindowedAttention,
    gaussian_penalty,
    local_window,
    mean_strength,
    reorder_state,
    rounded_center,
    strength_levels,
    vision_span,
)
from eatt.quant.golden import CoreWeights
from eatt.quant.modules import (
    Binarize,
    fixed_point_act_quant,
    fixed_point_weight_quant,
    requantize_ste,
    round_half_up_ste,
)
from eatt.quant.window import WindowGolden, derive_window_formats, window_sigma

#: Luong's and Flexible's forms the unit computes (the model kind is quant-<form>)
FORMS = ("global", "local-m", "local-p", "flexible")


def flexible_half_width(level: np.ndarray, levels: int, sigma: float, tau, d: int) -> np.ndarray:
    """The unit's w for Flexible's window (Sec. 3.1): the positions whose penalty
    ``g (s - p)^2 / (2 sigma^2)`` is below tau around the integer p, ``|s - p| < sigma sqrt(2
    tau / g)``, so ``w = ceil(r) - 1`` clipped to [0, D]; g = level / levels. tau None
    (infinity) or level 0 (g = 0): w = D, the whole memory."""
    level = np.asarray(level, dtype=np.int64)
    if tau is None:
        return np.full(level.shape, d, dtype=np.int64)
    with np.errstate(divide="ignore"):
        radius = sigma * np.sqrt(2.0 * tau * levels / level.astype(np.float64))
    w = np.where(level > 0, np.ceil(np.minimum(radius, d + 1.0)) - 1, d)
    return np.clip(w, 0, d).astype(np.int64)


__all__ = ["FORMS", "QuantWindowedAttention", "flexible_half_width", "unit_weights"]

_PROJECTIONS = (("wq", "q_proj"), ("wk", "k_proj"), ("wv", "v_proj"))


class QuantWindowedAttention(nn.Module):
    """The cross-attention of kind quant-global / quant-local-m / quant-local-p /
    quant-flexible: one decoder layer's in the Transformer, the attention of the LSTM
    encoder-decoder.

    Args:
        cfg: the unit (eatt.model.config.ModelConfig.quant_window): len_k = max_len rows,
            one head of the model's width, the quant_* formats.
        kind: "global", "local-m", "local-p" or "flexible" (the paper's form; ``.kind`` is
            then the config's name, quant-global ... quant-flexible, and ``.form`` this).
        tau: Flexible's test-time threshold (Sec. 3.1; None = infinity: w = D).
        g_input_dim: size of the extra input i_t of Flexible's g(t) (Eq. 8; the LSTM's).
    """

    def __init__(
        self, cfg: WindowConfig, kind: str, tau: float | None = None, g_input_dim: int = 0
    ) -> None:
        super().__init__()
        if not isinstance(cfg, WindowConfig):
            raise ValueError(f"cfg: expected a WindowConfig, got {type(cfg).__name__}")
        if kind not in FORMS:
            raise ValueError(f"kind: {', '.join(FORMS)} on the window unit, got {kind!r}")
        if kind in ("global", "flexible") and cfg.window_d < cfg.len_k - 1:
            raise ValueError(f"window_d: {kind} needs D = len_k - 1 = {cfg.len_k - 1}")
        want = {"local-p": "gaussian", "flexible": "flexible"}.get(kind, "none")
        if cfg.position != want:
            raise ValueError(f"position: {kind} on the unit needs {want}, got {cfg.position}")
        #: the model config's name of the kind (quant-local-p), and Luong's form (local-p)
        self.kind, self.form = f"quant-{kind}", kind
        self.cfg, self.score = cfg, cfg.window_score
        self.formats = derive_window_formats(cfg)
        self.window_d = cfg.window_d
        self.sigma = window_sigma(cfg)
        self.tau = None if tau is None or math.isinf(tau) else float(tau)
        if self.tau is not None and not self.tau > 0:
            raise ValueError(f"tau must be > 0 (None = infinity), got {tau}")
        self.g_input_dim = int(g_input_dim)
        self.fixed_strength: float | None = None
        dim = cfg.dim
        self.input_quant = QuantIdentity(
            act_quant=fixed_point_act_quant(cfg.in_bits, cfg.in_frac), return_quant_tensor=False
        )
        self.binarize = Binarize(cfg.tau) if mechanism_of(self.score).binarized else None
        weight_quant = fixed_point_weight_quant(cfg.weight_bits, cfg.weight_frac)
        for _, proj in _PROJECTIONS:
            setattr(self, proj, QuantLinear(dim, dim, bias=False, weight_quant=weight_quant))
        if self.form == "local-p":  # Luong Eq. 9's predictor: float, outside the unit
            self.w_p = nn.Linear(dim, dim, bias=False)
            self.v_p = nn.Linear(dim, 1, bias=False)
        if self.form == "flexible":  # Flexible Eq. 8's g(t): float, outside the unit
            self.w_g = nn.Linear(dim + self.g_input_dim, dim, bias=False)
            self.v_g = nn.Linear(dim, 1, bias=True)  # its bias is b_g
        #: eval: "hardware" (the unit's golden model; "exported" is the same: the unit's
        #: memory always has max_len rows) or "surrogate" (the training pipeline)
        self.arithmetic = "hardware"
        self._golden: tuple[tuple, WindowGolden] | None = None
        #: called by every hardware step with the unit's inputs and output (integer arrays:
        #: x, p, w, keys, values, counts, length, g, o); eatt capture records them
        self.probe = None
        self.reset_counters()

    def reset_counters(self) -> None:
        """Zero the eval-mode vision-span counters (positions scored, row-steps decoded)."""
        self.total_scored = 0
        self.total_row_steps = 0

    def extra_repr(self) -> str:
        c = self.cfg
        return (
            f"kind={self.kind}, score={self.score}, dim={c.dim}, len_k={c.len_k}, "
            f"D={c.window_d}, sigma={self.sigma}, position={c.position}"
        )

    reorder_state = staticmethod(reorder_state)
    vision_span = staticmethod(vision_span)
    mean_strength = staticmethod(mean_strength)

    # -- the unit ---------------------------------------------------------------------------
    def weight_codes(self) -> dict[str, Tensor]:
        """{"wq", "wk", "wv"}: int64 (dim, dim) codes in input -> output order (Q = X W)."""
        return {
            name: getattr(self, proj).quant_weight().int().to(torch.int64).T.contiguous()
            for name, proj in _PROJECTIONS
        }

    def golden(self) -> WindowGolden:
        """The unit's golden model with this module's weights (W_O is outside: zero); kept
        until a weight changes (an optimizer step or a load bumps the tensors' versions)."""
        weights = [getattr(self, p).weight for _, p in _PROJECTIONS]
        key = tuple((id(w), w._version) for w in weights)
        if self._golden is None or self._golden[0] != key:
            w = {k: v.detach().cpu().numpy() for k, v in self.weight_codes().items()}
            codes = CoreWeights(w["wq"], w["wk"], w["wv"], np.zeros_like(w["wq"]))
            self._golden = (key, WindowGolden(self.cfg, codes))
        return self._golden[1]

    def _hardware(self) -> bool:
        return not self.training and self.arithmetic != "surrogate"

    def _codes(self, t: Tensor) -> Tensor:
        return torch.round(self.input_quant(t).detach() * 2.0**self.cfg.in_frac).to(torch.int64)

    def _select(self, tq: Tensor) -> Tensor:
        return tq if self.binarize is None else self.binarize(tq)

    #: local-p's p_t = S sigmoid(v_p^T tanh(W_p h_t)) (Luong Eq. 9): the float model's code
    predicted_position = WindowedAttention.predicted_position
    #: Flexible's g(t) = sigmoid(v_g^T tanh(W_g [h; i_t]) + b_g) (Eq. 8): the float model's code
    strength = WindowedAttention.strength

    def _level(self, h: Tensor, g_input: Tensor | None) -> Tensor:
        """g(t) rounded to the unit's level grid, g = l / g_levels, straight-through (B,)."""
        return strength_levels(self.strength(h, g_input), self.cfg.g_levels)

    def _center(self, h: Tensor, state: dict, steps: int) -> Tensor:
        """The unit's p for ``steps`` steps from state["t"] (B, steps): real-valued with the
        gradient of p_t (local-p, straight-through), integer-valued."""
        lengths = state["lengths"][:, None]
        if self.form == "global":
            return torch.zeros(lengths.shape[0], steps, dtype=h.dtype, device=lengths.device)
        if self.form == "local-m":
            t = torch.arange(state["t"], state["t"] + steps, device=lengths.device)
            return torch.minimum(t[None, :], lengths - 1).to(h.dtype)
        p_t = self.predicted_position(h, state["lengths"])
        return rounded_center(p_t.view(-1, steps), lengths)

    # -- decoding state -----------------------------------------------------------------------
    def init_state(self, memory: Tensor, padding: Tensor, counts: Tensor | None = None) -> dict:
        """Per sentence: the memory's K and V (codes for the unit, or the surrogate's reals);
        ``counts`` (B, S): L0Drop's compacted memory (eatt.model.l0drop.compact; count 0 is
        padding), quant-global only."""
        if memory.dim() != 3 or padding.shape != memory.shape[:2]:
            raise ValueError(
                f"memory must be (B, S, D) and padding (B, S), got {tuple(memory.shape)} "
                f"and {tuple(padding.shape)}"
            )
        if counts is not None:
            if self.form != "global":
                raise ValueError(f"{self.kind}: L0Drop's compacted memory renumbers positions")
            if counts.shape != padding.shape:
                raise ValueError(f"counts must be (B, S) like padding, got {tuple(counts.shape)}")
            if bool((counts > self.formats.count_max).any()):
                raise ValueError(
                    f"counts: {int(counts.max())} pruned rows do not fit the unit's "
                    f"{self.cfg.count_bits}-bit count"
                )
            padding = padding | counts.eq(0)
        batch, seq = padding.shape
        if seq > self.cfg.len_k:
            raise ValueError(f"memory of {seq} rows: the unit holds max_len = {self.cfg.len_k}")
        lengths = (~padding).sum(1)
        suffix = torch.arange(seq, device=padding.device)[None, :] >= lengths[:, None]
        if not torch.equal(suffix, padding) or bool((lengths == 0).any()):
            raise ValueError(
                "padding: the unit takes a valid length (padding at the end, >= 1 row)"
            )
        state = {
            "padding": padding,
            "lengths": lengths,
            "scored": torch.zeros(batch, dtype=torch.long, device=memory.device),
            "t": 0,
            "steps": 0,
        }
        if self.form == "flexible":  # p_0 = 0: decoding starts at the source start
            state["p_prev"] = memory.new_zeros(batch)
            state["g_sum"] = memory.new_zeros(batch)
        if counts is not None:  # padding rows get count 1, as the unit's unused rows
            state["counts"] = counts.masked_fill(padding, 1).to(torch.int64)
        f = self.formats.core
        if self._hardware():
            keys, values = self.golden().project_memory(self._codes(memory).cpu().numpy())
            state["key_codes"] = torch.from_numpy(keys).to(memory.device)
            state["value_codes"] = torch.from_numpy(values).to(memory.device)
        else:
            mq = self.input_quant(memory)
            state["keys"] = requantize_ste(self.k_proj(self._select(mq)), f.q_lsb)
            state["values"] = requantize_ste(self.v_proj(mq), f.v_lsb)
        return state

    def step(self, h: Tensor, state: dict, g_input: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """One decoding step: (context (B, dim), weights (B, S)); advances ``state``."""
        if h.dim() != 2 or h.shape[0] != state["padding"].shape[0]:
            raise ValueError(
                f"h must be ({state['padding'].shape[0]}, {self.cfg.dim}), got {tuple(h.shape)}"
            )
        if self.form == "flexible":
            context, weights = self._flexible_step(h, state, g_input)
            state["t"] += 1
            state["steps"] += 1
            return context, weights
        if "key_codes" in state:
            context, weights = self._unit_step(h, state)
        else:
            context, weights = self._surrogate(h[:, None, :], state)
            context, weights = context[:, 0], weights[:, 0]
        self._advance(state, h, 1)
        return context, weights

    def attend_all(
        self, h: Tensor, state: dict, g_input: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """All target positions of h (B, T, dim): the surrogate at once, or the unit step by
        step (the same numbers as :meth:`step`); Flexible always step by step (its p_{t-1})."""
        if "key_codes" in state or self.form == "flexible":
            outs = [
                self.step(h[:, i], state, None if g_input is None else g_input[:, i])
                for i in range(h.shape[1])
            ]
            return torch.stack([o[0] for o in outs], 1), torch.stack([o[1] for o in outs], 1)
        context, weights = self._surrogate(h, state)
        self._advance(state, h, h.shape[1])
        return context, weights

    def _advance(self, state: dict, h: Tensor, steps: int) -> None:
        """Count the rows the windows read (vision span) and move t on."""
        center = self._center(h.detach().reshape(h.shape[0], -1, h.shape[-1]), state, steps)
        start, end = local_window(center.long(), self.window_d, state["lengths"][:, None])
        rows = (end - start).sum(1)
        state["scored"] = state["scored"] + rows
        if not self.training:
            self.total_scored += int(rows.sum())
            self.total_row_steps += h.shape[0] * steps
        state["t"] += steps
        state["steps"] += steps

    def _flexible_step(
        self, h: Tensor, state: dict, g_input: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """One Flexible step, the unit's (its focus F is the next p) or the surrogate's."""
        cfg = self.cfg
        g = self._level(h, g_input)  # (B,), on the level grid
        level = torch.round(g.detach() * cfg.g_levels).to(torch.int64)
        w = flexible_half_width(
            level.cpu().numpy(), cfg.g_levels, self.sigma, None if self.training else self.tau,
            cfg.window_d,
        )  # fmt: skip
        if "key_codes" in state:
            context, weights, focus = self._unit_step(h, state, level, w)
            state["p_prev"] = focus.to(state["p_prev"].device, state["p_prev"].dtype)
        else:
            context, weights, focus = self._flexible_surrogate(h, state, g, w)
            state["p_prev"] = focus
        state["g_sum"] = state["g_sum"] + g
        if self.training:  # Eq. 9 per sentence (mean_strength): g(t) of every step
            state.setdefault("g_steps", []).append(g)
        return context, weights

    def _flexible_surrogate(
        self, h: Tensor, state: dict, g: Tensor, w: np.ndarray
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The fake-quant twin of one Flexible step: (context, weights, next p). The centre is
        the previous focus rounded (straight-through), the penalty g (s - p)^2 / (2 sigma^2)
        with g on the level grid, the window [p - w, p + w] of the unit."""
        cfg, f = self.cfg, self.formats.core
        seq = state["padding"].shape[1]
        q = requantize_ste(self.q_proj(self._select(self.input_quant(h))), f.q_lsb)
        keys, values = state["keys"], state["values"]
        scale = 1.0 / math.sqrt(cfg.d_head)
        if mechanism_of(self.score).binarized:
            s = -torch.cdist(q[:, None, :], keys, p=1)[:, 0] * scale
        else:
            s = torch.einsum("bd,bsd->bs", q, keys) * scale
        p = state["p_prev"]
        pos = torch.arange(seq, device=h.device)
        s = s - g[:, None] * (pos[None, :] - p[:, None]).square() / (2.0 * self.sigma**2)
        half = torch.from_numpy(w).to(h.device)[:, None]
        centre = torch.round(p.detach()).long()[:, None]
        mask = ~state["padding"] & ((pos[None, :] - centre).abs() <= half)
        a = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
        o = torch.einsum("bs,bsd->bd", a, values)
        mean = (a * pos.to(a.dtype)).sum(-1)  # Flexible Eq. 4
        focus = rounded_center(mean, state["lengths"])  # the unit's integer F, straight-through
        self._count_rows(state, mask.sum(-1), h.shape[0])
        return round_half_up_ste(o / f.v_lsb) * f.v_lsb, a, focus

    def _count_rows(self, state: dict, rows: Tensor, steps: int) -> None:
        """The rows the windows read (the vision span; the unit's cycles per step)."""
        state["scored"] = state["scored"] + rows
        if not self.training:
            self.total_scored += int(rows.sum())
            self.total_row_steps += steps

    def _unit_step(
        self, h: Tensor, state: dict, level: Tensor | None = None, w: np.ndarray | None = None
    ):
        """The window unit's golden model on this step's integer inputs: (context, weights),
        and for Flexible (``level`` and ``w`` given) the unit's focus too, the next p."""
        cfg, f = self.cfg, self.formats.core
        batch, seq = state["padding"].shape
        flexible = level is not None
        with torch.no_grad():
            if flexible:
                p = state["p_prev"].to(torch.int64).cpu().numpy()
            else:
                p = self._center(h[:, None, :], state, 1)[:, 0].to(torch.int64).cpu().numpy()
            pad = cfg.len_k - seq
            keys = nn.functional.pad(state["key_codes"], (0, 0, 0, pad)).cpu().numpy()
            values = nn.functional.pad(state["value_codes"], (0, 0, 0, pad)).cpu().numpy()
            inputs = {
                "x": self._codes(h).cpu().numpy(),
                "p": p,
                "w": w if flexible else np.full(batch, cfg.window_d, dtype=np.int64),
                "keys": keys,
                "values": values,
                "counts": self._unit_counts(state, batch),
                "length": state["lengths"].cpu().numpy().astype(np.int64),
                "g": (level.cpu().numpy() if flexible else np.full(batch, cfg.g_levels, np.int64)),
            }
            out = self.golden().forward(**inputs, intermediates=True)
            if self.probe is not None:
                self.probe(inputs, out["attn"])
            e = torch.from_numpy(out["exp"].sum(1)[:, :seq]).to(torch.float64)
            weights = (e / e.sum(-1, keepdim=True)).to(h.device, h.dtype)
            o = torch.from_numpy(out["attn"]).to(torch.float64) * f.v_lsb
        if flexible:
            self._count_rows(state, torch.from_numpy(out["mask"].sum(-1)).to(h.device), batch)
            return o.to(h.device, h.dtype), weights, torch.from_numpy(out["focus"][:, 0])
        return o.to(h.device, h.dtype), weights

    def _unit_counts(self, state: dict, batch: int) -> np.ndarray:
        """The unit's counts (B, len_k): the compacted memory's, 1 elsewhere."""
        out = np.ones((batch, self.cfg.len_k), dtype=np.int64)
        if "counts" in state:
            counts = state["counts"].cpu().numpy()
            out[:, : counts.shape[1]] = counts
        return out

    def _surrogate(self, h: Tensor, state: dict) -> tuple[Tensor, Tensor]:
        """The fake-quant twin of ``steps`` steps (B, T, dim) at once: (context, weights)."""
        cfg, f = self.cfg, self.formats.core
        batch, steps, _ = h.shape
        seq = state["padding"].shape[1]
        q = requantize_ste(self.q_proj(self._select(self.input_quant(h))), f.q_lsb)
        keys, values = state["keys"], state["values"]
        scale = 1.0 / math.sqrt(cfg.d_head)
        if mechanism_of(self.score).binarized:
            s = -torch.cdist(q, keys, p=1) * scale
        else:
            s = torch.matmul(q, keys.transpose(-1, -2)) * scale
        center = self._center(h, state, steps)  # (B, T)
        lengths = state["lengths"][:, None]
        start, end = local_window(center.detach().long(), self.window_d, lengths)
        pos = torch.arange(seq, device=h.device)
        mask = (pos >= start[..., None]) & (pos < end[..., None])
        if self.form == "local-p" and self.sigma > 0:  # D = 0: the centre alone, no penalty
            s = s - gaussian_penalty(pos, center[..., None], self.sigma)
        if "counts" in state:  # Algorithm 1's counted softmax: c exp(e) / sum c exp(e)
            s = s + torch.log(state["counts"].to(s.dtype))[:, None, :]
        a = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
        o = torch.matmul(a, values)
        return round_half_up_ste(o / f.v_lsb) * f.v_lsb, a


def unit_weights(module: QuantWindowedAttention) -> CoreWeights:
    """The unit's integer weights (W_Q for the unit, W_K and W_V for its memory; W_O zero)."""
    if not isinstance(module, QuantWindowedAttention):
        raise ValueError(f"expected a QuantWindowedAttention, got {type(module).__name__}")
    return module.golden().weights
