"""Staged experiments made of independent units: ``window``'s Luong kinds, its Flexible stage per
score (the model, its fine-tunes and their tau picked on dev) and the window unit's kinds. A
unit's stages depend on each other; no unit depends on another, so

* ``--workers N`` computes up to N units at once as Ray tasks (eatt.jobs: a local instance, one
  CPU and one torch thread each; the longest units first), with the rows in the serial order;
* :data:`PARTIAL` in the experiment's folder holds the units finished so far after each one;
* ``--reuse REPORT.json`` (a ``results.json`` or that ``partial.json``) takes every unit whose
  settings (the unit's model config, the training settings, the data, beam, alpha and the
  experiment's grids) equal one recorded there, as recorded (every run is deterministic), and
  says where it came from (``reused_from``).

On a 2-core machine the Ding ``window`` experiment is about 4 hours of single-thread work; a
session that ends before it finishes leaves its finished units in :data:`PARTIAL`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from eatt.config import atomic_write_text
from eatt.jobs import Job, run_jobs

from ..corpus import load_data
from .base import TASK, _log, relative_paths
from .reuse import REUSED, _canonical
from .seeded import PARTIAL, RUN_MEMORY_GB
from .staged import RESUME, StagedExperiment


def unit_key(settings: dict) -> str:
    """What decides a unit's result, as one string (its settings as JSON reads them back)."""
    return json.dumps(_canonical(settings), sort_keys=True)


def find_unit(settings: dict) -> dict | None:
    """The recorded result of a reused unit with these settings (None: compute it)."""
    key = unit_key(settings)
    for reused in REUSED.get():
        if reused.key == key:
            source = reused.run.get("reused_from") or reused.source
            return {**reused.run, "reused_from": source}
    return None


def _unit_job(experiment, unit, sizes, folder, resume, task) -> dict:
    """One unit as a Ray task: one torch thread, the task's data loaded again (deterministic),
    no progress bars, the driver's ``--resume`` and task."""
    torch.set_num_threads(1)
    RESUME.set(resume)
    TASK.set(task)
    return experiment.compute(unit, sizes, load_data(sizes[0]), Path(folder), True)


def _name(unit: tuple) -> str:
    return " ".join(str(u) for u in unit)


class UnitExperiment(StagedExperiment):
    """A staged experiment of independent units: subclasses implement :meth:`sizes`,
    :meth:`units`, :meth:`settings`, :meth:`compute` and :meth:`assemble`."""

    #: its units can be taken from an earlier report (``--reuse``)
    reusable = True

    def sizes(self, quick: bool) -> tuple:
        """(data config, model config, training settings, beam)."""
        raise NotImplementedError

    def units(self, quick: bool) -> list[tuple]:
        """The units in report order, each a tuple of names (("flexible", "eatt"))."""
        raise NotImplementedError

    def settings(self, unit: tuple, sizes: tuple, quick: bool) -> dict:
        """What decides the unit's result (:func:`unit_key`)."""
        raise NotImplementedError

    def compute(self, unit: tuple, sizes: tuple, data, folder: Path, quiet: bool) -> dict:
        """The unit's result: {"rows": [...], "checkpoints": {...}, ...}."""
        raise NotImplementedError

    def assemble(self, quick: bool, sizes: tuple, results: list[dict]) -> dict:
        """The report body from the units' results (in :meth:`units` order)."""
        raise NotImplementedError

    def cost(self, unit: tuple) -> int:
        """A unit's relative length: ``--workers`` starts the longest first."""
        return 1

    def stages(self, quick: bool, folder: Path, quiet: bool) -> dict:
        return self.run(quick, folder, quiet, 1, None, None)

    def table(self, report: dict) -> str:
        """The table, then the units taken from earlier reports (``--reuse``), by file."""
        reused: dict[str, list[str]] = {}
        for u in report.get("units") or []:
            if u.get("reused_from"):
                reused.setdefault(u["reused_from"], []).append(_name(tuple(u["unit"])))
        lines = [f"Reused (not computed again) from {source}: {', '.join(names)}."
                 for source, names in reused.items()]  # fmt: skip
        return "\n".join([super().table(report), *([""] + lines if lines else [])])

    def run(self, quick, folder, quiet, workers, steps, seeds) -> dict:
        sizes = self.sizes(quick)
        units = self.units(quick)
        keyed = [self.settings(u, sizes, quick) for u in units]
        results: list[dict | None] = [find_unit(s) for s in keyed]
        for unit, result in zip(units, results, strict=True):
            if result is not None:
                _log(f"[{folder.name}] {_name(unit)}: reused from {result['reused_from']}", quiet)
        partial = {"experiment": self.name, "quick": quick, "task": TASK.get(), "partial": True}

        def done(index: int, result: dict) -> None:
            results[index] = {"unit": list(units[index]), "settings": keyed[index], **result}
            finished = [r for r in results if r is not None]
            saved = relative_paths({**partial, "units": finished})
            text = json.dumps(saved, indent=2, default=str) + "\n"
            atomic_write_text(folder / PARTIAL, text)

        todo = [i for i, r in enumerate(results) if r is None]
        start = time.perf_counter()
        if workers == 1:
            data = load_data(sizes[0]) if todo else None
            for i in todo:
                done(i, self.compute(units[i], sizes, data, folder, quiet))
        elif todo:
            order = sorted(todo, key=lambda i: -self.cost(units[i]))

            def on_done(task_index: int, result, error: BaseException | None) -> bool:
                if error is not None:  # a failed unit ends the experiment, as a serial run would
                    raise error
                index = order[task_index]
                done(index, result)
                _log(
                    f"[{folder.name}] unit {len(results) - results.count(None)}/{len(units)} "
                    f"done: {_name(units[index])} ({time.perf_counter() - start:.0f} s)",
                    quiet,
                )
                return False

            args = (sizes, str(folder), RESUME.get(), TASK.get())
            jobs = [Job((self, units[i], *args), cpus=1, memory_gb=RUN_MEMORY_GB) for i in order]
            run_jobs(_unit_job, jobs, on_done, max_parallel=workers, what=f"[{self.name}] units")
        body = self.assemble(quick, sizes, [dict(r) for r in results])
        return {**body, "units": results}
