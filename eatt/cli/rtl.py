"""`eatt rtl`: generate a core's RTL (SystemVerilog) and its metadata.json."""

from __future__ import annotations

from pathlib import Path

from eatt.build_options import BuildOptions
from eatt.cli.common import add_core_arguments, add_folding_arguments, emit, folding, random_core
from eatt.cli.exits import EXIT_OK, EXIT_TOOL_MISSING, CommandError
from eatt.config import check_rtl_size
from eatt.mechanisms import folded_kinds
from eatt.rtl_sim.generate import generate_rtl

HELP = "generate the core's RTL (SystemVerilog) and metadata.json"


def add_arguments(p) -> None:
    add_core_arguments(p)
    p.add_argument(
        "onnx", nargs="?", metavar="FILE.onnx", help="a core written by `eatt export` (a layer)"
    )
    p.add_argument(
        "--level",
        choices=["alignment", "attention", "folded"],
        default=None,
        help="alignment: scores only; attention: the whole core; folded: the whole core, "
        "folded (docs/folded.md) (default: folded where the config's reuse_factor > 1, else "
        "alignment; kind window: ignored)",
    )
    add_folding_arguments(p)
    p.add_argument(
        "--adder-levels",
        type=int,
        default=0,
        metavar="N",
        help="pipeline the adder trees for a clock: at most N adder levels between registers "
        "(folded: also the block-RAM reads, the lanes' max and N x R registered; 0: the fixed "
        "pipeline)",
    )
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder")


def run(args) -> int:
    source = None
    if args.onnx:
        if args.config:
            raise CommandError("give either --config or an ONNX file, not both")
        try:
            from eatt.quant.export import core_source, load_core  # onnx, qonnx
        except ImportError as err:
            raise CommandError(
                f"reading {args.onnx} needs onnx/qonnx ({err})", EXIT_TOOL_MISSING
            ) from None
        cfg, weights = load_core(args.onnx)
        source = {"onnx": str(Path(args.onnx).resolve()), **(core_source(args.onnx) or {})}
    else:
        cfg, weights = random_core(args)
    if args.level is None:  # reuse_factor > 1 folds the core (docs/folded.md)
        args.level = "folded" if getattr(cfg, "reuse_factor", 1) > 1 else "alignment"
    parallelism = folding(args)
    if parallelism and args.level != "folded":
        raise CommandError("--lanes/--simd/--pe: only with --level folded")
    if args.level == "folded" and cfg.kind not in folded_kinds():
        kinds = " and ".join(folded_kinds())
        raise CommandError(f"--level folded: for kinds {kinds}, not {cfg.kind}")
    if args.level != "folded":  # the folded engine's size does not grow with the config
        check_rtl_size(cfg)
    # window: one level, a fixed pipeline (adder_levels must be 0)
    options = BuildOptions(
        levels=(args.level,), folding=parallelism or None, adder_levels=args.adder_levels
    )
    meta = generate_rtl(cfg, weights, args.output, level=args.level, options=options, source=source)

    def text(m: dict) -> str:
        if "latency_cycles" in m:
            latency = f"latency {m['latency_cycles']} cycles"
        else:  # the windowed unit: cycles grow with the window
            latency = f"latency up to {m['latency_cycles_max']} cycles"
        return (
            f"wrote {m['level']} RTL of the {m['config']['kind']} core to {args.output}: "
            + ", ".join(m["sources"])
            + f" ({latency})"
        )

    emit(meta, args.json, text)
    return EXIT_OK
