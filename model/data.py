"""Translation data: a bundled synthetic language pair, the user's parallel files, batching.

Nothing is downloaded. :func:`synthetic_task` generates a deterministic English-like (SVO,
prepositions) to Japanese-like (SOV, postpositions) language pair from a seed; the rules are
in docs/models.md and :func:`translate` applies them to any well-formed source sentence, so a
test can check a hand-written example against the documentation::

    source  d0 a3 n7 not v2 d1 n4 p0 d2 n9 t1 d3 n5
    target  D3 N5 T1 D0 N7 A3 D2 C4 N9 P0 D1 N4 NV2e

* :class:`Vocab` -- token <-> id with ``<pad>`` 0, ``<bos>`` 1, ``<eos>`` 2, ``<unk>`` 3.
* :class:`TaskConfig` / :func:`synthetic_task` -- the generator; :class:`FilesConfig` /
  :func:`load_parallel` -- one sentence per line, word or character tokens.
* :func:`make_batches` -- length-bucketed batches bounded by a number of (padded) tokens.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from eatt.config import ConfigError

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "UNK",
    "Batch",
    "FilesConfig",
    "TaskConfig",
    "TranslationData",
    "Vocab",
    "dense_source",
    "load_data",
    "load_parallel",
    "make_batches",
    "redundant_source",
    "synthetic_task",
    "translate",
]

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
#: the character-token stand-in for a space (so character output can be joined back to text)
SPACE = "\u2581"

Pair = tuple[list[str], list[str]]


# -- vocabulary ----------------------------------------------------------------------------------
class Vocab:
    """Tokens <-> ids; ids 0..3 are ``<pad> <bos> <eos> <unk>``, then the given tokens."""

    def __init__(self, tokens: Iterable[str]) -> None:
        self.itos: list[str] = list(SPECIALS)
        for tok in tokens:
            if tok in SPECIALS:
                continue
            self.itos.append(tok)
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("Vocab: duplicate tokens")

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1) -> Vocab:
        """Tokens seen at least ``min_freq`` times, most frequent first (ties alphabetical)."""
        counts = Counter(tok for sent in sentences for tok in sent)
        kept = [t for t, c in counts.items() if c >= min_freq]
        kept.sort(key=lambda t: (-counts[t], t))
        return cls(kept)

    def __len__(self) -> int:
        return len(self.itos)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self.stoi.get(t, UNK) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens up to the first ``<eos>``; ``<pad>`` and ``<bos>`` are dropped."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i in (PAD, BOS):
                continue
            out.append(self.itos[i] if 0 <= i < len(self.itos) else SPECIALS[UNK])
        return out

    def to_list(self) -> list[str]:
        return list(self.itos)

    @classmethod
    def from_list(cls, itos: Sequence[str]) -> Vocab:
        if list(itos[: len(SPECIALS)]) != list(SPECIALS):
            raise ValueError(f"Vocab: a saved vocabulary must start with {SPECIALS}")
        return cls(itos)


# -- configs -------------------------------------------------------------------------------------
def check_fields(obj: Any, source: str) -> None:
    """Type-check a flat dataclass instance against its annotations (int/float/bool/str/None)."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        kind = str(f.type).replace(" ", "")
        optional = "None" in kind
        if value is None:
            if not optional:
                raise ConfigError(f"{source}.{f.name}: must not be null")
            continue
        base = kind.replace("|None", "")
        if base == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"{source}.{f.name}: must be an integer, got {value!r}")
        if base == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{source}.{f.name}: must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ConfigError(f"{source}.{f.name}: must be finite, got {value!r}")
            object.__setattr__(obj, f.name, float(value))
        if base == "bool" and not isinstance(value, bool):
            raise ConfigError(f"{source}.{f.name}: must be true or false, got {value!r}")
        if base == "str" and not isinstance(value, str):
            raise ConfigError(f"{source}.{f.name}: must be a string, got {value!r}")


def dataclass_from_dict(cls: type, data: Any, source: str):
    """``cls(**data)`` with one-line ConfigErrors naming ``source.key``."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys to values")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{source}.{unknown[0]}: unknown key (known: {', '.join(sorted(known))})")
    try:
        obj = cls(**data)
    except ConfigError as err:
        msg = str(err)
        raise ConfigError(msg if msg.startswith(source) else f"{source}.{msg}") from None
    return obj


def _range(obj: Any, key: str, low: float, high: float) -> None:
    value = getattr(obj, key)
    if not low <= value <= high:
        raise ConfigError(f"{key}: must be in [{low}, {high}], got {value}")


@dataclass(frozen=True)
class TaskConfig:
    """The synthetic language pair (docs/models.md, "The synthetic task")."""

    kind: str = "synthetic"
    seed: int = 1234
    n_train: int = 20000
    n_dev: int = 500
    n_test: int = 500
    #: source sentence length in tokens (before <eos>), inclusive bounds
    min_len: int = 5
    max_len: int = 30
    #: lexicon sizes (nouns, verbs, adjectives); content words are drawn Zipf-distributed
    n_nouns: int = 600
    n_verbs: int = 120
    n_adjs: int = 120
    zipf: float = 1.1
    #: probabilities: second clause, negated verb, each of up to 2 adjectives, "very" before an
    #: adjective, each of up to 2 place phrases, a time phrase
    p_conj: float = 0.3
    p_neg: float = 0.2
    p_adj: float = 0.4
    p_very: float = 0.25
    p_place: float = 0.4
    p_time: float = 0.3
    #: probability that an adjective with a synonym (even index) is translated by the synonym
    p_synonym: float = 0.5
    #: per-token probability that a *training* target token is replaced by a random target word
    noise: float = 0.0
    #: the redundant variant: every source sentence is rewritten by :func:`redundant_source`
    #: (case markers, an auxiliary, punctuation, subword pieces: tokens the target does not
    #: need, as natural language has them; docs/models.md). Targets and the random stream stay
    #: those of the dense task; min_len / max_len bound the sentence before the rewrite, and a
    #: sentence whose rewrite is longer than 2 max_len is drawn again
    redundant: bool = False

    def __post_init__(self) -> None:
        check_fields(self, "data")
        if self.kind != "synthetic":
            raise ConfigError(f"kind: must be 'synthetic' or 'files', got {self.kind!r}")
        _range(self, "seed", 0, 2**63 - 1)
        _range(self, "n_train", 1, 10**7)
        _range(self, "n_dev", 1, 10**6)
        _range(self, "n_test", 1, 10**6)
        _range(self, "min_len", 5, 200)
        _range(self, "max_len", self.min_len, 200)
        _range(self, "n_nouns", 1, 10**5)
        _range(self, "n_verbs", 1, 10**5)
        _range(self, "n_adjs", 1, 10**5)
        _range(self, "zipf", 0.0, 4.0)
        for key in (
            "p_conj",
            "p_neg",
            "p_adj",
            "p_very",
            "p_place",
            "p_time",
            "p_synonym",
            "noise",
        ):
            _range(self, key, 0.0, 1.0)

    @classmethod
    def from_dict(cls, data: Any, source: str = "data") -> TaskConfig:
        return dataclass_from_dict(cls, data, source)


@dataclass(frozen=True)
class FilesConfig:
    """The user's own parallel text: one sentence per line, aligned by line number."""

    kind: str = "files"
    train_src: str = ""
    train_tgt: str = ""
    dev_src: str = ""
    dev_tgt: str = ""
    test_src: str = ""
    test_tgt: str = ""
    #: "word" (split on whitespace) or "char" (characters; a space becomes U+2581)
    tokens: str = "word"
    #: tokens seen fewer times in the training data map to <unk>
    min_freq: int = 1
    #: training pairs with a longer side are dropped (0 = keep all)
    max_len: int = 0

    def __post_init__(self) -> None:
        check_fields(self, "data")
        for key in ("train_src", "train_tgt", "dev_src", "dev_tgt", "test_src", "test_tgt"):
            if not getattr(self, key):
                raise ConfigError(f"{key}: a path is required when kind is 'files'")
        if self.tokens not in ("word", "char"):
            raise ConfigError(f"tokens: must be 'word' or 'char', got {self.tokens!r}")
        _range(self, "min_freq", 1, 10**9)
        _range(self, "max_len", 0, 10**6)

    @classmethod
    def from_dict(cls, data: Any, source: str = "data") -> FilesConfig:
        return dataclass_from_dict(cls, data, source)


def data_config_from_dict(data: Any, source: str = "data") -> TaskConfig | FilesConfig:
    """A ``data`` section: ``kind: synthetic`` (the default) or ``kind: files``."""
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys to values")
    kind = (data or {}).get("kind", "synthetic")
    if kind == "files":
        return FilesConfig.from_dict(data, source)
    if kind != "synthetic":
        raise ConfigError(f"{source}.kind: must be 'synthetic' or 'files', got {kind!r}")
    return TaskConfig.from_dict(data, source)


# -- the synthetic language pair -----------------------------------------------------------------
DETERMINERS = ("d0", "d1", "d2", "d3")
PLACE_PREPS = tuple(f"p{i}" for i in range(6))
TIME_PREPS = tuple(f"t{i}" for i in range(3))
VERY, NOT, AND = "very", "not", "and"
#: every third noun (n0, n3, n6, ...) takes a classifier C{i % 5} in front of it (one-to-many)
CLASSIFIER_EVERY, N_CLASSIFIERS = 3, 5
#: adjective aK with K mod 2 == 0 has two translations, AK and BK (synonyms)
SYNONYM_EVERY = 2
#: noun nK has gender K mod 3; the target verb agrees with its subject: V{j}a / V{j}e / V{j}o
GENDER_SUFFIXES = ("a", "e", "o")


def _word_class(tok: str) -> str:
    if tok in (VERY, NOT, AND):
        return tok
    head, num = tok[:1], tok[1:]
    if head in "dnavpt" and num.isdigit():
        return head
    raise ValueError(f"translate: {tok!r} is not a word of the synthetic source language")


Synonym = Callable[[], bool]


def _adjective(tok: str, synonym: Synonym | None) -> str:
    """aK -> AK; an even K has a synonym BK, used when ``synonym()`` says so (free choice)."""
    k = int(tok[1:])
    if k % SYNONYM_EVERY == 0 and synonym is not None and synonym():
        return f"B{k}"
    return f"A{k}"


def _translate_np(np_tokens: list[str], synonym: Synonym | None = None) -> list[str]:
    """D [very] A ... N  ->  D [C] N A' ...: the noun moves in front of its adjectives."""
    det, *mods, noun = np_tokens
    out_mods: list[str] = []
    i = 0
    while i < len(mods):
        if mods[i] == VERY:  # many-to-one: "very aK" -> "VAK"
            out_mods.append("V" + _adjective(mods[i + 1], synonym))
            i += 2
        else:
            out_mods.append(_adjective(mods[i], synonym))
            i += 1
    index = int(noun[1:])
    noun_out = [noun.upper()]
    if index % CLASSIFIER_EVERY == 0:  # one-to-many: a classifier before the noun
        noun_out.insert(0, f"C{index % N_CLASSIFIERS}")
    return [det.upper(), *noun_out, *out_mods]


def _read_np(tokens: list[str], i: int) -> tuple[list[str], int]:
    start = i
    if i >= len(tokens) or _word_class(tokens[i]) != "d":
        raise ValueError(f"translate: expected a determiner at position {i}")
    i += 1
    while i < len(tokens) and _word_class(tokens[i]) in ("a", VERY):
        if tokens[i] == VERY and (i + 1 >= len(tokens) or _word_class(tokens[i + 1]) != "a"):
            raise ValueError(f"translate: 'very' must precede an adjective (position {i})")
        i += 2 if tokens[i] == VERY else 1
    if i >= len(tokens) or _word_class(tokens[i]) != "n":
        raise ValueError(f"translate: expected a noun at position {i}")
    return tokens[start : i + 1], i + 1


def _translate_clause(tokens: list[str], synonym: Synonym | None) -> list[str]:
    subject, i = _read_np(tokens, 0)
    subject_out = _translate_np(subject, synonym)
    negated = i < len(tokens) and tokens[i] == NOT
    i += negated
    if i >= len(tokens) or _word_class(tokens[i]) != "v":
        raise ValueError(f"translate: expected a verb at position {i}")
    verb = tokens[i]
    obj, i = _read_np(tokens, i + 1)
    obj_out = _translate_np(obj, synonym)
    places: list[str] = []
    times: list[str] = []
    while i < len(tokens):
        prep = tokens[i]
        if _word_class(prep) not in ("p", "t"):
            raise ValueError(f"translate: expected a preposition at position {i}")
        np_tokens, i = _read_np(tokens, i + 1)
        # a prepositional phrase becomes a postpositional one: P NP -> NP' P'
        phrase = _translate_np(np_tokens, synonym) + [prep.upper()]
        (times if prep.startswith("t") else places).extend(phrase)
    # agreement: the verb takes the gender suffix of its subject noun (long-range in the target)
    verb_out = verb.upper() + GENDER_SUFFIXES[int(subject[-1][1:]) % len(GENDER_SUFFIXES)]
    if negated:  # many-to-one: "not vK" -> "NVK.."
        verb_out = "N" + verb_out
    # SVO -> SOV: time phrases to the front (long-range), place phrases before the object,
    # the verb to the end of its clause
    return times + subject_out + places + obj_out + [verb_out]


# -- the redundant variant (TaskConfig.redundant) -------------------------------------------------
#: case markers after the noun of a subject, an object and a phrase's noun phrase
CASE_MARKERS = ("ks", "ko", "kp")
#: the auxiliary before the verb (before "not" in a negated clause)
AUX = "x"
COMMA, PERIOD = ",", "."
#: a content word (noun, verb, adjective) with index K >= SPLIT_FROM is written as subword
#: pieces, one per digit of K (as BPE splits rare words into more pieces): the stem
#: "{class}{first digit}@@", the middle digits "{digit}@@", the last "@{digit}"
SPLIT_FROM = 10
_STEM, _TAIL = "@@", "@"


def _pieces(tok: str) -> list[str]:
    head, num = tok[:1], tok[1:]
    if head in "nva" and num.isdigit() and int(num) >= SPLIT_FROM:
        digits = str(int(num))
        return [head + digits[0] + _STEM, *(d + _STEM for d in digits[1:-1]), _TAIL + digits[-1]]
    return [tok]


def redundant_source(tokens: Sequence[str]) -> list[str]:
    """The redundant form of a dense source sentence (docs/models.md, "The redundant variant").

    A case marker follows every noun (ks subject, ko object, kp in a place or time phrase), the
    auxiliary x comes before the verb (before ``not``), a comma before ``and``, a period at the
    end, and every noun, verb and adjective with index >= 10 is split into subword pieces, one
    per digit::

        d0 a3 n17 not v2 d1 n4 and ...  ->  d0 a3 n1@@ @7 ks x not v2 d1 n4 ko , and ... .
        n165  ->  n1@@ 6@@ @5

    Every added token is predictable from the rest of the sentence, and the pieces of a word
    carry it only together, so the target (``translate``) is the dense sentence's.
    """
    out: list[str] = []
    role = 0  # 0 subject, 1 object, 2 phrase
    for i, tok in enumerate(tokens):
        kind = _word_class(tok)
        if tok == AND:
            out.append(COMMA)
            role = 0
        if tok == NOT or (kind == "v" and (i == 0 or tokens[i - 1] != NOT)):
            out.append(AUX)
        if kind in ("p", "t"):
            role = 2
        out.extend(_pieces(tok))
        if kind == "v":
            role = 1
        elif kind == "n":
            out.append(CASE_MARKERS[role])
    out.append(PERIOD)
    return out


def dense_source(tokens: Sequence[str]) -> list[str]:
    """The inverse of :func:`redundant_source`: the added tokens removed, the pieces joined
    (a dense sentence comes back unchanged)."""
    out: list[str] = []
    for tok in tokens:
        if tok in CASE_MARKERS or tok in (AUX, COMMA, PERIOD):
            continue
        if out and out[-1].endswith(_STEM) and (tok.endswith(_STEM) or tok.startswith(_TAIL)):
            piece = tok[: -len(_STEM)] if tok.endswith(_STEM) else tok[len(_TAIL) :]
            if piece.isdigit():  # a middle piece keeps its @@, the last one closes the word
                out[-1] = out[-1][: -len(_STEM)] + piece + (_STEM if tok.endswith(_STEM) else "")
                continue
        out.append(tok)
    return out


def translate(
    source: Sequence[str], rng: np.random.Generator | None = None, p_synonym: float = 0.5
) -> list[str]:
    """Apply the documented rules (docs/models.md) to a source sentence of the synthetic task
    (dense, or in the redundant variant's form: :func:`dense_source` is applied first).

    Adjectives aK with even K have two translations, AK and BK (free word choice, as real
    translations have): without ``rng`` always AK; with ``rng`` BK with probability
    ``p_synonym``, one draw per such adjective, left to right through the source.
    Raises a one-line ValueError if the sentence is not in the source language.
    """
    synonym = None if rng is None else (lambda: bool(rng.random() < p_synonym))
    tokens = dense_source(source)
    if tokens != list(source) and redundant_source(tokens) != list(source):
        raise ValueError(
            "translate: not a sentence of the redundant variant (markers, auxiliary, "
            "punctuation or subword pieces out of place)"
        )
    clauses: list[list[str]] = [[]]
    for tok in tokens:
        if tok == AND:
            clauses.append([])
        else:
            clauses[-1].append(tok)
    out: list[str] = []
    for k, clause in enumerate(clauses):
        if k:
            out.append(AND.upper())
        out.extend(_translate_clause(clause, synonym))
    return out


class _Generator:
    def __init__(self, cfg: TaskConfig, rng: np.random.Generator) -> None:
        self.cfg, self.rng = cfg, rng
        self.nouns = self._lexicon("n", cfg.n_nouns)
        self.verbs = self._lexicon("v", cfg.n_verbs)
        self.adjs = self._lexicon("a", cfg.n_adjs)

    def _lexicon(self, prefix: str, n: int) -> tuple[list[str], np.ndarray]:
        weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** self.cfg.zipf
        return [f"{prefix}{i}" for i in range(n)], np.cumsum(weights / weights.sum())

    def _word(self, lexicon: tuple[list[str], np.ndarray]) -> str:
        words, cdf = lexicon  # word i has probability proportional to 1 / (i + 1) ** zipf
        index = int(np.searchsorted(cdf, self.rng.random(), side="right"))
        return words[min(index, len(words) - 1)]

    def _chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def noun_phrase(self) -> list[str]:
        out = [DETERMINERS[int(self.rng.integers(len(DETERMINERS)))]]
        for _ in range(2):
            if self._chance(self.cfg.p_adj):
                if self._chance(self.cfg.p_very):
                    out.append(VERY)
                out.append(self._word(self.adjs))
        out.append(self._word(self.nouns))
        return out

    def clause(self) -> list[str]:
        out = self.noun_phrase()
        if self._chance(self.cfg.p_neg):
            out.append(NOT)
        out.append(self._word(self.verbs))
        out += self.noun_phrase()
        for _ in range(2):
            if self._chance(self.cfg.p_place):
                out += [PLACE_PREPS[int(self.rng.integers(len(PLACE_PREPS)))]]
                out += self.noun_phrase()
        if self._chance(self.cfg.p_time):
            out += [TIME_PREPS[int(self.rng.integers(len(TIME_PREPS)))]] + self.noun_phrase()
        return out

    def sentence(self) -> list[str]:
        while True:  # rejection sampling keeps the length bounds exact
            out = self.clause()
            if self._chance(self.cfg.p_conj):
                out += [AND] + self.clause()
            if not self.cfg.min_len <= len(out) <= self.cfg.max_len:
                continue
            if self.cfg.redundant and len(redundant_source(out)) > 2 * self.cfg.max_len:
                continue  # the rewrite's bound (TaskConfig.redundant)
            return out

    def target_words(self) -> list[str]:
        src = (
            list(DETERMINERS)
            + self.nouns[0]
            + self.verbs[0]
            + self.adjs[0]
            + list(PLACE_PREPS + TIME_PREPS)
        )
        words = [w.upper() for w in src if w[0] not in "va"] + [AND.upper()]
        words += [f"C{i}" for i in range(N_CLASSIFIERS)]
        verbs = [v.upper() + g for v in self.verbs[0] for g in GENDER_SUFFIXES]
        adjs = [a.upper() for a in self.adjs[0]]
        adjs += [f"B{a[1:]}" for a in self.adjs[0] if int(a[1:]) % SYNONYM_EVERY == 0]
        words += verbs + ["N" + v for v in verbs] + adjs + ["V" + a for a in adjs]
        return words


@dataclass
class TranslationData:
    """Token pairs of the three splits and the vocabularies built from the training split."""

    train: list[Pair]
    dev: list[Pair]
    test: list[Pair]
    src_vocab: Vocab
    tgt_vocab: Vocab
    config: dict = field(default_factory=dict)

    def fingerprint(self) -> str:
        """sha256 of every split's tokens: tells whether regenerated data is the same data."""
        digest = hashlib.sha256()
        for split in (self.train, self.dev, self.test):
            for src, tgt in split:
                digest.update(("\x1f".join(src) + "\x1e" + "\x1f".join(tgt) + "\x1d").encode())
            digest.update(b"\x1c")
        return digest.hexdigest()


def synthetic_task(cfg: TaskConfig | None = None) -> TranslationData:
    """Generate the synthetic language pair; the same config always gives the same data.

    Dev and test sentences never repeat a training sentence (nor each other). With
    ``cfg.noise > 0`` each training target token is replaced, with that probability, by a
    target word drawn uniformly (dev and test targets stay clean).
    """
    cfg = cfg or TaskConfig()
    rng = np.random.default_rng(cfg.seed)
    gen = _Generator(cfg, rng)
    seen: set[tuple[str, ...]] = set()
    splits: list[list[Pair]] = []
    for n, unique in ((cfg.n_train, False), (cfg.n_dev, True), (cfg.n_test, True)):
        pairs: list[Pair] = []
        attempts = 0
        while len(pairs) < n:
            attempts += 1
            if attempts > 100 * n + 1000:
                raise ValueError("synthetic_task: cannot find enough distinct sentences")
            src = gen.sentence()
            key = tuple(src)
            if unique and key in seen:
                continue
            seen.add(key)
            tgt = translate(src, rng, cfg.p_synonym)
            pairs.append((redundant_source(src) if cfg.redundant else src, tgt))
        splits.append(pairs)
    train, dev, test = splits
    if cfg.noise > 0:
        words = gen.target_words()
        noisy = []
        for src, tgt in train:
            flips = rng.random(len(tgt)) < cfg.noise
            picks = rng.integers(len(words), size=len(tgt))
            pairs_ = zip(tgt, flips, picks, strict=True)
            noisy.append((src, [words[p] if f else t for t, f, p in pairs_]))
        train = noisy
    src_vocab = Vocab.build(s for s, _ in train)
    tgt_vocab = Vocab.build(t for _, t in train)
    return TranslationData(train, dev, test, src_vocab, tgt_vocab, asdict(cfg))


# -- the user's parallel files -------------------------------------------------------------------
def _read_lines(path: str | os.PathLike) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None


def tokenize(line: str, tokens: str = "word") -> list[str]:
    if tokens == "word":
        return line.split()
    if tokens == "char":
        return [SPACE if c == " " else c for c in " ".join(line.split())]
    raise ValueError(f"tokens must be 'word' or 'char', got {tokens!r}")


def detokenize(tokens: Sequence[str], kind: str = "word") -> str:
    if kind == "char":
        return "".join(" " if t == SPACE else t for t in tokens)
    return " ".join(tokens)


def load_parallel(
    src_path: str | os.PathLike, tgt_path: str | os.PathLike, tokens: str = "word"
) -> list[Pair]:
    """Aligned sentence pairs from two files (one sentence per line).

    A pair whose two lines are both empty is skipped; different line counts, a missing file or
    a non-UTF-8 file raise a one-line ValueError naming the file(s).
    """
    src_lines, tgt_lines = _read_lines(src_path), _read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise ValueError(
            f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}; "
            "parallel files must have one sentence per line, aligned"
        )
    pairs = []
    for s, t in zip(src_lines, tgt_lines, strict=True):
        src, tgt = tokenize(s, tokens), tokenize(t, tokens)
        if src or tgt:
            pairs.append((src, tgt))
    return pairs


def load_data(cfg: TaskConfig | FilesConfig) -> TranslationData:
    """The three splits of a ``data`` config, synthetic or from files."""
    if isinstance(cfg, TaskConfig):
        return synthetic_task(cfg)
    train = load_parallel(cfg.train_src, cfg.train_tgt, cfg.tokens)
    if cfg.max_len:
        train = [(s, t) for s, t in train if len(s) <= cfg.max_len and len(t) <= cfg.max_len]
    if not train:
        raise ValueError(f"{cfg.train_src}: no training pairs")
    dev = load_parallel(cfg.dev_src, cfg.dev_tgt, cfg.tokens)
    test = load_parallel(cfg.test_src, cfg.test_tgt, cfg.tokens)
    src_vocab = Vocab.build((s for s, _ in train), cfg.min_freq)
    tgt_vocab = Vocab.build((t for _, t in train), cfg.min_freq)
    return TranslationData(train, dev, test, src_vocab, tgt_vocab, asdict(cfg))


# -- batching ------------------------------------------------------------------------------------
@dataclass
class Batch:
    """Padded id tensors. ``src`` ends with <eos>; ``tgt_in`` = <bos> y, ``tgt_out`` = y <eos>."""

    src: Tensor  # (batch, src_len) long
    tgt_in: Tensor  # (batch, tgt_len) long
    tgt_out: Tensor  # (batch, tgt_len) long
    index: list[int]  # positions of these pairs in the encoded list

    @property
    def src_padding_mask(self) -> Tensor:
        return self.src.eq(PAD)

    @property
    def n_tgt_tokens(self) -> int:
        return int(self.tgt_out.ne(PAD).sum())

    @property
    def n_src_tokens(self) -> int:
        return int(self.src.ne(PAD).sum())

    def to(self, device: torch.device | str) -> Batch:
        return Batch(
            self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device), self.index
        )


def encode_pairs(pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab):
    """[(src ids + <eos>, tgt ids)] for :func:`make_batches`."""
    return [(src_vocab.encode(s) + [EOS], tgt_vocab.encode(t)) for s, t in pairs]


def _pad(rows: list[list[int]]) -> Tensor:
    out = torch.full((len(rows), max(len(r) for r in rows)), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def make_batches(
    encoded: Sequence[tuple[list[int], list[int]]],
    max_tokens: int,
    shuffle: bool = False,
    seed: int = 0,
    max_sentences: int = 0,
) -> list[Batch]:
    """Length-bucketed batches: pairs sorted by (source, target) length, cut so that
    ``batch_size * longest side (+1)`` stays within ``max_tokens`` (a single longer pair gets a
    batch of its own), at most ``max_sentences`` per batch if > 0.

    ``shuffle`` breaks length ties randomly and shuffles the batch order, from ``seed``.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    n = len(encoded)
    src_len = np.array([len(s) for s, _ in encoded])
    tgt_len = np.array([len(t) + 1 for _, t in encoded])
    rng = np.random.default_rng(seed)
    tie = rng.random(n) if shuffle else np.arange(n)
    order = np.lexsort((tie, tgt_len, src_len))
    groups: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order.tolist():
        width = max(longest, int(src_len[i]), int(tgt_len[i]))
        full = max_sentences and len(current) >= max_sentences
        if current and (width * (len(current) + 1) > max_tokens or full):
            groups.append(current)
            current, width = [], max(int(src_len[i]), int(tgt_len[i]))
        current.append(i)
        longest = width
    if current:
        groups.append(current)
    if shuffle:
        groups = [groups[k] for k in rng.permutation(len(groups))]
    batches = []
    for g in groups:
        src = _pad([encoded[i][0] for i in g])
        tgt_in = _pad([[BOS] + encoded[i][1] for i in g])
        tgt_out = _pad([encoded[i][1] + [EOS] for i in g])
        batches.append(Batch(src, tgt_in, tgt_out, g))
    return batches


def iterate_forever(
    encoded: Sequence[tuple[list[int], list[int]]], max_tokens: int, seed: int
) -> Iterator[Batch]:
    """Epoch after epoch of shuffled length-bucketed batches (epoch k uses seed + k)."""
    epoch = 0
    while True:
        yield from make_batches(encoded, max_tokens, shuffle=True, seed=seed + epoch)
        epoch += 1
