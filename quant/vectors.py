"""Captured vectors: a trained layer's real inputs (``eatt capture``, issue 18 item 4).

A capture file (.npz) holds, for one exported layer, ``x`` (n, len_q, dim) and ``y``
(n, len_k, dim) input codes (padded with zeros to the core's lengths), the core's mask inputs
(``length``, and ``offset`` for a causal core), ``queries`` (valid query rows) and
``model_out`` (what the model computed on those rows), plus ``meta`` (JSON: format,
checkpoint, layer, split, the core's config). :func:`load_capture` reads one back for a core
and refuses, in one line naming the file, a capture of another core. numpy only: the checks
of every level (QONNX, hls4ml, RTL) read it without torch.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

from eatt.config import CoreConfig
from eatt.quant.golden import first_mismatch

CAPTURE_FORMAT = "eatt.capture/1"


def _read(path: Path) -> tuple[dict, dict]:
    """(arrays, meta) of a capture file; one-line ValueError naming it otherwise."""
    if not path.is_file():
        raise ValueError(f"{path}: no such capture file (eatt capture writes one)")
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):  # a plain .npy: one array
            raise ValueError
        with loaded as f:
            data = {k: f[k] for k in f.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError):
        raise ValueError(f"{path}: not a capture file (an .npz written by eatt capture)") from None
    try:
        meta = json.loads(str(data.pop("meta")))
    except (KeyError, ValueError):
        raise ValueError(f"{path}: not a capture file (no meta)") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: not a capture file (its meta is not a JSON object)")
    if meta.get("format") != CAPTURE_FORMAT:
        raise ValueError(f"{path}: format {meta.get('format')!r}, this eatt reads {CAPTURE_FORMAT}")
    return data, meta


def capture_meta(path: str | os.PathLike) -> dict:
    """The meta of a capture file (a core's or a window unit's); one-line ValueError for any
    other file."""
    return _read(Path(path))[1]


def load_capture(path: str | os.PathLike, cfg: CoreConfig | None = None) -> dict:
    """{"x", "y", "masks": {...}, "queries", "model_out", "meta"} of a capture file; with
    ``cfg``, checked to be vectors of that core (shapes, masks, input range)."""
    path = Path(path)
    data, meta = _read(path)
    if meta.get("unit") == "window":
        layer = meta.get("layer")
        raise ValueError(f"{path}: steps of a window unit (layer {layer}), not of a core")
    for key in ("x", "y", "queries", "model_out"):
        if key not in data:
            raise ValueError(f"{path}: capture lacks {key!r}")
    if len(data["x"]) == 0:
        raise ValueError(f"{path}: the capture holds no vector")
    masks = {k: data[k] for k in ("length", "offset") if k in data}
    out = {"x": data["x"], "y": data["y"], "masks": masks, "queries": data["queries"],
           "model_out": data["model_out"], "meta": meta}  # fmt: skip
    if cfg is not None:
        _check(path, out, cfg)
    return out


#: kinds whose captures drive each other's cores (the inputs mean the same to both)
PEER_KINDS = {"eatt", "vanilla"}


def _check(path: Path, c: dict, cfg: CoreConfig) -> None:
    n = len(c["x"])
    rows = {"y": c["y"], "queries": c["queries"], "model_out": c["model_out"], **c["masks"]}
    for key, a in rows.items():
        if len(a) != n:
            raise ValueError(f"{path}: {key} has {len(a)} rows, x has {n}")
    if c["x"].shape != (n, cfg.len_q, cfg.dim) or c["y"].shape != (n, cfg.len_k, cfg.dim):
        raise ValueError(
            f"{path}: vectors of a {c['x'].shape[1:]} x {c['y'].shape[1:]} core, this core is "
            f"({cfg.len_q}, {cfg.dim}) x ({cfg.len_k}, {cfg.dim})"
        )
    if sorted(c["masks"]) != sorted(cfg.mask_inputs):
        hint = ""
        if "offset" in c["masks"] and not cfg.causal:  # a decoder's self-attention, as called
            hint = ": the layer was called with a causal mask; export it with causal=True"
        elif "offset" not in c["masks"] and cfg.causal:
            hint = ": the layer was called without a causal mask; export it with causal=False"
        raise ValueError(
            f"{path}: masks {sorted(c['masks']) or 'none'}, this core takes "
            f"{list(cfg.mask_inputs) or 'none'}"
            + (f"{hint} (eatt.export_layer(module, path, causal=...))" if hint else "")
        )
    lo, hi = -(2 ** (cfg.in_bits - 1)), 2 ** (cfg.in_bits - 1) - 1
    for key in ("x", "y"):
        t = c[key]
        if t.size and (t.min() < lo or t.max() > hi):
            raise ValueError(f"{path}: {key} has codes outside this core's {cfg.in_bits}-bit range")
    have = cfg.function_dict()  # any folding of the core takes the same vectors
    config = c["meta"].get("config")
    if not isinstance(config, dict) or not config:
        raise ValueError(
            f"{path}: the capture's meta has no layer config (eatt capture / eatt.capture write "
            "it): which core the vectors are of is unknown"
        )
    want = {k: v for k, v in config.items() if k in have}
    if {want.get("kind"), have["kind"]} <= PEER_KINDS:
        # the layer's peer (E-ATT <-> vanilla, same formats) takes the same activations: the
        # comparison of the two on real vectors (eatt sim / eatt power --inputs)
        want["kind"] = have["kind"]
    if want and want != have:
        differ = sorted(k for k in want if want[k] != have[k])
        raise ValueError(
            f"{path}: captured for another core ({', '.join(differ)} differ; layer "
            f"{c['meta'].get('layer')} of {c['meta'].get('checkpoint')})"
        )


def capture_inputs(
    path: str | os.PathLike, cfg: CoreConfig, n: int | None = None
) -> tuple[np.ndarray, np.ndarray, dict, dict | None]:
    """(x, y, masks, model) of a capture of cfg's core, its first ``n`` vectors (all when
    None): the ``inputs`` a testbench (rtl_sim.runner.simulate) takes. ``model``: what the
    model computed on them (model_outputs), which the stage compares its outputs with too."""
    c = load_capture(path, cfg)
    masks = {k: v[:n] for k, v in c["masks"].items()}
    return c["x"][:n], c["y"][:n], masks, model_outputs(c, cfg, n)


def model_outputs(capture: dict, cfg: CoreConfig, n: int | None = None) -> dict | None:
    """{"model_out", "queries"} of a capture's first ``n`` vectors: what the model's own layer
    computed, for a stage to compare its outputs with; None where the capture drives the
    layer's peer (E-ATT's activations into the dot core: another function's outputs)."""
    if capture["meta"].get("config", {}).get("kind") != cfg.kind:
        return None
    return {
        "kind": cfg.kind,
        "model_out": capture["model_out"][:n],
        "queries": capture["queries"][:n],
    }


def compare_model(model: dict | None, got: np.ndarray, kind: str | None = None) -> dict | None:
    """A stage's output codes ``got`` (n, len_q, dim) on a capture's first n vectors against
    ``model`` (model_outputs) on the valid query rows: {"vectors", "mismatches",
    "first_mismatch"}; None without a model to compare with, or when the stage's core is of
    another ``kind`` than the model's layer (the peer on the layer's activations)."""
    if model is None or (kind is not None and model.get("kind", kind) != kind):
        return None
    n = min(len(got), len(model["model_out"]))
    got = np.asarray(got)[:n]
    want = model["model_out"][:n]
    valid = np.arange(want.shape[1])[None, :, None] < model["queries"][:n, None, None]
    got = np.where(valid, got, 0)
    differ = int((got != want).any(axis=tuple(range(1, want.ndim))).sum())
    return {
        "vectors": n,
        "mismatches": differ,
        "first_mismatch": first_mismatch(want, got) if differ else None,
    }


def model_mismatches(result: dict) -> int:
    """A stage result's vectors that differ from the model's own outputs (0 without any)."""
    return int((result.get("vs_model") or {}).get("mismatches") or 0)


def model_line(vs_model: dict | None, stage: str) -> str:
    """The report line of a stage against the model's own outputs ("" without one)."""
    if not vs_model:
        return ""
    line = (
        f"\n{stage} vs the model's own outputs (model_out): {vs_model['vectors']} captured "
        f"vectors, {vs_model['mismatches']} mismatching"
    )
    return line + (f"\n  {vs_model['first_mismatch']}" if vs_model["first_mismatch"] else "")


def inputs_model(inputs) -> dict | None:
    """The model's outputs riding with a testbench's ``inputs`` (capture_inputs' 4th item)."""
    return inputs[3] if isinstance(inputs, tuple) and len(inputs) > 3 else None


#: a window unit's capture: per step, then per memory (eatt.rtl_sim.window.window_steps' layout)
WINDOW_STEP_ARRAYS = ("x", "p", "w", "g", "group", "model_out")
WINDOW_MEMORY_ARRAYS = ("keys", "values", "counts", "length")


def load_window_capture(path: str | os.PathLike, cfg: CoreConfig, n: int | None = None) -> dict:
    """The steps of a window unit's capture (``eatt capture`` of a quant-local-* layer), its
    first ``n`` (all when None): window_steps' layout (x, p, w, g, group per step; keys,
    values, counts, length per memory) plus ``model_out``; checked to be of cfg's unit."""
    path = Path(path)
    data, meta = _read(path)
    if meta.get("unit") != "window":
        raise ValueError(f"{path}: vectors of an attention core, not of a window unit")
    missing = [k for k in WINDOW_STEP_ARRAYS + WINDOW_MEMORY_ARRAYS if k not in data]
    if missing:
        raise ValueError(f"{path}: capture lacks {', '.join(missing)}")
    have = cfg.function_dict()
    want = {k: v for k, v in meta.get("config", {}).items() if k in have}
    if want != have:
        differ = sorted(k for k in have if want.get(k) != have[k])
        raise ValueError(
            f"{path}: captured for another unit ({', '.join(differ)} differ; layer "
            f"{meta.get('layer')} of {meta.get('checkpoint')})"
        )
    steps = {k: data[k][:n] for k in WINDOW_STEP_ARRAYS}
    used = int(steps["group"].max()) + 1 if len(steps["group"]) else 0
    steps.update({k: data[k][:used] for k in WINDOW_MEMORY_ARRAYS})
    return {"steps": steps, "meta": meta}


def window_step_inputs(steps: dict) -> dict[str, np.ndarray]:
    """Grouped steps (window_steps' layout) as one row per step: the arrays of
    eatt.quant.window.STEP_INPUTS (x, p, w, keys, values, counts, length, g)."""
    g = np.asarray(steps["group"])
    out = {k: np.asarray(steps[k]) for k in ("x", "p", "w", "g")}
    out.update({k: np.asarray(steps[k])[g] for k in WINDOW_MEMORY_ARRAYS})
    return out
