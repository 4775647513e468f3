"""``hybrids``: self-attention kind x cross-attention kind over vanilla, dense, randinit, eatt,
one seed each, also as a grid (the paper's Table 6)."""

from __future__ import annotations

from .base import _sizes
from .seeded import Plan, SeededExperiment, Variant

HYBRID_KINDS = ("vanilla", "dense", "randinit", "eatt")


class Hybrids(SeededExperiment):
    name = "hybrids"

    def plan(self, quick: bool) -> Plan:
        data, model, train_cfg = _sizes(quick)
        variants = [
            Variant(
                f"self={s} cross={c}",
                model.replace(attention=s, enc_self=s, dec_self=s, cross=c),
            )
            for c in HYBRID_KINDS
            for s in HYBRID_KINDS
        ]
        if quick:
            train_cfg = train_cfg.replace(steps=min(train_cfg.steps, 60))
        return Plan(variants, (1,), train_cfg.replace(data=data), data)

    def extra_table_lines(self, report: dict) -> list[str]:
        """The BLEU grid: self-attention kinds as columns, cross-attention kinds as rows."""
        bleu = {(r["attention"]["enc_self"], r["attention"]["cross"]): r for r in report["rows"]}
        lines = [
            "",
            "BLEU by self-attention (columns) and cross-attention (rows), as the paper's Table 6:",
            "",
            "| cross \\ self | " + " | ".join(HYBRID_KINDS) + " |",
            "| --- |" + " --- |" * len(HYBRID_KINDS),
        ]
        for c in HYBRID_KINDS:
            cells = [f"{bleu[(s, c)]['bleu_mean']:.2f}" for s in HYBRID_KINDS]
            lines.append(f"| {c} | " + " | ".join(cells) + " |")
        return lines

    def figure(self, report: dict, plt):
        """The Table 6 grid as two heat maps: BLEU and energy."""
        fig, axes = plt.subplots(1, 2, figsize=(9.5, 4.2))
        kinds = HYBRID_KINDS
        cell = {(r["attention"]["cross"], r["attention"]["enc_self"]): r for r in report["rows"]}
        for ax, key, title, cmap in (
            (axes[0], "bleu_mean", "test BLEU", "viridis"),
            (axes[1], "energy_asic_percent", "attention energy, % of vanilla (ASIC)", "magma"),
        ):
            grid = [[cell[c, s][key] for s in kinds] for c in kinds]
            image = ax.imshow(grid, cmap=cmap)
            low, high = min(map(min, grid)), max(map(max, grid))
            for i, row in enumerate(grid):
                for j, value in enumerate(row):
                    bright = (value - low) > 0.6 * (high - low)  # both maps end bright
                    color = "black" if bright else "white"
                    ax.text(j, i, f"{value:.1f}", ha="center", va="center", color=color)
            ax.set_xticks(range(len(kinds)), kinds)
            ax.set_yticks(range(len(kinds)), kinds)
            ax.set_xlabel("self-attention")
            ax.set_ylabel("cross-attention")
            ax.set_title(title, fontsize=10)
            fig.colorbar(image, ax=ax, shrink=0.8)
        fig.suptitle(self.name)
        return fig


EXPERIMENT = Hybrids()
