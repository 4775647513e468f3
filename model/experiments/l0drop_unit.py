"""``l0drop-unit``: L0Drop on the window unit, on the task's redundant variant.

The unit decodes on Algorithm 1's compacted memory: kind quant-global (the unit over the whole
memory; dot scores, weights <8, 7>) with L0Drop hands it the kept rows and one zero row counting
the pruned ones, so a step reads the kept rows + 1, one row a cycle (docs/window.md). Every row
here is trained from scratch as ``l0drop-scratch`` trains (twice the baseline's steps, lambda
ramped over the first 3/8; sampled gates to the end: fixing them for the last quarter did not
pay there), and decoded
with the unit's integer arithmetic in every step (``evaluate --hardware``: the exported unit's
check). Per row: BLEU, sparsity, the unit's rows per step (= its cycles per step) and their
ratio to the unpruned unit's; the Group rule (every other position) is the fixed 50% reference.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..data import synthetic_task
from .base import _markdown_table, _num
from .l0drop import sparsest_within
from .staged import StagedExperiment, _row, _train_and_eval, _window_sizes
from .window_unit import QUANT_WEIGHT_FRAC

#: the L0Drop lambdas on the unit: trained from scratch the gates are bistable in lambda on
#: this task (l0drop-scratch: 0.13 prunes nothing, 0.17 45%, 0.2 two thirds)
UNIT_LAMBDAS = (0.17, 0.2)
_QUICK_UNIT_LAMBDAS = (0.5,)


class L0DropUnit(StagedExperiment):
    name = "l0drop-unit"

    def stages(self, quick: bool, folder: Path, quiet: bool) -> dict:
        data_cfg, model, train_cfg, beam = _window_sizes(quick)
        data_cfg = dataclasses.replace(data_cfg, redundant=True)
        steps = 2 * train_cfg.steps
        train_cfg = train_cfg.replace(data=data_cfg, steps=steps)
        ramp = max(1, 3 * steps // 8)
        data = synthetic_task(data_cfg)
        unit = model.replace(
            cross="quant-global", window_score="dot", quant_weight_frac=QUANT_WEIGHT_FRAC
        )
        variants = [("no pruning", {}, None)]
        for lam in _QUICK_UNIT_LAMBDAS if quick else UNIT_LAMBDAS:
            keys = {"l0drop": True, "l0drop_lambda": lam, "l0drop_ramp": ramp}
            variants.append((f"L0Drop lambda {lam}", keys, lam))
        variants.append(("rule group", {"l0drop": True, "l0drop_rule": "group"}, None))
        rows = []
        for label, keys, lam in variants:
            _, result = _train_and_eval(
                label, unit.replace(**keys), train_cfg, data, folder, beam, quiet, hardware=True
            )
            result = {**result, "sparsity_rate": result.get("sparsity_rate") or 0.0}
            rows.append(_row(label, result, l0_lambda=lam, rule=keys.get("l0drop_rule")))
        base = rows[0]
        for r in rows:
            r["cycles_ratio"] = r["vision_span"] / base["vision_span"]
        learned = [r for r in rows if r["l0_lambda"] is not None]
        best, fields = sparsest_within(learned, base["bleu"])
        target = {
            "what": "L0Drop on the unit prunes >= 40% of source words within 0.5 BLEU of the "
            "unpruned unit (trained as long), cycles per step falling with the kept rows",
            **fields,
            "cycles_ratio": None if best is None else best["cycles_ratio"],
            "met": best is not None and best["sparsity_rate"] >= 0.4,
        }
        return {
            "beam": beam,
            "rows": rows,
            "target": target,
            "steps": steps,
            "data": dataclasses.asdict(data_cfg),
            "model": unit.to_dict(),
            "train": {k: v for k, v in train_cfg.to_dict().items() if k != "data"},
        }

    def table_lines(self, report: dict) -> list[str]:
        quick = " (quick)" if report["quick"] else ""
        return [
            f"{self.name}{quick}: quant-global (the window unit over the whole memory, dot) on "
            f"the redundant task, {report['steps']} steps from scratch each (L0Drop: lambda "
            "ramped over the first 3/8), beam "
            f"{report['beam']}; BLEU with the unit's arithmetic in every step; rows per step = "
            "the unit's cycles per step (one row a cycle; with L0Drop the kept rows + 1)",
            "",
            *_markdown_table(
                ["model", "sparsity %", "BLEU", "rows (cycles) per step", "vs unpruned", "check"],
                [
                    [
                        r["label"],
                        _num(100 * r["sparsity_rate"], ".1f"),
                        _num(r["bleu"]),
                        _num(r["vision_span"]),
                        f"{r['cycles_ratio']:.2f}x",
                        f"{r['hardware']['exported']['hypotheses_differ']} differ as exported",
                    ]
                    for r in report["rows"]
                ],
            ),
        ]

    def figure(self, report: dict, plt):
        """BLEU and the unit's cycles per step against sparsity."""
        rows = report["rows"]
        fig, (ax, ax_c) = plt.subplots(1, 2, figsize=(9, 3.6))
        for r in rows:
            x = 100 * r["sparsity_rate"]
            ax.scatter([x], [r["bleu"]], label=r["label"])
            ax_c.scatter([x], [r["vision_span"]], label=r["label"])
        ax.set_xlabel("sparsity rate (%)")
        ax.set_ylabel("test BLEU (the unit's arithmetic)")
        ax_c.set_xlabel("sparsity rate (%)")
        ax_c.set_ylabel("unit rows (cycles) per step")
        ax.legend(fontsize=7)
        fig.suptitle(self.name)
        return fig


EXPERIMENT = L0DropUnit()
