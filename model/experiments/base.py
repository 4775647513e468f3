"""What every experiment shares: the sizes, the :class:`Experiment` base, output helpers.

An experiment is one object: its name, :meth:`Experiment.run` (the body of the report: the
runs and the rows), :meth:`Experiment.table` (the Markdown table of a report) and
:meth:`Experiment.plot` (the figure). :func:`eatt.model.experiments.run_experiment` claims the
folder, times the run and writes the files; the families are :class:`~.seeded.SeededExperiment`
(variants x seeds, the shared run loop) and :class:`~.staged.StagedExperiment` (later runs start
from or depend on earlier ones).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from contextvars import ContextVar
from pathlib import Path

from eatt.outdir import is_ours

from ..corpus import DingConfig
from ..data import TaskConfig
from ..seq2seq import ModelConfig
from ..train import TrainConfig

# default and quick sizes shared by the experiments (the tests shrink the quick ones here)
_DATA = TaskConfig()
_QUICK_DATA = TaskConfig(
    n_train=300, n_dev=30, n_test=30, max_len=12, n_nouns=12, n_verbs=6, n_adjs=6, seed=11
)
_MODEL = ModelConfig()
_QUICK_MODEL = ModelConfig(dim=32, heads=2, ffn_dim=64, enc_layers=1, dec_layers=1, dropout=0.0)
_TRAIN = TrainConfig(steps=1500, eval_every=500, progress=True)
_QUICK_TRAIN = TrainConfig(
    steps=150, warmup=30, decay=150, peak_lr=3e-3, max_tokens=512, eval_every=0, progress=False
)

#: the tasks an experiment may run on (``eatt experiment --task``): the bundled synthetic one,
#: and the Ding dictionary's sentences (eatt.model.corpus; its own model and training sizes
#: below, tuned once, issue 44)
TASKS = ("synthetic", "ding")
#: the Ding model's longest sequence (the model's default): the window unit and the quantized
#: cores are sized by it (test sources: at most 46 pieces of a 4,000-piece vocabulary, 51 of
#: 2,000, 58 of the quick 1,000); training pairs with a longer side are dropped
_DING_MAX_LEN = 64
_DING_DATA = DingConfig(max_len=_DING_MAX_LEN - 1)
#: the Ding model: the synthetic task's with dropout 0.3, trained 3,000 steps (2026-12-02, one
#: seed, test BLEU at beam 4: vanilla 6.74 against 5.44 with dropout 0.1 and 1,500 steps, whose
#: dev loss rose after step 1,500; a 2,000-piece vocabulary with tied embeddings: 3.97;
#: docs/results.md, "Real language")
_DING_MODEL = _MODEL.replace(dropout=0.3, max_len=_DING_MAX_LEN)
_DING_TRAIN = _TRAIN.replace(steps=3000)
_QUICK_DING_DATA = DingConfig(
    vocab_size=1000, n_train=3000, n_dev=100, n_test=200, max_len=_DING_MAX_LEN - 1
)
#: the task of the experiment running now (run_experiment sets it); :func:`_sizes` reads it
TASK: ContextVar[str] = ContextVar("task", default="synthetic")

#: the papers' tolerance: within 0.5 BLEU (Flexible Sec. 5, footnote 2; L0Drop Sec. 6)
BLEU_TOLERANCE = 0.5


def _sizes(quick: bool) -> tuple[TaskConfig | DingConfig, ModelConfig, TrainConfig]:
    """The data, model and training sizes of :data:`TASK` (the quick ones with ``quick``)."""
    if TASK.get() == "ding":
        if quick:
            return _QUICK_DING_DATA, _QUICK_MODEL.replace(max_len=_DING_MAX_LEN), _QUICK_TRAIN
        return _DING_DATA, _DING_MODEL, _DING_TRAIN
    return (_QUICK_DATA, _QUICK_MODEL, _QUICK_TRAIN) if quick else (_DATA, _MODEL, _TRAIN)


class Experiment:
    """One experiment: subclasses set :attr:`name` and implement :meth:`run`, :meth:`table`
    and :meth:`figure`; one instance of each goes into the registry (``registry.py``)."""

    name: str = ""
    #: later runs start from or depend on earlier ones (no ``steps`` / ``seeds`` overrides)
    staged: bool = False
    #: ``--reuse REPORT.json`` can take its runs (units) from an earlier report
    reusable: bool = False
    #: the tasks of :data:`TASKS` it runs on (the others need the synthetic task's rules)
    tasks: tuple[str, ...] = ("synthetic",)

    def check(self, quick: bool, steps: int | None, seeds: tuple[int, ...] | None) -> None:
        """Refuse bad overrides before any work (and before the folder is claimed)."""

    def run(
        self,
        quick: bool,
        folder: Path,
        quiet: bool,
        workers: int,
        steps: int | None,
        seeds: tuple[int, ...] | None,
    ) -> dict:
        """Train and evaluate everything into ``folder``: the report after its name and quick."""
        raise NotImplementedError

    def table(self, report: dict) -> str:
        """The Markdown table of a report (``results.md`` without its final newline)."""
        raise NotImplementedError

    def figure(self, report: dict, plt):
        """The matplotlib figure of a report (``plt`` is matplotlib.pyplot, Agg backend)."""
        raise NotImplementedError

    def plot(self, report: dict, path: Path) -> str | None:
        """Save :meth:`figure` to ``path``; None (no plot) without matplotlib."""
        if importlib.util.find_spec("matplotlib") is None:
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return _save(self.figure(report, plt), plt, path)


def _log(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def _save(fig, plt, path: Path) -> str:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)
    return str(path)


def _num(value, fmt: str = ".2f") -> str:
    return "-" if value is None else format(value, fmt)


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of a Markdown table: the header, its rule, one line per row."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + " --- |" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _legacy_experiment_dir(path: Path) -> bool:
    """An experiment folder written before the output marker: its runs and results only."""
    names = {p.name for p in path.iterdir()}
    known = {"runs", "results.json", "results.md", "results.png"}
    return bool(names & {"runs", "results.json"}) and all(
        n in known or n.endswith((".png", ".json", ".md")) for n in names
    )


def _legacy_experiments_dir(path: Path) -> bool:
    """An `-o` folder of experiments written before its own marker: experiment folders of
    eatt's and nothing else (a user's notes beside them make it a user's folder)."""
    children = list(path.iterdir())
    return bool(children) and all(
        c.is_dir() and is_ours(c, "experiment", legacy=_legacy_experiment_dir) for c in children
    )


def _drop_results(folder: Path) -> None:
    """An earlier run's table must not outlive a run that fails or is interrupted."""
    for name in ("results.json", "results.md"):
        (folder / name).unlink(missing_ok=True)


def relative_paths(value, root: Path | None = None):
    """``value`` (a report) with every path string under ``root`` (the working directory)
    written relative to it: a report committed from one machine names no other's folders."""
    prefix = f"{root or Path.cwd()}{os.sep}"
    if isinstance(value, str):
        return value[len(prefix) :] if value.startswith(prefix) else value
    if isinstance(value, dict):
        return {k: relative_paths(v, root) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [relative_paths(v, root) for v in value]
    return value
