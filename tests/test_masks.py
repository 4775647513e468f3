"""Lengths and masks in the attention core (issue 18, item 1): the golden model.

A core with ``key_padding`` takes a valid key length per call (keys at or past it get no
weight), with ``causal`` an offset (query i sees keys j <= i + offset). The golden model is
checked against a plain-Python softmax over the visible keys only, on every length and offset,
and against the same core without masks where nothing is hidden.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from eatt.build_options import BuildOptions
from eatt.config import ConfigError, CoreConfig
from eatt.quant.check import golden_check
from eatt.quant.golden import (
    GoldenCore,
    edge_masks,
    random_inputs,
    random_masks,
    random_weights,
    vector_masks,
    visible_keys,
)

MASKED = {
    "eatt-length": dict(kind="eatt", len_q=3, len_k=5, dim=4, heads=2, key_padding=True),
    "vanilla-causal": dict(kind="vanilla", len_q=4, len_k=4, dim=4, heads=1, causal=True),
    "eatt-both": dict(
        kind="eatt", len_q=2, len_k=6, dim=6, heads=3, key_padding=True, causal=True, qk_bits=8
    ),
}


def reference(golden: GoldenCore, x, y, length, offset):
    """Plain Python: per vector, head and query, the softmax weights over the visible keys
    only (the max among them, 0 for a hidden key), then the golden normalization."""
    cfg, f = golden.cfg, golden.formats
    stages = golden.forward(x, y, intermediates=True)  # unmasked q, k, v and scores
    s = stages["scores"]
    e = np.zeros_like(s)
    for n in range(len(x)):
        for h in range(cfg.heads):
            for i in range(cfg.len_q):
                keys = [j for j in range(cfg.len_k) if j < length[n] and j <= i + offset[n]]
                top = max(int(s[n, h, i, j]) for j in keys)
                for j in keys:
                    idx = (top - int(s[n, h, i, j])) >> f.exp_shift
                    e[n, h, i, j] = int(golden.exp_table[idx]) if idx < f.exp_table_size else 0
    return golden.project_out(golden.weighted_values(e, stages["v"]))


@pytest.mark.parametrize("name", sorted(MASKED))
def test_masks_equal_a_softmax_over_the_visible_keys(name):
    cfg = CoreConfig.from_dict(MASKED[name])
    golden = GoldenCore(cfg, random_weights(cfg, seed=4))
    n = 4 * cfg.len_k
    x, y = random_inputs(cfg, n, seed=5)
    masks = random_masks(cfg, n, seed=5)
    length = masks.get("length", np.full(n, cfg.len_k))
    offset = masks.get("offset", np.full(n, cfg.len_k - 1))
    # every length and every offset comes up
    assert set(length.tolist()) == set(range(1, cfg.len_k + 1)) or not cfg.key_padding
    assert set(offset.tolist()) == set(range(cfg.len_k)) or not cfg.causal
    got = golden.forward(x, y, masks=masks)
    np.testing.assert_array_equal(got, reference(golden, x, y, length, offset))


def test_a_row_that_sees_one_key_copies_its_value():
    """length 1: every query sees key 0 only, so its weight is the whole softmax and the
    attention output is V_0 (within the reciprocal table's rounding: one step)."""
    cfg = CoreConfig.from_dict(MASKED["eatt-length"])
    golden = GoldenCore(cfg, random_weights(cfg, seed=1))
    x, y = random_inputs(cfg, 8, seed=2)
    st = golden.forward(x, y, intermediates=True, masks={"length": np.ones(8, dtype=np.int64)})
    assert (st["exp"][..., 1:] == 0).all()
    v0 = st["v"][:, None, 0, :].repeat(cfg.len_q, axis=1)
    assert np.abs(st["attn"] - v0).max() <= 1


def test_nothing_hidden_equals_the_unmasked_core():
    cfg = CoreConfig.from_dict(MASKED["eatt-both"])
    plain = cfg.replace(key_padding=False, causal=False)
    w = random_weights(cfg, seed=3)
    x, y = random_inputs(cfg, 30, seed=3)
    full = {"length": np.full(30, cfg.len_k), "offset": np.full(30, cfg.len_k - 1)}
    expect = GoldenCore(plain, w).forward(x, y)
    np.testing.assert_array_equal(GoldenCore(cfg, w).forward(x, y, masks=full), expect)
    np.testing.assert_array_equal(GoldenCore(cfg, w).forward(x, y), expect)  # the default


def test_edge_masks_and_check_vectors():
    cfg = CoreConfig.from_dict(MASKED["eatt-both"])
    edge = edge_masks(cfg, 8)
    assert set(edge["length"].tolist()) == {1, cfg.len_k} and set(edge["offset"].tolist()) == {
        0,
        cfg.len_k - 1,
    }
    masks = vector_masks(cfg, 20, 1, 8)
    assert all(len(m) == 28 for m in masks.values())
    vis = visible_keys(cfg, 28, masks)
    assert vis.shape == (28, 1, cfg.len_q, cfg.len_k) and vis[..., 0].all()  # key 0 always seen
    assert vector_masks(CoreConfig("eatt", 2, 2, 4, 1), 5, 1, 2) == {}


@pytest.mark.parametrize("name", sorted(MASKED))
def test_golden_check_with_masks(name):
    """`eatt golden` on a masked core: widths hold and the float module, masked the same way,
    stays within the bound."""
    cfg = CoreConfig.from_dict(MASKED[name])
    r = golden_check(cfg, random_weights(cfg, seed=1), vectors=200, seed=1)
    assert r["ok"], r


@pytest.mark.parametrize(
    ("masks", "message"),
    [
        ({"length": np.zeros(3, dtype=np.int64)}, r"length has values outside \[1, 5\]"),
        ({"length": np.full(3, 6)}, r"length has values outside \[1, 5\]"),
        ({"offset": np.zeros(3, dtype=np.int64)}, "offset: the config has no causal"),
        ({"length": np.ones(2, dtype=np.int64)}, r"length must be 3 integers"),
        ({"mask": 1}, "mask: known: length, offset"),
    ],
)
def test_bad_masks_are_one_line(masks, message):
    cfg = CoreConfig.from_dict(MASKED["eatt-length"])
    golden = GoldenCore(cfg, random_weights(cfg, seed=1))
    x, y = random_inputs(cfg, 3, seed=1)
    with pytest.raises(ValueError, match=message):
        golden.forward(x, y, masks=masks)


def test_mask_keys_are_checked():
    with pytest.raises(ConfigError, match="key_padding: must be true or false"):
        CoreConfig.from_dict(dict(kind="eatt", len_q=2, len_k=2, dim=4, heads=1, key_padding=1))
    with pytest.raises(ConfigError, match="causal: the window unit"):
        CoreConfig.from_dict(dict(kind="window", len_q=1, len_k=4, dim=4, heads=1, causal=True))
    cfg = CoreConfig.from_dict(MASKED["eatt-both"])
    assert cfg.mask_inputs == ("length", "offset")
    assert CoreConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("name", sorted(MASKED))
def test_brevitas_module_with_masks_is_the_golden_model(name):
    """QuantAttentionCore(x, y, masks) in eval is the golden model bit for bit; in training the
    surrogate's softmax hides the same keys (no gradient reaches a hidden key's value)."""
    import torch

    from eatt.quant.modules import from_integer

    cfg = CoreConfig.from_dict(MASKED[name])
    w = random_weights(cfg, seed=7)
    module = from_integer(cfg, w)
    n = 3 * cfg.len_k
    x, y = random_inputs(cfg, n, seed=8)
    masks = random_masks(cfg, n, seed=8)
    expect = GoldenCore(cfg, w).forward(x, y, masks=masks)
    scale = 2.0**-cfg.in_frac
    xt = torch.from_numpy(x * scale).float()
    yt = torch.from_numpy(y * scale).float().requires_grad_(True)
    tmasks = {k: torch.from_numpy(v) for k, v in masks.items()}
    with torch.no_grad():
        got = module(xt, yt, masks=tmasks)
    codes = torch.round(got.double() / module.formats.out_lsb).to(torch.int64).numpy()
    np.testing.assert_array_equal(codes, expect)
    if cfg.key_padding:  # a hidden key (past the length) gets no gradient through V or K
        module.train()
        out = module(xt, yt, masks={"length": torch.ones(n, dtype=torch.int64)})
        out.sum().backward()
        assert yt.grad[:, 1:].abs().sum() == 0 and yt.grad[:, 0].abs().sum() > 0


@pytest.mark.parametrize("name", sorted(MASKED))
def test_qonnx_file_with_masks_executes_as_the_golden_model(tmp_path, name):
    """The exported file has the mask inputs (L, O) and qonnx executes it bit for bit."""
    from eatt.quant.export import check_export, export_core, load_core

    cfg = CoreConfig.from_dict(MASKED[name])
    w = random_weights(cfg, seed=2)
    path = tmp_path / "core.onnx"
    report = export_core(cfg, w, path)
    assert list(report["inputs"]) == [
        "X",
        "Y",
        *(("L",) if cfg.key_padding else ()),
        *(("O",) if cfg.causal else ()),
    ]
    cfg2, w2, *_ = load_core(path)
    assert cfg2 == cfg
    r = check_export(path, vectors=60, seed=3)
    assert r["mismatches"] == 0 and r["vectors"] == 60, r


@pytest.mark.hls
def test_hls_writes_a_masked_core(tmp_path):
    """hls4ml takes a masked file: the layer call passes the length input (L) to the masked
    core (its C simulation is checked in tests/test_hls_masks.py)."""
    from eatt.hls.project import write_project
    from eatt.quant.export import export_core

    cfg = CoreConfig.from_dict(MASKED["eatt-length"])
    export_core(cfg, random_weights(cfg, seed=2), tmp_path / "core.onnx")
    result = write_project(tmp_path / "core.onnx", tmp_path / "hls", vectors=5, compile=False)
    assert result["config"]["key_padding"] and result["csim"] is None
    call = (tmp_path / "hls" / "firmware" / "myproject.cpp").read_text()
    assert "nnet::attention_core_masked<" in call and "L[0]" in call


# -- RTL (Verilator and Icarus, cocotb) ------------------------------------------------------------
RTL_MASKED = {
    "eatt-length": dict(kind="eatt", len_q=2, len_k=4, dim=4, heads=2, key_padding=True),
    "vanilla-causal": dict(
        kind="vanilla", len_q=3, len_k=3, dim=4, heads=1, causal=True, in_bits=6, in_frac=3,
        qk_bits=7,
    ),
    "eatt-both-levels": dict(
        kind="eatt", len_q=2, len_k=3, dim=4, heads=1, key_padding=True, causal=True
    ),
}  # fmt: skip


@pytest.mark.rtl
@pytest.mark.parametrize("name", sorted(RTL_MASKED))
def test_rtl_with_masks_is_the_golden_model(name, tmp_path):
    """The attention RTL takes length / offset ports, sampled with x and y and carried down the
    pipeline: bit-exact on every length and offset (edge vectors: length 1 and len_k, offset 0
    and len_k - 1), streaming and with bubbles; the latency is the unmasked core's."""
    from eatt.rtl_sim.generate import generate_rtl
    from eatt.rtl_sim.runner import simulate

    cfg = CoreConfig.from_dict(RTL_MASKED[name])
    w = random_weights(cfg, seed=4)
    options = BuildOptions(adder_levels=1 if name.endswith("levels") else 0)
    meta = generate_rtl(cfg, w, tmp_path / "rtl", level="attention", options=options)
    assert set(meta["interface"]["inputs"]) == {"x", "y", *cfg.mask_inputs}
    plain = generate_rtl(
        cfg.replace(key_padding=False, causal=False), w, tmp_path / "plain", level="attention",
        options=options,
    )  # fmt: skip
    assert meta["latency_cycles"] == plain["latency_cycles"]
    r = simulate(tmp_path / "rtl", vectors=120, seed=3)
    assert r["mismatches"] == 0 and r["ii_cycles"] == 1, r["first_mismatch"]
    if name == "eatt-length" and shutil.which("iverilog"):  # 4-state: no X reaches an output
        r = simulate(tmp_path / "rtl", vectors=40, seed=3, simulator="icarus")
        assert r["mismatches"] == 0, r["first_mismatch"]
