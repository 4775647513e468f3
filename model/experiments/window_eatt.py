"""``window-eatt``: every windowed kind with E-ATT scores (binarized inputs, -L1) vs dot scores:
BLEU and vision span; then the same kinds on the window unit (``quant-*``, QAT from scratch,
weights <8, 7>) with each score: BLEU with the unit's arithmetic in every step, the exported
unit's check, and the rows the unit reads per step (its cycles)."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from eatt.jobs import Job, run_jobs

from ..data import synthetic_task
from .base import _log
from .seeded import RUN_MEMORY_GB
from .staged import (
    RESUME,
    StagedExperiment,
    _eval,
    _row,
    _train_and_eval,
    _window_report,
    _window_sizes,
)
from .window import _span_figure, _span_table, _unit_note
from .window_unit import QUANT_WEIGHT_FRAC

#: tau of the Flexible rows' windowed evaluation
FLEXIBLE_TAU = 1.0
#: the windowed kinds, each with dot and E-ATT scores, in float and on the unit
KINDS = ("global", "local-m", "local-p", "flexible")
#: the quick version's
QUICK_KINDS = ("local-p", "flexible")


def _model_job(unit, kind, score, model, train_cfg, data_cfg, folder, beam, resume) -> list:
    """One model's rows as a Ray task: one torch thread, the task's data regenerated (the same
    sentences: synthetic_task is deterministic), no progress bars, the driver's ``--resume``."""
    torch.set_num_threads(1)
    data = synthetic_task(data_cfg)
    RESUME.set(resume)
    return WindowEatt._rows(unit, kind, score, model, train_cfg, data, folder, beam, True)


class WindowEatt(StagedExperiment):
    """Its models are independent (no stage starts from another's), so ``workers`` > 1 trains
    that many at once as Ray tasks (eatt.jobs), with the rows in the serial run's order."""

    name = "window-eatt"

    def run(self, quick, folder, quiet, workers, steps, seeds) -> dict:
        data_cfg, model, train_cfg, beam = _window_sizes(quick)
        kinds = QUICK_KINDS if quick else KINDS
        models = [
            (unit, kind, score)
            for unit in (False, True)
            for kind in kinds
            for score in ("dot", "eatt")
        ]
        if workers == 1:
            data = synthetic_task(data_cfg)
            rows = [
                row
                for unit, kind, score in models
                for row in self._rows(
                    unit, kind, score, model, train_cfg, data, folder, beam, quiet
                )
            ]
            return _window_report(beam, rows, data_cfg, model, train_cfg)
        done: list[list[dict] | None] = [None] * len(models)
        start = time.perf_counter()

        def on_done(index: int, result, error: BaseException | None) -> bool:
            if error is not None:  # a failed model ends the experiment, as a serial run would
                raise error
            done[index] = result
            unit, kind, score = models[index]
            what = f"quant-{kind} {score} (the unit)" if unit else f"{kind} {score}"
            _log(
                f"[{folder.name}] model {index + 1}/{len(models)} done: {what}: BLEU "
                f"{result[0]['bleu']:.2f} ({time.perf_counter() - start:.0f} s)",
                quiet,
            )
            return False

        jobs = [
            Job(
                (*m, model, train_cfg, data_cfg, folder, beam, RESUME.get()),
                cpus=1,
                memory_gb=RUN_MEMORY_GB,
            )
            for m in models
        ]
        run_jobs(_model_job, jobs, on_done, max_parallel=workers, what=f"[{self.name}] models")
        rows = [row for result in done for row in result]
        return _window_report(beam, rows, data_cfg, model, train_cfg)

    def stages(self, quick: bool, folder: Path, quiet: bool) -> dict:
        return self.run(quick, folder, quiet, 1, None, None)

    @staticmethod
    def _rows(unit, kind, score, model, train_cfg, data, folder, beam, quiet) -> list[dict]:
        """One model's rows: the float kind or the unit's (``quant-`` kind, ``window`` =
        "unit", checked as exported); Flexible also at tau = :data:`FLEXIBLE_TAU`."""
        if unit:
            label, extra = f"quant-{kind} {score} (the unit)", {"window": "unit"}
            cfg = model.replace(
                cross=f"quant-{kind}", window_score=score, quant_weight_frac=QUANT_WEIGHT_FRAC
            )
        else:
            label, extra = f"{kind} {score}", {}
            cfg = model.replace(cross=kind, window_score=score)
        summary, result = _train_and_eval(
            label, cfg, train_cfg, data, folder, beam, quiet, hardware=unit
        )
        rows = [_row(label, result, kind=kind, score=score, tau=None, **extra)]
        if kind == "flexible":
            windowed = _eval(
                summary["checkpoint"], data, "test", beam,
                model_overrides={"flexible_tau": FLEXIBLE_TAU}, hardware=unit,
            )  # fmt: skip
            rows.append(
                _row(f"{label}, tau = {FLEXIBLE_TAU:g}", windowed, kind=kind, score=score,
                     tau=FLEXIBLE_TAU, **extra)
            )  # fmt: skip
        return rows

    def table_lines(self, report: dict) -> list[str]:
        return [*_span_table(report), *_unit_note(report)]

    def figure(self, report: dict, plt):
        fig, _ = _span_figure(report, plt, panels=1)
        fig.suptitle(self.name)
        return fig


EXPERIMENT = WindowEatt()
