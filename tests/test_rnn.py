"""LSTM encoder-decoder (Luong et al. 2015) with windowed attention and L0Drop."""

from __future__ import annotations

import pytest
import torch

from eatt.model.data import BOS, EOS, PAD
from eatt.model.evaluate import beam_search, greedy_decode
from eatt.model.rnn import LSTMSeq2Seq
from eatt.model.seq2seq import ModelConfig

SRC_V, TGT_V = 14, 15
KINDS = ["global", "local-m", "local-p", "flexible"]


def _model(seed: int = 0, **changes) -> LSTMSeq2Seq:
    torch.manual_seed(seed)
    cfg = ModelConfig(arch="lstm", dim=16, enc_layers=2, dec_layers=2, dropout=0.1, **changes)
    return LSTMSeq2Seq(cfg, SRC_V, TGT_V)


def _batch(seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(4, SRC_V, (3, 9), generator=gen)
    src[:, -1] = EOS
    src[1, 5:] = PAD
    src[1, 4] = EOS
    src[2, 7:] = PAD
    src[2, 6] = EOS
    tgt_in = torch.randint(4, TGT_V, (3, 6), generator=gen)
    tgt_in[:, 0] = BOS
    return src, tgt_in


def test_shapes_and_padding_rows():
    model = _model()
    src, tgt_in = _batch()
    memory, padding = model.encode(src)
    assert memory.shape == (3, 9, 16) and torch.equal(padding, src.eq(PAD))
    assert bool(memory[padding].eq(0).all())
    assert model(src, tgt_in).shape == (3, 6, TGT_V)
    assert model.attention_modules()[0][0] == "cross"
    assert model.aux_losses() == {}
    with pytest.raises(ValueError, match="even"):
        LSTMSeq2Seq(ModelConfig(arch="lstm", dim=15, heads=1), SRC_V, TGT_V)


@pytest.mark.parametrize("kind", KINDS)
def test_padding_never_changes_a_sentence(kind):
    # a sentence decoded alone equals the same sentence in a batch padded to a longer one
    model = _model(cross=kind, window_d=2).eval()
    src, tgt_in = _batch()
    batched = model(src, tgt_in)
    for row in (1, 2):
        length = int(src[row].ne(PAD).sum())
        alone = model(src[row : row + 1, :length], tgt_in[row : row + 1])
        torch.testing.assert_close(alone[0], batched[row], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_padded_memory_rows_are_never_read(kind):
    # poison the padding rows of the memory: the output must not change (and stay finite)
    model = _model(cross=kind, window_d=2).eval()
    src, tgt_in = _batch()
    memory, padding = model.encode(src)
    clean = model.decode(tgt_in, memory, padding)
    poisoned = memory.masked_fill(padding[..., None], float("nan"))
    torch.testing.assert_close(model.decode(tgt_in, poisoned, padding), clean)


@pytest.mark.parametrize("kind", KINDS)
def test_incremental_equals_full_decoding(kind):
    model = _model(cross=kind, window_d=2, flexible_tau=0.5).eval()
    src, tgt_in = _batch()
    memory, padding = model.encode(src)
    full = model.decode(tgt_in, memory, padding)
    cache = model.init_cache()
    steps = [model.decode(tgt_in[:, t : t + 1], memory, padding, cache, offset=t) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-6, rtol=1e-6)
    # greedy search with and without the cache agrees too
    assert greedy_decode(model, src, max_len=8) == greedy_decode(
        model, src, max_len=8, incremental=False
    )


def test_reorder_cache_selects_rows():
    model = _model(cross="flexible").eval()
    src, tgt_in = _batch()
    memory, padding = model.encode(src)
    cache = model.init_cache()
    model.decode(tgt_in[:, :2], memory, padding, cache, offset=0)
    index = torch.tensor([2, 0, 0])
    cache = model.reorder_cache(cache, index)
    got = model.decode(tgt_in[index, 2:], memory[index], padding[index], cache, offset=2)
    expected = model.decode(tgt_in[index], memory[index], padding[index])[:, 2:]
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)


def test_aux_losses_l0_and_flexible_strength():
    model = _model(cross="flexible", l0drop=True).train()
    src, tgt_in = _batch()
    model(src, tgt_in).sum()
    aux = model.aux_losses()
    assert set(aux) == {"l0", "flexible_g"}
    (aux["l0"] + aux["flexible_g"]).backward()
    assert float(model.l0drop.w.grad.abs().sum()) > 0
    assert float(model.attention.v_g.bias.grad.abs()) > 0
    assert 0.0 <= model.sparsity_rate() <= 1.0


def _prune(model: LSTMSeq2Seq, src: torch.Tensor, scale: float = 1e4) -> None:
    """Set L0Drop's w so that about half the encoder rows get log alpha far below 0 (gate
    exactly 0, Eq. 13) and the rest far above (gate 1): w orthogonal to the mean row, along
    the rows' main direction of variation, scaled up."""
    layer = model.l0drop
    rows = model._encode(src)[0][src.ne(PAD)].double()  # ungated rows
    mean = rows.mean(0)
    direction = torch.linalg.svd(rows - mean, full_matrices=False)[2][0]
    direction = direction - (direction @ mean) / (mean @ mean) * mean
    with torch.no_grad():
        layer.w.copy_((direction * scale).float())


@pytest.mark.parametrize("score", ["general", "eatt"])
def test_compacted_equals_uncompacted_decoding(score):
    model = _model(l0drop=True, window_score=score, tau=0.0).eval()
    src, tgt_in = _batch()
    _prune(model, src)
    memory, padding = model.encode(src)
    rate = model.sparsity_rate()
    assert 0.2 < rate < 0.8, rate  # the case must prune some rows and keep some
    full = model.decode(tgt_in, memory, padding)
    span_full = model.vision_span()
    mem_c, pad_c, counts = model.encode_for_decoding(src)
    assert counts is not None and mem_c.shape[1] < memory.shape[1]
    compacted = model.decode(tgt_in, mem_c, pad_c, counts=counts)
    span_compacted = model.vision_span()
    torch.testing.assert_close(compacted, full, atol=1e-5, rtol=1e-5)
    # search (eatt.model.evaluate) decodes on encode_for_decoding's memory when compact_memory
    model.compact_memory = False
    assert model.encode_for_decoding(src)[2] is None
    beams_full = beam_search(model, src, beam=3, max_len=7)
    model.compact_memory = True
    assert beam_search(model, src, beam=3, max_len=7) == beams_full
    # positions scored per step: every source row without compaction; with it, the kept rows
    # plus the one zero row (when anything was pruned)
    real = (~padding).sum(1).double()
    kept = (model.last_gates.ne(0) & ~padding).sum(1).double()
    assert span_full == pytest.approx(float(real.mean()))
    assert span_compacted == pytest.approx(float((kept + (kept < real).double()).mean()))
    assert span_compacted < span_full


def test_rule_pattern_gates_and_compaction():
    model = _model(l0drop=True, l0drop_rule="group").eval()
    src, tgt_in = _batch()
    memory, padding = model.encode(src)
    # group: only (1-based) odd positions reach the decoder
    assert bool(memory[:, 1::2].eq(0).all()) and bool(
        memory[:, 0::2][~padding[:, 0::2]].ne(0).any()
    )
    assert model.aux_losses() == {}
    full = model.decode(tgt_in, memory, padding)
    mem_c, pad_c, counts = model.encode_for_decoding(src)
    compacted = model.decode(tgt_in, mem_c, pad_c, counts=counts)
    torch.testing.assert_close(compacted, full, atol=1e-5, rtol=1e-5)
    # eval-mode gate statistics: the sparsity rate the evaluation reports
    # (over source words: padding and <eos> are not counted)
    closed, total = model.gate_stats
    words = ~padding & src.ne(EOS)
    assert total == 2 * int(words.sum()) and closed == 2 * int(words[:, 1::2].sum())


def test_windowed_kinds_keep_the_full_memory():
    model = _model(l0drop=True, cross="local-m").eval()
    src, _ = _batch()
    memory, padding, counts = model.encode_for_decoding(src)
    assert counts is None and memory.shape[1] == src.shape[1]


def test_tiny_model_overfits_tiny_set():
    # reverse 6 fixed sentences: a few hundred Adam steps drive the loss near zero
    torch.manual_seed(0)
    cfg = ModelConfig(arch="lstm", dim=32, enc_layers=1, dec_layers=1, dropout=0.0)
    model = LSTMSeq2Seq(cfg, SRC_V, TGT_V)
    gen = torch.Generator().manual_seed(5)
    words = torch.randint(4, SRC_V, (6, 5), generator=gen)
    src = torch.cat([words, torch.full((6, 1), EOS)], 1)
    tgt = torch.cat([torch.full((6, 1), BOS), words.flip(1), torch.full((6, 1), EOS)], 1)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(150):
        opt.zero_grad()
        logits = model(src, tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, TGT_V), tgt_out.reshape(-1))
        loss.backward()
        opt.step()
    assert loss.item() < 0.05, loss.item()
    assert greedy_decode(model.eval(), src, max_len=8) == words.flip(1).tolist()
