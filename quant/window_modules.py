"""The windowed cross-attention unit as a Brevitas QAT module (kind window, docs/quant.md).

:class:`QuantWindowAttention` is the trainable twin of eatt.quant.window.WindowGolden, built
like quant/modules.py's QuantAttentionCore:

    x      -> QuantIdentity  <in_bits, in_frac>, constant power-of-two scale (Brevitas)
    E-ATT  -> Binarize        1[x > tau] (E-ATT Eq. 4), Gaussian surrogate gradient (Eq. 5)
           -> QuantLinear     W_Q: narrow-range <weight_bits, weight_frac>, constant scale
    the memory (keys, values: already projected, on the Q/K and V grids), the window
    [max(p - w, 0), min(p + w, length - 1)] (Luong et al. 2015 local-p, Eq. 9), the position
    term from the table (local-p Eq. 10 / Flexible Attention Eq. 5-7), the counted softmax
    (L0Drop Algorithm 1) and the core's reciprocal and rounding.

The forward returns the hardware's output, computed by the golden model on the integer codes:
``module(x, p, w, keys, values, counts, length, g) == WindowGolden(cfg, integer_weights(module))
.forward(codes...) * v_lsb`` bit for bit. With gradients enabled a fake-quant surrogate (float
softmax of the same logits plus log counts, straight-through floors) runs beside it and carries
the gradient (a straight-through estimator around the whole unit), as in QuantAttentionCore.

    QuantWindowAttention(cfg)                  a fresh unit (PyTorch's default Linear init)
    from_integer(cfg, weights)                 a unit holding given integer W_Q (CoreWeights)
    integer_weights(module) -> CoreWeights     W_Q codes (wk, wv, wo zero: not in the unit)
"""

from __future__ import annotations

import math

import numpy as np
import torch
from brevitas.nn import QuantIdentity, QuantLinear
from torch import Tensor, nn

from eatt.config import CoreConfig, WindowConfig
from eatt.mechanisms import mechanism_of
from eatt.quant.golden import CoreWeights
from eatt.quant.modules import (
    Binarize,
    fixed_point_act_quant,
    fixed_point_weight_quant,
    hardware_value,
    requantize_ste,
    round_half_up_ste,
)
from eatt.quant.window import WindowGolden, derive_window_formats, has_focus, penalty_table

__all__ = ["QuantWindowAttention", "from_integer", "integer_weights", "window_integer_forward"]


def window_integer_forward(
    cfg: CoreConfig,
    wq: Tensor,
    x: Tensor,
    p: Tensor,
    w: Tensor,
    keys: Tensor,
    values: Tensor,
    counts: Tensor,
    length: Tensor,
    g: Tensor,
    with_focus: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """The golden model itself (WindowGolden.forward) on int64 tensors: codes in, O codes
    (n, dim) out, and with ``with_focus`` (position flexible) the focus rows F (n, heads).
    Not on the gradient path: numpy on the CPU, the results CPU tensors."""
    wq_codes = wq.detach().cpu().numpy().astype(np.int64)
    zero = np.zeros_like(wq_codes)
    golden = WindowGolden(cfg, CoreWeights(wq_codes, zero, zero, zero))
    step = (t.detach().cpu().numpy() for t in (x, p, w, keys, values, counts, length, g))
    out = golden.forward(*step, with_focus=with_focus)
    if with_focus:
        return tuple(torch.from_numpy(np.asarray(t)) for t in out)
    return torch.from_numpy(np.asarray(out))


class QuantWindowAttention(nn.Module):
    """One decoding step of the windowed unit as a Brevitas QAT module.

    ``forward(x, p, w, keys, values, counts=None, length=None, g=None)``: x ``(batch, dim)``
    real; keys ``(batch, len_k, dim)`` real on the Q/K grid (codes * q_lsb), values the same on
    the V grid (codes * v_lsb); p, w, length, g ``(batch,)`` and counts ``(batch, len_k)``
    integer tensors (None: counts 1, length len_k, g = g_levels). Returns O ``(batch, dim)``,
    the hardware's codes * v_lsb in x's dtype. Off-grid or out-of-range inputs: ValueError.

    ``with_focus=True`` (position flexible only): returns (O, F), F ``(batch, heads)`` int64 on
    x's device, the unit's focus rows (Flexible Eq. 4, the next step's p; the golden model's
    step 7, docs/window.md). F is an integer row: it carries no gradient.
    """

    def __init__(self, cfg: CoreConfig) -> None:
        super().__init__()
        if not isinstance(cfg, WindowConfig):
            got = cfg.kind if isinstance(cfg, CoreConfig) else type(cfg).__name__
            raise ValueError(f"kind: QuantWindowAttention needs kind window, got {got}")
        self.cfg = cfg
        self.formats = derive_window_formats(cfg)
        zero = np.zeros((cfg.dim, cfg.dim), dtype=np.int64)
        # checks inputs exactly as the golden model does (its weights are not used)
        self._checker = WindowGolden(cfg, CoreWeights(zero, zero, zero, zero))
        self.input_quant = QuantIdentity(
            act_quant=fixed_point_act_quant(cfg.in_bits, cfg.in_frac), return_quant_tensor=False
        )
        self.binarize = Binarize(cfg.tau) if mechanism_of(cfg).binarized else None
        self.q_proj = QuantLinear(
            cfg.dim,
            cfg.dim,
            bias=False,
            weight_quant=fixed_point_weight_quant(cfg.weight_bits, cfg.weight_frac),
        )
        pen = penalty_table(cfg, self.formats.core)
        self.register_buffer("penalty_table", torch.from_numpy(pen), persistent=False)

    def weight_codes(self) -> Tensor:
        """W_Q codes, int64 (dim, dim) in input -> output order (Q = x W_Q)."""
        return self.q_proj.quant_weight().int().to(torch.int64).T.contiguous()

    def _codes(self, t: Tensor, lsb: float, name: str) -> Tensor:
        scaled = t.detach().to(torch.float64) / lsb
        codes = torch.round(scaled)
        if not torch.equal(codes, scaled):
            raise ValueError(f"inputs: {name} is not on its grid (multiples of {lsb:g})")
        return codes.to(torch.int64)

    def forward(
        self, x, p, w, keys, values, counts=None, length=None, g=None, with_focus: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        cfg, f = self.cfg, self.formats.core
        if with_focus and not has_focus(cfg):
            raise ValueError("with_focus: only a unit with position flexible has a focus output")
        xq = self.input_quant(x)
        cpu = torch.device("cpu")
        with torch.no_grad():
            kc = self._codes(keys, f.q_lsb, "keys").cpu()
            vc = self._codes(values, f.v_lsb, "values").cpu()
            xc = torch.round(xq.detach().to(torch.float64) * 2.0**cfg.in_frac).to(torch.int64)
            step = [
                None if t is None else torch.as_tensor(t).detach().to(cpu).numpy()
                for t in (p, w, counts, length, g)
            ]
            checked = self._checker.check_inputs(
                xc.cpu().numpy(), step[0], step[1], kc.numpy(), vc.numpy(), *step[2:]
            )
            xi, pi, wi, _, _, ci, li, gi = (torch.from_numpy(np.asarray(a)) for a in checked)
            out = window_integer_forward(
                cfg, self.weight_codes(), xi, pi, wi, kc, vc, ci, li, gi, with_focus
            )
            codes, focus = out if with_focus else (out, None)
            hardware = (codes.to(torch.float64) * f.v_lsb).to(x.device, x.dtype)
        if torch.is_grad_enabled():
            surrogate = self.surrogate(xq, pi, wi, keys, values, ci, li, gi)
            hardware = hardware_value(hardware, surrogate.to(x.device))
        return (hardware, focus.to(x.device)) if with_focus else hardware

    def surrogate(self, xq, p, w, keys, values, counts, length, g) -> Tensor:
        """The differentiable fake-quant twin (docs/quant.md): straight-through floors, a float
        softmax of the same logits (score * score_lsb minus the position term) plus log counts
        over the window, and the output rounding."""
        cfg, f = self.cfg, self.formats.core
        n = xq.shape[0]
        xs = self.binarize(xq) if self.binarize is not None else xq
        q = requantize_ste(self.q_proj(xs), f.q_lsb)
        dev = q.device
        qh = q.view(n, cfg.heads, 1, cfg.d_head)
        kh = keys.to(dev, q.dtype).view(n, cfg.len_k, cfg.heads, cfg.d_head).transpose(1, 2)
        vh = values.to(dev, q.dtype).view(n, cfg.len_k, cfg.heads, cfg.d_head).transpose(1, 2)
        scale = 1.0 / math.sqrt(cfg.d_head)
        s = mechanism_of(cfg).scores_real(qh, kh).squeeze(-2) * scale  # (n, heads, len_k)
        p, w, length, g, counts = (t.to(dev) for t in (p, w, length, g, counts))
        pos = torch.arange(cfg.len_k, device=dev).unsqueeze(0)
        lo = torch.clamp(p - w, min=0).unsqueeze(1)
        hi = torch.minimum(p + w, length - 1).unsqueeze(1)
        mask = (pos >= lo) & (pos <= hi)
        dist = torch.clamp((pos - p.unsqueeze(1)).abs(), max=cfg.window_d)
        level = g if cfg.position == "flexible" else torch.zeros_like(g)
        pen = self.penalty_table.to(dev)[level.unsqueeze(1), dist].to(q.dtype) * f.score_lsb
        logits = s - pen.unsqueeze(1) + torch.log(counts.to(q.dtype)).unsqueeze(1)
        logits = logits.masked_fill(~mask.unsqueeze(1), float("-inf"))
        a = torch.softmax(logits, dim=-1)
        o = (a.unsqueeze(-1) * vh).sum(-2)
        o = round_half_up_ste(o / f.v_lsb) * f.v_lsb
        return o.reshape(n, cfg.dim)

    def extra_repr(self) -> str:
        c = self.cfg
        return (
            f"window_score={c.window_score!r}, len_k={c.len_k}, dim={c.dim}, heads={c.heads}, "
            f"window_d={c.window_d}, position={c.position!r}"
        )


def integer_weights(module: QuantWindowAttention) -> CoreWeights:
    """The unit's W_Q codes as CoreWeights (wk, wv, wo zero: the unit holds only W_Q)."""
    if not isinstance(module, QuantWindowAttention):
        raise ValueError(f"expected a QuantWindowAttention, got {type(module).__name__}")
    with torch.no_grad():
        wq = module.weight_codes().cpu().numpy()
    zero = np.zeros_like(wq)
    return CoreWeights(wq, zero, zero.copy(), zero.copy())


def from_integer(cfg: CoreConfig, weights: CoreWeights) -> QuantWindowAttention:
    """A unit holding the given integer W_Q exactly (float weight = code * 2**-weight_frac)."""
    weights.check(cfg)
    module = QuantWindowAttention(cfg)
    w = np.asarray(weights.wq, dtype=np.float64) * 2.0**-cfg.weight_frac
    with torch.no_grad():
        module.q_proj.weight.copy_(torch.from_numpy(w.T.copy()))
    return module.eval()
