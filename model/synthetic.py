"""The bundled synthetic language pair (docs/models.md, "The synthetic task"): an English-like
(SVO, prepositions) source, a Japanese-like (SOV, postpositions) target, generated from a seed.

    translate(source, rng, p_synonym)
        the documented rules applied to any well-formed source sentence
    redundant_source / dense_source
        the redundant variant's form of a sentence (case markers, an auxiliary, punctuation,
        subword pieces) and back
    synthetic_task(cfg)
        the three splits and their vocabularies (TaskConfig)

eatt.model.data re-exports these names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict

import numpy as np

from .data_config import TaskConfig
from .vocab import Pair, TranslationData, Vocab

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
