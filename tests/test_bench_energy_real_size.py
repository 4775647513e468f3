"""bench/energy_real_size.py without its hours of measurement: two `eatt power --json` results
added by hand (--add) become a point, its E-ATT / dot ratios, the Markdown and the plot; a
result whose memories were scaled by the classical rule is rescaled by the paper's equations."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from eatt.rtl_sim import node_scaling as scaling

BENCH = Path(__file__).resolve().parents[1] / "bench" / "energy_real_size.py"


def _bench():
    spec = importlib.util.spec_from_file_location("energy_real_size", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result(kind: str, logic: float, at_node: float) -> dict:
    classical = scaling.classical_factor(90, 1.3, 180, 1.8)
    mem = at_node * classical
    netlist = logic + 10.0
    return {
        "config": dict(kind=kind, len_q=22, len_k=22, dim=512, heads=8),
        "energy_per_call_pj": {"netlist": netlist, "memories": mem, "total": netlist + mem},
        "parts": {"logic": {"pj": logic}, "registers": {"pj": 10.0}, "memories": {"pj": mem}},
        "by_stage": {"scores": {"dynamic_pj": logic}},
        "memories": {
            "macros": [{"name": "wq_mem", "kind": "rom", "depth": 512, "width": 64,
                        "reads": 4000, "writes": 0, "read_pj": 2.5,
                        "dynamic_pj_per_call": 5000.0, "leakage_pj_per_call": 1.0}],
            "source": "CACTI 7", "node_nm": 90, "vdd": 1.3,
            "at_node_pj_per_call": {"dynamic": at_node, "leakage": 0.0, "total": at_node},
            "pj_per_call": {"total": mem},
            "scaled_to": {"node_nm": 180, "vdd": 1.8, "factor": classical,
                          "rule": scaling.CLASSICAL},
        },  # fmt: skip
        "cells": 100, "area_um2": 1.0, "cycles": 800, "vectors": 2, "inputs": "edge",
        "mismatches": 0, "sta": {"fmax_mhz": 50.0}, "seconds": 1.0,
        "sim": {"simulator": "verilator", "build_seconds": 1.0, "sim_seconds": 2.0},
        "yosys": {"seconds": 1.0},
    }  # fmt: skip


def test_added_results_make_a_point(tmp_path):
    bench = _bench()
    out = tmp_path / "real.json"
    for kind, logic in (("eatt", 50.0), ("vanilla", 100.0)):
        path = tmp_path / f"{kind}.json"
        path.write_text(json.dumps(_result(kind, logic, at_node=20.0)))
        assert bench.main(["--add", str(path), "paper/ungated", kind, "--resume",
                           "--out", str(out)]) == 0  # fmt: skip
    report = json.loads(out.read_text())
    e = report["points"]["paper/ungated"]["eatt"]
    sb = scaling.factor(90, 1.3, 180, 1.8)
    assert e["parts"]["memories"] == pytest.approx(20.0 * sb)
    assert "Stillmaker & Baas" in e["rescaled"]
    q = report["ratios"]["paper/ungated"]
    assert q["parts"]["logic"] == pytest.approx(0.5) and q["parts"]["memories"] == pytest.approx(1)
    assert q["energy"] == pytest.approx((60 + 20 * sb) / (110 + 20 * sb))
    assert 0.3 < q["paper_analytic"] < 0.4  # the paper's attention ratio at (22, 512)
    text = out.with_suffix(".md").read_text()
    assert "| paper | ungated | **E-ATT / dot** |" in text
    assert e["memories"]["by_macro"][0]["reads_per_call"] == 2000  # 4,000 reads, 2 calls
    assert "| wq_mem | rom | 512 x 64 | 2,000 | 0 | 2.500 | 5,000 | 1 |" in text
    assert out.with_suffix(".png").is_file()


def test_resume_keeps_only_points_measured_on_the_same_source(tmp_path):
    bench = _bench()
    onnx, acts = tmp_path / "layer.onnx", tmp_path / "acts.npz"
    onnx.write_bytes(b"weights one")
    acts.write_bytes(b"calls")
    args = type("Args", (), dict(onnx=onnx, inputs=acts, vectors=4))()
    source = bench.source_of("layer", args)
    assert bench.measured_on({"source": source}, "layer", source)
    onnx.write_bytes(b"weights two")  # retrained: the old point is measured again
    assert not bench.measured_on({"source": source}, "layer", bench.source_of("layer", args))
    assert not bench.measured_on({"vectors": 4}, "layer", source)  # kept no source
    args.vectors = 2
    paper = bench.source_of("paper", args)
    assert bench.measured_on({"vectors": 2}, "paper", paper)  # before sources were kept
    assert not bench.measured_on({"vectors": 4}, "paper", paper)
    # the RTL is part of a point's source: a point of an older design is measured again
    rtl = tmp_path / "rtl"
    rtl.mkdir()
    (rtl / "top.sv").write_text("module top; endmodule\n")
    (rtl / "w.mem").write_text("00\n")
    (rtl / "metadata.json").write_text("{}")
    first = {**source, "rtl_sha256": bench.rtl_digest(rtl)}
    (rtl / "metadata.json").write_text('{"other": 1}')  # not the design
    assert bench.measured_on(
        {"source": first}, "layer", {**source, "rtl_sha256": bench.rtl_digest(rtl)}
    )
    (rtl / "w.mem").write_text("01\n")
    assert not bench.measured_on(
        {"source": first}, "layer", {**source, "rtl_sha256": bench.rtl_digest(rtl)}
    )
    # both kinds on other sources: no ratio between them
    a = _result("eatt", 50.0, 20.0)
    b = _result("vanilla", 100.0, 20.0)
    report = {"points": {"paper/ungated": {"eatt": bench._record(a, {"vectors": 2}),
                                           "vanilla": bench._record(b, {"vectors": 4})}},
              "configs": {"paper": dict(len_q=22, len_k=22, dim=512, heads=8)}}  # fmt: skip
    assert bench.ratios(report) == {}
    # each kind is its own design: their RTL digests differ, the ratio stands
    report["configs"]["paper"]["folding"] = bench.FOLDING["paper"]
    report["points"]["paper/ungated"] = {
        "eatt": bench._record(a, {"vectors": 2, "rtl_sha256": "e"}),
        "vanilla": bench._record(b, {"vectors": 2, "rtl_sha256": "v"}),
    }
    assert bench.ratios(report)["paper/ungated"]["parts"]["logic"] == pytest.approx(0.5)
