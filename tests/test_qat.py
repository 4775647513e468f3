"""Quantization-aware attention in the seq2seq model (kinds quant-eatt / quant-vanilla)."""

from __future__ import annotations

import math

import pytest
import torch

from eatt.config import ConfigError
from eatt.model.seq2seq import QUANT_KINDS, ModelConfig, RoleAttention, Seq2Seq
from eatt.model.train import _load_weights
from eatt.quant.modules import calibrate_weight_frac


def _cfg(kind: str, **kw) -> ModelConfig:
    base = dict(dim=16, heads=2, ffn_dim=32, enc_layers=1, dec_layers=1, dropout=0.0, max_len=12)
    return ModelConfig(**{**base, "attention": kind, **kw})


# -- the weight scale ------------------------------------------------------------------------------
def test_calibrate_weight_frac_keeps_a_grid_it_can_hold():
    torch.manual_seed(0)
    for bits, frac in ((8, 6), (8, 9), (4, 3)):
        limit = 2 ** (bits - 1) - 1
        codes = torch.randint(-limit, limit + 1, (40, 40)).to(torch.float64)
        codes[0, 0] = limit  # the grid's full range is used
        assert calibrate_weight_frac([codes * 2.0**-frac], bits) == frac


def test_calibrate_weight_frac_clips_a_lone_outlier_at_4_bits():
    torch.manual_seed(1)
    w = torch.randn(64, 64) * 0.05
    w[0, 0] = 2.0
    covering = math.floor(math.log2(7 / 2.0))  # the largest frac whose grid holds 2.0: 1
    assert 7 * 2.0**-covering >= 2.0 > 7 * 2.0 ** -(covering + 1)
    frac = calibrate_weight_frac([w], 4)
    assert frac > covering  # the 4095 small weights need the levels more than one outlier
    assert calibrate_weight_frac([torch.zeros(3)], 8) == 6  # nothing to fit: the core's default


@pytest.mark.parametrize("bad, message", [((8, "nan"), "inf or nan"), ((1, 0.1), "weight bits")])
def test_calibrate_weight_frac_refuses_bad_input(bad, message):
    bits, value = bad
    with pytest.raises(ValueError, match=message):
        calibrate_weight_frac([torch.tensor([float(value)])], bits)


# -- config --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "key, value, named",
    [
        ("quant_acc_bits", 40, "quant_acc_bits"),
        ("quant_weight_bits", 1, "quant_weight_bits"),
        ("quant_in_bits", 1, "quant_in_bits"),
    ],
)
def test_quant_keys_are_checked_under_their_own_names(key, value, named):
    with pytest.raises(ConfigError, match=rf"^{named}:"):
        _cfg("quant-eatt", **{key: value})
    _cfg("vanilla", **{key: value})  # keys of an unused core are not checked


def test_quant_core_config_follows_the_model():
    cfg = _cfg("quant-eatt", quant_weight_bits=4, quant_weight_frac=3, quant_acc_bits=20)
    core = cfg.quant_core("quant-eatt")
    assert (core.kind, core.len_q, core.len_k, core.dim, core.heads) == ("eatt", 12, 12, 16, 2)
    assert (core.weight_bits, core.weight_frac, core.qk_bits, core.out_bits) == (4, 3, 20, 20)
    assert cfg.quant_core("quant-vanilla").kind == "vanilla" and QUANT_KINDS == {
        "quant-eatt": "eatt",
        "quant-vanilla": "vanilla",
        "quant-dense": "dense",
        "quant-randinit": "randinit",
    }


# -- the seq2seq attention is the core's pipeline --------------------------------------------------
@pytest.mark.parametrize("kind", sorted(QUANT_KINDS))
def test_role_attention_trains_on_the_surrogate_and_evaluates_on_the_hardware(kind):
    torch.manual_seed(2)
    cfg = _cfg(kind, max_len=6)
    role = RoleAttention(kind, cfg.dim, cfg.heads, cfg.tau, cfg.max_len, cfg=cfg).eval()
    core = role.core
    x, y = torch.randn(5, 6, cfg.dim) * 1.5, torch.randn(5, 6, cfg.dim) * 1.5
    with torch.no_grad():
        hardware = core(x, y)  # the golden model's integer arithmetic, exp/reciprocal tables
        assert torch.equal(role(x, memory=y), hardware)  # eval: the hardware, exactly
        got = role.train()(x, memory=y)  # training: the surrogate pipeline
        surrogate = core.surrogate(core.input_quant(x), core.input_quant(y))
    torch.testing.assert_close(got, surrogate, rtol=0, atol=1e-5)
    # what differs is only the tables' softmax: measured at most 1 output step, mean ~0.1
    step = core.formats.out_lsb
    assert float(hardware.abs().max()) > 8 * step  # the outputs are not trivially small
    assert float((got - hardware).abs().max()) <= 2 * step
    assert float((got - hardware).abs().mean()) <= 0.5 * step


def test_quant_eatt_binarizes_the_inputs_on_the_cores_grid():
    cfg = _cfg("quant-eatt", tau=1.0)
    role = RoleAttention("quant-eatt", cfg.dim, cfg.heads, cfg.tau, cfg.max_len, cfg=cfg)
    # 1.03 rounds to 1.0 on the <8, 4> grid (step 1/16): not above tau, unlike the float value
    x = torch.tensor([1.03, 1.04, 0.5, 9.0, -3.0]).repeat(1, 1, 4)[..., : cfg.dim]
    bits = role._select(x, "", None)
    assert torch.equal(bits, (role.core.input_quant(x) > 1.0).to(bits.dtype))
    assert bits.flatten()[:5].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]


def test_quant_role_attention_needs_a_consistent_config():
    role = RoleAttention("quant-vanilla", 16, 2, tau=0.5, max_len=8)  # cfg built from the args
    assert (role.core.cfg.dim, role.core.cfg.heads, role.core.cfg.len_k) == (16, 2, 8)
    with pytest.raises(ValueError, match="cfg says dim 16"):
        RoleAttention("quant-eatt", 32, 2, cfg=_cfg("quant-eatt"))
    with pytest.raises(ValueError, match="not a quantized kind"):
        _cfg("quant-eatt").quant_core("eatt")
    with pytest.raises(ConfigError, match=r"^max_len:"):
        _cfg("quant-vanilla", max_len=5000)
    _cfg("quant-vanilla", tau=10.0)  # tau is E-ATT's: a dot core does not check it
    with pytest.raises(ConfigError, match=r"^tau:"):
        _cfg("quant-eatt", tau=10.0)


def test_quantized_models_refuse_inputs_longer_than_their_core():
    model = Seq2Seq(_cfg("quant-eatt", max_len=6), 20, 20).eval()
    with pytest.raises(ValueError, match="exceeds max_len=6"):
        model(torch.randint(4, 20, (1, 7)), torch.randint(4, 20, (1, 3)))


def test_binarized_inputs_of_quant_eatt_are_recorded():
    torch.manual_seed(3)
    model = Seq2Seq(_cfg("quant-eatt"), 20, 20).eval()
    seen = []
    model.set_recorder(lambda name, bits, mask: seen.append((name, bits)))
    src, tgt = torch.randint(4, 20, (2, 7)), torch.randint(4, 20, (2, 5))
    with torch.no_grad():
        model(src, tgt)
    assert seen and all(set(b.unique().tolist()) <= {0.0, 1.0} for _, b in seen)


# -- starting from a float model -------------------------------------------------------------------
def test_a_float_model_loads_into_its_quantized_twin_and_gates_may_be_new(tmp_path):
    from eatt.model.data import Vocab
    from eatt.model.seq2seq import save_checkpoint

    vocab = Vocab.build([["a", "b", "c"]])
    float_model = Seq2Seq(_cfg("eatt"), len(vocab), len(vocab))
    path = tmp_path / "float.pt"
    save_checkpoint(path, float_model, vocab, vocab)
    quantized = Seq2Seq(_cfg("quant-eatt"), len(vocab), len(vocab))
    _load_weights(quantized, str(path))
    assert torch.equal(
        quantized.decoder[0].cross_attn.core.q_proj.weight,
        float_model.decoder[0].cross_attn.core.q_proj.weight,
    )
    gated = Seq2Seq(_cfg("eatt", l0drop=True), len(vocab), len(vocab))
    _load_weights(gated, str(path))  # L0Drop's gates are new: fine-tuning adds them
    wider = Seq2Seq(_cfg("eatt", ffn_dim=48), len(vocab), len(vocab))
    with pytest.raises(ValueError, match="init_checkpoint does not fit"):
        _load_weights(wider, str(path))


# -- eval is the hardware's arithmetic (issue 18, item 2) ------------------------------------------
def _hardware_calls(monkeypatch):
    """Record every quantized attention call in eval: (role, inputs, output)."""
    calls = []
    original = RoleAttention._hardware
    earlier = {}  # id(cache) -> (cache, the key rows' codes so far): self-attention's prefix

    def spy(self, x, memory, key_padding_mask, causal, cache, query_padding_mask, offset=0):
        out = original(self, x, memory, key_padding_mask, causal, cache, query_padding_mask, offset)
        y_codes = self.core.input_codes(x if memory is None else memory)
        if memory is None and cache is not None:  # the earlier steps' rows, then this one's
            if id(cache) in earlier:
                y_codes = torch.cat([earlier[id(cache)][1], y_codes], dim=1)
            earlier[id(cache)] = (cache, y_codes)
        calls.append((self, x, y_codes, key_padding_mask, causal, offset, out))
        return out

    monkeypatch.setattr(RoleAttention, "_hardware", spy)
    return calls


def _golden_at_max_len(role, x, y_codes, key_padding_mask, causal, offset):
    """The exported core (len_q = len_k = max_len) with key_padding and causal on: inputs
    padded with zeros to max_len, the valid length and the offset as its mask inputs. A
    Synthesizer core (Dense, RandInit) takes the queries at their absolute rows ``offset``..
    and a causal offset of 0 (row r sees keys 0..r)."""
    import numpy as np

    from eatt.quant.golden import CoreWeights, GoldenCore

    core = role.core
    cfg = core.cfg.replace(key_padding=True, causal=True)
    n, len_q, _ = x.shape
    len_k = y_codes.shape[1]
    xp = np.zeros((n, cfg.len_q, cfg.dim), dtype=np.int64)
    yp = np.zeros((n, cfg.len_k, cfg.dim), dtype=np.int64)
    row = offset if role.synthesized else 0
    xp[:, row : row + len_q] = core.input_codes(x).numpy()
    yp[:, :len_k] = y_codes.numpy()
    length = np.full(n, len_k) if key_padding_mask is None else (~key_padding_mask).sum(1).numpy()
    shift = (0 if role.synthesized else len_k - len_q) if causal else cfg.len_k - 1
    w = CoreWeights(**{k: v.numpy() for k, v in core.weight_codes().items()})
    out = GoldenCore(cfg, w).forward(xp, yp, masks={"length": length, "offset": np.full(n, shift)})
    return out[:, row : row + len_q]


@pytest.mark.parametrize("kind", sorted(QUANT_KINDS))
def test_eval_attention_is_the_exported_core_on_real_padded_batches(kind, monkeypatch):
    """Every quantized attention call in eval (encoder self, decoder self causal, cross; a
    teacher-forced batch and greedy decoding with a cache) equals the golden model of the
    max_len core with its masks, bit for bit, on padded sentences of the bundled task."""
    import numpy as np

    from eatt.model.data import TaskConfig, _pad, encode_pairs, synthetic_task
    from eatt.model.evaluate import greedy_decode

    data = synthetic_task(TaskConfig(n_train=200, n_dev=10, n_test=10, min_len=5, max_len=12))
    pairs = encode_pairs(data.test[:6], data.src_vocab, data.tgt_vocab)
    src = _pad([s for s, _ in pairs])
    tgt_in = _pad([[1] + t for _, t in pairs])  # <bos> y
    assert src.eq(0).any(), "the batch is padded"
    torch.manual_seed(5)
    cfg = _cfg(kind, max_len=30, tau=0.5)
    model = Seq2Seq(cfg, len(data.src_vocab), len(data.tgt_vocab)).eval()
    calls = _hardware_calls(monkeypatch)
    with torch.no_grad():
        model(src, tgt_in)
        greedy_decode(model, src, max_len=6)
    roles = {id(c[0]) for c in calls}
    assert len(roles) == 3 and len(calls) > 6  # enc self, dec self, cross; many steps
    compared = 0
    for role, x, y_codes, kpm, causal, offset, out in calls:
        expect = _golden_at_max_len(role, x, y_codes, kpm, causal, offset)
        codes = torch.round(out.double() / role.core.formats.out_lsb).to(torch.int64).numpy()
        np.testing.assert_array_equal(codes, expect)
        compared += codes.size
    assert compared > 1000
