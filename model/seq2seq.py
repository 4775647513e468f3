"""Transformer encoder-decoder (Vaswani et al., 2017) with the attention kind chosen per role.

Roles: ``enc_self`` (encoder self-attention), ``dec_self`` (decoder self-attention, causal),
``cross`` (decoder-encoder attention). Kinds (:data:`ATTENTION_KINDS`):

* ``vanilla`` -- :class:`~eatt.model.attention.DotProductAttention`;
* ``eatt`` and the Table 5 ablations ``binary-dot`` (discrete selection only) and
  ``linear-l1`` (L1 distance only) -- :class:`~eatt.model.attention.EAttention`;
* ``dense`` / ``randinit`` -- the Synthesizer variants (:mod:`eatt.model.synthesizer`), shaped
  by ``max_len``;
* ``quant-eatt`` / ``quant-vanilla`` -- the quantization-aware hardware core
  (:class:`eatt.quant.modules.QuantAttentionCore`, Brevitas): inputs on the <quant_in_bits,
  quant_in_frac> grid, E-ATT's binarized Q/K inputs, <quant_weight_bits, quant_weight_frac>
  weights, Q/K/V/output requantized as the hardware does; the softmax is the float one (the
  core's training surrogate: batches of mixed lengths need masks the fixed-size core has not).

Every attention module keeps the parameter names of :mod:`eatt.model.attention` (``q_proj`` ...
``o_proj``) under ``<layer>.<role>.core`` so a trained layer can be handed to the quantized
core (``eatt.quant.modules.from_float``). Incremental decoding caches the projected keys and
values of every decoder layer (the cross-attention ones are computed once per source); for
E-ATT the cross-attention cache also holds the binarized encoder output ``f(Y)`` (bool,
``cache[layer]["cross"]["binary"]``), the 1-bit representation a hardware core would keep.

:class:`ModelConfig` is the typed, validated model description (YAML/JSON); checkpoints hold it
with the vocabularies and the state dict (:func:`save_checkpoint`, :func:`load_checkpoint`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from eatt.config import ConfigError, atomic_write, read_mapping
from eatt.config import first_line as _first_line

from . import functional as F
from .attention import attention_variant
from .data import PAD, Vocab, check_fields, dataclass_from_dict
from .synthesizer import DenseSynthesizer, RandomSynthesizer, synthesized_attention

__all__ = [
    "ATTENTION_KINDS",
    "CHECKPOINT_FORMAT",
    "QUANT_KINDS",
    "ROLES",
    "ModelConfig",
    "RoleAttention",
    "Seq2Seq",
    "WINDOW_KINDS",
    "build_model",
    "load_checkpoint",
    "load_model_config",
    "read_mapping",
    "save_checkpoint",
]

ATTENTION_KINDS = (
    "vanilla",
    "eatt",
    "binary-dot",
    "linear-l1",
    "dense",
    "randinit",
    "quant-eatt",
    "quant-vanilla",
)
#: kinds run by eatt.quant.modules.QuantAttentionCore, and the hardware kind of each
QUANT_KINDS = {"quant-eatt": "eatt", "quant-vanilla": "dot"}
#: Luong / Flexible windowed single-head cross-attention (eatt.model.windowed); ``cross`` only
WINDOW_KINDS = ("global", "local-m", "local-p", "flexible")
WINDOW_SCORES = ("dot", "general", "concat", "eatt")
ARCHS = ("transformer", "lstm")
L0DROP_RULES = ("freq", "inv-freq", "group")
ROLES = ("enc_self", "dec_self", "cross")
CHECKPOINT_FORMAT = "eatt.model.Seq2Seq"
CHECKPOINT_VERSION = 1

#: L1 score kernel of the seq2seq model (eatt.model.functional.l1_scores ``impl``). Not
#: "auto": length-bucketed batches change shape nearly every step, and "auto" compiles a kernel
#: per shape (seconds each, then torch.compile's recompile limit); cdist needs no compiling.
L1_IMPL = "cdist"


# -- config --------------------------------------------------------------------------------------
#: most layer weights of a model: 16 bytes a weight with Adam's state is 16 GB
MAX_LAYER_PARAMETERS = 1_000_000_000


@dataclass(frozen=True)
class ModelConfig:
    """A Transformer encoder-decoder. Every key is optional; docs/models.md lists them."""

    dim: int = 128
    heads: int = 4
    ffn_dim: int = 256
    enc_layers: int = 2
    dec_layers: int = 2
    dropout: float = 0.1
    #: "pre" (LayerNorm before each sub-layer, plus a final one) or "post" (Vaswani et al.)
    norm: str = "pre"
    #: share the decoder's input embedding with the output projection
    tie_embeddings: bool = False
    #: attention kind of every role, unless the role's own key below says otherwise
    attention: str = "vanilla"
    enc_self: str | None = None
    dec_self: str | None = None
    cross: str | None = None
    #: E-ATT binarization threshold (Eq. 4), 1.0 as in the paper
    tau: float = 1.0
    #: longest source (with <eos>) and target (with <bos>) a dense/randinit model accepts
    max_len: int = 64
    #: "transformer" (Seq2Seq) or "lstm" (eatt.model.rnn.LSTMSeq2Seq); see build_model
    arch: str = "transformer"
    #: score of the windowed cross-attention kinds (Luong Eq. 8, or E-ATT's -L1)
    window_score: str = "general"
    #: D: half width of the local-m / local-p window [p_t - D, p_t + D] (Luong Sec. 3.2)
    window_d: int = 10
    #: sigma of the Flexible penalty (Eq. 6); None = 1.5, the paper's pick (Sec. 5.2)
    flexible_sigma: float | None = None
    #: test-time threshold tau of Flexible Attention (Sec. 3.1); None = infinity (no window)
    flexible_tau: float | None = None
    #: beta of the fine-tuning loss -beta * mean g(t) (Eq. 9)
    flexible_beta: float = 0.0
    #: L0Drop gates between encoder and decoder (Zhang et al., 2021)
    l0drop: bool = False
    #: lambda, weight of the expected-L0 penalty
    l0drop_lambda: float = 0.0
    #: rule-based pattern instead of learned gates: "freq", "inv-freq", "group" (None: learned)
    l0drop_rule: str | None = None
    #: fraction of source tokens a rule pattern drops
    l0drop_rule_rate: float = 0.5
    #: quant-eatt / quant-vanilla: weights <bits, frac> (frac None: bits - 2, the core's
    #: default, range about +-2: coarse for trained weights, which are mostly far smaller;
    #: eatt.quant.modules.calibrate_weight_frac picks one for a trained float model)
    quant_weight_bits: int = 8
    quant_weight_frac: int | None = None
    #: ... and the attention inputs' grid <bits, frac> (E-ATT binarizes them at tau)
    quant_in_bits: int = 8
    quant_in_frac: int = 4
    #: widths Q/K, V and the output are requantized to (the core's qk_bits, v_bits, out_bits).
    #: The core derives its shifts from worst-case bounds, which grow with dim: at dim 128 and
    #: 8-bit weights of frac 8 the core's 12-bit default leaves the output a step of 16, 24 bits
    #: 1/64 (and Q/K/V unshifted: the accumulators fit)
    quant_acc_bits: int = 24

    def layer_parameters(self) -> int:
        """Weights of the encoder and decoder layers (embeddings not counted: the vocabulary
        comes with the data): 4 d^2 per attention, 2 d ffn_dim per feed-forward."""
        d, f = self.dim, self.ffn_dim
        return self.enc_layers * (4 * d * d + 2 * d * f) + self.dec_layers * (8 * d * d + 2 * d * f)

    def __post_init__(self) -> None:
        check_fields(self, "model")
        for key, low, high in (
            ("dim", 1, 65536),
            ("heads", 1, 4096),
            ("ffn_dim", 1, 1 << 20),
            ("enc_layers", 1, 64),
            ("dec_layers", 1, 64),
            ("max_len", 1, 1 << 16),
        ):
            value = getattr(self, key)
            if not low <= value <= high:
                raise ConfigError(f"{key}: must be in [{low}, {high}], got {value}")
        if self.dim % self.heads:
            raise ConfigError(f"heads: dim={self.dim} is not divisible by heads={self.heads}")
        params = self.layer_parameters()
        if params > MAX_LAYER_PARAMETERS:
            raise ConfigError(
                f"dim/ffn_dim/layers: about {params:,} parameters in the layers "
                f"({16 * params / 1e9:,.0f} GB with Adam's state); at most "
                f"{MAX_LAYER_PARAMETERS:,}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout: must be in [0, 1), got {self.dropout}")
        if self.norm not in ("pre", "post"):
            raise ConfigError(f"norm: must be 'pre' or 'post', got {self.norm!r}")
        for key in ("attention", *ROLES):
            value = getattr(self, key)
            allowed = ATTENTION_KINDS + WINDOW_KINDS if key == "cross" else ATTENTION_KINDS
            if value in WINDOW_KINDS and key != "cross":
                raise ConfigError(f"{key}: {value!r} is a windowed kind, valid for cross only")
            if value is not None and value not in allowed:
                raise ConfigError(f"{key}: must be one of {', '.join(allowed)}, got {value!r}")
        if self.arch not in ARCHS:
            raise ConfigError(f"arch: must be one of {', '.join(ARCHS)}, got {self.arch!r}")
        if self.window_score not in WINDOW_SCORES:
            raise ConfigError(
                f"window_score: must be one of {', '.join(WINDOW_SCORES)}, "
                f"got {self.window_score!r}"
            )
        if not 0 <= self.window_d <= 4096:
            raise ConfigError(f"window_d: must be in [0, 4096], got {self.window_d}")
        if self.flexible_sigma is not None and not self.flexible_sigma > 0:
            raise ConfigError(f"flexible_sigma: must be > 0, got {self.flexible_sigma}")
        if self.flexible_tau is not None and not self.flexible_tau > 0:
            raise ConfigError(
                f"flexible_tau: must be > 0 (null = infinity), got {self.flexible_tau}"
            )
        for key in ("flexible_beta", "l0drop_lambda"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{key}: must be >= 0, got {getattr(self, key)}")
        if self.l0drop_rule is not None and self.l0drop_rule not in L0DROP_RULES:
            raise ConfigError(
                f"l0drop_rule: must be one of {', '.join(L0DROP_RULES)} or null, "
                f"got {self.l0drop_rule!r}"
            )
        if self.l0drop_rule is not None and not self.l0drop:
            raise ConfigError("l0drop_rule: a rule pattern needs l0drop: true")
        if not 0.0 <= self.l0drop_rule_rate <= 1.0:
            raise ConfigError(f"l0drop_rule_rate: must be in [0, 1], got {self.l0drop_rule_rate}")
        for kind in sorted({k for k in self.kinds.values() if k in QUANT_KINDS}):
            self.quant_core(kind)  # the core's own checks, under this config's key names

    def quant_core(self, kind: str):
        """The eatt.config.CoreConfig of a quantized kind's core (lengths: max_len)."""
        from eatt.config import CoreConfig

        if kind not in QUANT_KINDS:
            raise ValueError(f"{kind!r} is not a quantized kind ({', '.join(QUANT_KINDS)})")
        try:
            return CoreConfig(
                kind=QUANT_KINDS[kind],
                len_q=self.max_len,
                len_k=self.max_len,
                dim=self.dim,
                heads=self.heads,
                tau=self.tau,
                in_bits=self.quant_in_bits,
                in_frac=self.quant_in_frac,
                weight_bits=self.quant_weight_bits,
                weight_frac=self.quant_weight_frac,
                qk_bits=self.quant_acc_bits,
                v_bits=self.quant_acc_bits,
                out_bits=self.quant_acc_bits,
            )
        except ConfigError as err:
            # the core names its keys (weight_bits ...); this config calls them quant_*
            message = str(err)
            names = {k: "quant_acc_bits" for k in ("qk_bits", "v_bits", "out_bits")}
            names.update(len_q="max_len", len_k="max_len")
            for key in ("weight_bits", "weight_frac", "in_bits", "in_frac", *names):
                if message.startswith(f"{key}:"):
                    message = names.get(key, f"quant_{key}") + message[len(key) :]
                    break
            raise ConfigError(message) from None

    def kind(self, role: str) -> str:
        """The attention kind of ``role`` (one of :data:`ROLES`)."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; choose from {ROLES}")
        return getattr(self, role) or self.attention

    @property
    def windowed(self) -> bool:
        """Whether the cross-attention is one of the windowed kinds (eatt.model.windowed)."""
        return self.kind("cross") in WINDOW_KINDS

    @property
    def sigma(self) -> float:
        """Flexible Attention's sigma (Eq. 6): the configured one, or the paper's 1.5."""
        return 1.5 if self.flexible_sigma is None else self.flexible_sigma

    @property
    def kinds(self) -> dict[str, str]:
        return {role: self.kind(role) for role in ROLES}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def replace(self, **changes: Any) -> ModelConfig:
        return ModelConfig.from_dict({**self.to_dict(), **changes})

    @classmethod
    def from_dict(cls, data: Any, source: str = "model") -> ModelConfig:
        return dataclass_from_dict(cls, data, source)


def load_model_config(path: str | os.PathLike) -> ModelConfig:
    """A model config from a file: the whole file, or its ``model`` section if it has one."""
    data = read_mapping(path)
    if "model" in data:
        data = data["model"]
    try:
        return ModelConfig.from_dict(data)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None


# -- attention of one role -----------------------------------------------------------------------
Recorder = Callable[[str, Tensor, Tensor | None], None]


class RoleAttention(nn.Module):
    """One attention sub-layer of a given kind, with key/value caching for decoding.

    ``core`` holds the parameters (EAttention / DotProductAttention / a Synthesizer); this
    wrapper runs them so that keys and values can be cached and extended step by step.
    """

    def __init__(
        self,
        kind: str,
        dim: int,
        heads: int,
        tau: float = 1.0,
        max_len: int = 64,
        cfg: ModelConfig | None = None,
    ) -> None:
        super().__init__()
        if kind not in ATTENTION_KINDS + WINDOW_KINDS:
            raise ValueError(
                f"unknown attention kind {kind!r}; choose from {ATTENTION_KINDS + WINDOW_KINDS}"
            )
        self.kind = kind
        self.heads, self.d_head, self.dim = heads, dim // heads, dim
        #: a windowed kind: one head of eatt.model.windowed, then an output projection
        self.windowed = kind in WINDOW_KINDS
        #: the decoding state of the last windowed forward (aux losses read g(t) from it)
        self.last_state: dict | None = None
        if self.windowed:
            from .windowed import cross_attention

            self.core = cross_attention(
                cfg if cfg is not None else ModelConfig(cross=kind), dim, dim
            )
            self.o_proj = nn.Linear(dim, dim, bias=False)
        elif kind == "dense":
            self.core: nn.Module = DenseSynthesizer(dim, heads, max_len)
        elif kind == "randinit":
            self.core = RandomSynthesizer(dim, heads, max_len)
        elif kind in QUANT_KINDS:
            from eatt.quant.modules import QuantAttentionCore

            if cfg is None:
                cfg = ModelConfig(attention=kind, dim=dim, heads=heads, tau=tau, max_len=max_len)
            if (cfg.dim, cfg.heads, cfg.tau, cfg.max_len) != (dim, heads, tau, max_len):
                raise ValueError(
                    f"{kind}: cfg says dim {cfg.dim}, heads {cfg.heads}, tau {cfg.tau}, max_len "
                    f"{cfg.max_len}; the arguments say {dim}, {heads}, {tau}, {max_len}"
                )
            self.core = QuantAttentionCore(cfg.quant_core(kind))
        elif kind == "vanilla":
            self.core = attention_variant(kind, dim, heads)
        else:
            self.core = attention_variant(kind, dim, heads, tau=tau)
        self.synthesized = kind in ("dense", "randinit")
        self.quantized = kind in QUANT_KINDS
        self.binary = kind in ("eatt", "binary-dot", "quant-eatt")
        self.l1 = kind in ("eatt", "linear-l1", "quant-eatt")
        self.tau = float(tau)
        #: set by Seq2Seq.set_recorder: called with (name, binarized tensor, valid-row mask)
        self.recorder: Recorder | None = None
        self.stat_name = ""

    def _split(self, t: Tensor) -> Tensor:
        batch, length, _ = t.shape
        return t.view(batch, length, self.heads, self.d_head).transpose(1, 2)

    def _select(self, t: Tensor, which: str, padding: Tensor | None) -> Tensor:
        """E-ATT's feature selection f (Eq. 4) for Q/K inputs; identity for linear kinds.
        Quantized kinds first put ``t`` on the core's input grid (as the hardware sees it)."""
        if self.quantized:
            t = self.core.input_quant(t)
        if not self.binary:
            return t
        bits = self.core.select(t) if self.quantized else F.binarize(t, self.tau)
        if self.recorder is not None:
            self.recorder(f"{self.stat_name}{which}", bits, padding)
        return bits

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
        cache: dict | None = None,
        offset: int = 0,
        query_padding_mask: Tensor | None = None,
        counts: Tensor | None = None,
    ) -> Tensor:
        """Attend from ``x`` (batch, len_q, dim) to itself (``memory`` None) or to ``memory``.

        Args:
            key_padding_mask: (batch, len_k) bool, True = padding key.
            causal: query i (at absolute position ``offset + i``) sees keys 0..offset+i.
            cache: a dict this call reads and fills. Self-attention: keys/values of earlier
                positions, extended by ``x``'s. Cross-attention: the memory's keys/values,
                computed on the first call and reused.
            offset: absolute position of ``x``'s first row (incremental decoding).
            query_padding_mask: (batch, len_q) True = padding query; used only by statistics.
            counts: (batch, len_k) multiplicity of each memory row (L0Drop's compacted memory,
                Algorithm 1): ``log(count)`` is added to every score.
        """
        if self.windowed:
            return self._windowed(x, memory, key_padding_mask, cache, counts)
        self_attention = memory is None
        batch, len_q, _ = x.shape
        core = self.core
        x_sel = None if self.synthesized else self._select(x, "", query_padding_mask)
        if not self_attention and cache is not None and "v" in cache:
            k, v = cache.get("k"), cache["v"]
        else:
            source = x if self_attention else memory
            k = None
            if not self.synthesized:
                if self_attention:
                    y_sel = x_sel  # one thresholded copy serves both Q and K
                else:
                    y_sel = self._select(memory, "key", key_padding_mask)
                    if cache is not None and self.binary:
                        cache["binary"] = y_sel.to(torch.bool)
                k = self._split(self._project("k", y_sel))
            if self.quantized:
                v = self._split(core.project("v", core.input_quant(source)))
            else:
                v = self._split(core.v_proj(source))
            if cache is not None:
                if self_attention and "v" in cache:
                    v = torch.cat([cache["v"], v], dim=2)
                    if k is not None:
                        k = torch.cat([cache["k"], k], dim=2)
                cache["v"] = v
                if k is not None:
                    cache["k"] = k
        len_k = v.shape[2]
        mask = None
        if key_padding_mask is not None:
            mask = ~key_padding_mask[:, None, None, :]
        if causal:
            rows = torch.arange(len_q, device=x.device)[:, None] + (len_k - len_q)
            keep = torch.arange(len_k, device=x.device)[None, :] <= rows
            mask = keep if mask is None else mask & keep
        if counts is not None:
            keep = counts.gt(0)[:, None, None, :]
            mask = keep if mask is None else mask & keep
        if self.synthesized:
            out, _ = synthesized_attention(core.scores(x, len_k, offset), v, mask)
        else:
            q = self._split(self._project("q", x_sel))
            if self.l1:
                # F.l1_attention's math with an explicit kernel choice (see L1_IMPL)
                scores = F.l1_scores(q, k, impl=L1_IMPL) * core.scale
            elif counts is not None:
                scores = torch.matmul(q, k.transpose(-1, -2)) * core.scale
            if self.l1 or counts is not None:
                if counts is not None:  # Algorithm 1's counted softmax: scores + log(count)
                    log_c = torch.log(counts.clamp(min=1).to(scores.dtype))
                    scores = scores + log_c[:, None, None, :]
                out, _ = synthesized_attention(scores, v, mask)
            else:
                out, _ = F.dot_attention(q, k, v, mask=mask, scale=core.scale)
        out = out.transpose(1, 2).reshape(batch, len_q, self.dim)
        return core.output(out) if self.quantized else core.o_proj(out)

    def _project(self, which: str, t: Tensor) -> Tensor:
        """Q or K projection (quantized kinds: requantized to the core's Q/K format)."""
        if self.quantized:
            return self.core.project(which, t)
        return getattr(self.core, f"{which}_proj")(t)

    def _windowed(
        self,
        x: Tensor,
        memory: Tensor | None,
        padding: Tensor | None,
        cache: dict | None,
        counts: Tensor | None,
    ) -> Tensor:
        """Windowed cross-attention: the cached state advances one step per query row; without
        a cache all target positions at once (Flexible loops over t inside, exactly)."""
        if memory is None:
            raise ValueError(f"{self.kind} attention is cross-attention only (needs a memory)")
        if padding is None:
            padding = torch.zeros(memory.shape[:2], dtype=torch.bool, device=memory.device)
        if cache is not None:
            if "window" not in cache:
                cache["window"] = self.core.init_state(memory, padding, counts)
            state = cache["window"]
            context = torch.stack([self.core.step(x[:, i], state)[0] for i in range(x.shape[1])], 1)
        else:
            state = self.core.init_state(memory, padding, counts)
            context, _ = self.core.attend_all(x, state)
        self.last_state = state
        return self.o_proj(context)


# -- layers --------------------------------------------------------------------------------------
def sinusoidal_positions(length: int, dim: int, offset: int = 0) -> Tensor:
    """(length, dim) sinusoidal encodings of positions offset..offset+length-1 (Vaswani et al.)."""
    pos = torch.arange(offset, offset + length, dtype=torch.float64)[:, None]
    i = torch.arange(0, dim, 2, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, i / dim)
    out = torch.zeros(length, dim, dtype=torch.float64)
    out[:, 0::2] = torch.sin(angle)
    out[:, 1::2] = torch.cos(angle[:, : dim // 2])
    return out


class FeedForward(nn.Module):
    def __init__(self, dim: int, ffn_dim: int, dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(torch.relu(self.fc1(x))))


class _Residual(nn.Module):
    """x + dropout(f(norm(x))) (pre-norm) or norm(x + dropout(f(x))) (post-norm)."""

    def __init__(self, dim: int, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: Tensor, fn: Callable[[Tensor], Tensor]) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(fn(self.norm(x)))
        return self.norm(x + self.dropout(fn(x)))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = RoleAttention(
            cfg.kind("enc_self"), cfg.dim, cfg.heads, cfg.tau, cfg.max_len, cfg=cfg
        )
        self.ffn = FeedForward(cfg.dim, cfg.ffn_dim, cfg.dropout)
        self.res_attn = _Residual(cfg.dim, cfg.dropout, pre)
        self.res_ffn = _Residual(cfg.dim, cfg.dropout, pre)

    def forward(self, x: Tensor, padding: Tensor) -> Tensor:
        x = self.res_attn(
            x, lambda h: self.self_attn(h, key_padding_mask=padding, query_padding_mask=padding)
        )
        return self.res_ffn(x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = RoleAttention(
            cfg.kind("dec_self"), cfg.dim, cfg.heads, cfg.tau, cfg.max_len, cfg=cfg
        )
        self.cross_attn = RoleAttention(
            cfg.kind("cross"), cfg.dim, cfg.heads, cfg.tau, cfg.max_len, cfg=cfg
        )
        self.ffn = FeedForward(cfg.dim, cfg.ffn_dim, cfg.dropout)
        self.res_self = _Residual(cfg.dim, cfg.dropout, pre)
        self.res_cross = _Residual(cfg.dim, cfg.dropout, pre)
        self.res_ffn = _Residual(cfg.dim, cfg.dropout, pre)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_padding: Tensor,
        tgt_padding: Tensor | None,
        cache: dict | None,
        offset: int,
        counts: Tensor | None = None,
    ) -> Tensor:
        self_cache = None if cache is None else cache.setdefault("self", {})
        cross_cache = None if cache is None else cache.setdefault("cross", {})
        x = self.res_self(
            x,
            lambda h: self.self_attn(
                h,
                key_padding_mask=tgt_padding,
                causal=True,
                cache=self_cache,
                offset=offset,
                query_padding_mask=tgt_padding,
            ),
        )
        x = self.res_cross(
            x,
            lambda h: self.cross_attn(
                h,
                memory,
                key_padding_mask=src_padding,
                cache=cross_cache,
                offset=offset,
                query_padding_mask=tgt_padding,
                counts=counts,
            ),
        )
        return self.res_ffn(x, self.ffn)


# -- the model -----------------------------------------------------------------------------------
class Seq2Seq(nn.Module):
    """Transformer encoder-decoder over id tensors; ``forward(src, tgt_in) -> logits``."""

    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> None:
        super().__init__()
        if src_vocab_size < 5 or tgt_vocab_size < 5:
            raise ValueError("vocabulary sizes must be >= 5 (4 special tokens and a word)")
        self.cfg = cfg
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.src_embed = nn.Embedding(src_vocab_size, cfg.dim, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, cfg.dim, padding_idx=PAD)
        for emb in (self.src_embed, self.tgt_embed):
            nn.init.normal_(emb.weight, std=cfg.dim**-0.5)
            with torch.no_grad():
                emb.weight[PAD].zero_()
        self.dropout = nn.Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.dec_layers))
        pre = cfg.norm == "pre"
        self.enc_norm = nn.LayerNorm(cfg.dim) if pre else nn.Identity()
        self.dec_norm = nn.LayerNorm(cfg.dim) if pre else nn.Identity()
        self.out_proj = nn.Linear(cfg.dim, tgt_vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.out_proj.weight = self.tgt_embed.weight
        # dense / randinit weights are shaped by max_len; a quantized core's formats are sized
        # for it (its exp sums): longer inputs are refused
        sized = ("dense", "randinit", *QUANT_KINDS)
        self._uses_max_len = any(k in sized for k in cfg.kinds.values())
        #: L0Drop gates on the encoder output (learned, or a rule pattern when l0drop_rule)
        self.l0drop: nn.Module | None = None
        if cfg.l0drop and cfg.l0drop_rule is None:
            from .l0drop import L0Drop

            self.l0drop = L0Drop(cfg.dim)
        if cfg.l0drop and cfg.l0drop_rule is not None:
            from .l0drop import vocab_token_rank

            self.register_buffer("token_rank", vocab_token_rank(src_vocab_size), persistent=False)
        #: decode on L0Drop's compacted memory at inference (Algorithm 1); False = gated memory
        self.compact_memory = True
        #: eval-mode gate statistics: [closed gates, source positions] (sparsity rate)
        self.gate_stats = [0, 0]
        self._l0_penalty: Tensor | None = None
        for i, layer in enumerate(self.encoder):
            layer.self_attn.stat_name = f"enc_self/{i}/"
        for i, layer in enumerate(self.decoder):
            layer.self_attn.stat_name = f"dec_self/{i}/"
            layer.cross_attn.stat_name = f"cross/{i}/"

    # -- helpers -------------------------------------------------------------------------------
    def attention_modules(self) -> list[tuple[str, int, RoleAttention]]:
        """(role, layer index, module) of every attention sub-layer."""
        out = [("enc_self", i, layer.self_attn) for i, layer in enumerate(self.encoder)]
        for i, layer in enumerate(self.decoder):
            out += [("dec_self", i, layer.self_attn), ("cross", i, layer.cross_attn)]
        return out

    def set_recorder(self, recorder: Recorder | None) -> None:
        """Send every binarized Q/K input to ``recorder(name, bits, padding)`` (None = stop)."""
        for _, _, module in self.attention_modules():
            module.recorder = recorder

    def _embed(self, emb: nn.Embedding, ids: Tensor, offset: int = 0) -> Tensor:
        x = emb(ids) * math.sqrt(self.cfg.dim)
        pos = sinusoidal_positions(ids.shape[1], self.cfg.dim, offset).to(x.device, x.dtype)
        return self.dropout(x + pos)

    def _check_length(self, what: str, length: int) -> None:
        if self._uses_max_len and length > self.cfg.max_len:
            raise ValueError(
                f"{what} length {length} exceeds max_len={self.cfg.max_len} "
                "(dense/randinit weights and quantized cores are sized by max_len)"
            )

    # -- encoder / decoder ---------------------------------------------------------------------
    def _encode(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """(ungated memory, padding, L0Drop gates or None)."""
        self._check_length("source", src.shape[1])
        padding = src.eq(PAD)
        x = self._embed(self.src_embed, src)
        for layer in self.encoder:
            x = layer(x, padding)
        memory = self.enc_norm(x)
        if not self.cfg.l0drop:
            return memory, padding, None
        if self.l0drop is not None:
            _, gates, self._l0_penalty = self.l0drop(memory, padding)
        else:
            from .l0drop import rule_gates

            gates = rule_gates(
                src, padding, self.cfg.l0drop_rule, self.cfg.l0drop_rule_rate, self.token_rank
            ).to(memory.dtype)
        if not self.training:
            self.gate_stats[0] += int((gates.eq(0) & ~padding).sum())
            self.gate_stats[1] += int((~padding).sum())
        return memory, padding, gates

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """(memory (batch, src_len, dim), src padding mask (batch, src_len), True = pad).

        With ``l0drop`` the memory rows are multiplied by their gates (Eq. 4).
        """
        memory, padding, gates = self._encode(src)
        if gates is not None:
            memory = memory * gates.unsqueeze(-1)
        return memory, padding

    def encode_for_decoding(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """(memory, padding, counts) for search: L0Drop's compacted memory with counts
        (Algorithm 1) in eval mode when ``compact_memory``; else :meth:`encode` and None.

        Windowed and synthesized (dense / randinit) cross-attention keep the gated full memory:
        their weights depend on source positions, which compaction renumbers.
        """
        memory, padding, gates = self._encode(src)
        if gates is None:
            return memory, padding, None
        positional = self.cfg.windowed or self.cfg.kind("cross") in ("dense", "randinit")
        if self.training or not self.compact_memory or positional:
            return memory * gates.unsqueeze(-1), padding, None
        from .l0drop import compact

        memory, counts, padding = compact(memory, gates, padding)
        return memory, padding, counts

    def aux_losses(self) -> dict[str, Tensor]:
        """Auxiliary terms of the last forward: ``l0`` (expected L0 of the gates, L0Drop
        Eq. 10, per source position) and ``flexible_g`` (mean strength g(t), Flexible Eq. 9).
        train.py adds ``l0drop_lambda * l0 - flexible_beta * flexible_g``."""
        out: dict[str, Tensor] = {}
        if self.l0drop is not None and self._l0_penalty is not None:
            out["l0"] = self._l0_penalty
        if self.cfg.kind("cross") == "flexible":
            from .windowed import mean_strength

            states = [layer.cross_attn.last_state for layer in self.decoder]
            values = [mean_strength(st) for st in states if st is not None]
            if values:
                out["flexible_g"] = torch.stack(values).mean()
        return out

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_padding: Tensor,
        cache: list[dict] | None = None,
        offset: int = 0,
        counts: Tensor | None = None,
    ) -> Tensor:
        """Logits (batch, len, tgt_vocab) for target prefix ids ``tgt_in`` at ``offset``.

        With ``cache`` (from :meth:`init_cache`), ``tgt_in`` holds only the new positions.
        ``counts``: multiplicities of the memory rows (from :meth:`encode_for_decoding`).
        """
        self._check_length("target", offset + tgt_in.shape[1])
        tgt_padding = tgt_in.eq(PAD) if cache is None else None
        if tgt_padding is not None and not bool(tgt_padding.any()):
            tgt_padding = None
        x = self._embed(self.tgt_embed, tgt_in, offset)
        for i, layer in enumerate(self.decoder):
            x = layer(
                x,
                memory,
                src_padding,
                tgt_padding,
                None if cache is None else cache[i],
                offset,
                counts,
            )
        return self.out_proj(self.dec_norm(x))

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        memory, padding = self.encode(src)
        return self.decode(tgt_in, memory, padding)

    def init_cache(self) -> list[dict]:
        """An empty per-layer cache for incremental decoding."""
        return [{} for _ in self.decoder]

    @staticmethod
    def reorder_cache(cache: list[dict], index: Tensor) -> list[dict]:
        """Select batch rows ``index`` of every cached tensor (beam search)."""
        from .windowed import reorder_state

        return [
            {
                part: {
                    k: reorder_state(t, index) if isinstance(t, dict) else t.index_select(0, index)
                    for k, t in entries.items()
                }
                for part, entries in layer.items()
            }
            for layer in cache
        ]


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> nn.Module:
    """The model ``cfg.arch`` names: :class:`Seq2Seq`, or ``eatt.model.rnn.LSTMSeq2Seq``."""
    if cfg.arch == "lstm":
        from .rnn import LSTMSeq2Seq

        return LSTMSeq2Seq(cfg, src_vocab_size, tgt_vocab_size)
    return Seq2Seq(cfg, src_vocab_size, tgt_vocab_size)


# -- checkpoints ---------------------------------------------------------------------------------
def save_checkpoint(
    path: str | os.PathLike,
    model: Seq2Seq,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    extra: dict | None = None,
) -> None:
    """Model config, vocabularies, state dict (and ``extra``) through a temp file + rename."""
    payload = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "model_config": model.cfg.to_dict(),
        "src_vocab": src_vocab.to_list(),
        "tgt_vocab": tgt_vocab.to_list(),
        "state_dict": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        **(extra or {}),
    }
    atomic_write(path, lambda tmp: torch.save(payload, tmp))


def load_checkpoint(
    path: str | os.PathLike,
    device: str | torch.device = "cpu",
    overrides: dict[str, Any] | None = None,
) -> tuple[Seq2Seq, Vocab, Vocab, dict]:
    """(model in eval mode, src vocab, tgt vocab, the whole payload) of a save_checkpoint file.

    ``overrides`` replaces model config keys that hold no weights (e.g. ``flexible_tau``: one
    trained Flexible model evaluated at many thresholds). Anything else raises a one-line
    ValueError that starts with the path.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a folder; give its best.pt or last.pt")
    if not path.is_file():
        raise ValueError(f"{path}: no such checkpoint file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        why = _first_line(err).split(". ")[0]
        raise ValueError(f"{path}: not a checkpoint written by eatt train ({why})") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise ValueError(f"{path}: not a seq2seq checkpoint (format {found!r})")
    try:
        cfg = ModelConfig.from_dict(payload["model_config"])
        if overrides:
            cfg = cfg.replace(**overrides)
        src_vocab = Vocab.from_list(payload["src_vocab"])
        tgt_vocab = Vocab.from_list(payload["tgt_vocab"])
        model = build_model(cfg, len(src_vocab), len(tgt_vocab))
        model.load_state_dict(payload["state_dict"])
    except KeyError as err:
        raise ValueError(f"{path}: checkpoint lacks {err}") from None
    except (ValueError, RuntimeError, ConfigError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: {_first_line(err)}") from None
    return model.to(device).eval(), src_vocab, tgt_vocab, payload
