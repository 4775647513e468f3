"""Every data kind of a run config's ``data`` section, and loading it.

``kind: synthetic`` (the bundled task) and ``kind: files`` (your parallel files) are
:mod:`eatt.model.data`'s; ``kind: ding`` is the real-language task: the example sentences of
the Ding German-English dictionary (:mod:`eatt.model.ding`, Debian package ``trans-de-en``)
cut into sentencepiece pieces (:mod:`eatt.model.subword`) learned on the training split only::

    data: {kind: ding, vocab_size: 4000}          # German -> English, BPE pieces

* :class:`DingConfig` -- the keys of ``kind: ding``;
* :func:`data_config_from_dict` / :func:`load_data` -- every kind;
* :func:`token_kind` / :func:`detokenize` -- how a data config's tokens join back into text
  (words, characters or pieces), the text BLEU is computed on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from eatt.config import ConfigError
from eatt.progress import step

from . import data as _data
from .data import (
    FilesConfig,
    TaskConfig,
    TranslationData,
    Vocab,
    check_fields,
    dataclass_from_dict,
)
from .ding import read_ding
from .subword import MODEL_TYPES, join_pieces, train_subword

__all__ = [
    "DATA_KINDS",
    "DingConfig",
    "data_config_from_dict",
    "detokenize",
    "ding_task",
    "load_data",
    "token_kind",
]

DATA_KINDS = ("synthetic", "files", "ding")
DIRECTIONS = ("de-en", "en-de")
DataConfig = TaskConfig | FilesConfig


@dataclass(frozen=True)
class DingConfig:
    """The Ding task (docs/models.md, "The Ding task")."""

    kind: str = "ding"
    #: the dictionary file; "" = the one make install unpacked (.venv/debian), else the system's
    path: str = ""
    #: de-en (German source, English target) or en-de
    direction: str = "de-en"
    #: sentencepiece vocabulary size per language (an upper bound), learned on the training split
    vocab_size: int = 4000
    #: sentencepiece model type: bpe or unigram
    subword: str = "bpe"
    #: the first n pairs of each split (0 = all of it)
    n_train: int = 0
    n_dev: int = 0
    n_test: int = 0
    #: training pairs with a side longer than this many pieces are dropped (0 = keep all)
    max_len: int = 0

    def __post_init__(self) -> None:
        check_fields(self, "data")
        if self.kind != "ding":
            raise ConfigError(f"kind: must be one of {', '.join(DATA_KINDS)}, got {self.kind!r}")
        if self.direction not in DIRECTIONS:
            raise ConfigError(
                f"direction: must be {' or '.join(DIRECTIONS)}, got {self.direction!r}"
            )
        if self.subword not in MODEL_TYPES:
            raise ConfigError(f"subword: must be {' or '.join(MODEL_TYPES)}, got {self.subword!r}")
        for key, low, high in (
            ("vocab_size", 50, 10**6),
            ("n_train", 0, 10**7),
            ("n_dev", 0, 10**6),
            ("n_test", 0, 10**6),
            ("max_len", 0, 10**6),
        ):
            value = getattr(self, key)
            if not low <= value <= high:
                raise ConfigError(f"{key}: must be in [{low}, {high}], got {value}")

    @classmethod
    def from_dict(cls, data: Any, source: str = "data") -> DingConfig:
        return dataclass_from_dict(cls, data, source)

    def replace(self, **changes: Any) -> DingConfig:
        return DingConfig(**{**asdict(self), **changes})


def data_config_from_dict(data: Any, source: str = "data") -> DataConfig | DingConfig:
    """A ``data`` section of any kind (:data:`DATA_KINDS`; synthetic when not given)."""
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys to values")
    kind = (data or {}).get("kind", "synthetic")
    if kind == "ding":
        return DingConfig.from_dict(data, source)
    if kind not in DATA_KINDS:
        raise ConfigError(f"{source}.kind: must be one of {', '.join(DATA_KINDS)}, got {kind!r}")
    return _data.data_config_from_dict(data, source)


def ding_task(cfg: DingConfig | None = None) -> TranslationData:
    """The Ding task's splits in pieces and the vocabularies of the training pieces."""
    cfg = cfg or DingConfig()
    with step("the Ding task: sentence pairs and sentencepiece vocabularies"):
        corpus = read_ding(cfg.path)
        splits = [corpus.train, corpus.dev, corpus.test]
        if cfg.direction == "en-de":
            splits = [[(en, de) for de, en in split] for split in splits]
        for i, n in enumerate((cfg.n_train, cfg.n_dev, cfg.n_test)):
            if n:
                splits[i] = splits[i][:n]
        train = splits[0]
        src = train_subword((s for s, _ in train), cfg.vocab_size, cfg.subword)
        tgt = train_subword((t for _, t in train), cfg.vocab_size, cfg.subword)
        pieces = [[(src.pieces(s), tgt.pieces(t)) for s, t in split] for split in splits]
    train_pieces = pieces[0]
    if cfg.max_len:
        train_pieces = [
            (s, t) for s, t in train_pieces if len(s) <= cfg.max_len and len(t) <= cfg.max_len
        ]
    src_vocab = Vocab.build(s for s, _ in train_pieces)
    tgt_vocab = Vocab.build(t for _, t in train_pieces)
    return TranslationData(train_pieces, pieces[1], pieces[2], src_vocab, tgt_vocab, asdict(cfg))


def load_data(cfg: DataConfig | DingConfig) -> TranslationData:
    """The three splits of a ``data`` config of any kind."""
    if isinstance(cfg, DingConfig):
        return ding_task(cfg)
    return _data.load_data(cfg)


def token_kind(data_config: dict) -> str:
    """How the tokens of data made by this config join into text: word, char or pieces."""
    if data_config.get("kind") == "ding":
        return "pieces"
    return "char" if data_config.get("tokens") == "char" else "word"


def detokenize(tokens: Sequence[str], kind: str = "word") -> str:
    """Text from tokens of :func:`token_kind` ``kind``."""
    if kind == "pieces":
        return join_pieces(tokens)
    return _data.detokenize(tokens, kind)
