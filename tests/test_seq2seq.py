"""Tests of eatt.model.seq2seq, synthesizer and the decoding half of evaluate."""

import json

import pytest
import torch

from eatt.config import ConfigError
from eatt.model.data import BOS, EOS, PAD, Vocab
from eatt.model.evaluate import (
    attention_energy,
    beam_search,
    binarization_ratios,
    greedy_decode,
)
from eatt.model.seq2seq import (
    ATTENTION_KINDS,
    ModelConfig,
    Seq2Seq,
    load_checkpoint,
    load_model_config,
    save_checkpoint,
)
from eatt.model.synthesizer import DenseSynthesizer, RandomSynthesizer

SRC_V, TGT_V = 19, 23


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _model(kind="vanilla", norm="pre", **kw):
    cfg = ModelConfig(
        dim=16,
        heads=2,
        ffn_dim=32,
        enc_layers=2,
        dec_layers=2,
        dropout=0.0,
        attention=kind,
        norm=norm,
        max_len=24,
        **kw,
    )
    model = Seq2Seq(cfg, SRC_V, TGT_V).double().eval()
    if kind in ("eatt", "binary-dot"):
        # spread LayerNorm gains so that some, not all, features pass tau = 1
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.data.fill_(1.7)
    return model


def _batch(batch=3, src_len=7, tgt_len=6):
    src = torch.randint(4, SRC_V, (batch, src_len))
    src[:, -1] = EOS
    src[0, 4:] = PAD
    src[0, 3] = EOS
    tgt = torch.randint(4, TGT_V, (batch, tgt_len))
    tgt[:, 0] = BOS
    tgt[1, 4:] = PAD
    return src, tgt


KINDS_AND_NORMS = [(k, "pre") for k in ATTENTION_KINDS] + [("eatt", "post"), ("vanilla", "post")]


@pytest.mark.parametrize("kind, norm", KINDS_AND_NORMS)
def test_shapes_padding_and_causality(kind, norm):
    model = _model(kind, norm)
    src, tgt = _batch()
    logits = model(src, tgt)
    assert logits.shape == (3, 6, TGT_V)
    # no attention to padding: a padded sentence gives what it gives alone, unpadded
    alone = model(src[:1, :4], tgt[:1])
    torch.testing.assert_close(logits[:1], alone)
    alone_tgt = model(src[1:2], tgt[1:2, :4])
    torch.testing.assert_close(logits[1:2, :4], alone_tgt)
    # causal decoder: later target tokens do not change earlier positions
    changed = tgt.clone()
    changed[:, 3:] = torch.randint(4, TGT_V, changed[:, 3:].shape)
    torch.testing.assert_close(model(src, changed)[:, :3], logits[:, :3])


@pytest.mark.parametrize("kind, norm", KINDS_AND_NORMS)
def test_incremental_decoding_equals_full(kind, norm):
    model = _model(kind, norm)
    src, tgt = _batch()
    tgt[1, 4:] = 5  # incremental decoding has no target padding
    full = model(src, tgt)
    memory, padding = model.encode(src)
    cache = model.init_cache()
    steps = [model.decode(tgt[:, t : t + 1], memory, padding, cache, offset=t) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-9, atol=1e-9)
    assert greedy_decode(model, src, max_len=8) == greedy_decode(
        model, src, max_len=8, incremental=False
    )


def test_eatt_cross_cache_holds_binarized_keys():
    model = _model("eatt")
    src, _ = _batch()
    memory, padding = model.encode(src)
    cache = model.init_cache()
    model.decode(torch.full((3, 1), BOS), memory, padding, cache)
    bits = cache[0]["cross"]["binary"]
    assert bits.dtype == torch.bool and bits.shape == memory.shape
    assert torch.equal(bits, memory > model.cfg.tau)
    assert "binary" not in _decode_cache(_model("vanilla"))[0]["cross"]


def _decode_cache(model):
    src, _ = _batch()
    memory, padding = model.encode(src)
    cache = model.init_cache()
    model.decode(torch.full((3, 1), BOS), memory, padding, cache)
    return cache


@pytest.mark.parametrize("kind", ["vanilla", "eatt", "randinit"])
def test_beam_one_equals_greedy(kind):
    model = _model(kind)
    src, _ = _batch(batch=4)
    greedy = greedy_decode(model, src, max_len=10)
    assert beam_search(model, src, beam=1, alpha=0.6, max_len=10) == greedy
    assert beam_search(model, src, beam=1, alpha=0.0, max_len=10) == greedy
    wide = beam_search(model, src, beam=3, max_len=10)
    assert len(wide) == 4 and all(len(h) <= 10 and EOS not in h for h in wide)


def test_beam_finds_the_better_scoring_hypothesis():
    """Beam search (alpha 0) never returns a lower log-probability than greedy."""
    model = _model("vanilla")
    src, _ = _batch(batch=4)

    @torch.no_grad()
    def logprob(row, hyp):
        tgt = torch.tensor([[BOS] + hyp])
        logp = torch.log_softmax(model(src[row : row + 1], tgt), -1)[0]
        ids = hyp + [EOS]
        return sum(float(logp[i, t]) for i, t in enumerate(ids))

    greedy = greedy_decode(model, src, max_len=30)
    beam = beam_search(model, src, beam=4, alpha=0.0, max_len=30)
    for row in range(4):
        if len(greedy[row]) < 30:  # both ended with <eos>
            assert logprob(row, beam[row]) >= logprob(row, greedy[row]) - 1e-9


def test_synthesizers_check_max_len():
    for kind in ("dense", "randinit"):
        model = _model(kind)
        with pytest.raises(ValueError, match="max_len=24"):
            model.encode(torch.full((1, 25), 5))
        memory, padding = model.encode(torch.full((1, 5), 5))
        with pytest.raises(ValueError, match="max_len=24"):
            model.decode(torch.full((1, 25), 5), memory, padding)
    model = _model("vanilla")
    model.encode(torch.full((1, 40), 5))  # vanilla has no length limit
    with pytest.raises(ValueError, match="max_len"):
        DenseSynthesizer(16, 2, 4).scores(torch.zeros(1, 2, 16), len_k=5)
    with pytest.raises(ValueError, match="max_len"):
        RandomSynthesizer(16, 2, 4).scores(torch.zeros(1, 2, 16), len_k=3, q_offset=3)


def test_roles_get_their_kinds_and_tied_embeddings():
    cfg = ModelConfig(dim=16, heads=2, attention="eatt", cross="dense", tie_embeddings=True)
    model = Seq2Seq(cfg, SRC_V, TGT_V)
    kinds = {(role, module.kind) for role, _, module in model.attention_modules()}
    assert kinds == {("enc_self", "eatt"), ("dec_self", "eatt"), ("cross", "dense")}
    assert model.out_proj.weight is model.tgt_embed.weight
    # the float attention cores keep eatt.model.attention's parameter names (for quant)
    names = dict(model.named_parameters())
    assert "encoder.0.self_attn.core.q_proj.weight" in names


def test_binarization_ratios_and_energy():
    model = _model("eatt")
    src, tgt = _batch()
    batch = type("B", (), {"src": src, "tgt_in": tgt, "to": lambda self, d: self})()
    ratios = binarization_ratios(model, [batch])
    assert list(ratios) == ["enc_self", "dec_self", "cross_query", "cross_key"]
    assert all(len(r) == 2 and all(0.0 < x < 1.0 for x in r) for r in ratios.values())
    # the cross-attention keys are the same encoder output in every layer (paper, Sec. 5.4)
    assert ratios["cross_key"][0] == ratios["cross_key"][1]
    assert binarization_ratios(_model("vanilla"), [batch]) == {}

    lengths = [(22, 22), (10, 12)]
    eatt = attention_energy(model, lengths)
    vanilla = attention_energy(_model("vanilla"), lengths)
    assert vanilla["percent_of_vanilla"] == {"asic": 100.0, "fpga": 100.0}
    assert 30.0 < eatt["percent_of_vanilla"]["asic"] < 60.0
    assert attention_energy(_model("linear-l1"), lengths)["energy_pj"] is None
    # the fixed-point kinds: the hardware core's own counts (core_counts, W_O included)
    from eatt.model.energy import core_counts, energy_pj

    quant = attention_energy(_model("quant-eatt"), lengths)
    m = _model("quant-eatt")
    per_sentence = [
        energy_pj(core_counts("eatt", n, n, m.cfg.dim, m.cfg.heads, "attention"))
        for _, n in lengths  # dec_self and cross at the target length, enc_self at the source
    ]
    assert quant["energy_pj"]["asic"] > 0 and quant["per_role_pj"]["cross"][
        "asic"
    ] == pytest.approx(len(m.decoder) * sum(per_sentence))
    assert quant["percent_of_vanilla"]["asic"] < 100.0
    assert attention_energy(m, lengths, level="block")["energy_pj"] is None  # no block level


def test_checkpoint_round_trip(tmp_path):
    model = _model("eatt").float()
    src_vocab = Vocab([f"s{i}" for i in range(SRC_V - 4)])
    tgt_vocab = Vocab([f"t{i}" for i in range(TGT_V - 4)])
    path = tmp_path / "ckpt" / "model.pt"
    save_checkpoint(path, model, src_vocab, tgt_vocab, {"step": 3})
    loaded, sv, tv, payload = load_checkpoint(path)
    assert sv == src_vocab and tv == tgt_vocab and payload["step"] == 3
    assert loaded.cfg == model.cfg and not loaded.training
    src, tgt = _batch()
    torch.testing.assert_close(loaded(src, tgt), model(src, tgt), rtol=0, atol=0)
    assert [p.name for p in path.parent.iterdir()] == ["model.pt"]  # no temp file left


def test_checkpoint_errors_are_one_line(tmp_path):
    for path, match in (
        (tmp_path / "none.pt", "no such checkpoint"),
        (tmp_path / "text.pt", "not a checkpoint"),
        (tmp_path / "other.pt", "not a seq2seq checkpoint"),
    ):
        if path.name == "text.pt":
            path.write_text("hello")
        if path.name == "other.pt":
            torch.save({"format": "something"}, path)
        with pytest.raises(ValueError, match=match) as err:
            load_checkpoint(path)
        assert "\n" not in str(err.value) and str(path) in str(err.value)


@pytest.mark.parametrize(
    "data, key",
    [
        ({"dim": 10, "heads": 4}, "heads"),
        ({"attention": "flash"}, "attention"),
        ({"cross": "l0drop"}, "cross"),
        ({"norm": "sandwich"}, "norm"),
        ({"dropout": 1.0}, "dropout"),
        ({"dim": "big"}, "dim"),
        ({"tie_embeddings": "yes"}, "tie_embeddings"),
        ({"layers": 6}, "layers"),
    ],
)
def test_bad_model_config_is_one_line_naming_the_key(data, key):
    with pytest.raises(ConfigError) as err:
        ModelConfig.from_dict(data)
    assert f"model.{key}" in str(err.value) and "\n" not in str(err.value)


def test_model_config_files(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps({"model": {"dim": 32, "attention": "eatt"}}))
    assert load_model_config(tmp_path / "m.json") == ModelConfig(dim=32, attention="eatt")
    (tmp_path / "m.yaml").write_text("dim: 32\ncross: randinit\n")
    assert load_model_config(tmp_path / "m.yaml").attentions["cross"] == "randinit"
    (tmp_path / "bad.yaml").write_text("dim: [1,\n")
    for path, match in (
        (tmp_path / "bad.yaml", "cannot parse"),
        (tmp_path / "missing.yaml", "no such config file"),
    ):
        with pytest.raises(ConfigError, match=match) as err:
            load_model_config(path)
        assert "\n" not in str(err.value)
    (tmp_path / "k.yaml").write_text("dim: 32\nheds: 4\n")
    with pytest.raises(ConfigError, match=r"k.yaml: model.heds: unknown key"):
        load_model_config(tmp_path / "k.yaml")


def test_decoding_never_emits_pad_or_bos():
    model = _model("vanilla")
    projection = torch.nn.Linear(model.cfg.dim, TGT_V).double()
    with torch.no_grad():  # <pad> and <bos> become the most likely tokens everywhere
        projection.weight.copy_(model.out_proj.weight)
        projection.bias.zero_()
        projection.bias[PAD], projection.bias[BOS] = 100.0, 50.0
    model.out_proj = projection
    src, _ = _batch()
    for tokens in (
        greedy_decode(model, src, max_len=6),
        greedy_decode(model, src, max_len=6, incremental=False),
        beam_search(model, src, beam=3, max_len=6),
    ):
        assert tokens and all(PAD not in row and BOS not in row for row in tokens)
