"""The unit registry (eatt/units.py): no unit is half registered.

Every unit declares every stage and each entry point resolves (import + getattr), and has its
flow (eatt/flow.py); every config kind belongs to exactly one unit, every RTL level too, each
with its cocotb testbench; and a tiny config of each unit goes golden model -> golden check ->
RTL text through the registry (no Verilator build).
"""

from __future__ import annotations

import json

import pytest

from eatt import units
from eatt.config import CoreConfig, kinds
from eatt.flow import FLOWS
from eatt.quant.golden import CoreWeights, random_weights
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.runner import TB_DIR
from eatt.units import STAGES, UNITS, Unit, unit_for, unit_for_level

TINY = {
    "core": dict(kind="eatt", len_q=2, len_k=3, dim=4, heads=2),
    "window": dict(kind="window", len_q=1, len_k=6, dim=4, heads=1, window_d=2),
}


def test_every_kind_has_exactly_one_unit():
    for kind in kinds():
        owners = [u.name for u in UNITS.values() if kind in u.kinds]
        assert len(owners) == 1, f"kind {kind}: units {owners}"
        assert unit_for(kind).name == owners[0]
    assert {k for u in UNITS.values() for k in u.load("config").KINDS} == set(kinds())
    with pytest.raises(KeyError, match="no unit"):
        unit_for("nope")


def test_every_level_has_one_unit_and_a_testbench():
    for unit in UNITS.values():
        assert len(unit.testbenches) == len(unit.rtl_levels), unit.name
        for level in unit.rtl_levels:
            assert unit_for_level(level) is unit
        for tb in unit.testbenches:
            assert (TB_DIR / f"{tb}.py").is_file(), f"unit {unit.name}: no testbench {tb}"


@pytest.mark.parametrize("name", list(UNITS))
def test_every_stage_resolves(name):
    unit = UNITS[name]
    assert set(unit.stages) == set(STAGES)
    for stage in STAGES:
        entry = unit.load(stage)
        assert callable(entry), f"unit {name}: stage {stage} ({unit.path(stage)}) not callable"
    assert unit.load("qonnx_op").__name__ == unit.op_type
    assert unit.load("hls_layer").__name__ == unit.op_type
    config = unit.load("config")
    assert issubclass(config, CoreConfig) and config.KINDS == unit.kinds, unit.name
    assert set(unit.weight_names) <= set(CoreWeights.NAMES)


def test_every_unit_has_its_flow():
    """A unit's flow is not a stage (it runs the stages through their dispatchers, above the
    registry): eatt/flow.py keeps one per unit, FLOWS."""
    assert set(FLOWS) == set(UNITS)
    assert all(callable(flow) for flow in FLOWS.values())


def test_register_refuses_a_half_or_clashing_unit():
    full = dict(UNITS["window"].stages)
    half = {k: v for k, v in full.items() if k != "simulate"}
    with pytest.raises(ValueError, match="stages missing"):
        units.register(Unit("half", ("half",), "Half", ("half",), ("test_half",), half))
    with pytest.raises(ValueError, match="already window's"):
        units.register(Unit("twin", ("window",), "Twin", ("twin",), ("test_twin",), full))
    assert set(UNITS) == {"core", "window"}


@pytest.mark.parametrize("name", list(UNITS))
def test_tiny_config_golden_to_rtl_text(name, tmp_path):
    unit = UNITS[name]
    cfg = unit.load("config").from_dict(TINY[name])
    assert unit_for(cfg) is unit
    weights = random_weights(cfg, seed=3)
    golden = unit.load("golden")(cfg, weights)
    assert golden.cfg == cfg
    report = unit.load("golden_check")(cfg, weights, vectors=20, seed=1)
    assert report["ok"], report
    meta = generate_rtl(cfg, weights, tmp_path / "rtl")  # dispatches through the registry
    assert meta["level"] in unit.rtl_levels
    assert unit_for_level(meta["level"]) is unit
    saved = json.loads((tmp_path / "rtl" / "metadata.json").read_text())
    assert saved["config"] == cfg.to_dict()
    top = tmp_path / "rtl" / f"{meta['top']}.sv"
    assert f"module {meta['top']}" in top.read_text()
