"""hls4ml project of a whole model: a QONNX file that holds eatt's AttentionCore among other
layers (``brevitas.export.export_qonnx`` of your own model; docs/own_model.md).

    write_model_project(path, out_dir, inputs)   qonnx cleanup, hls4ml conversion with eatt's
                                                 layers registered, the C simulation on
                                                 ``inputs`` compared with qonnx's execution

hls4ml converts what it has layers for (Quant, MatMul by a constant, ReLU, ... and eatt's
attention); a node it has none for is refused in one line naming it, before anything is
written. The project folder follows eatt's output-folder rules (written beside, renamed into
place). The default precision of the layers eatt does not type is wide (``precision``), so the
C simulation computes what the QONNX graph computes; narrow it per layer in hls4ml's config for
synthesis.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from eatt.hls import register
from eatt.hls.csim_cache import compile_csim
from eatt.hls.project import BACKENDS, PROJECT_NAME, _final_paths, stdout_to_stderr
from eatt.outdir import replaced_dir
from eatt.progress import step

#: the default precision of every layer eatt does not type (wide enough to be exact on the
#: Quant grids of the layers around an attention core)
PRECISION = "fixed<48,24>"


def _model(path: Path):
    """The file as qonnx's ModelWrapper after its cleanup (shapes, names, constants folded)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.infer_shapes import InferShapes
    from qonnx.util.cleanup import cleanup_model

    try:
        wrapped = ModelWrapper(str(path))
    except Exception as err:  # noqa: BLE001 - onnx's parse errors are long
        raise ValueError(f"{path}: not an ONNX file ({type(err).__name__})") from None
    return cleanup_model(wrapped).transform(InferShapes())


def is_whole_model(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an ONNX model holding an eatt AttentionCore among other layers (not a
    core file of `eatt export`, which write_project takes)."""
    import onnx

    from eatt.quant.export import load_core
    from eatt.quant.ops import DOMAIN

    try:
        load_core(path)
        return False
    except ValueError:
        pass
    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception:  # noqa: BLE001 - not ONNX: write_project says so
        return False
    return any(n.domain == DOMAIN for n in graph.node)


def random_inputs(path: str | os.PathLike, n: int, seed: int = 1) -> list[np.ndarray]:
    """``n`` random inputs for each input of the model (normal, standard deviation 2: across
    the usual Quant ranges), in the graph's order."""
    model = _model(Path(path))
    rng = np.random.default_rng(seed)
    shapes = [[d.dim_value for d in i.type.tensor_type.shape.dim][1:] for i in model.graph.input]
    return [rng.normal(0.0, 2.0, (n, *shape)).astype(np.float32) for shape in shapes]


def unsupported(model) -> list[str]:
    """The nodes hls4ml has no layer for: '<name> (<op type>)' each."""
    from hls4ml.converters.onnx_to_hls import layer_handlers

    return [f"{n.name} ({n.op_type})" for n in model.graph.node if n.op_type not in layer_handlers]


#: the elementwise nodes whose constant operand must be on a Quant grid for a fixed-point result
#: equal to the float graph's
_ARITHMETIC = ("Add", "Sub", "Mul", "Div")


def inexact_parameters(model, precision: str = PRECISION) -> list[str]:
    """What in the graph fixed-point hardware cannot compute exactly (why a C simulation
    differs from qonnx's float execution): a Quant node whose scale is not a power of two, or
    whose grid is finer or whose range wider than ``precision`` (the layers' default type,
    ``fixed<W,I>``) holds, or an elementwise node with a float constant that no Quant node puts
    on a grid (a QuantLinear's bias without ``bias_quant``); '<node> (<op>): why' each. (The
    products inside a Dense are typed by hls4ml from its operands, not checked here.)"""
    width, integer = (int(v) for v in precision.split("<")[1].rstrip(">").split(",")[:2])
    frac = width - integer
    found = []
    for node in model.graph.node:
        if node.op_type == "Quant" and len(node.input) > 1:
            scale = model.get_initializer(node.input[1])
            if scale is None:
                continue
            s = np.abs(np.asarray(scale, dtype=np.float64)).ravel()
            exact = np.all(s > 0) and np.all(np.log2(s) == np.round(np.log2(s)))
            if not exact:
                found.append(f"{node.name} (Quant): scale {s[0]:.6g} is not a power of two")
                continue
            finest = int(-np.log2(s).min())
            if finest > frac:
                found.append(
                    f"{node.name} (Quant): its grid 2^-{finest} is finer than {precision}'s "
                    f"{frac} fractional bits"
                )
            bits = model.get_initializer(node.input[3]) if len(node.input) > 3 else None
            if bits is not None:  # the largest magnitude: 2^(bits - 1) steps of the scale
                top = float(np.asarray(bits).max()) - 1 + float(np.log2(s).max())
                if top > integer - 1:
                    found.append(
                        f"{node.name} (Quant): its range 2^{top:g} is wider than {precision}'s "
                        f"{integer} integer bits"
                    )
        elif node.op_type in _ARITHMETIC:
            for name in node.input:
                if model.get_initializer(name) is not None:
                    found.append(
                        f"{node.name} ({node.op_type}): its constant {name} is float, on no "
                        "Quant grid"
                    )
    return found


def write_model_project(
    source: str | os.PathLike,
    out_dir: str | os.PathLike,
    inputs: list[np.ndarray],
    *,
    backend: str = "vitis",
    clock_ns: float = 5.0,
    precision: str = PRECISION,
) -> dict:
    """The hls4ml project of a whole model's QONNX file, its C simulation on ``inputs`` (one
    array per graph input, the batch first) compared with qonnx's execution of the same file.

    Returns {"project", "layers" (hls4ml's, in order), "vectors", "mismatches" (batch rows with
    any differing output), "max_abs_diff", "ok", "inexact" (inexact_parameters: what fixed
    point cannot equal, [] when nothing)}."""
    import hls4ml
    from qonnx.core.onnx_exec import execute_onnx

    register()
    if backend not in BACKENDS:
        raise ValueError(f"backend: one of {', '.join(BACKENDS)}, got {backend!r}")
    path = Path(source)
    model = _model(path)
    missing = unsupported(model)
    if missing:
        raise ValueError(
            f"{path}: hls4ml has no layer for {missing[0]}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        )
    names = [i.name for i in model.graph.input]
    if len(inputs) != len(names):
        raise ValueError(f"inputs: the model takes {len(names)} ({', '.join(names)})")
    n = len(inputs[0])
    with step(f"qonnx execution of {path.name} on {n} inputs"):
        outputs = []
        for row in range(n):
            feed = {
                name: np.asarray(x[row : row + 1], np.float32)
                for name, x in zip(names, inputs, strict=True)
            }
            outputs.append(execute_onnx(model, feed)[model.graph.output[0].name])
        expected = np.concatenate(outputs)
    with replaced_dir(out_dir, "hls4ml project") as tmp:
        with stdout_to_stderr():  # hls4ml prints: --json keeps stdout for the result
            config = hls4ml.utils.config_from_onnx_model(
                model, granularity="name", backend=BACKENDS[backend]
            )
            config["Model"]["Precision"]["default"] = precision
            with step(f"hls4ml conversion of {path.name} ({backend})"):
                hls_model = hls4ml.converters.convert_from_onnx_model(
                    model,
                    output_dir=str(tmp),
                    project_name=PROJECT_NAME,
                    backend=BACKENDS[backend],
                    io_type="io_parallel",
                    hls_config=config,
                    clock_period=clock_ns,
                    write_weights_txt=False,
                )
                hls_model.config.config.pop("OnnxModel", None)  # as hls/convert.py: not dumped
            with step(f"g++ build of the C simulation in {out_dir}"):
                hls_model.write()  # compile() = write() + the build, here through the cache
                compile_csim(hls_model)
            with step(f"C simulation of {n} inputs"):
                feed = [np.ascontiguousarray(x.reshape(n, -1), dtype=np.float64) for x in inputs]
                got = np.asarray(hls_model.predict(feed if len(feed) > 1 else feed[0]))
        got = got.reshape(expected.shape)
        differ = (got != expected).reshape(n, -1).any(axis=1)  # exact: no tolerance
        result = {
            "project": str(Path(out_dir)),
            "source": str(path),
            "backend": backend,
            "layers": [f"{name} ({layer.class_name})" for name, layer in hls_model.graph.items()],
            "vectors": n,
            "mismatches": int(differ.sum()),
            "max_abs_diff": float(np.abs(got - expected).max()) if n else 0.0,
        }
        result["ok"] = result["mismatches"] == 0
        result["inexact"] = inexact_parameters(model, precision)
        _final_paths(hls_model, tmp, Path(os.path.realpath(out_dir)))
        (tmp / "metadata.json").write_text(json.dumps(result, indent=2) + "\n")
    return result
