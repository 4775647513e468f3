"""Formats from observed ranges: calibrate the eatt attention of any model, as Brevitas users
calibrate a PTQ model on a few batches (docs/own_model.md, "Formats").

    calibrate(module_or_model, batches) -> {name: {key: value}}

For each quantized ``eatt.nn.MultiheadAttention`` the model calls on ``batches``:

- ``in_frac``: the finest input grid whose range holds the largest query or key seen
  (``in_bits`` kept);
- ``weight_frac``: the least-squares power-of-two grid of its four weights
  (``calibrate_weight_frac``);
- ``v_bits`` and ``out_bits``: the fewest bits (8 to 24) whose derived value and output LSB
  are at most the input LSB, so the outputs resolve as finely as the inputs (the derived
  formats are worst cases over the weights' range: docs/golden.md).

The module is rebuilt with those keys (its float weights kept: MultiheadAttention.reconfigure);
the returned mapping says what changed. A model without such a module, or batches that never
call one, is one ValueError.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from eatt.nn import MultiheadAttention, model_calls
from eatt.quant.golden import derive_formats
from eatt.quant.modules import calibrate_weight_frac

__all__ = ["MAX_BITS", "MIN_BITS", "calibrate"]

#: the narrowest and widest value and output formats calibrate picks (QuantAttentionCore:
#: exact in float32 up to 24 bits)
MIN_BITS, MAX_BITS = 8, 24


def _targets(model: nn.Module) -> dict[str, MultiheadAttention]:
    if isinstance(model, MultiheadAttention):
        return {"": model} if model.quantized else {}
    return {
        name: m
        for name, m in model.named_modules()
        if isinstance(m, MultiheadAttention) and m.quantized
    }


def calibrate(model: nn.Module, batches) -> dict[str, dict]:
    """Pick and set the formats of every quantized eatt.nn.MultiheadAttention in ``model``
    from the ranges ``batches`` (tensors, tuples of arguments or dicts) give; returns
    {name: the keys set}. ``model`` may be the module itself (then called as
    ``module(q, k, v)`` by the batches)."""
    targets = _targets(model)
    if not targets:
        raise ValueError(
            f"model: no quantized eatt.nn.MultiheadAttention in {type(model).__name__}"
        )
    peaks = {name: 0.0 for name in targets}
    handles = []
    for name, module in targets.items():

        def record(mod, args, kwargs, name=name):
            query = args[0] if args else kwargs["query"]
            key = args[1] if len(args) > 1 else kwargs.get("key", query)
            for t in (query, key):
                peaks[name] = max(peaks[name], float(t.detach().abs().max()))

        handles.append(module.register_forward_pre_hook(record, with_kwargs=True))
    training = model.training
    try:
        model.eval()
        with torch.no_grad():
            for args, kwargs in model_calls(batches):
                model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
        model.train(training)
    chosen = {}
    for name, module in targets.items():
        if peaks[name] == 0.0:
            raise ValueError(f"batches: layer {name or type(model).__name__} saw no input")
        chosen[name] = _formats(module, peaks[name])
        module.reconfigure(**chosen[name])
    return chosen


def _formats(module: MultiheadAttention, peak: float) -> dict:
    """The keys calibrate sets for one module whose inputs reached ``peak``."""
    cfg = module.cfg
    # the largest in_frac whose range 2**(in_bits - 1 - in_frac) holds the peak
    in_frac = cfg.in_bits - 1 - math.ceil(math.log2(peak))
    in_frac = max(0, min(in_frac, cfg.in_bits + 8))
    core = module.core
    weights = [getattr(core, f"{w}_proj").weight for w in "qkvo"]
    keys = {"in_frac": in_frac, "weight_frac": calibrate_weight_frac(weights, cfg.weight_bits)}
    target = 2.0**-in_frac
    for key, lsb in (("v_bits", "v_lsb"), ("out_bits", "out_lsb")):
        bits = MIN_BITS
        while bits < MAX_BITS:
            trial = cfg.replace(**keys, **{key: bits})
            if getattr(derive_formats(trial), lsb) <= target:
                break
            bits += 1
        keys[key] = bits
    return keys
