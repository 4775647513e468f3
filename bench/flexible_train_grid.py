"""Flexible fine-tuned with its window in training: a grid of fine-tunes, each scored over tau.

One Flexible model per score (the ``window`` experiment's: default task, D = 4, 1,500 steps,
general or E-ATT scores) is fine-tuned at each grid point (beta of Eq. 9, the window applied in
training at ``flexible_train_tau``, steps, seed), then decoded on dev and test (beam 4) at tau =
inf and each tau of :data:`TAUS`. Per point: the tau picked on dev (the smallest dev window
within 0.5 dev BLEU of tau = inf, as the experiments pick it), the test window's reduction
against tau = inf and the BLEU drop there, and whether that meets issue 21's target (>= 50%
within 0.5 BLEU). ``flexible-train-window`` and ``window-lstm`` fix the window in training at
1.6 (``FLEXIBLE_TRAIN_TAU``) from this grid.

Usage: ``python bench/flexible_train_grid.py [--quick] [--workers N] [--out PATH]``: the bases
and every point (Ray tasks with ``--workers`` > 1, one torch thread each). One point alone, for
a machine without Ray (one process per point, appending to a JSON-lines file):
``python bench/flexible_train_grid.py --point NAME --base CKPT --work DIR --jsonl PATH``; then
``--merge PATH`` writes the summary from those lines.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

from eatt.config import atomic_write_text
from eatt.model.config import ModelConfig
from eatt.model.data import synthetic_task
from eatt.model.experiments.base import BLEU_TOLERANCE
from eatt.model.experiments.staged import _eval, _window_sizes
from eatt.model.experiments.window import _picked
from eatt.model.train import train

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "flexible_train_grid.json"
#: the decoding thresholds of every point's curves (None = infinity)
TAUS = (None, 1.2, 1.4, 1.6, 2.0, 2.5, 3.0, 4.0, 5.0)
#: (score, beta, window in training (None: none), fine-tuning steps, seed)
GRID = [
    ("eatt", 0.3, 2.0, 500, 1),
    ("eatt", 0.3, 1.6, 500, 1),
    ("eatt", 1.0, 1.6, 500, 1),
    ("eatt", 1.0, 3.0, 500, 1),
    ("eatt", 0.1, 2.0, 500, 1),
    ("eatt", 0.1, 2.5, 500, 1),
    ("eatt", 0.0, 2.0, 500, 1),
    ("eatt", 0.3, 2.5, 1000, 1),
    ("eatt", 1.0, 2.5, 1000, 1),
    ("eatt", 0.3, 2.0, 1000, 1),
    ("eatt", 0.3, 2.0, 1000, 2),
    ("eatt", 0.3, 2.0, 1000, 3),
    ("eatt", 1.0, 2.5, 500, 2),
    ("eatt", 0.3, 2.5, 500, 2),
    ("general", 0.1, 2.0, 500, 1),
    ("general", 0.1, 3.0, 500, 1),
    ("general", 1.0, 2.0, 500, 1),
    ("general", 0.3, 2.5, 500, 1),
]
QUICK_GRID = [("eatt", 0.3, 1.6, 2, 1), ("eatt", 1.0, None, 2, 1)]


def point_name(score: str, beta: float, train_tau: float | None, steps: int, seed: int) -> str:
    """ "eatt-b0.3-tt1.6-500-s1" (tt none: no window in training)."""
    tt = "none" if train_tau is None else f"{train_tau:g}"
    return f"{score}-b{beta:g}-tt{tt}-{steps}-s{seed}"


def parse_point(name: str) -> tuple:
    score, beta, tt, steps, seed = name.split("-")
    train_tau = None if tt == "ttnone" else float(tt[2:])
    return score, float(beta[1:]), train_tau, int(steps), int(seed[1:])


def fine_tune(name: str, base: str, work: Path, quick: bool) -> dict:
    """One grid point: fine-tuned from ``base`` into ``work/name``, its dev and test curves."""
    torch.set_num_threads(1)
    score, beta, train_tau, steps, seed = parse_point(name)
    data_cfg, _, train_cfg, beam = _window_sizes(quick)
    data = synthetic_task(data_cfg)
    cfg = ModelConfig.from_dict(torch.load(base, weights_only=True)["model_config"])
    start = time.perf_counter()
    fine = train_cfg.replace(
        steps=steps, warmup=max(1, steps // 10), init_checkpoint=base, seed=seed, progress=False
    )
    run = work / name
    train(cfg.replace(flexible_beta=beta, flexible_train_tau=train_tau), fine, run, data=data)
    seconds = time.perf_counter() - start
    curve = [
        {"split": split, "tau": tau, **{k: r[k] for k in ("vision_span", "bleu")}}
        for split in ("dev", "test")
        for tau in TAUS
        for r in [_eval(str(run / "best.pt"), data, split, beam,
                        model_overrides={"flexible_tau": tau})]
    ]  # fmt: skip
    return {
        "name": name, "score": score, "beta": beta, "train_tau": train_tau, "steps": steps,
        "seed": seed, "fine_tune_seconds": round(seconds, 1), "curve": curve,
    }  # fmt: skip


def summary(point: dict) -> dict:
    """The tau picked on dev, the test window's reduction and BLEU drop there, target met."""
    dev = [c for c in point["curve"] if c["split"] == "dev"]
    test = {c["tau"]: c for c in point["curve"] if c["split"] == "test"}
    # the experiments' pick, against the point's own dev BLEU at tau = inf (dev[0])
    pick = next(c for c in dev if c["tau"] == _picked(dev, dev[0]["bleu"]))
    wide, cut = test[None], test[pick["tau"]]
    reduction = 1.0 - cut["vision_span"] / wide["vision_span"]
    drop = wide["bleu"] - cut["bleu"]
    return {
        "tau_on_dev": pick["tau"],
        "dev_vision_span": pick["vision_span"],
        "test_bleu_inf": wide["bleu"],
        "test_vision_span": cut["vision_span"],
        "window_reduction": reduction,
        "bleu_drop": drop,
        "met": reduction >= 0.5 and drop <= BLEU_TOLERANCE,
    }


def report(points: list[dict], note: str) -> dict:
    rows = [{**p, **summary(p)} for p in points]
    met = [r["name"] for r in rows if r["met"]]
    return {
        "what": "Flexible fine-tuned from the window experiment's trained model, with and "
        "without its window in training; target: >= 50% smaller test window within 0.5 BLEU "
        "of tau = inf at the tau picked on dev",
        "taus": list(TAUS),
        "machine": {"python": platform.python_version(), "torch": torch.__version__},
        "note": note,
        "met": met,
        "rows": rows,
    }


def _train_base(score: str, work: Path, quick: bool) -> str:
    data_cfg, model, train_cfg, _ = _window_sizes(quick)
    cfg = model.replace(cross="flexible", window_score=score)
    run = train(cfg, train_cfg.replace(progress=False), work / f"base-{score}",
                data=synthetic_task(data_cfg))  # fmt: skip
    return run["checkpoint"]


def run_grid(grid: list[tuple], work: Path, quick: bool, workers: int) -> list[dict]:
    bases = {score: _train_base(score, work, quick) for score in dict.fromkeys(g[0] for g in grid)}
    names = [point_name(*g) for g in grid]
    if workers == 1:
        return [fine_tune(n, bases[parse_point(n)[0]], work, quick) for n in names]
    from eatt.jobs import Job, run_jobs

    done: list = [None] * len(names)

    def on_done(index, result, error) -> bool:
        if error is not None:
            raise error
        done[index] = result
        return False

    jobs = [Job((n, bases[parse_point(n)[0]], work, quick), memory_gb=1.0) for n in names]
    run_jobs(fine_tune, jobs, on_done, max_parallel=workers, what="grid points")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--workers", type=int, default=1, help="points at once (Ray tasks)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--point", help="run this one point (NAME as in the grid)")
    parser.add_argument("--base", help="--point: the trained Flexible checkpoint")
    parser.add_argument("--work", type=Path, help="folder of the runs (default: a temporary one)")
    parser.add_argument("--jsonl", type=Path, help="--point: append its result here")
    parser.add_argument("--merge", type=Path, help="write the summary of these JSON lines")
    args = parser.parse_args(argv)
    if args.point:
        if not (args.base and args.work and args.jsonl):
            parser.error("--point needs --base, --work and --jsonl")
        result = fine_tune(args.point, args.base, args.work, args.quick)
        with args.jsonl.open("a") as f:
            f.write(json.dumps(result) + "\n")
        return 0
    if args.merge:
        points = [json.loads(line) for line in args.merge.read_text().splitlines() if line]
        note = "points run one process each (--point), merged with --merge"
    else:
        work = args.work or Path(tempfile.mkdtemp(prefix="flexible_grid."))
        grid = QUICK_GRID if args.quick else GRID
        points = run_grid(grid, work, args.quick, args.workers)
        note = f"run with --workers {args.workers}"
    result = report(points, note)
    atomic_write_text(args.out, json.dumps(result, indent=2) + "\n")
    for r in result["rows"]:
        print(
            f"{r['name']}: tau on dev {r['tau_on_dev']}, window -{100 * r['window_reduction']:.1f}%"
            f" at {-r['bleu_drop']:+.2f} BLEU{' (met)' if r['met'] else ''}",
            file=sys.stderr,
        )
    print(json.dumps({"met": result["met"], "points": len(result["rows"])}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
