"""``window``: Luong global, local-m, local-p and Flexible Attention as the Transformer's
cross-attention: average vision span (window size) and BLEU for Flexible at tau = infinity, at
the tau picked on dev (smallest window within 0.5 dev BLEU of tau = infinity), and after
fine-tuning with ``-beta mean g(t)`` (Shu & Nakayama 2017, Table 1), plus the window-vs-BLEU
curve of the fine-tuned model over tau in :data:`TAUS` (their Fig. 3); one trained model per
curve, tau changes only decoding.

The vision-span table and scatter are shared with ``window-eatt``. ``window-lstm`` runs the
same stages in the Flexible paper's own setting: an LSTM encoder-decoder (``arch: lstm``,
docs/rnn.md) with concat scores.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..data import synthetic_task
from ..train import train
from .base import BLEU_TOLERANCE, _log, _markdown_table, _num
from .staged import (
    WINDOW_D,
    StagedExperiment,
    _eval,
    _fine_tune,
    _row,
    _train_and_eval,
    _window_sizes,
)
from .window_unit import QUANT_WEIGHT_FRAC

#: the Flexible paper's thresholds for its window-vs-BLEU curve (Fig. 3, footnote 5)
TAUS = (0.3, 0.5, 0.8, 1.0, 1.2, 1.4, 1.6, 5.0, 8.0, 999.0)
#: Flexible's fine-tuning weight beta (Eq. 9; the paper picks 0.1)
FLEXIBLE_BETA = 0.1
#: the window unit's kinds beside the float ones (``window``): dot scores (the unit's Q . K,
#: two projections, as general), weights <8, 7>, trained from scratch with the unit in eval;
#: quant-flexible also at the tau picked on dev, as Flexible
QUANT_KINDS = ("quant-global", "quant-local-m", "quant-local-p", "quant-flexible")
#: the unit's kinds the quick version runs
QUICK_QUANT_KINDS = ("quant-local-p", "quant-flexible")


def _pick_tau(checkpoint: str, data, beam: int) -> tuple[float | None, list[dict]]:
    """The tau with the smallest dev vision span within 0.5 dev BLEU of tau = infinity."""
    base = _eval(checkpoint, data, "dev", beam, model_overrides={"flexible_tau": None})
    curve = [
        {"tau": tau, **_eval(checkpoint, data, "dev", beam, model_overrides={"flexible_tau": tau})}
        for tau in TAUS
    ]
    fine = [c for c in curve if c["bleu"] >= base["bleu"] - BLEU_TOLERANCE]
    if not fine:
        return None, curve
    return min(fine, key=lambda c: (c["vision_span"], -c["bleu"]))["tau"], curve


def _span_table(report: dict) -> list[str]:
    """The header line and the table of test BLEU and vision span per row."""
    quick = " (quick)" if report["quick"] else ""
    return [
        f"{report['experiment']}{quick}: test BLEU and average vision span (source positions "
        f"scored per decoding step, over steps and beam hypotheses), beam {report['beam']}, "
        f"D = {report['window_d']}",
        "",
        *_markdown_table(
            ["model", "tau", "vision span", "BLEU"],
            [
                [r["label"], _num(r.get("tau"), "g"), _num(r["vision_span"]), _num(r["bleu"])]
                for r in report["rows"]
            ],
        ),
    ]


def _unit_note(report: dict) -> list[str]:
    """The note under a span table with the window unit's rows (none without): BLEU is the
    unit's arithmetic, the exported unit's check, the vision span is the unit's cycles."""
    units = [r for r in report["rows"] if r.get("window") == "unit"]
    if not units:
        return []
    checks = ", ".join(
        f"{re.sub(r' [(]the unit[^)]*[)]', '', r['label'])} "
        f"{r['hardware']['exported']['hypotheses_differ']}"
        for r in units
    )
    return [
        "",
        f"The unit's rows: BLEU with the window unit's integer arithmetic in every step ({checks} "
        "test hypotheses differ as the exported unit runs); their vision span is the rows the "
        "unit reads per step, its cycles per step (one row a cycle).",
    ]


def _span_figure(report: dict, plt, panels: int):
    """A figure of ``panels`` axes, the first the BLEU-vs-vision-span scatter of the rows."""
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels + 2, 3.8))
    axes = list(axes) if panels > 1 else [axes]
    ax = axes[0]
    for r in report["rows"]:
        ax.scatter([r["vision_span"]], [r["bleu"]], label=r["label"])
    ax.set_xlabel("average vision span (positions per step)")
    ax.set_ylabel("test BLEU")
    ax.legend(fontsize=6)
    return fig, axes


class Window(StagedExperiment):
    def __init__(
        self, name: str = "window", quant: bool = True, train: dict | None = None, **model
    ) -> None:
        #: the experiment's name, whether the unit's kinds run too, the training keys it sets
        #: (window-lstm: peak_lr) and the model keys (window-lstm: arch, score)
        self.name, self.quant, self.model = name, quant, model
        self.train = dict(train or {})

    def stages(self, quick: bool, folder: Path, quiet: bool) -> dict:
        data_cfg, model, train_cfg, beam = _window_sizes(quick)
        model = model.replace(**self.model)
        train_cfg = train_cfg.replace(**self.train)
        data = synthetic_task(data_cfg)
        rows, runs = [], {}
        for kind in ("global", "local-m", "local-p"):
            summary, result = _train_and_eval(
                kind, model.replace(cross=kind), train_cfg, data, folder, beam, quiet
            )
            runs[kind] = summary["checkpoint"]
            window = f"{2 * WINDOW_D + 1}" if kind != "global" else "all"
            rows.append(_row(kind, result, window=window, tau=None))
        flex_cfg = model.replace(cross="flexible")
        summary, result = _train_and_eval(
            "flexible", flex_cfg, train_cfg, data, folder, beam, quiet
        )
        flex = summary["checkpoint"]
        rows.append(_row("flexible, tau = inf", result, window="dynamic", tau=None))
        tau, _ = _pick_tau(flex, data, beam)
        picked = _eval(flex, data, "test", beam, model_overrides={"flexible_tau": tau})
        rows.append(_row("flexible, tau on dev", picked, window="dynamic", tau=tau))
        # fine-tuning with -beta mean g(t) (Eq. 9), from the trained Flexible model
        fine_cfg = _fine_tune(train_cfg, 3, flex)
        fine_steps = fine_cfg.steps
        _log(f"[{folder.name}] flexible fine-tuning, beta = {FLEXIBLE_BETA}", quiet)
        tuned = train(
            flex_cfg.replace(flexible_beta=FLEXIBLE_BETA),
            fine_cfg.replace(progress=fine_cfg.progress and not quiet),
            folder / "runs" / "flexible-finetuned",
            data=data,
        )["checkpoint"]
        base_ft = _eval(tuned, data, "test", beam, model_overrides={"flexible_tau": None})
        rows.append(
            _row(
                f"flexible fine-tuned (beta {FLEXIBLE_BETA}), tau = inf",
                base_ft,
                window="dynamic",
                tau=None,
            )
        )
        tau_ft, _ = _pick_tau(tuned, data, beam)
        picked_ft = _eval(tuned, data, "test", beam, model_overrides={"flexible_tau": tau_ft})
        rows.append(
            _row(
                f"flexible fine-tuned (beta {FLEXIBLE_BETA}), tau on dev",
                picked_ft,
                window="dynamic",
                tau=tau_ft,
            )
        )
        curve = [
            {"tau": t, **_eval(tuned, data, "test", beam, model_overrides={"flexible_tau": t})}
            for t in TAUS
        ]
        # the same (fine-tuned) model at tau = infinity and at the tau picked on dev
        reference, best = rows[-2], rows[-1]
        reduction = 1.0 - best["vision_span"] / reference["vision_span"]
        drop = reference["bleu"] - best["bleu"]
        # the window unit's kinds: BLEU with the unit's arithmetic; their vision span is the rows
        # the unit reads per step, its cycles per step (one row a cycle, docs/window.md)
        for kind in (QUICK_QUANT_KINDS if quick else QUANT_KINDS) if self.quant else ():
            label = f"{kind} (the unit, dot)"
            cfg = model.replace(cross=kind, window_score="dot", quant_weight_frac=QUANT_WEIGHT_FRAC)
            summary, result = _train_and_eval(
                label, cfg, train_cfg, data, folder, beam, quiet, hardware=True
            )
            runs[kind] = summary["checkpoint"]
            if kind != "quant-flexible":
                rows.append(_row(label, result, window="unit", tau=None))
                continue
            # the unit's Flexible: tau = inf (w = D), then the tau picked on dev (w from g(t))
            rows.append(_row(f"{label}, tau = inf", result, window="unit", tau=None))
            tau_q, _ = _pick_tau(runs[kind], data, beam)
            unit_tau = _eval(
                runs[kind], data, "test", beam, model_overrides={"flexible_tau": tau_q},
                hardware=True,
            )  # fmt: skip
            rows.append(_row(f"{label}, tau on dev", unit_tau, window="unit", tau=tau_q))
        target = {
            "what": "Flexible cuts the average window by >= 50% within 0.5 BLEU of tau = infinity",
            "window_reduction": reduction,
            "bleu_drop": drop,
            "met": reduction >= 0.5 and drop <= BLEU_TOLERANCE,
        }
        return {
            "beam": beam,
            "window_d": WINDOW_D,
            "flexible_beta": FLEXIBLE_BETA,
            "fine_tune_steps": fine_steps,
            "rows": rows,
            "curve": curve,
            "target": target,
            "checkpoints": {**runs, "flexible": flex, "flexible-finetuned": tuned},
            "data": data_cfg.__dict__.copy(),
            "model": model.to_dict(),
            "train": {k: v for k, v in train_cfg.to_dict().items() if k != "data"},
        }

    def table_lines(self, report: dict) -> list[str]:
        return [
            *_span_table(report),
            *_unit_note(report),
            "",
            "Window vs BLEU of the fine-tuned Flexible model over tau (Fig. 3 analog):",
            "",
            *_markdown_table(
                ["tau", "vision span", "BLEU"],
                [
                    [f"{c['tau']:g}", f"{c['vision_span']:.2f}", f"{c['bleu']:.2f}"]
                    for c in report["curve"]
                ],
            ),
        ]

    def figure(self, report: dict, plt):
        """The rows' BLEU vs vision span, and the fine-tuned model's curve over tau."""
        fig, axes = _span_figure(report, plt, panels=2)
        c = report["curve"]
        axes[1].plot([x["vision_span"] for x in c], [x["bleu"] for x in c], marker="o")
        for x in c:
            axes[1].annotate(
                f"{x['tau']:g}",
                (x["vision_span"], x["bleu"]),
                fontsize=7,
                textcoords="offset points",
                xytext=(3, 3),
            )
        axes[1].set_xlabel("average vision span")
        axes[1].set_ylabel("test BLEU")
        axes[1].set_title("fine-tuned Flexible over tau")
        fig.suptitle(self.name)
        return fig


EXPERIMENT = Window()
#: the LSTM's peak learning rate: at the Transformer's 1e-3 it does not learn the task in 1,500
#: steps (global, concat: dev loss 3.05, BLEU 4.7); at 3e-3 dev loss 0.72, greedy BLEU 60.4
LSTM_PEAK_LR = 3e-3
#: the Flexible paper's setting: an LSTM encoder-decoder with concat scores
LSTM = Window(
    "window-lstm", quant=False, train={"peak_lr": LSTM_PEAK_LR}, arch="lstm", window_score="concat"
)
