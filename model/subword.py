"""Subword vocabularies with sentencepiece (Kudo & Richardson 2018), trained in memory.

:func:`train_subword` learns a model from sentences (the training split only) and
:class:`Subword` cuts text into pieces; :func:`join_pieces` is the inverse (pieces joined, the
word-start mark U+2581 back to a space). The settings keep text as it is, so decoded output is
the detokenized text BLEU is computed on:

* ``normalization_rule_name="identity"``: no NFKC folding (typographic quotes, ``…`` stay);
* ``character_coverage=1.0``: every character of the training text is a piece; a character
  never seen in training stays its own piece (its surface), which the model's vocabulary maps
  to ``<unk>``, so a reference is still joined back exactly;
* ``hard_vocab_limit=False``: ``vocab_size`` is an upper bound (a small training set may not
  have that many pieces);
* ``num_threads=1``: the same sentences give the same model, byte for byte (a checkpoint's data
  fingerprint is checked against the regenerated data).

Why sentencepiece and not our own code or Hugging Face tokenizers: docs/architecture.md,
Decisions.
"""

from __future__ import annotations

import io
from collections.abc import Iterable

import sentencepiece

__all__ = ["MODEL_TYPES", "SPACE", "Subword", "join_pieces", "train_subword"]

#: the word-start mark of a piece (as eatt.model.data's character tokens use it for a space)
SPACE = "\u2581"
#: sentencepiece's model types offered by the ``subword`` config key
MODEL_TYPES = ("bpe", "unigram")


class Subword:
    """A trained sentencepiece model: text -> pieces."""

    def __init__(self, model: bytes) -> None:
        self.model = model
        self._sp = sentencepiece.SentencePieceProcessor(model_proto=model)

    def __len__(self) -> int:
        return self._sp.get_piece_size()

    def pieces(self, text: str) -> list[str]:
        return self._sp.encode(text, out_type=str)


def train_subword(sentences: Iterable[str], vocab_size: int, model_type: str = "bpe") -> Subword:
    """A sentencepiece model of at most ``vocab_size`` pieces learned from ``sentences``."""
    if model_type not in MODEL_TYPES:
        raise ValueError(f"subword: must be one of {', '.join(MODEL_TYPES)}, got {model_type!r}")
    sentences = [s for s in sentences if s.strip()]
    if not sentences:
        raise ValueError("subword: no training sentences")
    out = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=out,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=1.0,
        normalization_rule_name="identity",
        hard_vocab_limit=False,
        num_threads=1,
        bos_id=-1,
        eos_id=-1,
        minloglevel=2,
    )
    return Subword(out.getvalue())


def join_pieces(pieces: Iterable[str]) -> str:
    """Detokenize: the pieces joined, each U+2581 a space, the ends stripped."""
    return "".join(pieces).replace(SPACE, " ").strip()
