"""Tokens and ids of the translation data: the special ids, :class:`Vocab`, a sentence pair
and :class:`TranslationData` (the three splits with the vocabularies of the training split).

eatt.model.data re-exports these names.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")

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
