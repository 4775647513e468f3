"""The Ding task (eatt.model.ding, eatt.model.subword, eatt.model.corpus, `eatt data`).

The rules are checked on a small file in the dictionary's format written here; the real file
(Debian trans-de-en, which make install unpacks into .venv/debian) is checked against the
pinned manifest of version 1.9-6 and the pieces of one sentence.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eatt.cli import main
from eatt.config import ConfigError
from eatt.model import corpus, ding
from eatt.model.corpus import DingConfig, data_config_from_dict, detokenize, ding_task, token_kind
from eatt.model.ding import find_ding, read_ding, sentence_pairs, split_pairs, strip_annotations
from eatt.model.experiments import base, run_experiment
from eatt.model.subword import join_pieces, train_subword
from eatt.model.train import load_run_config
from eatt.rtl_sim.tools import ToolMissing

ROOT = Path(__file__).resolve().parent.parent
LINES = [
    "# Version :: devel 2023-01-30",
    # kept: the third sub-entry pair; English annotation stripped; first alternative only
    "Haus {n} | Häuser {pl} | Das Haus ist sehr alt.; Das Haus ist alt. :: "
    "house | houses | The [Br.] house is very old.; The house is old.",
    # not aligned (2 German sub-entries, 1 English): skipped
    "Er kommt heute nicht mehr. | Sie kommt morgen früh. :: He won't come today.",
    # German annotation: skipped; three words: skipped; no final punctuation: skipped
    "Das ist mir egal. [ugs.] | Ich weiß nicht. | ein großes rotes Haus :: "
    "I don't care about it. | I don't know. | a big red house",
    # English side too short: skipped; a question (<...> stripped) and an exclamation: kept
    "Wie spät ist es jetzt? | Komm sofort nach Hause! | Das ist sehr gut so. :: "
    "What <what's> time is it now? | Come home right now! | Very good.",
    # the same pair again: a duplicate
    "Hausbau {m} | Das Haus ist sehr alt. :: house building | The house is very old.",
]


def test_sentence_pairs_follow_the_documented_rules():
    pairs, counts = sentence_pairs(LINES)
    assert pairs == [
        ("Das Haus ist sehr alt.", "The house is very old."),
        ("Wie spät ist es jetzt?", "What time is it now?"),
        ("Komm sofort nach Hause!", "Come home right now!"),
    ]
    assert counts == {"entries": 5, "aligned": 11, "sentences": 4, "unique": 3}


def test_strip_annotations():
    assert strip_annotations("a {n}  b [Br.] [coll.] c <x y> d (e)") == "a b c d (e)"


def _pair_in(bucket_range: range, english: str, start: int = 0) -> tuple[str, str]:
    """A German sentence whose hash bucket (rule 7) lies in ``bucket_range``."""
    for i in range(start, start + 10_000):
        german = f"Satz Nummer {i} ist hier."
        if ding._bucket(german) in bucket_range:
            return german, english
    raise AssertionError("no such sentence")


def test_split_by_hash_and_without_test_overlap():
    dev, test = range(0, ding.DEV_PERCENT), range(ding.DEV_PERCENT, 2 * ding.DEV_PERCENT)
    train = range(2 * ding.DEV_PERCENT, 100)
    t1, d1 = _pair_in(test, "Shared one."), _pair_in(dev, "shared ONE.")  # same, case-folded
    d2, r1 = _pair_in(dev, "Only dev."), _pair_in(train, "Only dev.")
    r2 = _pair_in(train, "Only train.", start=5000)
    splits = split_pairs([r2, r1, d2, d1, t1])
    assert splits == {"train": [r2], "dev": [d2], "test": [t1]}
    assert split_pairs([t1, r2, d2]) == {"train": [r2], "dev": [d2], "test": [t1]}


def test_missing_package_is_tool_missing_naming_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EATT_DEBIAN_ROOT", str(tmp_path))
    monkeypatch.setattr(ding, "SYSTEM_ROOT", tmp_path)
    with pytest.raises(ToolMissing, match="Debian package trans-de-en"):
        find_ding()
    assert main(["data"]) == 3
    assert main(["experiment", "eatt-vs-vanilla", "--task", "ding", "-o", str(tmp_path / "e")]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("Debian package trans-de-en" in line for line in err)
    assert not (tmp_path / "e").exists()  # refused before any folder was claimed
    assert main(["data", "--path", str(tmp_path / "nope")]) == 2
    assert "--path" in capsys.readouterr().err


def test_subword_is_deterministic_and_joins_back():
    sentences = ["Das Haus ist sehr alt.", "Die Häuser sind neu.", "Ein Haus, zwei Häuser."] * 5
    a, b = train_subword(sentences, 60), train_subword(sentences, 60)
    assert a.model == b.model and len(a) <= 60
    text = "Das „neue“ Haus – Ω ist alt…"  # characters never seen in training
    assert join_pieces(a.pieces(text)) == text
    with pytest.raises(ValueError, match="subword"):
        train_subword(sentences, 60, "word")


def test_ding_config_keys_and_kinds():
    assert data_config_from_dict({"kind": "ding", "vocab_size": 500}) == DingConfig(vocab_size=500)
    with pytest.raises(ConfigError, match=r"^data\.vocab_size: must be in"):
        data_config_from_dict({"kind": "ding", "vocab_size": 3})
    with pytest.raises(ConfigError, match=r"^data\.direction"):
        data_config_from_dict({"kind": "ding", "direction": "fr-en"})
    with pytest.raises(ConfigError, match="synthetic, files, ding"):
        data_config_from_dict({"kind": "wmt"})
    assert token_kind({"kind": "ding"}) == "pieces" and token_kind({"tokens": "char"}) == "char"
    assert detokenize(["\u2581Das", "\u2581Ha", "us", "."], "pieces") == "Das Haus."


def test_the_example_run_config_reads():
    _, train_cfg = load_run_config(ROOT / "examples" / "ding.yaml")
    assert train_cfg.data == DingConfig()


def test_ding_task_learns_pieces_on_the_training_split_only(tmp_path, monkeypatch):
    lines = [
        f"Wort{i} {{n}} | Das ist der Satz Nummer {i}. :: word{i} | This is sentence number {i}."
        for i in range(300)
    ]
    path = tmp_path / "de-en"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    seen: list[list[str]] = []

    def recording(sentences, vocab_size, model_type):
        sentences = list(sentences)
        seen.append(sentences)
        return train_subword(sentences, vocab_size, model_type)

    monkeypatch.setattr(corpus, "train_subword", recording)
    cfg = DingConfig(path=str(path), vocab_size=60, direction="en-de", n_test=5)
    data = ding_task(cfg)
    split = read_ding(str(path))
    assert seen == [[en for _, en in split.train], [de for de, _ in split.train]]
    assert [detokenize(s, "pieces") for s, _ in data.dev] == [en for _, en in split.dev]
    assert len(data.test) == 5 and len(data.train) == len(split.train)
    assert data.config["kind"] == "ding" and data.fingerprint() == ding_task(cfg).fingerprint()


# -- the real file (make install fetches it) -----------------------------------------------------
def test_the_package_gives_the_pinned_corpus(capsys):
    """The issue's counts (17,585 sentence pairs, 8.0 German words on average, longest 49) and
    the pinned splits; `eatt data --json` says so."""
    assert main(["data", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pinned"] == "same", report
    assert {k: report[k] for k in ding.PINNED} == ding.PINNED
    assert report["sentences"] == 17585 and report["german_words_max"] == 49
    assert min(report["splits"]["dev"]["pairs"], report["splits"]["test"]["pairs"]) >= 1000


def test_the_package_in_pieces():
    data = ding_task(DingConfig(vocab_size=1000, n_dev=1, n_test=1))
    src, tgt = data.test[0]
    assert detokenize(src, "pieces") == "Noch ist nicht aller Tage Abend."
    assert detokenize(tgt, "pieces") == "It’s not over until it’s over."
    assert len(data.train) == 15150 and len(data.src_vocab) <= 1000 + 4


def test_quick_experiment_on_the_ding_task(tmp_path, monkeypatch):
    """`eatt experiment eatt-vs-vanilla --task ding` (at a tiny size): its folder, the task in
    the table, sacrebleu's signature; an experiment tied to the synthetic task refuses it."""
    tiny = DingConfig(vocab_size=200, n_train=300, n_dev=5, n_test=5)
    monkeypatch.setattr(base, "_QUICK_DING_DATA", tiny)
    report = run_experiment(
        "eatt-vs-vanilla",
        quick=True,
        out_dir=tmp_path,
        quiet=True,
        steps=2,
        seeds=(1,),
        task="ding",
    )
    assert report["task"] == "ding" and report["data"]["kind"] == "ding"
    table = (tmp_path / "eatt-vs-vanilla-ding" / "results.md").read_text()
    assert "on the ding task" in table and "sacrebleu: nrefs:1|" in table
    with pytest.raises(ValueError, match="--task ding: l0drop-redundant runs on the synthetic"):
        run_experiment("l0drop-redundant", quick=True, out_dir=tmp_path, task="ding")


@pytest.mark.parametrize("name", ["qat", "window", "l0drop"])
def test_quick_staged_experiments_on_the_ding_task(name, tmp_path, monkeypatch):
    """Issue 44 item 3: the QAT, Luong / Flexible window and L0Drop experiments on the Ding
    task's natural data (a tiny size here): the report names the task, the table gives
    sacrebleu's signature, the runs train on the Ding pairs."""
    tiny = DingConfig(vocab_size=1000, n_train=200, n_dev=4, n_test=4, max_len=63)
    monkeypatch.setattr(base, "_QUICK_DING_DATA", tiny)
    monkeypatch.setattr(base, "_QUICK_TRAIN", base._QUICK_TRAIN.replace(steps=4, warmup=2))
    report = run_experiment(name, quick=True, out_dir=tmp_path, quiet=True, task="ding")
    assert report["task"] == "ding" and report["data"]["kind"] == "ding"
    table = (tmp_path / f"{name}-ding" / "results.md").read_text()
    assert "On the ding task; sacrebleu: nrefs:1|" in table and "Target:" in table
    if name == "window":  # the window unit's kinds run on the synthetic task only
        assert [u["unit"][0] for u in report["units"]] == ["luong"] * 3 + ["flexible"] * 2
