"""The da4ml trace of the alignment equals the golden model; its estimate and RTL are sound."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from eatt.config import CoreConfig
from eatt.quant.golden import CoreWeights, random_weights
from eatt.rtl_sim import da4ml_trace
from eatt.rtl_sim.generate import load_metadata

SHAPES = [(4, 4, 8, 1), (3, 5, 8, 2), (2, 2, 4, 1), (1, 6, 6, 3)]


def _cfg(kind: str, len_q: int, len_k: int, dim: int, heads: int, **kw) -> CoreConfig:
    return CoreConfig.from_dict(
        dict(kind=kind, len_q=len_q, len_k=len_k, dim=dim, heads=heads, **kw)
    )


@pytest.mark.parametrize("kind", ["eatt", "vanilla"])
@pytest.mark.parametrize("shape", SHAPES)
def test_trace_is_bit_exact(kind, shape):
    cfg = _cfg(kind, *shape)
    result = da4ml_trace.check(cfg, random_weights(cfg, seed=3), vectors=1500, seed=4)
    assert result["mismatches"] == 0, result["first_mismatch"]
    assert result["vectors"] > 1500  # the edge vectors come first


@pytest.mark.parametrize("kind", ["eatt", "vanilla"])
def test_trace_extreme_weights_and_formats(kind):
    cfg = _cfg(kind, 3, 3, 8, 2, in_bits=6, in_frac=2, weight_bits=5, qk_bits=8, tau=0.5)
    w = random_weights(cfg, seed=1)
    top, bottom = cfg.weight_max, -cfg.weight_max
    extreme = CoreWeights(*(np.where(m >= 0, top, bottom) for m in (w.wq, w.wk, w.wv, w.wo)))
    result = da4ml_trace.check(cfg, extreme, vectors=500)
    assert result["mismatches"] == 0, result["first_mismatch"]


def test_check_reports_a_wrong_trace(monkeypatch):
    """A trace of other weights than the golden model's must be caught and located."""
    cfg = _cfg("eatt", 3, 3, 8, 1)
    w = random_weights(cfg, seed=2)
    other = w.replace(wq=np.roll(w.wq, 1, axis=0))
    real_trace = da4ml_trace.trace_alignment
    monkeypatch.setattr(da4ml_trace, "trace_alignment", lambda c, _w: real_trace(c, other))
    result = da4ml_trace.check(cfg, w, vectors=200)
    assert result["mismatches"] > 0
    assert "expected" in result["first_mismatch"]


def test_estimate_eatt_has_no_multiplier():
    e_cfg, d_cfg = _cfg("eatt", 4, 4, 8, 1), _cfg("vanilla", 4, 4, 8, 1)
    e = da4ml_trace.estimate(e_cfg, random_weights(e_cfg, seed=1))
    d = da4ml_trace.estimate(d_cfg, random_weights(d_cfg, seed=1))
    assert e["multipliers"] == 0
    assert d["multipliers"] == 4 * 4 * 8  # Q.K: one product per (query, key, feature)
    assert 0 < e["LUT_estimate"] < d["LUT_estimate"]


def test_trace_rejects_other_kinds():
    cfg = _cfg("eatt", 2, 2, 4, 1)
    with pytest.raises(ValueError, match="kind: da4ml traces"):
        da4ml_trace.trace_alignment(SimpleNamespace(kind="window"), random_weights(cfg, seed=1))


@pytest.mark.rtl
def test_write_rtl_synthesizes(tmp_path):
    from eatt.rtl_sim.resources import resources

    counts = {}
    for kind in ("eatt", "vanilla"):
        cfg = _cfg(kind, 2, 2, 4, 1)
        meta = da4ml_trace.write_rtl(cfg, random_weights(cfg, seed=1), tmp_path / kind)
        assert load_metadata(tmp_path / kind)["top"] == meta["top"]
        counts[kind] = resources(tmp_path / kind, timeout=600)
    assert counts["eatt"]["DSP48E1"] == 0
    assert (
        counts["vanilla"]["DSP48E1"] == 2 * 2 * 4
    )  # only the Q.K products, constants as shift-add
    assert counts["eatt"]["LUT"] > 0
