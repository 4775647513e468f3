"""QuantWindowAttention (Brevitas) equals WindowGolden bit for bit, and trains."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from eatt.config import CoreConfig, default_config
from eatt.quant.export import check_export, export_core
from eatt.quant.golden import random_weights
from eatt.quant.window import WindowGolden, derive_window_formats, random_window_inputs
from eatt.quant.window_modules import (
    QuantWindowAttention,
    from_integer,
    integer_weights,
)

BASE = dict(kind="window", len_q=1, len_k=12, dim=8, heads=2)
CONFIGS = {
    "eatt-gaussian": dict(),
    "dot-flexible": dict(window_score="dot", position="flexible", window_d=3, g_levels=3),
    "eatt-none-narrow": dict(
        len_k=6, dim=4, heads=1, tau=-4.0, in_bits=6, in_frac=-2, weight_bits=4, qk_bits=8,
        v_bits=8, exp_table_size=64, exp_frac=8, recip_table_size=32, recip_frac=10,
        window_d=2, position="none", count_bits=3,
    ),
}  # fmt: skip


def make(name: str) -> CoreConfig:
    return CoreConfig.from_dict({**BASE, **CONFIGS[name]})


def module_inputs(cfg: CoreConfig, steps: dict) -> tuple:
    """Real x, keys, values (code * LSB) and integer step tensors for the module."""
    f = derive_window_formats(cfg).core
    x = torch.tensor(steps["x"] * 2.0**-cfg.in_frac, dtype=torch.float32)
    keys = torch.tensor(steps["keys"] * f.q_lsb, dtype=torch.float32)
    values = torch.tensor(steps["values"] * f.v_lsb, dtype=torch.float32)
    ints = [torch.tensor(steps[k]) for k in ("p", "w")]
    rest = [torch.tensor(steps[k]) for k in ("counts", "length", "g")]
    return (x, *ints, keys, values, *rest)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_eval_forward_is_golden(name):
    cfg = make(name)
    weights = random_weights(cfg, seed=4)
    module = from_integer(cfg, weights)
    steps = random_window_inputs(cfg, 400, seed=3)
    with torch.no_grad():
        out = module(*module_inputs(cfg, steps))
    lsb = derive_window_formats(cfg).core.v_lsb
    codes = out.double().numpy() / lsb
    assert np.array_equal(codes, np.rint(codes))
    np.testing.assert_array_equal(
        codes.astype(np.int64), WindowGolden(cfg, weights).forward(**steps)
    )
    np.testing.assert_array_equal(integer_weights(module).wq, weights.wq)


def test_the_focus_is_golden():
    """position flexible: forward(..., with_focus=True) gives (O, F), both the golden model's."""
    cfg = make("dot-flexible")
    weights = random_weights(cfg, seed=7)
    module = from_integer(cfg, weights)
    steps = random_window_inputs(cfg, 400, seed=8)
    o_ref, f_ref = WindowGolden(cfg, weights).forward(**steps, with_focus=True)
    with torch.no_grad():
        out, focus = module(*module_inputs(cfg, steps), with_focus=True)
    lsb = derive_window_formats(cfg).core.v_lsb
    np.testing.assert_array_equal(np.rint(out.double().numpy() / lsb).astype(np.int64), o_ref)
    assert focus.dtype == torch.int64 and focus.shape == (400, cfg.heads)
    np.testing.assert_array_equal(focus.numpy(), f_ref)
    # in training mode O carries the surrogate's gradient, F is the same integer rows
    module.train()
    out, focus = module(*module_inputs(cfg, steps), with_focus=True)
    np.testing.assert_array_equal(focus.numpy(), f_ref)
    out.sum().backward()
    assert module.q_proj.weight.grad is not None
    with pytest.raises(ValueError, match="with_focus"):
        from_integer(make("eatt-gaussian"), random_weights(make("eatt-gaussian"), seed=1))(
            *module_inputs(make("eatt-gaussian"), steps), with_focus=True
        )


def test_train_mode_value_is_hardware_and_gradient_flows():
    cfg = make("eatt-gaussian")
    weights = random_weights(cfg, seed=1)
    module = from_integer(cfg, weights).train()
    steps = random_window_inputs(cfg, 64, seed=5)
    args = module_inputs(cfg, steps)
    with torch.no_grad():
        reference = module(*args)
    out = module(*args)
    assert torch.equal(out.detach(), reference)
    (out**2).sum().backward()
    grad = module.q_proj.weight.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0


def test_a_training_step_changes_the_weight_codes():
    cfg = make("dot-flexible")
    module = from_integer(cfg, random_weights(cfg, seed=2)).train()
    before = integer_weights(module).wq.copy()
    opt = torch.optim.SGD(module.parameters(), lr=0.5)
    steps = random_window_inputs(cfg, 64, seed=6)
    args = module_inputs(cfg, steps)
    target = torch.zeros(64, cfg.dim)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(module(*args), target).backward()
        opt.step()
    assert not np.array_equal(integer_weights(module).wq, before)


def test_module_weights_export_bit_exact(tmp_path):
    """Brevitas -> QONNX: the module's integer W_Q exported runs in qonnx as the golden model."""
    cfg = default_config("window")
    module = QuantWindowAttention(cfg)  # PyTorch's default init, quantized by Brevitas
    path = tmp_path / "w.onnx"
    export_core(cfg, integer_weights(module), path)
    assert check_export(path, vectors=200, seed=1)["mismatches"] == 0


def test_bad_inputs_are_one_line_errors():
    cfg = make("eatt-gaussian")
    module = from_integer(cfg, random_weights(cfg, seed=1))
    steps = random_window_inputs(cfg, 4, seed=1)
    x, p, w, keys, values, counts, length, g = module_inputs(cfg, steps)
    lsb = derive_window_formats(cfg).core.q_lsb
    with pytest.raises(ValueError, match="keys is not on its grid"):
        module(x, p, w, keys + lsb / 2, values, counts, length, g)
    with pytest.raises(ValueError, match="p must lie"):
        module(x, length, w, keys, values, counts, length, g)
    with pytest.raises(ValueError, match="counts has values outside"):
        module(x, p, w, keys, values, counts * 0, length, g)
    with pytest.raises(ValueError, match="kind: QuantWindowAttention needs kind window"):
        QuantWindowAttention(default_config("eatt"))
