"""``flexible-unit``: what moving Flexible Attention to the window unit's arithmetic costs in
BLEU and window, one choice at a time (issue 21; docs/window.md, "Models on the unit").

The float model follows Shu & Nakayama (2017): the focus ``p_{t-1} = sum_s a(s) s`` (Eq. 4) and
the strength ``g(t)`` (Eq. 8) are real; the penalty ``g (s - p_{t-1})^2 / (2 sigma^2)`` and the
test-time window ``|s - p_{t-1}| < sigma sqrt(2 tau / g)`` use them as they are. The window unit
takes an integer p (its own focus F of the step before) and g as a level ``l / g_levels``. Each
row trains one Flexible model on the bundled task with the settings of ``window`` (dot scores, the
unit's):

    paper                        real focus, real g(t)
    integer focus                window_p_round: the focus rounded to a source position
    integer focus, g levels      window_g_round as well: the unit's form, in float

then quant-flexible (the unit in every eval step, QAT from scratch, weights <8, 7>) with the
evaluation's hardware check. Each model at tau = infinity and at the tau picked on dev (the
smallest dev window within 0.5 BLEU of tau = infinity, as ``window``). The integer window itself
costs nothing once p is an integer: ``|s - p| < r`` is ``|s - p| <= ceil(r) - 1``.
"""

from __future__ import annotations

from pathlib import Path

from ..data import synthetic_task
from .base import _markdown_table, _num
from .staged import StagedExperiment, _eval, _row, _train_and_eval, _window_report, _window_sizes
from .window import _pick_tau
from .window_unit import QUANT_WEIGHT_FRAC, _unit_check

#: (label, window_p_round, window_g_round) of the float forms
FORMS = (
    ("paper", False, False),
    ("integer focus", True, False),
    ("integer focus, g levels", True, True),
)
#: the score of every row: the unit's dot (Q . K, two projections)
SCORE = "dot"


class FlexibleUnit(StagedExperiment):
    name = "flexible-unit"

    def stages(self, quick: bool, folder: Path, quiet: bool) -> dict:
        data_cfg, model, train_cfg, beam = _window_sizes(quick)
        data = synthetic_task(data_cfg)
        forms = (FORMS[0], FORMS[2]) if quick else FORMS
        runs = [
            (f"flexible {SCORE}, {form}", form, model.replace(
                cross="flexible", window_score=SCORE, window_p_round=p, window_g_round=g
            ), False)
            for form, p, g in forms
        ]  # fmt: skip
        runs.append((
            f"quant-flexible {SCORE}, the unit", "unit", model.replace(
                cross="quant-flexible", window_score=SCORE, quant_weight_frac=QUANT_WEIGHT_FRAC
            ), True,
        ))  # fmt: skip
        rows = []
        for label, form, cfg, hardware in runs:
            summary, result = _train_and_eval(
                label, cfg, train_cfg, data, folder, beam, quiet, hardware=hardware
            )
            rows.append(_row(label, result, form=form, setting="inf", tau=None))
            tau, _ = _pick_tau(summary["checkpoint"], data, beam)
            picked = _eval(
                summary["checkpoint"], data, "test", beam,
                model_overrides={"flexible_tau": tau}, hardware=hardware,
            )  # fmt: skip
            rows.append(_row(f"{label}, tau on dev", picked, form=form, setting="dev", tau=tau))
        return _window_report(beam, rows, data_cfg, model, train_cfg)

    def table_lines(self, report: dict) -> list[str]:
        quick = " (quick)" if report["quick"] else ""
        rows = report["rows"]
        # the paper form's BLEU at the same tau setting (inf, or its own tau on dev)
        base = {r["setting"]: r["bleu"] for r in rows if r["form"] == "paper"}
        return [
            f"{report['experiment']}{quick}: Flexible in the window unit's forms ({SCORE} "
            f"scores), test BLEU, beam {report['beam']}; cost = the paper form's BLEU - this "
            "row's at the same setting (tau = inf, or each model's tau picked on dev; negative: "
            "this row scores higher; one seed each)",
            "",
            *_markdown_table(
                ["model", "tau", "vision span", "BLEU", "cost", "unit check"],
                [
                    [
                        r["label"],
                        "inf" if r["tau"] is None else f"{r['tau']:g}",
                        _num(r["vision_span"]),
                        _num(r["bleu"]),
                        _num(base[r["setting"]] - r["bleu"]),
                        _unit_check(r.get("hardware")),
                    ]
                    for r in rows
                ],
            ),
        ]

    def figure(self, report: dict, plt):
        fig, ax = plt.subplots(figsize=(6, 3.8))
        for setting, marker in (("inf", "o"), ("dev", "s")):
            rows = [r for r in report["rows"] if r["setting"] == setting]
            ax.scatter(
                [r["vision_span"] for r in rows],
                [r["bleu"] for r in rows],
                marker=marker,
                label="tau = inf" if setting == "inf" else "tau on dev",
            )
            for r in rows:
                ax.annotate(r["form"], (r["vision_span"], r["bleu"]), fontsize=7)
        ax.set_xlabel("vision span (positions scored per step)")
        ax.set_ylabel("test BLEU")
        ax.legend()
        fig.suptitle(self.name)
        fig.tight_layout()
        return fig


EXPERIMENT = FlexibleUnit()
