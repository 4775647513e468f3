"""Wall time of `eatt evaluate CHECKPOINT` with and without --hardware (issue 39, "Speed a user
feels": --hardware within 3x of the plain evaluation, outputs unchanged).

--hardware decodes the split twice more besides the model's own decoding: once with every
quantized attention as its exported core runs it (len_q = len_k = max_len, masks) and once with
the QAT surrogate. A quantized model's own decoding already runs the golden model at each
call's lengths. Both golden paths are timed:

* ``cached``: eatt.quant.decoding (K and V cached per key row, one GoldenCore per core and
  shape, the exported shape's padded queries skipped), the default;
* ``reference`` (``--reference``): GoldenCore.forward on each whole call, as before
  (RoleAttention.cached_golden = False).

Each run is eatt.model.evaluate.evaluate in this process (the command minus its start-up), one
torch thread as the command's default. The outputs of the two paths must be equal (BLEU, exact
match, examples, each arithmetic's BLEU and differing hypotheses); the script fails otherwise.

Usage: ``python bench/evaluate_hardware.py CHECKPOINT [--sentences N] [--beam B]
[--reference] [--out PATH]``, or ``--quick`` (a tiny model trained here, 24 sentences). The
last stdout line is the JSON summary (``ratio``: hardware time / plain time per path).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

from eatt.config import atomic_write_text
from eatt.model.data import TaskConfig
from eatt.model.evaluate import evaluate
from eatt.model.seq2seq import ModelConfig, RoleAttention
from eatt.model.train import TrainConfig, train

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "evaluate_hardware.json"
QUICK_OUT = Path(__file__).resolve().parent / "results" / "evaluate_hardware_quick.json"


def _quick_checkpoint(folder: Path) -> str:
    data = TaskConfig(n_train=200, n_dev=8, n_test=24, seed=3)
    model = ModelConfig(dim=32, heads=2, ffn_dim=64, enc_layers=1, dec_layers=1, dropout=0.0,
                        attention="quant-eatt", max_len=40)  # fmt: skip
    run = TrainConfig(seed=5, steps=30, max_tokens=512, warmup=4, decay=100, peak_lr=3e-3,
                      eval_every=0, progress=False, data=data)  # fmt: skip
    return train(model, run, folder)["checkpoint"]


def _outputs(result: dict) -> dict:
    """What must not change between the paths (no timings)."""
    keep = ("bleu", "exact_match", "examples", "sentences", "beam")
    out = {k: result[k] for k in keep}
    out["hardware"] = {
        name: {k: v for k, v in c.items() if k != "decode_seconds"}
        for name, c in (result.get("hardware") or {}).items()
    }
    return out


def _timed(checkpoint: str, beam: int, sentences: int, hardware: bool) -> tuple[dict, dict]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = evaluate(checkpoint, beam=beam, device="cpu", limit=sentences, hardware=hardware)
    row = {
        "hardware": hardware,
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "decode_s": {"model": result["decode_seconds"]}
        | {k: c["decode_seconds"] for k, c in (result.get("hardware") or {}).items()},
    }
    return row, result


def run(checkpoint: str, beam: int, sentences: int, reference: bool) -> dict:
    torch.set_num_threads(1)
    load = os.getloadavg()
    paths = {"cached": True, **({"reference": False} if reference else {})}
    rows, outputs = {}, {}
    evaluate(checkpoint, beam=1, device="cpu", limit=2)  # imports and first-call costs
    for name, cached in paths.items():
        RoleAttention.cached_golden = cached
        try:
            for hardware in (False, True):
                row, result = _timed(checkpoint, beam, sentences, hardware)
                rows.setdefault(name, []).append(row)
                outputs[name, hardware] = _outputs(result)
                print(f"{name} hardware={hardware}: {row['wall_s']:.1f} s", file=sys.stderr)
        finally:
            RoleAttention.cached_golden = True
    for hardware in (False, True):
        if reference and outputs["cached", hardware] != outputs["reference", hardware]:
            raise SystemExit(f"the cached path changed the outputs (hardware={hardware})")
    sentences_run = outputs["cached", False]["sentences"]
    return {
        "checkpoint": checkpoint,
        "sentences": sentences_run,
        "beam": beam,
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch_threads": 1,
            "load_average_before": load,
            "load_average_after": os.getloadavg(),
        },
        "paths": {
            name: {
                "plain": r[0],
                "hardware": r[1],
                "ratio": r[1]["wall_s"] / r[0]["wall_s"],
            }
            for name, r in rows.items()
        },
        "outputs_equal": reference,
        "bleu": outputs["cached", True]["bleu"],
        "hardware_bleu": {k: c["bleu"] for k, c in outputs["cached", True]["hardware"].items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", help="a quantized model's best.pt")
    parser.add_argument("--quick", action="store_true", help="a tiny model trained here")
    parser.add_argument("--sentences", type=int, default=0, help="the first N (0: all)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--reference", action="store_true", help="also the per-call path")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not args.quick and not args.checkpoint:
        parser.error("give a CHECKPOINT or --quick")
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = _quick_checkpoint(Path(tmp)) if args.quick else args.checkpoint
        result = run(checkpoint, args.beam, args.sentences, args.reference)
    if args.quick:
        result["checkpoint"] = "--quick"
    out = args.out or (QUICK_OUT if args.quick else DEFAULT_OUT)
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v["ratio"] for k, v in result["paths"].items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
