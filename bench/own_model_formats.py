"""Your own model's accuracy: float vs QAT with the default, hand-set and calibrated formats,
E-ATT beside its dot-product peer (docs/own_model.md, "Formats").

The classifier of examples/own_model.py (PyTorch's TransformerEncoderLayer, self_attn an
eatt.nn.MultiheadAttention; dim 16, 2 heads, 8 tokens; the first-equals-last toy task) is
trained per seed in each setting:

- ``float``: quantized=False;
- ``qat-default``: Brevitas QAT with the CoreConfig defaults (output LSB 4.0 at dim 16: eatt.nn
  warns);
- ``qat-hand``: QAT with v_bits 14, out_bits 18 (the example's);
- ``qat-calibrated``: a float model trained for half the steps, its weights loaded into a QAT
  model whose formats eatt.quant.calibrate picks on 8 batches, then QAT for the other half
  (PTQ calibration, then QAT, as Brevitas users do; the same steps in all as the others).

Held-out accuracy (1,000 sequences) per setting and kind, mean and spread over the seeds, and the
wall time, go to bench/results/own_model_formats.{json,md,png}.

Usage: ``python bench/own_model_formats.py [--seeds 1,2,3] [--steps 400] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
from own_model import Classifier, toy_batch  # noqa: E402 (examples/ is no package)

from eatt.quant import calibrate  # noqa: E402

DEFAULT_OUT = ROOT / "bench" / "results" / "own_model_formats.json"
SETTINGS = ("float", "qat-default", "qat-hand", "qat-calibrated")
KINDS = ("eatt", "vanilla")
SIZE = {"vocab": 10, "dim": 16, "heads": 2, "max_len": 8}


def _train(model, steps: int, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        tokens, padding, labels = toy_batch(64, SIZE["max_len"], SIZE["vocab"], g)
        loss = torch.nn.functional.cross_entropy(model(tokens, padding), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()


def _accuracy(model) -> float:
    model.eval()
    tokens, padding, labels = toy_batch(
        1000, SIZE["max_len"], SIZE["vocab"], torch.Generator().manual_seed(7)
    )
    with torch.no_grad():
        return float((model(tokens, padding).argmax(-1) == labels).float().mean())


def _model(kind: str, seed: int, **attention):
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the coarse-format warning of qat-default is expected
        return Classifier(SIZE["vocab"], SIZE["dim"], SIZE["heads"], SIZE["max_len"], kind=kind,
                          **attention)  # fmt: skip


def run(setting: str, kind: str, seed: int, steps: int) -> dict:
    """One trained model: {"accuracy", "seconds", "formats" (the attention's keys)}."""
    start = time.perf_counter()
    if setting == "float":
        model = _model(kind, seed, quantized=False)
        _train(model, steps, seed)
    elif setting == "qat-default":
        model = _model(kind, seed)
        _train(model, steps, seed)
    elif setting == "qat-hand":
        model = _model(kind, seed, v_bits=14, out_bits=18)
        _train(model, steps, seed)
    else:
        pretrained = _model(kind, seed, quantized=False)
        _train(pretrained, steps - steps // 2, seed)
        model = _model(kind, seed)
        model.load_state_dict(pretrained.state_dict())  # same names, float and quantized
        g = torch.Generator().manual_seed(seed + 100)
        batches = [toy_batch(64, SIZE["max_len"], SIZE["vocab"], g)[:2] for _ in range(8)]
        calibrate(model, batches)
        _train(model, steps // 2, seed + 1)
    attn = model.encoder.self_attn
    keys = ("in_frac", "weight_frac", "v_bits", "out_bits")
    return {
        "accuracy": _accuracy(model),
        "seconds": round(time.perf_counter() - start, 2),
        "formats": {k: getattr(attn.cfg, k) for k in keys} if attn.quantized else None,
    }


def _write(result: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(tmp, out)
    lines = [
        "| setting | " + " | ".join(f"{k} accuracy (mean, min-max)" for k in KINDS) + " |",
        "| --- | " + " | ".join("---" for _ in KINDS) + " |",
    ]
    for setting in SETTINGS:
        cells = []
        for kind in KINDS:
            s = result["summary"][setting][kind]
            cells.append(f"{s['mean']:.3f} ({s['min']:.3f}-{s['max']:.3f})")
        lines.append(f"| {setting} | " + " | ".join(cells) + " |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    width = 0.38
    for j, kind in enumerate(KINDS):
        means = [result["summary"][s][kind]["mean"] for s in SETTINGS]
        ax.bar([i + (j - 0.5) * width for i in range(len(SETTINGS))], means, width, label=kind)
    ax.set_xticks(range(len(SETTINGS)), SETTINGS)
    ax.set_ylabel("held-out accuracy")
    ax.set_ylim(0.4, 1.0)
    ax.legend()
    ax.set_title("own model: float vs QAT formats")
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.out.suffix != ".json":
        print(f"own_model_formats: --out: expected a .json path, got {args.out}", file=sys.stderr)
        return 2
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        print(f"own_model_formats: --seeds: integers, comma-separated, got {args.seeds!r}",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.steps < 2:
        print(f"own_model_formats: --steps: must be >= 2, got {args.steps}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    runs = {}
    for setting in SETTINGS:
        for kind in KINDS:
            for seed in seeds:
                print(f"own_model_formats: {setting} {kind} seed {seed}", file=sys.stderr)
                runs[f"{setting}/{kind}/{seed}"] = run(setting, kind, seed, args.steps)
    summary = {
        s: {
            k: {
                "mean": statistics.mean(runs[f"{s}/{k}/{n}"]["accuracy"] for n in seeds),
                "min": min(runs[f"{s}/{k}/{n}"]["accuracy"] for n in seeds),
                "max": max(runs[f"{s}/{k}/{n}"]["accuracy"] for n in seeds),
            }
            for k in KINDS
        }
        for s in SETTINGS
    }
    result = {
        "benchmark": "own_model_formats",
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "size": SIZE,
        "steps": args.steps,
        "seeds": seeds,
        "runs": runs,
        "summary": summary,
        "eatt_over_vanilla": {
            s: round(summary[s]["eatt"]["mean"] / summary[s]["vanilla"]["mean"], 4)
            for s in SETTINGS
        },
    }
    _write(result, args.out)
    print(args.out.with_suffix(".md").read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
