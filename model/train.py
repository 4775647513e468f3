"""Training of :class:`eatt.model.seq2seq.Seq2Seq` (``eatt train CONFIG``).

A run config is one YAML/JSON file with up to three sections, each optional::

    model: {dim: 128, attention: eatt, ...}     # ModelConfig (eatt.model.seq2seq)
    train: {steps: 3000, peak_lr: 0.001, ...}   # TrainConfig (below)
    data:  {kind: synthetic, n_train: 20000}    # TaskConfig, FilesConfig or DingConfig
                                                # (eatt.model.data, eatt.model.corpus)

:func:`train` runs Adam with the paper's schedule (Sec. 4.2)
``lr = peak_lr * min(t / warmup, 1, (decay / t) ** 0.5)``, label smoothing, dropout and
gradient clipping; writes ``last.pt`` and ``best.pt`` (lowest dev loss) checkpoints and
``train.json`` under the output folder. The same seed gives the same model, bit for bit, on
the same machine and device.

The model is :func:`eatt.model.seq2seq.build_model`'s (Transformer or LSTM, ``model.arch``).
The objective adds the model's auxiliary terms (``aux_losses()``) with their config weights:
``l0drop_lambda * l0`` (L0Drop's expected L0, Zhang et al. 2021 Eq. 12) and
``- flexible_beta * flexible_g`` (Flexible Attention's fine-tuning term, Eq. 9).
``init_checkpoint`` starts from a trained model's weights (fine-tuning, e.g. with beta > 0).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from torch import nn

from eatt.config import ConfigError, atomic_write_text
from eatt.outdir import check_output_dir, claim_dir
from eatt.progress import enabled as progress_enabled

from .corpus import DingConfig, data_config_from_dict, load_data
from .data import (
    PAD,
    FilesConfig,
    TaskConfig,
    TranslationData,
    check_fields,
    dataclass_from_dict,
    encode_pairs,
    iterate_forever,
    make_batches,
)
from .seq2seq import (
    ModelConfig,
    Seq2Seq,
    build_model,
    load_checkpoint,
    read_mapping,
    save_checkpoint,
)
from .train_state import PARTIAL, finished_run, load_partial, save_partial

__all__ = [
    "TrainConfig",
    "learning_rate",
    "load_run_config",
    "resolve_device",
    "train",
    "train_from_config",
]


@dataclass(frozen=True)
class TrainConfig:
    """How to train; every key is optional (docs/models.md lists them)."""

    seed: int = 1
    #: number of optimizer updates
    steps: int = 3000
    #: batch size in (padded) tokens per side
    max_tokens: int = 2048
    #: schedule lr = peak_lr * min(t / warmup, 1, (decay / t) ** 0.5) (the paper: 1e-3, 8000,
    #: 20000 for 50k updates; scaled down here for the small task)
    peak_lr: float = 1e-3
    warmup: int = 400
    decay: int = 1200
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    #: clip the global gradient norm to this (0 = no clipping)
    clip_norm: float = 1.0
    #: dev loss (and checkpoints) every this many steps; 0 = only at the end
    eval_every: int = 500
    #: "auto" (cuda when present, else cpu), "cpu", "cuda", "cuda:N"
    device: str = "auto"
    #: a progress bar on stderr
    progress: bool = True
    #: torch intra-op threads while training (restored after); 0 = leave torch's setting. On a
    #: small shared CPU, 1 is much faster than oversubscribed cores for these small models.
    threads: int = 0
    #: start from this checkpoint's weights (same model config), e.g. to fine-tune; None = init
    init_checkpoint: str | None = None
    data: TaskConfig | FilesConfig | DingConfig = field(default_factory=TaskConfig)

    def __post_init__(self) -> None:
        check_fields(self, "train")
        for key, low, high in (
            ("seed", 0, 2**63 - 1),
            ("steps", 1, 10**9),
            ("max_tokens", 1, 10**9),
            ("warmup", 1, 10**9),
            ("decay", 1, 10**9),
            ("eval_every", 0, 10**9),
            ("threads", 0, 4096),
        ):
            value = getattr(self, key)
            if not low <= value <= high:
                raise ConfigError(f"{key}: must be in [{low}, {high}], got {value}")
        for key, low, high in (
            ("peak_lr", 0.0, 10.0),
            ("adam_beta1", 0.0, 1.0),
            ("adam_beta2", 0.0, 1.0),
            ("adam_eps", 0.0, 1.0),
            ("weight_decay", 0.0, 10.0),
            ("label_smoothing", 0.0, 1.0),
            ("clip_norm", 0.0, 1e9),
        ):
            value = getattr(self, key)
            if not low <= value <= high:
                raise ConfigError(f"{key}: must be in [{low}, {high}], got {value}")
        if self.peak_lr <= 0:
            raise ConfigError(f"peak_lr: must be > 0, got {self.peak_lr}")
        if not (self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")):
            raise ConfigError(f"device: must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        if not isinstance(self.data, (TaskConfig, FilesConfig, DingConfig)):
            object.__setattr__(self, "data", data_config_from_dict(self.data, "data"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def replace(self, **changes: Any) -> TrainConfig:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data.update(changes)
        return TrainConfig(**data)

    @classmethod
    def from_dict(cls, data: Any, source: str = "train") -> TrainConfig:
        if isinstance(data, dict) and "data" in data:
            data = {**data, "data": data_config_from_dict(data["data"], "data")}
        return dataclass_from_dict(cls, data, source)


SECTIONS = ("model", "train", "data")


def load_run_config(path: str | os.PathLike) -> tuple[ModelConfig, TrainConfig]:
    """(ModelConfig, TrainConfig with its data section) of a run config file."""
    raw = read_mapping(path)
    unknown = sorted(set(raw) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"{path}: unknown section '{unknown[0]}' (known: {', '.join(SECTIONS)})")
    try:
        model_cfg = ModelConfig.from_dict(raw.get("model"))
        train_raw = raw.get("train") or {}
        if not isinstance(train_raw, dict):
            raise ConfigError("train: expected a mapping of keys to values")
        if "data" in train_raw:
            raise ConfigError("train.data: put the data section at the top level")
        train_cfg = TrainConfig.from_dict({**train_raw, "data": raw.get("data")})
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    return model_cfg, train_cfg


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """The paper's schedule at update ``step`` (1-based)."""
    t = max(1, step)
    return cfg.peak_lr * min(t / cfg.warmup, 1.0, math.sqrt(cfg.decay / t))


def _legacy_run_dir(path: Path) -> bool:
    """A training folder written before the output marker: last.pt and nothing else but
    what training writes."""
    names = {p.name for p in path.iterdir()}
    return "last.pt" in names and names <= {"last.pt", "best.pt", "train.json"}


def resolve_device(name: str) -> torch.device:
    """auto (CUDA when present, else CPU), cpu, cuda, cuda:N or mps; one-line ValueError else."""
    if not isinstance(name, str) or not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", name):
        raise ValueError(f"device: must be auto, cpu, cuda, cuda:N or mps, got {name!r}")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' requested but MPS is not available")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but CUDA is not available")
    return torch.device(name)


def token_loss(model: Seq2Seq, batch, label_smoothing: float = 0.0) -> tuple[torch.Tensor, int]:
    """(summed label-smoothed cross entropy over target tokens, number of target tokens)."""
    logits = model(batch.src, batch.tgt_in)
    loss = nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        batch.tgt_out.reshape(-1),
        ignore_index=PAD,
        label_smoothing=label_smoothing,
        reduction="sum",
    )
    return loss, batch.n_tgt_tokens


def l0drop_lambda(cfg: ModelConfig, step: int | None = None) -> float:
    """lambda at training step ``step`` (1-based): ``l0drop_lambda * min(1, step / ramp)`` with
    ``l0drop_ramp`` steps of warm-up (the authors' ramp, bzhangGo/zero); the full lambda without
    a ramp or a step."""
    if not cfg.l0drop_ramp or step is None:
        return cfg.l0drop_lambda
    return cfg.l0drop_lambda * min(1.0, step / cfg.l0drop_ramp)


def aux_loss(model, cfg: ModelConfig, step: int | None = None) -> torch.Tensor | float:
    """The weighted auxiliary terms of the last forward (0 when there are none); ``step``
    ramps L0Drop's lambda (:func:`l0drop_lambda`)."""
    aux = model.aux_losses() if hasattr(model, "aux_losses") else {}
    total: torch.Tensor | float = 0.0
    if "l0" in aux and cfg.l0drop_lambda:
        total = total + l0drop_lambda(cfg, step) * aux["l0"]
    if "flexible_g" in aux and cfg.flexible_beta:
        total = total - cfg.flexible_beta * aux["flexible_g"]
    return total


def _load_weights(model: nn.Module, path: str) -> None:
    """Weights of a checkpoint into ``model`` (one-line ValueError when they do not fit)."""
    loaded = load_checkpoint(path)[0]
    try:
        # L0Drop's gates may be new (the paper fine-tunes a trained baseline with them, Zhang
        # et al. 2021 Sec. 5): only their weights may be missing, nothing else
        missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
        others = [k for k in missing if not k.startswith("l0drop.")]
        if others or unexpected:
            what = "missing" if others else "unexpected"
            raise RuntimeError(f"{what} keys: {', '.join((others or unexpected)[:3])}")
    except RuntimeError as err:
        raise ValueError(f"{path}: init_checkpoint does not fit the model ({_line(err)})") from None


def _line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


@torch.no_grad()
def dev_loss(model: Seq2Seq, batches, device: torch.device) -> float:
    """Mean per-token negative log-likelihood (no smoothing) over ``batches``, eval mode."""
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    for batch in batches:
        loss, n = token_loss(model, batch.to(device))
        total, tokens = total + float(loss), tokens + n
    model.train(was_training)
    return total / max(tokens, 1)


class _Progress:
    """A rich progress bar on stderr (or nothing)."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.progress = None
        if not enabled or not progress_enabled():  # EATT_PROGRESS=0 silences every bar
            return
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]:.3f}  {task.fields[speed]:.0f} tok/s"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self.progress.start()
        self.task = self.progress.add_task(label, total=total, loss=float("nan"), speed=0.0)

    def update(self, step: int, loss: float, speed: float) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=step, loss=loss, speed=speed)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def train(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    out_dir: str | os.PathLike,
    data: TranslationData | None = None,
    resume: bool = False,
) -> dict:
    """Train a model; returns (and writes to ``out_dir/train.json``) a summary.

    ``data`` may be given to reuse already loaded data (it must match ``train_cfg.data``'s
    intent; the checkpoint records ``train_cfg``). The summary has ``steps``, ``seconds``,
    ``tokens_per_second``, ``train_loss`` (smoothed, last 50 updates), ``dev_loss`` (best),
    ``best_step``, ``checkpoint`` (path of best.pt), ``last_checkpoint`` and ``parameters``.
    ``resume`` (eatt.model.train_state): a run of these settings that finished in out_dir is
    returned as it is (``"resumed": "finished"``); one interrupted there continues from its
    last evaluation (``"resumed": STEP``), ending bit for bit as an uninterrupted run.
    """
    previous = torch.get_num_threads()
    if train_cfg.threads:
        torch.set_num_threads(train_cfg.threads)
    try:
        return _train(model_cfg, train_cfg, out_dir, data, resume)
    finally:
        torch.set_num_threads(previous)


def _train(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    out_dir: str | os.PathLike,
    data: TranslationData | None,
    resume: bool,
) -> dict:
    real = check_output_dir(out_dir, "training run", legacy=_legacy_run_dir)  # before any work
    if model_cfg.l0drop_fix >= train_cfg.steps and not train_cfg.init_checkpoint:
        raise ConfigError(
            f"l0drop_fix: {model_cfg.l0drop_fix} fixed steps of {train_cfg.steps} leave none to "
            "learn the gates (fix fewer, or fine-tune a gated checkpoint: init_checkpoint)"
        )
    device = resolve_device(train_cfg.device)
    torch.manual_seed(train_cfg.seed)
    if data is None:
        data = load_data(train_cfg.data)
    if resume and real.is_dir():
        done = finished_run(model_cfg, train_cfg, real, data)
        if done is not None:
            return {**done, "resumed": "finished"}
    model = build_model(model_cfg, len(data.src_vocab), len(data.tgt_vocab))
    if train_cfg.init_checkpoint:
        _load_weights(model, train_cfg.init_checkpoint)
    encoded = encode_pairs(data.train, data.src_vocab, data.tgt_vocab)
    dev_encoded = encode_pairs(data.dev, data.src_vocab, data.tgt_vocab)
    _check_lengths(model, {"training": encoded, "dev": dev_encoded})  # before any folder
    out = claim_dir(out_dir, "training run", legacy=_legacy_run_dir)
    # an earlier run's summary must not sit beside this run's checkpoints
    (out / "train.json").unlink(missing_ok=True)
    model = model.to(device)
    model.train()
    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=learning_rate(1, train_cfg),
        betas=(train_cfg.adam_beta1, train_cfg.adam_beta2),
        eps=train_cfg.adam_eps,
        weight_decay=train_cfg.weight_decay,
    )
    dev_batches = make_batches(dev_encoded, train_cfg.max_tokens)
    batches = iterate_forever(encoded, train_cfg.max_tokens, train_cfg.seed)
    stored = train_cfg.to_dict()
    if stored.get("init_checkpoint"):  # relative to the run: a moved folder still matches
        stored["init_checkpoint"] = os.path.relpath(stored["init_checkpoint"], out)
    extra = {
        "train_config": stored,
        "data_config": dict(data.config),
        "data_fingerprint": data.fingerprint(),
    }
    history: list[dict] = []
    recent: list[float] = []
    best = (math.inf, 0)
    # the first step of the l0drop_fix phase (0: none); before it, no checkpoint is a candidate
    fix_from = max(1, train_cfg.steps - model_cfg.l0drop_fix + 1) if model_cfg.l0drop_fix else 0
    tokens_seen, before, first = 0, 0.0, 1
    state = load_partial(out, model_cfg, stored, extra["data_fingerprint"]) if resume else None
    if state is not None:  # where the interrupted run's last evaluation left it
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        history, recent, best = list(state["history"]), list(state["recent"]), tuple(state["best"])
        tokens_seen, before, first = state["tokens_seen"], state["seconds"], state["step"] + 1
        for _ in range(state["step"]):  # the batch stream to the same place
            next(batches)
        if fix_from and state["step"] >= fix_from:
            model.l0drop.fixed = True
        torch.set_rng_state(state["rng"])
        if state.get("cuda_rng") is not None and device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda_rng"], device)
        print(f"train: resuming {out} at step {state['step']}", file=sys.stderr)
    else:
        (out / PARTIAL).unlink(missing_ok=True)  # another run's state: not this one's
    bar = _Progress(train_cfg.progress, train_cfg.steps, f"train {model_cfg.attention}")
    start = time.perf_counter()
    try:
        for step in range(first, train_cfg.steps + 1):
            batch = next(batches).to(device)
            if fix_from and step == fix_from:  # l0drop_fix: the test-time gates from here on
                model.l0drop.fixed = True
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, train_cfg)
            loss_sum, n_tokens = token_loss(model, batch, train_cfg.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            (loss_sum / n_tokens + aux_loss(model, model_cfg, step)).backward()
            if train_cfg.clip_norm > 0:
                nn.utils.clip_grad_norm_(model.parameters(), train_cfg.clip_norm)
            optimizer.step()
            tokens_seen += n_tokens + batch.n_src_tokens
            recent = (recent + [float(loss_sum.detach()) / n_tokens])[-50:]
            elapsed = time.perf_counter() - start
            bar.update(step, sum(recent) / len(recent), tokens_seen / max(elapsed, 1e-9))
            at_eval = train_cfg.eval_every and step % train_cfg.eval_every == 0
            if at_eval or step == train_cfg.steps:
                loss = dev_loss(model, dev_batches, device)
                lr = learning_rate(step, train_cfg)
                history.append({"step": step, "dev_loss": loss, "lr": lr})
                info = {**extra, "step": step, "dev_loss": loss, "history": history}
                # a ramped lambda is not yet the model's lambda: its checkpoints before the
                # ramp ends (less pruned, so lower dev loss) are not candidates for the best
                ramping = model_cfg.l0drop_lambda and step < model_cfg.l0drop_ramp
                # ... with l0drop_fix, those before the fixed gates (noisier, not the result;
                # in the fixed phase lambda no longer counts)
                waiting = step < fix_from if fix_from else ramping
                if loss < best[0] and not (waiting and step < train_cfg.steps):
                    best = (loss, step)
                    save_checkpoint(out / "best.pt", model, data.src_vocab, data.tgt_vocab, info)
                save_checkpoint(out / "last.pt", model, data.src_vocab, data.tgt_vocab, info)
                if step < train_cfg.steps:  # what an interrupted run resumes from
                    save_partial(
                        out,
                        {
                            "step": step,
                            "model": model.state_dict(),
                            "optimizer": optimizer.state_dict(),
                            "rng": torch.get_rng_state(),
                            "cuda_rng": (
                                torch.cuda.get_rng_state(device) if device.type == "cuda" else None
                            ),
                            "history": history,
                            "recent": recent,
                            "best": list(best),
                            "tokens_seen": tokens_seen,
                            "seconds": before + time.perf_counter() - start,
                            "model_config": model_cfg.to_dict(),
                            "train_config": stored,
                            "data_fingerprint": extra["data_fingerprint"],
                        },
                    )
    finally:
        bar.close()
    seconds = before + time.perf_counter() - start
    summary = {
        "steps": train_cfg.steps,
        "seconds": seconds,
        "tokens_per_second": tokens_seen / max(seconds, 1e-9),
        "train_loss": sum(recent) / max(len(recent), 1),
        "dev_loss": best[0],
        "best_step": best[1],
        "checkpoint": str(out / "best.pt"),
        "last_checkpoint": str(out / "last.pt"),
        "parameters": sum(p.numel() for p in model.parameters()),
        "device": str(device),
        "model_config": model_cfg.to_dict(),
        "history": history,
    }
    if state is not None:
        summary["resumed"] = state["step"]
    atomic_write_text(out / "train.json", json.dumps(summary, indent=2) + "\n")
    (out / PARTIAL).unlink(missing_ok=True)
    if train_cfg.progress:
        print(
            f"trained {train_cfg.steps} steps in {seconds:.1f} s; best dev loss "
            f"{best[0]:.3f} at step {best[1]} -> {out / 'best.pt'}",
            file=sys.stderr,
        )
    return summary


def _check_lengths(model, splits: dict) -> None:
    """ValueError (one line) where a split's longest source or target (with <eos> / <bos>, as
    the batches hold them) exceeds what the model's max_len-sized parts take: said before
    training rather than at the first batch that holds it (a model without such parts, the
    RNN's, has no check_length)."""
    check = getattr(model, "check_length", None)
    for split, encoded in splits.items() if check is not None else ():
        if not encoded:
            continue
        longest = {
            "source": max(len(s) for s, _ in encoded),
            "target": 1 + max(len(t) for _, t in encoded),
        }
        for what, length in longest.items():
            try:
                check(what, length)
            except ValueError as err:
                raise ValueError(
                    f"data: a {split} {what} has {length} tokens: {err}; keep the pairs within "
                    f"it with the data section's max_len ({model.cfg.max_len - 1} or less) or "
                    "raise the model's max_len"
                ) from None


def train_from_config(
    path: str | os.PathLike,
    out_dir: str | os.PathLike,
    progress: bool | None = None,
    resume: bool = False,
) -> dict:
    """``eatt train CONFIG [--resume]``: :func:`load_run_config` then :func:`train`
    (one-line errors)."""
    model_cfg, train_cfg = load_run_config(path)
    if progress is not None:
        train_cfg = train_cfg.replace(progress=progress)
    return train(model_cfg, train_cfg, out_dir, resume=resume)
