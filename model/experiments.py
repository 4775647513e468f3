"""The E-ATT paper's experiments on the bundled task (``eatt experiment NAME [--quick]``).

:func:`run_experiment` trains every variant of an experiment for several seeds, evaluates each
on the test split and writes, under ``out_dir/NAME/``: ``results.json`` (every run and the
aggregated rows), ``results.md`` (a Markdown table) and ``NAME.png`` (a matplotlib plot; skipped
with a note in the JSON when matplotlib is not installed), plus the runs' checkpoints under
``runs/``. ``quick=True`` runs a tiny version (tiny task, tiny model, few steps) for tests.

Experiments (:data:`EXPERIMENTS`):

* ``eatt-vs-vanilla`` -- BLEU of vanilla vs E-ATT attention in every role, mean and spread over
  3 seeds, with the analytic attention energy (the paper's Table 4);
* ``ablation`` -- vanilla, discrete selection only (binary-dot), L1 distance only (linear-l1),
  E-ATT, over 3 seeds (Table 5);
* ``hybrids`` -- self-attention kind x cross-attention kind over vanilla, dense, randinit,
  eatt, one seed each, also as a grid (Table 6);
* ``energy-vs-quality`` -- BLEU against the analytic attention energy (in % of the widest
  vanilla model) while halving the model dimension, vanilla and E-ATT, one seed (Fig. 1).

Trainings run one after another in this process (torch's thread setting applies); the quick
versions are what the tests run.
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

from eatt.config import atomic_write_text

from .data import TaskConfig, synthetic_task
from .evaluate import evaluate
from .seq2seq import ModelConfig
from .train import TrainConfig, train

__all__ = ["EXPERIMENTS", "Variant", "run_experiment"]


@dataclass(frozen=True)
class Variant:
    """One row of an experiment's table."""

    label: str
    model: ModelConfig


@dataclass(frozen=True)
class Plan:
    variants: list[Variant]
    seeds: tuple[int, ...]
    train: TrainConfig
    data: TaskConfig
    beam: int = 4
    alpha: float = 0.6


# default and quick sizes shared by the experiments
_DATA = TaskConfig()
_QUICK_DATA = TaskConfig(
    n_train=300, n_dev=30, n_test=30, max_len=12, n_nouns=12, n_verbs=6, n_adjs=6, seed=11
)
_MODEL = ModelConfig()
_QUICK_MODEL = ModelConfig(dim=32, heads=2, ffn_dim=64, enc_layers=1, dec_layers=1, dropout=0.0)
_TRAIN = TrainConfig(steps=1500, eval_every=500, progress=True)
_QUICK_TRAIN = TrainConfig(
    steps=150, warmup=30, decay=150, peak_lr=3e-3, max_tokens=512, eval_every=0, progress=False
)


def _sizes(quick: bool) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
    return (_QUICK_DATA, _QUICK_MODEL, _QUICK_TRAIN) if quick else (_DATA, _MODEL, _TRAIN)


def _eatt_vs_vanilla(quick: bool) -> Plan:
    data, model, train_cfg = _sizes(quick)
    variants = [
        Variant("vanilla", model.replace(attention="vanilla")),
        Variant("eatt", model.replace(attention="eatt")),
    ]
    return Plan(variants, (1, 2, 3), train_cfg.replace(data=data), data)


def _ablation(quick: bool) -> Plan:
    data, model, train_cfg = _sizes(quick)
    labels = {
        "vanilla": "vanilla",
        "binary-dot": "discrete selection only",
        "linear-l1": "L1 distance only",
        "eatt": "eatt",
    }
    variants = [Variant(label, model.replace(attention=kind)) for kind, label in labels.items()]
    return Plan(variants, (1,) if quick else (1, 2, 3), train_cfg.replace(data=data), data)


HYBRID_KINDS = ("vanilla", "dense", "randinit", "eatt")


def _hybrids(quick: bool) -> Plan:
    data, model, train_cfg = _sizes(quick)
    variants = [
        Variant(
            f"self={s} cross={c}",
            model.replace(attention=s, enc_self=s, dec_self=s, cross=c),
        )
        for c in HYBRID_KINDS
        for s in HYBRID_KINDS
    ]
    if quick:
        train_cfg = train_cfg.replace(steps=min(train_cfg.steps, 60))
    return Plan(variants, (1,), train_cfg.replace(data=data), data)


def _energy_vs_quality(quick: bool) -> Plan:
    data, model, train_cfg = _sizes(quick)
    dims = (32, 16) if quick else (model.dim, model.dim // 2, model.dim // 4)
    variants = [
        Variant(
            f"{kind} d={dim}",
            model.replace(attention=kind, dim=dim, ffn_dim=2 * dim, heads=min(model.heads, dim)),
        )
        for kind in ("vanilla", "eatt")
        for dim in dims
    ]
    return Plan(variants, (1,), train_cfg.replace(data=data), data)


EXPERIMENTS = {
    "eatt-vs-vanilla": _eatt_vs_vanilla,
    "ablation": _ablation,
    "hybrids": _hybrids,
    "energy-vs-quality": _energy_vs_quality,
}


def _log(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def _run_one(
    variant: Variant, seed: int, plan: Plan, run_dir: Path, progress: bool, data=None
) -> dict:
    """Train and evaluate one (variant, seed); in a worker process ``data`` is regenerated."""
    if data is None:
        torch.set_num_threads(1)
        data = synthetic_task(plan.data)
    train_cfg = plan.train.replace(seed=seed, progress=progress)
    summary = train(variant.model, train_cfg, run_dir, data=data)
    result = evaluate(summary["checkpoint"], beam=plan.beam, alpha=plan.alpha, data=data)
    return {
        "label": variant.label,
        "seed": seed,
        "attention": variant.model.kinds,
        "bleu": result["bleu"],
        "exact_match": result["exact_match"],
        "dev_loss": summary["dev_loss"],
        "train_seconds": summary["seconds"],
        "energy_percent_of_vanilla": result["energy"]["percent_of_vanilla"],
        "energy_pj": result["energy"]["energy_pj"],
        "binarization": result["binarization"],
        "checkpoint": summary["checkpoint"],
    }


def run_experiment(
    name: str,
    quick: bool = False,
    out_dir: str | os.PathLike = "results",
    quiet: bool = False,
    workers: int = 1,
) -> dict:
    """Run experiment ``name``; returns what ``results.json`` holds (see the module doc).

    ``workers`` > 1 trains that many runs at once in separate processes (one torch thread
    each, no progress bars); every run is deterministic, so the results do not depend on it.
    """
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; choose from {', '.join(EXPERIMENTS)}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    plan = EXPERIMENTS[name](quick)
    folder = Path(out_dir) / name
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    jobs = [
        (v, seed, folder / "runs" / f"{v.label}-seed{seed}")
        for v in plan.variants
        for seed in plan.seeds
    ]
    if workers == 1:
        data = synthetic_task(plan.data)
        runs = []
        for variant, seed, run_dir in jobs:
            _log(f"[{name}] {variant.label} seed {seed}", quiet)
            progress = plan.train.progress and not quiet
            runs.append(_run_one(variant, seed, plan, run_dir, progress, data))
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = [
                pool.submit(_run_one, v, seed, plan, run_dir, False) for v, seed, run_dir in jobs
            ]
            runs = []
            for (variant, seed, _), future in zip(jobs, futures, strict=True):
                runs.append(future.result())
                _log(f"[{name}] {variant.label} seed {seed}: BLEU {runs[-1]['bleu']:.2f}", quiet)
    rows = []
    # energy-vs-quality compares absolute energy with the first (widest vanilla) variant
    reference = runs[0]["energy_pj"] if name == "energy-vs-quality" else None
    for variant in plan.variants:
        mine = [r for r in runs if r["label"] == variant.label]
        bleus = [r["bleu"] for r in mine]
        energy = mine[0]["energy_percent_of_vanilla"] or {}
        if reference is not None:
            energy = {t: 100.0 * mine[0]["energy_pj"][t] / reference[t] for t in reference}
        rows.append(
            {
                "label": variant.label,
                "attention": variant.model.kinds,
                "dim": variant.model.dim,
                "bleu_mean": statistics.fmean(bleus),
                "bleu_std": statistics.stdev(bleus) if len(bleus) > 1 else 0.0,
                "bleus": bleus,
                "energy_asic_percent": energy.get("asic"),
                "energy_fpga_percent": energy.get("fpga"),
                "train_seconds_mean": statistics.fmean(r["train_seconds"] for r in mine),
            }
        )
    report = {
        "experiment": name,
        "quick": quick,
        "seeds": list(plan.seeds),
        "beam": plan.beam,
        "alpha": plan.alpha,
        "model": plan.variants[0].model.to_dict(),
        "train": {k: v for k, v in plan.train.to_dict().items() if k != "data"},
        "data": plan.data.__dict__.copy(),
        "rows": rows,
        "runs": runs,
        "seconds": time.perf_counter() - start,
    }
    report["plot"] = _plot(name, rows, folder / f"{name}.png")
    atomic_write_text(folder / "results.md", format_table(report) + "\n")
    atomic_write_text(folder / "results.json", json.dumps(report, indent=2) + "\n")
    _log(f"[{name}] wrote {folder / 'results.md'} and results.json", quiet)
    return report


def format_table(report: dict) -> str:
    """The Markdown table of an experiment report."""
    n = len(report["seeds"])
    reference = (
        f"the widest vanilla model ({report['rows'][0]['label']})"
        if report["experiment"] == "energy-vs-quality"
        else "the same model with vanilla attention"
    )
    lines = [
        f"{report['experiment']}{' (quick)' if report['quick'] else ''}: test BLEU over {n} "
        f"seed{'s' if n > 1 else ''} (beam {report['beam']}, alpha {report['alpha']}); "
        f"attention energy in % of {reference} (paper Table 1 costs, test-set lengths)",
        "",
        "| model | BLEU mean +- std | BLEU per seed | ASIC % | FPGA % | train s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in report["rows"]:
        asic, fpga = row["energy_asic_percent"], row["energy_fpga_percent"]
        lines.append(
            f"| {row['label']} | {row['bleu_mean']:.2f} +- {row['bleu_std']:.2f} | "
            + " ".join(f"{b:.2f}" for b in row["bleus"])
            + f" | {'-' if asic is None else f'{asic:.2f}'}"
            + f" | {'-' if fpga is None else f'{fpga:.2f}'}"
            + f" | {row['train_seconds_mean']:.0f} |"
        )
    if report["experiment"] == "hybrids":
        bleu = {(r["attention"]["enc_self"], r["attention"]["cross"]): r for r in report["rows"]}
        lines += [
            "",
            "BLEU by self-attention (columns) and cross-attention (rows), as the paper's Table 6:",
            "",
            "| cross \\ self | " + " | ".join(HYBRID_KINDS) + " |",
            "| --- |" + " --- |" * len(HYBRID_KINDS),
        ]
        for c in HYBRID_KINDS:
            cells = [f"{bleu[(s, c)]['bleu_mean']:.2f}" for s in HYBRID_KINDS]
            lines.append(f"| {c} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plot(name: str, rows: list[dict], path: Path) -> str | None:
    """BLEU (mean, std error bars) and ASIC energy per variant; None without matplotlib."""
    if importlib.util.find_spec("matplotlib") is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if name == "energy-vs-quality":
        fig, ax = plt.subplots(figsize=(5, 3.6))
        for kind, marker in (("vanilla", "o"), ("eatt", "s")):
            mine = [r for r in rows if r["attention"]["enc_self"] == kind]
            ax.plot(
                [r["energy_asic_percent"] for r in mine],
                [r["bleu_mean"] for r in mine],
                marker=marker,
                label=kind,
            )
            for r in mine:
                ax.annotate(
                    f"d={r['dim']}",
                    (r["energy_asic_percent"], r["bleu_mean"]),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize=8,
                )
        ax.set_xscale("log")
        ax.set_xlabel("attention energy, % of the widest vanilla model (ASIC)")
        ax.set_ylabel("test BLEU")
        ax.legend()
        ax.set_title(name)
        return _save(fig, plt, path)
    labels = [r["label"] for r in rows]
    width = max(8.0, 1.1 * len(labels))
    fig, (ax_bleu, ax_energy) = plt.subplots(1, 2, figsize=(width, 3.6))
    ax_bleu.bar(
        labels,
        [r["bleu_mean"] for r in rows],
        yerr=[r["bleu_std"] for r in rows],
        capsize=4,
        color="#4878d0",
    )
    ax_bleu.set_ylabel("test BLEU")
    ax_bleu.set_title("translation quality")
    ax_energy.bar(labels, [r["energy_asic_percent"] or 0.0 for r in rows], color="#ee854a")
    ax_energy.set_ylabel("attention energy, % of vanilla (ASIC)")
    ax_energy.set_title("analytic energy")
    for ax in (ax_bleu, ax_energy):
        ax.tick_params(axis="x", labelrotation=90 if len(labels) > 4 else 0, labelsize=8)
    fig.suptitle(name)
    return _save(fig, plt, path)


def _save(fig, plt, path: Path) -> str:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)
    return str(path)
