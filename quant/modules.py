"""Quantization-aware attention cores built from Brevitas quantizers (docs/quant.md).

:class:`QuantAttentionCore` is the trainable twin of one hardware core (eatt.config.CoreConfig):

    x, y   -> QuantIdentity  <in_bits, in_frac>, constant power-of-two scale (Brevitas)
    E-ATT  -> Binarize        1[x > tau] (Eq. 4), Gaussian surrogate gradient (Eq. 5)
           -> QuantLinear     W_Q, W_K, W_V, W_O: narrow-range <weight_bits, weight_frac>,
                              constant scale 2**-weight_frac (Brevitas), no bias
           -> the golden model's requantizing shifts, scores, exp/reciprocal tables, rounding

Its forward always returns the hardware's output: the golden model (eatt.quant.golden, the one
implementation of the integer arithmetic) run on the integer codes of the inputs and weights,
times ``out_lsb``. So ``module(x, y) == GoldenCore(cfg, integer_weights(module)).forward(x_int,
y_int) * out_lsb`` bit for bit, in train() and in eval() mode alike. When a gradient is needed
(training), a differentiable fake-quant pipeline of the same steps (straight-through floors,
float softmax in place of the tables) runs beside it and carries the gradient back (a
straight-through estimator around the whole core): QAT optimizes what the hardware computes.
Under ``torch.no_grad()`` only the integer path runs.

    QuantAttentionCore(cfg)                   a fresh core (PyTorch's default Linear init)
    from_integer(cfg, weights)                a core holding given integer weights (CoreWeights)
    from_float(float_module, cfg)             the quantized twin of a trained EAttention /
                                              DotProductAttention (ValueError naming a setting
                                              that disagrees with cfg)
    to_float(module)                          the float twin (eatt.model) of a quantized core
    integer_weights(module) -> CoreWeights    the weight codes, (in, out) as the golden model
    save_checkpoint / load_checkpoint         config + state dict, atomic write; one-line errors
    checkpoint_core(path) -> (cfg, weights)   what `eatt export CHECKPOINT` needs
    calibrate_weight_frac(weights, bits)      the least-squares power-of-two weight scale
"""

from __future__ import annotations

import contextvars
import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from brevitas.inject.enum import ScalingImplType
from brevitas.nn import QuantIdentity, QuantLinear
from brevitas.quant import Int8ActPerTensorFixedPoint, Int8WeightPerTensorFixedPoint
from torch import Tensor, nn

from eatt.config import ConfigError, CoreConfig, atomic_write
from eatt.mechanisms import MECHANISMS, mechanism_of
from eatt.model import functional as F
from eatt.quant.float_check import to_float_module
from eatt.quant.golden import (
    CoreWeights,
    GoldenCore,
    check_masks,
    derive_formats,
    visible_keys,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "Binarize",
    "QuantAttentionCore",
    "calibrate_weight_frac",
    "checkpoint_core",
    "fixed_point_act_quant",
    "fixed_point_weight_quant",
    "from_float",
    "from_integer",
    "hardware_value",
    "integer_forward",
    "integer_weights",
    "load_checkpoint",
    "requantize_ste",
    "round_half_up_ste",
    "save_checkpoint",
    "to_float",
]

#: the "format" entry of a checkpoint written by save_checkpoint
CHECKPOINT_FORMAT = "eatt.quant.QuantAttentionCore"
CHECKPOINT_VERSION = 1

#: set while eatt.quant.brevitas_export computes a traced layer's real output (its node is in
#: the graph): integer_forward refuses any other trace
TRACE_OK: contextvars.ContextVar[bool] = contextvars.ContextVar("trace_ok", default=False)

#: the core's own layers after the mechanism's (eatt.mechanisms: Mechanism.layers)
_VALUE_LAYERS = (("wv", "v_proj"), ("wo", "o_proj"))


def layer_names(cfg: CoreConfig) -> tuple[tuple[str, str], ...]:
    """(weight name, module attribute) of every layer of a core: its mechanism's (E-ATT, dot:
    wq q_proj, wk k_proj; dense: w1, w2; randinit: r random), then V's and O's."""
    mechanism = mechanism_of(cfg).layers(cfg)
    return tuple((name, attr) for name, attr, _, _ in mechanism) + _VALUE_LAYERS


# -- Brevitas quantizers ---------------------------------------------------------------------------
def fixed_point_weight_quant(bits: int, frac: int):
    """Brevitas weight quantizer for narrow-range signed <bits, frac> with a constant scale.

    Brevitas' fixed-point quantizers divide the scaling constant by 2**(bits-1) (power-of-two
    int scaling), so the constant 2**(bits-1-frac) gives the scale 2**-frac exactly; narrow
    range clamps codes to +-(2**(bits-1) - 1), as the golden model's weights.
    """
    return Int8WeightPerTensorFixedPoint.let(
        scaling_impl_type=ScalingImplType.CONST,
        scaling_const=2.0 ** (bits - 1 - frac),
        bit_width=bits,
        narrow_range=True,
    )


def fixed_point_act_quant(bits: int, frac: int):
    """Brevitas activation quantizer for signed <bits, frac> (full range) with a constant scale.

    Rounds to nearest (ties to even, torch.round) and saturates, as the exported Quant node does.
    """
    const = 2.0 ** (bits - 1 - frac)
    return Int8ActPerTensorFixedPoint.let(
        scaling_impl_type=ScalingImplType.CONST,
        scaling_const=const,
        min_val=-const,
        max_val=const,
        bit_width=bits,
        narrow_range=False,
    )


class Binarize(nn.Module):
    """Feature selection of Eq. 4: ``1[x > tau]`` (strict) with the Gaussian surrogate of Eq. 5.

    On inputs already on the <in_bits, in_frac> grid this equals the golden model's
    ``x_int > floor(tau * 2**in_frac)``. (Brevitas' binary quantizers are bipolar +-1 with a
    sign STE; E-ATT needs {0, 1} with a threshold and the paper's surrogate, so this wraps
    eatt.model.functional.binarize.)
    """

    def __init__(self, tau: float) -> None:
        super().__init__()
        self.tau = float(tau)

    def forward(self, x: Tensor) -> Tensor:
        return F.binarize(x, self.tau)

    def extra_repr(self) -> str:
        return f"tau={self.tau}"


# -- straight-through helpers ----------------------------------------------------------------------
class _FloorSte(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        return torch.floor(x)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        return grad


class _RoundHalfUpSte(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        return torch.floor(x + 0.5)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        return grad


class _HardwareValue(torch.autograd.Function):
    """Forward: the hardware's value, exactly. Backward: the gradient goes to the surrogate."""

    @staticmethod
    def forward(ctx, hardware: Tensor, surrogate: Tensor) -> Tensor:
        return hardware.clone()

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[None, Tensor]:
        return None, grad


def requantize_ste(acc: Tensor, lsb: float) -> Tensor:
    """floor(acc / lsb) * lsb with a straight-through gradient: the arithmetic right shift."""
    return _FloorSte.apply(acc / lsb) * lsb


def round_half_up_ste(x: Tensor) -> Tensor:
    """floor(x + 1/2) with a straight-through gradient: the output rounding."""
    return _RoundHalfUpSte.apply(x)


def hardware_value(hardware: Tensor, surrogate: Tensor) -> Tensor:
    """``hardware`` forward, the gradient to ``surrogate``: a straight-through estimator around
    a whole unit (QuantAttentionCore, QuantWindowAttention)."""
    return _HardwareValue.apply(hardware, surrogate)


# -- the golden arithmetic ------------------------------------------------------------------------
def integer_forward(
    cfg: CoreConfig,
    weights: dict[str, Tensor],
    x: Tensor,
    y: Tensor,
    masks: dict[str, Tensor] | None = None,
) -> Tensor:
    """The golden model itself (GoldenCore.forward) on int64 tensors: codes in, codes out.

    weights: integer weights by name (eatt.quant.golden.weight_shapes), input -> output order;
    x: (n, len_q, dim), y: (n, len_k, dim) integer input codes; masks: the core's mask inputs
    (length, offset: (n,) integers). Not on the gradient path: the codes go to numpy on the
    CPU and the (n, len_q, dim) int64 output codes come back there.
    """
    if (torch.onnx.is_in_onnx_export() or torch.jit.is_tracing()) and not TRACE_OK.get():
        raise RuntimeError(
            "the eatt core computes in numpy, which a trace would record as a constant: export "
            "a model through eatt.nn.MultiheadAttention (one AttentionCore node each, "
            "docs/own_model.md) or a core with `eatt export`"
        )
    w = CoreWeights(**{k: v.detach().cpu().numpy().astype(np.int64) for k, v in weights.items()})
    if len(x) == 0:
        return torch.zeros(0, cfg.len_q, cfg.dim, dtype=torch.int64)
    np_masks = {k: torch.as_tensor(v).detach().cpu().numpy() for k, v in (masks or {}).items()}
    out = GoldenCore(cfg, w).forward(
        x.detach().cpu().numpy(), y.detach().cpu().numpy(), masks=np_masks
    )
    return torch.from_numpy(out)


def visible_mask(cfg: CoreConfig, n: int, masks: dict[str, Tensor] | None, device=None):
    """The golden model's visible keys (visible_keys) as a bool tensor (n, 1, len_q, len_k)
    for the surrogate's softmax, or None (every key visible)."""
    np_masks = {k: torch.as_tensor(v).detach().cpu().numpy() for k, v in (masks or {}).items()}
    vis = visible_keys(cfg, n, check_masks(cfg, n, np_masks))
    return None if vis is None else torch.from_numpy(vis).to(device)


# -- the module ------------------------------------------------------------------------------------
class QuantAttentionCore(nn.Module):
    """One hardware attention core (E-ATT or dot product) as a Brevitas QAT module.

    ``forward(x, y=None)``: x ``(batch, len_q, dim)``, y ``(batch, len_k, dim)`` real tensors
    (``y=None``: self-attention, y = x). The lengths are the config's: a hardware core has fixed
    sizes. Inputs are quantized to <in_bits, in_frac> (round to nearest, ties to even,
    saturating); the result is the hardware's output ``codes * out_lsb`` in x's dtype.
    Parameter names match eatt.model (q_proj, k_proj, v_proj, o_proj; weight (out, in)).
    """

    def __init__(self, cfg: CoreConfig) -> None:
        super().__init__()
        if not isinstance(cfg, CoreConfig):
            raise ValueError(f"config: expected a CoreConfig, got {type(cfg).__name__}")
        if cfg.in_bits > 24 or cfg.out_bits > 24:
            key = "in_bits" if cfg.in_bits > 24 else "out_bits"
            raise ValueError(f"{key}: more than 24 bits is not exact in float32")
        self.cfg = cfg
        self.formats = derive_formats(cfg)
        self.input_quant = QuantIdentity(
            act_quant=fixed_point_act_quant(cfg.in_bits, cfg.in_frac), return_quant_tensor=False
        )
        self.mechanism = mechanism_of(cfg)
        self.binarize = Binarize(cfg.tau) if self.mechanism.binarized else None
        weight_quant = fixed_point_weight_quant(cfg.weight_bits, cfg.weight_frac)
        sizes = [(attr, n_in, n_out) for _, attr, n_in, n_out in self.mechanism.layers(cfg)]
        sizes += [(attr, cfg.dim, cfg.dim) for _, attr in _VALUE_LAYERS]
        for attr, n_in, n_out in sizes:
            setattr(self, attr, QuantLinear(n_in, n_out, bias=False, weight_quant=weight_quant))

    # -- codes ----------------------------------------------------------------------------------
    def input_codes(self, x: Tensor) -> Tensor:
        """Integer codes of x on the <in_bits, in_frac> grid (what the input Quant node emits)."""
        return torch.round(self.input_quant(x) * 2.0**self.cfg.in_frac).to(torch.int64)

    def weight_codes(self) -> dict[str, Tensor]:
        """{"wq", ...}: int64 codes by weight name in input -> output order (Q = X W)."""
        return {
            name: getattr(self, proj).quant_weight().int().to(torch.int64).T.contiguous()
            for name, proj in layer_names(self.cfg)
        }

    def forward_int(self, x: Tensor, y: Tensor, masks: dict[str, Tensor] | None = None) -> Tensor:
        """Integer codes in, integer codes out: the golden model (int64, CPU)."""
        return integer_forward(self.cfg, self.weight_codes(), x, y, masks)

    # -- forward --------------------------------------------------------------------------------
    def forward(
        self, x: Tensor, y: Tensor | None = None, masks: dict[str, Tensor] | None = None
    ) -> Tensor:
        """``masks``: the config's per-call mask inputs (length, offset: (batch,) integers; see
        eatt.quant.golden.MASK_INPUTS), in the hardware and in the surrogate alike."""
        cfg = self.cfg
        for name, t, length in (("x", x, cfg.len_q), ("y", x if y is None else y, cfg.len_k)):
            if t.dim() != 3 or tuple(t.shape[1:]) != (length, cfg.dim):
                raise ValueError(
                    f"{name} must be (batch, {length}, {cfg.dim}), got {tuple(t.shape)}"
                )
        return self.call(x, y, masks)[0]

    def call(
        self,
        x: Tensor,
        y: Tensor | None = None,
        masks: dict[str, Tensor] | None = None,
        cfg: CoreConfig | None = None,
        intermediates: bool = False,
    ) -> tuple[Tensor, Tensor, dict | None]:
        """forward at a call's own lengths: (output, output codes, the golden model's
        intermediates or None).

        ``cfg``: this core's config with the call's len_q, len_k and mask inputs (``self.cfg``
        when None); the core's outputs depend on the lengths only through the masks, so a call
        at any lengths up to the core's is the core padded (eatt.nn.MultiheadAttention,
        docs/golden.md "Lengths and masks"). ``intermediates``: also the golden model's stages
        (its unnormalized softmax weights ``exp`` among them)."""
        cfg = self.cfg if cfg is None else cfg
        self_attention = y is None
        if self_attention:
            y = x
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"x and y batch sizes differ: {x.shape[0]} != {y.shape[0]}")
        xq = self.input_quant(x)
        yq = xq if self_attention else self.input_quant(y)
        stages = None
        with torch.no_grad():
            scale = 2.0**cfg.in_frac
            xc = torch.round(xq * scale).to(torch.int64)
            yc = torch.round(yq * scale).to(torch.int64)
            if intermediates and len(x):
                w = CoreWeights(**{k: v.cpu().numpy() for k, v in self.weight_codes().items()})
                np_masks = {k: torch.as_tensor(v).cpu().numpy() for k, v in (masks or {}).items()}
                stages = GoldenCore(cfg, w).forward(
                    xc.cpu().numpy(), yc.cpu().numpy(), intermediates=True, masks=np_masks
                )
                codes = torch.from_numpy(stages["out"])
            else:
                codes = integer_forward(cfg, self.weight_codes(), xc, yc, masks)
            hardware = (codes.to(torch.float64) * self.formats.out_lsb).to(x.device, x.dtype)
        if not torch.is_grad_enabled():
            return hardware, codes, stages
        out = hardware_value(hardware, self.surrogate(xq, yq, self_attention, masks, cfg))
        return out, codes, stages

    def surrogate(
        self,
        xq: Tensor,
        yq: Tensor,
        self_attention: bool = False,
        masks: dict[str, Tensor] | None = None,
        cfg: CoreConfig | None = None,
    ) -> Tensor:
        """The differentiable fake-quant pipeline that carries the gradient (docs/quant.md).

        Same steps and scales as the hardware, with straight-through floors and roundings; the
        exp and reciprocal tables are replaced by a float softmax of the same logits
        (score * score_lsb, the 1/sqrt(d_head) scale included). ``cfg``: as in ``call``.
        """
        cfg = self.cfg if cfg is None else cfg
        v = self.project("v", yq)
        v = v.view(v.shape[0], v.shape[1], cfg.heads, cfg.d_head).transpose(1, 2)
        mask = visible_mask(cfg, xq.shape[0], masks, xq.device)
        o = self.mechanism.surrogate(self, xq, xq if self_attention else yq, v, mask)
        return self.output(o.transpose(1, 2).reshape(xq.shape[0], xq.shape[1], cfg.dim))

    # -- the surrogate's steps, also used one by one by the seq2seq model's quantized attention
    #    (eatt.model.seq2seq, kinds quant-eatt / quant-vanilla: masks and caches of its own)
    @property
    def scale(self) -> float:
        """The score scale, 1/sqrt(d_head) where the mechanism scales (it lives in the
        hardware's exp table)."""
        return self.mechanism.scale(self.cfg.d_head)

    def select(self, xq: Tensor) -> Tensor:
        """E-ATT's feature selection 1[x > tau] of quantized inputs; identity for dot."""
        return xq if self.binarize is None else self.binarize(xq)

    def project(self, which: str, t: Tensor) -> Tensor:
        """Q, K or V: the quantized projection requantized to its format (straight-through)."""
        lsb = self.formats.v_lsb if which == "v" else self.formats.q_lsb
        return requantize_ste(getattr(self, f"{which}_proj")(t), lsb)

    def requantized(self, layer: str, t: Tensor, relu: bool = False) -> Tensor:
        """A mechanism's projection (its layer's attribute), relu'd if asked, requantized to the
        formats' q_lsb (straight-through): Dense's hidden layer."""
        acc = getattr(self, layer)(t)
        return requantize_ste(torch.relu(acc) if relu else acc, self.formats.q_lsb)

    def output(self, o: Tensor) -> Tensor:
        """Attention output (heads concatenated) -> rounded to V's grid -> W_O -> requantized."""
        f = self.formats
        o = round_half_up_ste(o / f.v_lsb) * f.v_lsb
        return requantize_ste(self.o_proj(o), f.out_lsb)

    def extra_repr(self) -> str:
        c = self.cfg
        return (
            f"kind={c.kind!r}, len_q={c.len_q}, len_k={c.len_k}, dim={c.dim}, heads={c.heads}, "
            f"weights=<{c.weight_bits}, {c.weight_frac}>, inputs=<{c.in_bits}, {c.in_frac}>"
        )


# -- conversions -----------------------------------------------------------------------------------
def integer_weights(module: QuantAttentionCore) -> CoreWeights:
    """The module's integer weight codes, (in, out) as the golden model and export_core take."""
    if not isinstance(module, QuantAttentionCore):
        raise ValueError(f"expected a QuantAttentionCore, got {type(module).__name__}")
    with torch.no_grad():
        codes = module.weight_codes()
    return CoreWeights(**{name: codes[name].cpu().numpy() for name, _ in layer_names(module.cfg)})


def from_integer(cfg: CoreConfig, weights: CoreWeights) -> QuantAttentionCore:
    """A core holding the given integer weights exactly (float weight = code * 2**-weight_frac)."""
    weights.check(cfg)
    module = QuantAttentionCore(cfg)
    lsb = 2.0**-cfg.weight_frac
    with torch.no_grad():
        for name, proj in layer_names(cfg):
            w = np.asarray(getattr(weights, name), dtype=np.float64) * lsb
            getattr(module, proj).weight.copy_(torch.from_numpy(w.T.copy()))
    return module.eval()


def _float_kind(module: nn.Module) -> str:
    """The core kind of a float module: the mechanism whose float module it is."""
    for mechanism in MECHANISMS.values():
        if isinstance(module, mechanism.load("float_module")):
            if why := mechanism.float_mismatch(module):
                raise ValueError(f"kind: {why}")
            return mechanism.kind
    names = ", ".join(m.float_module.rpartition(":")[2] for m in MECHANISMS.values())
    raise ValueError(f"kind: expected one of {names}, got {type(module).__name__}")


def from_float(float_module: nn.Module, cfg: CoreConfig) -> QuantAttentionCore:
    """The quantized twin of a trained float EAttention / DotProductAttention.

    The float weights are copied and Brevitas rounds them to the <weight_bits, weight_frac> grid
    (nearest, saturating at +-weight_max; a UserWarning counts saturated weights). kind, dim,
    heads, tau and the absence of biases must agree with cfg, else a ValueError names the setting.
    The result is in the float module's train/eval mode, on its device.
    """
    kind = _float_kind(float_module)
    if kind != cfg.kind:
        raise ValueError(
            f"kind: the config says {cfg.kind!r} but the float module is a "
            f"{type(float_module).__name__} (kind {kind!r})"
        )
    for key in ("dim", "heads"):
        if getattr(float_module, key) != getattr(cfg, key):
            raise ValueError(
                f"{key}: the config says {getattr(cfg, key)} but the float module has "
                f"{getattr(float_module, key)}"
            )
    binarized = mechanism_of(cfg).binarized  # the float module has a tau then
    if binarized and not math.isclose(float_module.tau, cfg.tau, rel_tol=0, abs_tol=1e-12):
        raise ValueError(
            f"tau: the config says {cfg.tau} but the float module has {float_module.tau}"
        )
    for _, proj in _VALUE_LAYERS:
        if getattr(float_module, proj).bias is not None:
            raise ValueError(f"bias: {proj} has a bias; the hardware core has none")
    mechanism = mechanism_of(cfg)
    weights = mechanism.float_weights(cfg, float_module)  # (in, out) by name
    weights.update({name: getattr(float_module, proj).weight.T for name, proj in _VALUE_LAYERS})
    module = QuantAttentionCore(cfg)
    limit = (cfg.weight_max + 0.5) * 2.0**-cfg.weight_frac
    saturated = 0
    with torch.no_grad():
        for name, proj in layer_names(cfg):
            w = weights[name].detach().T
            saturated += int((w.abs() > limit).sum())
            getattr(module, proj).weight.copy_(w.to(torch.float32).cpu())
    if saturated:
        warnings.warn(
            f"from_float: {saturated} weights lie outside the {cfg.weight_bits}-bit range "
            f"+-{limit - 0.5 * 2.0**-cfg.weight_frac:g} and saturate; consider a smaller "
            "weight_frac",
            stacklevel=2,
        )
    device = next(float_module.parameters()).device
    return module.to(device).train(float_module.training)


def calibrate_weight_frac(weights: list[Tensor], bits: int) -> int:
    """The weight_frac whose narrow-range <bits, frac> grid holds ``weights`` with the least
    squared error: the power-of-two scale a hardware core needs, picked for trained weights
    (the largest weight alone would waste the few levels of 4-bit weights on outliers)."""
    if not 2 <= bits <= 32:
        raise ValueError(f"weight bits must be in [2, 32], got {bits}")
    w = torch.cat([t.detach().flatten().to(torch.float64).cpu() for t in weights])
    peak = float(w.abs().max()) if w.numel() else 0.0
    if not math.isfinite(peak):
        raise ValueError("weights hold inf or nan")
    if peak == 0.0:
        return bits - 2  # nothing to fit: the core's default
    limit = 2 ** (bits - 1) - 1
    covering = math.floor(math.log2(limit / peak))  # the largest frac whose grid holds the peak
    errors = {}
    for frac in range(covering - 1, covering + bits + 2):
        q = torch.clamp(torch.round(w * 2.0**frac), -limit, limit) * 2.0**-frac
        errors[frac] = float(((q - w) ** 2).sum())
    return min(errors, key=lambda f: (errors[f], f))


def to_float(module: QuantAttentionCore, dtype: torch.dtype = torch.float32) -> nn.Module:
    """The float twin (eatt.model EAttention / DotProductAttention) with the quantized weights."""
    return to_float_module(module.cfg, integer_weights(module), dtype=dtype).train(module.training)


# -- checkpoints -----------------------------------------------------------------------------------
def save_checkpoint(module: QuantAttentionCore, path: str | os.PathLike) -> None:
    """Write config + state dict with torch.save through a temp file + rename (never half a file).

    ``load_checkpoint`` reads it back; the state dict holds the float (latent) weights, so
    training can resume, and integer_weights of the loaded module equals the saved one's.
    """
    if not isinstance(module, QuantAttentionCore):
        raise ValueError(f"expected a QuantAttentionCore, got {type(module).__name__}")
    payload = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "config": module.cfg.to_dict(),
        "state_dict": {k: v.detach().cpu().clone() for k, v in module.state_dict().items()},
    }
    atomic_write(path, lambda tmp: torch.save(payload, tmp))


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def load_checkpoint(path: str | os.PathLike) -> QuantAttentionCore:
    """Read a save_checkpoint file into a QuantAttentionCore (eval mode, CPU).

    Anything else (no file, not a torch file, another format, a missing key, a bad config or
    weight shape) raises a one-line ValueError that starts with the path.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such checkpoint file")
    try:
        payload: Any = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # pickle / zip errors are long: keep the first line
        raise ValueError(
            f"{path}: not an eatt checkpoint (torch.load cannot read it: {type(err).__name__})"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not an eatt checkpoint (no format {CHECKPOINT_FORMAT!r})")
    if payload.get("version") != CHECKPOINT_VERSION:
        raise ValueError(
            f"{path}: checkpoint version {payload.get('version')!r} is not supported "
            f"(expected {CHECKPOINT_VERSION})"
        )
    for key in ("config", "state_dict"):
        if not isinstance(payload.get(key), dict):
            raise ValueError(f"{path}: checkpoint is missing '{key}'")
    try:
        cfg = CoreConfig.from_dict(payload["config"], source=f"{path}: config")
    except ConfigError as err:
        raise ValueError(str(err)) from None
    module = QuantAttentionCore(cfg)
    state = payload["state_dict"]
    expected = module.state_dict()
    missing = [k for k in expected if k not in state]
    if missing:
        raise ValueError(f"{path}: checkpoint state_dict is missing '{missing[0]}'")
    unknown = [k for k in state if k not in expected]
    if unknown:
        raise ValueError(f"{path}: checkpoint state_dict has an unknown entry '{unknown[0]}'")
    for key, value in state.items():
        if not isinstance(value, Tensor) or value.shape != expected[key].shape:
            shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
            raise ValueError(
                f"{path}: checkpoint {key} has shape {shape}, expected {tuple(expected[key].shape)}"
            )
    module.load_state_dict(state)
    return module.eval()


def checkpoint_core(path: str | os.PathLike) -> tuple[CoreConfig, CoreWeights]:
    """(config, integer weights) of a checkpoint: ``export_core(*checkpoint_core(p), out)``."""
    module = load_checkpoint(path)
    return module.cfg, integer_weights(module)
