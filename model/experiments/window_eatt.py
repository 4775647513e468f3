"""``window-eatt``: every windowed kind with E-ATT scores (binarized inputs, -L1) vs dot scores:
BLEU and vision span."""

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
from .window import _span_figure, _span_table


class WindowEatt(StagedExperiment):
    name = "window-eatt"

    def stages(self, quick: bool, folder: Path, quiet: bool) -> dict:
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
                        summary["checkpoint"],
                        data,
                        "test",
                        beam,
                        model_overrides={"flexible_tau": 1.0},
                    )
                    rows.append(
                        _row(f"{label}, tau = 1", windowed, kind=kind, score=score, tau=1.0)
                    )
        return _window_report(beam, rows, data_cfg, model, train_cfg)

    def table_lines(self, report: dict) -> list[str]:
        return _span_table(report)

    def figure(self, report: dict, plt):
        fig, _ = _span_figure(report, plt, panels=1)
        fig.suptitle(self.name)
        return fig


EXPERIMENT = WindowEatt()
