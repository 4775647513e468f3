"""The hardware units: each declares its stages in one place (issue 17, outcome 1).

A unit (the attention core, the windowed unit; later the folded engine) is the same chain of
stages: config -> golden model -> Brevitas module -> QONNX op -> hls4ml layer -> RTL +
cocotb testbench. ``UNITS`` names, for each unit, the config kinds it serves and every stage's
entry point as a dotted path ``"module:attribute"``, resolved only on use (``Unit.load``):
importing this module imports no other eatt module but the numpy-only registry of attention
mechanisms (eatt.mechanisms: the core's kinds) and no heavy dependency (torch, brevitas, qonnx,
hls4ml).

The generic entry points dispatch with ``unit_for(cfg).load(stage)``: ``golden_check``
(quant/check.py), ``build_model`` / ``export_core`` / ``check_export`` (quant/export.py),
``convert`` (hls/convert.py), ``write_project`` (hls/project.py), the layer registration
(hls/__init__.py), ``generate_rtl`` (rtl_sim/generate.py), ``simulate`` (rtl_sim/runner.py).
The registry stays below them: no stage names a dispatcher's module, and no stage's module
imports one (directly or through another module), so counted with its hooks as import edges
the graph has no cycle (tests/test_imports.py). A unit's flow is above all of it: eatt/flow.py
(``FLOWS``) runs the stages through the dispatchers. tests/test_units.py walks the registry, so
a unit cannot be half registered. docs/architecture.md, "How to add a unit".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from eatt.mechanisms import core_kinds

#: every stage a unit must declare (docs/architecture.md, "How to add a unit")
STAGES = (
    "config",  # the config class: a CoreConfig (subclass) whose KINDS are the unit's kinds
    "golden",  # the golden model class: GoldenModel(cfg, weights).forward(...)
    "formats",  # (cfg) -> the derived formats (widths, shifts; .to_dict())
    "golden_check",  # (cfg, weights, vectors, seed) -> report dict (`eatt golden`)
    "brevitas",  # (cfg, weights) -> the Brevitas module holding those integer weights
    "float32_carried",  # (cfg) -> ((setting, frac, bits), ...) the file carries as float32
    "qonnx_graph",  # (cfg, weights, inputs, inits) -> (nodes, output, name, input datatypes)
    "output_frac",  # (cfg) -> fraction bits of the output codes
    "from_node",  # (onnx NodeProto) -> (cfg, weights): reads the QONNX op back
    "check_export",  # (path, vectors, seed) -> report dict: the file against the golden model
    "qonnx_op",  # the qonnx CustomOp class (executes the op in qonnx)
    "hls_layer",  # the hls4ml Layer class
    "hls_handler",  # the hls4ml ONNX handler: QONNX node -> layer attributes
    "hls_templates",  # () -> the hls4ml backend templates (config, function call)
    "hls_ports",  # (cfg, input names) -> (hls4ml type per input, Model options) for convert
    "hls_finish",  # (cfg, hls_model) -> None: the unit's changes to the converted model
    "hls_check_data",  # (model, cfg, weights, vectors, seed, capture) -> C simulation vectors
    "generate_rtl",  # (cfg, weights, out_dir, level, options: BuildOptions) -> metadata
    "simulate",  # (out_dir, vectors, seed, build_dir, inputs, simulator, lock_timeout) -> dict
)


@dataclass(frozen=True)
class Unit:
    """One hardware unit: the config kinds it serves and its stages' entry points."""

    name: str
    kinds: tuple[str, ...]  # the CoreConfig kinds this unit implements
    op_type: str  # the QONNX op's type (domain eatt.quant.ops)
    rtl_levels: tuple[str, ...]  # the "level" of its RTL directories (metadata.json)
    testbenches: tuple[str, ...]  # cocotb testbenches, rtl_sim/tb/<name>.py, one per level
    stages: dict[str, str] = field(repr=False)  # stage -> "module:attribute"
    #: the CoreWeights a unit holds (the rest are zero): the window unit only W_Q; empty: all
    #: of its kind's (eatt.quant.golden.weight_shapes: the mechanism's, then W_V and W_O)
    weight_names: tuple[str, ...] = ()

    def path(self, stage: str) -> str:
        try:
            return self.stages[stage]
        except KeyError:
            raise KeyError(f"unit {self.name}: no stage {stage!r}") from None

    def load(self, stage: str) -> Any:
        """The stage's entry point, imported now (the first call imports its module)."""
        module, _, attr = self.path(stage).partition(":")
        return getattr(importlib.import_module(module), attr)


UNITS: dict[str, Unit] = {}


def register(unit: Unit) -> Unit:
    """Add a unit; each kind and each RTL level belongs to one unit only."""
    if unit.name in UNITS:
        raise ValueError(f"unit {unit.name}: registered twice")
    missing = [s for s in STAGES if s not in unit.stages]
    extra = [s for s in unit.stages if s not in STAGES]
    if missing or extra:
        raise ValueError(f"unit {unit.name}: stages missing {missing}, unknown {extra}")
    for other in UNITS.values():
        if clash := set(unit.kinds) & set(other.kinds):
            raise ValueError(f"unit {unit.name}: kind {sorted(clash)} already {other.name}'s")
        if clash := set(unit.rtl_levels) & set(other.rtl_levels):
            raise ValueError(f"unit {unit.name}: level {sorted(clash)} already {other.name}'s")
    UNITS[unit.name] = unit
    return unit


def unit_for(cfg_or_kind: Any) -> Unit:
    """The unit of a config (anything with .kind) or of a kind name."""
    kind = cfg_or_kind if isinstance(cfg_or_kind, str) else cfg_or_kind.kind
    for unit in UNITS.values():
        if kind in unit.kinds:
            return unit
    raise KeyError(f"kind {kind!r}: no unit serves it (units: {', '.join(UNITS)})")


def unit_for_level(level: str) -> Unit:
    """The unit whose RTL directories carry this metadata level."""
    for unit in UNITS.values():
        if level in unit.rtl_levels:
            return unit
    raise KeyError(f"level {level!r}: no unit generates it")


register(
    Unit(
        name="core",
        kinds=core_kinds(),  # one per attention mechanism
        op_type="AttentionCore",
        rtl_levels=("alignment", "attention", "folded"),
        testbenches=("test_alignment", "test_attention", "test_folded"),
        stages={
            "config": "eatt.config:CoreConfig",
            "golden": "eatt.quant.golden:GoldenCore",
            "formats": "eatt.quant.golden:derive_formats",
            "golden_check": "eatt.quant.golden_checks:core_golden_check",
            "brevitas": "eatt.quant.modules:from_integer",
            "float32_carried": "eatt.quant.core_export:core_float32_carried",
            "qonnx_graph": "eatt.quant.core_export:core_graph",
            "output_frac": "eatt.quant.core_export:core_output_frac",
            "from_node": "eatt.quant.ops:core_from_node",
            "check_export": "eatt.quant.core_export:check_core_export",
            "qonnx_op": "eatt.quant.ops:AttentionCore",
            "hls_layer": "eatt.hls.layers:AttentionCore",
            "hls_handler": "eatt.hls.handlers:parse_attention_core",
            "hls_templates": "eatt.hls.handlers:core_templates",
            "hls_ports": "eatt.hls.unit_types:core_hls_ports",
            "hls_finish": "eatt.hls.unit_types:core_hls_finish",
            "hls_check_data": "eatt.hls.csim:core_check_data",
            # level folded in rtl_sim/folded.py, the unrolled levels on to unrolled / sim_run
            "generate_rtl": "eatt.rtl_sim.folded:generate_core_levels",
            "simulate": "eatt.rtl_sim.folded:simulate_core_levels",
        },
    )
)
register(
    Unit(
        name="window",
        kinds=("window",),
        op_type="WindowAttention",
        rtl_levels=("window",),
        testbenches=("test_window",),
        stages={
            "config": "eatt.config:WindowConfig",
            "golden": "eatt.quant.window:WindowGolden",
            "formats": "eatt.quant.window:derive_window_formats",
            "golden_check": "eatt.quant.golden_checks:window_golden_check",
            "brevitas": "eatt.quant.window_modules:from_integer",
            "float32_carried": "eatt.quant.window_export:window_float32_carried",
            "qonnx_graph": "eatt.quant.window_export:window_graph",
            "output_frac": "eatt.quant.window_export:window_output_frac",
            "from_node": "eatt.quant.window_ops:window_from_node",
            "check_export": "eatt.quant.window_export:check_window_export",
            "qonnx_op": "eatt.quant.window_ops:WindowAttention",
            "hls_layer": "eatt.hls.layers:WindowAttention",
            "hls_handler": "eatt.hls.handlers:parse_window_attention",
            "hls_templates": "eatt.hls.handlers:window_templates",
            "hls_ports": "eatt.hls.unit_types:window_hls_ports",
            "hls_finish": "eatt.hls.unit_types:window_hls_finish",
            "hls_check_data": "eatt.hls.csim:window_check_data",
            "generate_rtl": "eatt.rtl_sim.window:generate_window_rtl",
            "simulate": "eatt.rtl_sim.window:simulate_window",
        },
        weight_names=("wq",),  # the memory comes projected; W_O is outside the unit
    )
)
