"""A trained model's attention layers as hardware cores (issue 18, "take a layer out").

Every attention sub-layer of a seq2seq checkpoint has a name: ``encoder.<i>.self``,
``decoder.<i>.self`` and ``decoder.<i>.cross``. A quantized one (kinds quant-eatt /
quant-vanilla) is a hardware core: :func:`layer_core` gives its CoreConfig and integer weights,
the ones its eval computes with (eatt.model.seq2seq.RoleAttention._hardware). The core has the
model's formats and ``len_q = len_k = max_len``, takes the valid key length (``key_padding``)
and, for the decoder's self-attention, the causal offset: it computes, bit for bit, what the
layer computes on any batch the model accepts (tests/test_qat.py).

A quantized windowed cross-attention (kinds quant-global / quant-local-m / quant-local-p) is the
window unit (kind window, docs/window.md): :func:`layer_core` gives its WindowConfig and W_Q
(the unit's only weights; K and V come projected in its memory), and :func:`capture_layer`
records every decoding step's unit inputs (query, p, w, length, the projected memory) in the
layout of eatt.rtl_sim.window.window_steps: steps grouped by the memory they read.

A decoder layer also has a *step* core (``step=True``, ``--step``): ``len_q = 1``, the one query
of an incremental decoding step against up to max_len keys, which is what the layer computes
while the model translates. Query rows are independent and no width depends on len_q, so the
step core's output is the full core's first row, bit for bit, at a max_len-th of its size.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np
import torch

from eatt.config import CoreConfig, atomic_write
from eatt.quant.golden import CoreWeights, GoldenCore, first_mismatch
from eatt.quant.vectors import CAPTURE_FORMAT, window_step_inputs
from eatt.quant.window import WindowGolden

from .config import QUANT_KINDS, QUANT_WINDOW_KINDS
from .data import encode_pairs, make_batches
from .evaluate import checkpoint_data, translate_batches
from .seq2seq import CHECKPOINT_FORMAT, Seq2Seq, load_checkpoint

#: the name of a role's layer i
ROLE_NAMES = {
    "enc_self": "encoder.{i}.self",
    "dec_self": "decoder.{i}.self",
    "cross": "decoder.{i}.cross",
}


@dataclass(frozen=True)
class Layer:
    """One attention sub-layer of a model: its name, role, layer index and attention kind."""

    name: str
    role: str
    index: int
    kind: str

    @property
    def hardware(self) -> bool:
        """Whether a hardware core computes it (a quantized kind)."""
        return self.kind in QUANT_KINDS or self.window

    @property
    def window(self) -> bool:
        """Whether the window unit computes it (a quantized windowed kind)."""
        return self.kind in QUANT_WINDOW_KINDS

    def to_dict(self) -> dict:
        return {"name": self.name, "role": self.role, "index": self.index, "kind": self.kind,
                "hardware": self.hardware}  # fmt: skip


def layers(model: Seq2Seq) -> list[Layer]:
    """Every attention sub-layer of ``model``, in the model's order."""
    if not hasattr(model, "attention_modules"):
        raise ValueError(f"{type(model).__name__}: no attention layers to take out")
    return [
        Layer(ROLE_NAMES[role].format(i=i), role, i, module.kind)
        for role, i, module in model.attention_modules()
    ]


def find_layer(model: Seq2Seq, name: str):
    """(Layer, RoleAttention module) of ``name``; a one-line ValueError naming the choices."""
    found = {layer.name: layer for layer in layers(model)}
    if name not in found:
        raise ValueError(f"--layer: no layer {name!r}; the model has {', '.join(found)}")
    layer = found[name]
    module = next(m for r, i, m in model.attention_modules() if (r, i) == (layer.role, layer.index))
    return layer, module


def layer_core(model: Seq2Seq, name: str, step: bool = False) -> tuple[CoreConfig, CoreWeights]:
    """The hardware core of layer ``name``: (config, integer weights); ``step``: the core of one
    decoding step (len_q 1; decoder layers only).

    Only a quantized layer has one: a float layer gets one line saying so.
    """
    layer, module = find_layer(model, name)
    if step and layer.role == "enc_self":
        raise ValueError(
            f"--step: {name} attends a whole source sentence per call; one decoding step is "
            "a decoder layer's (decoder.<i>.self or decoder.<i>.cross)"
        )
    if not layer.hardware:
        kinds = ", ".join((*QUANT_KINDS, *QUANT_WINDOW_KINDS))
        raise ValueError(
            f"--layer: {name} is {layer.kind} (float); only the quantized kinds ({kinds}) "
            "have a hardware core: train or fine-tune with one"
        )
    core = _core_module(module)
    if layer.window:  # the window unit: one decoding step per call by nature (--step or not)
        w = core.golden().weights
        zero = np.zeros_like(w.wq)
        weights = CoreWeights(w.wq, zero, zero.copy(), zero.copy())
        weights.check(core.cfg)
        return core.cfg, weights
    cfg = core.cfg.replace(key_padding=True, causal=layer.role == "dec_self")
    if step and getattr(module, "synthesized", False):
        raise ValueError(
            f"--step: {name} is {layer.kind}, whose core runs every call at its own max_len rows "
            "(the queries at their positions, docs/models.md): it has no one-row step core"
        )
    if step:
        cfg = cfg.replace(len_q=1)
    weights = CoreWeights(**{k: v.numpy() for k, v in core.weight_codes().items()})
    weights.check(cfg)
    return cfg, weights


def _core_module(module):
    """The module that computes a layer: a RoleAttention's core, or the LSTM's attention (its
    own core)."""
    return getattr(module, "core", module)


def is_model_checkpoint(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a seq2seq checkpoint (`eatt train`), not a core's."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        return False
    return isinstance(payload, dict) and payload.get("format") == CHECKPOINT_FORMAT


def checkpoint_layers(path: str | os.PathLike) -> list[Layer]:
    """The layers of a seq2seq checkpoint (``eatt export CHECKPOINT --list-layers``)."""
    model, *_ = load_checkpoint(path, "cpu")
    return layers(model)


def checkpoint_layer_core(
    path: str | os.PathLike, name: str, step: bool = False
) -> tuple[CoreConfig, CoreWeights]:
    """The hardware core of layer ``name`` of a seq2seq checkpoint (``step``: of one step)."""
    model, *_ = load_checkpoint(path, "cpu")
    return layer_core(model, name, step)


# -- real vectors (issue 18, item 4) --------------------------------------------------------------
def capture_layer(
    checkpoint: str | os.PathLike,
    name: str,
    split: str = "test",
    max_vectors: int = 1000,
    beam: int = 1,
    data=None,
    step: bool = False,
) -> dict:
    """The integer inputs a quantized layer sees while the model decodes ``split``.

    Every row of every call of the layer is one vector of its exported core (layer_core):
    ``x`` (n, len_q, dim) and ``y`` (n, len_k, dim) input codes padded with zeros to max_len,
    ``length`` (the valid keys) and, for the decoder's self-attention, ``offset`` (the causal
    offset), ``queries`` (the valid query rows) and ``model_out`` (n, len_q, dim), what the
    model itself computed for those rows (output codes; zeros past ``queries``). At most
    ``max_vectors``, in decoding order (length-bucketed batches in a seeded random order, so
    that a prefix covers many lengths). ``report`` compares the golden model of the exported
    core with the model on every valid row (0 mismatches expected), and counts the sentences
    whose decoding it saw whole and the layer's calls per such sentence. ``step``: vectors of
    the layer's step core (layer_core), one query each.
    """
    if split not in ("train", "dev", "test"):
        raise ValueError(f"--split: must be train, dev or test, got {split!r}")
    if max_vectors < 1:
        raise ValueError(f"--max: must be >= 1, got {max_vectors}")
    model, src_vocab, tgt_vocab, payload = load_checkpoint(checkpoint, "cpu")
    cfg, weights = layer_core(model, name, step)
    layer, module = find_layer(model, name)
    pairs = getattr(checkpoint_data(checkpoint, payload, data), split)
    # batches in a seeded random order: the first max_vectors cover every sentence length
    encoded = encode_pairs(pairs, src_vocab, tgt_vocab)
    batches = make_batches(encoded, 4096, shuffle=True, seed=0, max_sentences=64)
    if layer.window:
        report = {"checkpoint": str(checkpoint), "layer": name, "split": split, "beam": beam,
                  "step": True}  # fmt: skip
        core = _core_module(module)
        return _capture_window(model, core, batches, max_vectors, beam, cfg, weights, report)
    rows: dict[str, list] = {k: [] for k in ("x", "y", "length", "offset", "queries", "out")}

    def probe(x_codes, y_codes, masks, out_codes):  # the layer's hardware calls, as computed
        len_q = x_codes.shape[1]
        if len_q > cfg.len_q:
            raise ValueError(
                f"--step: {name} got a call with {len_q} queries; the step core takes one "
                "(it is for incremental decoding)"
            )
        seen["rows"] += len(x_codes)
        for b in range(len(x_codes)):
            if len(rows["x"]) >= max_vectors:
                return
            rows["x"].append(x_codes[b].numpy())
            rows["y"].append(y_codes[b].numpy())
            rows["length"].append(int(masks["length"][b]))
            # a causal call's offset; the exported core's "nothing hidden" otherwise
            rows["offset"].append(int(masks["offset"][b]) if cfg.causal else cfg.len_k - 1)
            rows["queries"].append(len_q)
            rows["out"].append(out_codes[b].numpy())

    seen = {"rows": 0}  # the layer's core calls (vectors), kept or not
    whole = _decode_probed(
        model, module, probe, batches, beam, seen, lambda: len(rows["x"]) >= max_vectors
    )
    n = len(rows["x"])
    if n == 0:
        raise ValueError(f"{checkpoint}: the {split} split gave layer {name} no call")
    x = np.zeros((n, cfg.len_q, cfg.dim), dtype=np.int64)
    y = np.zeros((n, cfg.len_k, cfg.dim), dtype=np.int64)
    model_out = np.zeros((n, cfg.len_q, cfg.dim), dtype=np.int64)
    for i in range(n):
        x[i, : len(rows["x"][i])] = rows["x"][i]
        y[i, : len(rows["y"][i])] = rows["y"][i]
        model_out[i, : len(rows["out"][i])] = rows["out"][i]
    arrays = {
        "x": x,
        "y": y,
        "length": np.asarray(rows["length"], dtype=np.int64),
        "queries": np.asarray(rows["queries"], dtype=np.int64),
        "model_out": model_out,
    }
    if cfg.causal:
        arrays["offset"] = np.asarray(rows["offset"], dtype=np.int64)
    masks = {m: arrays[m] for m in cfg.mask_inputs}
    golden = GoldenCore(cfg, weights).forward(x, y, masks=masks)
    valid = np.arange(cfg.len_q)[None, :, None] < arrays["queries"][:, None, None]
    golden_valid = np.where(valid, golden, 0)
    differ = int((golden_valid != model_out).any(axis=(1, 2)).sum())
    lengths = arrays["length"]
    report = {
        "checkpoint": str(checkpoint),
        "layer": name,
        "split": split,
        "beam": beam,
        "vectors": n,
        "lengths": sorted({int(v) for v in lengths}),
        "step": step,
        # the layer's core calls per translated sentence (decoding steps x beam for a decoder
        # layer, 1 for the encoder's), over the sentences decoded whole
        **whole,
        "config": cfg.to_dict(),
        "golden_vs_model": {
            "mismatches": differ,
            "first_mismatch": first_mismatch(golden_valid, model_out) if differ else None,
        },
    }
    return {"arrays": arrays, "report": report}


def _decode_probed(model, owner, probe, batches, beam, seen, full) -> dict:
    """Decode ``batches`` with ``owner.probe = probe`` until ``full()`` (the vectors wanted are
    in) or the split ends: {"sentences", "calls_per_sentence"} over the batches decoded (the layer's
    calls per translated sentence: decoding steps x beam for a decoder layer, 1 for the
    encoder's). ``seen["rows"]`` is the probe's count of calls, kept or not."""
    sentences = rows = 0
    owner.probe = probe
    try:
        with torch.no_grad():
            for batch in batches:
                if full():
                    break
                before = seen["rows"]
                translate_batches(model, [batch], beam=beam)
                sentences += len(batch.index)
                rows += seen["rows"] - before
    finally:
        owner.probe = None
    return {"sentences": sentences, "calls_per_sentence": rows / sentences if sentences else None}


def _capture_window(model, core, batches, max_vectors, beam, cfg, weights, report) -> dict:
    """capture_layer of a window-unit layer: its decoding steps in window_steps' layout (steps
    grouped by memory, each group's steps in decoding order), and what the model computed."""
    memories: dict[bytes, int] = {}
    groups: dict[str, list] = {k: [] for k in ("keys", "values", "counts", "length")}
    steps: dict[str, list] = {k: [] for k in ("x", "p", "w", "g", "group", "model_out")}
    seen = {"rows": 0}

    def probe(inputs: dict, out: np.ndarray) -> None:  # every unit call, as computed
        seen["rows"] += len(out)
        for b in range(len(out)):
            if len(steps["x"]) >= max_vectors:
                return
            memory = (inputs["keys"][b], inputs["values"][b], inputs["counts"][b])
            key = b"".join(a.tobytes() for a in memory) + bytes(str(inputs["length"][b]), "ascii")
            if key not in memories:
                memories[key] = len(memories)
                for k, a in zip(("keys", "values", "counts"), memory, strict=True):
                    groups[k].append(a)
                groups["length"].append(int(inputs["length"][b]))
            for k in ("x", "p", "w", "g"):
                steps[k].append(inputs[k][b])
            steps["group"].append(memories[key])
            steps["model_out"].append(out[b])

    whole = _decode_probed(
        model, core, probe, batches, beam, seen, lambda: len(steps["x"]) >= max_vectors
    )
    n = len(steps["x"])
    if n == 0:
        raise ValueError(
            f"{report['checkpoint']}: the {report['split']} split gave layer {report['layer']} "
            "no call"
        )
    order = np.argsort(np.asarray(steps["group"]), kind="stable")  # a memory's steps together
    arrays = {k: np.asarray(v, dtype=np.int64)[order] for k, v in steps.items()}
    arrays.update({k: np.asarray(v, dtype=np.int64) for k, v in groups.items()})
    # the replay: the unit's golden model on the recorded, regrouped steps (the model's eval
    # is that golden model, so this checks the recording; qonnx, hls4ml and RTL then run it)
    golden = WindowGolden(cfg, weights).forward(**window_step_inputs(arrays))
    differ = int((golden != arrays["model_out"]).any(axis=1).sum())
    return {
        "arrays": arrays,
        "report": {
            **report,
            "unit": "window",
            "vectors": n,
            "memories": len(groups["length"]),
            "lengths": sorted(set(groups["length"])),
            **whole,
            "config": cfg.to_dict(),
            "golden_vs_model": {
                "mismatches": differ,
                "first_mismatch": first_mismatch(golden, arrays["model_out"]) if differ else None,
            },
        },
    }


def save_capture(capture: dict, path: str | os.PathLike) -> None:
    """Write a capture as .npz (its arrays and ``meta``, the report as JSON); temp + rename."""
    meta = json.dumps({"format": CAPTURE_FORMAT, **capture["report"]}, sort_keys=True)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, meta=np.array(meta), **capture["arrays"])

    atomic_write(path, write, suffix=".npz")
