"""The ``data`` section of a run config: :class:`TaskConfig` (the bundled synthetic task),
:class:`FilesConfig` (the user's parallel files), and the field checks every config of
eatt.model shares (check_fields, dataclass_from_dict: one-line ConfigErrors naming the key).

eatt.model.data re-exports these names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from eatt.config import ConfigError


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
