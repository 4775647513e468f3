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

import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

# the names marked F401 (and those of __all__) live in eatt.model.vocab, eatt.model.data_config
# and eatt.model.synthetic and are re-exported here, their first home (the model, its training
# and evaluation, the tests import them from eatt.model.data)
from .data_config import (
    FilesConfig,
    TaskConfig,
    check_fields,  # noqa: F401
    data_config_from_dict,  # noqa: F401
    dataclass_from_dict,  # noqa: F401
)
from .synthetic import (
    AND,  # noqa: F401
    AUX,  # noqa: F401
    CASE_MARKERS,  # noqa: F401
    CLASSIFIER_EVERY,  # noqa: F401
    COMMA,  # noqa: F401
    DETERMINERS,  # noqa: F401
    GENDER_SUFFIXES,  # noqa: F401
    N_CLASSIFIERS,  # noqa: F401
    NOT,  # noqa: F401
    PERIOD,  # noqa: F401
    PLACE_PREPS,  # noqa: F401
    SPLIT_FROM,  # noqa: F401
    SYNONYM_EVERY,  # noqa: F401
    TIME_PREPS,  # noqa: F401
    VERY,  # noqa: F401
    Synonym,  # noqa: F401
    dense_source,
    redundant_source,
    synthetic_task,
    translate,
)
from .vocab import (
    BOS,
    EOS,
    PAD,
    SPECIALS,  # noqa: F401
    UNK,
    Pair,
    TranslationData,
    Vocab,
)

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

#: the character-token stand-in for a space (so character output can be joined back to text)
SPACE = "\u2581"


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
