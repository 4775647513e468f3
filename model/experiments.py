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

Staged experiments (:data:`STAGED_EXPERIMENTS`: later runs start from or depend on earlier ones):

* ``window`` -- Luong global, local-m, local-p and Flexible Attention as the Transformer's
  cross-attention: average vision span (window size) and BLEU for Flexible at tau = infinity,
  at the tau picked on dev (smallest window within 0.5 dev BLEU of tau = infinity), and after
  fine-tuning with ``-beta mean g(t)`` (Shu & Nakayama 2017, Table 1), plus the window-vs-BLEU
  curve of the fine-tuned model over tau in :data:`TAUS` (their Fig. 3); one trained model per
  curve, tau changes only decoding;
* ``window-eatt`` -- every windowed kind with E-ATT scores (binarized inputs, -L1) vs dot
  scores: BLEU and vision span;
* ``l0drop`` -- BLEU against sparsity rate over lambda (Zhang et al. 2021, Fig. 4), the rule
  patterns Freq / Inv Freq / Group at the learned sparsity (Table 2), and beam-4 decoding time
  with and without the compacted memory (Algorithm 1) at long sources; the gated runs
  fine-tune the trained baseline, as the paper does;
* ``qat`` -- float E-ATT vs quantization-aware E-ATT (``quant-eatt``: the hardware core's
  Brevitas module, binarized inputs, 8-bit and 4-bit weights at a least-squares power-of-two
  scale), each quantized model fine-tuned from the float one (``from_float``), beside the float
  model fine-tuned for the same steps and the quantized models before fine-tuning (PTQ).

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
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from eatt.config import atomic_write_text
from eatt.outdir import claim_dir

from .data import TaskConfig, synthetic_task
from .evaluate import evaluate
from .seq2seq import ModelConfig, build_model, load_checkpoint, save_checkpoint
from .train import TrainConfig, train

__all__ = ["EXPERIMENTS", "TAUS", "STAGED_EXPERIMENTS", "Variant", "run_experiment"]


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


def _legacy_experiment_dir(path: Path) -> bool:
    """An experiment folder written before the output marker: its runs and results only."""
    names = {p.name for p in path.iterdir()}
    known = {"runs", "results.json", "results.md", "results.png"}
    return bool(names & {"runs", "results.json"}) and all(
        n in known or n.endswith((".png", ".json", ".md")) for n in names
    )


def _drop_results(folder: Path) -> None:
    """An earlier run's table must not outlive a run that fails or is interrupted."""
    for name in ("results.json", "results.md"):
        (folder / name).unlink(missing_ok=True)


def run_experiment(
    name: str,
    quick: bool = False,
    out_dir: str | os.PathLike = "results",
    quiet: bool = False,
    workers: int = 1,
    steps: int | None = None,
    seeds: tuple[int, ...] | None = None,
) -> dict:
    """Run experiment ``name``; returns what ``results.json`` holds (see the module doc).

    ``workers`` > 1 trains that many runs at once in separate processes (one torch thread
    each, no progress bars); every run is deterministic, so the results do not depend on it.
    ``steps`` / ``seeds`` replace the plan's training length and seeds (not for the staged
    experiments, whose stages have their own lengths); the learning-rate schedule depends on
    the step only, so a longer run passes through the shorter one's model on the way.
    """
    known = [*EXPERIMENTS, *STAGED_EXPERIMENTS]
    if name not in known:
        raise ValueError(f"unknown experiment {name!r}; choose from {', '.join(known)}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if name in STAGED_EXPERIMENTS:
        if steps is not None or seeds is not None:
            raise ValueError(f"steps / seeds: not for the staged experiment {name!r}")
        return _run_window_experiment(name, quick, Path(out_dir), quiet)
    plan = EXPERIMENTS[name](quick)
    if steps is not None:
        plan = replace(plan, train=plan.train.replace(steps=steps))
    if seeds is not None:
        seeds = tuple(seeds)
        if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
            raise ValueError(f"seeds: distinct integers >= 0, at least one, got {list(seeds)}")
        plan = replace(plan, seeds=seeds)
    folder = claim_dir(Path(out_dir) / name, "experiment", legacy=_legacy_experiment_dir)
    _drop_results(folder)
    start = time.perf_counter()
    jobs = [
        (v, seed, folder / "runs" / f"{v.label}-seed{seed}")
        for v in plan.variants
        for seed in plan.seeds
    ]
    if workers == 1:
        data = synthetic_task(plan.data)
        runs = []
        for i, (variant, seed, run_dir) in enumerate(jobs, 1):
            elapsed = time.perf_counter() - start
            _log(
                f"[{name}] run {i}/{len(jobs)}: {variant.label} seed {seed} ({elapsed:.0f} s)",
                quiet,
            )
            progress = plan.train.progress and not quiet
            runs.append(_run_one(variant, seed, plan, run_dir, progress, data))
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = [
                pool.submit(_run_one, v, seed, plan, run_dir, False) for v, seed, run_dir in jobs
            ]
            runs = []
            for i, ((variant, seed, _), future) in enumerate(zip(jobs, futures, strict=True), 1):
                runs.append(future.result())
                elapsed = time.perf_counter() - start
                _log(
                    f"[{name}] run {i}/{len(jobs)} done: {variant.label} seed {seed}: BLEU "
                    f"{runs[-1]['bleu']:.2f} ({elapsed:.0f} s)",
                    quiet,
                )
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
    if report["experiment"] in STAGED_EXPERIMENTS:
        return _format_window_table(report)
    n = len(report["seeds"])
    reference = (
        f"the widest vanilla model ({report['rows'][0]['label']})"
        if report["experiment"] == "energy-vs-quality"
        else "the same model with vanilla attention"
    )
    lines = [
        f"{report['experiment']}{' (quick)' if report['quick'] else ''}: test BLEU over {n} "
        f"seed{'s' if n > 1 else ''} (beam {report['beam']}, alpha {report['alpha']}, "
        f"{report['train']['steps']} steps); "
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
    if name == "hybrids":  # the Table 6 grid as two heat maps: BLEU and energy
        fig, axes = plt.subplots(1, 2, figsize=(9.5, 4.2))
        kinds = HYBRID_KINDS
        cell = {(r["attention"]["cross"], r["attention"]["enc_self"]): r for r in rows}
        for ax, key, title, cmap in (
            (axes[0], "bleu_mean", "test BLEU", "viridis"),
            (axes[1], "energy_asic_percent", "attention energy, % of vanilla (ASIC)", "magma"),
        ):
            grid = [[cell[c, s][key] for s in kinds] for c in kinds]
            image = ax.imshow(grid, cmap=cmap)
            low, high = min(map(min, grid)), max(map(max, grid))
            for i, row in enumerate(grid):
                for j, value in enumerate(row):
                    bright = (value - low) > 0.6 * (high - low)  # both maps end bright
                    color = "black" if bright else "white"
                    ax.text(j, i, f"{value:.1f}", ha="center", va="center", color=color)
            ax.set_xticks(range(len(kinds)), kinds)
            ax.set_yticks(range(len(kinds)), kinds)
            ax.set_xlabel("self-attention")
            ax.set_ylabel("cross-attention")
            ax.set_title(title, fontsize=10)
            fig.colorbar(image, ax=ax, shrink=0.8)
        fig.suptitle(name)
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
        # long labels (the ablation's) would overlap side by side
        crowded = len(labels) > 4 or sum(len(label) for label in labels) > 40
        ax.tick_params(axis="x", labelrotation=90 if crowded else 0, labelsize=8)
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


# -- windowed attention and L0Drop ---------------------------------------------------------------
#: the Flexible paper's thresholds for its window-vs-BLEU curve (Fig. 3, footnote 5)
TAUS = (0.3, 0.5, 0.8, 1.0, 1.2, 1.4, 1.6, 5.0, 8.0, 999.0)
#: D of local-m / local-p on the bundled task (sources of 5-30 words; Luong's D = 10 would cover
#: most sentences whole)
WINDOW_D = 4
#: Flexible's fine-tuning weight beta (Eq. 9; the paper picks 0.1) and the fine-tuning length
FLEXIBLE_BETA = 0.1
#: lambdas of the L0Drop sweep, and the source lengths of the compaction timing
L0_LAMBDAS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
_QUICK_L0_LAMBDAS = (0.5,)
LONG_SOURCES = (100, 400, 1000)
_QUICK_LONG_SOURCES = (40,)
#: the paper's tolerance: within 0.5 BLEU (Flexible Sec. 5, footnote 2; L0Drop Sec. 6)
BLEU_TOLERANCE = 0.5


def _fine_tune(train_cfg: TrainConfig, fraction: int, checkpoint: str) -> TrainConfig:
    """Training settings that continue ``checkpoint`` for 1/``fraction`` of the steps (a short
    warm-up of its own): the fine-tuning stage of the staged experiments."""
    steps = max(1, train_cfg.steps // fraction)
    return train_cfg.replace(steps=steps, warmup=max(1, steps // 10), init_checkpoint=checkpoint)


def _window_sizes(quick: bool) -> tuple[TaskConfig, ModelConfig, TrainConfig, int]:
    data, model, train_cfg = _sizes(quick)
    return data, model.replace(window_d=WINDOW_D), train_cfg.replace(data=data), 1 if quick else 4


def _train_and_eval(
    label: str,
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    data,
    folder: Path,
    beam: int,
    quiet: bool,
) -> tuple[dict, dict]:
    """(training summary, test evaluation) of one model."""
    _log(f"[{folder.name}] {label}", quiet)
    summary = train(
        model_cfg,
        train_cfg.replace(progress=train_cfg.progress and not quiet),
        folder / "runs" / label.replace(" ", "_"),
        data=data,
    )
    return summary, _eval(summary["checkpoint"], data, "test", beam)


def _eval(checkpoint: str, data, split: str, beam: int, **kw) -> dict:
    result = evaluate(checkpoint, beam=beam, alpha=0.6, split=split, data=data, **kw)
    keep = ("bleu", "exact_match", "vision_span", "sparsity_rate", "decode_seconds")
    return {k: result[k] for k in keep}


def _pick_tau(checkpoint: str, data, beam: int) -> tuple[float | None, list[dict]]:
    """The tau with the smallest dev vision span within 0.5 dev BLEU of tau = infinity."""
    base = _eval(checkpoint, data, "dev", beam, model_overrides={"flexible_tau": None})
    curve = [
        {"tau": tau, **_eval(checkpoint, data, "dev", beam, model_overrides={"flexible_tau": tau})}
        for tau in TAUS
    ]
    fine = [c for c in curve if c["bleu"] >= base["bleu"] - BLEU_TOLERANCE]
    if not fine:
        return None, curve
    return min(fine, key=lambda c: (c["vision_span"], -c["bleu"]))["tau"], curve


def _row(label: str, result: dict, **extra) -> dict:
    return {"label": label, **extra, **result}


def _window(quick: bool, folder: Path, quiet: bool) -> dict:
    data_cfg, model, train_cfg, beam = _window_sizes(quick)
    data = synthetic_task(data_cfg)
    rows, runs = [], {}
    for kind in ("global", "local-m", "local-p"):
        summary, result = _train_and_eval(
            kind, model.replace(cross=kind), train_cfg, data, folder, beam, quiet
        )
        runs[kind] = summary["checkpoint"]
        window = f"{2 * WINDOW_D + 1}" if kind != "global" else "all"
        rows.append(_row(kind, result, window=window, tau=None))
    flex_cfg = model.replace(cross="flexible")
    summary, result = _train_and_eval("flexible", flex_cfg, train_cfg, data, folder, beam, quiet)
    flex = summary["checkpoint"]
    rows.append(_row("flexible, tau = inf", result, window="dynamic", tau=None))
    tau, _ = _pick_tau(flex, data, beam)
    picked = _eval(flex, data, "test", beam, model_overrides={"flexible_tau": tau})
    rows.append(_row("flexible, tau on dev", picked, window="dynamic", tau=tau))
    # fine-tuning with -beta mean g(t) (Eq. 9), from the trained Flexible model
    fine_cfg = _fine_tune(train_cfg, 3, flex)
    fine_steps = fine_cfg.steps
    _log(f"[{folder.name}] flexible fine-tuning, beta = {FLEXIBLE_BETA}", quiet)
    tuned = train(
        flex_cfg.replace(flexible_beta=FLEXIBLE_BETA),
        fine_cfg.replace(progress=fine_cfg.progress and not quiet),
        folder / "runs" / "flexible-finetuned",
        data=data,
    )["checkpoint"]
    base_ft = _eval(tuned, data, "test", beam, model_overrides={"flexible_tau": None})
    rows.append(
        _row(
            f"flexible fine-tuned (beta {FLEXIBLE_BETA}), tau = inf",
            base_ft,
            window="dynamic",
            tau=None,
        )
    )
    tau_ft, _ = _pick_tau(tuned, data, beam)
    picked_ft = _eval(tuned, data, "test", beam, model_overrides={"flexible_tau": tau_ft})
    rows.append(
        _row(
            f"flexible fine-tuned (beta {FLEXIBLE_BETA}), tau on dev",
            picked_ft,
            window="dynamic",
            tau=tau_ft,
        )
    )
    curve = [
        {"tau": t, **_eval(tuned, data, "test", beam, model_overrides={"flexible_tau": t})}
        for t in TAUS
    ]
    # the same (fine-tuned) model at tau = infinity and at the tau picked on dev
    reference, best = rows[-2], rows[-1]
    reduction = 1.0 - best["vision_span"] / reference["vision_span"]
    drop = reference["bleu"] - best["bleu"]
    target = {
        "what": "Flexible cuts the average window by >= 50% within 0.5 BLEU of tau = infinity",
        "window_reduction": reduction,
        "bleu_drop": drop,
        "met": reduction >= 0.5 and drop <= BLEU_TOLERANCE,
    }
    return {
        "beam": beam,
        "window_d": WINDOW_D,
        "flexible_beta": FLEXIBLE_BETA,
        "fine_tune_steps": fine_steps,
        "rows": rows,
        "curve": curve,
        "target": target,
        "checkpoints": {**runs, "flexible": flex, "flexible-finetuned": tuned},
        "data": data_cfg.__dict__.copy(),
        "model": model.to_dict(),
        "train": {k: v for k, v in train_cfg.to_dict().items() if k != "data"},
    }


def _window_eatt(quick: bool, folder: Path, quiet: bool) -> dict:
    data_cfg, model, train_cfg, beam = _window_sizes(quick)
    data = synthetic_task(data_cfg)
    kinds = ("local-p", "flexible") if quick else ("global", "local-m", "local-p", "flexible")
    rows = []
    for kind in kinds:
        for score in ("dot", "eatt"):
            label = f"{kind} {score}"
            cfg = model.replace(cross=kind, window_score=score)
            summary, result = _train_and_eval(label, cfg, train_cfg, data, folder, beam, quiet)
            rows.append(_row(label, result, kind=kind, score=score, tau=None))
            if kind == "flexible":
                windowed = _eval(
                    summary["checkpoint"], data, "test", beam, model_overrides={"flexible_tau": 1.0}
                )
                rows.append(_row(f"{label}, tau = 1", windowed, kind=kind, score=score, tau=1.0))
    return {
        "beam": beam,
        "window_d": WINDOW_D,
        "rows": rows,
        "data": data_cfg.__dict__.copy(),
        "model": model.to_dict(),
        "train": {k: v for k, v in train_cfg.to_dict().items() if k != "data"},
    }


def _long_sources(data, length: int, batch: int) -> torch.Tensor:
    """(batch, length) source ids: test sentences concatenated, cut to ``length`` - 1, <eos>."""
    from .data import EOS, encode_pairs

    pairs = encode_pairs(data.test, data.src_vocab, data.tgt_vocab)
    words = [i for p in pairs for i in p[0] if i != EOS]
    rows = []
    for b in range(batch):
        start = (b * 97) % max(1, len(words) - length)
        row = (words[start:] + words)[: length - 1]
        rows.append(row + [EOS])
    return torch.tensor(rows, dtype=torch.long)


def _compaction_timing(checkpoint: str, data, lengths, steps: int, repeats: int) -> list[dict]:
    """Beam-4 decoding seconds on the gated full memory vs the compacted memory (Algorithm 1)."""
    from .evaluate import beam_search
    from .seq2seq import load_checkpoint

    model = load_checkpoint(checkpoint, "cpu")[0]
    out = []
    for length in lengths:
        src = _long_sources(data, length, batch=8)
        times, outputs = {}, {}
        for compact in (False, True):
            model.compact_memory = compact
            beam_search(model, src[:1], beam=4, max_len=2)  # warm-up
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                outputs[compact] = beam_search(model, src, beam=4, max_len=steps)
                best = min(best, time.perf_counter() - start)
            times[compact] = best
        model.gate_stats[:] = [0, 0]
        model.compact_memory = True
        memory, padding, counts = model.encode_for_decoding(src)
        out.append(
            {
                "source_length": length,
                "compacted_length": int(memory.shape[1]),
                "seconds_full": times[False],
                "seconds_compacted": times[True],
                "speedup": times[False] / times[True],
                "same_output": outputs[False] == outputs[True],
                "sparsity_rate": model.gate_stats[0] / max(model.gate_stats[1], 1),
            }
        )
    return out


def _l0drop(quick: bool, folder: Path, quiet: bool) -> dict:
    data_cfg, model, train_cfg, beam = _window_sizes(quick)
    data = synthetic_task(data_cfg)
    rows = []
    summary, base = _train_and_eval("no pruning", model, train_cfg, data, folder, beam, quiet)
    rows.append(_row("no pruning", {**base, "sparsity_rate": 0.0}, rule=None, l0_lambda=None))
    # as the paper does (Sec. 5): fine-tune the trained baseline with the gates, per lambda;
    # the rule patterns and the reference without gates get the same fine-tuning
    fine_cfg = _fine_tune(train_cfg, 2, summary["checkpoint"])
    fine_steps = fine_cfg.steps
    _, base = _train_and_eval("no pruning +", model, fine_cfg, data, folder, beam, quiet)
    rows.append(
        _row("no pruning, fine-tuned", {**base, "sparsity_rate": 0.0}, rule=None, l0_lambda=None)
    )
    first = len(rows)  # the learned rows start here
    learned = []
    for lam in _QUICK_L0_LAMBDAS if quick else L0_LAMBDAS:
        cfg = model.replace(l0drop=True, l0drop_lambda=lam)
        tuned, result = _train_and_eval(f"lambda {lam}", cfg, fine_cfg, data, folder, beam, quiet)
        learned.append(tuned["checkpoint"])
        rows.append(_row(f"L0Drop lambda {lam}", result, rule=None, l0_lambda=lam))
    # the rule patterns at the sparsity of the learned run closest to 50% (Table 2's setting)
    nearest = min(range(len(learned)), key=lambda i: abs(rows[first + i]["sparsity_rate"] - 0.5))
    rate = rows[first + nearest]["sparsity_rate"]
    for rule in ("freq", "inv-freq", "group"):
        cfg = model.replace(l0drop=True, l0drop_rule=rule, l0drop_rule_rate=min(max(rate, 0), 1))
        _, result = _train_and_eval(f"rule {rule}", cfg, fine_cfg, data, folder, beam, quiet)
        rows.append(_row(f"rule {rule}", result, rule=rule, l0_lambda=None))
    # the learned run with the most pruning within 0.5 BLEU of no pruning; the timing uses it,
    # or (none within) the run nearest 50% sparsity, never a collapsed all-pruned one
    # (against the fine-tuned reference: every compared row has seen the same steps)
    mine = rows[first : first + len(learned)]
    fine = [r for r in mine if r["bleu"] >= base["bleu"] - BLEU_TOLERANCE]
    best = max(fine, key=lambda r: r["sparsity_rate"]) if fine else None
    timed = learned[mine.index(best)] if best else learned[nearest]
    timing = _compaction_timing(
        timed,
        data,
        _QUICK_LONG_SOURCES if quick else LONG_SOURCES,
        steps=5 if quick else 30,
        repeats=1 if quick else 3,
    )
    target = {
        "what": "L0Drop prunes >= 40% of encoder outputs within 0.5 BLEU of no pruning "
        "(fine-tuned as long); compacted decoding faster at long sources",
        "sparsity_rate": None if best is None else best["sparsity_rate"],
        "bleu_reference": base["bleu"],
        "bleu_drop": None if best is None else base["bleu"] - best["bleu"],
        "speedup_longest": timing[-1]["speedup"],
        "met": best is not None and best["sparsity_rate"] >= 0.4 and timing[-1]["speedup"] > 1.0,
    }
    return {
        "beam": beam,
        "rows": rows,
        "matched_rate": rate,
        "timing": timing,
        "timed_checkpoint": timed,
        "fine_tune_steps": fine_steps,
        "target": target,
        "data": data_cfg.__dict__.copy(),
        "model": model.to_dict(),
        "train": {k: v for k, v in train_cfg.to_dict().items() if k != "data"},
    }


#: weight widths of the qat experiment
QAT_BITS = (8, 4)


def _quantized_copy(float_checkpoint: str, cfg: ModelConfig, path: Path) -> str:
    """A checkpoint of the model ``cfg`` holding a float checkpoint's weights, untrained: the
    quantized model before quantization-aware fine-tuning (post-training quantization)."""
    model, src_vocab, tgt_vocab, payload = load_checkpoint(float_checkpoint)
    quantized = build_model(cfg, len(src_vocab), len(tgt_vocab))
    quantized.load_state_dict(model.state_dict())
    keep = ("train_config", "data_config", "data_fingerprint")
    path.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(path, quantized, src_vocab, tgt_vocab, {k: payload[k] for k in keep})
    return str(path)


def _attention_weights(checkpoint: str) -> list[torch.Tensor]:
    """The Q/K/V/O projection weights of every attention module of a checkpoint."""
    model = load_checkpoint(checkpoint)[0]
    return [
        getattr(module.core, f"{p}_proj").weight
        for _, _, module in model.attention_modules()
        for p in ("q", "k", "v", "o")
    ]


def _qat(quick: bool, folder: Path, quiet: bool) -> dict:
    from eatt.quant.modules import calibrate_weight_frac  # Brevitas: imported when needed

    data_cfg, model, train_cfg = _sizes(quick)
    train_cfg, beam = train_cfg.replace(data=data_cfg), 1 if quick else 4
    data = synthetic_task(data_cfg)
    float_cfg = model.replace(attention="eatt")
    summary, result = _train_and_eval("float eatt", float_cfg, train_cfg, data, folder, beam, quiet)
    trained = summary["checkpoint"]
    rows = [_row("float eatt", result, bits=None, weight_frac=None, steps=train_cfg.steps)]
    fine_cfg = _fine_tune(train_cfg, 2, trained)
    fine_steps = fine_cfg.steps
    total = train_cfg.steps + fine_steps
    # the float model trained for as many steps as the quantized ones: the fair reference
    _, ref = _train_and_eval("float eatt +", float_cfg, fine_cfg, data, folder, beam, quiet)
    rows.append(_row("float eatt, fine-tuned", ref, bits=None, weight_frac=None, steps=total))
    weights = _attention_weights(trained)
    for bits in QAT_BITS:
        frac = calibrate_weight_frac(weights, bits)
        cfg = float_cfg.replace(
            attention="quant-eatt", quant_weight_bits=bits, quant_weight_frac=frac
        )
        ptq = _quantized_copy(trained, cfg, folder / "runs" / f"ptq_w{bits}" / "model.pt")
        _log(f"[{folder.name}] quant-eatt w{bits} before fine-tuning (frac {frac})", quiet)
        label = f"quant-eatt w{bits}"
        result = _eval(ptq, data, "test", beam)
        rows.append(
            _row(f"{label}, PTQ", result, bits=bits, weight_frac=frac, steps=train_cfg.steps)
        )
        _, result = _train_and_eval(label, cfg, fine_cfg, data, folder, beam, quiet)
        rows.append(_row(f"{label}, QAT", result, bits=bits, weight_frac=frac, steps=total))
    w8 = next(r for r in rows if r["bits"] == 8 and r["label"].endswith("QAT"))
    target = {
        "what": "quantized E-ATT (8-bit weights) within 0.5 BLEU of float E-ATT "
        "(same training steps)",
        "bleu_float": ref["bleu"],
        "bleu_w8": w8["bleu"],
        "bleu_drop": ref["bleu"] - w8["bleu"],
        "met": w8["bleu"] >= ref["bleu"] - BLEU_TOLERANCE,
    }
    return {
        "beam": beam,
        "rows": rows,
        "fine_tune_steps": fine_steps,
        "target": target,
        "data": data_cfg.__dict__.copy(),
        "model": float_cfg.to_dict(),
        "train": {k: v for k, v in train_cfg.to_dict().items() if k != "data"},
    }


STAGED_EXPERIMENTS = {
    "window": _window,
    "window-eatt": _window_eatt,
    "l0drop": _l0drop,
    "qat": _qat,
}


def _run_window_experiment(name: str, quick: bool, out_dir: Path, quiet: bool) -> dict:
    folder = claim_dir(out_dir / name, "experiment", legacy=_legacy_experiment_dir)
    _drop_results(folder)
    start = time.perf_counter()
    report = {"experiment": name, "quick": quick, **STAGED_EXPERIMENTS[name](quick, folder, quiet)}
    report["seconds"] = time.perf_counter() - start
    report["plot"] = _plot_window(report, folder / f"{name}.png")
    atomic_write_text(folder / "results.md", format_table(report) + "\n")
    atomic_write_text(folder / "results.json", json.dumps(report, indent=2) + "\n")
    _log(f"[{name}] wrote {folder / 'results.md'} and results.json", quiet)
    return report


def _num(value, fmt: str = ".2f") -> str:
    return "-" if value is None else format(value, fmt)


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of a Markdown table: the header, its rule, one line per row."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + " --- |" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _format_window_table(report: dict) -> str:
    name, quick = report["experiment"], " (quick)" if report["quick"] else ""
    beam = report["beam"]
    if name == "l0drop":
        lines = [
            f"l0drop{quick}: test BLEU and sparsity rate (closed gates / source tokens), beam "
            f"{beam}; rules trained at the learned sparsity closest to 50% "
            f"({100 * report['matched_rate']:.1f}%)",
            "",
            *_markdown_table(
                ["model", "sparsity %", "BLEU", "decode s"],
                [
                    [
                        r["label"],
                        _num(100 * (r["sparsity_rate"] or 0.0), ".1f"),
                        _num(r["bleu"]),
                        _num(r["decode_seconds"]),
                    ]
                    for r in report["rows"]
                ],
            ),
            "",
            "Beam-4 decoding (batch 8, CPU, best of the repeats) on the gated full memory vs the "
            "compacted memory (Algorithm 1):",
            "",
            *_markdown_table(
                [
                    "source length",
                    "compacted length",
                    "full s",
                    "compacted s",
                    "speed-up",
                    "same output",
                ],
                [
                    [
                        str(t["source_length"]),
                        str(t["compacted_length"]),
                        f"{t['seconds_full']:.3f}",
                        f"{t['seconds_compacted']:.3f}",
                        f"{t['speedup']:.2f}x",
                        str(t["same_output"]),
                    ]
                    for t in report["timing"]
                ],
            ),
        ]
    elif name == "qat":
        lines = [
            f"qat{quick}: test BLEU (beam {beam}) of float E-ATT and quantized E-ATT "
            "(quant-eatt: binarized inputs, weights <bits, frac>); QAT rows are fine-tuned "
            f"from the float model for {report['fine_tune_steps']} steps, PTQ rows are the "
            "float weights rounded to the grid",
            "",
            *_markdown_table(
                ["model", "weight bits", "weight frac", "training steps", "BLEU"],
                [
                    [
                        r["label"],
                        _num(r["bits"], "d"),
                        _num(r["weight_frac"], "d"),
                        str(r["steps"]),
                        _num(r["bleu"]),
                    ]
                    for r in report["rows"]
                ],
            ),
        ]
    else:
        lines = [
            f"{name}{quick}: test BLEU and average vision span (source positions scored per "
            f"decoding step, over steps and beam hypotheses), beam {beam}, D = "
            f"{report['window_d']}",
            "",
            *_markdown_table(
                ["model", "tau", "vision span", "BLEU"],
                [
                    [r["label"], _num(r.get("tau"), "g"), _num(r["vision_span"]), _num(r["bleu"])]
                    for r in report["rows"]
                ],
            ),
        ]
        if name == "window":
            lines += [
                "",
                "Window vs BLEU of the fine-tuned Flexible model over tau (Fig. 3 analog):",
                "",
                *_markdown_table(
                    ["tau", "vision span", "BLEU"],
                    [
                        [f"{c['tau']:g}", f"{c['vision_span']:.2f}", f"{c['bleu']:.2f}"]
                        for c in report["curve"]
                    ],
                ),
            ]
    target = report.get("target")
    if target:
        parts = [
            f"{k} {_num(v, '.3f') if isinstance(v, float) else v}"
            for k, v in target.items()
            if k not in ("what", "met")
        ]
        lines += [
            "",
            f"Target: {target['what']}: {'met' if target['met'] else 'MISSED'} "
            f"({', '.join(parts)})",
        ]
    return "\n".join(lines)


def _plot_window(report: dict, path: Path) -> str | None:
    if importlib.util.find_spec("matplotlib") is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name, rows = report["experiment"], report["rows"]
    if name == "l0drop":
        fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(9, 3.6))
        learned = [r for r in rows if r["l0_lambda"] is not None]
        ax.plot(
            [100 * r["sparsity_rate"] for r in learned],
            [r["bleu"] for r in learned],
            marker="o",
            label="L0Drop (lambda sweep)",
        )
        for r in rows:
            if r["rule"] is not None or r["l0_lambda"] is None:
                ax.scatter(
                    [100 * (r["sparsity_rate"] or 0.0)], [r["bleu"]], marker="s", label=r["label"]
                )
        ax.set_xlabel("sparsity rate (%)")
        ax.set_ylabel("test BLEU")
        ax.legend(fontsize=7)
        t = report["timing"]
        ax_t.plot(
            [x["source_length"] for x in t],
            [x["seconds_full"] for x in t],
            marker="o",
            label="full gated memory",
        )
        ax_t.plot(
            [x["source_length"] for x in t],
            [x["seconds_compacted"] for x in t],
            marker="s",
            label="compacted (Algorithm 1)",
        )
        ax_t.set_xlabel("source length")
        ax_t.set_ylabel("beam-4 decoding s (CPU)")
        ax_t.legend(fontsize=7)
    elif name == "qat":
        fig, ax = plt.subplots(figsize=(6.5, 3.6))
        ax.bar(range(len(rows)), [r["bleu"] for r in rows])
        ax.set_xticks(range(len(rows)), [r["label"] for r in rows], rotation=20, fontsize=7)
        ax.set_ylabel("test BLEU")
        low = min(r["bleu"] for r in rows)
        ax.set_ylim(max(0.0, low - 5.0), max(r["bleu"] for r in rows) + 2.0)
    else:
        panels = 2 if name == "window" else 1
        fig, axes = plt.subplots(1, panels, figsize=(5 * panels + 2, 3.8))
        axes = list(axes) if panels > 1 else [axes]
        ax = axes[0]
        for r in rows:
            ax.scatter([r["vision_span"]], [r["bleu"]], label=r["label"])
        ax.set_xlabel("average vision span (positions per step)")
        ax.set_ylabel("test BLEU")
        ax.legend(fontsize=6)
        if name == "window":
            c = report["curve"]
            axes[1].plot([x["vision_span"] for x in c], [x["bleu"] for x in c], marker="o")
            for x in c:
                axes[1].annotate(
                    f"{x['tau']:g}",
                    (x["vision_span"], x["bleu"]),
                    fontsize=7,
                    textcoords="offset points",
                    xytext=(3, 3),
                )
            axes[1].set_xlabel("average vision span")
            axes[1].set_ylabel("test BLEU")
            axes[1].set_title("fine-tuned Flexible over tau")
    fig.suptitle(name)
    return _save(fig, plt, path)
