"""``energy-vs-quality``: BLEU against the analytic attention energy (in % of the widest vanilla
model) while halving the model dimension, vanilla and E-ATT, one seed (the paper's Fig. 1)."""

from __future__ import annotations

from .base import _sizes
from .seeded import Plan, SeededExperiment, Variant


class EnergyVsQuality(SeededExperiment):
    name = "energy-vs-quality"
    tasks = ("synthetic", "ding")

    def plan(self, quick: bool) -> Plan:
        data, model, train_cfg = _sizes(quick)
        dims = (32, 16) if quick else (model.dim, model.dim // 2, model.dim // 4)
        variants = [
            Variant(
                f"{kind} d={dim}",
                model.replace(
                    attention=kind, dim=dim, ffn_dim=2 * dim, heads=min(model.heads, dim)
                ),
            )
            for kind in ("vanilla", "eatt")
            for dim in dims
        ]
        return Plan(variants, (1,), train_cfg.replace(data=data), data)

    def energy_reference(self, runs: list[dict]) -> dict:
        """Absolute energy against the first (widest vanilla) variant."""
        return runs[0]["energy_pj"]

    def energy_reference_text(self, report: dict) -> str:
        return f"the widest vanilla model ({report['rows'][0]['label']})"

    def figure(self, report: dict, plt):
        """BLEU against ASIC energy (log scale), one line per attention kind."""
        rows = report["rows"]
        fig, ax = plt.subplots(figsize=(5, 3.6))
        for kind, marker in (("vanilla", "o"), ("eatt", "s")):
            mine = [r for r in rows if r["attention"]["enc_self"] == kind]
            ax.plot(
                [r["energy_asic_percent"] for r in mine],
                [r["bleu_mean"] for r in mine],
                marker=marker,
                label=kind,
            )
            for r in mine:
                ax.annotate(
                    f"d={r['dim']}",
                    (r["energy_asic_percent"], r["bleu_mean"]),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize=8,
                )
        ax.set_xscale("log")
        ax.set_xlabel("attention energy, % of the widest vanilla model (ASIC)")
        ax.set_ylabel("test BLEU")
        ax.legend()
        ax.set_title(self.name)
        return fig


EXPERIMENT = EnergyVsQuality()
