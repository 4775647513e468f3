"""The golden model as decoding calls it (eatt.quant.decoding): K and V cached per key row, one
GoldenCore per core, the exported shape's padded queries skipped. Every call gives the integers
GoldenCore.forward gives on the whole call, so decoding gives the same hypotheses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from eatt.config import CoreConfig
from eatt.model.data import TaskConfig, encode_pairs, make_batches, synthetic_task
from eatt.model.evaluate import greedy_decode, translate_batches
from eatt.model.seq2seq import ModelConfig, RoleAttention, Seq2Seq, set_arithmetic
from eatt.quant.decoding import DecodingGolden
from eatt.quant.golden import GoldenCore, random_inputs, random_masks, random_weights
from eatt.quant.modules import from_integer, integer_weights

DATA = TaskConfig(
    n_train=24, n_dev=8, n_test=12, seed=3, min_len=5, max_len=9, n_nouns=6, n_verbs=3, n_adjs=3
)


def _model(attention: str, seed: int) -> tuple[Seq2Seq, list]:
    """An untrained model with every attention of a quantized kind, and its test batches."""
    data = synthetic_task(DATA)
    torch.manual_seed(seed)
    cfg = ModelConfig(dim=16, heads=2, ffn_dim=32, enc_layers=1, dec_layers=2, dropout=0.0,
                      attention=attention, max_len=24, quant_in_frac=3)  # fmt: skip
    model = Seq2Seq(cfg, len(data.src_vocab), len(data.tgt_vocab)).eval()
    encoded = encode_pairs(data.test, data.src_vocab, data.tgt_vocab)
    return model, make_batches(encoded, max_tokens=64, max_sentences=5)


def _calls(model, cached: bool, arithmetic: str, decode) -> tuple[list, list]:
    """(every attention call's output, the hypotheses) of ``decode(model)``."""
    seen = []
    modules = [m for m in model.modules() if isinstance(m, RoleAttention)]
    hooks = [m.register_forward_hook(lambda m, a, out: seen.append(out)) for m in modules]
    for m in modules:
        m.cached_golden, m.decoding_golden = cached, None
    set_arithmetic(model, arithmetic)
    try:
        hyps = decode(model)
    finally:
        for h in hooks:
            h.remove()
        set_arithmetic(model, "hardware")
    return seen, hyps


@pytest.mark.parametrize("attention", ["quant-eatt", "quant-vanilla"])
@pytest.mark.parametrize("arithmetic", ["hardware", "exported"])
def test_cached_decoding_equals_the_per_call_golden_model(attention, arithmetic):
    """Beam search (cache reordered), greedy search with and without a cache: every call of
    every core (encoder self, decoder self, cross) equals GoldenCore.forward's, exactly."""
    model, batches = _model(attention, seed=1 if attention == "quant-eatt" else 2)

    def decode(model):
        beams = translate_batches(model, batches, beam=3)
        greedy = [greedy_decode(model, b.src, max_len=6, incremental=False) for b in batches[:2]]
        return beams, greedy

    fast, fast_hyps = _calls(model, True, arithmetic, decode)
    reference, reference_hyps = _calls(model, False, arithmetic, decode)
    assert fast_hyps == reference_hyps
    assert len(fast) == len(reference) > 100
    for i, (a, b) in enumerate(zip(fast, reference, strict=True)):
        assert torch.equal(a, b), f"call {i} differs"


def test_a_weight_change_rebuilds_the_golden_core():
    """The cached GoldenCore follows the weights (an optimizer step or a load changes them)."""
    model, batches = _model("quant-eatt", seed=3)
    src = batches[0].src
    before = greedy_decode(model, src, max_len=5)
    module = model.decoder[0].cross_attn
    first = module.decoding_golden.golden(module.core, module.core.cfg)
    with torch.no_grad():
        module.core.v_proj.weight.mul_(-1.0)
    assert module.decoding_golden.golden(module.core, module.core.cfg) is not first
    fast = greedy_decode(model, src, max_len=5)
    for m in model.modules():
        if isinstance(m, RoleAttention):
            m.cached_golden = False
    assert fast == greedy_decode(model, src, max_len=5)
    assert before != fast  # W_V negated: other outputs (the model is not degenerate)


def test_step_by_step_calls_equal_golden_core_forward():
    """DecodingGolden alone, as a decoder's self-attention calls it one query row at a time
    (K and V appended) and as the exported core (max_len, masks; also with masks that leave the
    padded keys visible, as a broken mask would): GoldenCore.forward of the whole call, padded
    for the exported shape, row for row."""
    cfg = CoreConfig(kind="eatt", len_q=7, len_k=7, dim=8, heads=2, key_padding=True,
                     causal=True, tau=0.5)  # fmt: skip
    core = from_integer(cfg, random_weights(cfg, seed=6))
    golden = GoldenCore(cfg, integer_weights(core))
    x, _ = random_inputs(cfg, 6, seed=4)
    lengths = random_masks(cfg, 6, seed=5)["length"]
    for exported, padding_shown in ((False, False), (True, False), (True, True)):
        decoding, cache = DecodingGolden(), {}
        for t in range(cfg.len_q):
            rows = torch.from_numpy(x[:, t : t + 1])
            length = np.full(6, cfg.len_k) if padding_shown else np.minimum(lengths, t + 1)
            offset = cfg.len_k - 1 if padding_shown else t
            masks = {"length": torch.from_numpy(length), "offset": torch.full((6,), offset)}
            shape = (cfg.len_q, cfg.len_k) if exported else (1, t + 1)
            call_cfg = decoding.config(core, *shape, True, True)
            got = decoding.call(core, call_cfg, rows, rows, cache, True, masks, 1, t + 1)
            y = np.zeros_like(x)
            y[:, : t + 1] = x[:, : t + 1]
            q = np.zeros_like(x)
            q[:, 0] = x[:, t]
            full = {"length": length, "offset": np.full(6, offset)}
            want = golden.forward(q, y, masks=full)[:, :1]
            assert np.array_equal(got.numpy(), want), (exported, padding_shown, t)


@pytest.mark.parametrize("attention", ["quant-dense", "quant-randinit"])
def test_synthesizer_cores_decode_at_their_rows(attention):
    """A Synthesizer core (Dense, RandInit) runs at its own shape with the queries at their
    absolute rows: decoding step by step with a cache (one query row at offset t) gives the
    hypotheses that decoding the whole prefix again at every step gives, in both
    arithmetics; RandInit's scores are rows of R by position, so a query at the wrong row
    would change them."""
    model, batches = _model(attention, seed=4)
    for arithmetic in ("hardware", "exported"):
        set_arithmetic(model, arithmetic)
        for b in batches[:2]:
            cached = greedy_decode(model, b.src, max_len=6)
            whole = greedy_decode(model, b.src, max_len=6, incremental=False)
            assert cached == whole, arithmetic
    set_arithmetic(model, "hardware")
