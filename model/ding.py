"""Sentence pairs from the Ding German-English dictionary (Debian package ``trans-de-en``).

The dictionary is one UTF-8 file, ``/usr/share/trans/de-en`` inside the package (version 1.9-6:
206,238 lines); ``make install`` unpacks it into ``.venv/debian`` without root, as it does
OpenSTA. Nothing of it is in the repository. Its example sentences are real language; the
rules below take them out (docs/models.md, "The Ding task"):

1. A line starting with ``#`` is a comment; every other line is ``German :: English``.
2. Each side splits at `` | `` into sub-entries; the k-th German sub-entry translates the k-th
   English one. A line whose two sides have different numbers of sub-entries is not aligned
   and skipped (391,763 aligned sub-entries in 1.9-6).
3. In a sub-entry, ``;`` separates alternatives; only the first one (before the first ``;``)
   is looked at.
4. A sub-entry pair is a sentence pair when both first alternatives end in ``.``, ``?`` or
   ``!`` and have at least four words (split at white space), and the German one carries no
   ``{...}`` or ``[...]`` annotation (``{n}``, ``{vt}``, ``[ugs.]``: word class, gender and
   register labels mark a dictionary phrase, not an example): 17,585 in 1.9-6.
5. Annotations ``{...}``, ``[...]`` and ``<...>`` are removed from both sides (the English
   side's ``[Br.]``, ``[coll.]``, ...) and white space is collapsed; parentheses stay (optional
   words, on both sides as written).
6. Duplicates go: the first occurrence of each (German, English) pair in file order is kept.
7. The split is by hash, so a pair's split never depends on the other lines: the first 8 hex
   digits of the sha256 of the German sentence, modulo 100, below :data:`DEV_PERCENT` is dev,
   below ``DEV_PERCENT + TEST_PERCENT`` test, the rest train. One German sentence is in one split.
8. Test overlap goes: a dev or train pair whose German or English sentence (case-folded) is also
   in test is dropped, and a train pair whose sentence is in dev.

Each split keeps the file order. :func:`manifest` records the source file's sha256 and each
split's size and sha256 (over ``German<TAB>English<LF>`` lines); :data:`PINNED` holds them for
the 1.9-6 file, and tests/test_ding.py checks them.

A missing file raises :class:`eatt.rtl_sim.tools.ToolMissing` naming the package (exit 3).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from eatt.rtl_sim.tools import ToolMissing, debian_root

__all__ = [
    "DEV_PERCENT",
    "PACKAGE",
    "PINNED",
    "TEST_PERCENT",
    "DingCorpus",
    "find_ding",
    "manifest",
    "read_ding",
    "sentence_pairs",
    "split_pairs",
    "strip_annotations",
]

#: the Debian package and the file inside it
PACKAGE = "trans-de-en"
RELATIVE_PATH = "usr/share/trans/de-en"
#: where the system's packages are installed (after .venv/debian)
SYSTEM_ROOT = Path("/")
#: the split, in percent of the hash buckets (rule 7)
DEV_PERCENT, TEST_PERCENT = 7, 7
SPLITS = ("train", "dev", "test")
#: the manifest of the file of trans-de-en 1.9-6: tests/test_ding.py checks it
PINNED = {
    "package": PACKAGE,
    "file_sha256": "34052c6021d09eadfee7a893a789204265954df70fe9c36d38fa00058d79d326",
    "entries": 206233,
    "aligned": 391763,
    "sentences": 17585,
    "unique": 17579,
    "german_words_mean": 7.98,
    "german_words_max": 49,
    "splits": {
        "train": {
            "pairs": 15150,
            "sha256": "152dc6109b5ebdccbfca6d7a685b626ce4297615c6087933ddf83e6d039661be",
        },
        "dev": {
            "pairs": 1186,
            "sha256": "98bed25fcec31f20002b7c695321c9f5d1977362e008630fd20bbf7f46b26dba",
        },
        "test": {
            "pairs": 1234,
            "sha256": "1e58367010bbbf4f7ff77cdfef4999cdfb26b69718c0c2dafaa647b61bc0f49c",
        },
    },
}

_ENDS = (".", "?", "!")
#: a sentence's end before an alternative, a sub-entry or the side's end (no sentence without)
_CANDIDATE = re.compile(r"[.?!]\s*(?:;|\||$)")
_GERMAN_LABEL = re.compile(r"[{\[]")
_ANNOTATION = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>")
Pair = tuple[str, str]


def find_ding(path: str = "", name: str = "data.path") -> Path:
    """The dictionary file: ``path`` if given (ValueError naming ``name`` and the path when it
    is not a file), else the one ``make install`` unpacked into .venv/debian, else the system's
    (/usr/share/trans/de-en). ToolMissing names the package."""
    if path:
        found = Path(path)
        if not found.is_file():
            raise ValueError(f"{name} {path}: no such file")
        return found
    for root in (debian_root(), SYSTEM_ROOT):
        if (root / RELATIVE_PATH).is_file():
            return root / RELATIVE_PATH
    raise ToolMissing(
        f"the Ding dictionary is missing: Debian package {PACKAGE} (make install fetches it "
        "into .venv/debian)"
    )


def strip_annotations(text: str) -> str:
    """``{...}``, ``[...]`` and ``<...>`` removed, white space collapsed (rule 5)."""
    return " ".join(_ANNOTATION.sub(" ", text).split())


def _is_sentence(text: str) -> bool:
    return text.endswith(_ENDS) and len(text.split()) >= 4


def sentence_pairs(lines: Iterable[str]) -> tuple[list[Pair], dict]:
    """The sentence pairs of dictionary lines by rules 1-6, and counts of what was seen:
    ``entries`` (non-comment lines), ``aligned`` (aligned sub-entries), ``sentences`` (rule 4),
    ``unique``."""
    counts = {"entries": 0, "aligned": 0, "sentences": 0}
    pairs: dict[Pair, None] = {}
    for line in lines:
        german, sep, english = line.rstrip("\n").partition(" :: ")
        if not sep or german.startswith("#"):
            continue
        counts["entries"] += 1
        subs = german.count(" | ") + 1
        if english.count(" | ") + 1 != subs:
            continue
        counts["aligned"] += subs
        if not _CANDIDATE.search(german):  # most entries: words and phrases only (fast path)
            continue
        for de_sub, en_sub in zip(german.split(" | "), english.split(" | "), strict=True):
            de, en = de_sub.partition(";")[0].strip(), en_sub.partition(";")[0].strip()
            if not (_is_sentence(de) and _is_sentence(en)) or _GERMAN_LABEL.search(de):
                continue
            counts["sentences"] += 1
            pair = (strip_annotations(de), strip_annotations(en))
            if all(pair):
                pairs.setdefault(pair)
    counts["unique"] = len(pairs)
    return list(pairs), counts


def _bucket(german: str) -> int:
    return int(hashlib.sha256(german.encode("utf-8")).hexdigest()[:8], 16) % 100


def split_pairs(pairs: Iterable[Pair]) -> dict[str, list[Pair]]:
    """Train, dev and test by rules 7 and 8, each in the given order."""
    splits: dict[str, list[Pair]] = {name: [] for name in SPLITS}
    for pair in pairs:
        bucket = _bucket(pair[0])
        if bucket < DEV_PERCENT:
            splits["dev"].append(pair)
        elif bucket < DEV_PERCENT + TEST_PERCENT:
            splits["test"].append(pair)
        else:
            splits["train"].append(pair)

    def sentences(split: list[Pair]) -> set[str]:
        return {s.casefold() for pair in split for s in pair}

    held = sentences(splits["test"])
    splits["dev"] = [p for p in splits["dev"] if not {s.casefold() for s in p} & held]
    held |= sentences(splits["dev"])
    splits["train"] = [p for p in splits["train"] if not {s.casefold() for s in p} & held]
    return splits


def split_sha256(pairs: Iterable[Pair]) -> str:
    """sha256 of ``German<TAB>English<LF>`` lines."""
    digest = hashlib.sha256()
    for de, en in pairs:
        digest.update(f"{de}\t{en}\n".encode())
    return digest.hexdigest()


@dataclass
class DingCorpus:
    """The three splits of sentence pairs (German, English) and their manifest."""

    train: list[Pair]
    dev: list[Pair]
    test: list[Pair]
    manifest: dict


def manifest(file_sha256: str, counts: dict, splits: dict[str, list[Pair]]) -> dict:
    """What identifies the corpus: the file's sha256, the counts, each split's size and hash,
    and the mean and longest German sentence in words."""
    words = [len(de.split()) for split in splits.values() for de, _ in split]
    return {
        "package": PACKAGE,
        "file_sha256": file_sha256,
        **counts,
        "german_words_mean": round(sum(words) / max(len(words), 1), 2),
        "german_words_max": max(words, default=0),
        "splits": {
            name: {"pairs": len(split), "sha256": split_sha256(split)}
            for name, split in splits.items()
        },
    }


def read_ding(path: str = "") -> DingCorpus:
    """The corpus of the dictionary file (:func:`find_ding`); ValueError naming the file when it
    is not UTF-8. Read once per process while the file stays the same (size and time)."""
    found = find_ding(path)
    stat = found.stat()
    corpus = _read(str(found.resolve()), stat.st_size, stat.st_mtime_ns)
    return DingCorpus(
        list(corpus.train), list(corpus.dev), list(corpus.test), dict(corpus.manifest)
    )


@functools.lru_cache(maxsize=2)
def _read(path: str, size: int, mtime_ns: int) -> DingCorpus:
    found = Path(path)
    raw = found.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{found}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    pairs, counts = sentence_pairs(text.splitlines())
    splits = split_pairs(pairs)
    record = manifest(hashlib.sha256(raw).hexdigest(), counts, splits)
    return DingCorpus(splits["train"], splits["dev"], splits["test"], record)
