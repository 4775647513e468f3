"""Resuming training: a run's state at each evaluation (``partial.pt``) and the test that a
folder already holds a finished run of given settings.

``train(..., resume=True)`` (``eatt train --resume``, ``eatt experiment --resume``) continues
an interrupted run from its last evaluation. The model, Adam's moments, torch's RNG, the batch
stream's position (replayed: the stream is a function of the seed), the history and the best
dev loss come back, so the run ends bit for bit where an uninterrupted one would
(tests/test_train.py). A state of other settings (model, training, data) is not resumed: the
run starts from step 0. A folder whose run already finished with these settings is returned as
it is. Both files are read with ``torch.load(weights_only=True)``: a file holding other
objects is refused (ValueError, one line), never run.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import torch

from eatt.fileio import atomic_write

from .seq2seq import ModelConfig

#: the state an unfinished run leaves at each evaluation (removed when the run finishes)
PARTIAL = "partial.pt"
#: bumped when what PARTIAL holds changes (an older one is not resumed)
FORMAT = 1


def _load(path: Path) -> dict | None:
    """A torch file's dict, weights only; None when unreadable; ValueError for planted objects."""
    try:
        data = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError:  # objects a checkpoint never holds: refused, not replaced
        raise ValueError(
            f"{path}: holds objects an eatt checkpoint does not (torch.load weights_only "
            "refuses it); not loaded, not replaced"
        ) from None
    except Exception:  # noqa: BLE001 - an unreadable file: the run is trained again
        return None
    return data if isinstance(data, dict) else None


def settings(stored: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """A stored training config as runs are compared: progress bars aside, the init checkpoint
    relative to the run (train() stores it so; an older run's is absolute)."""
    got = {k: v for k, v in stored.items() if k != "progress"}
    init = got.get("init_checkpoint")
    if init:
        got["init_checkpoint"] = os.path.normpath(
            os.path.relpath(init, run_dir) if os.path.isabs(init) else init
        )
    return got


def _same_model(stored: Any, model_cfg: ModelConfig) -> bool:
    try:  # read as a checkpoint load reads it: a key added since takes its default
        return ModelConfig.from_dict(stored, upgrade=True) == model_cfg
    except Exception:  # noqa: BLE001 - a config this version cannot read: not the same
        return False


def finished_run(model_cfg: ModelConfig, train_cfg, run_dir: Path, data) -> dict | None:
    """The training summary of the run in ``run_dir`` when it finished ``train_cfg.steps`` with
    this model config, these training settings (progress bars aside) and this data; else None."""
    run_dir = Path(run_dir)
    summary, best, last = run_dir / "train.json", run_dir / "best.pt", run_dir / "last.pt"
    if not (summary.is_file() and best.is_file() and last.is_file()):
        return None
    info = _load(last)
    try:
        done = json.loads(summary.read_text())
    except (OSError, ValueError):
        return None
    if info is None:
        return None
    try:
        stored_train = type(train_cfg).from_dict(info.get("train_config"))  # a TrainConfig
    except Exception:  # noqa: BLE001 - a config this version cannot read is trained again
        return None
    same = (
        _same_model(info.get("model_config"), model_cfg)
        and settings(stored_train.to_dict(), run_dir) == settings(train_cfg.to_dict(), run_dir)
        and info.get("data_fingerprint") == data.fingerprint()
        and info.get("step") == train_cfg.steps
    )
    # the checkpoints where they are now (the folder may have moved since)
    return {**done, "checkpoint": str(best), "last_checkpoint": str(last)} if same else None


def refuse_planted(run_dir: Path) -> None:
    """Read the files a resumed run reads (last.pt, partial.pt) weights-only: ValueError (one
    line) for one holding other objects, before any run of an experiment trains."""
    for name in ("last.pt", PARTIAL):
        if (Path(run_dir) / name).is_file():
            _load(Path(run_dir) / name)


def partial_step(run_dir: Path) -> int | None:
    """The step an interrupted run in ``run_dir`` would resume from (its PARTIAL's), or None."""
    path = Path(run_dir) / PARTIAL
    try:
        state = _load(path) if path.is_file() else None
    except ValueError:  # a planted file: --resume says so
        return None
    step = (state or {}).get("step")
    return int(step) if isinstance(step, int) else None


def save_partial(run_dir: Path, state: dict[str, Any]) -> None:
    """Write the run's state (through a temporary file and a rename)."""
    payload = {"format": FORMAT, **state}
    atomic_write(Path(run_dir) / PARTIAL, lambda tmp: torch.save(payload, tmp))


def load_partial(
    run_dir: Path, model_cfg: ModelConfig, stored_train: dict[str, Any], fingerprint: str
) -> dict | None:
    """The state of an interrupted run of this model, these training settings (as train()
    stores them) and this data in ``run_dir``; None when there is none or it is of others."""
    path = Path(run_dir) / PARTIAL
    if not path.is_file():
        return None
    state = _load(path)
    if state is None or state.get("format") != FORMAT:
        return None
    same = (
        _same_model(state.get("model_config"), model_cfg)
        and settings(state.get("train_config") or {}, run_dir) == settings(stored_train, run_dir)
        and state.get("data_fingerprint") == fingerprint
    )
    return state if same else None
