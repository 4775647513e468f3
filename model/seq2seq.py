"""Transformer encoder-decoder (Vaswani et al., 2017) with the attention kind chosen per role.

Roles: ``enc_self`` (encoder self-attention), ``dec_self`` (decoder self-attention, causal),
``cross`` (decoder-encoder attention). Kinds (:data:`ATTENTION_KINDS`):

* ``vanilla`` -- :class:`~eatt.model.attention.DotProductAttention`;
* ``eatt`` and the Table 5 ablations ``binary-dot`` (discrete selection only) and
  ``linear-l1`` (L1 distance only) -- :class:`~eatt.model.attention.EAttention`;
* ``dense`` / ``randinit`` -- the Synthesizer variants (:mod:`eatt.model.synthesizer`), shaped
  by ``max_len``.

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
    "ROLES",
    "ModelConfig",
    "RoleAttention",
    "Seq2Seq",
    "load_checkpoint",
    "load_model_config",
    "read_mapping",
    "save_checkpoint",
]

ATTENTION_KINDS = ("vanilla", "eatt", "binary-dot", "linear-l1", "dense", "randinit")
ROLES = ("enc_self", "dec_self", "cross")
CHECKPOINT_FORMAT = "eatt.model.Seq2Seq"
CHECKPOINT_VERSION = 1

#: L1 score kernel of the seq2seq model (eatt.model.functional.l1_scores ``impl``). Not
#: "auto": length-bucketed batches change shape nearly every step, and "auto" compiles a kernel
#: per shape (seconds each, then torch.compile's recompile limit); cdist needs no compiling.
L1_IMPL = "cdist"


# -- config --------------------------------------------------------------------------------------
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
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout: must be in [0, 1), got {self.dropout}")
        if self.norm not in ("pre", "post"):
            raise ConfigError(f"norm: must be 'pre' or 'post', got {self.norm!r}")
        for key in ("attention", *ROLES):
            value = getattr(self, key)
            if value is not None and value not in ATTENTION_KINDS:
                raise ConfigError(
                    f"{key}: must be one of {', '.join(ATTENTION_KINDS)}, got {value!r}"
                )

    def kind(self, role: str) -> str:
        """The attention kind of ``role`` (one of :data:`ROLES`)."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; choose from {ROLES}")
        return getattr(self, role) or self.attention

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
        self, kind: str, dim: int, heads: int, tau: float = 1.0, max_len: int = 64
    ) -> None:
        super().__init__()
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"unknown attention kind {kind!r}; choose from {ATTENTION_KINDS}")
        self.kind = kind
        self.heads, self.d_head, self.dim = heads, dim // heads, dim
        if kind == "dense":
            self.core: nn.Module = DenseSynthesizer(dim, heads, max_len)
        elif kind == "randinit":
            self.core = RandomSynthesizer(dim, heads, max_len)
        elif kind == "vanilla":
            self.core = attention_variant(kind, dim, heads)
        else:
            self.core = attention_variant(kind, dim, heads, tau=tau)
        self.synthesized = kind in ("dense", "randinit")
        self.binary = kind in ("eatt", "binary-dot")
        self.l1 = kind in ("eatt", "linear-l1")
        self.tau = float(tau)
        #: set by Seq2Seq.set_recorder: called with (name, binarized tensor, valid-row mask)
        self.recorder: Recorder | None = None
        self.stat_name = ""

    def _split(self, t: Tensor) -> Tensor:
        batch, length, _ = t.shape
        return t.view(batch, length, self.heads, self.d_head).transpose(1, 2)

    def _select(self, t: Tensor, which: str, padding: Tensor | None) -> Tensor:
        """E-ATT's feature selection f (Eq. 4) for Q/K inputs; identity for linear kinds."""
        if not self.binary:
            return t
        bits = F.binarize(t, self.tau)
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
        """
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
                k = self._split(core.k_proj(y_sel))
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
        if self.synthesized:
            out, _ = synthesized_attention(core.scores(x, len_k, offset), v, mask)
        else:
            q = self._split(core.q_proj(x_sel))
            if self.l1:
                # F.l1_attention's math with an explicit kernel choice (see L1_IMPL)
                scores = F.l1_scores(q, k, impl=L1_IMPL) * core.scale
                out, _ = synthesized_attention(scores, v, mask)
            else:
                out, _ = F.dot_attention(q, k, v, mask=mask, scale=core.scale)
        return core.o_proj(out.transpose(1, 2).reshape(batch, len_q, self.dim))


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
            cfg.kind("enc_self"), cfg.dim, cfg.heads, cfg.tau, cfg.max_len
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
            cfg.kind("dec_self"), cfg.dim, cfg.heads, cfg.tau, cfg.max_len
        )
        self.cross_attn = RoleAttention(cfg.kind("cross"), cfg.dim, cfg.heads, cfg.tau, cfg.max_len)
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
        self._uses_max_len = any(k in ("dense", "randinit") for k in cfg.kinds.values())
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
                "(dense/randinit attention weights are shaped by max_len)"
            )

    # -- encoder / decoder ---------------------------------------------------------------------
    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """(memory (batch, src_len, dim), src padding mask (batch, src_len), True = pad)."""
        self._check_length("source", src.shape[1])
        padding = src.eq(PAD)
        x = self._embed(self.src_embed, src)
        for layer in self.encoder:
            x = layer(x, padding)
        return self.enc_norm(x), padding

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_padding: Tensor,
        cache: list[dict] | None = None,
        offset: int = 0,
    ) -> Tensor:
        """Logits (batch, len, tgt_vocab) for target prefix ids ``tgt_in`` at ``offset``.

        With ``cache`` (from :meth:`init_cache`), ``tgt_in`` holds only the new positions.
        """
        self._check_length("target", offset + tgt_in.shape[1])
        tgt_padding = tgt_in.eq(PAD) if cache is None else None
        if tgt_padding is not None and not bool(tgt_padding.any()):
            tgt_padding = None
        x = self._embed(self.tgt_embed, tgt_in, offset)
        for i, layer in enumerate(self.decoder):
            x = layer(
                x, memory, src_padding, tgt_padding, None if cache is None else cache[i], offset
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
        return [
            {
                part: {k: t.index_select(0, index) for k, t in entries.items()}
                for part, entries in layer.items()
            }
            for layer in cache
        ]


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
    path: str | os.PathLike, device: str | torch.device = "cpu"
) -> tuple[Seq2Seq, Vocab, Vocab, dict]:
    """(model in eval mode, src vocab, tgt vocab, the whole payload) of a save_checkpoint file.

    Anything else raises a one-line ValueError that starts with the path.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such checkpoint file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise ValueError(f"{path}: not a checkpoint ({_first_line(err)})") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise ValueError(f"{path}: not a seq2seq checkpoint (format {found!r})")
    try:
        cfg = ModelConfig.from_dict(payload["model_config"])
        src_vocab = Vocab.from_list(payload["src_vocab"])
        tgt_vocab = Vocab.from_list(payload["tgt_vocab"])
        model = Seq2Seq(cfg, len(src_vocab), len(tgt_vocab))
        model.load_state_dict(payload["state_dict"])
    except KeyError as err:
        raise ValueError(f"{path}: checkpoint lacks {err}") from None
    except (ValueError, RuntimeError) as err:
        raise ValueError(f"{path}: {_first_line(err)}") from None
    return model.to(device).eval(), src_vocab, tgt_vocab, payload
