"""The folded hls4ml layer (issue 19 item 2): ReuseFactor (or lanes / simd / pe) folds the
AttentionCore layer's loops (templates/nnet_folded_attention.h, the Synthesizer's forms in
nnet_folded_synth.h), its C simulation equals the golden model bit for bit, and counts the
pipelined-loop iterations of the formula, for every mechanism with a folded form.

Each project costs one g++ compile (about 5 s): eleven are built once for the module.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from eatt.build_options import BuildOptions
from eatt.cli.hls import _with_options
from eatt.config import CoreConfig
from eatt.hls import TEMPLATES
from eatt.hls.folding import FOLDED_FORMS, folded_form, hls_iterations, resolve_folding
from eatt.hls.project import METADATA, write_project
from eatt.mechanisms import MECHANISMS, mechanism_of
from eatt.quant.golden import random_weights
from eatt.rtl_sim.folded import folded_cycles, folding_for_reuse, weight_tiles
from eatt.rtl_sim.folding import WALK_DRAIN
from tests.cli import run_eatt
from tests.test_hls import function_body, multiplications, run_project_testbench

pytestmark = pytest.mark.hls

HEADER = "nnet_folded_attention.h"
SMALL = dict(len_q=3, len_k=4, dim=8, heads=2)

#: name -> (config, folding): every folded kind; E-ATT's multiply walk narrower than its select
#: walk with more queries than slots (Q tokens left over) and with idle slots; both masks; the
#: narrowest folding (1 lane, 1 feature, 1 head); odd formats (a negative input fraction); the
#: Synthesizer's Dense (score chunks over the whole token: DC, not HC) and RandInit (R read)
CASES = {
    "eatt-m2-rest": (CoreConfig.from_dict({**SMALL, "kind": "eatt", "len_q": 6}), (2, 2, 1)),
    "eatt-idle-slots": (CoreConfig.from_dict({**SMALL, "kind": "eatt", "len_q": 2}), (4, 4, 1)),
    "vanilla": (
        CoreConfig.from_dict(
            {**SMALL, "kind": "vanilla", "len_q": 5, "len_k": 3, "dim": 6, "in_frac": 6}
        ),
        (3, 3, 3),
    ),
    "eatt-masked": (
        CoreConfig.from_dict({**SMALL, "kind": "eatt", "key_padding": True, "causal": True}),
        (2, 4, 2),
    ),
    "vanilla-narrowest": (
        CoreConfig.from_dict(
            {
                "kind": "vanilla",
                "len_q": 2,
                "len_k": 3,
                "dim": 4,
                "heads": 1,
                "causal": True,
                "in_bits": 6,
                "in_frac": -2,
            }  # fmt: skip
        ),
        (1, 1, 1),
    ),
    # io_stream (hls4ml's streams: one token a beat, AXI4-Stream at the top), with the masks
    "eatt-stream": (CoreConfig.from_dict({**SMALL, "kind": "eatt", "len_q": 6}), (2, 2, 1)),
    "vanilla-stream-masked": (
        CoreConfig.from_dict({**SMALL, "kind": "vanilla", "key_padding": True, "causal": True}),
        (4, 2, 2),
    ),
    # the Synthesizer: two key blocks of several chunks each, masked; one key block, a wider
    # datapath, more queries than keys; the narrowest folding with odd formats; a stream
    "dense-masked": (
        CoreConfig.from_dict({**SMALL, "kind": "dense", "key_padding": True, "causal": True}),
        (2, 2, 2),
    ),
    "dense-wide": (CoreConfig.from_dict({**SMALL, "kind": "dense", "len_q": 6}), (4, 4, 4)),
    "randinit-masked": (
        CoreConfig.from_dict({**SMALL, "kind": "randinit", "key_padding": True, "causal": True}),
        (2, 4, 4),
    ),
    "randinit-narrowest": (
        CoreConfig.from_dict(
            {
                "kind": "randinit",
                "len_q": 2,
                "len_k": 3,
                "dim": 4,
                "heads": 1,
                "causal": True,
                "in_bits": 6,
                "in_frac": -2,
            }  # fmt: skip
        ),
        (1, 1, 1),
    ),
    "dense-stream-masked": (
        CoreConfig.from_dict(
            {**SMALL, "kind": "dense", "dim": 6, "heads": 3, "key_padding": True, "causal": True}
        ),
        (2, 1, 1),
    ),
}
STREAM = {"eatt-stream", "vanilla-stream-masked", "dense-stream-masked"}


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    base = tmp_path_factory.mktemp("hls_folded")
    return {
        name: write_project(
            cfg,
            base / name,
            seed=1,
            vectors=300,
            vector_seed=5,
            options=BuildOptions(folding=dict(zip(("lanes", "simd", "pe"), fold, strict=True))),
            io_type="io_stream" if name in STREAM else "io_parallel",
        )
        for name, (cfg, fold) in CASES.items()
    }


@pytest.mark.parametrize("name", list(CASES))
def test_folded_csim_is_bit_exact_and_takes_the_formula(projects, name):
    r = projects[name]
    cfg, (lanes, simd, pe) = CASES[name]
    csim = r["csim"]
    assert csim["first_mismatch"] is None and csim["mismatches"] == 0, csim["first_mismatch"]
    assert r["ok"] and r["folding"] == {"lanes": lanes, "simd": simd, "pe": pe}
    stream = name in STREAM
    it = hls_iterations(cfg, lanes, simd, pe, stream=stream)
    assert csim["iterations_per_call"] == it["total"] == r["iterations"]["total"]
    assert it["out"] == (cfg.len_q if stream else 0) and r["io_type"].endswith(
        "stream" if stream else "parallel"
    )
    project = Path(r["project"])
    top = (project / "firmware" / "myproject.cpp").read_text()
    assert ("nnet::folded_attention_stream<" if stream else "nnet::folded_attention<") in top
    assert "#pragma HLS DATAFLOW" in top and "#pragma HLS PIPELINE" not in top
    if stream:
        assert "#pragma HLS INTERFACE axis port=" in top and "hls::stream<input_t> &X" in top
    params = (project / "firmware" / "parameters.h").read_text()
    for key, value in (("lanes", lanes), ("simd", simd), ("pe", pe)):
        assert f"static const unsigned {key} = {value};" in params
    score = mechanism_of(cfg).hls_score  # the mechanism's kernel and its folded form
    assert f"using score = nnet::{score}_score<C>;" in params and "bool eatt" not in params
    assert f"using folded = nnet::folded_{score}<C>;" in params
    meta = json.loads((project / METADATA).read_text())
    assert meta["folding"] == r["folding"] and meta["iterations"]["formula"]
    # the weights: ap_int for synthesis, a plain integer of the same values for g++
    defines = (project / "firmware" / "defines.h").read_text()
    assert "#ifdef __SYNTHESIS__\ntypedef ap_int<8> wq" in defines
    assert defines.count("typedef signed char w") == 4


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_loops_are_the_rtl_engine_s_phases(name):
    """The loops do the RTL engine's phases: its load, its attention less the cycles that drain
    its pipelines, and its projections less the cycles its walks take to write their last
    chunk."""
    cfg, (lanes, simd, pe) = CASES[name]
    it, rtl = hls_iterations(cfg, lanes, simd, pe), folded_cycles(cfg, lanes, simd, pe)
    assert it["load"] == rtl["load"]
    assert it["attention"] == rtl["attention"] - rtl["attention_fill"]
    assert 0 < rtl["projections"] - it["projections"] <= 4 * WALK_DRAIN


def test_the_synthesizer_s_iterations():
    """Dense: V and the hidden layer on the multiply walk, DC score chunks a key block;
    RandInit: V alone, one score cycle a key block (docs/hls.md, "Folded")."""
    cfg = CoreConfig.from_dict({**SMALL, "kind": "dense"})
    dc, hc, kb = 4, 2, 2  # lanes 2, simd 2
    it = hls_iterations(cfg, 2, 2)
    assert it["projections_before"] == (4 + 3) * dc * dc and it["projections_after"] == 3 * 16
    assert it["attention"] == 3 * 2 * (kb * dc + kb + kb * hc)
    it = hls_iterations(cfg.replace(kind="randinit"), 2, 2)
    assert it["projections_before"] == 4 * dc * dc and it["projections_after"] == 3 * 16
    assert it["attention"] == 3 * 2 * (kb + kb + kb * hc)
    # every mechanism the folded engine has has a folded form
    folded = [m for m in MECHANISMS.values() if m.folded]
    assert {m.kind for m in folded} >= {"eatt", "vanilla", "dense", "randinit"}
    assert all(m.hls_score in FOLDED_FORMS for m in folded)


def test_the_weights_are_written_tile_by_tile(projects):
    """E-ATT's wq in S x S tiles, wv in S x PE tiles (the RTL ROMs' order, weight_tiles)."""
    cfg, (_, simd, pe) = CASES["eatt-m2-rest"]
    w = random_weights(cfg, seed=1)
    firmware = Path(projects["eatt-m2-rest"]["project"]) / "firmware" / "weights"
    for name, cols in (("wq", simd), ("wv", pe)):
        text = next(firmware.glob(f"{name}*.h")).read_text()
        values = [int(v) for v in text[text.index("{") + 1 : text.index("}")].split(",")]
        assert values == weight_tiles(getattr(w, name), simd, cols).ravel().tolist()
        assert values != np.asarray(getattr(w, name)).ravel().tolist()


@pytest.mark.parametrize("name", ["dense-masked", "randinit-masked"])
def test_the_synthesizer_s_weights_are_written_as_its_lanes_read_them(projects, name):
    """Dense: W_1 in S x S tiles (the walk's), W_2 in S x P tiles (a score cycle's); RandInit:
    R row-major (P entries a word), wk its one-entry placeholder."""
    cfg, (lanes, simd, _) = CASES[name]
    w = random_weights(cfg, seed=1).as_dict()
    own = [w[n] for n in mechanism_of(cfg).weight_names] + [[0]]  # RandInit: wk's placeholder
    form = folded_form(cfg)
    expected = {
        slot: form.layout(i, own[i], cfg.dim, simd, lanes).tolist()
        for i, slot in enumerate(("wq", "wk"))
    }
    if "w2" in w:  # Dense
        assert expected["wq"] == weight_tiles(w["w1"], simd).ravel().tolist()
        assert expected["wk"] == weight_tiles(w["w2"], simd, lanes).ravel().tolist()
    else:  # RandInit
        assert expected == {"wq": np.asarray(w["r"]).ravel().tolist(), "wk": [0]}
    firmware = Path(projects[name]["project"]) / "firmware" / "weights"
    for slot, values in expected.items():
        text = next(firmware.glob(f"{slot}*.h")).read_text()
        got = [int(v) for v in text[text.index("{") + 1 : text.index("}")].split(",")]
        assert got == values, slot


def test_the_project_testbench_runs_the_folded_layer(projects):
    """The project's own testbench (vendor C simulation) built with g++: the golden outputs."""
    got, expected, _ = run_project_testbench(Path(projects["eatt-masked"]["project"]))
    assert got.shape == expected.shape and np.array_equal(got, expected)


# -- E-ATT's select walk and score lanes: additions only ---------------------------------------
#: the walks' header (included by HEADER)
WALKS = "nnet_folded_walks.h"


@pytest.mark.parametrize(
    "header, name",
    [
        (WALKS, "folded_select_tile"),
        (WALKS, "folded_select_step"),
        (HEADER, "folded_l1_lanes"),
        (WALKS, "folded_eatt_project"),
    ],
)
def test_eatt_select_and_score_path_has_no_multiplication(header, name):
    body = function_body((TEMPLATES / header).read_text(), name)
    if name == "folded_eatt_project":  # V's multiply walk is in it, on purpose
        body = body.replace("folded_multiply_step<CONFIG_T, PE>", "")
    assert multiplications(body) == [], name
    # it adds (or calls what does: the core's L1 step is scanned by tests/test_hls.py)
    assert any(s in body for s in ("+=", "folded_select_tile<", "attention_l1_accumulate<"))


# -- the folding a project gets -----------------------------------------------------------------
def test_reuse_factor_folds_as_the_rtl():
    cfg = CoreConfig.from_dict({**SMALL, "kind": "eatt", "reuse_factor": 300})
    assert resolve_folding(cfg, 300) == folding_for_reuse(cfg, 300)
    assert resolve_folding(cfg, 1) is None
    assert resolve_folding(cfg, 1, {}) == {"lanes": 4, "simd": 4, "pe": 4}
    assert resolve_folding(cfg, 1, {"simd": 2}) == {"lanes": 4, "simd": 2, "pe": 2}
    it = hls_iterations(cfg, **resolve_folding(cfg, 300))
    assert it["ii"] <= 300  # a call every R cycles at most (the RTL's II is at most R too)
    assert it["total"] == it["load"] + it["projections"] + it["attention"] + it["out"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"folding": {"lanes": 3}}, "--lanes: must divide len_k = 4"),
        ({"folding": {"pe": 3}}, "--pe: must divide simd"),
        ({"folding": {"lanes": 2}, "reuse_factor": 300}, "reuse_factor 300 sets the folding"),
        ({"reuse_factor": 5}, "reuse_factor: 5 is below the folded engine's fewest"),
        ({"io_type": "io_stream"}, "--io-type io_stream: the folded layer's"),
        ({"io_type": "io_serial", "folding": {}}, "--io-type: 'io_serial' is not one of"),
    ],
)
def test_a_bad_folding_is_one_line_before_any_work(tmp_path, kwargs, match):
    cfg = CoreConfig.from_dict({**SMALL, "kind": "eatt"})
    with pytest.raises(ValueError, match=match) as err:
        write_project(cfg, tmp_path / "prj", compile=False, **_with_options(kwargs))
    assert "\n" not in str(err.value)
    assert not (tmp_path / "prj").exists()


def test_a_config_reuse_factor_folds_the_project(tmp_path):
    cfg = CoreConfig.from_dict({**SMALL, "kind": "vanilla", "reuse_factor": 400})
    r = write_project(cfg, tmp_path / "prj", compile=False)
    assert r["folding"] == folding_for_reuse(cfg, 400) and r["reuse_factor"] == 400
    top = (tmp_path / "prj" / "firmware" / "myproject.cpp").read_text()
    assert "nnet::folded_attention<" in top


def _eatt(*args: str) -> subprocess.CompletedProcess:
    return run_eatt(*args, timeout=600)


def test_cli_hls_folded_text_and_json(tmp_path):
    cfg = tmp_path / "core.yaml"
    cfg.write_text("kind: eatt\nlen_q: 4\nlen_k: 4\ndim: 8\nheads: 2\nreuse_factor: 200\n")
    r = _eatt("hls", "--config", str(cfg), "-o", str(tmp_path / "a"), "--vectors", "50")
    assert r.returncode == 0, r.stderr
    assert "0 mismatching" in r.stdout
    assert "folded layer (io_parallel, reuse_factor 200): lanes" in r.stdout
    assert "counted in C simulation" in r.stdout
    r = _eatt("hls", "--lanes", "2", "--pe", "2", "-o", str(tmp_path / "b"), "--json",
              "--vectors", "20", "--io-type", "io_stream")  # fmt: skip
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["ok"] and result["folding"]["lanes"] == 2 and result["folding"]["pe"] == 2
    assert result["io_type"] == "io_stream"
    assert result["csim"]["iterations_per_call"] == result["iterations"]["total"]
    for args, message in (
        (("--pe", "3"), "--pe: must divide simd"),
        (("--reuse-factor", "0"), "--reuse-factor: must be >= 1"),
        (("--config", str(cfg), "--simd", "2"), "reuse_factor 200 sets the folding"),
        (("--io-type", "io_stream"), "--io-type io_stream: the folded layer's"),
    ):
        r = _eatt("hls", *args, "-o", str(tmp_path / "c"))
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert message in r.stderr
        assert not (tmp_path / "c").exists()
