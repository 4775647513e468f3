"""``eatt-vs-vanilla``: BLEU of vanilla vs E-ATT attention in every role, mean and spread over
3 seeds, with the analytic attention energy (the paper's Table 4)."""

from __future__ import annotations

from .base import _sizes
from .seeded import Plan, SeededExperiment, Variant


class EattVsVanilla(SeededExperiment):
    name = "eatt-vs-vanilla"
    tasks = ("synthetic", "ding")

    def plan(self, quick: bool) -> Plan:
        data, model, train_cfg = _sizes(quick)
        variants = [
            Variant("vanilla", model.replace(attention="vanilla")),
            Variant("eatt", model.replace(attention="eatt")),
        ]
        return Plan(variants, (1, 2, 3), train_cfg.replace(data=data), data)


EXPERIMENT = EattVsVanilla()
