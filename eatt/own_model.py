"""Your own model's attention layers to hardware: the Python API (docs/own_model.md).

    eatt.layers(model)                         {name: module} of every eatt attention in it
    eatt.capture(model, name, inputs, path)    run the model, record that layer's integer calls
                                               as an eatt.capture/1 file, checked against the
                                               golden model call by call
    eatt.export_layer(module, path)            the layer's QONNX core file

The files are the ones every ``--inputs`` and core-file command takes: ``eatt flow layer.onnx
--inputs acts.npz`` (or export --check, hls, sim, power) takes the layer through every level and
compares each with the golden model and with what the model itself computed (``model_out``).

Any ``nn.Module`` works: the layers are found by type (eatt.nn.MultiheadAttention, and a bare
eatt.quant.modules.QuantAttentionCore), wherever they sit. A layer's core is
``len_q = len_k = max_len`` with a key-padding input (each call's valid key length) and, when
any call was causal, a causal-offset input; a call at shorter lengths is that core padded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

from eatt.config import CoreConfig, atomic_write
from eatt.nn import MultiheadAttention, model_calls
from eatt.quant.golden import CoreWeights, GoldenCore, first_mismatch
from eatt.quant.modules import QuantAttentionCore, integer_weights
from eatt.quant.vectors import CAPTURE_FORMAT, load_capture

__all__ = ["capture", "export_layer", "layer_core", "layers"]

_ATTENTION = (MultiheadAttention, QuantAttentionCore)


def layers(model: nn.Module) -> dict[str, nn.Module]:
    """Every eatt attention module of ``model`` by its name in ``named_modules`` (the model
    itself is ``""``), outermost first: a QuantAttentionCore inside a MultiheadAttention is
    the latter's."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    found: dict[str, nn.Module] = {}
    for name, module in model.named_modules():
        if isinstance(module, _ATTENTION) and not any(
            name.startswith(f"{outer}.") or outer == "" for outer in found
        ):
            found[name] = module
    return found


def _find(model: nn.Module, name: str) -> nn.Module:
    found = layers(model)
    if name not in found:
        have = ", ".join(repr(n) for n in found) or "none"
        raise ValueError(f"layer: no eatt attention {name!r} in the model (it has {have})")
    return found[name]


def layer_core(module: nn.Module, causal: bool = False) -> tuple[CoreConfig, CoreWeights]:
    """(config, integer weights) of a layer's hardware core: its lengths max_len, a key-padding
    input and, with ``causal``, a causal-offset input."""
    if isinstance(module, MultiheadAttention):
        if not module.quantized:
            raise ValueError(
                f"layer: a float {type(module).__name__} (quantized=False) has no hardware core: "
                "build it with quantized=True (Brevitas QAT)"
            )
        core, cfg = module.core, module.cfg.replace(key_padding=True, causal=causal)
    elif isinstance(module, QuantAttentionCore):
        core, cfg = module, module.cfg
        if causal and not cfg.causal:
            raise ValueError("causal: this QuantAttentionCore's config has no causal input")
    else:
        raise ValueError(
            f"layer: expected an eatt.nn.MultiheadAttention, got {type(module).__name__}"
        )
    weights = integer_weights(core)
    weights.check(cfg)
    return cfg, weights


def export_layer(module: nn.Module, path: str | os.PathLike, causal: bool = False) -> dict:
    """Write the layer's QONNX core (eatt.quant.export.export_core): what ``eatt export --check
    --inputs``, ``eatt hls``, ``eatt rtl`` and ``eatt flow`` take. ``causal``: the core gets
    the causal-offset input (a decoder's self-attention; capture() says which in its meta)."""
    from eatt.quant.export import export_core, load_core  # onnx / qonnx: heavy

    path = _replaceable(path, load_core, "an eatt core file")
    cfg, weights = layer_core(module, causal)
    source = {"layer": type(module).__name__, "kind": cfg.kind}
    return export_core(cfg, weights, path, source=source)


def _replaceable(path, read, what: str) -> Path:
    """``path``, refused in one line where a file is there that ``read`` cannot read (a file
    eatt did not write is never replaced)."""
    path = Path(path)
    if path.exists():
        try:
            read(path)
        except Exception:  # noqa: BLE001 - whatever it is, it is not ours
            raise ValueError(f"{path}: exists and is not {what}: not replaced") from None
    return path


def capture(
    model: nn.Module,
    name: str,
    inputs,
    path: str | os.PathLike,
    max_vectors: int | None = None,
) -> dict:
    """Run ``model`` (eval, no grad) on ``inputs`` and record layer ``name``'s calls.

    ``inputs``: an iterable of model inputs (a tensor, a tuple of positional arguments or a
    dict of keyword arguments each). Every batch row of every call of the layer is one vector
    of its core (layer_core): input codes padded to max_len, the valid key length, the causal
    offset (when any call was causal), the valid query rows and the module's own output codes
    (``model_out``). The golden model of the core is run on every vector: a differing row
    raises ValueError and nothing is written. Writes an eatt.capture/1 file (temp + rename);
    returns its report (vectors, calls, the config, golden_vs_model).
    """
    module = _find(model, name)
    if not isinstance(module, MultiheadAttention):
        raise ValueError(f"layer: {name} is a bare core; capture records an eatt.nn layer")
    cfg0, weights = layer_core(module)  # refuses a float layer before any work
    path = _replaceable(path, load_capture, "a capture file")
    if max_vectors is not None and max_vectors < 1:
        raise ValueError(f"max_vectors: must be >= 1, got {max_vectors}")
    rows: dict[str, list] = {k: [] for k in ("x", "y", "length", "offset", "queries", "out")}
    seen = {"calls": 0, "causal": False}

    def probe(x, y, masks, out, causal):
        seen["calls"] += 1
        seen["causal"] |= causal
        for b in range(len(x)):
            if max_vectors is not None and len(rows["x"]) >= max_vectors:
                return
            rows["x"].append(x[b])
            rows["y"].append(y[b])
            rows["length"].append(int(masks["length"][b]))
            rows["offset"].append(int(masks["offset"][b]))
            rows["queries"].append(x.shape[1])
            rows["out"].append(out[b])

    training = model.training
    module.probe = probe
    try:
        model.eval()
        with torch.no_grad():
            for args, kwargs in model_calls(inputs):
                model(*args, **kwargs)
                if max_vectors is not None and len(rows["x"]) >= max_vectors:
                    break
    finally:
        module.probe = None
        model.train(training)
    n = len(rows["x"])
    if n == 0:
        raise ValueError(f"inputs: the model never called layer {name}")
    cfg = cfg0.replace(causal=seen["causal"])
    arrays = _padded(cfg, rows)
    masks = {m: arrays[m] for m in cfg.mask_inputs}
    golden = GoldenCore(cfg, weights).forward(arrays["x"], arrays["y"], masks=masks)
    valid = np.arange(cfg.len_q)[None, :, None] < arrays["queries"][:, None, None]
    golden = np.where(valid, golden, 0)
    differ = int((golden != arrays["model_out"]).any(axis=(1, 2)).sum())
    report = {
        "source": "eatt.capture",
        "model": type(model).__name__,
        "layer": name,
        "vectors": n,
        "calls": seen["calls"],
        "lengths": sorted({int(v) for v in arrays["length"]}),
        "config": cfg.to_dict(),
        "golden_vs_model": {
            "mismatches": differ,
            "first_mismatch": first_mismatch(golden, arrays["model_out"]) if differ else None,
        },
    }
    if differ:
        raise ValueError(
            f"layer {name}: the golden model differs from the module on {differ} of {n} "
            f"vectors ({report['golden_vs_model']['first_mismatch']}); nothing written"
        )
    meta = json.dumps({"format": CAPTURE_FORMAT, **report}, sort_keys=True)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, meta=np.array(meta), **arrays)

    atomic_write(path, write, suffix=".npz")
    return {**report, "path": str(path)}


def _padded(cfg: CoreConfig, rows: dict) -> dict[str, np.ndarray]:
    """The recorded rows as the core's vectors: codes padded with zeros to max_len."""
    n = len(rows["x"])
    shapes = {"x": cfg.len_q, "y": cfg.len_k, "model_out": cfg.len_q}
    arrays = {k: np.zeros((n, length, cfg.dim), dtype=np.int64) for k, length in shapes.items()}
    for i in range(n):
        arrays["x"][i, : len(rows["x"][i])] = rows["x"][i]
        arrays["y"][i, : len(rows["y"][i])] = rows["y"][i]
        arrays["model_out"][i, : len(rows["out"][i])] = rows["out"][i]
    arrays["length"] = np.asarray(rows["length"], dtype=np.int64)
    arrays["queries"] = np.asarray(rows["queries"], dtype=np.int64)
    if cfg.causal:
        arrays["offset"] = np.asarray(rows["offset"], dtype=np.int64)
    return arrays
