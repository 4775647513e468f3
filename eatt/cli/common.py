"""What the `eatt` commands share: the parser, checked argument types, --json and output.

Flags are checked while the arguments are parsed, by the actions below, so a bad value stops
the command before anything is imported or written, with one line naming the flag::

    parser.add_argument("--vectors", action=BoundedInt, low=1, default=1000, help=...)
    # eatt golden --vectors 0  ->  eatt: error: --vectors: must be >= 1, got 0  (exit 2)

A command prints its result with :func:`emit`: one JSON object on stdout with ``--json`` (the
helper :func:`add_json` declares the flag), else the command's text; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

from eatt.cli.exits import CommandError
from eatt.config import default_config, load_config
from eatt.quant.golden import random_weights

#: the largest integer a flag may give where HLS code and config keys take it (int32)
INT32_MAX = 2**31 - 1
#: the widest beam a decoding takes (eatt capture, evaluate, flow of a layer)
MAX_BEAM = 256
#: the data splits a model decodes
SPLITS = ["test", "dev", "train"]
STEP_HELP = "a decoder layer's core of one decoding step (len_q 1; what the model decodes with)"


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors are one line (exit 2) instead of usage + message."""

    def error(self, message: str) -> None:
        raise CommandError(f"{self.prog}: {message} (see --help)")


# -- argument types: checked while parsing, the message names the flag ---------------------------
class _CheckedValue(argparse.Action):
    """Stores a flag's value after :meth:`problem` found nothing wrong with it."""

    def __call__(self, parser, namespace, value, option_string=None) -> None:
        problem = self.problem(value)
        if problem:
            raise CommandError(f"{self.option_strings[-1]}: {problem}, got {value}")
        setattr(namespace, self.dest, value)

    def problem(self, value) -> str | None:
        """What is wrong with ``value`` ("must be ..."), or None."""
        raise NotImplementedError


class BoundedInt(_CheckedValue):
    """An integer flag in [low, high]; None leaves that side open.

    ``high=INT32_MAX`` is the cap of values that HLS code and config keys take; it is said
    apart from the lower bound ("must be >= 1", "must be at most 2147483647 (int32)"). Other
    bounds are said together ("must be in [1, 256]").
    """

    def __init__(self, option_strings, dest, low: int | None = 1, high: int | None = None, **kw):
        super().__init__(option_strings, dest, type=int, **kw)
        self.low, self.high = low, high

    def problem(self, value: int) -> str | None:
        low, high = self.low, self.high
        too_low = low is not None and value < low
        too_high = high is not None and value > high
        if not (too_low or too_high):
            return None
        if high in (None, INT32_MAX):
            return f"must be >= {low}" if too_low else f"must be at most {high} (int32)"
        return f"must be in [{low}, {high}]"


class PositiveFloat(_CheckedValue):
    """A finite number > 0; ``what`` says which ("a period in ns", "seconds")."""

    def __init__(self, option_strings, dest, what: str = "a number", **kwargs):
        super().__init__(option_strings, dest, type=float, **kwargs)
        self.what = what

    def problem(self, value: float) -> str | None:
        return None if math.isfinite(value) and value > 0 else f"must be {self.what} > 0"


class FloatRange(_CheckedValue):
    """A number in [low, high] (never nan)."""

    def __init__(self, option_strings, dest, low: float = 0, high: float = 1, **kwargs):
        super().__init__(option_strings, dest, type=float, **kwargs)
        self.low, self.high = low, high

    def problem(self, value: float) -> str | None:
        if math.isfinite(value) and self.low <= value <= self.high:
            return None
        return f"must be a number in [{self.low}, {self.high}]"


# -- flags several commands take ---------------------------------------------------------------
def add_json(p: argparse.ArgumentParser) -> None:
    """--json: the result as one JSON object on stdout (see :func:`emit`)."""
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def add_core_arguments(p: argparse.ArgumentParser) -> None:
    """--config, --seed and --json of the commands that build a core (see :func:`random_core`)."""
    p.add_argument("--config", metavar="CFG", help="core config (YAML/JSON); default: embedded")
    p.add_argument(
        "--seed", action=BoundedInt, low=0, default=1, help="seed of the random integer weights"
    )
    add_json(p)


def add_folding_arguments(p: argparse.ArgumentParser) -> None:
    """--lanes/--simd/--pe: the folded engine's parallelism (docs/folded.md), for eatt rtl
    --level folded and eatt hls (the folded hls4ml layer). Below 1 is left to the folding's
    own check, which says what each must divide."""
    p.add_argument(
        "--lanes",
        action=BoundedInt,
        low=None,
        high=INT32_MAX,
        metavar="P",
        help="folded: keys scored per cycle (divides len_k; default up to 4)",
    )
    p.add_argument(
        "--simd",
        action=BoundedInt,
        low=None,
        high=INT32_MAX,
        metavar="S",
        help="folded: features per cycle (divides d_head = dim / heads; default up to 4)",
    )
    p.add_argument(
        "--pe",
        action=BoundedInt,
        low=None,
        high=INT32_MAX,
        metavar="N",
        help="folded E-ATT: V and O columns per cycle (divides simd; default simd): the "
        "multiply tile, beside the select tile that computes Q and K at the same time",
    )


def folding(args) -> dict[str, int]:
    """--lanes/--simd/--pe (eatt rtl, eatt hls): the ones given."""
    given = {"lanes": args.lanes, "simd": args.simd, "pe": args.pe}
    return {key: value for key, value in given.items() if value is not None}


# -- output ----------------------------------------------------------------------------------
def emit(result: dict, as_json: bool, text: Callable[[dict], str]) -> None:
    """Print a command's result on stdout: one JSON object, or ``text(result)``."""
    if as_json:
        print(json.dumps(result))
    else:
        print(text(result))


# -- inputs several commands read ------------------------------------------------------------
def random_core(args) -> tuple:
    """(config, weights) of a command's core: --config (or the embedded default), --seed."""
    cfg = load_config(args.config) if args.config else default_config()
    return cfg, random_weights(cfg, args.seed)


def check_checkpoint_path(path: str) -> None:
    """A checkpoint given on the command line is a file (one line naming it, else)."""
    p = Path(path)
    if p.is_dir():
        raise CommandError(f"{p}: is a folder; give its best.pt or last.pt")
    if not p.is_file():
        raise CommandError(f"{p}: no such checkpoint file")
    if p.suffix.lower() == ".onnx":
        raise CommandError(
            f"{p}: an ONNX file, not a checkpoint: a core exported already (eatt flow, hls, sim "
            "and power take it, with --inputs for a capture)"
        )


def not_a_model(path: str) -> str:
    """The line for a file that is not a model of `eatt train` where one is needed."""
    return (
        f"{path}: not a model of `eatt train`; your own model's layers go through the Python "
        "API (eatt.capture, eatt.export_layer: docs/own_model.md), then `eatt flow "
        "layer.onnx --inputs acts.npz`"
    )


def set_torch_threads(n: int) -> None:
    """Small models train fastest on one thread, and never oversubscribe a shared machine."""
    import torch  # seconds to import: only the seq2seq commands load it

    torch.set_num_threads(n)
