"""``--reuse REPORT.json``: runs of an earlier report taken instead of trained again.

Two experiments of variants x seeds often share runs: the ablation's vanilla and E-ATT rows are
eatt-vs-vanilla's runs (same model, training settings, data and seeds). Every run is
deterministic, so a run recorded in a committed report (``results.json`` of ``eatt
experiment``, e.g. bench/results/experiments/eatt-vs-vanilla-ding.json) stands for the run
that would be trained again; on a 2-core machine a Ding run costs about 25 minutes.

A run is taken only when all of it is the same: the report's experiment is planned again with
the code as it is (its task, quick flag, steps and seeds) and must give the model, training
settings, data, beam and alpha the report recorded (otherwise the file is refused: the code has
moved on since it was written); then a run of it is taken for a (variant, seed) of the
experiment running now when the variant's whole model config, the training settings (all but
the seed, set per run, and the progress flag), the data, the beam, the alpha and the seed are
equal. The row keeps what the report measured and says where it came from (``reused_from``);
the table says which runs were reused.
"""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass
from pathlib import Path

#: the reusable runs of the reports given with ``--reuse`` (run_experiment sets it)
REUSED: contextvars.ContextVar[tuple[ReusedRun, ...]] = contextvars.ContextVar("reused", default=())
#: training settings that do not change what a run computes
_NOT_COMPARED = ("seed", "progress", "data")


@dataclass(frozen=True)
class ReusedRun:
    key: str
    run: dict
    source: str


def _canonical(value) -> object:
    """``value`` as JSON reads it back (tuples as lists), for comparing."""
    return json.loads(json.dumps(value))


def run_key(model, train, data, beam: float, alpha: float, seed: int) -> str:
    """What decides a seeded run's result, as one string."""
    settings = {k: v for k, v in train.to_dict().items() if k not in _NOT_COMPARED}
    return json.dumps(
        {
            "model": model.to_dict(),
            "train": settings,
            "data": dict(data.__dict__),
            "beam": beam,
            "alpha": alpha,
            "seed": seed,
        },
        sort_keys=True,
    )


def load_reused(paths) -> tuple[ReusedRun, ...]:
    """The runs of the reports at ``paths``; a file that is not a report of a seeded experiment
    planned as it is now raises ValueError naming it."""
    from .base import TASK
    from .registry import REGISTRY
    from .seeded import SeededExperiment

    reused = []
    for path in paths:
        where = f"--reuse {path}"
        try:
            report = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ValueError(f"{where}: no such file") from None
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ValueError(f"{where}: not a JSON experiment report ({e})") from None
        try:
            name, task, quick = report["experiment"], report["task"], report["quick"]
            steps, seeds = report["train"]["steps"], tuple(report["seeds"])
            runs = report["runs"]
        except (KeyError, TypeError):
            raise ValueError(f"{where}: not an `eatt experiment` report (results.json)") from None
        experiment = REGISTRY.get(name)
        if not isinstance(experiment, SeededExperiment):
            raise ValueError(
                f"{where}: a report of {name!r}, not of an experiment of independent runs "
                "(variants x seeds): its runs cannot be reused"
            )
        token = TASK.set(task)
        try:
            plan = experiment.configured_plan(bool(quick), steps, seeds)
        finally:
            TASK.reset(token)
        recorded = {
            "model": plan.variants[0].model.to_dict(),
            "train": {k: v for k, v in plan.train.to_dict().items() if k != "data"},
            "data": dict(plan.data.__dict__),
            "beam": plan.beam,
            "alpha": plan.alpha,
        }
        for field, value in recorded.items():
            if _canonical(value) != _canonical(report.get(field)):
                raise ValueError(
                    f"{where}: its {field} is not what {name} plans now: the code has changed "
                    "since it was written, so its runs cannot be reused"
                )
        variants = {v.label: v for v in plan.variants}
        for run in runs:
            variant = variants.get(run.get("label")) if isinstance(run, dict) else None
            if variant is None or "seed" not in run:
                raise ValueError(f"{where}: a run of no variant {name} plans: {str(run)[:80]}")
            key = run_key(variant.model, plan.train, plan.data, plan.beam, plan.alpha, run["seed"])
            reused.append(ReusedRun(key, run, str(path)))
    return tuple(reused)


def find_reused(variant, seed: int, plan) -> dict | None:
    """The row of a reused run equal to (variant, seed) under ``plan`` (None: train it)."""
    key = run_key(variant.model, plan.train, plan.data, plan.beam, plan.alpha, seed)
    for reused in REUSED.get():
        if reused.key == key:
            # a run the report itself took from another keeps the file it was measured in
            source = reused.run.get("reused_from") or reused.source
            return {**reused.run, "label": variant.label, "reused_from": source}
    return None
