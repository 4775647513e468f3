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
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from eatt.config import ConfigError, atomic_write, read_mapping
from eatt.config import first_line as _first_line

from .config import (  # the config lives below the model modules; re-exported from here
    ARCHS,
    ATTENTION_KINDS,
    FLEXIBLE_KINDS,
    L0DROP_RULES,
    MAX_LAYER_PARAMETERS,
    QUANT_KINDS,
    QUANT_WINDOW_KINDS,
    ROLES,
    WINDOW_KINDS,
    WINDOW_SCORES,
    ModelConfig,
    load_model_config,
)
from .data import PAD, Vocab
from .l0drop import (
    L0Drop,
    compact,
    rule_gates,
    source_words,
    vocab_token_rank,
)
from .rnn import LSTMSeq2Seq
from .role_attention import (  # noqa: F401 - re-exported: one role's attention
    ARITHMETICS,
    L1_IMPL,
    Recorder,
    RoleAttention,
    set_arithmetic,
)
from .windowed import mean_strength, reorder_state

__all__ = [
    "ARCHS",
    "ATTENTION_KINDS",
    "CHECKPOINT_FORMAT",
    "L0DROP_RULES",
    "MAX_LAYER_PARAMETERS",
    "QUANT_KINDS",
    "ROLES",
    "ModelConfig",
    "RoleAttention",
    "Seq2Seq",
    "WINDOW_KINDS",
    "WINDOW_SCORES",
    "build_model",
    "load_checkpoint",
    "load_model_config",
    "read_mapping",
    "save_checkpoint",
]


CHECKPOINT_FORMAT = "eatt.model.Seq2Seq"
CHECKPOINT_VERSION = 1


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
            cfg.attention_of("enc_self"), cfg.dim, cfg.heads, cfg.tau, cfg.max_len, cfg=cfg
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
            cfg.attention_of("dec_self"), cfg.dim, cfg.heads, cfg.tau, cfg.max_len, cfg=cfg
        )
        self.cross_attn = RoleAttention(
            cfg.attention_of("cross"), cfg.dim, cfg.heads, cfg.tau, cfg.max_len, cfg=cfg
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
        self._uses_max_len = any(k in sized for k in cfg.attentions.values())
        #: the window unit (quant-global, quant-local-*) holds max_len memory rows: it limits
        #: the source only
        self._source_max_len = self._uses_max_len or cfg.attention_of("cross") in QUANT_WINDOW_KINDS
        #: L0Drop gates on the encoder output (learned, or a rule pattern when l0drop_rule)
        self.l0drop: nn.Module | None = None
        if cfg.l0drop and cfg.l0drop_rule is None:
            self.l0drop = L0Drop(cfg.dim)
        if cfg.l0drop and cfg.l0drop_rule is not None:
            self.register_buffer("token_rank", vocab_token_rank(src_vocab_size), persistent=False)
        #: decode on L0Drop's compacted memory at inference (Algorithm 1); False = gated memory
        self.compact_memory = True
        #: eval-mode gate statistics: [closed gates, source positions] (sparsity rate)
        self.gate_stats = [0, 0]
        self._l0_penalty: Tensor | None = None
        self._tgt_real: Tensor | None = None
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

    def set_arithmetic(self, arithmetic: str) -> None:
        """How the quantized kinds compute in eval (RoleAttention.arithmetic): "hardware",
        "exported" or "surrogate"."""
        set_arithmetic(self, arithmetic)

    def set_recorder(self, recorder: Recorder | None) -> None:
        """Send every binarized Q/K input to ``recorder(name, bits, padding)`` (None = stop)."""
        for _, _, module in self.attention_modules():
            module.recorder = recorder

    def _embed(self, emb: nn.Embedding, ids: Tensor, offset: int = 0) -> Tensor:
        x = emb(ids) * math.sqrt(self.cfg.dim)
        pos = sinusoidal_positions(ids.shape[1], self.cfg.dim, offset).to(x.device, x.dtype)
        return self.dropout(x + pos)

    def check_length(self, what: str, length: int) -> None:
        """ValueError where a source or target of ``length`` tokens exceeds max_len for the
        parts sized by it (the quantized cores, dense/randinit weights, the window memory)."""
        limited = self._source_max_len if what == "source" else self._uses_max_len
        if limited and length > self.cfg.max_len:
            raise ValueError(
                f"{what} length {length} exceeds max_len={self.cfg.max_len} "
                "(dense/randinit weights, quantized cores and the window unit's memory are "
                "sized by max_len)"
            )

    # -- encoder / decoder ---------------------------------------------------------------------
    def _encode(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """(ungated memory, padding, L0Drop gates or None)."""
        self.check_length("source", src.shape[1])
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
            gates = rule_gates(
                src, padding, self.cfg.l0drop_rule, self.cfg.l0drop_rule_rate, self.token_rank
            ).to(memory.dtype)
        if not self.training:
            words = source_words(src, padding)
            self.gate_stats[0] += int((gates.eq(0) & words).sum())
            self.gate_stats[1] += int(words.sum())
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

        Cross kinds on source positions (local-m, local-p, Flexible, their quantized kinds; the
        dense / randinit synthesizers) keep the gated full memory: compaction renumbers them.
        Global and quant-global (the window unit over the whole memory) decode on it.
        """
        memory, padding, gates = self._encode(src)
        if gates is None:
            return memory, padding, None
        if self.training or not self.compact_memory or self.cfg.positional_cross:
            return memory * gates.unsqueeze(-1), padding, None
        memory, counts, padding = compact(memory, gates, padding)
        return memory, padding, counts

    def aux_losses(self) -> dict[str, Tensor]:
        """Auxiliary terms of the last forward: ``l0`` (expected L0 of the gates, L0Drop
        Eq. 10, per source position) and ``flexible_g`` (Flexible Eq. 9's strength term per
        sentence over its real target steps, :func:`~eatt.model.windowed.mean_strength`;
        averaged over the decoder layers, each with its own g).
        train.py adds ``l0drop_lambda * l0 - flexible_beta * flexible_g``."""
        out: dict[str, Tensor] = {}
        if self.l0drop is not None and self._l0_penalty is not None:
            out["l0"] = self._l0_penalty
        if self.cfg.attention_of("cross") in FLEXIBLE_KINDS:
            states = [layer.cross_attn.last_state for layer in self.decoder]
            values = [mean_strength(st, self._tgt_real) for st in states if st is not None]
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
        self.check_length("target", offset + tgt_in.shape[1])
        tgt_padding = tgt_in.eq(PAD) if cache is None else None
        # the steps of this decode that are real tokens (Flexible's Eq. 9 averages over them)
        self._tgt_real = None if tgt_padding is None else ~tgt_padding
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
        cfg = ModelConfig.from_dict(payload["model_config"], upgrade=True)
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
