"""`eatt flow CHECKPOINT --layer NAME`: a trained layer through every stage (issue 18, item 6),
and the one-step core of a decoder layer (`--step`) it builds on."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eatt import flow_layer
from eatt.config import ConfigError
from eatt.flow_layer import _core_rtl, _unmeasured, check_flow_size, layer_energy
from eatt.flow_layer_report import ratio_colour
from eatt.model.layers import capture_layer, checkpoint_layer_core, save_capture
from eatt.model.train import train_from_config
from eatt.quant.golden import GoldenCore
from eatt.quant.vectors import load_capture
from eatt.rtl_sim.folding import WALK_DRAIN
from tests.cli import run_eatt

RUN = (
    "model: {dim: 8, heads: 2, ffn_dim: 32, enc_layers: 1, dec_layers: 1, attention: eatt,\n"
    "        cross: quant-eatt, dec_self: quant-vanilla, max_len: 12}\n"
    "train: {steps: 4, max_tokens: 256, eval_every: 4, progress: false}\n"
    "data: {n_train: 40, n_dev: 8, n_test: 8, max_len: 8}\n"
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("flow_layer")
    (root / "run.yaml").write_text(RUN)
    return train_from_config(root / "run.yaml", root / "run", progress=False)["checkpoint"]


def eatt(*args):
    return run_eatt(*args, timeout=900)


@pytest.mark.parametrize("name", ["decoder.0.cross", "decoder.0.self"])
def test_the_step_core_is_the_full_cores_first_row(checkpoint, name):
    full, weights = checkpoint_layer_core(checkpoint, name)
    step, step_weights = checkpoint_layer_core(checkpoint, name, step=True)
    assert (step.len_q, step.len_k) == (1, full.len_k) and full.len_q == full.len_k
    assert step.replace(len_q=full.len_q) == full
    for k, v in weights.as_dict().items():
        np.testing.assert_array_equal(v, getattr(step_weights, k))
    rng = np.random.default_rng(0)
    n, hi = 64, 2 ** (full.in_bits - 1)
    x = rng.integers(-hi, hi, (n, full.len_q, full.dim))
    y = rng.integers(-hi, hi, (n, full.len_k, full.dim))
    masks = {"length": rng.integers(1, full.len_k + 1, n)}
    if full.causal:
        masks["offset"] = rng.integers(0, full.len_k, n)
    want = GoldenCore(full, weights).forward(x, y, masks=masks)[:, :1]
    got = GoldenCore(step, weights).forward(x[:, :1], y, masks=masks)
    np.testing.assert_array_equal(got, want)


def test_the_encoder_has_no_step_core(checkpoint):
    with pytest.raises(ValueError, match="--step: encoder.0.self attends a whole source"):
        checkpoint_layer_core(checkpoint, "encoder.0.self", step=True)


@pytest.mark.parametrize("name", ["decoder.0.cross", "decoder.0.self"])
def test_a_step_capture_is_the_layers_decoding_calls(checkpoint, tmp_path, name):
    capture = capture_layer(checkpoint, name, "dev", 50, step=True)
    report = capture["report"]
    assert report["step"] and report["vectors"] == 50
    assert report["golden_vs_model"]["mismatches"] == 0
    assert report["sentences"] >= 1 and report["calls_per_sentence"] >= 1
    path = tmp_path / "acts.npz"
    save_capture(capture, path)
    cfg, _ = checkpoint_layer_core(checkpoint, name, step=True)
    cap = load_capture(path, cfg)
    assert cap["x"].shape == (50, 1, cfg.dim) and set(cap["queries"]) == {1}
    full, _ = checkpoint_layer_core(checkpoint, name)
    with pytest.raises(ValueError, match=r"vectors of a \(1, 8\) x \(12, 8\) core"):
        load_capture(path, full)


def test_sizes_the_unrolled_core_cannot_build_are_refused(checkpoint, monkeypatch):
    cfg, _ = checkpoint_layer_core(checkpoint, "decoder.0.cross")
    check_flow_size(cfg, "decoder.0.cross", False)  # the tiny model's core fits
    monkeypatch.setenv("EATT_MAX_FLOW_RTL_MB", "0.01")
    with pytest.raises(ConfigError, match="add --step for the core of one decoding step") as err:
        check_flow_size(cfg, "decoder.0.cross", False)
    assert "folded engine" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        check_flow_size(cfg.replace(len_q=1), "decoder.0.cross", True)
    assert "--step" not in str(err.value) and "folded engine" in str(err.value)


def test_the_default_models_layers_are_refused_in_one_line(tmp_path):
    """The bundled model's default size (max_len 64, dim 128) is the folded engine's."""
    from eatt.model.config import ModelConfig

    cfg = ModelConfig().quant_core("quant-eatt").replace(key_padding=True)
    with pytest.raises(ConfigError, match="MB of SystemVerilog"):
        check_flow_size(cfg, "decoder.0.cross", False)
    with pytest.raises(ConfigError, match="folded engine"):
        check_flow_size(cfg.replace(len_q=1), "decoder.0.cross", True)


def test_layer_energy_per_sentence_is_per_call_times_calls(checkpoint):
    cfg, _ = checkpoint_layer_core(checkpoint, "decoder.0.cross", step=True)
    e = layer_energy(cfg, 7.0)
    for kind in ("eatt", "vanilla"):
        for level in ("alignment", "attention"):
            x = e[kind][level]
            assert x["per_sentence_pj"]["asic"] == pytest.approx(7.0 * x["per_call_pj"]["asic"])
    assert e["eatt"]["alignment"]["muls"] == 0 < e["vanilla"]["alignment"]["muls"]
    assert layer_energy(cfg, None)["eatt"]["attention"]["per_sentence_pj"] is None


@pytest.mark.hls
@pytest.mark.slow
def test_a_trained_layer_through_the_flow(checkpoint, tmp_path):
    out = tmp_path / "flow"
    r = eatt("flow", str(checkpoint), "--layer", "decoder.0.self", "--step", "--split", "dev",
             "--vectors", "40", "--no-resources", "-o", str(out), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout)
    assert result["ok"] and result["step"] and result["config"]["causal"]
    assert result["capture"]["vectors"] == 40
    assert result["export"]["check"]["mismatches"] == 0 and result["hls"]["csim"]["mismatches"] == 0
    for kind in ("vanilla", "eatt"):  # the layer (quant-vanilla) and its E-ATT peer
        sims = result["cores"][kind]["sim"]
        assert sims["captured"]["vectors"] == 40 and sims["random + edge"]["vectors"] == 40
        assert all(s["mismatches"] == 0 for s in sims.values())
    assert result["bleu"]["exported"]["hypotheses_differ"] == 0
    for name in ("report.md", "report.json", "report.png", "acts.npz", "layer.onnx"):
        assert (out / name).is_file(), name
    meta = json.loads((out / "rtl_vanilla" / "metadata.json").read_text())
    assert meta["source"]["layer"] == "decoder.0.self" and meta["source"]["step"]
    assert "metric" in (out / "report.md").read_text()

    # the exported file and its capture through the core's flow (--inputs)
    flow2 = tmp_path / "flow2"
    r = eatt("flow", str(out / "layer.onnx"), "--inputs", str(out / "acts.npz"), "--vectors",
             "40", "--no-resources", "--no-window", "-o", str(flow2))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "40 captured vectors, 0 mismatching" in r.stdout and "flow: PASS" in r.stdout

    # the same layer as the folded engine (docs/folded.md), on the layer's real activations
    fold = tmp_path / "folded"
    r = eatt("rtl", str(out / "layer.onnx"), "--level", "folded", "-o", str(fold))
    assert r.returncode == 0, r.stderr[-3000:]
    r = eatt("sim", str(fold), "--inputs", str(out / "acts.npz"), "--vectors", "40", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    sim = json.loads(r.stdout)
    assert sim["captured"] and sim["vectors"] == 40 and sim["mismatches"] == 0

    # a sweep of the trained layer's folded engine over reuse_factor, on its real activations
    (tmp_path / "sweep.yaml").write_text(
        "base: flow/layer.onnx\ninputs: flow/acts.npz\nstages: [rtl, sim]\nvectors: 20\n"
        "grid: {reuse_factor: [1000000, 400]}\n"
    )
    r = eatt("sweep", str(tmp_path / "sweep.yaml"), "-o", str(tmp_path / "sw"), "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(r.stdout)["rows"]
    assert [row["status"] for row in rows] == ["done", "done"]
    assert all(row["mismatches"] == 0 for row in rows)
    assert rows[0]["cycles"] > rows[1]["cycles"] and rows[1]["cycles"] <= 400
    record = json.loads(next((tmp_path / "sw" / "records").glob("p001-*.json")).read_text())
    assert record["stages"]["sim"]["captured"] and record["level"] == "folded"
    bad = tmp_path / "bad.yaml"
    bad.write_text("base: flow/layer.onnx\npoints: [{dim: 16}]\n")
    r = eatt("sweep", str(bad), "-o", str(tmp_path / "sw2"))
    assert r.returncode == 2 and "dim: the base is a trained layer" in r.stderr


@pytest.mark.hls
@pytest.mark.slow
def test_a_trained_layer_through_the_folded_flow(checkpoint, tmp_path):
    """--reuse-factor: the layer's core and its peer as the folded hls4ml layer and the folded
    RTL engine, on the layer's captured vectors (docs/folded.md, "eatt flow")."""
    out = tmp_path / "flow"
    r = eatt("flow", str(checkpoint), "--layer", "decoder.0.cross", "--split", "dev",
             "--vectors", "20", "--no-resources", "--reuse-factor", "3000",
             "-o", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "folded for reuse_factor 3000, the peer at equal cycles" in r.stdout
    assert "folded layer (io_parallel, given): lanes" in r.stdout
    assert (
        "RTL eatt folded (" in r.stdout
        and "(layer), Verilator + cocotb: 20 captured vectors, 0 mismatching" in r.stdout
    )
    result = json.loads((out / "report.json").read_text())
    assert result["ok"] and result["hls"]["csim"]["mismatches"] == 0
    assert result["hls"]["csim"]["iterations_per_call"] == result["hls"]["iterations"]["total"]
    for kind in ("eatt", "vanilla"):  # the layer (quant-eatt) and its vanilla peer
        core = result["cores"][kind]
        assert core["rtl"]["level"] == "folded" and core["rtl"]["ii_cycles"] <= 3000
        assert all(s["mismatches"] == 0 for s in core["sim"].values())
    e, v = (result["cores"][k]["rtl"] for k in ("eatt", "vanilla"))  # at equal cycles
    assert (e["folding"]["lanes"], e["folding"]["simd"]) == (
        v["folding"]["lanes"],
        v["folding"]["simd"],
    )
    assert v["ii_cycles"] - 2 * WALK_DRAIN <= e["ii_cycles"] <= v["ii_cycles"]  # fewer drains
    assert result["hls"]["folding"] == e["folding"]
    assert result["bleu"]["exported"]["hypotheses_differ"] == 0

    # the same run with Yosys' steps: each core's resources and its measured energy (eatt power)
    # on the layer's captured calls, the netlist = golden model and the model's own outputs
    r = eatt("flow", str(checkpoint), "--layer", "decoder.0.cross", "--split", "dev",
             "--vectors", "20", "--reuse-factor", "3000", "-o", str(out), "--json",
             "--from-step", "resources", "--to-step", "power")  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    again = json.loads(r.stdout)
    assert again["ok"]
    for kind in ("eatt", "vanilla"):
        p = again["cores"][kind]["power"]
        assert p["inputs"] == "given" and p["vectors"] == 20 and p["mismatches"] == 0
        assert p["energy_per_call_pj"]["total"] > 0 and "memories" in p["parts"]
    assert again["cores"]["eatt"]["power"]["vs_model"]["mismatches"] == 0  # the layer's own
    rows = {row["metric"]: row for row in again["comparison"]}
    assert rows["energy, measured (pJ/call, OSU)"]["ratio"] > 0
    text = (out / "report.md").read_text()
    assert "measured energy, eatt (layer): osu018_stdcells.lib netlist" in text
    assert "20 captured calls, 0 mismatching, 0 differ from the model's own" in text


def test_a_layers_flow_stops_at_a_step_and_continues_from_the_next(checkpoint, tmp_path):
    """--to-step / --from-step on a trained layer: the flow stops after hls (no RTL, no BLEU,
    a report of what ran), continues in the same folder from rtl to sim (the capture and the
    earlier results read back), then from bleu; each part's report is ok."""
    out = tmp_path / "flow"
    common = ("flow", str(checkpoint), "--layer", "decoder.0.self", "--step", "--split", "dev",
              "--vectors", "20", "--no-resources", "-o", str(out), "--json")  # fmt: skip
    r = eatt(*common, "--to-step", "hls")
    assert r.returncode == 0, r.stderr[-3000:]
    first = json.loads(r.stdout)
    assert first["ok"] and first["cores"] == {} and "bleu" not in first
    assert first["span"] == {"from": None, "to": "hls"} and first["hls"]["csim"]["mismatches"] == 0
    assert not (out / "rtl_vanilla").exists() and (out / "layer_steps.json").is_file()
    onnx_time = (out / "layer.onnx").stat().st_mtime_ns

    r = eatt(*common, "--from-step", "rtl", "--to-step", "sim")
    assert r.returncode == 0, r.stderr[-3000:]
    second = json.loads(r.stdout)
    assert second["ok"] and "capture while decoding" not in r.stderr
    assert second["export"]["check"]["mismatches"] == 0  # read back, not run again
    assert (out / "layer.onnx").stat().st_mtime_ns == onnx_time
    for kind in ("vanilla", "eatt"):
        assert list(second["cores"][kind]["sim"]) == ["captured"]
        assert second["cores"][kind]["sim"]["captured"]["mismatches"] == 0
    assert any(row["metric"] == "RTL II (cycles)" for row in second["comparison"])

    r = eatt(*common, "--from-step", "bleu")  # sim_edges has not run
    assert r.returncode == 2 and "has no result of sim_edges" in r.stderr, r.stderr
    r = eatt(*common, "--from-step", "sim_edges")
    assert r.returncode == 0, r.stderr[-3000:]
    third = json.loads(r.stdout)
    assert third["ok"] and third["bleu"]["exported"]["hypotheses_differ"] == 0
    assert "Verilator + cocotb simulation (attention)" not in r.stderr  # sim read back
    assert all(list(third["cores"][k]["sim"]) == ["captured", "random + edge"] for k in
               ("vanilla", "eatt"))  # fmt: skip
    assert json.loads((out / "report.json").read_text())["bleu"] == third["bleu"]

    # the same run with Yosys' steps: no measured energy of an unrolled layer core (one line)
    with_yosys = tuple(a for a in common if a != "--no-resources")
    r = eatt(*with_yosys, "--from-step", "power", "--to-step", "power")
    assert r.returncode == 2 and "has no result of resources" in r.stderr, r.stderr

    # the same folder, another run's settings: one line, nothing run
    r = eatt(*common[:-3], "--vectors", "30", "-o", str(out), "--from-step", "bleu")
    assert r.returncode == 2 and "is another run's" in r.stderr, r.stderr


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "give --layer NAME"),
        (["--layer", "decoder.0.cross", "--reuse-factor", "3"], "reuse_factor: 3 is below"),
        (["--layer", "decoder.0.cross", "--reuse-factor", "0"], "--reuse-factor: must be >= 1"),
        (["--layer", "decoder.0.cross", "--inputs", "x.npz"], "--inputs: a layer's flow"),
        (["--layer", "encoder.0.self"], "encoder.0.self is eatt (float)"),
        (["--layer", "decoder.0.cross", "--config", "c.yaml"], "either --config or a CHECKPOINT"),
        (["--layer", "decoder.0.cross", "--beam", "0"], "--beam: must be in [1, 256]"),
        (["--layer", "decoder.0.cross", "--to-step", "pnr"], "--to-step: 'pnr' is not a step"),
        (
            ["--layer", "decoder.0.cross", "--no-resources", "--to-step", "power"],
            "--to-step: 'power' is not a step",
        ),
        (["--layer", "decoder.0.cross", "--from-step", "rtl"], "holds no earlier run's results"),
    ],
)
def test_a_layers_flow_refuses_bad_input_in_one_line(checkpoint, tmp_path, extra, message):
    out = tmp_path / "never"
    r = eatt("flow", str(checkpoint), *extra, "-o", str(out))
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_the_example_model_builds_in_the_flow():
    """examples/layer_flow.yaml (README) is a valid run whose decoder layers' step cores the flow
    builds, and whose encoder core it refuses in one line."""
    from pathlib import Path

    from eatt.model.train import load_run_config

    model_cfg, _ = load_run_config(Path(__file__).parents[1] / "examples" / "layer_flow.yaml")
    for kind in ("quant-eatt", "quant-vanilla"):
        core = model_cfg.quant_core(kind).replace(key_padding=True)
        check_flow_size(core.replace(len_q=1), "decoder.0.cross", True)
        with pytest.raises(ConfigError, match="add --step"):
            check_flow_size(core, "decoder.0.cross", False)


def test_the_default_size_example_folds_at_its_reuse_factor():
    """examples/default_quant.yaml (README, "The trained default model's cross-attention,
    folded"): its cross-attention core is the bundled model's 64 x 64, dim 128, 4 heads, past
    the unrolled flow's limit, and --reuse-factor 40000 folds it and its peer at equal cycles."""
    from pathlib import Path

    from eatt.flow import folded_config
    from eatt.model.train import load_run_config
    from eatt.rtl_sim.folded import folded_cycles, folding_for_reuse, peer_foldings

    model_cfg, train_cfg = load_run_config(
        Path(__file__).parents[1] / "examples" / "default_quant.yaml"
    )
    assert model_cfg.attention == "quant-eatt" and train_cfg.steps == 1500
    core = model_cfg.quant_core("quant-eatt").replace(key_padding=True)
    assert (core.len_q, core.len_k, core.dim, core.heads) == (64, 64, 128, 4)
    with pytest.raises(ConfigError):
        check_flow_size(core, "decoder.0.cross", False)
    cfg = folded_config(core, 40000)
    # E-ATT alone: the narrowest walk within 40000; the pair (the flow's): vanilla's folding,
    # E-ATT's pe the least at no more cycles; both bound by attention with the phases
    # overlapped (docs/folded.md, "Overlapped phases"; before: lanes 8, 30,469 / 30,473)
    assert folding_for_reuse(cfg, 40000) == {"lanes": 4, "simd": 16, "pe": 4}
    pair = peer_foldings(cfg, 40000)
    assert pair["eatt"] == {"lanes": 4, "simd": 16, "pe": 8}
    iis = {k: folded_cycles(cfg.replace(kind=k), **f)["ii"] for k, f in pair.items()}
    assert iis == {"eatt": 22785, "vanilla": 22785}


def test_a_layers_flow_measures_energy_on_the_folded_engine_only():
    """The power step runs on a layer's folded engine; an unrolled core (every product in
    gates) and the window unit are a skip with its reason (eatt.flow_layer._unmeasured)."""
    assert _unmeasured(False, {"lanes": 1, "simd": 2, "pe": 2}) is None
    assert "add --reuse-factor" in _unmeasured(False, None)
    assert "not the window unit" in _unmeasured(True, None)


def test_a_layers_core_keeps_each_finished_step(checkpoint, tmp_path, monkeypatch):
    """A core's results land after each of its steps, so a flow stopped in a long step (the
    power step's netlist build) keeps the core's earlier ones for --from-step."""
    cfg, weights = checkpoint_layer_core(checkpoint, "decoder.0.cross", step=True)
    cfg = cfg.replace(reuse_factor=400)

    def fake_run_steps(ctx, names):
        if names == ["resources"]:
            raise KeyboardInterrupt
        ctx.results[names[0]] = {"ok": True}
        return ctx.results

    monkeypatch.setattr(flow_layer, "run_steps", fake_run_steps)
    seen = []
    with pytest.raises(KeyboardInterrupt):
        _core_rtl(cfg, weights, tmp_path / "rtl_eatt", None, 4, 1,
                  ["rtl", "sim", "sim_edges", "resources", "power"], {}, None,
                  "decoder.0.cross", lambda steps: seen.append(list(steps)))  # fmt: skip
    assert seen == [["rtl"], ["rtl", "sim"], ["rtl", "sim", "sim_edges"]]


@pytest.mark.parametrize(
    ("metric", "ratio", "colour"),
    [
        ("energy, measured (pJ/call, OSU)", 0.73, "tab:green"),
        ("LUT (Yosys xc7)", 1.2, "tab:red"),
        ("Fmax (MHz, OpenSTA)", 1.16, "tab:green"),
        ("calls/s at that Fmax", 0.9, "tab:red"),
        ("RTL II (cycles)", 1.0, "tab:gray"),
    ],
)
def test_the_report_plot_colours_a_ratio_by_which_way_is_better(metric, ratio, colour):
    assert ratio_colour(metric, ratio) == colour
