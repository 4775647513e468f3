"""Library API of the hls stage: QONNX core -> hls4ml project, C simulation vs golden, synthesis.

    write_project(source, out_dir, options=BuildOptions(), part=None, clock_ns=5.0, vectors=1000)
        convert with hls4ml (our extension registered), write the project, compile the C
        simulation (g++ and hls4ml's bundled ap_types), run `vectors` random + the edge vectors
        through it and compare every output with GoldenCore; returns a dict (docs/hls.md)
    synth(out_dir, backend="vitis")
        run the vendor C synthesis in a project written by write_project and parse its report;
        ToolMissing (naming the tool and the ready project) where the tool is not on PATH
    parse_csynth_report(path)
        latency, interval and resources from a C-synthesis report (csynth.xml)

Missing tools are eatt.rtl_sim.tools.ToolMissing (re-exported here; one class for every tool,
the CLI's exit 3): g++ is looked for before any work, a vendor tool by synth. A g++ that fails
is BuildError. Output folders follow eatt.outdir (a user's folder is refused with OutputError).

`source` is a QONNX file written by eatt.quant.export, an onnx.ModelProto, a (CoreConfig,
CoreWeights) pair, or a CoreConfig alone (deterministic random weights from `seed`).

A masked core (key_padding / causal) has the integer inputs L, O after X, Y: each checked
vector carries its length / offset (quant.golden.vector_masks), fed to the C simulation, written
to tb_data/ and given to GoldenCore.forward(x, y, masks=...).

Kind window (a window config or a WindowAttention file) goes through the same calls: the
project holds one WindowAttention layer (templates/nnet_window_attention.h), its C simulation is
compared with eatt.quant.window.WindowGolden on random steps (quant.window.random_window_inputs)
plus the edge steps (quant.export.window_edge_inputs: windows at both sequence edges, w = 0, a
one-row memory, the widest sums, L0Drop compacted memories).

Its pieces, their names importable from here too: eatt.hls.convert (the hls4ml conversion, its
options), eatt.hls.unit_types (each unit's input types and changes to the converted model) and
eatt.hls.csim (the checked vectors, the C simulation's run, tb_data/).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import yaml

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig

# the names marked F401 live in eatt.hls.convert / eatt.hls.csim / eatt.hls.unit_types and are
# re-exported here, their first home (callers import them from eatt.hls.project)
from eatt.hls.convert import (
    BACKENDS,  # noqa: F401
    IO_TYPES,  # noqa: F401
    PART_PATTERN,  # noqa: F401
    PROJECT_NAME,
    _is_int,
    check_options,
    convert,
    stdout_to_stderr,
)
from eatt.hls.csim import (
    _write_tb,
    compare,
    core_check_data,  # noqa: F401
    folded_iterations,
    predict_codes,
    run_csim,  # noqa: F401
    window_check_data,  # noqa: F401
    write_testbench_data,  # noqa: F401
)
from eatt.hls.csim_cache import compile_csim
from eatt.hls.folding import ITERATION_FORMULA, hls_iterations, resolve_folding
from eatt.hls.handlers import ConversionError
from eatt.hls.unit_types import (  # noqa: F401
    core_hls_finish,
    core_hls_ports,
    window_hls_finish,
    window_hls_ports,
    window_port_types,
)
from eatt.outdir import check_output_dir, replaced_dir
from eatt.progress import step
from eatt.quant.golden import CoreWeights, random_weights
from eatt.quant.ops import DOMAIN, OP_TYPE, WINDOW_OP_TYPE
from eatt.quant.vectors import compare_model, load_capture, load_window_capture, model_outputs
from eatt.rtl_sim.tools import ToolMissing  # one class for every missing tool (CLI exit 3)
from eatt.units import unit_for

#: ONNX node types the extension converts (anything else is a ConversionError naming the node)
SUPPORTED_NODES = {
    ("qonnx.custom_op.general", "Quant"),
    (DOMAIN, OP_TYPE),
    (DOMAIN, WINDOW_OP_TYPE),
}
#: the file in every project directory that records what was built (and, in projects written
#: before eatt.outdir's marker, the one that marks it as ours)
METADATA = "eatt_hls.json"


def is_legacy_project(path: Path) -> bool:
    """An eatt HLS project written before the output marker existed: it has METADATA and
    nothing but what hls4ml, eatt and the vendor tools write there (a user's file makes it not
    ours)."""
    if not (path / METADATA).is_file():
        return False
    for entry in path.iterdir():
        name = entry.name
        if entry.is_dir():
            if name not in ("firmware", "tb_data") and not name.endswith("_prj"):
                return False
        elif not name.endswith((".tcl", ".sh", ".cpp", ".h", ".yml", ".json", ".log", ".so")):
            return False
    return True


#: the C++ compiler hls4ml's build_lib.sh calls (CC=g++, run by /bin/bash) for compile()
CSIM_COMPILER = "g++"


class BuildError(RuntimeError):
    """The C-simulation library did not build (g++ failed); one line, the compiler's output
    went to stderr before it."""


def _tool_missing(tool: str, project: str | os.PathLike, command: str | None = None):
    """ToolMissing for a vendor tool: the message names the tool and the ready project;
    ``err.tool`` and ``err.project`` say the same for callers."""
    command = command or synth_command(tool)
    err = ToolMissing(
        f"{tool} not found on PATH; the HLS project is ready in {project} "
        f"(copy it to a machine with {tool} and run there: {command})"
    )
    err.tool, err.project = tool, str(project)
    return err


def check_csim_tools() -> None:
    """ToolMissing (one line, naming the tool) when hls4ml's C-simulation build cannot run:
    its build_lib.sh is a bash script that calls g++."""
    if shutil.which(CSIM_COMPILER) is None:
        raise ToolMissing(
            f"{CSIM_COMPILER} not found: hls4ml's C simulation needs a C++ compiler "
            "(apt-get install g++)"
        )
    if not os.access("/bin/bash", os.X_OK):
        raise ToolMissing("/bin/bash not found: hls4ml's C-simulation build script runs in bash")


# -- input -------------------------------------------------------------------------------------
def load_source(source: Any, seed: int = 1) -> tuple[onnx.ModelProto, CoreConfig, CoreWeights, str]:
    """(ONNX model, config, weights, description) from any accepted source.

    Every node must be one the extension converts; a file that is not a valid eatt core is a
    ConversionError (a ValueError) whose message names the file and the node at fault.
    """
    from eatt.quant.export import build_model, load_core

    if isinstance(source, CoreConfig):
        cfg, weights = source, random_weights(source, seed=seed)
        return build_model(cfg, weights), cfg, weights, f"config (seed {seed})"
    if isinstance(source, tuple) and len(source) == 2 and isinstance(source[0], CoreConfig):
        cfg, weights = source
        return build_model(cfg, weights), cfg, weights, "config + weights"
    if isinstance(source, onnx.ModelProto):
        model, where = source, "model"
    else:
        where = str(source)
        if not Path(where).is_file():
            raise ValueError(f"{where}: no such file")
        try:
            model = onnx.load(where)
        except Exception as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ValueError(f"{where}: not an ONNX file ({first})") from None
    for node in model.graph.node:
        if (node.domain, node.op_type) not in SUPPORTED_NODES:
            op = f"{node.domain}.{node.op_type}" if node.domain else node.op_type
            raise ConversionError(
                f"{where}: node '{node.name}' ({op}) is not supported by the eatt hls4ml "
                "extension (supported: Quant inputs feeding one AttentionCore or WindowAttention)"
            )
    try:
        cfg, weights = load_core(model)
    except ValueError as err:
        raise ConversionError(f"{where}: {err}".replace("model: ", "", 1)) from None
    return model, cfg, weights, where


# -- the project -------------------------------------------------------------------------------
def _formats(cfg: CoreConfig) -> dict:
    return unit_for(cfg).load("formats")(cfg).to_dict()  # the unit's derived formats


def check_data(
    model: onnx.ModelProto,
    cfg: CoreConfig,
    weights: CoreWeights,
    vectors: int,
    seed: int,
    capture: dict | None = None,
) -> tuple[list[np.ndarray], np.ndarray, int, int]:
    """The checked vectors: (real inputs, one (n, features) array per graph input in graph
    order; golden output codes; output fraction; number of edge vectors, which come last).
    ``capture``: the unit's captured vectors (load_capture / load_window_capture) replace the
    random ones. Dispatches to the unit's (eatt.units: eatt.hls.csim.core_check_data,
    window_check_data)."""
    return unit_for(cfg).load("hls_check_data")(model, cfg, weights, vectors, seed, capture)


def _slug(folding: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in folding.items())


def _final_paths(hls_model, tmp: Path, out_dir: Path) -> None:
    """Make the project written in tmp name out_dir, where it will lie: hls4ml_config.yml is
    dumped again with OutputDir = out_dir (as hls4ml's writer dumps it), and any other text file
    that names tmp is rewritten (hls4ml 1.3 writes none; a later release might)."""
    from hls4ml.writer.vivado_writer import config_filename

    hls_model.config.config["OutputDir"] = str(out_dir)
    with open(tmp / config_filename, "w") as file:
        yaml.dump(hls_model.config.config, file)
    old, new = str(tmp).encode(), str(out_dir).encode()
    for path in tmp.rglob("*"):
        if not path.is_file() or path.is_symlink() or path.name == config_filename:
            continue
        data = path.read_bytes()
        if old in data and b"\0" not in data:  # text files only; a binary keeps its bytes
            path.write_bytes(data.replace(old, new))


def write_project(
    source: Any,
    out_dir: str | os.PathLike,
    *,
    options: BuildOptions | None = None,
    seed: int = 1,
    part: str | None = None,
    clock_ns: float = 5.0,
    io_type: str = "io_parallel",
    vectors: int = 1000,
    vector_seed: int = 1,
    tb_vectors: int = 100,
    compile: bool = True,
    inputs: str | os.PathLike | None = None,
) -> dict:
    """Convert the core, write its hls4ml project to out_dir, compile and check the C simulation.

    out_dir is checked before any work (eatt.outdir: a folder that is not empty and not ours is
    refused with OutputError), and so is g++ when compile is true (ToolMissing). The project is
    written to a temporary sibling folder and replaces out_dir only when complete, so a second
    call leaves no stale files; every path inside it names out_dir. tb_data/ holds the edge
    vectors and the first random ones (tb_vectors in all) with the golden outputs, which the
    project's own testbench (vendor C simulation / co-simulation) reads. With compile=False only
    the project is written (no g++, no C simulation; "csim" is None). Conversion, the g++ build
    and the C simulation report their progress on stderr (eatt.progress).

    ``options`` (eatt.build_options.BuildOptions; default BuildOptions()): how the core is
    built: its ``backend`` (vitis or vivado), ``hls_reuse_factor`` and ``folding``. A reuse
    factor (default: the config's, 1 for a QONNX file) > 1, or a ``folding`` ({lanes, simd,
    pe}, any of them), writes the folded layer (eatt.hls.folding, docs/hls.md "Folded"):
    the result then has "folding" and "iterations" (the formula), and its "csim" the iterations
    the C simulation counted per call ("iterations_per_call"). io_type "io_stream" writes the
    folded layer with hls4ml's streams (one token a beat; the folded layer only).

    Returns {"project", "backend", "part", "clock_ns", "source", "config", "csim": {"vectors",
    "edge_vectors", "mismatches", "first_mismatch", "compile_s", "csim_s", "vectors_per_s"},
    "ok"}.
    """
    options = BuildOptions() if options is None else options
    backend, reuse_factor, folding = options.backend, options.hls_reuse_factor, options.folding
    if not _is_int(vectors) or vectors < 0:
        raise ValueError(f"vectors: must be a non-negative integer, got {vectors!r}")
    if not _is_int(tb_vectors) or tb_vectors < 0:
        raise ValueError(f"tb_vectors: must be a non-negative integer, got {tb_vectors!r}")
    check_options(backend, part, clock_ns, 1 if reuse_factor is None else reuse_factor, io_type)
    out_dir = check_output_dir(out_dir, "hls4ml project", legacy=is_legacy_project)
    if compile:
        try:
            check_csim_tools()
        except ToolMissing as err:
            raise ToolMissing(
                f"{err}; nothing was written (compile=False writes the project alone)"
            ) from None
    model, cfg, weights, where = load_source(source, seed=seed)
    if reuse_factor is None:
        reuse_factor = getattr(cfg, "reuse_factor", 1)
    folding = resolve_folding(cfg, reuse_factor, folding)
    if io_type == "io_stream" and folding is None:
        raise ValueError(
            "--io-type io_stream: the folded layer's (give --reuse-factor R > 1 or "
            "--lanes/--simd/--pe); the unrolled core is io_parallel"
        )
    iterations = None  # the folded layer's pipelined-loop iterations per call (the formula)
    if folding is not None:
        stream = io_type == "io_stream"
        iterations = {**hls_iterations(cfg, **folding, stream=stream), "formula": ITERATION_FORMULA}
    capture = None
    if inputs is not None and unit_for(cfg).name == "window":  # a windowed layer's steps
        capture = load_window_capture(inputs, cfg, vectors)
        vectors = len(capture["steps"]["x"])
    elif inputs is not None:
        if unit_for(cfg).name != "core":
            raise ValueError(f"--inputs: captures are of attention cores, not a {cfg.kind} unit")
        capture = load_capture(inputs, cfg)
        vectors = min(vectors, len(capture["x"]))
    with replaced_dir(out_dir, "hls4ml project", legacy=is_legacy_project) as tmp:
        with stdout_to_stderr():
            what = f"the {cfg.kind} core" + (f", folded {_slug(folding)}" if folding else "")
            with step(f"hls4ml conversion of {what} ({backend})"):
                hls_model = convert(
                    model, cfg, tmp, backend, part, clock_ns, reuse_factor, folding, io_type
                )
                reals, expected, out_frac, n_edge = check_data(
                    model, cfg, weights, vectors, vector_seed, capture
                )
                hls_model.write()
            csim = None
            if compile:
                with step(f"g++ build of the C simulation in {out_dir}") as built:
                    try:
                        # compile() = write() (done above) + this, through the library cache
                        cached = compile_csim(hls_model)
                    except Exception as err:  # hls4ml raises a bare Exception
                        raise BuildError(
                            f"g++ could not build the C simulation ({err}; the compiler's "
                            "output is above on stderr); nothing was written"
                        ) from None
                if folding:
                    folded_iterations(hls_model, reset=True)
                with step(f"C simulation of {len(expected)} vectors") as ran:
                    got = predict_codes(hls_model, reals, expected.shape, out_frac)
                csim = compare(expected, got, vectors, vector_seed, capture is not None)
                if capture is not None and unit_for(cfg).name == "core":
                    model = model_outputs(capture, cfg, vectors)
                    csim["vs_model"] = compare_model(model, got[:vectors])
                if folding:
                    counted = folded_iterations(hls_model, reset=True)
                    csim["iterations_per_call"] = counted / len(expected)
                csim.update(
                    compile_s=round(built.seconds, 3),
                    compile_cached=cached,
                    csim_s=round(ran.seconds, 4),
                    vectors_per_s=(
                        round(len(expected) / ran.seconds, 1) if ran.seconds > 0 else None
                    ),
                )
        result = {
            "project": str(out_dir),
            "backend": backend,
            "part": hls_model.config.get_config_value("Part"),
            "clock_ns": clock_ns,
            "reuse_factor": reuse_factor,
            "io_type": io_type,
            "folding": folding,
            "iterations": iterations,
            "source": where,
            "config": cfg.to_dict(),
            "formats": _formats(cfg),
            "csim": csim,
            "ok": csim is None
            or (
                csim["mismatches"] == 0
                and not (csim.get("vs_model") or {}).get("mismatches")
                and (iterations is None or csim["iterations_per_call"] == iterations["total"])
            ),
        }
        _write_tb(tmp, reals, expected, out_frac, n_edge, tb_vectors)
        _final_paths(hls_model, tmp, out_dir)
        (tmp / METADATA).write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")
    return result


# -- vendor synthesis --------------------------------------------------------------------------
#: tools that run a project's build_prj.tcl, per backend, in order of preference
SYNTH_TOOLS = {"vitis": ("vitis-run", "vitis_hls"), "vivado": ("vivado_hls",)}


def synth_command(tool: str) -> str:
    """The shell command that runs C synthesis in a project directory with `tool`."""
    if tool == "vitis-run":
        return "vitis-run --mode hls --tcl build_prj.tcl"
    if tool == "vitis_hls":
        return "vitis_hls -f build_prj.tcl"
    return (
        'vivado_hls -f build_prj.tcl "reset=1 csim=0 synth=1 cosim=0 validation=0 export=0 '
        'vsynth=0"'
    )


def synth(out_dir: str | os.PathLike, backend: str | None = None) -> dict:
    """Run C synthesis in a project written by write_project; parse its csynth.xml.

    Raises ToolMissing (naming the tool and the project) when no vendor tool is on PATH.
    """
    out_dir = Path(out_dir)
    meta_file = out_dir / METADATA
    if not meta_file.is_file():
        raise ValueError(f"{out_dir}: not an eatt HLS project ({METADATA} missing)")
    backend = backend or json.loads(meta_file.read_text())["backend"]
    if backend not in SYNTH_TOOLS:
        raise ValueError(f"backend: {backend!r} is not one of {', '.join(SYNTH_TOOLS)}")
    tool = next((t for t in SYNTH_TOOLS[backend] if shutil.which(t)), None)
    if tool is None:
        tools = SYNTH_TOOLS[backend]
        raise _tool_missing(" or ".join(tools), out_dir, synth_command(tools[0]))
    (out_dir / "build_opt.tcl").write_text(
        "array set opt {\n    reset 1\n    csim 0\n    synth 1\n    cosim 0\n"
        "    validation 0\n    export 0\n    vsynth 0\n    fifo_opt 0\n}\n"
    )
    with open(out_dir / "synth.log", "w") as log:
        proc = subprocess.run(
            synth_command(tool), shell=True, cwd=out_dir, stdout=log, stderr=subprocess.STDOUT
        )
    if proc.returncode != 0:
        raise RuntimeError(f"{tool} failed (exit {proc.returncode}); see {out_dir / 'synth.log'}")
    reports = sorted(out_dir.glob(f"**/syn/report/{PROJECT_NAME}_csynth.xml"))
    if not reports:
        raise RuntimeError(f"{tool} wrote no {PROJECT_NAME}_csynth.xml under {out_dir}")
    return parse_csynth_report(reports[0])


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None  # "undef" where the tool cannot bound a latency


def _float_or_none(text: str | None) -> float | None:
    try:
        return float(str(text).strip())
    except (TypeError, ValueError):
        return None


def parse_csynth_report(path: str | os.PathLike) -> dict:
    """Latency, interval and resources of a C-synthesis report (Vivado/Vitis HLS csynth.xml).

    Returns {"top", "part", "target_clock_ns", "estimated_clock_ns", "latency_cycles" (worst
    case), "latency_best_cycles", "interval_cycles" (worst case), "interval_min_cycles",
    "resources": {"LUT", "FF", "DSP", "BRAM" (18K blocks), "URAM"}, "available": {same keys}}.
    Missing or "undef" values are None. A file that is not such a report is a ValueError.
    """
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as err:
        raise ValueError(f"{path}: not a C-synthesis report ({err})") from None
    perf = root.find("PerformanceEstimates")
    area = root.find("AreaEstimates")
    if perf is None or area is None:
        raise ValueError(
            f"{path}: not a C-synthesis report (no PerformanceEstimates/AreaEstimates)"
        )

    def text(node, where: str) -> str | None:
        found = node.find(where) if node is not None else None
        return found.text if found is not None else None

    def resources(node) -> dict[str, int | None]:
        names = {"LUT": ("LUT",), "FF": ("FF",), "DSP": ("DSP", "DSP48E"), "BRAM": ("BRAM_18K",)}
        names["URAM"] = ("URAM",)
        return {
            key: next((_int_or_none(text(node, t)) for t in tags if text(node, t)), None)
            for key, tags in names.items()
        }

    lat = "SummaryOfOverallLatency/"
    return {
        "top": text(root, "UserAssignments/TopModelName"),
        "part": text(root, "UserAssignments/Part"),
        "target_clock_ns": _float_or_none(text(root, "UserAssignments/TargetClockPeriod")),
        "estimated_clock_ns": _float_or_none(
            text(perf, "SummaryOfTimingAnalysis/EstimatedClockPeriod")
        ),
        "latency_cycles": _int_or_none(text(perf, lat + "Worst-caseLatency")),
        "latency_best_cycles": _int_or_none(text(perf, lat + "Best-caseLatency")),
        "interval_cycles": _int_or_none(text(perf, lat + "Interval-max")),
        "interval_min_cycles": _int_or_none(text(perf, lat + "Interval-min")),
        "resources": resources(area.find("Resources")),
        "available": resources(area.find("AvailableResources")),
    }
