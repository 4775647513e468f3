"""Tests of eatt.model.data: the synthetic language pair, vocabularies, files, batching."""

import re

import numpy as np
import pytest

from eatt.config import ConfigError
from eatt.model.data import (
    BOS,
    EOS,
    PAD,
    UNK,
    FilesConfig,
    TaskConfig,
    Vocab,
    data_config_from_dict,
    dense_source,
    detokenize,
    encode_pairs,
    load_data,
    load_parallel,
    make_batches,
    redundant_source,
    synthetic_task,
    translate,
)

SMALL = TaskConfig(n_train=300, n_dev=40, n_test=40, seed=7)


def _t(text: str) -> list[str]:
    return text.split()


# -- the documented rules (docs/models.md, "The synthetic task") ----------------------------------
@pytest.mark.parametrize(
    "source, target",
    [
        # SVO -> SOV: the verb goes to the end of its clause; it agrees with its subject's
        # gender (noun index mod 3 -> suffix a / e / o)
        ("d0 n1 v1 d1 n4", "D0 N1 D1 N4 V1e"),
        ("d0 n2 v4 d1 n3", "D0 N2 D1 C3 N3 V4o"),
        ("d0 n4 v4 d1 n2", "D0 N4 D1 N2 V4e"),
        # inside a noun phrase the noun moves in front of its adjectives (order kept)
        ("d0 a3 a5 n7 v1 d1 n4", "D0 N7 A3 A5 D1 N4 V1e"),
        # many-to-one: "very aK" -> VAK, "not vK" -> NVK (with the agreement suffix)
        ("d0 very a3 n7 not v2 d1 n4", "D0 N7 VA3 D1 N4 NV2e"),
        # one-to-many: every third noun gets a classifier C(i mod 5) in front of it
        ("d2 n3 v1 d1 n10", "D2 C3 N3 D1 N10 V1a"),
        ("d2 n12 v1 d1 n0", "D2 C2 N12 D1 C0 N0 V1a"),
        # prepositions become postpositions; place phrases go before the object
        ("d0 n1 v1 d1 n4 p2 d2 n5", "D0 N1 D2 N5 P2 D1 N4 V1e"),
        ("d0 n1 v1 d1 n4 p2 d2 n5 p0 d3 n8", "D0 N1 D2 N5 P2 D3 N8 P0 D1 N4 V1e"),
        # long-range move: the time phrase goes from the clause end to the clause front
        ("d0 n1 v1 d1 n4 p2 d2 n5 t1 d3 n8", "D3 N8 T1 D0 N1 D2 N5 P2 D1 N4 V1e"),
        # clauses are translated one by one around AND
        (
            "d0 n1 v1 d1 n4 and d2 n5 not v3 d3 n7 t0 d0 n2",
            "D0 N1 D1 N4 V1e AND D0 N2 T0 D2 N5 D3 N7 NV3o",
        ),
        # the module docstring's example
        (
            "d0 a3 n7 not v2 d1 n4 p0 d2 n9 t1 d3 n5",
            "D3 N5 T1 D0 N7 A3 D2 C4 N9 P0 D1 N4 NV2e",
        ),
    ],
)
def test_translate_rules(source, target):
    assert translate(_t(source)) == _t(target)


@pytest.mark.parametrize(
    "source",
    ["d0 n1 v1", "n1 v1 d0 n2", "d0 n1 d1 n2", "d0 very n1 v1 d1 n2", "d0 n1 v1 d1 n2 x3", ""],
)
def test_translate_rejects_non_sentences(source):
    with pytest.raises(ValueError, match="translate:") as err:
        translate(_t(source))
    assert "\n" not in str(err.value)


def test_generator_is_deterministic_and_seeded():
    a, b = synthetic_task(SMALL), synthetic_task(SMALL)
    assert a.train == b.train and a.dev == b.dev and a.test == b.test
    assert a.src_vocab == b.src_vocab and a.tgt_vocab == b.tgt_vocab
    c = synthetic_task(TaskConfig(n_train=300, n_dev=40, n_test=40, seed=8))
    assert c.train != a.train


def test_synonyms_are_a_free_choice_for_even_adjectives():
    src = _t("d0 a2 very a4 n7 v1 d1 a3 n4")
    assert translate(src) == _t("D0 N7 A2 VA4 D1 N4 A3 V1e")
    always = np.random.default_rng(0)
    assert translate(src, always, p_synonym=1.0) == _t("D0 N7 B2 VB4 D1 N4 A3 V1e")
    assert translate(src, always, p_synonym=0.0) == translate(src)


def _without_synonyms(tgt):
    return [re.sub(r"^(V?)B(\d+)$", r"\1A\2", tok) for tok in tgt]


def test_generated_pairs_follow_the_rules():
    data = synthetic_task(SMALL)
    pairs = data.train + data.dev + data.test
    assert all(_without_synonyms(tgt) == translate(src) for src, tgt in pairs)
    # about half of the even adjectives take their synonym (p_synonym = 0.5)
    tokens = [tok for _, tgt in pairs for tok in tgt]
    b_forms = sum(bool(re.match(r"^V?B\d+$", tok)) for tok in tokens)
    a_even = sum(bool(re.match(r"^V?A\d*[02468]$", tok)) for tok in tokens)
    assert 0.4 < b_forms / (a_even + b_forms) < 0.6
    lengths = [len(src) for src, _ in pairs]
    assert min(lengths) >= SMALL.min_len and max(lengths) <= SMALL.max_len
    words = {tok for src, _ in pairs for tok in src}
    # every phenomenon of the docs occurs
    assert {"not", "very", "and"} <= words
    assert any(w.startswith("t") for w in words) and any(w.startswith("p") for w in words)
    assert any(tok.startswith("C") for _, tgt in pairs for tok in tgt)
    # dev and test never repeat a training sentence, nor each other
    train = {tuple(s) for s, _ in data.train}
    held = [tuple(s) for s, _ in data.dev + data.test]
    assert not train & set(held) and len(set(held)) == len(held)


@pytest.mark.parametrize(
    "dense, redundant",
    [
        # the docstring's examples: markers by role, x before "not", a comma, the period, pieces
        (
            "d0 a3 n165 not v2 d1 n4 and d0 n1 v13 d2 n2 p1 d1 n3",
            "d0 a3 n1@@ 6@@ @5 ks x not v2 d1 n4 ko , and d0 n1 ks x v1@@ @3 d2 n2 ko "
            "p1 d1 n3 kp .",
        ),
        (
            "d1 very a12 n9 v0 d2 n10 t2 d3 n5",
            "d1 very a1@@ @2 n9 ks x v0 d2 n1@@ @0 ko t2 d3 n5 kp .",
        ),
    ],
)
def test_redundant_source_rules(dense, redundant):
    assert redundant_source(_t(dense)) == _t(redundant)
    assert dense_source(_t(redundant)) == _t(dense)
    assert dense_source(_t(dense)) == _t(dense)  # a dense sentence comes back unchanged
    assert translate(_t(redundant)) == translate(_t(dense))


@pytest.mark.parametrize(
    "bad",
    [
        "d0 n1 x ks v1 d1 n2 ko .",  # the auxiliary before the marker
        "d0 n1 ks x v1 d1 n2 ko . .",  # two periods
        "d0 n1 ks x v1 d1 n2 kp .",  # the object's marker is ko
        "d0 n1@@ ks x v1 d1 n2 ko .",  # a stem without its last piece
    ],
)
def test_translate_rejects_a_malformed_redundant_sentence(bad):
    with pytest.raises(ValueError, match="^translate:"):
        translate(_t(bad))


def test_redundant_rewrite_is_bounded():
    cfg = TaskConfig(n_train=300, n_dev=20, n_test=20, min_len=5, max_len=10, redundant=True)
    data = synthetic_task(cfg)
    assert max(len(s) for s, _ in data.train + data.dev + data.test) <= 2 * cfg.max_len


def test_redundant_variant_keeps_the_dense_targets():
    dense = synthetic_task(SMALL)
    cfg = TaskConfig(**{**SMALL.__dict__, "redundant": True})
    redundant = synthetic_task(cfg)
    for (src_r, tgt_r), (src_d, tgt_d) in zip(
        redundant.train + redundant.test, dense.train + dense.test, strict=True
    ):
        assert tgt_r == tgt_d and dense_source(src_r) == src_d
        assert src_r == redundant_source(src_d) and _without_synonyms(tgt_r) == translate(src_r)
    # a large share of the source is tokens the target does not need (docs/models.md)
    n_dense = sum(len(s) for s, _ in dense.train)
    n_redundant = sum(len(s) for s, _ in redundant.train)
    assert 0.3 < 1 - n_dense / n_redundant < 0.6
    assert dense.fingerprint() != redundant.fingerprint()
    assert redundant.config["redundant"] is True


def test_length_bounds_are_exact():
    data = synthetic_task(TaskConfig(n_train=200, n_dev=5, n_test=5, min_len=12, max_len=14))
    assert {len(s) for s, _ in data.train} <= {12, 13, 14}


def test_noise_touches_only_training_targets():
    noisy = synthetic_task(TaskConfig(n_train=300, n_dev=40, n_test=40, seed=7, noise=0.2))
    clean = synthetic_task(SMALL)
    assert [s for s, _ in noisy.train] == [s for s, _ in clean.train]
    changed = sum(a != b for (_, a), (_, b) in zip(noisy.train, clean.train, strict=True))
    assert changed > 100
    assert noisy.dev == clean.dev and noisy.test == clean.test


# -- configs -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "data, key",
    [
        ({"n_train": 0}, "n_train"),
        ({"max_len": 3}, "max_len"),
        ({"p_neg": 1.5}, "p_neg"),
        ({"noise": "lots"}, "noise"),
        ({"seed": 1.5}, "seed"),
        ({"n_trian": 5}, "n_trian"),
        ({"kind": "web"}, "kind"),
        ({"kind": "files", "train_src": "a"}, "train_tgt"),
        (
            {
                "kind": "files",
                "tokens": "bpe",
                **{
                    k: "x"
                    for k in (
                        "train_src",
                        "train_tgt",
                        "dev_src",
                        "dev_tgt",
                        "test_src",
                        "test_tgt",
                    )
                },
            },
            "tokens",
        ),
    ],
)
def test_bad_data_config_is_one_line_naming_the_key(data, key):
    with pytest.raises(ConfigError) as err:
        data_config_from_dict(data)
    msg = str(err.value)
    assert f"data.{key}" in msg and "\n" not in msg


# -- vocabulary --------------------------------------------------------------------------------
def test_vocab():
    vocab = Vocab.build([["b", "a", "b"], ["c", "b", "a"]])
    assert vocab.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert vocab.itos[4:] == ["b", "a", "c"]  # by frequency, ties alphabetical
    assert vocab.encode(["a", "zzz"]) == [5, UNK]
    assert vocab.decode([BOS, 4, PAD, 5, EOS, 6]) == ["b", "a"]
    assert Vocab.from_list(vocab.to_list()) == vocab
    assert Vocab.build([["a", "b", "b"]], min_freq=2).itos[4:] == ["b"]


# -- files -------------------------------------------------------------------------------------
def test_load_parallel_words_and_chars(tmp_path):
    src, tgt = tmp_path / "a.src", tmp_path / "a.tgt"
    src.write_text("hello  world\nsecond line\n\n")
    tgt.write_text("hallo welt\nzweite  zeile\n\n")
    assert load_parallel(src, tgt) == [
        (["hello", "world"], ["hallo", "welt"]),
        (["second", "line"], ["zweite", "zeile"]),
    ]
    chars = load_parallel(src, tgt, tokens="char")
    assert chars[0][1] == list("hallo\u2581welt")
    assert detokenize(chars[1][1], "char") == "zweite zeile"


def test_load_parallel_errors_are_one_line(tmp_path):
    src, tgt = tmp_path / "x.src", tmp_path / "x.tgt"
    src.write_text("a\nb\nc\n")
    tgt.write_text("a\nb\n")
    with pytest.raises(ValueError) as err:
        load_parallel(src, tgt)
    msg = str(err.value)
    assert str(src) in msg and str(tgt) in msg and "3" in msg and "\n" not in msg
    with pytest.raises(ValueError, match="no such file"):
        load_parallel(tmp_path / "missing.src", tgt)
    (tmp_path / "bad.src").write_bytes(b"\xff\xfe\n")
    with pytest.raises(ValueError, match="not UTF-8"):
        load_parallel(tmp_path / "bad.src", tgt)


def test_load_data_from_files(tmp_path):
    for split in ("train", "dev", "test"):
        (tmp_path / f"{split}.src").write_text("a b c\nb c\n")
        (tmp_path / f"{split}.tgt").write_text("x y\ny\n")
    cfg = FilesConfig(
        **{
            f"{s}_{side}": str(tmp_path / f"{s}.{side}")
            for s in ("train", "dev", "test")
            for side in ("src", "tgt")
        }
    )
    data = load_data(cfg)
    assert len(data.train) == 2 and data.src_vocab.itos[4:] == ["b", "c", "a"]


# -- batching ----------------------------------------------------------------------------------
def test_length_bucketed_batches():
    data = synthetic_task(SMALL)
    encoded = encode_pairs(data.train, data.src_vocab, data.tgt_vocab)
    batches = make_batches(encoded, max_tokens=256)
    seen = sorted(i for b in batches for i in b.index)
    assert seen == list(range(len(encoded)))
    for b in batches:
        width = max(b.src.shape[1], b.tgt_in.shape[1])
        assert b.src.shape[0] == 1 or b.src.shape[0] * width <= 256
        assert b.src.shape[0] == b.tgt_in.shape[0] == b.tgt_out.shape[0]
        assert (b.tgt_in[:, 0] == BOS).all()
        # <eos> ends every source and target; padding only after it
        for row, i in enumerate(b.index):
            s, t = encoded[i]
            assert b.src[row, : len(s)].tolist() == s and s[-1] == EOS
            assert b.tgt_out[row, : len(t) + 1].tolist() == t + [EOS]
            assert (b.src[row, len(s) :] == PAD).all()
    # bucketing: source lengths inside a batch differ by little
    spread = [int(b.src.ne(PAD).sum(1).max() - b.src.ne(PAD).sum(1).min()) for b in batches]
    assert max(spread) <= 3
    shuffled = make_batches(encoded, 256, shuffle=True, seed=3)
    assert [b.index for b in shuffled] == [b.index for b in make_batches(encoded, 256, True, 3)]
    assert [b.index for b in shuffled] != [b.index for b in batches]
    assert all(b.src.shape[0] <= 4 for b in make_batches(encoded, 10**6, max_sentences=4))
