"""eatt's attention as a drop-in for ``torch.nn.MultiheadAttention`` (docs/own_model.md).

    from eatt.nn import MultiheadAttention
    layer = torch.nn.TransformerEncoderLayer(16, 2, batch_first=True)
    layer.self_attn = MultiheadAttention(16, 2, kind="eatt", batch_first=True, max_len=8)

:class:`MultiheadAttention` takes PyTorch's constructor and calling convention. Behind it is one
hardware core (eatt.config.CoreConfig) of ``len_q = len_k = max_len``: a call at any lengths up
to ``max_len`` is that core padded, its valid key length from ``key_padding_mask`` and its
causal offset from ``attn_mask`` / ``is_causal`` (the mask inputs the hardware already has). A
quantized module (Brevitas QAT, eatt.quant.modules.QuantAttentionCore) returns the core's
integer arithmetic, the golden model, in train and eval mode alike (the gradient through the
fake-quant surrogate); a float one is eatt.model's EAttention / DotProductAttention.

What the hardware cannot compute is refused in one line: a key different from the value (the
core computes K and V from one input), a padding mask that is not a suffix, an attention mask
that is not causal (key j visible to query i when j <= i + offset), dropout, biases.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator

import torch
from torch import Tensor, nn

from eatt.config import CoreConfig
from eatt.mechanisms import mechanism_of
from eatt.quant import brevitas_export
from eatt.quant.golden import derive_formats
from eatt.quant.modules import QuantAttentionCore

__all__ = ["KINDS", "MultiheadAttention", "coarse_formats", "model_calls"]

# brevitas.export.export_qonnx turns each quantized layer's node into an AttentionCore
brevitas_export.register()

#: the score functions a module can have: E-ATT's L1 (binarized Q/K inputs) and the dot peer
KINDS = ("eatt", "vanilla")

#: nn.MultiheadAttention's options the hardware core has no counterpart for: (name, the only
#: value taken)
_FIXED = (("dropout", 0.0), ("bias", False), ("add_bias_kv", False), ("add_zero_attn", False))


def coarse_formats(cfg: CoreConfig) -> list[str]:
    """The derived formats of ``cfg`` too coarse for its width: a line each, naming the keys
    that refine them (an output or value LSB above 1/8 loses most of a unit-scale signal)."""
    f = derive_formats(cfg)
    found = []
    for name, lsb, key in (("output", f.out_lsb, "out_bits"), ("value", f.v_lsb, "v_bits")):
        if lsb > 0.125:
            found.append(
                f"the {name} LSB is {lsb:g} at dim {cfg.dim}, coarse for unit-scale "
                f"activations: raise {key} (now {getattr(cfg, key)})"
            )
    return found


#: the CoreConfig keys the module sets itself from its own arguments
_SET_BY_MODULE = ("kind", "len_q", "len_k", "dim", "heads", "tau")


def check_core_options(options: dict, also: tuple[str, ...] = ()) -> None:
    """A one-line ValueError naming the first key of ``options`` that is not a core option
    (a CoreConfig key the module does not set itself, or one of ``also``)."""
    allowed = [
        f.name for f in dataclasses.fields(CoreConfig)
        if f.name not in _SET_BY_MODULE or f.name in also
    ]  # fmt: skip
    for name in options:
        if name not in allowed:
            raise ValueError(f"{name}: not a core option (the formats: {', '.join(allowed)})")


class MultiheadAttention(nn.Module):
    """``torch.nn.MultiheadAttention`` with an eatt core behind it.

    Args (PyTorch's, in its order): embed_dim, num_heads, dropout (0 only), bias (False only:
    the core has no biases), add_bias_kv / add_zero_attn (False only), kdim / vdim (None or
    embed_dim), batch_first, device, dtype.
    Keyword-only: ``kind`` (eatt | vanilla), ``quantized`` (Brevitas QAT, default True),
    ``max_len`` (the longest query or key sequence, the core's lengths), ``tau`` (E-ATT's
    threshold, Eq. 4) and any other CoreConfig key (in_bits, in_frac, weight_bits, weight_frac,
    qk_bits, v_bits, out_bits, table sizes).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = False,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device=None,
        dtype=None,
        *,
        kind: str = "eatt",
        quantized: bool = True,
        max_len: int = 64,
        tau: float = 1.0,
        **core_options,
    ) -> None:
        super().__init__()
        given = {"dropout": dropout, "bias": bias, "add_bias_kv": add_bias_kv,
                 "add_zero_attn": add_zero_attn}  # fmt: skip
        for name, only in _FIXED:
            if given[name] != only:
                raise ValueError(f"{name}: the hardware core takes {name}={only} only")
        for name, d in (("kdim", kdim), ("vdim", vdim)):
            if d not in (None, embed_dim):
                raise ValueError(f"{name}: keys and values have the query's width {embed_dim}")
        if kind not in KINDS:
            raise ValueError(f"kind: one of {', '.join(KINDS)}, got {kind!r}")
        check_core_options(core_options)
        #: the constructor's arguments: pickling rebuilds the module from them (Brevitas'
        #: quantizer classes do not pickle) and loads the state dict
        self._init_args = dict(
            embed_dim=embed_dim, num_heads=num_heads, batch_first=batch_first, kind=kind,
            quantized=quantized, max_len=max_len, tau=tau, **core_options,
        )  # fmt: skip
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads if num_heads else 0
        self.kdim = self.vdim = embed_dim
        self.batch_first = batch_first
        self.kind, self.quantized, self.max_len = kind, quantized, max_len
        # what torch.nn.TransformerEncoderLayer / DecoderLayer read before their fast path:
        # no in-projection bias sends them down the ordinary path, which calls forward
        self._qkv_same_embed_dim = True
        self.dropout = 0.0
        self.in_proj_weight = self.in_proj_bias = self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        #: the core's config: len_q = len_k = max_len, the masks off (a call adds those it uses)
        self.cfg = CoreConfig(
            kind=kind, len_q=max_len, len_k=max_len, dim=embed_dim, heads=num_heads, tau=tau,
            **core_options,
        )  # fmt: skip
        if quantized:
            self.core: nn.Module = QuantAttentionCore(self.cfg)
            for line in coarse_formats(self.cfg):
                warnings.warn(f"eatt.nn.MultiheadAttention: {line}", stacklevel=2)
        else:  # the float reference of the mechanism (E-ATT's binarizes at tau)
            self.core = mechanism_of(kind).float_core(self.cfg)
        self.core.to(device=device, dtype=dtype)
        #: eatt.capture's recorder: called by each quantized call with (x codes (n, L, E),
        #: y codes (n, S, E), {"length": (n,), "offset": (n,)} numpy, output codes (n, L, E))
        self.probe: Callable[..., None] | None = None

    def reconfigure(self, **core_options) -> MultiheadAttention:
        """The same layer with other CoreConfig keys (formats: eatt.quant.calibrate): a quantized
        core rebuilt with its float weights kept (rounded to the new grid). Returns self."""
        if not self.quantized:
            raise ValueError("reconfigure: a float module has no formats")
        check_core_options(core_options, also=("tau",))
        cfg = self.cfg.replace(**core_options)
        core = QuantAttentionCore(cfg)
        core.load_state_dict(self.core.state_dict())
        device = self.core.q_proj.weight.device
        self.core, self.cfg = core.to(device).train(self.training), cfg
        self._init_args.update(core_options)
        for line in coarse_formats(cfg):
            warnings.warn(f"eatt.nn.MultiheadAttention: {line}", stacklevel=2)
        return self

    @property
    def out_proj(self) -> nn.Module:
        """W_O (PyTorch's name for it)."""
        return self.core.o_proj

    def __reduce__(self):
        return (_rebuild, (self._init_args, self.state_dict(), self.training))

    def extra_repr(self) -> str:
        q = "quantized" if self.quantized else "float"
        return (
            f"{self.embed_dim}, {self.num_heads}, kind={self.kind!r}, {q}, max_len={self.max_len}, "
            f"batch_first={self.batch_first}"
        )

    # -- forward ---------------------------------------------------------------------------------
    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """PyTorch's call: (attn_output, attn_weights or None). Shapes as
        ``nn.MultiheadAttention`` ((L, N, E), batch_first (N, L, E), unbatched (L, E));
        weights (N, L, S) averaged over heads, else (N, heads, L, S). A quantized module's
        weights are the hardware's exp weights over their sum (its reciprocal is a table)."""
        if isinstance(query, torch.fx.Proxy):  # a leaf of torch.fx: one call_module node
            tracer = query.tracer
            kwargs = dict(key_padding_mask=key_padding_mask, need_weights=need_weights,
                          attn_mask=attn_mask, average_attn_weights=average_attn_weights,
                          is_causal=is_causal)  # fmt: skip
            return tracer.create_proxy(
                "call_module", tracer.path_of_module(self), (query, key, value), kwargs
            )
        batched = query.dim() == 3
        x, y, self_attention = self._inputs(query, key, value, batched)
        if not batched and key_padding_mask is not None:
            key_padding_mask = key_padding_mask[None]
        n, len_q, len_k = x.shape[0], x.shape[1], y.shape[1]
        y_arg = None if self_attention else y
        if self.quantized and torch.onnx.is_in_onnx_export():  # one AttentionCore node
            out = self._exported(x, y_arg, key_padding_mask, attn_mask, is_causal)
            return self._output(out, batched), None
        length = _length(key_padding_mask, n, len_k)
        offset = _offset(attn_mask, is_causal, len_q, len_k)
        if self.quantized:
            out, weights = self._quantized(x, y_arg, length, offset, n, need_weights)
        else:
            visible = _visible(n, len_q, len_k, length, offset, x.device)
            out, weights = self.core(x, y_arg, visible=visible, need_weights=True)
        out = self._output(out, batched)
        if not need_weights:
            return out, None
        weights = weights.to(out.dtype)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        return out, (weights if batched else weights[0])

    def _output(self, out: Tensor, batched: bool) -> Tensor:
        """(N, L, E) back to the caller's layout."""
        if not self.batch_first and batched:
            return out.transpose(0, 1)
        return out if batched else out[0]

    def _exported(self, x, y, key_padding_mask, attn_mask, is_causal) -> Tensor:
        """The call as a model export traces it: the core's node (eatt.quant.brevitas_export)
        on the layer's Quant nodes, its mask inputs computed in the graph from the masks."""
        n, len_q = int(x.shape[0]), int(x.shape[1])  # static shapes (traced: tensors)
        len_k = int((x if y is None else y).shape[1])
        inputs = []
        if key_padding_mask is not None:
            hidden = _hidden(key_padding_mask, "key_padding_mask", check=False)
            inputs.append((~hidden).sum(1).to(x.dtype).reshape(n, 1))
        causal = attn_mask is not None or is_causal
        if causal:
            if attn_mask is None:
                shown_row0 = torch.ones(1, dtype=torch.bool, device=x.device)
            else:
                shown_row0 = ~_hidden(attn_mask, "attn_mask", check=False)[0]
            offset = shown_row0.sum().to(x.dtype) - 1
            inputs.append(offset.reshape(1, 1).expand(n, 1))
        cfg = self.cfg.replace(
            len_q=len_q, len_k=len_k, key_padding=key_padding_mask is not None, causal=causal
        )
        core = self.core
        xq = core.input_quant(x)
        # a Quant node of its own for Y, self-attention too: a node reading one tensor twice
        # loses the second name in qonnx's renaming (hls4ml's cleanup)
        yq = core.input_quant(x if y is None else y)

        def compute() -> Tensor:  # the real output, for a TorchScript trace to carry on with
            length = _length(key_padding_mask, n, len_k)
            offset = _offset(attn_mask, is_causal, len_q, len_k)
            return self._quantized(x, y, length, offset, n, False)[0]

        weights = [_value(getattr(core, f"{w}_proj").quant_weight()) for w in "qkvo"]
        text = brevitas_export.spec(cfg)
        return brevitas_export.core_node([xq, yq, *inputs, *weights], text, compute)

    def _inputs(self, query, key, value, batched) -> tuple[Tensor, Tensor, bool]:
        """(x (N, L, E), y (N, S, E), self-attention) of PyTorch's query, key and value."""
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != (3 if batched else 2) or t.shape[-1] != self.embed_dim:
                want = "(L, N, E), (N, L, E) with batch_first, or (L, E)"
                raise ValueError(f"{name}: expected {want} with E {self.embed_dim}, got "
                                 f"{tuple(t.shape)}")  # fmt: skip
        exporting = torch.onnx.is_in_onnx_export()  # values unknown to torch.export
        if key is not value and (
            exporting or key.shape != value.shape or not torch.equal(key, value)
        ):
            raise ValueError(
                "value: the eatt core computes keys and values from one input: pass the same "
                "tensor as key and value"
            )
        self_attention = query is key
        if not batched:
            query, key = query[None], key[None]
        elif not self.batch_first:
            query, key = query.transpose(0, 1), key.transpose(0, 1)
        for name, t in (("query", query), ("key", key)):
            if t.shape[1] > self.max_len or t.shape[1] == 0:
                raise ValueError(
                    f"{name}: length {t.shape[1]}, this module's max_len is {self.max_len}"
                )
        if query.shape[0] != key.shape[0]:
            raise ValueError(f"key: batch {key.shape[0]}, the query's is {query.shape[0]}")
        return query, key, self_attention

    def _quantized(self, x, y, length, offset, n, need_weights) -> tuple[Tensor, Tensor | None]:
        """The core at this call's lengths (its masks as inputs); the probe sees the call."""
        len_q, len_k = int(x.shape[1]), int((x if y is None else y).shape[1])
        cfg = self.cfg.replace(
            len_q=len_q, len_k=len_k, key_padding=length is not None, causal=offset is not None
        )
        masks = {}
        if length is not None:
            masks["length"] = length.cpu()
        if offset is not None:
            masks["offset"] = torch.full((n,), offset, dtype=torch.int64)
        out, codes, stages = self.core.call(x, y, masks, cfg, intermediates=need_weights)
        if self.probe is not None:
            with torch.no_grad():
                xc = self.core.input_codes(x)
                yc = xc if y is None else self.core.input_codes(y)
                lsb = self.core.formats.out_lsb
                got = torch.round(out.detach().to(torch.float64) / lsb).to(torch.int64).cpu()
            seen = {
                "length": masks.get("length", torch.full((n,), len_k)).numpy(),
                "offset": masks.get("offset", torch.full((n,), len_k - 1)).numpy(),
            }
            self.probe(xc.cpu().numpy(), yc.cpu().numpy(), seen, got.numpy(), offset is not None)
        if not need_weights:
            return out, None
        if stages is None:  # an empty batch
            return out, x.new_zeros(n, self.num_heads, len_q, len_k)
        e = torch.from_numpy(stages["exp"]).to(torch.float64)
        return out, (e / e.sum(-1, keepdim=True)).to(x.device)


def _value(t):
    """A Brevitas quantized tensor's value (a plain tensor as it is)."""
    return getattr(t, "value", t)


def _rebuild(init_args: dict, state: dict, training: bool) -> MultiheadAttention:
    module = MultiheadAttention(**init_args)
    module.load_state_dict(state)
    return module.train(training)


# -- masks: PyTorch's conventions to the core's mask inputs -------------------------------------
def _hidden(mask: Tensor, name: str, check: bool = True) -> Tensor:
    """A PyTorch mask as booleans, True = hidden: bool masks as they are, float masks additive
    (-inf hides, 0 shows; any other value is a bias the core does not add). ``check``: refuse
    other values (not while exporting: the graph computes it)."""
    if mask.dtype == torch.bool:
        return mask
    if not mask.is_floating_point():
        raise ValueError(f"{name}: expected a bool or float mask, got {mask.dtype}")
    hidden = mask == float("-inf")  # (torch.isneginf has no TorchScript ONNX symbolic)
    if check and bool(((mask != 0) & ~hidden).any()):
        raise ValueError(f"{name}: a float mask may hold 0 and -inf only (the core adds no bias)")
    return hidden


def _length(key_padding_mask: Tensor | None, n: int, len_k: int) -> Tensor | None:
    """The valid key lengths (n,) of a padding mask (True or -inf = padding), or None."""
    if key_padding_mask is None:
        return None
    if tuple(key_padding_mask.shape) != (n, len_k):
        raise ValueError(
            f"key_padding_mask: expected shape {(n, len_k)}, got {tuple(key_padding_mask.shape)}"
        )
    pad = _hidden(key_padding_mask, "key_padding_mask").cpu()
    length = (~pad).sum(1)
    suffix = torch.arange(len_k)[None, :] >= length[:, None]
    if not torch.equal(suffix, pad) or bool((length == 0).any()):
        raise ValueError(
            "key_padding_mask: the core takes a valid length: padding at the end, at least one key"
        )
    return length.to(torch.int64)


def _offset(attn_mask: Tensor | None, is_causal: bool, len_q: int, len_k: int) -> int | None:
    """The causal offset of an attention mask (query i sees keys j <= i + offset), or None."""
    if attn_mask is None:
        return 0 if is_causal else None  # PyTorch's is_causal alone: the square causal mask
    if tuple(attn_mask.shape) != (len_q, len_k):
        raise ValueError(
            f"attn_mask: the core takes one ({len_q}, {len_k}) causal mask for every head and "
            f"batch row, got shape {tuple(attn_mask.shape)}"
        )
    shown = ~_hidden(attn_mask, "attn_mask").cpu()
    offset = int(shown[0].sum()) - 1
    j, i = torch.arange(len_k)[None, :], torch.arange(len_q)[:, None]
    if offset < 0 or not torch.equal(shown, j <= i + offset):
        raise ValueError(
            "attn_mask: the core takes a causal mask (query i sees keys j <= i + offset); "
            "this mask is another pattern"
        )
    return None if offset >= len_k - 1 else offset


def _visible(n, len_q, len_k, length, offset, device) -> Tensor | None:
    """(n, L, S) booleans of the float module: the core's masks as one pattern."""
    if length is None and offset is None:
        return None
    vis = torch.ones(n, len_q, len_k, dtype=torch.bool)
    j = torch.arange(len_k)
    if length is not None:
        vis &= j[None, None, :] < length[:, None, None]
    if offset is not None:
        vis &= j[None, None, :] <= torch.arange(len_q)[None, :, None] + offset
    return vis.to(device)


def model_calls(inputs) -> Iterator[tuple[tuple, dict]]:
    """(args, kwargs) of each model input: a tensor, a tuple or list of positional arguments,
    or a dict of keyword arguments (eatt.capture, eatt.quant.calibrate); one ValueError else."""
    for item in inputs:
        if isinstance(item, torch.Tensor):
            yield (item,), {}
        elif isinstance(item, dict):
            yield (), item
        elif isinstance(item, (tuple, list)):
            yield tuple(item), {}
        else:
            raise ValueError(
                f"inputs: each item is a tensor, a tuple of arguments or a dict of keyword "
                f"arguments, got {type(item).__name__}"
            )
