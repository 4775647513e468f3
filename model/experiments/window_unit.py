"""``window-unit``: what moving local-p to the window unit's arithmetic costs in BLEU, one
choice at a time (issue 21; docs/window.md, "Models on the unit").

The float model follows Luong et al. (2015): the Gaussian ``exp(-(s - p_t)^2 / (2 sigma^2))``
multiplies the softmax output (Eq. 10, unnormalized) at the real ``p_t``. The window unit adds the
position term inside the softmax (Flexible Attention's Eq. 7 form) at an integer centre. Each row
trains one local-p model on the bundled task with the same settings as ``window-eatt``:

    luong            gaussian after, real p_t         (the float model as the papers have it)
    inside           gaussian inside, real p_t        (the unit's placement)
    inside, integer  gaussian inside, p = round(p_t)  (the unit's form: window_p_round)

for the E-ATT and the dot score (quick: E-ATT only, luong and the unit's form). Then the
quantized kind (quant-local-p: the unit itself in every eval step) trained with the same settings
(QAT from scratch, weights <8, 7>), its test BLEU decoded with the unit's golden model in the loop
and the evaluation's hardware check (hypotheses that differ when decoded as the exported unit
runs: 0 expected; and with the training surrogate).
"""

from __future__ import annotations

from pathlib import Path

from ..data import synthetic_task
from .base import _markdown_table, _num
from .staged import StagedExperiment, _row, _train_and_eval, _window_report, _window_sizes

#: quant-local-p's weights: <8, 7> (|w| < 1; trained from scratch, nothing to calibrate on)
QUANT_WEIGHT_FRAC = 7
#: (label, window_gaussian, window_p_round) of the float forms
FORMS = (
    ("luong", "after", False),
    ("inside", "inside", False),
    ("inside, integer p", "inside", True),
)


def _unit_check(hardware: dict | None) -> str:
    """A quantized row's hardware check: hypotheses that differ as the exported unit runs,
    and the surrogate's BLEU; '-' for a float row."""
    if not hardware:
        return "-"
    exported, surrogate = hardware["exported"], hardware["surrogate"]
    return (
        f"{exported['hypotheses_differ']} differ as exported; surrogate BLEU "
        f"{_num(surrogate['bleu'])}"
    )


class WindowUnit(StagedExperiment):
    name = "window-unit"

    def stages(self, quick: bool, folder: Path, quiet: bool) -> dict:
        data_cfg, model, train_cfg, beam = _window_sizes(quick)
        data = synthetic_task(data_cfg)
        scores = ("eatt",) if quick else ("eatt", "dot")
        forms = (FORMS[0], FORMS[2]) if quick else FORMS
        rows = []
        for score in scores:
            for form, gaussian, round_p in forms:
                label = f"local-p {score}, {form}"
                cfg = model.replace(
                    cross="local-p",
                    window_score=score,
                    window_gaussian=gaussian,
                    window_p_round=round_p,
                )
                _, result = _train_and_eval(label, cfg, train_cfg, data, folder, beam, quiet)
                rows.append(
                    _row(label, result, score=score, form=form, gaussian=gaussian, round_p=round_p)
                )
            label = f"quant-local-p {score}, the unit"
            cfg = model.replace(
                cross="quant-local-p", window_score=score, quant_weight_frac=QUANT_WEIGHT_FRAC
            )
            _, result = _train_and_eval(
                label, cfg, train_cfg, data, folder, beam, quiet, hardware=True
            )
            rows.append(
                _row(label, result, score=score, form="unit", gaussian="inside", round_p=True)
            )
        return _window_report(beam, rows, data_cfg, model, train_cfg)

    def table_lines(self, report: dict) -> list[str]:
        quick = " (quick)" if report["quick"] else ""
        base = {r["score"]: r["bleu"] for r in report["rows"] if r["form"] == "luong"}
        return [
            f"{report['experiment']}{quick}: local-p in the window unit's forms, test BLEU, "
            f"beam {report['beam']}, D = {report['window_d']}; cost = luong's BLEU - this "
            "row's (negative: this row scores higher; one seed each)",
            "",
            *_markdown_table(
                ["model", "gaussian", "p", "vision span", "BLEU", "cost", "unit check"],
                [
                    [
                        r["label"],
                        r["gaussian"],
                        "integer" if r["round_p"] else "real",
                        _num(r["vision_span"]),
                        _num(r["bleu"]),
                        _num(base[r["score"]] - r["bleu"]),
                        _unit_check(r.get("hardware")),
                    ]
                    for r in report["rows"]
                ],
            ),
        ]

    def figure(self, report: dict, plt):
        fig, ax = plt.subplots(figsize=(6, 3.8))
        rows = report["rows"]
        ax.barh([r["label"] for r in rows], [r["bleu"] for r in rows])
        ax.set_xlabel("test BLEU")
        ax.invert_yaxis()
        fig.suptitle(self.name)
        fig.tight_layout()
        return fig


EXPERIMENT = WindowUnit()
