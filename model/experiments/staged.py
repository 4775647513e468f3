"""Staged experiments: later runs start from (fine-tune) or depend on (a rate, a tau picked on
dev) earlier ones, so they have no ``steps`` / ``seeds`` overrides.

A :class:`StagedExperiment` implements :meth:`StagedExperiment.stages` (the report body),
:meth:`StagedExperiment.table_lines` and :meth:`~.base.Experiment.figure`; the target line under
the table is shared. The helpers train and evaluate one model each.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
from pathlib import Path

from eatt.config import atomic_write_text

from ..data import TaskConfig
from ..evaluate import evaluate
from ..seq2seq import ModelConfig
from ..train import TrainConfig, train
from ..train_state import finished_run  # noqa: F401 - the experiments' name for it
from .base import TASKS, Experiment, _log, _num, _sizes

#: D of local-m / local-p on the bundled task (sources of 5-30 words; Luong's D = 10 would cover
#: most sentences whole)
WINDOW_D = 4


#: a staged run's evaluations, in its folder: each one's key (the checkpoint's digest, split,
#: beam, alpha, options, data fingerprint) and kept result; ``--resume`` takes them, not
#: evaluating again (beam search on a fixed checkpoint is deterministic)
EVALUATIONS = "evaluations.json"
#: the length penalty every staged evaluation decodes with
ALPHA = 0.6

#: ``--resume``: a run already finished in its folder with the model, training settings and data
#: asked for is reused, not trained again (the same seed gives the same model, bit for bit); one
#: interrupted there continues from its last evaluation
RESUME: contextvars.ContextVar[bool] = contextvars.ContextVar("resume", default=False)


def train_run(model_cfg: ModelConfig, train_cfg: TrainConfig, run_dir: Path, data) -> dict:
    """train(); under ``--resume`` (:data:`RESUME`) the run finished in run_dir as it is, or
    one interrupted there continued (eatt.model.train_state)."""
    return train(model_cfg, train_cfg, run_dir, data=data, resume=RESUME.get())


class StagedExperiment(Experiment):
    staged = True

    def check(self, quick, steps, seeds) -> None:
        if steps is not None or seeds is not None:
            raise ValueError(f"steps / seeds: not for the staged experiment {self.name!r}")

    def run(self, quick, folder, quiet, workers, steps, seeds) -> dict:
        return self.stages(quick, folder, quiet)

    def stages(self, quick: bool, folder: Path, quiet: bool) -> dict:
        """Every stage, one after another: the report body (beam, rows, target, ...)."""
        raise NotImplementedError

    def table_lines(self, report: dict) -> list[str]:
        raise NotImplementedError

    def table(self, report: dict) -> str:
        lines = self.table_lines(report)
        task = report.get("task", "synthetic")
        if task in TASKS and task != "synthetic":  # BLEU as papers report it, with its signature
            rows = report.get("rows", [])
            signature = next((r["signature"] for r in rows if r.get("signature")), "-")
            lines += ["", f"On the {task} task; sacrebleu: {signature}"]
        target = report.get("target")
        if target:
            parts = [
                f"{k} {_num(v, '.3f') if isinstance(v, float) else v}"
                for k, v in target.items()
                if k not in ("what", "met")
            ]
            lines += [
                "",
                f"Target: {target['what']}: {'met' if target['met'] else 'MISSED'} "
                f"({', '.join(parts)})",
            ]
        return "\n".join(lines)


def _fine_tune(train_cfg: TrainConfig, fraction: int, checkpoint: str) -> TrainConfig:
    """Training settings that continue ``checkpoint`` for 1/``fraction`` of the steps (a short
    warm-up of its own): the fine-tuning stage of the staged experiments."""
    steps = max(1, train_cfg.steps // fraction)
    return train_cfg.replace(steps=steps, warmup=max(1, steps // 10), init_checkpoint=checkpoint)


def _window_sizes(quick: bool) -> tuple[TaskConfig, ModelConfig, TrainConfig, int]:
    data, model, train_cfg = _sizes(quick)
    return data, model.replace(window_d=WINDOW_D), train_cfg.replace(data=data), 1 if quick else 4


def _train_and_eval(
    label: str,
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    data,
    folder: Path,
    beam: int,
    quiet: bool,
    **eval_kw,
) -> tuple[dict, dict]:
    """(training summary, test evaluation) of one model (``eval_kw``: more evaluate options)."""
    _log(f"[{folder.name}] {label}", quiet)
    summary = train_run(
        model_cfg,
        train_cfg.replace(progress=train_cfg.progress and not quiet),
        folder / "runs" / label.replace(" ", "_"),
        data,
    )
    return summary, _eval(summary["checkpoint"], data, "test", beam, **eval_kw)


def file_digest(path: str | Path) -> str:
    """The SHA-256 of a file (a checkpoint: what its evaluations are keyed by)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _eval(checkpoint: str, data, split: str, beam: int, **kw) -> dict:
    """evaluate() of a checkpoint, its kept result saved beside it (:data:`EVALUATIONS`). One
    saved for this checkpoint, split, beam, options and data is taken under ``--resume``, or
    when this process saved it (a stage evaluating what an earlier one did); a run without
    ``--resume`` starts the file afresh."""
    path = Path(checkpoint).parent / EVALUATIONS
    key = json.dumps(
        {"sha256": file_digest(checkpoint), "split": split, "beam": beam, "alpha": ALPHA,
         "data": data.fingerprint(), "options": kw},
        sort_keys=True, default=str,
    )  # fmt: skip
    mine = path.resolve() in _WRITTEN
    saved = _saved_evaluations(path) if RESUME.get() or mine else {}
    if key in saved:
        return dict(saved[key])
    result = evaluate(checkpoint, beam=beam, alpha=ALPHA, split=split, data=data, **kw)
    keep = (
        "bleu", "exact_match", "vision_span", "sparsity_rate", "decode_seconds", "hardware",
        "signature",
    )  # fmt: skip
    saved[key] = {k: result[k] for k in keep if k in result}
    atomic_write_text(path, json.dumps(saved, indent=1) + "\n")
    _WRITTEN.add(path.resolve())
    return dict(saved[key])


#: the evaluation files this process wrote (their results are this run's)
_WRITTEN: set[Path] = set()


def _saved_evaluations(path: Path) -> dict:
    """The evaluations saved in ``path`` ({} for none or an unreadable file)."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


def _window_report(beam: int, rows: list[dict], data_cfg, model, train_cfg) -> dict:
    """The report body of the windowed experiments: beam, D, the rows and the settings."""
    return {
        "beam": beam,
        "window_d": WINDOW_D,
        "rows": rows,
        "data": data_cfg.__dict__.copy(),
        "model": model.to_dict(),
        "train": {k: v for k, v in train_cfg.to_dict().items() if k != "data"},
    }


def _row(label: str, result: dict, **extra) -> dict:
    return {"label": label, **extra, **result}
