"""A trained model's attention layers as hardware cores (issue 18, "take a layer out").

Every attention sub-layer of a seq2seq checkpoint has a name: ``encoder.<i>.self``,
``decoder.<i>.self`` and ``decoder.<i>.cross``. A quantized one (kinds quant-eatt /
quant-vanilla) is a hardware core: :func:`layer_core` gives its CoreConfig and integer weights,
the ones its eval computes with (eatt.model.seq2seq.RoleAttention._hardware). The core has the
model's formats and ``len_q = len_k = max_len``, takes the valid key length (``key_padding``)
and, for the decoder's self-attention, the causal offset: it computes, bit for bit, what the
layer computes on any batch the model accepts (tests/test_qat.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from eatt.config import CoreConfig
from eatt.quant.golden import CoreWeights

from .config import QUANT_KINDS
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
        return self.kind in QUANT_KINDS

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


def layer_core(model: Seq2Seq, name: str) -> tuple[CoreConfig, CoreWeights]:
    """The hardware core of layer ``name``: (config, integer weights).

    Only a quantized layer has one: a float layer gets one line saying so.
    """
    layer, module = find_layer(model, name)
    if not layer.hardware:
        raise ValueError(
            f"--layer: {name} is {layer.kind} (float); only the quantized kinds "
            f"({', '.join(QUANT_KINDS)}) have a hardware core: train or fine-tune with one"
        )
    core = module.core
    cfg = core.cfg.replace(key_padding=True, causal=layer.role == "dec_self")
    weights = CoreWeights(**{k: v.numpy() for k, v in core.weight_codes().items()})
    weights.check(cfg)
    return cfg, weights


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


def checkpoint_layer_core(path: str | os.PathLike, name: str) -> tuple[CoreConfig, CoreWeights]:
    """The hardware core of layer ``name`` of a seq2seq checkpoint."""
    model, *_ = load_checkpoint(path, "cpu")
    return layer_core(model, name)
