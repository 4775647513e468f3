"""The golden model as incremental decoding calls it (eatt.model.seq2seq.RoleAttention).

A decoder calls each attention core once per layer, role and step, on the whole prefix
(self-attention) or the whole source (cross-attention). ``GoldenCore.forward`` on those inputs
projects K and V of every key row again at every step, and each call rebuilds the formats and
tables and reads the weights out of Brevitas. The golden model's stages are row-wise up to the
scores (a projected row depends on its input row alone; an output row on its own query row and
all key rows), so :class:`DecodingGolden` runs the same stages, GoldenCore's own methods
(``project_qk``, ``project_v``, ``scores``, ``softmax_weights``, ``weighted_values``,
``project_out``; nothing re-implemented), with

* one GoldenCore per core and call shape, kept until a weight changes (an optimizer step or a
  load bumps the parameters' versions);
* K and V of each key row projected once and kept in the decoder's cache as int64 tensors
  (``golden_kt``, ``golden_v``: appended per step for self-attention, once per source for
  cross-attention; beam search reorders them with the rest of the cache);
* only the query rows the call has. The exported core's shape (``exported``: len_q = len_k =
  max_len, the valid length and causal offset as mask inputs) pads the queries and the keys
  with zero codes: its padded query rows are not computed (their outputs are dropped anyway);
  its padded key rows are, up to the softmax weights (one zero row's scores, repeated: they
  are all that row), so what the exported shape checks, that the masks hide them, is still
  computed. When every padded key's weight is 0, as the masks make it, its terms of the sum
  and the numerator are 0 and the weighted values run over the real keys (the same
  integers); a padded key with weight runs them over the whole padded V.

The output codes equal ``GoldenCore(cfg, weights).forward(x, y, masks=...)`` of the same call
bit for bit; tests/test_decoding_golden.py compares them call by call and whole decodings.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from eatt.config import CoreConfig
from eatt.mechanisms.base import Synthesized
from eatt.quant.golden import CoreWeights, GoldenCore, check_masks, visible_keys
from eatt.quant.modules import QuantAttentionCore, integer_forward, integer_weights

__all__ = ["DecodingGolden", "cached_kinds", "hardware_attention"]

#: the core kinds whose keys and values are rows of their own (query-key mechanisms)
_KEY_VALUE_KINDS = ("eatt", "vanilla")


def cached_kinds() -> tuple[str, ...]:
    """The core kinds :class:`DecodingGolden` computes (others run GoldenCore.forward per call)."""
    return _KEY_VALUE_KINDS


class DecodingGolden:
    """The golden model of one QuantAttentionCore for a decoder's calls (module docstring)."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._weights = None
        self._cfgs: dict[tuple, CoreConfig] = {}
        self._cores: dict[CoreConfig, GoldenCore] = {}
        self._pad: dict[CoreConfig, tuple[np.ndarray, np.ndarray]] = {}

    def config(
        self, core: QuantAttentionCore, len_q: int, len_k: int, key_padding: bool, causal: bool
    ) -> CoreConfig:
        """``core.cfg`` at a call's lengths and mask inputs (made once per shape)."""
        shape = (core.cfg, len_q, len_k, key_padding, causal)
        cfg = self._cfgs.get(shape)
        if cfg is None:
            cfg = core.cfg.replace(len_q=len_q, len_k=len_k, key_padding=key_padding, causal=causal)
            self._cfgs[shape] = cfg
        return cfg

    def golden(self, core: QuantAttentionCore, cfg: CoreConfig) -> GoldenCore:
        """GoldenCore(cfg, the core's integer weights), made once per weights and cfg."""
        # the weights are the layers' (a walk over every Brevitas sub-module costs more than
        # the call); an optimizer step or a load bumps a tensor's version
        weights = (getattr(layer, "weight", None) for layer in core.children())
        key = tuple((id(w), w._version) for w in weights if isinstance(w, Tensor))
        if key != self._key:
            self._key, self._weights, self._cores, self._pad = key, None, {}, {}
        golden = self._cores.get(cfg)
        if golden is None:
            if self._weights is None:
                self._weights = integer_weights(core)
            golden = self._cores[cfg] = GoldenCore(cfg, self._weights)
        return golden

    def call(
        self,
        core: QuantAttentionCore,
        cfg: CoreConfig,
        x_codes: Tensor,
        keys: Tensor | None,
        cache: dict | None,
        append: bool,
        masks: dict[str, Tensor],
        len_q: int,
        len_k: int,
    ) -> Tensor:
        """Output codes (n, len_q, dim) int64 of one call of ``core`` at config ``cfg``.

        ``x_codes``: the call's query rows (n, len_q, dim); ``keys``: input codes of the key
        rows this call adds (self-attention: the new rows, appended to the cache's with
        ``append``; cross-attention: the memory, None when the cache holds its K and V);
        ``cache``: the decoder's dict for this core, or None; ``masks``: the mask inputs of
        ``cfg``; ``len_k``: the real key rows (``cfg.len_k`` - len_k are padding: zero codes).
        """
        n = x_codes.shape[0]
        if n == 0:
            return torch.zeros(0, len_q, cfg.dim, dtype=torch.int64)
        golden = self.golden(core, cfg)
        k, v = self._key_rows(golden, keys, cache, append)
        if k.shape[1] != len_k:
            raise ValueError(f"decoding: {k.shape[1]} key rows cached, the call has {len_k}")
        x = x_codes.cpu().numpy()
        q = golden.project_qk(x, x[:, :0])[0]
        s = golden.scores(q, k)
        rows = cfg.len_k - len_k
        if rows:  # the exported shape: zero rows up to its len_k, hidden by the masks
            pad_k, pad_v = self._padding(golden)
            # the padded keys are one row repeated: its scores, repeated
            pad_s = golden.scores(q, np.broadcast_to(pad_k, (n, 1, cfg.dim)))
            s = np.concatenate([s, np.broadcast_to(pad_s, (*s.shape[:-1], rows))], axis=-1)
        np_masks = check_masks(cfg, n, {k: t.cpu().numpy() for k, t in masks.items()})
        # key j visible to query i depends on i alone: the visible keys of the call's rows
        rows_cfg = self.config(core, len_q, cfg.len_k, cfg.key_padding, cfg.causal)
        e = golden.softmax_weights(s, visible_keys(rows_cfg, n, np_masks))
        if rows and e[..., len_k:].any():  # a padded key weighs: the whole padded V
            v = np.concatenate([v, np.broadcast_to(pad_v, (n, rows, cfg.dim))], axis=1)
        elif rows:  # every padded key's weight is 0: its terms of sum_j e_j and sum_j e_j V_j
            e = e[..., :len_k]  # are 0, the weighted values those of the real keys, exactly
        out = golden.project_out(golden.weighted_values(e, v))
        return torch.from_numpy(out)

    def _key_rows(
        self, golden: GoldenCore, keys: Tensor | None, cache: dict | None, append: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """K and V (n, rows, dim) of every key row: the cache's, then those of ``keys``. K is
        kept as (n, dim, rows) (``golden_kt``) and returned as its transposed view: the L1
        scores then read each feature's keys contiguously (the same integers, faster)."""
        if keys is None:
            return cache["golden_kt"].numpy().transpose(0, 2, 1), cache["golden_v"].numpy()
        y = keys.cpu().numpy()
        kt = torch.from_numpy(golden.project_qk(y[:, :0], y)[1].transpose(0, 2, 1))
        v = torch.from_numpy(golden.project_v(y))
        if append and cache is not None and "golden_kt" in cache:
            kt = torch.cat([cache["golden_kt"], kt], dim=2)
            v = torch.cat([cache["golden_v"], v], dim=1)
        kt = kt.contiguous()
        if cache is not None:
            cache["golden_kt"], cache["golden_v"] = kt, v
        return kt.numpy().transpose(0, 2, 1), v.numpy()

    def _padding(self, golden: GoldenCore) -> tuple[np.ndarray, np.ndarray]:
        """K and V (1, 1, dim) of a zero input row: the exported core's padded keys."""
        if golden.cfg not in self._pad:
            z = np.zeros((1, 1, golden.cfg.dim), dtype=np.int64)
            self._pad[golden.cfg] = (golden.project_qk(z, z)[1], golden.project_v(z))
        return self._pad[golden.cfg]


def hardware_attention(
    module,
    x: Tensor,
    memory: Tensor | None,
    key_padding_mask: Tensor | None,
    causal: bool,
    cache: dict | None,
    offset: int = 0,
) -> Tensor:
    """One call of a seq2seq model's quantized attention (RoleAttention, eval): its core's
    output (batch, len_q, dim) in x's dtype, computed as the golden model computes it.

    ``memory`` None: self-attention (the cache holds the earlier rows); else cross-attention
    (the cache holds the memory's, from its first call). The mask inputs: the valid key length
    from ``key_padding_mask`` and, when ``causal``, the offset of the first query. With
    ``module.arithmetic == "exported"`` the core runs at its own shape (len_q = len_k =
    max_len, both masks). Through :class:`DecodingGolden` when ``module.cached_golden`` (and no
    ``module.probe``, which sees each call's whole inputs); else GoldenCore.forward on each
    whole call, the reference (cache entry ``codes``: the key rows' input codes).

    ``offset``: the absolute position of x's first row. A Synthesizer core (Dense, RandInit)
    runs at its own shape with the queries at their absolute rows (:func:`_at_positions`).
    """
    core = module.core
    x_codes = core.input_codes(x)
    if isinstance(core.mechanism, Synthesized):
        return _at_positions(module, x, x_codes, memory, key_padding_mask, causal, cache, offset)
    fast = module.cached_golden and module.probe is None and core.cfg.kind in cached_kinds()
    known = cache is not None and ("golden_kt" if fast else "codes") in cache
    if fast:  # the key rows this call adds: the new ones, or the memory once
        keys = x_codes if memory is None else None if known else core.input_codes(memory)
        len_k = x.shape[1] if memory is None else memory.shape[1]
        len_k += cache["golden_kt"].shape[2] if known and memory is None else 0
    else:
        if memory is not None and known:
            y_codes = cache["codes"]  # cross-attention: the memory's codes, once
        else:
            y_codes = x_codes if memory is None else core.input_codes(memory)
            if memory is None and known:
                y_codes = torch.cat([cache["codes"], y_codes], dim=1)  # self: earlier steps
            if cache is not None:
                cache["codes"] = y_codes
        len_k = y_codes.shape[1]
    batch, len_q, _ = x.shape
    masks = {}
    if key_padding_mask is not None:
        masks["length"] = _valid_length(key_padding_mask, len_k)
    if causal:
        masks["offset"] = torch.full((batch,), len_k - len_q, dtype=torch.int64)
    exported = module.arithmetic == "exported"
    if exported:  # the exported core's shape: pad, mask the rest
        masks.setdefault("length", torch.full((batch,), len_k, dtype=torch.int64))
        masks.setdefault("offset", torch.full((batch,), core.cfg.len_k - 1, dtype=torch.int64))
        shape = (core.cfg.len_q, core.cfg.len_k, True, True)
    else:
        shape = (len_q, len_k, "length" in masks, causal)
    if fast:
        if module.decoding_golden is None:
            module.decoding_golden = DecodingGolden()
        golden = module.decoding_golden
        cfg = golden.config(core, *shape)
        codes = golden.call(core, cfg, x_codes, keys, cache, memory is None, masks, len_q, len_k)
        return (codes.to(torch.float64) * core.formats.out_lsb).to(x.device, x.dtype)
    cfg = core.cfg.replace(len_q=shape[0], len_k=shape[1], key_padding=shape[2], causal=shape[3])
    if exported:
        x_codes = torch.nn.functional.pad(x_codes, (0, 0, 0, cfg.len_q - len_q))
        y_codes = torch.nn.functional.pad(y_codes, (0, 0, 0, cfg.len_k - len_k))
    codes = integer_forward(cfg, core.weight_codes(), x_codes, y_codes, masks)[:, :len_q]
    if module.probe is not None:
        full = {"length": torch.full((batch,), len_k), "offset": torch.full((batch,), len_k - 1)}
        seen = {k: masks.get(k, v) for k, v in full.items()}
        module.probe(x_codes[:, :len_q], y_codes[:, :len_k], seen, codes)
    return (codes.to(torch.float64) * core.formats.out_lsb).to(x.device, x.dtype)


def _valid_length(key_padding_mask: Tensor, len_k: int) -> Tensor:
    """The valid key length (n,) of a padding mask (True = padding) on the CPU; ValueError
    unless the padding is a suffix and at least one key is valid (what the core takes)."""
    mask = key_padding_mask.cpu()
    length = (~mask).sum(1)
    suffix = torch.arange(len_k)[None, :] >= length[:, None]
    if not torch.equal(suffix, mask) or bool((length == 0).any()):
        raise ValueError(
            "key_padding_mask: the hardware core takes a valid length (padding at the "
            "end, at least one key)"
        )
    return length


def _at_positions(
    module,
    x: Tensor,
    x_codes: Tensor,
    memory: Tensor | None,
    key_padding_mask: Tensor | None,
    causal: bool,
    cache: dict | None,
    offset: int,
) -> Tensor:
    """A Synthesizer core's call (Dense, RandInit): its scores are over key positions, and
    RandInit's rows are query positions too, so the core runs at its own shape (len_q = len_k
    = max_len) with the call's queries at their absolute rows offset..offset+len_q-1, the keys
    at rows 0..len_k-1, zero codes elsewhere; the mask inputs: the valid key length and, when
    ``causal``, offset 0 (row r sees keys 0..r). The probe sees that whole call (what the
    exported core takes); the output is the call's rows. Without a probe only those rows are
    computed: the core at len_q rows with the mechanism's weights of those rows
    (``weights_at_rows``: RandInit's rows of R) and the causal offset of the first row, the
    same integers (an output row depends on its own query row and the keys alone)."""
    core = module.core
    cfg = core.cfg
    if memory is not None:
        y_codes = cache["codes"] if cache is not None and "codes" in cache else None
        if y_codes is None:
            y_codes = core.input_codes(memory)
    else:
        y_codes = x_codes
        if cache is not None and "codes" in cache:
            y_codes = torch.cat([cache["codes"], x_codes], dim=1)
    if cache is not None:
        cache["codes"] = y_codes
    batch, len_q, _ = x.shape
    len_k = y_codes.shape[1]
    if offset + len_q > cfg.len_q or len_k > cfg.len_k:
        raise ValueError(
            f"{cfg.kind}: rows {offset}..{offset + len_q - 1} and {len_k} keys do not fit the "
            f"core's {cfg.len_q} x {cfg.len_k}"
        )
    yp = y_codes.new_zeros(batch, cfg.len_k, cfg.dim)
    yp[:, :len_k] = y_codes
    masks = {"length": torch.full((batch,), len_k, dtype=torch.int64)}
    if key_padding_mask is not None:
        masks["length"] = _valid_length(key_padding_mask, len_k)
    weights = {k: v.numpy() for k, v in core.weight_codes().items()}
    full = cfg.replace(key_padding=True, causal=True)
    if module.probe is None:  # only the call's rows (the others' outputs are dropped)
        rows = full.replace(len_q=len_q)
        weights = core.mechanism.weights_at_rows(cfg, weights, offset, len_q)
        masks["offset"] = torch.full((batch,), offset if causal else cfg.len_k - 1)
        golden = GoldenCore(rows, CoreWeights(**weights))
        np_masks = {k: v.numpy() for k, v in masks.items()}
        out = golden.forward(x_codes.cpu().numpy(), yp.cpu().numpy(), masks=np_masks)
        codes = torch.from_numpy(out)
    else:  # the whole core, as the exported one runs it: what a capture records
        xp = x_codes.new_zeros(batch, cfg.len_q, cfg.dim)
        xp[:, offset : offset + len_q] = x_codes
        masks["offset"] = torch.full((batch,), 0 if causal else cfg.len_k - 1)
        np_masks = {k: v.numpy() for k, v in masks.items()}
        golden = GoldenCore(full, CoreWeights(**weights))
        codes = torch.from_numpy(golden.forward(xp.cpu().numpy(), yp.cpu().numpy(), masks=np_masks))
        module.probe(xp, yp, masks, codes)
        codes = codes[:, offset : offset + len_q]
    return (codes.to(torch.float64) * core.formats.out_lsb).to(x.device, x.dtype)
