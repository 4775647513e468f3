"""`eatt data`: the real-language task's sentence pairs (the Ding dictionary), counted and hashed.

Reads the dictionary of the Debian package trans-de-en (make install unpacks it into
.venv/debian; eatt.model.ding gives the rules), says how many sentence pairs each split holds
and their sha256, and whether they are those pinned for trans-de-en 1.9-6. ``-o DIR`` writes the
splits as text (``train.de``, ``train.en``, ... one sentence per line) and ``manifest.json``,
for reading or for other tools; training never needs them (it reads the dictionary itself).
"""

from __future__ import annotations

import json
from pathlib import Path

from eatt.cli.common import add_json, emit
from eatt.cli.exits import EXIT_OK
from eatt.model.ding import PINNED, find_ding, read_ding
from eatt.outdir import replaced_dir

HELP = "the Ding task's sentence pairs (Debian trans-de-en): counts, split hashes, text files"


def add_arguments(p) -> None:
    p.add_argument(
        "--path",
        default="",
        metavar="FILE",
        help="the dictionary file (default: .venv/debian's from make install, else the system's)",
    )
    p.add_argument(
        "-o", "--output", metavar="DIR", help="write the splits (train.de, ...) and manifest.json"
    )
    add_json(p)


def run(args) -> int:
    path = find_ding(args.path, "--path")
    corpus = read_ding(str(path))
    report = {"path": str(path), **corpus.manifest}
    report["pinned"] = _pinned(corpus.manifest)
    if args.output:
        with replaced_dir(args.output, "data") as tmp:
            for name in ("train", "dev", "test"):
                pairs = getattr(corpus, name)
                for index, language in enumerate(("de", "en")):
                    text = "".join(pair[index] + "\n" for pair in pairs)
                    (tmp / f"{name}.{language}").write_text(text, encoding="utf-8")
            manifest = json.dumps(corpus.manifest, indent=2, ensure_ascii=False) + "\n"
            (tmp / "manifest.json").write_text(manifest, encoding="utf-8")
        report["written"] = str(Path(args.output))
    emit(report, args.json, format_report)
    return EXIT_OK


def _pinned(manifest: dict) -> str:
    """'same' (the pinned 1.9-6 file and splits), 'other file' or 'differs' (a bug)."""
    if manifest["file_sha256"] != PINNED["file_sha256"]:
        return "other file"
    return "same" if manifest == PINNED else "differs"


def format_report(r: dict) -> str:
    pinned = {
        "same": "the pinned trans-de-en 1.9-6 file and splits",
        "other file": "not the pinned 1.9-6 file: its splits are its own",
        "differs": "the pinned 1.9-6 file, but the splits DIFFER from the pinned ones",
    }[r["pinned"]]
    lines = [
        f"Ding dictionary (Debian {r['package']}): {r['path']} ({pinned})",
        f"{r['entries']} entries, {r['aligned']} aligned sub-entries, {r['sentences']} sentence "
        f"pairs, {r['unique']} unique; German {r['german_words_mean']:.2f} words on average, "
        f"longest {r['german_words_max']}",
    ]
    for name, split in r["splits"].items():
        lines.append(f"{name:5s} {split['pairs']:6d} pairs  sha256 {split['sha256']}")
    if r.get("written"):
        lines.append(f"wrote {r['written']}/{{train,dev,test}}.{{de,en}} and manifest.json")
    return "\n".join(lines)
