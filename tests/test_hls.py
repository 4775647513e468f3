"""hls4ml extension: QONNX core -> hls4ml project, C simulation bit-exact to the golden model.

Every g++ compile of a project costs a few seconds, so the C-simulation projects are built once
per module (three cores); the other tests write projects without compiling them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from eatt.build_options import BuildOptions
from eatt.cli.hls import _with_options
from eatt.config import CoreConfig
from eatt.hls import TEMPLATES, register
from eatt.hls.handlers import ConversionError
from eatt.hls.project import (
    METADATA,
    BuildError,
    ToolMissing,
    parse_csynth_report,
    synth,
    write_project,
)
from eatt.mechanisms import mechanism_of
from eatt.outdir import MARKER, OutputError
from eatt.quant.export import build_model
from eatt.quant.golden import random_weights
from eatt.rtl_sim.tools import ToolMissing as RtlToolMissing

pytestmark = pytest.mark.hls

ROOT = Path(__file__).resolve().parents[1]
HEADER = "nnet_attention_core.h"

CORES = {
    # 8 x 8, dim 16 at default formats: the output LSB is 4 (a negative fraction), which must
    # not upset the project's testbench
    "eatt-default": CoreConfig("eatt", 8, 8, 16, 2),
    # odd sizes and widths: len_q != len_k, 4 heads, negative tau, a negative input fraction
    # (LSB 2**2), narrow weights and tables
    "eatt-narrow": CoreConfig(
        kind="eatt",
        len_q=3,
        len_k=5,
        dim=8,
        heads=4,
        tau=-4.0,
        in_bits=6,
        in_frac=-2,
        weight_bits=4,
        qk_bits=8,
        v_bits=8,
        out_bits=10,
        exp_table_size=64,
        exp_frac=8,
        recip_table_size=32,
        recip_frac=10,
    ),
    "dot-wide": CoreConfig(
        kind="vanilla",
        len_q=5,
        len_k=3,
        dim=6,
        heads=2,
        in_bits=10,
        in_frac=6,
        weight_bits=6,
        qk_bits=14,
        v_bits=10,
        out_bits=16,
        exp_table_size=128,
        exp_frac=12,
        recip_table_size=64,
        recip_frac=14,
    ),
}

#: the Vivado backend uses the same templates: one core goes through it
BACKEND = {"eatt-default": "vitis", "eatt-narrow": "vivado", "dot-wide": "vitis"}


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    """One compiled project per core, checked on 1,000 random + the edge vectors."""
    base = tmp_path_factory.mktemp("hls")
    return {
        name: write_project(
            cfg,
            base / name,
            seed=1,
            options=BuildOptions(backend=BACKEND[name]),
            vectors=1000,
            vector_seed=7,
        )
        for name, cfg in CORES.items()
    }


def test_register_is_idempotent():
    import hls4ml
    from hls4ml.converters.onnx_to_hls import layer_handlers

    from eatt.hls.handlers import parse_attention_core
    from eatt.hls.layers import AttentionCore

    register()
    register()
    assert hls4ml.model.layers.layer_map["AttentionCore"] is AttentionCore
    assert layer_handlers["AttentionCore"] is parse_attention_core
    for name in ("Vitis", "Vivado"):
        sources = hls4ml.backends.get_backend(name).get_custom_source()
        assert any(key.endswith(HEADER) for key in sources)


@pytest.mark.parametrize("name", list(CORES))
def test_csim_bit_exact(projects, name):
    result = projects[name]
    csim = result["csim"]
    assert csim["first_mismatch"] is None, csim["first_mismatch"]
    assert csim["mismatches"] == 0
    assert csim["vectors"] == 1000 and csim["edge_vectors"] == 36
    assert result["ok"]
    project = Path(result["project"])
    assert (project / "build_prj.tcl").is_file()
    assert result["backend"] == BACKEND[name]
    # the project's own testbench data: edge vectors first, 100 in all, with golden outputs
    lines = (project / "tb_data" / "tb_input_features.dat").read_text().splitlines()
    preds = (project / "tb_data" / "tb_output_predictions.dat").read_text().splitlines()
    cfg = CORES[name]
    assert len(lines) == len(preds) == 100
    assert len(lines[0].split()) == (cfg.len_q + cfg.len_k) * cfg.dim
    assert len(preds[0].split()) == cfg.len_q * cfg.dim
    assert json.loads((project / METADATA).read_text())["csim"]["mismatches"] == 0
    call = (project / "firmware" / "myproject.cpp").read_text()
    assert "nnet::attention_core<" in call
    score = mechanism_of(cfg).hls_score  # the mechanism's kernel, by type in CONFIG_T
    assert (
        f"using score = nnet::{score}_score<C>;"
        in (project / "firmware" / "parameters.h").read_text()
    )


def run_project_testbench(project: Path) -> tuple[np.ndarray, np.ndarray, str]:
    """Build a project's own testbench (myproject_test.cpp, what vendor C simulation runs)
    with g++ and run it: (its outputs, tb_data's golden outputs, its stderr). Skips without
    g++."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not on PATH")
    cmd = [gxx, "-O1", "-std=c++14", "-Ifirmware/ap_types", "-Ifirmware"]
    cmd += ["myproject_test.cpp", "firmware/myproject.cpp", "-o", "tb_gxx"]
    subprocess.run(cmd, cwd=project, check=True, capture_output=True)
    run = subprocess.run(["./tb_gxx"], cwd=project, check=True, capture_output=True, text=True)
    got = np.loadtxt(project / "tb_data" / "csim_results.log")
    expected = np.loadtxt(project / "tb_data" / "tb_output_predictions.dat")
    return got, expected, run.stderr


def test_project_testbench_runs_as_is(projects):
    """The project's own testbench (what vendor C simulation runs) built with g++ reproduces
    the golden outputs written to tb_data/ (one more compile: the 8 x 16 E-ATT core)."""
    got, expected, stderr = run_project_testbench(Path(projects["eatt-default"]["project"]))
    assert "cannot be negative" not in stderr
    assert got.shape == expected.shape == (100, 8 * 16)
    assert np.array_equal(got, expected)


# -- no multiplication in the E-ATT alignment -------------------------------------------------
def function_body(source: str, name: str) -> str:
    """The body of the C++ function `name` (comments removed), by brace matching."""
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    source = re.sub(r"//[^\n]*", "", source)
    match = re.search(rf"\bvoid\s+{name}\s*\(", source)
    assert match, f"function {name} not found"
    # skip the parameter list, then match the body's braces
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


def multiplications(body: str) -> list[str]:
    """Every `*` in a function body, with its context (a body of adders has none)."""
    return [body[max(0, m.start() - 30) : m.end() + 30] for m in re.finditer(r"\*", body)]


#: the E-ATT alignment and the helpers it calls: binarize (Eq. 4), select and add (Eq. 6-9),
#: the L1 distance (Eq. 10)
EATT_PATH = (
    "l1_alignment",
    "attention_binarize",
    "attention_select_project",
    "attention_l1_accumulate",
)


def test_eatt_alignment_has_no_multiplication(projects):
    project = Path(projects["eatt-default"]["project"])
    generated = (project / "firmware" / "nnet_utils" / HEADER).read_text()
    assert generated == (TEMPLATES / HEADER).read_text()
    # the generated top calls the E-ATT layer, whose alignment is the scanned function
    assert "nnet::attention_core<" in (project / "firmware" / "myproject.cpp").read_text()
    params = (project / "firmware" / "parameters.h").read_text()
    assert "using score = nnet::l1_score<C>;" in params  # the mechanism's kernel (CONFIG_T)
    top = function_body(generated, "attention_core_front")
    assert "CONFIG_T::template score<CONFIG_T>::alignment(" in top
    assert "ALIGNMENT<CONFIG_T>(x, y, wq, wk, scores)" in generated  # l1_score -> l1_alignment
    alignment = function_body(generated, "l1_alignment")
    for name in EATT_PATH[1:]:  # the helpers are the ones it calls
        assert f"{name}<CONFIG_T" in alignment, name
    bodies = [function_body(generated, name) for name in EATT_PATH]
    path = "".join(bodies)
    assert "+=" in path and "-=" in path  # it does add and subtract
    assert [multiplications(body) for body in bodies] == [[]] * len(EATT_PATH)


def test_multiplication_scan_would_catch_a_product():
    source = (TEMPLATES / HEADER).read_text()
    mutated = source.replace("acc += w[f];", "acc += xb[i][r] * w[f];", 1)
    assert mutated != source
    assert multiplications(function_body(mutated, "attention_select_project"))
    # and the dot-product alignment, which does multiply, is flagged
    assert multiplications(function_body(source, "dot_alignment"))


# -- conversion errors, regeneration, no stdout ------------------------------------------------
SMALL = CoreConfig(kind="eatt", len_q=2, len_k=3, dim=4, heads=2)


def small_model() -> onnx.ModelProto:
    return build_model(SMALL, random_weights(SMALL, seed=2))


def test_unsupported_op_names_the_node(tmp_path):
    model = small_model()
    out = model.graph.output[0].name
    core = next(n for n in model.graph.node if n.op_type == "AttentionCore")
    core.output[0] = "core_out"
    model.graph.node.append(helper.make_node("Relu", ["core_out"], [out], name="Relu_extra"))
    path = tmp_path / "bad.onnx"
    onnx.save(model, path)
    with pytest.raises(ConversionError, match=r"node 'Relu_extra' \(Relu\)"):
        write_project(path, tmp_path / "prj", compile=False)
    assert not (tmp_path / "prj").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.onnx"]  # no temporary left


def test_unsupported_attribute_names_the_node(tmp_path):
    model = small_model()
    core = next(n for n in model.graph.node if n.op_type == "AttentionCore")
    core.attribute.append(helper.make_attribute("dropout", 1))
    with pytest.raises(ConversionError, match=r"AttentionCore node 'AttentionCore_0'.*'dropout'"):
        write_project(model, tmp_path / "prj", compile=False)


def test_regenerate_leaves_no_stale_files(tmp_path, capfd):
    out = tmp_path / "prj"
    write_project(SMALL, out, compile=False)
    first = sorted(p.relative_to(out) for p in out.rglob("*"))
    (out / "firmware" / "stale.h").write_text("// left over\n")
    write_project(SMALL.replace(len_q=3), out, compile=False)
    second = sorted(p.relative_to(out) for p in out.rglob("*"))
    assert not (out / "firmware" / "stale.h").exists()
    assert first == second
    assert "len_q = 3" in (out / "firmware" / "parameters.h").read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["prj"]
    assert capfd.readouterr().out == ""  # hls4ml's prints go to stderr (--json owns stdout)


def test_refuses_to_replace_a_foreign_directory(tmp_path, monkeypatch):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    # refused before any work: no conversion, not even the source is read
    monkeypatch.setattr("eatt.hls.project.load_source", lambda *a, **k: pytest.fail("loaded"))
    with pytest.raises(OutputError, match="not made by eatt") as err:
        write_project(SMALL, tmp_path / "mine")
    assert "\n" not in str(err.value)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_replaces_a_project_written_before_the_marker(tmp_path):
    """A project of an earlier eatt (METADATA, no marker) is still ours to replace."""
    old = tmp_path / "prj"
    (old / "firmware").mkdir(parents=True)
    (old / METADATA).write_text("{}")
    write_project(SMALL, old, compile=False)
    assert (old / MARKER).is_file() and (old / "build_prj.tcl").is_file()


def test_project_mode_and_paths_name_the_final_folder(tmp_path):
    """The folder gets the usual mode (not mkdtemp's 0700) and nothing in it names the
    temporary folder it was written in: hls4ml_config.yml's OutputDir is the project."""
    out = tmp_path / "prj"
    mask = os.umask(0o027)
    try:
        write_project(SMALL, out, compile=False)
    finally:
        os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~0o027
    config = (out / "hls4ml_config.yml").read_text().splitlines()
    assert f"OutputDir: {out.resolve()}" in config
    # the converter's input is not dumped into it (hls4ml would pickle the ONNX model, weights
    # and all: 8 MB at the paper's size)
    assert not [line for line in config if line.startswith("OnnxModel")]
    for path in out.rglob("*"):
        if path.is_file():
            assert b".prj.tmp-" not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"clock_ns": float("nan")}, "--clock"),
        ({"clock_ns": float("inf")}, "--clock"),
        ({"clock_ns": -5.0}, "--clock"),
        ({"clock_ns": 0}, "--clock"),
        ({"clock_ns": "5"}, "--clock"),
        ({"clock_ns": True}, "--clock"),
        ({"part": ""}, "--part"),
        ({"part": 'xc7a"; exec rm'}, "--part"),
        ({"backend": "quartus"}, "--backend"),
        ({"reuse_factor": 0}, "reuse_factor"),
        ({"reuse_factor": 1.5}, "reuse_factor"),
        ({"tb_vectors": -1}, "tb_vectors"),
    ],
)
def test_bad_options_are_refused_before_any_work(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match) as err:
        write_project(SMALL, tmp_path / "prj", compile=False, **_with_options(kwargs))
    assert "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_clock_part_and_metadata_are_written_as_given(tmp_path):
    out = tmp_path / "prj"
    result = write_project(SMALL, out, compile=False, clock_ns=4, part="xc7a200t-fbg676-2")
    assert result["clock_ns"] == 4 and result["part"] == "xc7a200t-fbg676-2"
    tcl = (out / "project.tcl").read_text()
    assert "set clock_period 4\n" in tcl and 'set part "xc7a200t-fbg676-2"' in tcl
    # strict JSON: no NaN / Infinity anywhere
    json.loads((out / METADATA).read_text(), parse_constant=pytest.fail)


def test_missing_compiler_is_toolmissing_before_any_work(tmp_path, monkeypatch):
    """No g++ on PATH: ToolMissing (the CLI's exit 3) in one line, nothing written."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ToolMissing, match=r"^g\+\+ not found.*nothing was written") as err:
        write_project(SMALL, tmp_path / "prj")
    assert "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []
    assert ToolMissing is RtlToolMissing  # one class for every missing tool
    # the project alone needs no compiler
    assert write_project(SMALL, tmp_path / "prj", compile=False)["csim"] is None


def test_compiler_failure_is_one_line(tmp_path, monkeypatch):
    """g++ that fails: BuildError in one line, the folder is not left behind."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "g++").write_text("#!/bin/sh\necho 'broken compiler' >&2\nexit 1\n")
    (fake / "g++").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(BuildError, match="could not build the C simulation") as err:
        write_project(SMALL, tmp_path / "prj", vectors=5)
    assert "\n" not in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]


def test_synth_without_tool_names_tool_and_project(tmp_path, monkeypatch):
    out = tmp_path / "prj"
    write_project(SMALL, out, options=BuildOptions(backend="vivado"), compile=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ToolMissing, match="vivado_hls not found") as err:
        synth(out)
    assert err.value.tool == "vivado_hls" and err.value.project == str(out)
    assert str(out) in str(err.value) and "\n" not in str(err.value)
    write_project(SMALL, out, options=BuildOptions(backend="vitis"), compile=False)
    with pytest.raises(ToolMissing, match="vitis-run or vitis_hls not found") as err:
        synth(out)
    assert "vitis-run --mode hls --tcl build_prj.tcl" in str(err.value)


# -- C-synthesis report parser ------------------------------------------------------------------
# Layout of the csynth.xml that Vivado HLS / Vitis HLS write to
# <project>_prj/solution1/syn/report/<top>_csynth.xml: the element names and nesting are those
# hls4ml 1.3.0 reads in hls4ml/report/vivado_report.py (parse_vivado_report), which follow the
# C-synthesis report described in AMD UG1399 (Vitis HLS User Guide, "Synthesis Summary"). The
# numbers are invented; the layout is not checked against a real tool run on this machine.
CSYNTH_XML = """<?xml version="1.0" encoding="UTF-8"?>
<profile>
  <ReportVersion><Version>2023.2</Version></ReportVersion>
  <UserAssignments>
    <unit>ns</unit>
    <ProductFamily>virtexuplus</ProductFamily>
    <Part>xcvu13p-flga2577-2-e</Part>
    <TopModelName>myproject</TopModelName>
    <TargetClockPeriod>5.00</TargetClockPeriod>
    <ClockUncertainty>1.35</ClockUncertainty>
    <FlowTarget>vivado</FlowTarget>
  </UserAssignments>
  <PerformanceEstimates>
    <PipelineType>yes</PipelineType>
    <SummaryOfTimingAnalysis>
      <unit>ns</unit>
      <EstimatedClockPeriod>3.611</EstimatedClockPeriod>
    </SummaryOfTimingAnalysis>
    <SummaryOfOverallLatency>
      <unit>clock cycles</unit>
      <Best-caseLatency>14</Best-caseLatency>
      <Average-caseLatency>14</Average-caseLatency>
      <Worst-caseLatency>15</Worst-caseLatency>
      <Best-caseRealTimeLatency>70.000 ns</Best-caseRealTimeLatency>
      <Average-caseRealTimeLatency>70.000 ns</Average-caseRealTimeLatency>
      <Worst-caseRealTimeLatency>75.000 ns</Worst-caseRealTimeLatency>
      <Interval-min>1</Interval-min>
      <Interval-max>1</Interval-max>
    </SummaryOfOverallLatency>
  </PerformanceEstimates>
  <AreaEstimates>
    <Resources>
      <BRAM_18K>2</BRAM_18K>
      <DSP>48</DSP>
      <FF>10432</FF>
      <LUT>35120</LUT>
      <URAM>0</URAM>
    </Resources>
    <AvailableResources>
      <BRAM_18K>5376</BRAM_18K>
      <DSP>12288</DSP>
      <FF>3456000</FF>
      <LUT>1728000</LUT>
      <URAM>1280</URAM>
    </AvailableResources>
  </AreaEstimates>
</profile>
"""


def test_parse_csynth_report(tmp_path):
    path = tmp_path / "myproject_csynth.xml"
    path.write_text(CSYNTH_XML)
    report = parse_csynth_report(path)
    assert report["top"] == "myproject"
    assert report["target_clock_ns"] == 5.0 and report["estimated_clock_ns"] == 3.611
    assert report["latency_cycles"] == 15 and report["latency_best_cycles"] == 14
    assert report["interval_cycles"] == 1 and report["interval_min_cycles"] == 1
    assert report["resources"] == {"LUT": 35120, "FF": 10432, "DSP": 48, "BRAM": 2, "URAM": 0}
    assert report["available"]["DSP"] == 12288
    # Vivado HLS names the DSP column DSP48E; undef latencies become None
    vivado = CSYNTH_XML.replace("<DSP>48</DSP>", "<DSP48E>48</DSP48E>").replace(
        "<Worst-caseLatency>15<", "<Worst-caseLatency>undef<"
    )
    path.write_text(vivado)
    report = parse_csynth_report(path)
    assert report["resources"]["DSP"] == 48 and report["latency_cycles"] is None
    path.write_text("<profile/>")
    with pytest.raises(ValueError, match="not a C-synthesis report"):
        parse_csynth_report(path)


def test_vectors_are_checked(tmp_path):
    with pytest.raises(ValueError, match="vectors"):
        write_project(SMALL, tmp_path / "p", vectors=-1)
