"""Experiments of independent runs: every variant (one row) trained for every seed.

Under ``--resume`` a run that finished in its folder (``runs/<label>-seed<S>``) with the same
model, training settings and data is not trained again, and its row (:data:`RUN_RESULT`, saved
after its evaluation with the checkpoint's digest, the beam and alpha) is not evaluated again:
an experiment of many runs finishes across sessions.

A :class:`SeededExperiment` gives its :class:`Plan` (:meth:`SeededExperiment.plan`); the run
loop, the aggregated rows, the table (BLEU mean +- std and analytic attention energy) and the
bar plot are shared, with hooks for what differs (the energy reference, extra table lines, the
figure).
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from eatt.config import atomic_write_text
from eatt.jobs import Job, run_jobs

from ..corpus import DingConfig, load_data
from ..data import TaskConfig
from ..evaluate import evaluate
from ..seq2seq import ModelConfig
from ..train import TrainConfig, train
from ..train_state import refuse_planted
from .base import TASK, Experiment, _log, relative_paths
from .reuse import find_reused
from .staged import RESUME, file_digest

#: memory Ray reserves for one training run of ``workers`` > 1 (measured: under 1 GB each)
RUN_MEMORY_GB = 1.0
#: a run's row and what it was evaluated with, in its folder (``--resume`` reuses it)
RUN_RESULT = "experiment_run.json"
#: the runs finished so far, in the experiment's folder: a report ``--reuse`` takes (an
#: experiment stopped part way, its finished runs kept where its run folders are not)
PARTIAL = "partial.json"


@dataclass(frozen=True)
class Variant:
    """One row of an experiment's table."""

    label: str
    model: ModelConfig


@dataclass(frozen=True)
class Plan:
    variants: list[Variant]
    seeds: tuple[int, ...]
    train: TrainConfig
    data: TaskConfig | DingConfig
    beam: int = 4
    alpha: float = 0.6


def _saved_row(run_dir: Path, plan: Plan, summary: dict) -> dict | None:
    """The row :data:`RUN_RESULT` holds when it is this checkpoint's evaluation at the plan's
    beam and alpha (None: evaluate again)."""
    try:
        saved = json.loads((run_dir / RUN_RESULT).read_text())
        same = (
            saved["beam"] == plan.beam
            and saved["alpha"] == plan.alpha
            and saved["best_sha256"] == file_digest(summary["checkpoint"])
        )
        row = dict(saved["row"]) if same else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if row is not None:
        row["checkpoint"] = summary["checkpoint"]  # where it is now (the folder may have moved)
    return row


def _run_one(
    variant: Variant,
    seed: int,
    plan: Plan,
    run_dir: Path,
    progress: bool,
    data=None,
    resume: bool = False,
) -> dict:
    """Train and evaluate one (variant, seed); in a worker process ``data`` is regenerated.
    ``resume``: a run that finished in run_dir with this model, these settings and this data
    is not trained again, nor evaluated again when its row was saved (:data:`RUN_RESULT`); one
    interrupted there continues from its last evaluation."""
    if data is None:
        torch.set_num_threads(1)
        data = load_data(plan.data)
    train_cfg = plan.train.replace(seed=seed, progress=progress)
    summary = train(variant.model, train_cfg, run_dir, data=data, resume=resume)
    if summary.get("resumed") == "finished":
        row = _saved_row(run_dir, plan, summary)
        if row is not None:
            return row
    result = evaluate(summary["checkpoint"], beam=plan.beam, alpha=plan.alpha, data=data)
    row = {
        "label": variant.label,
        "seed": seed,
        "attention": variant.model.attentions,
        "bleu": result["bleu"],
        "signature": result["signature"],
        "exact_match": result["exact_match"],
        "dev_loss": summary["dev_loss"],
        "train_seconds": summary["seconds"],
        "energy_percent_of_vanilla": result["energy"]["percent_of_vanilla"],
        "energy_pj": result["energy"]["energy_pj"],
        "binarization": result["binarization"],
        "sparsity_rate": result.get("sparsity_rate"),
        "checkpoint": summary["checkpoint"],
    }
    saved = {
        "beam": plan.beam,
        "alpha": plan.alpha,
        "best_sha256": file_digest(summary["checkpoint"]),
        "row": row,
    }
    atomic_write_text(Path(run_dir) / RUN_RESULT, json.dumps(saved, indent=2) + "\n")
    return row


class SeededExperiment(Experiment):
    """Variants x seeds, each run trained from scratch; subclasses give :meth:`plan`."""

    reusable = True

    def plan(self, quick: bool) -> Plan:
        raise NotImplementedError

    def configured_plan(
        self, quick: bool, steps: int | None = None, seeds: tuple[int, ...] | None = None
    ) -> Plan:
        """:meth:`plan` with the training length and the seeds replaced when given."""
        plan = self.plan(quick)
        if steps is not None:
            plan = replace(plan, train=plan.train.replace(steps=steps))
        if seeds is not None:
            seeds = tuple(seeds)
            if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
                raise ValueError(f"seeds: distinct integers >= 0, at least one, got {list(seeds)}")
            plan = replace(plan, seeds=seeds)
        return plan

    def check(self, quick, steps, seeds) -> None:
        self.configured_plan(quick, steps, seeds)

    def run(self, quick, folder, quiet, workers, steps, seeds) -> dict:
        plan = self.configured_plan(quick, steps, seeds)
        header = {
            "seeds": list(plan.seeds),
            "beam": plan.beam,
            "alpha": plan.alpha,
            "model": plan.variants[0].model.to_dict(),
            "train": {k: v for k, v in plan.train.to_dict().items() if k != "data"},
            "data": plan.data.__dict__.copy(),
        }
        partial = {"experiment": self.name, "quick": quick, "task": TASK.get(), **header}
        runs = self._runs(plan, folder, quiet, workers, partial)
        return {**header, "rows": self._rows(plan, runs), "runs": runs}

    def _runs(
        self, plan: Plan, folder: Path, quiet: bool, workers: int, partial: dict | None = None
    ) -> list[dict]:
        """Every (variant, seed) in plan order, one after another or, with ``workers`` > 1, as
        Ray tasks on a local instance (at most ``workers`` at once, one CPU each). With
        ``partial`` (the report's header), :data:`PARTIAL` in ``folder`` holds the runs
        finished so far after each one, as a report ``--reuse`` takes."""
        name, start = self.name, time.perf_counter()

        def save_partial() -> None:
            if partial is not None:
                done = [r for r in runs if r is not None]
                saved = relative_paths({**partial, "partial": True, "runs": done})
                text = json.dumps(saved, indent=2) + "\n"
                atomic_write_text(folder / PARTIAL, text)

        jobs = [
            (v, seed, folder / "runs" / f"{v.label}-seed{seed}")
            for v in plan.variants
            for seed in plan.seeds
        ]
        runs: list[dict | None] = [find_reused(v, seed, plan) for v, seed, _ in jobs]
        for i, run in enumerate(runs, 1):
            if run is not None:
                _log(f"[{name}] run {i}/{len(jobs)}: reused from {run['reused_from']}", quiet)
        todo = [i for i, run in enumerate(runs) if run is None]
        save_partial()
        resume = RESUME.get()
        data = load_data(plan.data) if workers == 1 and todo else None
        if resume:  # every finished run read before any training: a planted file stops it all
            for i in todo:
                refuse_planted(jobs[i][2])
        if workers == 1:
            for i in todo:
                variant, seed, run_dir = jobs[i]
                elapsed = time.perf_counter() - start
                _log(
                    f"[{name}] run {i + 1}/{len(jobs)}: {variant.label} seed {seed} "
                    f"({elapsed:.0f} s)",
                    quiet,
                )
                progress = plan.train.progress and not quiet
                runs[i] = _run_one(variant, seed, plan, run_dir, progress, data, resume)
                save_partial()
            return runs

        def on_done(task_index: int, run, error: BaseException | None) -> bool:
            if error is not None:  # a failed run ends the experiment, as a serial run would
                raise error
            index = todo[task_index]
            runs[index] = run
            save_partial()
            variant, seed, _ = jobs[index]
            elapsed = time.perf_counter() - start
            _log(
                f"[{name}] run {index + 1}/{len(jobs)} done: {variant.label} seed {seed}: BLEU "
                f"{run['bleu']:.2f} ({elapsed:.0f} s)",
                quiet,
            )
            return False

        # Ray (eatt.jobs, the engine of `eatt sweep`): a local instance, one CPU per run
        tasks = [
            Job(
                (*jobs[i][:2], plan, jobs[i][2], False, None, resume),
                cpus=1,
                memory_gb=RUN_MEMORY_GB,
            )
            for i in todo
        ]
        if tasks:
            run_jobs(_run_one, tasks, on_done, max_parallel=workers, what=f"[{name}] runs")
        return runs

    def energy_reference(self, runs: list[dict]) -> dict | None:
        """Absolute attention energy (pJ per target) the rows are compared with; None: each
        run's own model with vanilla attention."""
        return None

    def _rows(self, plan: Plan, runs: list[dict]) -> list[dict]:
        rows = []
        reference = self.energy_reference(runs)
        for variant in plan.variants:
            mine = [r for r in runs if r["label"] == variant.label]
            bleus = [r["bleu"] for r in mine]
            energy = mine[0]["energy_percent_of_vanilla"] or {}
            if reference is not None:
                energy = {t: 100.0 * mine[0]["energy_pj"][t] / reference[t] for t in reference}
            rows.append(
                {
                    "label": variant.label,
                    "attention": variant.model.attentions,
                    "dim": variant.model.dim,
                    "bleu_mean": statistics.fmean(bleus),
                    "bleu_std": statistics.stdev(bleus) if len(bleus) > 1 else 0.0,
                    "bleus": bleus,
                    "energy_asic_percent": energy.get("asic"),
                    "energy_fpga_percent": energy.get("fpga"),
                    "train_seconds_mean": statistics.fmean(r["train_seconds"] for r in mine),
                }
            )
        return rows

    def energy_reference_text(self, report: dict) -> str:
        """What the table's energy percentages are relative to."""
        return "the same model with vanilla attention"

    def extra_table_lines(self, report: dict) -> list[str]:
        """Lines after the table (none by default)."""
        return []

    def table(self, report: dict) -> str:
        n = len(report["seeds"])
        task = report.get("task", "synthetic")
        lines = [
            f"{report['experiment']}{' (quick)' if report['quick'] else ''}"
            f"{'' if task == 'synthetic' else f' on the {task} task'}: test BLEU over {n} "
            f"seed{'s' if n > 1 else ''} (beam {report['beam']}, alpha {report['alpha']}, "
            f"{report['train']['steps']} steps); "
            f"attention energy in % of {self.energy_reference_text(report)} "
            "(paper Table 1 costs, test-set lengths)",
            "",
            "| model | BLEU mean +- std | BLEU per seed | ASIC % | FPGA % | train s |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for row in report["rows"]:
            asic, fpga = row["energy_asic_percent"], row["energy_fpga_percent"]
            lines.append(
                f"| {row['label']} | {row['bleu_mean']:.2f} +- {row['bleu_std']:.2f} | "
                + " ".join(f"{b:.2f}" for b in row["bleus"])
                + f" | {'-' if asic is None else f'{asic:.2f}'}"
                + f" | {'-' if fpga is None else f'{fpga:.2f}'}"
                + f" | {row['train_seconds_mean']:.0f} |"
            )
        signature = next((r["signature"] for r in report["runs"] if r.get("signature")), None)
        if signature:
            lines += ["", f"sacrebleu: {signature}"]
        reused = [r for r in report["runs"] if r.get("reused_from")]
        for source in dict.fromkeys(r["reused_from"] for r in reused):
            which = ", ".join(
                f"{r['label']} seed {r['seed']}" for r in reused if r["reused_from"] == source
            )
            lines += ["", f"Reused (not trained again) from {source}: {which}."]
        return "\n".join(lines + self.extra_table_lines(report))

    def figure(self, report: dict, plt):
        """BLEU (mean, std error bars) and ASIC energy per variant, side by side."""
        rows = report["rows"]
        labels = [r["label"] for r in rows]
        width = max(8.0, 1.1 * len(labels))
        fig, (ax_bleu, ax_energy) = plt.subplots(1, 2, figsize=(width, 3.6))
        ax_bleu.bar(
            labels,
            [r["bleu_mean"] for r in rows],
            yerr=[r["bleu_std"] for r in rows],
            capsize=4,
            color="#4878d0",
        )
        ax_bleu.set_ylabel("test BLEU")
        ax_bleu.set_title("translation quality")
        ax_energy.bar(labels, [r["energy_asic_percent"] or 0.0 for r in rows], color="#ee854a")
        ax_energy.set_ylabel("attention energy, % of vanilla (ASIC)")
        ax_energy.set_title("analytic energy")
        for ax in (ax_bleu, ax_energy):
            # long labels (the ablation's) would overlap side by side
            crowded = len(labels) > 4 or sum(len(label) for label in labels) > 40
            ax.tick_params(axis="x", labelrotation=90 if crowded else 0, labelsize=8)
        fig.suptitle(self.name)
        return fig
