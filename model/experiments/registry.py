"""Every experiment by name, in the order ``eatt experiment`` lists them.

A new experiment is one module (a :class:`~.seeded.SeededExperiment` or
:class:`~.staged.StagedExperiment` subclass and its ``EXPERIMENT`` instance) plus one line here.
"""

from __future__ import annotations

from . import (
    ablation,
    eatt_vs_vanilla,
    energy_vs_quality,
    flexible_unit,
    hybrids,
    l0drop,
    l0drop_scratch,
    l0drop_unit,
    qat,
    window,
    window_eatt,
    window_unit,
)
from .base import Experiment

REGISTRY: dict[str, Experiment] = {
    e.name: e
    for e in (
        eatt_vs_vanilla.EXPERIMENT,
        ablation.EXPERIMENT,
        hybrids.EXPERIMENT,
        energy_vs_quality.EXPERIMENT,
        window.EXPERIMENT,
        window.LSTM,
        window.TRAIN_WINDOW,
        window_eatt.EXPERIMENT,
        window_unit.EXPERIMENT,
        flexible_unit.EXPERIMENT,
        l0drop.EXPERIMENT,
        l0drop.REDUNDANT,
        l0drop_scratch.EXPERIMENT,
        l0drop_unit.EXPERIMENT,
        qat.EXPERIMENT,
    )
}
#: the experiments of independent runs (variants x seeds)
EXPERIMENTS = {name: e for name, e in REGISTRY.items() if not e.staged}
#: the staged experiments: later runs start from or depend on earlier ones
STAGED_EXPERIMENTS = {name: e for name, e in REGISTRY.items() if e.staged}
