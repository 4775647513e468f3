"""``ablation``: vanilla, discrete selection only (binary-dot), L1 distance only (linear-l1),
E-ATT, over 3 seeds (the paper's Table 5)."""

from __future__ import annotations

from .base import _sizes
from .seeded import Plan, SeededExperiment, Variant

#: attention kind -> the row's label
LABELS = {
    "vanilla": "vanilla",
    "binary-dot": "discrete selection only",
    "linear-l1": "L1 distance only",
    "eatt": "eatt",
}


class Ablation(SeededExperiment):
    name = "ablation"
    tasks = ("synthetic", "ding")

    def plan(self, quick: bool) -> Plan:
        data, model, train_cfg = _sizes(quick)
        variants = [Variant(label, model.replace(attention=kind)) for kind, label in LABELS.items()]
        return Plan(variants, (1,) if quick else (1, 2, 3), train_cfg.replace(data=data), data)


EXPERIMENT = Ablation()
