"""Reading the reports ``eatt experiment --reuse REPORT.json`` names (reuse.py has the rules):
each report's experiment is planned again from the registry with the code as it is, and its
runs become :class:`~.reuse.ReusedRun` keyed by what decides them. A report of an experiment of
independent units (units.py: ``window`` and its variants; its ``partial.json`` too) gives its
units, keyed by the settings each one recorded."""

from __future__ import annotations

import json
from pathlib import Path

from .base import TASK
from .registry import REGISTRY
from .reuse import ReusedRun, _canonical, run_key
from .seeded import SeededExperiment
from .units import UnitExperiment, unit_key


def load_reused(paths, into=None) -> tuple[ReusedRun, ...]:
    """The runs of the reports at ``paths`` (the units of a units experiment's reports when
    ``into``, the experiment taking them, is one); a file that is not a report of such an
    experiment, planned as it is now, raises ValueError naming it."""
    reused = []
    for path in paths:
        where = f"--reuse {path}"
        try:
            report = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ValueError(f"{where}: no such file") from None
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ValueError(f"{where}: not a JSON experiment report ({e})") from None
        if isinstance(into, UnitExperiment):
            reused += _units(report, where, str(path))
            continue
        of = report.get("experiment") if isinstance(report, dict) else None
        if isinstance(REGISTRY.get(of), UnitExperiment):
            raise ValueError(f"{where}: a report of {of!r}, whose units only {_unit_names()} take")
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


def _units(report, where: str, source: str) -> list[ReusedRun]:
    """The units of a report (or partial.json) of an experiment of independent units."""
    name = report.get("experiment") if isinstance(report, dict) else None
    if not isinstance(REGISTRY.get(name), UnitExperiment):
        raise ValueError(
            f"{where}: not a report of an experiment of independent units "
            f"({_unit_names()}: results.json or partial.json)"
        )
    units = report.get("units")
    if not isinstance(units, list) or not all(
        isinstance(u, dict) and isinstance(u.get("settings"), dict) and "rows" in u for u in units
    ):
        raise ValueError(f"{where}: a report of {name} written before its units were recorded")
    return [ReusedRun(unit_key(u["settings"]), u, source) for u in units]


def _unit_names() -> str:
    """The experiments of independent units, by name."""
    return ", ".join(n for n, e in REGISTRY.items() if isinstance(e, UnitExperiment))
