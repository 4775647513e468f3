"""hls4ml extension for the windowed unit: WindowAttention layer, C simulation bit-exact to
WindowGolden on random steps, windows at both sequence edges, w = 0 and compacted memories.

Each g++ compile costs a few seconds: three small projects are compiled once per module."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig
from eatt.hls import TEMPLATES
from eatt.hls.project import write_project
from eatt.quant.export import export_core
from eatt.quant.golden import random_weights
from eatt.quant.window import derive_window_formats
from eatt.quant.window_export import window_edge_inputs
from tests.test_hls import run_project_testbench

pytestmark = pytest.mark.hls

HEADER = "nnet_window_attention.h"
BASE = dict(kind="window", len_q=1, len_k=10, dim=8, heads=2)
UNITS = {
    "eatt-gaussian": CoreConfig.from_dict(BASE),
    # dot score, Flexible's penalty with a G input, through the Vivado backend
    "dot-flexible": CoreConfig.from_dict(
        {**BASE, "window_score": "dot", "position": "flexible", "window_d": 3, "g_levels": 3}
    ),
    # one-row windows only, narrow formats: the key and value LSBs above 1
    "eatt-narrow-d0": CoreConfig.from_dict(
        {
            **BASE,
            "len_k": 5,
            "dim": 4,
            "heads": 1,
            "tau": -4.0,
            "in_bits": 6,
            "in_frac": -2,
            "weight_bits": 4,
            "qk_bits": 8,
            "v_bits": 8,
            "out_bits": 10,
            "exp_table_size": 64,
            "exp_frac": 8,
            "recip_table_size": 32,
            "recip_frac": 10,
            "window_d": 0,
            "position": "none",
            "count_bits": 3,
        }
    ),
}
BACKEND = {"eatt-gaussian": "vitis", "dot-flexible": "vivado", "eatt-narrow-d0": "vitis"}


#: this one goes through a QONNX file written by eatt.quant.export (the others from configs)
FROM_FILE = "eatt-narrow-d0"


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    base = tmp_path_factory.mktemp("whls")
    path = base / "unit.onnx"
    export_core(UNITS[FROM_FILE], random_weights(UNITS[FROM_FILE], 1), path)
    return {
        name: write_project(
            path if name == FROM_FILE else cfg,
            base / name,
            seed=1,
            options=BuildOptions(backend=BACKEND[name]),
            vectors=600,
            vector_seed=7,
        )
        for name, cfg in UNITS.items()
    }


@pytest.mark.parametrize("name", sorted(UNITS))
def test_csim_bit_exact(projects, name):
    cfg = UNITS[name]
    result = projects[name]
    csim = result["csim"]
    assert csim["first_mismatch"] is None, csim["first_mismatch"]
    assert csim["mismatches"] == 0 and result["ok"]
    assert csim["vectors"] == 600
    assert csim["edge_vectors"] == len(window_edge_inputs(cfg)["x"])
    project = Path(result["project"])
    call = (project / "firmware" / "myproject.cpp").read_text()
    function = "window_attention_flexible" if cfg.position == "flexible" else "window_attention"
    assert f"nnet::{function}<" in call
    # the memory arrays are read one row (dim codes) per cycle
    assert f"ARRAY_RESHAPE variable=K cyclic factor={cfg.dim}" in call
    assert "#pragma HLS DATAFLOW" in call  # not a pipelined top that would unroll the loops
    lines = (project / "tb_data" / "tb_input_features.dat").read_text().splitlines()
    inputs = cfg.dim + 3 + 2 * cfg.len_k * cfg.dim + cfg.len_k + (cfg.position == "flexible")
    assert len(lines) == 100 and len(lines[0].split()) == inputs
    # the golden outputs: O, and with position flexible the focus F per head after it
    outputs = (project / "tb_data" / "tb_output_predictions.dat").read_text().splitlines()
    focus = cfg.heads if cfg.position == "flexible" else 0
    assert len(outputs[0].split()) == cfg.dim + focus
    if focus:
        assert f"_focus[{cfg.heads}]" in call  # the second output of the top function


def test_project_testbench_runs_as_is(projects):
    """The project's own testbench (vendor C simulation) built with g++ reproduces the golden
    outputs in tb_data/ (edge steps first: both sequence edges, w = 0, compacted memories)."""
    project = Path(projects["eatt-gaussian"]["project"])
    got, expected, _ = run_project_testbench(project)
    assert got.shape == expected.shape == (100, 8)
    # the testbench prints 6 significant digits: back to codes by rounding to the output LSB
    lsb = derive_window_formats(UNITS["eatt-gaussian"]).core.v_lsb
    assert np.abs(got - expected).max() < lsb / 4
    assert np.array_equal(np.rint(got / lsb), expected / lsb)


def test_from_an_exported_file(projects):
    result = projects[FROM_FILE]
    assert result["source"].endswith("unit.onnx")
    assert result["config"] == UNITS[FROM_FILE].to_dict()
    assert result["csim"]["mismatches"] == 0 and result["ok"]


def body(source: str, name: str) -> str:
    """The body of C++ function `name`, comments removed (brace matching)."""
    source = re.sub(r"//[^\n]*", "", source)
    match = re.search(rf"\b{name}\s*\(", source)
    assert match, name
    depth, i = 1, match.end()
    while depth:
        depth += {"(": 1, ")": -1}.get(source[i], 0)
        i += 1
    start = source.index("{", i)
    depth, j = 1, start + 1
    while depth:
        depth += {"{": 1, "}": -1}.get(source[j], 0)
        j += 1
    return source[start + 1 : j - 1]


def test_template_structure(projects):
    project = Path(projects["eatt-gaussian"]["project"])
    generated = (project / "firmware" / "nnet_utils" / HEADER).read_text()
    assert generated == (TEMPLATES / HEADER).read_text()
    # the core's reciprocal and normalization are included, not copied
    assert '#include "nnet_attention_core.h"' in generated
    assert "void attention_core_reciprocal" not in generated
    step = body(generated, "window_attention_step")
    assert "attention_core_reciprocal<CONFIG_T>(" in step
    assert "attention_core_normalize<CONFIG_T>(" in step
    # both window loops are pipelined at II=1 and bounded by the window, not by len_k
    for loop in ("WinScore:", "WinExp:"):
        after = step[step.index(loop) :]
        head = after[: after.index("{") + 200]
        assert "r < rows" in head and "#pragma HLS PIPELINE II=1" in head
        assert "LOOP_TRIPCOUNT min=1 max=CONFIG_T::window_rows" in head
    # the E-ATT query projection selects and adds: no multiplication
    query = body(generated, "window_attention_eatt_query")
    assert "acc += wq[w]" in query and "*" not in query
