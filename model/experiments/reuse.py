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
the table says which runs were reused. Reading the reports (which plans them again from the
registry) is reused_reports.py; this module is what the run loop (seeded.py) needs.
"""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass

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


def find_reused(variant, seed: int, plan) -> dict | None:
    """The row of a reused run equal to (variant, seed) under ``plan`` (None: train it)."""
    key = run_key(variant.model, plan.train, plan.data, plan.beam, plan.alpha, seed)
    for reused in REUSED.get():
        if reused.key == key:
            # a run the report itself took from another keeps the file it was measured in
            source = reused.run.get("reused_from") or reused.source
            return {**reused.run, "label": variant.label, "reused_from": source}
    return None
