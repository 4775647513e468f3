"""``window-eatt``: every windowed kind with E-ATT scores (binarized inputs, -L1) vs dot scores:
BLEU and vision span; then the same kinds on the window unit (``quant-*``, QAT from scratch,
weights <8, 7>) with each score: BLEU with the unit's arithmetic in every step, the exported
unit's check, and the rows the unit reads per step (its cycles)."""

from __future__ import annotations

from pathlib import Path

from ..data import synthetic_task
from .staged import (
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


class WindowEatt(StagedExperiment):
    name = "window-eatt"

    def stages(self, quick: bool, folder: Path, quiet: bool) -> dict:
        data_cfg, model, train_cfg, beam = _window_sizes(quick)
        data = synthetic_task(data_cfg)
        kinds = ("local-p", "flexible") if quick else ("global", "local-m", "local-p", "flexible")
        rows = []
        for unit in (False, True):
            for kind in kinds:
                for score in ("dot", "eatt"):
                    rows += self._rows(
                        unit, kind, score, model, train_cfg, data, folder, beam, quiet
                    )
        return _window_report(beam, rows, data_cfg, model, train_cfg)

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
