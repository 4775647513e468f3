"""The E-ATT paper's experiments on the bundled task (``eatt experiment NAME [--quick]``).

:func:`run_experiment` trains every variant of an experiment for several seeds, evaluates each
on the test split and writes, under ``out_dir/NAME/``: ``results.json`` (every run and the
aggregated rows), ``results.md`` (a Markdown table) and ``NAME.png`` (a matplotlib plot; skipped
with a note in the JSON when matplotlib is not installed), plus the runs' checkpoints under
``runs/``. ``quick=True`` runs a tiny version (tiny task, tiny model, few steps) for tests.

One experiment is one object (its plan or stages, its table, its plot) in one module of this
package, listed in :data:`~.registry.REGISTRY` (``registry.py``); ``base.py`` holds what they
share, ``seeded.py`` the run loop of the variants x seeds experiments, ``staged.py`` the
helpers of the staged ones.

Experiments (:data:`EXPERIMENTS`):

* ``eatt-vs-vanilla`` -- BLEU of vanilla vs E-ATT attention in every role, mean and spread over
  3 seeds, with the analytic attention energy (the paper's Table 4);
* ``ablation`` -- vanilla, discrete selection only (binary-dot), L1 distance only (linear-l1),
  E-ATT, over 3 seeds (Table 5);
* ``hybrids`` -- self-attention kind x cross-attention kind over vanilla, dense, randinit,
  eatt, one seed each, also as a grid (Table 6);
* ``energy-vs-quality`` -- BLEU against the analytic attention energy (in % of the widest
  vanilla model) while halving the model dimension, vanilla and E-ATT, one seed (Fig. 1);
* ``l0drop-scratch`` -- L0Drop trained from scratch on the redundant task (lambda ramped over
  3/8 of the steps), with and without the fixed-gate phase (``l0drop_fix``, the last quarter),
  against the model without gates trained as long, 2 seeds: sparsity, what is pruned, BLEU.

Staged experiments (:data:`STAGED_EXPERIMENTS`: later runs start from or depend on earlier ones):

* ``window`` -- Luong global, local-m, local-p and Flexible Attention as the Transformer's
  cross-attention: average vision span (window size) and BLEU for Flexible at tau = infinity,
  at the tau picked on dev (smallest window within 0.5 dev BLEU of tau = infinity), and after
  fine-tuning with ``-beta mean g(t)`` (Shu & Nakayama 2017, Table 1), plus the window-vs-BLEU
  curve of the fine-tuned model over tau in :data:`TAUS` (their Fig. 3); one trained model per
  curve, tau changes only decoding; the window unit's kinds beside them (quant-global,
  quant-local-m, quant-local-p);
* ``window-lstm`` -- the same stages in the Flexible paper's setting (LSTM, concat scores);
* ``window-eatt`` -- every windowed kind with E-ATT scores (binarized inputs, -L1) vs dot
  scores: BLEU and vision span;
* ``l0drop`` -- BLEU against sparsity rate over lambda (Zhang et al. 2021, Fig. 4), the rule
  patterns Freq / Inv Freq / Group at the learned sparsity (Table 2), and beam-4 decoding time
  with and without the compacted memory (Algorithm 1) at long sources; the gated runs
  fine-tune the trained baseline, as the paper does; the break-even lambda of the baseline;
* ``l0drop-redundant`` -- the same on the task's redundant variant;
* ``l0drop-unit`` -- L0Drop on the window unit (quant-global) on the redundant task: BLEU with
  the unit's arithmetic, sparsity and the unit's cycles per step;
* ``window-unit`` -- local-p in the window unit's forms, then the unit itself (quant-local-p);
* ``qat`` -- float E-ATT vs quantization-aware E-ATT (``quant-eatt``: the hardware core's
  Brevitas module, binarized inputs, 8-bit and 4-bit weights at a least-squares power-of-two
  scale), each quantized model fine-tuned from the float one (``from_float``), beside the float
  model fine-tuned for the same steps and the quantized models before fine-tuning (PTQ).

Trainings run one after another in this process (torch's thread setting applies); the quick
versions are what the tests run (they shrink the sizes in ``base.py``).
"""

from __future__ import annotations

import json
import os
import time

from eatt.config import atomic_write_text
from eatt.outdir import claim_dir

from ..ding import find_ding
from .base import (
    BLEU_TOLERANCE,
    TASK,
    TASKS,
    Experiment,
    _drop_results,
    _legacy_experiment_dir,
    _legacy_experiments_dir,
    _log,
    relative_paths,
)
from .hybrids import HYBRID_KINDS
from .l0drop import L0_LAMBDAS, LONG_SOURCES
from .qat import QAT_BITS
from .registry import EXPERIMENTS, REGISTRY, STAGED_EXPERIMENTS
from .reuse import REUSED
from .reused_reports import load_reused
from .seeded import Plan, SeededExperiment, Variant
from .staged import RESUME, WINDOW_D, StagedExperiment
from .window import FLEXIBLE_BETA, TAUS

__all__ = [
    "BLEU_TOLERANCE",
    "EXPERIMENTS",
    "FLEXIBLE_BETA",
    "HYBRID_KINDS",
    "L0_LAMBDAS",
    "LONG_SOURCES",
    "QAT_BITS",
    "REGISTRY",
    "STAGED_EXPERIMENTS",
    "TASKS",
    "TAUS",
    "WINDOW_D",
    "Experiment",
    "Plan",
    "SeededExperiment",
    "StagedExperiment",
    "Variant",
    "format_table",
    "run_experiment",
]

#: the table of a report whose experiment is not registered (a one-off probe's)
_FALLBACK = SeededExperiment()


def run_experiment(
    name: str,
    quick: bool = False,
    out_dir: str | os.PathLike = "results",
    quiet: bool = False,
    workers: int = 1,
    steps: int | None = None,
    seeds: tuple[int, ...] | None = None,
    resume: bool = False,
    task: str = "synthetic",
    reuse: tuple[str | os.PathLike, ...] = (),
) -> dict:
    """Run experiment ``name``; returns what ``results.json`` holds (see the module doc).

    ``workers`` > 1 trains up to that many runs at once as Ray tasks (eatt.jobs: a local Ray
    instance, one CPU and one torch thread each, no progress bars); every run is
    deterministic, so the results do not depend on it.
    ``task`` (:data:`TASKS`): ``ding`` runs it on the Ding dictionary's sentence pairs
    (eatt.model.corpus; the experiments whose ``tasks`` name it) into ``out_dir/NAME-ding``.
    ``steps`` / ``seeds`` replace the plan's training length and seeds (not for the staged
    experiments, whose stages have their own lengths); the learning-rate schedule depends on
    the step only, so a longer run passes through the shorter one's model on the way (not in
    ``l0drop-scratch``, whose ramp and fixed phase are fractions of the steps).
    ``resume``: a run already finished in ``out_dir/name/runs`` with the model, training
    settings and data asked for is reused, not trained again (every run is deterministic; a
    seeded run's evaluation too, eatt.model.experiments.seeded); anything else is trained as
    without it.
    ``reuse``: reports (``results.json``) of earlier seeded experiments whose runs equal some of
    this one's (model, training settings, data, beam, alpha, seed): those runs are taken as
    recorded, not trained again (eatt.model.experiments.reuse).
    """
    experiment = REGISTRY.get(name)
    if experiment is None:
        raise ValueError(f"unknown experiment {name!r}; choose from {', '.join(REGISTRY)}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if task not in TASKS:
        raise ValueError(f"--task: must be one of {', '.join(TASKS)}, got {task!r}")
    if task not in experiment.tasks:
        able = [n for n, e in REGISTRY.items() if task in e.tasks]
        raise ValueError(
            f"--task {task}: {name} runs on the {' or '.join(experiment.tasks)} task only "
            f"({task}: {', '.join(able)})"
        )
    if reuse and not experiment.reusable:
        able = ", ".join(n for n, e in REGISTRY.items() if e.reusable)
        raise ValueError(
            f"--reuse: {name} is a staged experiment whose stages start from each other; "
            f"only these take runs of an earlier report: {able}"
        )
    reused = load_reused(reuse, experiment)
    if task == "ding":
        find_ding()  # the package missing: exit 3 before any folder is claimed
    task_token, reuse_token = TASK.set(task), REUSED.set(reused)
    try:
        return _run(experiment, name, quick, out_dir, quiet, workers, steps, seeds, resume, task)
    finally:
        REUSED.reset(reuse_token)
        TASK.reset(task_token)


def _run(experiment, name, quick, out_dir, quiet, workers, steps, seeds, resume, task) -> dict:
    experiment.check(quick, steps, seeds)
    # -o is a folder of experiments (or new, or empty): a user's folder, an RTL folder or a
    # training run is refused before any work, as every command's output folder is
    parent = claim_dir(out_dir, "experiments", legacy=_legacy_experiments_dir)
    folder_name = name if task == "synthetic" else f"{name}-{task}"
    folder = claim_dir(parent / folder_name, "experiment", legacy=_legacy_experiment_dir)
    _drop_results(folder)
    start = time.perf_counter()
    token = RESUME.set(resume)
    try:
        body = experiment.run(quick, folder, quiet, workers, steps, seeds)
    finally:
        RESUME.reset(token)
    report = {"experiment": name, "quick": quick, "task": task, **body}
    report["seconds"] = time.perf_counter() - start
    report["plot"] = experiment.plot(report, folder / f"{name}.png")
    report = relative_paths(report)
    atomic_write_text(folder / "results.md", format_table(report) + "\n")
    atomic_write_text(folder / "results.json", json.dumps(report, indent=2) + "\n")
    _log(f"[{name}] wrote {folder / 'results.md'} and results.json", quiet)
    return report


def format_table(report: dict) -> str:
    """The Markdown table of an experiment report."""
    return REGISTRY.get(report["experiment"], _FALLBACK).table(report)
