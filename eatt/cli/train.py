"""`eatt train`: train a seq2seq model from a run config (model, train and data sections)."""

from __future__ import annotations

import sys
from pathlib import Path

from eatt.cli.common import BoundedInt, add_json, emit, set_torch_threads
from eatt.cli.exits import EXIT_OK

HELP = "train a seq2seq model from a run config (model/train/data)"


def add_arguments(p) -> None:
    p.add_argument("config", metavar="CONFIG", help="YAML/JSON run config")
    p.add_argument("-o", "--output", metavar="DIR", help="checkpoints folder (runs/<config>)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--threads", action=BoundedInt, default=1, help="torch intra-op threads")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run interrupted in -o DIR from its last evaluation (bit for bit as "
        "if uninterrupted); a run there already finished with this config is left as it is",
    )
    add_json(p)


def run(args) -> int:
    from eatt.model.train import train_from_config  # torch

    set_torch_threads(args.threads)
    out = args.output or str(Path("runs") / Path(args.config).stem)
    try:
        summary = train_from_config(
            args.config, out, progress=False if args.no_progress else None, resume=args.resume
        )
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM: say where --resume picks up (exits.py exits)
        from eatt.model.train_state import partial_step  # torch

        step = partial_step(Path(out))
        if step is not None:
            print(
                f"eatt: train: {out} holds step {step}: `eatt train {args.config} -o {out} "
                "--resume` continues from there",
                file=sys.stderr,
            )
        raise
    emit(summary, args.json, _text)
    return EXIT_OK


def _text(s: dict) -> str:
    resumed = s.get("resumed")
    how = {None: "trained", "finished": "already trained"}.get(resumed, f"resumed at {resumed},")
    return (
        f"{how} {s['steps']} steps in {s['seconds']:.0f} s, best dev loss "
        f"{s['dev_loss']:.3f} (step {s['best_step']}): {s['checkpoint']}"
    )
