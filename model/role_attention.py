"""One attention sub-layer of the seq2seq model (``RoleAttention``): the attention kind of its
role (E-ATT, vanilla, the Synthesizer's, the windowed kinds and the quantized hardware cores),
with key/value caching for incremental decoding, and the arithmetic a quantized kind computes
in (``set_arithmetic``: the core's integers, the exported core's, or the training surrogate).
eatt.model.seq2seq builds the model from it and re-exports it."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from eatt.mechanisms import mechanism_of, synthesized_kinds

from . import functional as F
from .attention import ATTENTION_VARIANTS, attention_variant, variant_switches
from .config import (  # the config lives below the model modules; re-exported from here
    ATTENTION_KINDS,
    QUANT_KINDS,
    QUANT_WINDOW_KINDS,
    WINDOW_KINDS,
    ModelConfig,
)
from .l0drop import (
    counted_softmax,
)
from .synthesizer import synthesized_attention
from .windowed import cross_attention

#: L1 score kernel of the seq2seq model (eatt.model.functional.l1_scores ``impl``). Not
#: "auto": length-bucketed batches change shape nearly every step, and "auto" compiles a kernel
#: per shape (seconds each, then torch.compile's recompile limit); cdist needs no compiling.
L1_IMPL = "cdist"


# -- attention of one role -----------------------------------------------------------------------
Recorder = Callable[[str, Tensor, Tensor | None], None]


class RoleAttention(nn.Module):
    """One attention sub-layer of a given kind, with key/value caching for decoding.

    ``core`` holds the parameters (EAttention / DotProductAttention / a Synthesizer); this
    wrapper runs them so that keys and values can be cached and extended step by step.
    """

    #: hardware calls with K and V cached per key row (eatt.quant.decoding); False (on the
    #: class or a module): GoldenCore.forward on each whole call, the reference of the tests
    cached_golden = True

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
        known = ATTENTION_KINDS + WINDOW_KINDS + tuple(QUANT_WINDOW_KINDS)
        if kind not in known:
            raise ValueError(f"unknown attention kind {kind!r}; choose from {known}")
        self.kind = kind
        self.heads, self.d_head, self.dim = heads, dim // heads, dim
        #: a windowed kind: one head of eatt.model.windowed (or of the window unit: quant-global,
        #: quant-local-m, quant-local-p), then an output projection
        self.windowed = kind in WINDOW_KINDS or kind in QUANT_WINDOW_KINDS
        #: the decoding state of the last windowed forward (aux losses read g(t) from it)
        self.last_state: dict | None = None
        if kind in QUANT_WINDOW_KINDS:
            # Brevitas: loaded only for the quantized kinds, as below
            from eatt.quant.window_cross import QuantWindowedAttention

            if cfg is None:
                cfg = ModelConfig(cross=kind, window_score="eatt", dim=dim, max_len=max_len)
            self.core = QuantWindowedAttention(
                cfg.quant_window(), QUANT_WINDOW_KINDS[kind], tau=cfg.flexible_tau
            )
            self.o_proj = nn.Linear(dim, dim, bias=False)
        elif self.windowed:
            self.core = cross_attention(
                cfg if cfg is not None else ModelConfig(cross=kind), dim, dim
            )
            self.o_proj = nn.Linear(dim, dim, bias=False)
        elif kind in synthesized_kinds():  # the Synthesizer's float module, by its mechanism
            self.core: nn.Module = mechanism_of(kind).load("float_module")(dim, heads, max_len)
        elif kind in QUANT_KINDS:
            # Brevitas: loaded only for the quantized kinds (the application layer above
            # quant/; the float reference below it never imports quant/)
            from eatt.quant.modules import QuantAttentionCore

            if cfg is None:
                cfg = ModelConfig(attention=kind, dim=dim, heads=heads, tau=tau, max_len=max_len)
            if (cfg.dim, cfg.heads, cfg.tau, cfg.max_len) != (dim, heads, tau, max_len):
                raise ValueError(
                    f"{kind}: cfg says dim {cfg.dim}, heads {cfg.heads}, tau {cfg.tau}, max_len "
                    f"{cfg.max_len}; the arguments say {dim}, {heads}, {tau}, {max_len}"
                )
            self.core = QuantAttentionCore(cfg.quant_core(kind))
        else:  # a Table 5 variant; the dot product's (vanilla) has no binarization
            switches = {} if ATTENTION_VARIANTS[kind] is None else {"tau": tau}
            self.core = attention_variant(kind, dim, heads, **switches)
        #: scores over key positions without keys (the Synthesizer's, float or quantized)
        self.synthesized = QUANT_KINDS.get(kind, kind) in synthesized_kinds()
        self.quantized = kind in QUANT_KINDS
        # EAttention's switches (Table 5); a quantized kind has those of its float variant
        # (quant-eatt: eatt, quant-vanilla: vanilla), synthesized and windowed kinds neither
        variant = kind.removeprefix("quant-")
        self.binary, self.l1 = (
            variant_switches(variant) if variant in ATTENTION_VARIANTS else (False, False)
        )
        self.tau = float(tau)
        #: set by Seq2Seq.set_recorder: called with (name, binarized tensor, valid-row mask)
        self.recorder: Recorder | None = None
        #: a quantized kind in eval: "hardware" (the core's integer arithmetic at this call's
        #: lengths), "exported" (the same, as the exported core runs it: len_q = len_k =
        #: max_len, inputs padded, the valid length and the offset as mask inputs) or
        #: "surrogate" (the training pipeline: float softmax); Seq2Seq.set_arithmetic
        self.arithmetic = "hardware"
        #: called by every hardware call in eval with (x codes (n, len_q, dim), key codes
        #: (n, len_k, dim), masks {"length", "offset"}: (n,) tensors, output codes (n, len_q,
        #: dim)) at this call's lengths (eatt.model.layers.capture_layer records them)
        self.probe: Callable[..., None] | None = None
        self.stat_name = ""
        self.decoding_golden = None  # eatt.quant.decoding.DecodingGolden, made on first use

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
        if self.quantized and not self.training and counts is None:
            if self.arithmetic != "surrogate":
                return self._hardware(
                    x, memory, key_padding_mask, causal, cache, query_padding_mask, offset
                )
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
            out, _ = synthesized_attention(self._synthesized_scores(x, len_k, offset), v, mask)
        else:
            q = self._split(self._project("q", x_sel))
            if self.l1:
                # F.l1_attention's math with an explicit kernel choice (see L1_IMPL)
                scores = F.l1_scores(q, k, impl=L1_IMPL) * core.scale
            elif counts is not None:
                scores = torch.matmul(q, k.transpose(-1, -2)) * core.scale
            if counts is not None:  # Algorithm 1's counted softmax (mask covers count 0)
                out = counted_softmax(scores, counts[:, None, None, :], ~mask) @ v
            elif self.l1:
                out, _ = synthesized_attention(scores, v, mask)
            else:
                out, _ = F.dot_attention(q, k, v, mask=mask, scale=core.scale)
        out = out.transpose(1, 2).reshape(batch, len_q, self.dim)
        return core.output(out) if self.quantized else core.o_proj(out)

    def _hardware(
        self,
        x: Tensor,
        memory: Tensor | None,
        key_padding_mask: Tensor | None,
        causal: bool,
        cache: dict | None,
        query_padding_mask: Tensor | None,
        offset: int = 0,
    ) -> Tensor:
        """A quantized kind in eval: the hardware core's own integer arithmetic (the golden
        model, exp and reciprocal tables, requantizing shifts), bit for bit what the exported
        core computes, with its masks: the valid key length from ``key_padding_mask`` (padding
        is a suffix) and, when ``causal``, the offset of the first query (incremental
        decoding). The core's outputs do not depend on len_q / len_k beyond the masks, so it
        runs at this call's lengths (docs/golden.md, "Lengths and masks");
        eatt.quant.decoding.hardware_attention computes it."""
        from eatt.quant.decoding import hardware_attention  # Brevitas: as in __init__

        if self.recorder is not None:  # the binarization statistics, as in training
            self._select(x, "", query_padding_mask)
            if memory is not None:
                self._select(memory, "key", key_padding_mask)
        return hardware_attention(self, x, memory, key_padding_mask, causal, cache, offset)

    def _synthesized_scores(self, x: Tensor, len_k: int, offset: int) -> Tensor:
        """A Synthesizer's scores (batch, heads, len_q, len_k) of queries ``x`` at absolute
        positions offset.. over keys 0..len_k-1. Quantized kinds: the core's surrogate scores
        at its own shape (Dense: len_k = max_len columns; RandInit: max_len rows too), cut to
        the call's rows and keys (the hardware runs them at those rows: quant/decoding.py)."""
        if not self.quantized:
            return self.core.scores(x, len_k, offset)
        core = self.core
        scores = core.mechanism.synthesized_scores(core, core.input_quant(x))
        if scores.shape[2] != x.shape[1]:  # rows by position (RandInit), not by input
            scores = scores[:, :, offset : offset + x.shape[1]]
        return scores[..., :len_k]

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


#: how a quantized kind computes in eval (RoleAttention.arithmetic)
ARITHMETICS = ("hardware", "exported", "surrogate")


def set_arithmetic(model: nn.Module, arithmetic: str) -> None:
    """Set ``arithmetic`` on every attention module of ``model`` that has one (any
    architecture): RoleAttention, the window unit's QuantWindowedAttention."""
    if arithmetic not in ARITHMETICS:
        raise ValueError(f"arithmetic: must be one of {', '.join(ARITHMETICS)}, got {arithmetic!r}")
    for module in model.modules():
        # RoleAttention, and the window unit's (in a RoleAttention or the LSTM's attention)
        if (
            isinstance(module, RoleAttention)
            or module.__class__.__name__ == "QuantWindowedAttention"
        ):
            module.arithmetic = arithmetic
