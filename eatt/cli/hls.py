"""`eatt hls`: the hls4ml project of a core (or of a whole model's QONNX file) and its C
simulation against the golden model (against qonnx for a whole model)."""

from __future__ import annotations

from eatt.build_options import BuildOptions
from eatt.cli.common import (
    INT32_MAX,
    BoundedInt,
    PositiveFloat,
    add_core_arguments,
    add_folding_arguments,
    emit,
    folding,
)
from eatt.cli.exits import EXIT_CHECK_FAILED, EXIT_OK, EXIT_TOOL_MISSING, CommandError
from eatt.config import check_vectors, default_config, load_config
from eatt.outdir import check_output_dir
from eatt.quant.vectors import model_line
from eatt.rtl_sim.tools import ToolMissing

HELP = "hls4ml project of the core, C simulation vs golden"


def add_arguments(p) -> None:
    add_core_arguments(p)
    p.add_argument("onnx", nargs="?", metavar="FILE.onnx", help="a core written by `eatt export`")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="project folder")
    p.add_argument("--backend", choices=["vitis", "vivado"], default="vitis")
    p.add_argument("--part", help="FPGA part (default: hls4ml's)")
    p.add_argument(
        "--clock",
        action=PositiveFloat,
        what="a period in ns",
        metavar="NS",
        help="clock period in ns",
    )
    p.add_argument(
        "--vectors", action=BoundedInt, default=1000, help="C simulation vectors (+ edge)"
    )
    p.add_argument("--synth", action="store_true", help="run vendor C synthesis (vitis/vivado)")
    p.add_argument(
        "--inputs", metavar="ACTS.npz", help="check on these captured vectors (eatt capture)"
    )
    p.add_argument(
        "--reuse-factor",
        action=BoundedInt,
        high=INT32_MAX,
        metavar="R",
        help="fold the layer to at most R cycles per call (hls4ml's ReuseFactor; default: the "
        "config's reuse_factor, 1 = unrolled; docs/hls.md)",
    )
    add_folding_arguments(p)
    p.add_argument(
        "--io-type",
        choices=["io_parallel", "io_stream"],
        default="io_parallel",
        help="hls4ml's io type: io_stream (the folded layer) takes and gives one token a beat "
        "on AXI4-Stream ports (default io_parallel)",
    )


def run(args) -> int:
    try:
        from eatt.hls.project import BuildError, synth, write_project  # hls4ml
    except ImportError as err:
        raise CommandError(
            f"hls needs hls4ml ({err}); nothing was written", EXIT_TOOL_MISSING
        ) from None
    if args.config and args.onnx:
        raise CommandError("give either --config or an ONNX file, not both")
    source = args.onnx if args.onnx else (load_config(args.config) if args.config else None)
    if source is None:
        source = default_config()
    if not args.onnx:
        check_vectors(source, args.vectors)
    kwargs = _project_options(args)
    if args.onnx:
        from eatt.hls import model_project  # hls4ml, qonnx

        if model_project.is_whole_model(args.onnx):
            return _hls_whole_model(args, kwargs, model_project)
    try:
        result = write_project(source, args.output, **_with_options(kwargs))
    except BuildError as err:  # g++ failed on the project: its output is above
        raise CommandError(str(err), EXIT_CHECK_FAILED) from None
    if args.synth and result["ok"]:
        try:
            result["synth"] = synth(args.output)
        except ToolMissing as err:
            raise CommandError(str(err), EXIT_TOOL_MISSING) from None

    def text(r: dict) -> str:
        c = r["csim"]
        lines = [
            f"hls4ml project ({r['backend']}) in {r['project']}",
            f"C simulation vs golden: {c['vectors']} {_vector_kind(c)} + {c['edge_vectors']} "
            "edge vectors, "
            f"{c['mismatches']} mismatching ({c['vectors_per_s']:.0f} vectors/s)",
        ]
        if c.get("first_mismatch"):
            lines.append(f"  first mismatch: {c['first_mismatch']}")
        lines[-1] += model_line(c.get("vs_model"), "C simulation")
        if r.get("folding"):
            from eatt.hls.folding import format_folded  # hls4ml, imported above

            lines.append(format_folded(r))
        lines.append("  result: " + ("PASS" if r["ok"] else "FAIL"))
        return "\n".join(lines)

    emit(result, args.json, text)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED


def _project_options(args) -> dict:
    """write_project's keyword arguments from the flags (only those given, beside the three
    every project takes)."""
    kwargs = {"seed": args.seed, "backend": args.backend, "vectors": args.vectors}
    if args.inputs:
        if not args.onnx:
            raise CommandError("--inputs: give the layer's FILE.onnx (eatt export --layer)")
        kwargs["inputs"] = args.inputs
    if args.part is not None:
        if not args.part.strip():
            raise CommandError("--part: must name an FPGA part, got an empty string")
        kwargs["part"] = args.part
    if args.clock is not None:
        kwargs["clock_ns"] = args.clock
    if args.reuse_factor is not None:
        kwargs["reuse_factor"] = args.reuse_factor
    parallelism = folding(args)
    if parallelism:
        kwargs["folding"] = parallelism
    if args.io_type != "io_parallel":
        kwargs["io_type"] = args.io_type
    return kwargs


def _with_options(kwargs: dict) -> dict:
    """write_project's arguments: the flags of how the core is built (backend, reuse factor,
    folding) as one BuildOptions, the rest as they are."""
    rest = {k: v for k, v in kwargs.items() if k not in ("backend", "reuse_factor", "folding")}
    options = BuildOptions(
        backend=kwargs.get("backend", "vitis"),
        hls_reuse_factor=kwargs.get("reuse_factor"),
        folding=kwargs.get("folding"),
    )
    return {**rest, "options": options}


def _vector_kind(report: dict) -> str:
    """ "captured" or "random": the vectors a check ran before its edge vectors."""
    return "captured" if report.get("captured") else "random"


def _hls_whole_model(args, kwargs: dict, model_project) -> int:
    """eatt hls of a whole model's QONNX file (brevitas export_qonnx of a model with eatt.nn
    attention): hls4ml's project, its C simulation on random inputs against qonnx."""
    for key, flag in (("inputs", "--inputs"), ("folding", "--lanes/--simd/--pe"),
                      ("reuse_factor", "--reuse-factor"), ("io_type", "--io-type"),
                      ("part", "--part")):  # fmt: skip
        if key in kwargs:
            raise CommandError(f"{flag}: for a core file; {args.onnx} is a whole model")
    if args.synth:
        raise CommandError(f"--synth: for a core file; {args.onnx} is a whole model")
    check_output_dir(args.output, "hls4ml project")
    inputs = model_project.random_inputs(args.onnx, args.vectors, args.seed)
    options = {k: kwargs[k] for k in ("backend", "clock_ns") if k in kwargs}
    result = model_project.write_model_project(args.onnx, args.output, inputs, **options)

    def text(r: dict) -> str:
        return "\n".join(
            [
                f"hls4ml project ({r['backend']}) of the whole model {r['source']} in "
                f"{r['project']}",
                "layers: " + ", ".join(r["layers"]),
                f"C simulation vs qonnx execution: {r['vectors']} random inputs (seed "
                f"{args.seed}), {r['mismatches']} mismatching (max |diff| {r['max_abs_diff']:g})",
                "  result: " + ("PASS" if r["ok"] else "FAIL"),
                *_inexact_lines(r),
            ]
        )

    emit(result, args.json, text)
    return EXIT_OK if result["ok"] else EXIT_CHECK_FAILED


def _inexact_lines(r: dict) -> list[str]:
    """Under a failed whole-model check: what in the graph fixed point cannot equal."""
    found = r.get("inexact") or []
    if r["ok"] or not found:
        return []
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return [
        f"  fixed point cannot equal the float graph here: {found[0]}{more}; quantize on "
        "power-of-two grids (eatt.quant.modules.fixed_point_act_quant / "
        "fixed_point_weight_quant, a QuantLinear's bias_quant; docs/own_model.md, section 6)"
    ]
