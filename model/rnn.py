"""LSTM encoder-decoder with attention (Luong, Pham & Manning, 2015), the RNN setting of the
Flexible Attention and L0Drop papers, with the same interface as the Transformer
:class:`~eatt.model.seq2seq.Seq2Seq` so training, evaluation and beam search work unchanged.

* Encoder: embeddings -> a bidirectional LSTM of ``enc_layers`` layers, ``dim / 2`` units per
  direction, so an encoder row hbar_s has ``dim`` features.
* L0Drop (``cfg.l0drop``; Zhang et al. 2021, Eq. 4-13) or a rule pattern (``cfg.l0drop_rule``,
  Sec. 7) gates the encoder rows before the decoder sees them (:mod:`eatt.model.l0drop`).
* Decoder: an LSTM of ``dec_layers`` layers whose input is ``[y_{t-1} embedding; htilde_{t-1}]``
  (input feeding, Luong Sec. 3.3); its top state h_t queries the cross-attention
  (:func:`eatt.model.windowed.cross_attention`: global, local-m, local-p or Flexible, with the
  configured score; or the window unit, kinds quant-global / quant-local-m / quant-local-p,
  eatt.quant.window_cross) for the context c_t; the attentional hidden state is
  ``htilde_t = tanh(W_c [c_t; h_t])`` (Luong Eq. 5) and ``p(y_t) = softmax(W_s htilde_t)`` (Eq. 6).
  Flexible's strength g(t) (Eq. 8) sees ``[h_t; i_t]`` with i_t the input embedding.
* Inference with gates (eval mode, global attention): :meth:`LSTMSeq2Seq.encode_for_decoding`
  gives the compacted memory of Algorithm 1 -- the kept rows and one zero row counted N - N'
  times -- and ``decode(..., counts=...)`` attends to it (counts in the softmax): the same output
  as the full gated memory with N' + 1 instead of N positions per step. Windowed kinds keep the
  full memory: their windows are defined on source positions, which compaction would renumber.

The decoder's state at the start is zero (not the encoder's final state), so everything the
decoder knows of the source passes through the (gated) attention memory, as L0Drop requires.
Sources are padded at the end (as :func:`eatt.model.data.make_batches` does).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .config import FLEXIBLE_KINDS, QUANT_WINDOW_KINDS, ModelConfig
from .data import PAD
from .l0drop import (
    L0Drop,
    compact,
    rule_gates,
    source_words,
    sparsity_rate,
    vocab_token_rank,
)
from .windowed import cross_attention, mean_strength, vision_span

__all__ = ["LSTMSeq2Seq"]

#: Luong et al. (Sec. 4.1): parameters initialized uniformly in [-0.1, 0.1]
INIT_RANGE = 0.1


class LSTMSeq2Seq(nn.Module):
    """Bidirectional-LSTM encoder, input-feeding LSTM decoder; ``forward(src, tgt_in) -> logits``.

    ``cfg`` is a :class:`~eatt.model.config.ModelConfig` with ``arch: lstm``: ``dim`` is the
    hidden size, ``enc_layers`` / ``dec_layers`` the LSTM depths, the cross kind and
    ``window_score`` the attention; self-attention kinds, ``heads`` and ``ffn_dim`` are unused.
    """

    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> None:
        super().__init__()
        if src_vocab_size < 5 or tgt_vocab_size < 5:
            raise ValueError("vocabulary sizes must be >= 5 (4 special tokens and a word)")
        if cfg.dim % 2:
            raise ValueError(f"dim must be even for the bidirectional encoder, got {cfg.dim}")
        self.cfg = cfg
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        dim = cfg.dim
        self.src_embed = nn.Embedding(src_vocab_size, dim, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, dim, padding_idx=PAD)
        self.encoder = nn.LSTM(
            dim,
            dim // 2,
            cfg.enc_layers,
            batch_first=True,
            bidirectional=True,
            dropout=cfg.dropout if cfg.enc_layers > 1 else 0.0,
        )
        self.decoder = nn.LSTM(
            2 * dim,  # [y_{t-1} embedding; htilde_{t-1}]: input feeding
            dim,
            cfg.dec_layers,
            batch_first=True,
            dropout=cfg.dropout if cfg.dec_layers > 1 else 0.0,
        )
        if cfg.attention_of("cross") in QUANT_WINDOW_KINDS:
            # Brevitas: loaded only for the quantized kinds (model/ stays below quant/)
            from eatt.quant.window_cross import QuantWindowedAttention

            form = QUANT_WINDOW_KINDS[cfg.attention_of("cross")]
            self.attention = QuantWindowedAttention(
                cfg.quant_window(), form, tau=cfg.flexible_tau, g_input_dim=dim
            )
        else:
            self.attention = cross_attention(cfg, dim, dim, g_input_dim=dim)
        self.w_c = nn.Linear(2 * dim, dim, bias=False)  # htilde = tanh(W_c [c; h])
        self.out_proj = nn.Linear(dim, tgt_vocab_size, bias=False)  # W_s
        self.dropout = nn.Dropout(cfg.dropout)
        self.l0drop = L0Drop(dim) if cfg.l0drop and cfg.l0drop_rule is None else None
        for p in self.parameters():
            nn.init.uniform_(p, -INIT_RANGE, INIT_RANGE)
        with torch.no_grad():
            self.src_embed.weight[PAD].zero_()
            self.tgt_embed.weight[PAD].zero_()
        if cfg.tie_embeddings:
            self.out_proj.weight = self.tgt_embed.weight
        # rule patterns: frequency rank by id (Vocab is built most frequent first) and, when the
        # owner sets them (set_token_counts), the training counts that fix the Freq cutoff
        self.register_buffer("token_rank", vocab_token_rank(src_vocab_size), persistent=False)
        self.register_buffer("token_counts", torch.zeros(src_vocab_size, dtype=torch.long))
        self._uses_max_len = False  # (the window unit limits the source: its init_state)
        #: decode on Algorithm 1's compacted memory at inference (off: the full gated memory)
        self.compact_memory = True
        #: gates (B, S) and padding of the last encode (sparsity rate, analysis)
        self.last_gates: Tensor | None = None
        self.last_padding: Tensor | None = None
        self.last_src: Tensor | None = None
        #: eval-mode gate statistics: [closed gates, source positions] (sparsity rate)
        self.gate_stats = [0, 0]
        self._l0_penalty: Tensor | None = None
        self._tgt_real: Tensor | None = None
        self._attention_state: dict | None = None
        self.recorder = None

    # -- helpers -------------------------------------------------------------------------------
    @property
    def gated(self) -> bool:
        """Whether gates (learned L0Drop or a rule pattern) sit between encoder and decoder."""
        return bool(self.cfg.l0drop) or self.cfg.l0drop_rule is not None

    def attention_modules(self) -> list:
        """(role, layer index, module): the one cross-attention."""
        return [("cross", 0, self.attention)]

    def set_recorder(self, recorder) -> None:
        """Kept for interface parity: the LSTM model has no binarized Q/K inputs to record
        except in the eatt score, whose statistics are not collected here."""
        self.recorder = recorder

    def set_token_counts(self, counts: Tensor) -> None:
        """Training counts of each source id, for the Freq / Inv Freq cutoffs (else per batch)."""
        if counts.shape != (self.src_vocab_size,):
            raise ValueError(f"token counts must have {self.src_vocab_size} entries")
        self.token_counts.copy_(counts.to(self.token_counts))

    def aux_losses(self) -> dict[str, Tensor]:
        """Extra loss terms of the last forward: ``l0`` (expected L0 / source token, Eq. 10),
        ``flexible_g`` (Flexible Eq. 9's strength term per sentence, ``mean_strength``); the
        trainer applies the config weights."""
        out: dict[str, Tensor] = {}
        if self._l0_penalty is not None:
            out["l0"] = self._l0_penalty
        if self.attention.kind in FLEXIBLE_KINDS and self._attention_state is not None:
            out["flexible_g"] = mean_strength(self._attention_state, self._tgt_real)
        return out

    def vision_span(self) -> float:
        """Average positions scored per decoding step in the last decode (Flexible paper)."""
        return 0.0 if self._attention_state is None else vision_span(self._attention_state)

    def sparsity_rate(self) -> float:
        """Sparsity rate of the last encode's gates (L0Drop Sec. 6.1); 0.0 without gates."""
        if self.last_gates is None:
            return 0.0
        return sparsity_rate(self.last_gates, self.last_padding, self.last_src)

    # -- encoder / decoder ---------------------------------------------------------------------
    def _encode(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """(ungated memory, padding, gates or None); padding rows of the memory are zero."""
        padding = src.eq(PAD)
        lengths = (~padding).sum(1).clamp(min=1).cpu()
        x = self.dropout(self.src_embed(src))
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.encoder(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        memory = memory.masked_fill(padding[..., None], 0.0)
        self._l0_penalty = None
        if not self.gated:
            gates = None
        elif self.l0drop is not None:
            _, gates, self._l0_penalty = self.l0drop(memory, padding)
        else:
            counts = self.token_counts if bool(self.token_counts.any()) else None
            gates = rule_gates(
                src,
                padding,
                self.cfg.l0drop_rule,
                self.cfg.l0drop_rule_rate,
                self.token_rank,
                counts,
            ).to(memory.dtype)
        self.last_gates = None if gates is None else gates.detach()
        self.last_padding = padding
        self.last_src = src
        if gates is not None and not self.training:
            words = source_words(src, padding)
            self.gate_stats[0] += int((gates.eq(0) & words).sum())
            self.gate_stats[1] += int(words.sum())
        return memory, padding, gates

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """(memory (batch, src_len, dim), padding (batch, src_len), True = pad).

        Padding rows of the memory are zero; with gates, each row is multiplied by its gate
        (L0Drop Eq. 4).
        """
        memory, padding, gates = self._encode(src)
        if gates is not None:
            memory = memory * gates.unsqueeze(-1)
        return memory, padding

    def encode_for_decoding(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """(memory, padding, counts) for search: Algorithm 1's compacted memory with counts in
        eval mode with gates, global (or quant-global) attention and ``compact_memory``; else
        :meth:`encode` and None. Kinds on source positions keep the full gated memory:
        compaction renumbers them."""
        memory, padding, gates = self._encode(src)
        if gates is None:
            return memory, padding, None
        if self.training or not self.compact_memory or self.cfg.positional_cross:
            return memory * gates.unsqueeze(-1), padding, None
        memory, counts, padding = compact(memory, gates, padding)
        return memory, padding, counts

    def init_cache(self) -> dict:
        """An empty cache for incremental decoding (filled by the first :meth:`decode`)."""
        return {}

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_padding: Tensor,
        cache: dict | None = None,
        offset: int = 0,
        counts: Tensor | None = None,
    ) -> Tensor:
        """Logits (batch, len, tgt_vocab) for target ids ``tgt_in`` at positions offset...

        Without ``cache`` the whole prefix is decoded from the start (``offset`` must be 0);
        with a cache from :meth:`init_cache`, ``tgt_in`` holds only the new positions and the
        cache carries the LSTM states, the input-feed vector htilde and the attention state.
        ``counts``: multiplicities of the memory rows (from :meth:`encode_for_decoding`).
        """
        batch = tgt_in.shape[0]
        if cache is None and offset != 0:
            raise ValueError("decoding from offset > 0 needs the cache of the earlier positions")
        # the steps of this decode that are real tokens (Flexible's Eq. 9 averages over them)
        self._tgt_real = tgt_in.ne(PAD) if cache is None else None
        if cache is None or not cache:
            layers, dim = self.cfg.dec_layers, self.cfg.dim
            zeros = memory.new_zeros(layers, batch, dim)
            state = {
                "h": zeros,
                "c": zeros,
                "feed": memory.new_zeros(batch, dim),
                "attn": self.attention.init_state(memory, src_padding, counts),
            }
        else:
            state = cache
        h, c, feed, attn = state["h"], state["c"], state["feed"], state["attn"]
        emb = self.dropout(self.tgt_embed(tgt_in))
        outs = []
        for i in range(tgt_in.shape[1]):
            x_t = torch.cat([emb[:, i], feed], dim=-1)[:, None]
            out, (h, c) = self.decoder(x_t, (h, c))
            h_t = out[:, 0]
            context, _ = self.attention.step(h_t, attn, g_input=emb[:, i])
            feed = torch.tanh(self.w_c(torch.cat([context, h_t], dim=-1)))
            outs.append(feed)
        if cache is not None:
            cache.update(h=h, c=c, feed=feed, attn=attn)
        self._attention_state = attn
        hidden = torch.stack(outs, 1) if outs else memory.new_zeros(batch, 0, self.cfg.dim)
        return self.out_proj(self.dropout(hidden))

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        memory, padding = self.encode(src)
        return self.decode(tgt_in, memory, padding)

    def reorder_cache(self, cache: dict, index: Tensor) -> dict:
        """Select batch rows ``index`` of the cache (beam search)."""
        if not cache:
            return {}
        return {
            "h": cache["h"].index_select(1, index),
            "c": cache["c"].index_select(1, index),
            "feed": cache["feed"].index_select(0, index),
            "attn": self.attention.reorder_state(cache["attn"], index),
        }
