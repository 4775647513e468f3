"""hls4ml extension, masked cores (key_padding / causal, issue 18 item 1): the AttentionCore
layer takes the length / offset inputs L, O and its C simulation equals the golden model bit for
bit on every length and offset.

Each g++ compile costs a few seconds: three small projects are compiled once per module, plus
the project's own testbench and one `eatt hls --json` run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig
from eatt.hls import TEMPLATES
from eatt.hls.handlers import ConversionError, parse_attention_core
from eatt.hls.project import write_project
from eatt.quant.export import build_model, export_core
from eatt.quant.golden import (
    GoldenCore,
    edge_inputs,
    edge_masks,
    random_inputs,
    random_weights,
    vector_masks,
)
from tests.cli import run_eatt
from tests.test_hls import run_project_testbench

pytestmark = pytest.mark.hls

HEADER = "nnet_attention_core.h"
SMALL = dict(len_q=3, len_k=5, dim=4, heads=2)
CORES = {
    "eatt-length": CoreConfig.from_dict({**SMALL, "kind": "eatt", "key_padding": True}),
    # more queries than keys: the last queries see every key whatever the offset
    "vanilla-causal": CoreConfig.from_dict(
        {**SMALL, "kind": "vanilla", "len_q": 6, "causal": True}
    ),
    # both masks, a short exp table (weights past it are 0 among the visible keys too)
    "eatt-both": CoreConfig.from_dict(
        {**SMALL, "kind": "eatt", "key_padding": True, "causal": True, "exp_table_size": 32}
    ),
}
BACKEND = {"eatt-length": "vitis", "vanilla-causal": "vivado", "eatt-both": "vitis"}
VECTORS, VECTOR_SEED = 300, 7
#: this one comes as a model whose graph inputs are not in the node's order (O, X, L, Y)
SHUFFLED = "eatt-both"


def shuffled_model(cfg: CoreConfig):
    model = build_model(cfg, random_weights(cfg, seed=1))
    by_name = {vi.name: vi for vi in model.graph.input}
    order = [by_name[n] for n in ("O", "X", "L", "Y")]
    del model.graph.input[:]
    model.graph.input.extend(order)
    return model


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    base = tmp_path_factory.mktemp("hls_masks")
    return {
        name: write_project(
            shuffled_model(cfg) if name == SHUFFLED else cfg,
            base / name,
            seed=1,
            options=BuildOptions(backend=BACKEND[name]),
            vectors=VECTORS,
            vector_seed=VECTOR_SEED,
        )
        for name, cfg in CORES.items()
    }


def function_body(source: str, name: str) -> str:
    """The body of the C++ function `name` (comments removed), by brace matching."""
    source = re.sub(r"//[^\n]*", "", source)
    match = re.search(rf"\bvoid\s+{name}\s*\(", source)
    assert match, f"function {name} not found"
    start = source.index("{", source.index(")", match.end()))
    depth, j = 1, start + 1
    while depth:
        depth += {"{": 1, "}": -1}.get(source[j], 0)
        j += 1
    return source[start + 1 : j - 1]


def check_masks_of(cfg: CoreConfig) -> dict[str, np.ndarray]:
    return vector_masks(cfg, VECTORS, VECTOR_SEED, len(edge_inputs(cfg)[0]))


@pytest.mark.parametrize("name", list(CORES))
def test_csim_bit_exact_on_every_length_and_offset(projects, name):
    cfg, result = CORES[name], projects[name]
    csim = result["csim"]
    assert csim["first_mismatch"] is None, csim["first_mismatch"]
    assert csim["mismatches"] == 0 and result["ok"]
    assert csim["vectors"] == VECTORS and csim["edge_vectors"] == 36
    # the checked vectors hold every length and offset, and the masks change the outputs of
    # most of them (a C simulation that ignored its mask inputs could not pass)
    masks = check_masks_of(cfg)
    if cfg.key_padding:
        assert set(masks["length"].tolist()) == set(range(1, cfg.len_k + 1))
    if cfg.causal:
        assert set(masks["offset"].tolist()) == set(range(cfg.len_k))
    x, y = random_inputs(cfg, VECTORS, seed=VECTOR_SEED)
    golden = GoldenCore(cfg, random_weights(cfg, seed=1))
    first = {k: v[:VECTORS] for k, v in masks.items()}
    differ = (golden.forward(x, y, masks=first) != golden.forward(x, y)).any(axis=(1, 2))
    assert differ.mean() > 0.5
    # the generated call passes this call's length / offset (L[0], O[0]) to the masked layer
    project = Path(result["project"])
    call = (project / "firmware" / "myproject.cpp").read_text()
    assert "nnet::attention_core_masked<" in call
    assert ("L[0]" in call) == cfg.key_padding and ("O[0]" in call) == cfg.causal
    params = (project / "firmware" / "parameters.h").read_text()
    assert f"static const bool key_padding = {str(cfg.key_padding).lower()};" in params
    assert f"static const bool causal = {str(cfg.causal).lower()};" in params
    assert "typedef ap_uint<3> length_t;" in params and "typedef ap_uint<3> offset_t;" in params


def test_testbench_data_carries_the_masks(projects):
    """tb_data: X, Y then L, O per line (graph order of an exported file), edge vectors first."""
    cfg = CORES["eatt-length"]
    project = Path(projects["eatt-length"]["project"])
    rows = np.loadtxt(project / "tb_data" / "tb_input_features.dat")
    assert rows.shape == (100, (cfg.len_q + cfg.len_k) * cfg.dim + 1)
    np.testing.assert_array_equal(rows[:36, -1], edge_masks(cfg, 36)["length"])
    np.testing.assert_array_equal(rows[36:, -1], check_masks_of(cfg)["length"][:64])


def test_project_testbench_runs_as_is(projects):
    """The project's own testbench (vendor C simulation) built with g++ reads the mask columns
    of tb_data/ and reproduces the golden outputs (both masks, shuffled graph inputs)."""
    project = Path(projects["eatt-both"]["project"])
    got, expected, _ = run_project_testbench(project)
    assert got.shape == expected.shape == (100, 3 * 4)
    # the testbench prints 6 significant digits: back to codes by rounding to the output LSB
    lsb = projects["eatt-both"]["formats"]["out_lsb"]
    assert np.abs(got - expected).max() < lsb / 4
    assert np.array_equal(np.rint(got / lsb), expected / lsb)


def test_an_unmasked_core_writes_the_call_and_struct_of_before(tmp_path):
    """No mask inputs: the plain layer call, no mask constants or types in CONFIG_T (it keeps
    attention_core_config's key_padding = causal = false); the plain layer reads no mask, it
    passes the values that hide nothing."""
    cfg = CoreConfig.from_dict({**SMALL, "kind": "eatt"})
    result = write_project(cfg, tmp_path / "plain", vectors=0, compile=False)
    firmware = Path(result["project"]) / "firmware"
    call = (firmware / "myproject.cpp").read_text()
    assert "nnet::attention_core<" in call and "_masked" not in call
    params = (firmware / "parameters.h").read_text()
    assert "key_padding" not in params and "length_t" not in params
    assert ": nnet::attention_core_config {" in params
    header = (TEMPLATES / HEADER).read_text()
    for name in ("attention_core", "attention_core_front"):
        body = function_body(header, name)
        assert "length" not in body and "offset" not in body and "_masked" not in body
    top = function_body(header, "attention_core")
    assert "(x, y, CONFIG_T::len_k, CONFIG_T::len_k - 1, res," in top


def test_masked_layers_reuse_the_stages_of_the_plain_ones():
    """Both layers run one body: the front (codes, the mechanism's alignment: E-ATT's
    multiplication-free one, tests/test_hls.py scans it; V), then the softmax over the visible
    keys, then the output projection."""
    header = (TEMPLATES / HEADER).read_text()
    for name in ("attention_core", "attention_core_masked"):
        top = function_body(header, name)
        assert "#pragma HLS PIPELINE II=CONFIG_T::reuse_factor" in top
        assert "attention_core_body<x_T, y_T, res_T, CONFIG_T>(" in top
    body = function_body(header, "attention_core_body")
    assert "attention_core_front<x_T, y_T, CONFIG_T>(" in body
    assert "attention_core_softmax_values_masked<CONFIG_T>(" in body
    assert "attention_core_output<res_T, CONFIG_T>(" in body
    assert "alignment" not in body  # the front asks CONFIG_T::score


def test_wrong_number_of_inputs_names_the_node():
    cfg = CORES["eatt-both"]
    node = build_model(cfg, random_weights(cfg, seed=1)).graph.node[-1]
    assert node.op_type == "AttentionCore"
    with pytest.raises(
        ConversionError, match=r"'AttentionCore_0': expected 4 inputs \(X, Y, L, O\)"
    ):
        parse_attention_core(node, ["X", "Y", "L"], None, None)


def test_cli_hls_json_on_a_masked_file(tmp_path):
    """`eatt hls FILE.onnx --json` on an exported core with both masks: one JSON object, 0
    mismatches (the C simulation fed the check vectors' lengths and offsets)."""
    cfg = CORES["eatt-both"]
    export_core(cfg, random_weights(cfg, seed=3), tmp_path / "core.onnx")
    out = tmp_path / "hls"
    args = ["hls", str(tmp_path / "core.onnx"), "-o", str(out), "--vectors", "40", "--json"]
    r = run_eatt(*args, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout)
    assert result["csim"]["mismatches"] == 0 and result["csim"]["vectors"] == 40
    assert result["config"]["key_padding"] and result["config"]["causal"]
    assert "attention_core_masked<" in (out / "firmware" / "myproject.cpp").read_text()
