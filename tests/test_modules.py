"""Brevitas QAT cores: eval forward == golden bit for bit, QAT learns, from_float, checkpoints."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from eatt.config import ConfigError, CoreConfig
from eatt.model.attention import DotProductAttention, EAttention
from eatt.quant.export import check_export, export_core
from eatt.quant.golden import (
    CoreWeights,
    GoldenCore,
    edge_inputs,
    first_mismatch,
    random_inputs,
    random_weights,
)
from eatt.quant.modules import (
    Binarize,
    QuantAttentionCore,
    checkpoint_core,
    from_float,
    from_integer,
    integer_weights,
    load_checkpoint,
    save_checkpoint,
    to_float,
)

CONFIGS = {
    "eatt-default": dict(kind="eatt", len_q=8, len_k=8, dim=16, heads=2),
    "dot-default": dict(kind="vanilla", len_q=8, len_k=8, dim=16, heads=2),
    "eatt-tiny-w4-tau0": dict(
        kind="eatt", len_q=1, len_k=16, dim=4, heads=1, tau=0.0, weight_bits=4
    ),
    "dot-wide-w4": dict(
        kind="vanilla", len_q=16, len_k=3, dim=64, heads=4, tau=0.5, weight_bits=4, in_bits=6,
        in_frac=2,
    ),
    "eatt-4heads-small-tables": dict(
        kind="eatt", len_q=5, len_k=7, dim=32, heads=4, tau=0.5, out_bits=16, qk_bits=10,
        exp_table_size=64, recip_table_size=32,
    ),
    "eatt-16x16-d64-w4": dict(
        kind="eatt", len_q=16, len_k=16, dim=64, heads=4, tau=1.0, weight_bits=4, v_bits=10,
    ),
    "dot-3heads-narrow": dict(
        kind="vanilla", len_q=3, len_k=9, dim=12, heads=3, weight_bits=8, weight_frac=4, qk_bits=8,
        v_bits=8, out_bits=10, exp_frac=6,
    ),
    # A 2-entry reciprocal table errs by up to 20%; with 11 equal keys (edge vectors, extreme
    # weights) the exp sum is 1.375 * 2**n, read as 1.25: O overshoots V by 10% and the clamp
    # into v_bits is exercised.
    "eatt-coarse-recip": dict(
        kind="eatt", len_q=4, len_k=11, dim=8, heads=2, tau=0.5, recip_table_size=2, recip_frac=4,
    ),
    "dot-coarse-recip": dict(kind="vanilla", len_q=3, len_k=11, dim=4, heads=1, recip_table_size=2),
}  # fmt: skip

#: the QAT / from_float task core: the default formats, but outputs fine enough to carry +-2
#: (the default's worst-case out_lsb is 4.0 at dim 16: every output in (-4, 4) floors to 0 or -4)
TASK = dict(kind="eatt", len_q=4, len_k=8, dim=16, heads=2, tau=1.0, v_bits=14, out_bits=18)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny tensors: intra-op threads only contend (2 shared cores: 20 QAT steps take 6 s with
    2 threads under load, 0.1 s with 1)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def real(cfg: CoreConfig, codes: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(codes, dtype=np.float64) * 2.0**-cfg.in_frac).float()


def assert_matches_golden(cfg: CoreConfig, weights: CoreWeights, x, y, module=None) -> None:
    """Eval forward (real) == golden codes * out_lsb, every element; report the first mismatch."""
    module = from_integer(cfg, weights) if module is None else module.eval()
    golden = GoldenCore(cfg, weights)
    expected = golden.forward(x, y)
    with torch.no_grad():
        got = module(real(cfg, x), real(cfg, y)).double().numpy()
    lsb = golden.formats.out_lsb
    if not np.array_equal(got, expected * lsb):
        codes = got / lsb
        exact = np.array_equal(codes, np.round(codes))
        detail = first_mismatch(expected, codes) if exact else "outputs are off the out_lsb grid"
        pytest.fail(f"{cfg.kind} {cfg.to_dict()}: {detail}")


def extreme_weights(cfg: CoreConfig) -> dict[str, CoreWeights]:
    m, d = cfg.weight_max, cfg.dim
    sign = np.where(np.add.outer(np.arange(d), np.arange(d)) % 2 == 0, m, -m).astype(np.int64)
    full = np.full((d, d), m, dtype=np.int64)
    return {
        "all+max": CoreWeights(full, full, full, full),
        "all-max": CoreWeights(-full, -full, -full, -full),
        "checkerboard": CoreWeights(sign, -sign, sign, sign.T.copy()),
        "mixed": CoreWeights(full, -full, sign, -full),
    }


# -- bit-exactness ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(CONFIGS))
def test_eval_forward_equals_golden(name):
    cfg = CoreConfig(**CONFIGS[name])
    weights = random_weights(cfg, seed=7)
    module = from_integer(cfg, weights)
    x, y = random_inputs(cfg, 1000, seed=3)
    ex, ey = edge_inputs(cfg)
    assert_matches_golden(cfg, weights, np.concatenate([x, ex]), np.concatenate([y, ey]), module)
    # the integer entry point agrees too (codes in, codes out)
    codes = module.forward_int(torch.from_numpy(ex), torch.from_numpy(ey)).numpy()
    assert first_mismatch(GoldenCore(cfg, weights).forward(ex, ey), codes) is None


@pytest.mark.parametrize("name", list(CONFIGS))
def test_extreme_weights_equal_golden(name):
    cfg = CoreConfig(**CONFIGS[name])
    x, y = random_inputs(cfg, 100, seed=5)
    ex, ey = edge_inputs(cfg)
    x, y = np.concatenate([x, ex]), np.concatenate([y, ey])
    for weights in extreme_weights(cfg).values():
        assert_matches_golden(cfg, weights, x, y)


@st.composite
def configs(draw):
    heads = draw(st.integers(1, 4))
    data = dict(
        kind=draw(st.sampled_from(["eatt", "vanilla"])),
        len_q=draw(st.integers(1, 16)),
        len_k=draw(st.integers(1, 16)),
        heads=heads,
        dim=heads * draw(st.integers(1, 16)),
        tau=draw(st.sampled_from([0.0, 0.5, 1.0])),
        weight_bits=draw(st.sampled_from([4, 8])),
        in_bits=draw(st.integers(4, 10)),
        in_frac=draw(st.integers(0, 6)),
        qk_bits=draw(st.integers(4, 14)),
        v_bits=draw(st.integers(4, 14)),
        out_bits=draw(st.integers(6, 16)),
        exp_table_size=draw(st.sampled_from([16, 64, 256])),
        exp_frac=draw(st.integers(4, 12)),
        recip_table_size=draw(st.sampled_from([8, 64, 256])),
    )
    try:
        return CoreConfig(**data)
    except ConfigError:
        assume(False)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=configs(), seed=st.integers(0, 2**16))
def test_hypothesis_configs_equal_golden(cfg, seed):
    weights = random_weights(cfg, seed=seed)
    x, y = random_inputs(cfg, 200, seed=seed + 1)
    ex, ey = edge_inputs(cfg)
    assert_matches_golden(cfg, weights, np.concatenate([x, ex]), np.concatenate([y, ey]))


def test_brevitas_quantizers_hold_the_golden_formats():
    cfg = CoreConfig(kind="eatt", len_q=2, len_k=2, dim=4, heads=1, weight_bits=4)
    module = QuantAttentionCore(cfg)
    qw = module.q_proj.quant_weight()
    assert float(qw.scale) == 2.0**-cfg.weight_frac and int(qw.bit_width) == 4
    with torch.no_grad():
        module.q_proj.weight.fill_(100.0)  # saturates at the narrow range, not -2**(b-1)
    assert integer_weights(module).wq.max() == cfg.weight_max
    # inputs: round to the <in_bits, in_frac> grid, saturating
    lsb = 2.0**-cfg.in_frac
    x = torch.tensor([0.4 * lsb, 0.6 * lsb, -3.4 * lsb, 1e6, -1e6])
    assert module.input_codes(x).tolist() == [0, 1, -3, 127, -128]


def test_off_grid_inputs_are_quantized_like_the_input_node():
    cfg = CoreConfig(**CONFIGS["eatt-default"])
    weights = random_weights(cfg, seed=1)
    module = from_integer(cfg, weights)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20, cfg.len_q, cfg.dim, generator=g) * 6
    y = torch.randn(20, cfg.len_k, cfg.dim, generator=g) * 6
    with torch.no_grad():
        got = module(x, y).double().numpy()
    xi, yi = module.input_codes(x).numpy(), module.input_codes(y).numpy()
    golden = GoldenCore(cfg, weights)
    assert np.array_equal(got, golden.forward(xi, yi) * golden.formats.out_lsb)


# -- train / eval ----------------------------------------------------------------------------------
def test_train_forward_is_the_hardware_value_and_gradients_flow():
    cfg = CoreConfig(**CONFIGS["eatt-default"])
    weights = random_weights(cfg, seed=2)
    module = from_integer(cfg, weights).train()
    x, y = random_inputs(cfg, 32, seed=4)
    xt, yt = real(cfg, x).requires_grad_(), real(cfg, y)
    out = module(xt, yt)
    golden = GoldenCore(cfg, weights)
    assert np.array_equal(
        out.detach().double().numpy(), golden.forward(x, y) * golden.formats.out_lsb
    )
    out.square().sum().backward()
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
        grad = getattr(module, proj).weight.grad
        assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0, proj
    # the input gradient comes through the Gaussian surrogate of the binarization (Eq. 5)
    assert xt.grad is not None and xt.grad.abs().sum() > 0


def test_binarize_is_strict_with_gaussian_surrogate():
    tau = 0.5
    x = torch.tensor([0.25, 0.5, 0.5625, 2.0], requires_grad=True)
    out = Binarize(tau)(x)
    assert out.tolist() == [0.0, 0.0, 1.0, 1.0]  # x == tau gives 0 (Eq. 4 is strict)
    out.sum().backward()
    expected = math.sqrt(2 / math.pi) * torch.exp(-2 * (x.detach() - tau) ** 2)
    assert torch.allclose(x.grad, expected)


def test_eval_is_deterministic_and_needs_no_grad():
    cfg = CoreConfig(**CONFIGS["dot-default"])
    module = QuantAttentionCore(cfg)
    x, y = random_inputs(cfg, 8, seed=9)
    xt, yt = real(cfg, x), real(cfg, y)
    module.eval()
    with torch.no_grad():
        first = module(xt, yt)
    assert not first.requires_grad
    with torch.inference_mode():
        second = module(xt, yt)
    assert torch.equal(first, second)
    module.train()
    with torch.no_grad():
        third = module(xt, yt)  # constant scales: no statistics, train() changes no value
    assert torch.equal(first, third)
    assert module.training and not module.eval().training


def test_shape_errors_name_the_argument():
    cfg = CoreConfig(**CONFIGS["eatt-default"])
    module = QuantAttentionCore(cfg)
    with pytest.raises(ValueError, match="x must be"):
        module(torch.zeros(1, cfg.len_q + 1, cfg.dim))
    with pytest.raises(ValueError, match="y must be"):
        module(torch.zeros(1, cfg.len_q, cfg.dim), torch.zeros(1, cfg.len_k, cfg.dim + 1))


# -- QAT on a retrieval task -----------------------------------------------------------------------
def retrieval_batch(cfg: CoreConfig, n: int, gen: torch.Generator):
    """Keys/values y: rows of +-2 (binarize to distinct patterns at tau = 1); each query is a
    copy of one key, and the target is that key's row: attention must select the match."""
    y = (torch.randint(0, 2, (n, cfg.len_k, cfg.dim), generator=gen) * 4 - 2).float()
    match = torch.randint(0, cfg.len_k, (n, cfg.len_q), generator=gen)
    x = torch.gather(y, 1, match[..., None].expand(-1, -1, cfg.dim))
    return x, y, match


def retrieval_accuracy(out: torch.Tensor, y: torch.Tensor, match: torch.Tensor) -> float:
    """Fraction of queries whose output is nearest (L2) to the row of the matching key."""
    dist = (out[:, :, None, :] - y[:, None, :, :]).square().sum(-1)
    return (dist.argmin(-1) == match).float().mean().item()


def fit(model: torch.nn.Module, cfg: CoreConfig, steps: int, seed: int) -> list[float]:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    model.train()
    losses = []
    for _ in range(steps):
        x, _, _ = batch = retrieval_batch(cfg, 64, gen)
        loss = (model(x, batch[1]) - x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_qat_loss_falls_on_retrieval():
    cfg = CoreConfig(**TASK)
    torch.manual_seed(0)
    module = QuantAttentionCore(cfg)
    losses = fit(module, cfg, steps=200, seed=1)
    start, end = float(np.mean(losses[:5])), float(np.mean(losses[-5:]))
    # measured: start about 4.0 (outputs near 0, targets +-2), end about 0.05
    assert end < 0.1 * start, f"QAT loss {start:.3f} -> {end:.3f}"
    x, y, match = retrieval_batch(cfg, 256, torch.Generator().manual_seed(99))
    with torch.no_grad():
        acc = retrieval_accuracy(module.eval()(x, y), y, match)
    assert acc > 0.95, f"QAT retrieval accuracy {acc:.3f}"
    # what was trained is what the golden model computes with the module's integer codes
    assert_matches_golden(cfg, integer_weights(module), *[
        np.rint(t.numpy() * 2**cfg.in_frac).astype(np.int64) for t in (x, y)
    ], module=module)  # fmt: skip


def test_from_float_keeps_task_accuracy():
    cfg = CoreConfig(**TASK)
    torch.manual_seed(0)
    float_core = EAttention(cfg.dim, cfg.heads, tau=cfg.tau)
    fit(float_core, cfg, steps=200, seed=2)
    x, y, match = retrieval_batch(cfg, 256, torch.Generator().manual_seed(99))
    float_core.eval()
    with torch.no_grad():
        float_acc = retrieval_accuracy(float_core(x, y), y, match)
        quant = from_float(float_core, cfg)
        quant_acc = retrieval_accuracy(quant(x, y), y, match)
    assert not quant.training
    assert float_acc > 0.95, f"float core only reached {float_acc:.3f}"
    # stated margin: quantization to 8-bit weights loses at most 2 accuracy points
    assert quant_acc >= float_acc - 0.02, f"float {float_acc:.3f} -> from_float {quant_acc:.3f}"
    # to_float gives back the float twin of the quantized weights
    twin = to_float(quant)
    lsb = 2.0**-cfg.weight_frac
    assert torch.equal(twin.q_proj.weight, (torch.from_numpy(integer_weights(quant).wq).T * lsb))


def test_from_float_rejects_disagreeing_settings():
    cfg = CoreConfig(kind="eatt", len_q=2, len_k=2, dim=8, heads=2, tau=1.0)
    with pytest.raises(ValueError, match="^kind:"):
        from_float(DotProductAttention(8, 2), cfg)
    with pytest.raises(ValueError, match="^kind:"):
        from_float(EAttention(8, 2, selection="linear", score="l1"), cfg)
    with pytest.raises(ValueError, match="^kind:"):
        from_float(torch.nn.Linear(8, 8), cfg)
    with pytest.raises(ValueError, match="^dim:"):
        from_float(EAttention(16, 2), cfg)
    with pytest.raises(ValueError, match="^heads:"):
        from_float(EAttention(8, 4), cfg)
    with pytest.raises(ValueError, match="^tau:"):
        from_float(EAttention(8, 2, tau=0.5), cfg)
    with pytest.raises(ValueError, match="^bias:"):
        from_float(EAttention(8, 2, bias=True), cfg)
    dot = from_float(DotProductAttention(8, 2), cfg.replace(kind="vanilla"))
    assert dot.cfg.kind == "vanilla" and dot.binarize is None


def test_from_float_warns_when_weights_saturate():
    cfg = CoreConfig(kind="vanilla", len_q=2, len_k=2, dim=4, heads=1, weight_bits=4)
    float_core = DotProductAttention(4, 1)
    with torch.no_grad():
        float_core.v_proj.weight.fill_(10.0)
    with pytest.warns(UserWarning, match="16 weights .* saturate"):
        quant = from_float(float_core, cfg)
    assert (integer_weights(quant).wv == cfg.weight_max).all()


# -- checkpoints and export ------------------------------------------------------------------------
def test_checkpoint_round_trip_and_export(tmp_path):
    cfg = CoreConfig(**CONFIGS["eatt-4heads-small-tables"])
    torch.manual_seed(3)
    module = QuantAttentionCore(cfg)
    path = tmp_path / "core.pt"
    save_checkpoint(module, path)
    assert [p.name for p in tmp_path.iterdir()] == ["core.pt"]  # no temporary left behind
    loaded = load_checkpoint(path)
    assert loaded.cfg == cfg and not loaded.training
    for name, w in integer_weights(module).as_dict().items():
        assert np.array_equal(w, getattr(integer_weights(loaded), name)), name
    for key, value in module.state_dict().items():  # latent float weights: training resumes
        assert torch.equal(value, loaded.state_dict()[key]), key
    x, y = random_inputs(cfg, 50, seed=1)
    assert_matches_golden(cfg, integer_weights(loaded), x, y, module=loaded)

    onnx_path = tmp_path / "core.onnx"
    export_core(*checkpoint_core(path), onnx_path)
    result = check_export(onnx_path, vectors=200, seed=2)
    assert result["mismatches"] == 0, result["first_mismatch"]


def test_load_checkpoint_errors_are_one_line(tmp_path):
    cfg = CoreConfig(**CONFIGS["dot-default"])
    good = tmp_path / "good.pt"
    save_checkpoint(QuantAttentionCore(cfg), good)
    payload = torch.load(good, weights_only=True)

    def write(name: str, obj) -> str:
        path = tmp_path / name
        torch.save(obj, path)
        return str(path)

    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint\n")
    no_state = {k: v for k, v in payload.items() if k != "state_dict"}
    bad_cfg = dict(payload, config=dict(payload["config"], heads=3))
    partial = dict(
        payload, state_dict={k: v for k, v in payload["state_dict"].items() if "o_" not in k}
    )
    wrong_shape = dict(
        payload, state_dict=dict(payload["state_dict"], **{"q_proj.weight": torch.zeros(3, 3)})
    )
    cases = {
        str(tmp_path / "missing.pt"): "no such checkpoint",
        str(text): "not an eatt checkpoint",
        write("other.pt", {"weights": torch.zeros(2)}): "not an eatt checkpoint",
        write("version.pt", dict(payload, version=99)): "version 99",
        write("nostate.pt", no_state): "missing 'state_dict'",
        write("badcfg.pt", bad_cfg): "heads:",
        write("partial.pt", partial): "missing 'o_proj.weight'",
        write("shape.pt", wrong_shape): r"q_proj.weight has shape \(3, 3\)",
    }  # fmt: skip
    for path, message in cases.items():
        with pytest.raises(ValueError, match=message) as info:
            load_checkpoint(path)
        assert "\n" not in str(info.value) and str(info.value).startswith(path)


def test_save_checkpoint_rejects_other_modules(tmp_path):
    with pytest.raises(ValueError, match="QuantAttentionCore"):
        save_checkpoint(EAttention(4, 1), tmp_path / "x.pt")
    assert not list(tmp_path.iterdir())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a plain core builds without Brevitas warnings
        QuantAttentionCore(CoreConfig(kind="eatt", len_q=1, len_k=1, dim=2, heads=1))
