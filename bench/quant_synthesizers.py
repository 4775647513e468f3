"""Test BLEU of the bundled model with every attention one kind of quantized hardware core
(issue 41: quant-eatt beside the Synthesizer's quant-dense and quant-randinit, and quant-vanilla,
the peer, where a run of it is given), each BLEU computed with the cores' integer arithmetic.

Each run folder holds ``best.pt`` and ``train.json`` of ``eatt train examples/<kind>_quant.yaml
-o DIR`` (examples/default_quant.yaml for quant-eatt) and, where measured already,
``eval_hw.json``, the output of ``eatt evaluate DIR/best.pt --hardware --json``; a folder
without it is evaluated here (the same call, beam 4) and the file written. Rows: the training
(steps, seconds, best dev loss), test BLEU (the model's own decoding: its cores' arithmetic),
BLEU with every core run as its exported max_len core (and how many hypotheses differ from
the model's: 0 expected) and with the QAT surrogate, and the analytic attention energy of the
test split in % of vanilla's (``eatt evaluate``'s: the hardware cores' operation counts at the
paper's Table 1 costs, against the paper's float vanilla count). Ratios (BLEU, energy) are to
quant-vanilla's row when there is one, else to the first row.

Usage: ``python bench/quant_synthesizers.py --run quant-eatt=runs/default_quant --run
quant-dense=runs/dense_quant --run quant-randinit=runs/randinit_quant [--out PATH]``. Writes
PATH (default bench/results/quant_synthesizers.json), the .md and the .png beside it.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from eatt.fileio import atomic_write_text
from eatt.mechanisms import PEER
from eatt.model.config import QUANT_KINDS
from eatt.model.evaluate import evaluate

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "quant_synthesizers.json"


def _run_arg(text: str) -> tuple[str, Path]:
    kind, sep, folder = text.partition("=")
    if not sep or not kind or not folder:
        raise argparse.ArgumentTypeError(f"--run: expected KIND=DIR, got {text!r}")
    return kind, Path(folder)


def measure(kind: str, folder: Path) -> dict:
    """One row: the run's training and its evaluation (eval_hw.json, made here if missing)."""
    checkpoint, train_file = folder / "best.pt", folder / "train.json"
    for path in (checkpoint, train_file):
        if not path.is_file():
            raise ValueError(f"--run {kind}: {path} is missing (eatt train ... -o {folder})")
    train = json.loads(train_file.read_text())
    attention = train["model_config"]["attention"]
    if attention != kind:
        raise ValueError(f"--run {kind}: {folder} trained attention {attention!r}")
    eval_file = folder / "eval_hw.json"
    if eval_file.is_file() and eval_file.stat().st_size:
        ev = json.loads(eval_file.read_text())
    else:
        print(f"quant_synthesizers: evaluating {checkpoint} --hardware ...", file=sys.stderr)
        started = time.monotonic()
        ev = evaluate(checkpoint, beam=4, hardware=True)
        ev["seconds"] = time.monotonic() - started
        atomic_write_text(eval_file, json.dumps(ev, indent=2, default=str) + "\n")
    hw = ev["hardware"]
    return {
        "kind": kind,
        "folder": str(folder),
        "steps": train["steps"],
        "train_seconds": train["seconds"],
        "dev_loss": train["dev_loss"],
        "sentences": ev["sentences"],
        "beam": ev["beam"],
        "bleu": ev["bleu"],
        "bleu_exported": hw["exported"]["bleu"],
        "exported_differ": hw["exported"]["hypotheses_differ"],
        "bleu_surrogate": hw["surrogate"]["bleu"],
        "surrogate_differ": hw["surrogate"]["hypotheses_differ"],
        "energy_percent_of_vanilla": ev["energy"]["percent_of_vanilla"],
        "decode_seconds": ev["decode_seconds"],
    }


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _markdown(result: dict) -> str:
    rows = result["rows"]
    lines = [
        "# Quantized attention kinds on the bundled task (BLEU with the cores' arithmetic)",
        "",
        f"{result['date']}, {result['machine']}; beam {rows[0]['beam']}, "
        f"{rows[0]['sentences']} test sentences; ratios to {result['reference']}.",
        "",
        "| kind | steps | dev loss | test BLEU | BLEU ratio | exported cores (differ) | "
        "surrogate (differ) | attention energy % of vanilla (ASIC / FPGA) | energy ratio "
        "(ASIC / FPGA) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        e = r["energy_percent_of_vanilla"]
        lines.append(
            f"| {r['kind']} | {r['steps']} | {r['dev_loss']:.3f} | {r['bleu']:.2f} | "
            f"{_ratio(r['bleu_ratio'])} | {r['bleu_exported']:.2f} ({r['exported_differ']}) | "
            f"{r['bleu_surrogate']:.2f} ({r['surrogate_differ']}) | "
            f"{e['asic']:.1f} / {e['fpga']:.1f} | {_ratio(r['energy_ratio']['asic'])} / "
            f"{_ratio(r['energy_ratio']['fpga'])} |"
        )
    return "\n".join(lines) + "\n"


def _plot(result: dict, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for r in result["rows"]:
        x, y = r["energy_percent_of_vanilla"]["asic"], r["bleu"]
        ax.scatter([x], [y])
        ax.annotate(r["kind"], (x, y), textcoords="offset points", xytext=(4, 4))
    ax.margins(x=0.2, y=0.1)  # room for the labels
    ax.set_xlabel("attention energy, % of vanilla (ASIC, analytic)")
    ax.set_ylabel("test BLEU (the cores' integer arithmetic)")
    ax.set_title("quantized attention kinds")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=_run_arg, action="append", required=True, metavar="KIND=DIR")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if args.out.suffix != ".json":
        print(f"quant_synthesizers: --out: {args.out} must end in .json", file=sys.stderr)
        return 2
    try:
        rows = [measure(kind, folder) for kind, folder in args.run]
    except ValueError as err:
        print(f"quant_synthesizers: {err}", file=sys.stderr)
        return 2
    peer = next(k for k, core in QUANT_KINDS.items() if core == PEER.kind)  # quant-vanilla
    reference = next((r for r in rows if r["kind"] == peer), rows[0])
    ref_energy = reference["energy_percent_of_vanilla"]
    for r in rows:
        r["bleu_ratio"] = r["bleu"] / reference["bleu"] if reference["bleu"] else None
        e = r["energy_percent_of_vanilla"]
        r["energy_ratio"] = {t: e[t] / ref_energy[t] if ref_energy[t] else None for t in e}
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "reference": reference["kind"],
        "rows": rows,
    }
    out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    atomic_write_text(out.with_suffix(".md"), _markdown(result))
    _plot(result, out.with_suffix(".png"))
    print(_markdown(result), end="")
    print(json.dumps({"out": str(out), "rows": len(rows)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
