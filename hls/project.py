"""Library API of the hls stage: QONNX core -> hls4ml project, C simulation vs golden, synthesis.

    write_project(source, out_dir, backend="vitis", part=None, clock_ns=5.0, vectors=1000)
        convert with hls4ml (our extension registered), write the project, compile the C
        simulation (g++ and hls4ml's bundled ap_types), run `vectors` random + the edge vectors
        through it and compare every output with GoldenCore; returns a dict (docs/hls.md)
    synth(out_dir, backend="vitis")
        run the vendor C synthesis in a project written by write_project and parse its report;
        ToolMissing (naming the tool and the ready project) where the tool is not on PATH
    parse_csynth_report(path)
        latency, interval and resources from a C-synthesis report (csynth.xml)

`source` is a QONNX file written by eatt.quant.export, an onnx.ModelProto, a (CoreConfig,
CoreWeights) pair, or a CoreConfig alone (deterministic random weights from `seed`).

Kind window (a window config or a WindowAttention file) goes through the same calls: the
project holds one WindowAttention layer (templates/nnet_window_attention.h), its C simulation is
compared with eatt.quant.window.WindowGolden on random steps (quant.window.random_window_inputs)
plus the edge steps (quant.export.window_edge_inputs: windows at both sequence edges, w = 0, a
one-row memory, the widest sums, L0Drop compacted memories).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from eatt.config import CoreConfig
from eatt.hls import register
from eatt.hls.handlers import ConversionError
from eatt.quant.golden import (
    CoreWeights,
    GoldenCore,
    derive_formats,
    edge_inputs,
    random_inputs,
    random_weights,
    vector_report,
)
from eatt.quant.ops import (
    DOMAIN,
    OP_TYPE,
    WINDOW_OP_TYPE,
    lsb_frac,
    window_derived_attributes,
    window_input_fracs,
    window_input_names,
)

#: backend name (ours, lower case) -> hls4ml backend name
BACKENDS = {"vitis": "Vitis", "vivado": "Vivado"}
#: ONNX node types the extension converts (anything else is a ConversionError naming the node)
SUPPORTED_NODES = {
    ("qonnx.custom_op.general", "Quant"),
    (DOMAIN, OP_TYPE),
    (DOMAIN, WINDOW_OP_TYPE),
}
#: the file in every project directory that marks it as ours (and records what was built)
METADATA = "eatt_hls.json"
PROJECT_NAME = "myproject"


class ToolMissing(RuntimeError):
    """A vendor tool is not on PATH; the project directory is ready to copy where it is."""

    def __init__(self, tool: str, project: str | os.PathLike, command: str | None = None):
        self.tool = tool
        self.project = str(project)
        command = command or synth_command(tool)
        super().__init__(
            f"{tool} not found on PATH; the HLS project is ready in {self.project} "
            f"(copy it to a machine with {tool} and run there: {command})"
        )


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


# -- conversion --------------------------------------------------------------------------------
@contextlib.contextmanager
def stdout_to_stderr():
    """Send fd 1 (hls4ml's prints, g++ output) to stderr: --json keeps stdout for the result."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def convert(
    model: onnx.ModelProto,
    cfg: CoreConfig,
    out_dir: str | os.PathLike,
    backend: str = "vitis",
    part: str | None = None,
    clock_ns: float = 5.0,
    reuse_factor: int = 1,
):
    """hls4ml ModelGraph of the core (not yet written): inputs typed exactly as the core's."""
    import hls4ml

    register()
    if backend not in BACKENDS:
        raise ValueError(f"backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    if isinstance(reuse_factor, bool) or not isinstance(reuse_factor, int) or reuse_factor < 1:
        raise ValueError(f"reuse_factor: must be a positive integer, got {reuse_factor!r}")
    in_type = f"fixed<{cfg.in_bits},{cfg.in_bits - cfg.in_frac}>"
    inputs = [i.name for i in model.graph.input]
    # hls4ml's default input type is fixed<16,6>: give the inputs the core's own grid
    types = window_port_types(cfg) if cfg.kind == "window" else dict.fromkeys(inputs, in_type)
    hls_config = {
        "Model": {"Precision": "fixed<16,6>", "ReuseFactor": reuse_factor, "Strategy": "Latency"},
        "LayerName": {name: {"Precision": {"result": types[name]}} for name in inputs},
    }
    if cfg.kind == "window":
        # not a pipelined top (which would unroll the window loops): the loops carry their own
        # PIPELINE II=1 (templates/nnet_window_attention.h)
        hls_config["Model"]["PipelineStyle"] = "dataflow"
    kwargs: dict[str, Any] = {"clock_period": clock_ns}
    if part:
        kwargs["part"] = part
    hls_model = hls4ml.converters.convert_from_onnx_model(
        model,
        output_dir=str(out_dir),
        project_name=PROJECT_NAME,
        backend=BACKENDS[backend],
        io_type="io_parallel",
        hls_config=hls_config,
        # weights as initialized C arrays, not .txt files read at run time from an absolute
        # path: the compiled library does not depend on where the project lies
        write_weights_txt=False,
        **kwargs,
    )
    if cfg.kind == "window":
        # the memory arrays: one row (dim codes) per word, so a window row is read per cycle
        for var in hls_model.get_input_variables():
            if var.name in ("K", "V"):
                var.pragma = ("reshape", "cyclic", cfg.dim)
    return hls_model


def window_port_types(cfg: CoreConfig) -> dict[str, str]:
    """hls4ml precision of each graph input of a window file (the grids of window_input_fracs)."""
    from eatt.hls.handlers import window_layer_attributes
    from eatt.hls.layers import fixed_port

    d = window_derived_attributes(cfg)
    ib = window_layer_attributes(cfg)["int_bits"]
    bits = {"X": cfg.in_bits, "K": d["qk_code_bits"], "V": d["v_code_bits"]}
    types = {}
    for name, frac in window_input_fracs(cfg).items():
        t = fixed_port(bits[name], frac) if name in bits else fixed_port(ib, 0)
        types[name] = f"fixed<{t.width},{t.integer}>"
    return types


def _vectors(cfg: CoreConfig, vectors: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = random_inputs(cfg, vectors, seed=seed)
    ex, ey = edge_inputs(cfg)
    return np.concatenate([x, ex]), np.concatenate([y, ey])


def run_csim(hls_model, cfg: CoreConfig, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Integer output codes of the compiled C simulation for integer input codes x, y."""
    scale = 2.0**-cfg.in_frac
    n = len(x)
    feed = [
        np.ascontiguousarray((x.reshape(n, -1) * scale).astype(np.float64)),
        np.ascontiguousarray((y.reshape(n, -1) * scale).astype(np.float64)),
    ]
    out = np.asarray(hls_model.predict(feed), dtype=np.float64).reshape(n, cfg.len_q, cfg.dim)
    codes = out * 2.0 ** lsb_frac(derive_formats(cfg).out_lsb)
    rounded = np.rint(codes)
    if not np.array_equal(rounded, codes):
        raise RuntimeError("C simulation output is not on the core's output grid")
    return rounded.astype(np.int64)


def compare(expected: np.ndarray, got: np.ndarray, vectors: int, seed: int) -> dict:
    """{"vectors", "edge_vectors", "mismatches", "first_mismatch"} (golden.vector_report)."""
    return vector_report(expected, got, vectors, seed)


def write_testbench_data(
    project: Path, cfg: CoreConfig, x: np.ndarray, y: np.ndarray, expected: np.ndarray, n: int
) -> None:
    """tb_data/tb_input_features.dat (X then Y per line) and tb_output_predictions.dat (golden
    outputs), real values, edge vectors first: the files hls4ml's myproject_test.cpp reads."""
    in_scale = 2.0**-cfg.in_frac
    out_frac = lsb_frac(derive_formats(cfg).out_lsb)
    edges = len(edge_inputs(cfg)[0])
    _write_tb(project, [x * in_scale, y * in_scale], expected, out_frac, edges, n)


def _formats(cfg: CoreConfig) -> dict:
    if cfg.kind == "window":
        from eatt.quant.window import derive_window_formats

        return derive_window_formats(cfg).to_dict()
    return derive_formats(cfg).to_dict()


def check_data(
    model: onnx.ModelProto, cfg: CoreConfig, weights: CoreWeights, vectors: int, seed: int
) -> tuple[list[np.ndarray], np.ndarray, int, int]:
    """The checked vectors: (real inputs, one (n, features) array per graph input in graph
    order; golden output codes; output fraction; number of edge vectors, which come last)."""
    if cfg.kind != "window":
        x, y = _vectors(cfg, vectors, seed)
        n, scale = len(x), 2.0**-cfg.in_frac
        reals = [x.reshape(n, -1) * scale, y.reshape(n, -1) * scale]
        expected = GoldenCore(cfg, weights).forward(x, y)
        return reals, expected, lsb_frac(derive_formats(cfg).out_lsb), len(edge_inputs(cfg)[0])
    from eatt.quant.export import WINDOW_STEP_NAMES, core_input_names, window_vectors
    from eatt.quant.window import WindowGolden

    steps, n_edge = window_vectors(cfg, vectors, seed)
    expected = WindowGolden(cfg, weights).forward(**steps)
    n = len(expected)
    fracs = window_input_fracs(cfg)
    by_graph_name = dict(zip(core_input_names(model), window_input_names(cfg), strict=True))
    reals = []
    for vi in model.graph.input:
        label = by_graph_name[vi.name]
        codes = steps[WINDOW_STEP_NAMES[label]].reshape(n, -1).astype(np.float64)
        reals.append(codes * 2.0 ** -fracs[label])
    return reals, expected, fracs["V"], n_edge


def predict_codes(hls_model, reals: list[np.ndarray], shape: tuple, out_frac: int) -> np.ndarray:
    """Integer output codes of the compiled C simulation for real inputs (check_data)."""
    feed = [np.ascontiguousarray(r, dtype=np.float64) for r in reals]
    out = np.asarray(hls_model.predict(feed if len(feed) > 1 else feed[0]), dtype=np.float64)
    codes = out.reshape(shape) * 2.0**out_frac
    rounded = np.rint(codes)
    if not np.array_equal(rounded, codes):
        raise RuntimeError("C simulation output is not on the core's output grid")
    return rounded.astype(np.int64)


def _write_tb(
    project: Path,
    reals: list[np.ndarray],
    expected: np.ndarray,
    out_frac: int,
    edges: int,
    n: int,
) -> None:
    """tb_data/tb_input_features.dat (every input of a vector, in graph order, per line) and
    tb_output_predictions.dat (golden outputs), real values, edge vectors first: the files
    hls4ml's myproject_test.cpp reads."""
    total = len(expected)
    order = np.r_[np.arange(total - edges, total), np.arange(total - edges)][:n]
    tb = project / "tb_data"
    tb.mkdir(exist_ok=True)
    with (
        open(tb / "tb_input_features.dat", "w") as fin,
        open(tb / "tb_output_predictions.dat", "w") as fpr,
    ):
        for i in order:
            row = np.concatenate([r[i].ravel() for r in reals])
            fin.write(" ".join(repr(float(v)) for v in row) + "\n")
            out = expected[i].ravel() * 2.0**-out_frac
            fpr.write(" ".join(repr(float(v)) for v in out) + "\n")


def _replace_dir(tmp: Path, out_dir: Path) -> None:
    """Move tmp onto out_dir; an existing project there is removed whole (no stale files)."""
    if out_dir.exists():
        if not out_dir.is_dir():
            raise ValueError(f"{out_dir}: exists and is not a directory")
        if any(out_dir.iterdir()) and not (out_dir / METADATA).is_file():
            raise ValueError(
                f"{out_dir}: not empty and not an eatt HLS project ({METADATA} missing); "
                "refusing to replace it"
            )
        old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
        os.replace(out_dir, old / out_dir.name)
        os.replace(tmp, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out_dir)


def write_project(
    source: Any,
    out_dir: str | os.PathLike,
    *,
    seed: int = 1,
    backend: str = "vitis",
    part: str | None = None,
    clock_ns: float = 5.0,
    reuse_factor: int = 1,
    vectors: int = 1000,
    vector_seed: int = 1,
    tb_vectors: int = 100,
    compile: bool = True,
) -> dict:
    """Convert the core, write its hls4ml project to out_dir, compile and check the C simulation.

    The project is written to a temporary sibling directory and moved onto out_dir only when
    complete, so a second call leaves no stale files. tb_data/ holds the edge vectors and the
    first random ones (tb_vectors in all) with the golden outputs, which the project's own
    testbench (vendor C simulation / co-simulation) reads. With compile=False only the project is
    written (no g++, no C simulation; "csim" is None).

    Returns {"project", "backend", "part", "clock_ns", "source", "config", "csim": {"vectors",
    "edge_vectors", "mismatches", "first_mismatch", "compile_s", "csim_s", "vectors_per_s"},
    "ok"}.
    """
    if isinstance(vectors, bool) or not isinstance(vectors, int) or vectors < 0:
        raise ValueError(f"vectors: must be a non-negative integer, got {vectors!r}")
    model, cfg, weights, where = load_source(source, seed=seed)
    out_dir = Path(out_dir).resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        with stdout_to_stderr():
            hls_model = convert(model, cfg, tmp, backend, part, clock_ns, reuse_factor)
            reals, expected, out_frac, n_edge = check_data(
                model, cfg, weights, vectors, vector_seed
            )
            csim = None
            if compile:
                start = time.perf_counter()
                hls_model.compile()
                compile_s = time.perf_counter() - start
                start = time.perf_counter()
                got = predict_codes(hls_model, reals, expected.shape, out_frac)
                csim_s = time.perf_counter() - start
                csim = compare(expected, got, vectors, vector_seed)
                csim.update(
                    compile_s=round(compile_s, 3),
                    csim_s=round(csim_s, 4),
                    vectors_per_s=round(len(expected) / csim_s, 1) if csim_s > 0 else None,
                )
            else:
                hls_model.write()
        result = {
            "project": str(out_dir),
            "backend": backend,
            "part": hls_model.config.get_config_value("Part"),
            "clock_ns": clock_ns,
            "reuse_factor": reuse_factor,
            "source": where,
            "config": cfg.to_dict(),
            "formats": _formats(cfg),
            "csim": csim,
            "ok": csim is None or csim["mismatches"] == 0,
        }
        _write_tb(tmp, reals, expected, out_frac, n_edge, tb_vectors)
        (tmp / METADATA).write_text(json.dumps(result, indent=2) + "\n")
        _replace_dir(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
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
        raise ToolMissing(" or ".join(tools), out_dir, synth_command(tools[0]))
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
