"""Every command README.md shows, run as a user runs it, in text mode and in --json mode (the
paper-size ones, examples/paper.yaml, in test_readme_paper.py).

Small cores keep it quick; each form checks its exit code, that text mode prints what README
says it prints (and no JSON), that --json prints exactly one JSON object, and that nothing but
progress reaches stderr. Commands that need an earlier artifact (sim needs rtl, evaluate needs
train) take it from a fixture made once per module.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY = "kind: eatt\nlen_q: 2\nlen_k: 3\ndim: 4\nheads: 1\n"
TINY_WINDOW = "kind: window\nlen_q: 1\nlen_k: 6\ndim: 4\nheads: 1\nwindow_d: 1\n"
TINY_RUN = (
    "model: {dim: 8, heads: 2, ffn_dim: 32, enc_layers: 1, dec_layers: 1, attention: eatt,\n"
    "        cross: quant-eatt, max_len: 12}\n"
    "train: {steps: 4, max_tokens: 256, eval_every: 4, progress: false}\n"
    "data: {n_train: 40, n_dev: 8, n_test: 8, max_len: 8}\n"
)


def eatt(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eatt.cli", *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
    )


def both_modes(args: list[str], text_has: str, cwd: Path | None = None, code: int = 0) -> dict:
    """Run args in text mode and with --json; return the JSON object (None for failures)."""
    text = eatt(*args, cwd=cwd)
    assert text.returncode == code, f"{args}: exit {text.returncode}\n{text.stderr[-3000:]}"
    assert "Traceback" not in text.stderr
    if code == 0:
        assert text_has in text.stdout, f"{args}: {text_has!r} not in\n{text.stdout[-2000:]}"
        assert not text.stdout.lstrip().startswith("{"), "text mode printed JSON"
    js = eatt(*args, "--json", cwd=cwd)
    assert js.returncode == code, f"{args} --json: exit {js.returncode}\n{js.stderr[-3000:]}"
    assert "Traceback" not in js.stderr
    if code:
        assert js.stdout == "" and text_has in js.stderr.strip().splitlines()[-1]
        return {}
    return json.loads(js.stdout)  # exactly one object: json.loads refuses anything more


def train_tiny(work: Path, name: str, cross: str) -> str:
    """`eatt train` of TINY_RUN with its cross-attention replaced; the checkpoint's path."""
    run = work / f"{name}.yaml"
    run.write_text(TINY_RUN.replace("cross: quant-eatt", cross))
    r = eatt("train", str(run), "-o", str(work / name), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)["checkpoint"]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("readme")
    (root / "tiny.yaml").write_text(TINY)
    (root / "window.yaml").write_text(TINY_WINDOW)
    (root / "run.yaml").write_text(TINY_RUN)
    return root


def test_energy(work):
    r = both_modes(["energy", "--length", "22", "--dim", "512"], "E-ATT energy model")
    assert round(r["ratios"]["eatt"]["attention"]["asic"], 2) == 34.09
    r = both_modes(["energy", "--length", "22", "--dim", "512", "--table", "horowitz-int8"], "l=22")
    assert r["table"] == "horowitz-int8"


@pytest.mark.parametrize("config", [None, "tiny.yaml", "window.yaml"])
def test_golden(work, config):
    args = ["golden", "--vectors", "30", "--seed", "2"]
    if config:
        args += ["--config", str(work / config)]
    r = both_modes(args, "result: PASS")
    assert r["ok"]


@pytest.mark.parametrize("config", ["tiny.yaml", "window.yaml"])
def test_export(work, config):
    out = work / f"{config}.onnx"
    r = both_modes(
        ["export", "--config", str(work / config), "-o", str(out), "--check", "40"], "exported"
    )
    assert r["check"]["mismatches"] == 0 and out.is_file()


def test_export_checkpoint(work):
    from eatt.config import CoreConfig
    from eatt.quant.golden import random_weights
    from eatt.quant.modules import from_integer, save_checkpoint

    cfg = CoreConfig("eatt", 2, 3, 4, 1)
    save_checkpoint(from_integer(cfg, random_weights(cfg, 5)), work / "core.pt")
    out = work / "from_ckpt.onnx"
    r = both_modes(["export", str(work / "core.pt"), "-o", str(out), "--check", "40"], "exported")
    assert r["check"]["mismatches"] == 0


@pytest.mark.hls
@pytest.mark.parametrize("source", ["config", "onnx", "window", "folded"])
def test_hls(work, source):
    out = work / f"hls_{source}"
    if source == "onnx":
        onnx = work / "hls_src.onnx"
        assert eatt("export", "--config", str(work / "tiny.yaml"), "-o", str(onnx)).returncode == 0
        args = ["hls", str(onnx), "-o", str(out)]
    else:
        config = "window.yaml" if source == "window" else "tiny.yaml"
        args = ["hls", "--config", str(work / config), "-o", str(out)]
    if source == "folded":  # README: `eatt hls --lanes P --simd S --pe N` (docs/hls.md)
        args += ["--lanes", "3", "--simd", "2", "--pe", "1"]
    r = both_modes([*args, "--vectors", "30"], "result: PASS")
    assert r["csim"]["mismatches"] == 0
    if source == "folded":
        assert r["csim"]["iterations_per_call"] == r["iterations"]["total"]


@pytest.mark.hls
def test_hls_synth_without_vendor_tools_exits_3(work):
    both_modes(
        ["hls", "--config", str(work / "tiny.yaml"), "-o", str(work / "hls_synth"), "--synth"],
        "not found on PATH",
        code=3,
    )
    assert (work / "hls_synth" / "build_prj.tcl").is_file()


RTL_FORMS = {
    "alignment": ["--config", "tiny.yaml"],
    "attention": ["--config", "tiny.yaml", "--level", "attention"],
    "adder-levels": ["--config", "tiny.yaml", "--level", "attention", "--adder-levels", "1"],
    "window": ["--config", "window.yaml"],
    "folded": ["--config", "tiny.yaml", "--level", "folded", "--lanes", "3", "--simd", "2"],
}


@pytest.fixture(scope="module")
def rtl_dirs(work) -> dict[str, Path]:
    """`eatt rtl` of every README form, text and --json (the folder is rewritten: ours)."""
    dirs = {}
    for name, form in RTL_FORMS.items():
        args = [a if not a.endswith(".yaml") else str(work / a) for a in form]
        out = work / f"rtl_{name}"
        r = both_modes(["rtl", *args, "-o", str(out)], "wrote")
        assert r["sources"] and (out / "metadata.json").is_file()
        dirs[name] = out
    return dirs


@pytest.mark.rtl
def test_rtl(rtl_dirs):
    assert set(rtl_dirs) == set(RTL_FORMS)


@pytest.mark.rtl
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
@pytest.mark.parametrize("name", ["alignment", "attention", "window"])
def test_sim(rtl_dirs, name, simulator):
    if simulator == "icarus" and shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog not installed (apt-get install iverilog)")
    args = ["sim", str(rtl_dirs[name]), "--vectors", "40", "--simulator", simulator]
    r = both_modes(args, "result: PASS")
    assert r["mismatches"] == 0 and r["vectors"] == 40


@pytest.mark.rtl
def test_sim_folded(rtl_dirs):
    """The folded engine (docs/folded.md): bit-exact, cycles equal to metadata's formula."""
    args = ["sim", str(rtl_dirs["folded"]), "--vectors", "20"]
    r = both_modes(args, "result: PASS")
    assert r["mismatches"] == 0 and r["vectors"] == 20


@pytest.mark.rtl
@pytest.mark.slow
def test_pnr(rtl_dirs):
    """`eatt pnr DIR` (docs/pnr.md): the tiny E-ATT alignment routes on an ECP5-85k."""
    r = both_modes(["pnr", str(rtl_dirs["alignment"])], "MHz")
    assert r["routed"] and r["fmax_mhz"]


@pytest.mark.rtl
@pytest.mark.slow
def test_power(rtl_dirs):
    """`eatt power DIR` (docs/power.md): the tiny alignment's netlist on the OSU cells."""
    from eatt.rtl_sim.power import find_liberty, find_sta
    from eatt.rtl_sim.runner import check_simulator
    from eatt.rtl_sim.tools import ToolMissing

    try:
        find_liberty(), find_sta(), check_simulator("icarus")
    except ToolMissing as err:
        pytest.skip(str(err))
    r = both_modes(["power", str(rtl_dirs["alignment"]), "--vectors", "30"], "energy/call")
    assert r["mismatches"] == 0 and r["energy_per_call_pj"]["total"] > 0
    # the README's flags: the folded engine with gated clocks, the netlist in Verilator
    args = ["power", str(rtl_dirs["folded"]), "--vectors", "3", "--clock-gating"]
    r = both_modes(args, "clock gates")
    assert r["mismatches"] == 0 and r["clock_gating"]["gates"] > 0
    args = ["power", str(rtl_dirs["alignment"]), "--vectors", "10", "--simulator", "verilator"]
    r = both_modes(args, "in Verilator")
    assert r["mismatches"] == 0 and r["sim"]["simulator"] == "verilator"


@pytest.mark.rtl
def test_power_fpga(rtl_dirs):
    """`eatt power DIR --target fpga` (docs/power.md, "FPGA energy"): the tiny alignment mapped
    to ECP5 primitives, its toggles per class, the SAIF and the Vivado script, the proxy."""
    from eatt.rtl_sim.fpga_power import find_ecp5_models
    from eatt.rtl_sim.runner import check_simulator
    from eatt.rtl_sim.tools import ToolMissing

    try:
        find_ecp5_models(), check_simulator("icarus")
    except ToolMissing as err:
        pytest.skip(str(err))
    args = ["power", str(rtl_dirs["alignment"]), "--target", "fpga", "--vectors", "10"]
    r = both_modes(args, "proxy")
    assert r["mismatches"] == 0 and r["primitives"]["LUT"]["cells"] > 0
    assert Path(r["saif"]).is_file() and Path(r["vivado_script"]).is_file()


@pytest.mark.rtl
def test_resources(rtl_dirs):
    r = both_modes(["resources", str(rtl_dirs["alignment"]), "--no-nodsp"], "LUT")
    assert r["yosys"]["LUT"] > 0


@pytest.mark.rtl
def test_sweep(work):
    """`eatt sweep examples/sweep_folded.yaml` then `--resume` (docs/sweep.md), on the example
    cut to its first size and folding (2 of its 12 points: the whole takes 4 minutes)."""
    example = (ROOT / "examples" / "sweep_folded.yaml").read_text()
    cut = example.replace("    - {len_q: 8, len_k: 8, dim: 16, heads: 2}\n", "")
    engines = [line for line in cut.splitlines(keepends=True) if "folding: {lanes:" in line]
    cut = cut.replace("".join(engines[2:]), "")
    assert cut.count("lanes:") == 2 and cut.count("len_q:") == 2
    (work / "sweep_folded.yaml").write_text(cut)
    out = work / "sweep"
    text = eatt("sweep", str(work / "sweep_folded.yaml"), "-o", str(out))
    assert text.returncode == 0, text.stderr[-3000:]
    assert "sweep: 2 points, 2 done, 0 failed" in text.stdout and "Traceback" not in text.stderr
    r = both_modes(["sweep", str(work / "sweep_folded.yaml"), "-o", str(out), "--resume"], "2 kept")
    assert (r["done"], r["kept"], r["ran"]) == (2, 2, 0)
    assert {row["kind"] for row in r["rows"]} == {"eatt", "vanilla"}
    assert all(row["mismatches"] == 0 and row["LUT"] > 0 for row in r["rows"])


@pytest.mark.rtl
@pytest.mark.hls
@pytest.mark.slow
@pytest.mark.parametrize("form", ["tiny-no-window", "window", "folded"])
def test_flow(work, form):
    config = "window.yaml" if form == "window" else "tiny.yaml"
    args = ["flow", "--config", str(work / config), "-o", str(work / f"flow_{form}")]
    args += ["--vectors", "20", "--no-resources"]
    if form != "window":
        args.append("--no-window")
    if form == "folded":  # README: `eatt flow ... --reuse-factor R` (docs/folded.md)
        args += ["--reuse-factor", "200"]
    r = both_modes(args, "mismatches" if form != "window" else "windowed unit")
    assert r["ok"]
    if form == "folded":
        assert all(list(c["sim"]) == ["folded"] for c in r["cores"].values())


@pytest.fixture(scope="module")
def checkpoint(work) -> Path:
    r = eatt("train", str(work / "run.yaml"), "-o", str(work / "run"), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    return Path(json.loads(r.stdout)["checkpoint"])


def test_train(work, checkpoint):
    r = both_modes(["train", str(work / "run.yaml"), "-o", str(work / "run2")], "trained 4 steps")
    assert Path(r["checkpoint"]).is_file()


def test_evaluate(checkpoint):
    r = both_modes(["evaluate", str(checkpoint), "--beam", "2", "--split", "dev"], "BLEU")
    assert "bleu" in r


def test_export_layers_of_a_model(work, checkpoint):
    r = both_modes(["export", str(checkpoint), "--list-layers"], "decoder.0.cross")
    assert [x["name"] for x in r["layers"] if x["hardware"]] == ["decoder.0.cross"]
    out = work / "layer.onnx"
    r = both_modes(
        ["export", str(checkpoint), "--layer", "decoder.0.cross", "-o", str(out), "--check", "40"],
        "layer decoder.0.cross of",
    )
    assert r["source"]["layer"] == "decoder.0.cross" and r["check"]["ok"]
    acts = work / "acts.npz"
    r = both_modes(
        ["capture", str(checkpoint), "--layer", "decoder.0.cross", "--split", "dev", "--max",
         "60", "-o", str(acts)],
        "golden model of the exported core vs the model: 0 mismatching",
    )  # fmt: skip
    assert r["vectors"] == 60
    r = both_modes(
        ["export", str(checkpoint), "--layer", "decoder.0.cross", "-o", str(out), "--check", "60",
         "--inputs", str(acts)],
        "60 captured",
    )  # fmt: skip
    assert r["check"]["captured"] and r["check"]["mismatches"] == 0
    r = both_modes(
        ["hls", str(out), "-o", str(work / "hls_layer"), "--vectors", "60", "--inputs", str(acts)],
        "60 captured",
    )
    assert r["csim"]["captured"] and r["csim"]["mismatches"] == 0
    rtl = work / "rtl_layer"
    r = both_modes(["rtl", str(out), "--level", "attention", "-o", str(rtl)], "wrote attention RTL")
    assert r["source"]["layer"] == "decoder.0.cross"
    r = both_modes(
        ["sim", str(rtl), "--inputs", str(acts), "--vectors", "60"], "60 captured vectors"
    )
    assert r["captured"] and r["mismatches"] == 0


@pytest.mark.hls
@pytest.mark.slow
def test_flow_a_trained_layer(work, checkpoint):
    """`eatt flow MODEL.pt --layer NAME --step`: the layer through every stage, PASS."""
    r = both_modes(
        ["flow", str(checkpoint), "--layer", "decoder.0.cross", "--step", "--split", "dev",
         "--vectors", "40", "--no-resources", "-o", str(work / "flow_layer")],
        "flow: PASS",
    )  # fmt: skip
    assert r["ok"] and r["capture"]["vectors"] == 40 and r["step"]
    assert r["bleu"]["exported"]["hypotheses_differ"] == 0
    assert (work / "flow_layer" / "report.png").is_file()


def test_evaluate_hardware(checkpoint):
    """The quantized cross-attention decoded as the exported core runs it: same hypotheses."""
    r = both_modes(
        ["evaluate", str(checkpoint), "--beam", "2", "--split", "dev", "--hardware"],
        "hypotheses differ",
    )
    assert r["hardware"]["exported"]["hypotheses_differ"] == 0
    assert r["hardware"]["exported"]["bleu"] == r["bleu"]


@pytest.mark.rtl
@pytest.mark.hls
def test_a_trained_windowed_model_on_the_unit(work):
    """README, "A trained windowed model on the unit": train a quant-local-p model, take its
    cross-attention out as the window unit, capture its steps, RTL on them, evaluate."""
    ckpt = train_tiny(work, "window_run", "cross: quant-local-p, window_score: eatt, window_d: 2")
    out, steps, rtl = work / "cross_window.onnx", work / "steps.npz", work / "rtl_window"
    r = both_modes(
        ["export", ckpt, "--layer", "decoder.0.cross", "-o", str(out), "--check", "40"],
        "exported window core",
    )
    assert r["check"]["ok"] and r["config"]["kind"] == "window"
    r = both_modes(
        ["capture", ckpt, "--layer", "decoder.0.cross", "--split", "dev", "--max", "50", "-o",
         str(steps)],
        "golden model of the exported core vs the model: 0 mismatching",
    )  # fmt: skip
    assert r["vectors"] == 50 and r["unit"] == "window"
    r = both_modes(
        ["export", ckpt, "--layer", "decoder.0.cross", "-o", str(out), "--check", "50",
         "--inputs", str(steps)],
        "50 captured",
    )  # fmt: skip
    assert r["check"]["captured"] and r["check"]["mismatches"] == 0
    r = both_modes(
        ["hls", str(out), "-o", str(work / "hls_window"), "--vectors", "50", "--inputs",
         str(steps)],
        "50 captured",
    )  # fmt: skip
    assert r["csim"]["captured"] and r["csim"]["mismatches"] == 0
    r = both_modes(["rtl", str(out), "-o", str(rtl)], "wrote window RTL")
    assert r["source"]["layer"] == "decoder.0.cross"
    r = both_modes(["sim", str(rtl), "--inputs", str(steps), "--vectors", "50"], "50 captured")
    assert r["captured"] and r["mismatches"] == 0
    r = both_modes(["evaluate", ckpt, "--beam", "2", "--split", "dev", "--hardware"], "differ")
    assert r["hardware"]["exported"]["hypotheses_differ"] == 0 and r["vision_span"] <= 5


@pytest.mark.rtl
@pytest.mark.hls
@pytest.mark.slow
def test_a_trained_flexible_model_on_the_unit(work):
    """README: `eatt train examples/window_flexible.yaml` (its config, at a tiny size here) and
    `eatt flow MODEL.pt --layer decoder.0.cross`: quant-flexible through every level, PASS."""
    from eatt.model.train import load_run_config

    model, _ = load_run_config(ROOT / "examples" / "window_flexible.yaml")
    assert model.cross == "quant-flexible" and model.quant_window().position == "flexible"
    ckpt = train_tiny(
        work, "flexible_run", "cross: quant-flexible, window_score: eatt, flexible_tau: 1.0"
    )
    r = both_modes(
        ["flow", ckpt, "--layer", "decoder.0.cross", "--split", "dev", "--vectors", "40",
         "--no-resources", "-o", str(work / "flow_flexible")],
        "flow: PASS",
    )  # fmt: skip
    assert r["ok"] and r["capture"]["unit"] == "window"
    assert r["bleu"]["exported"]["hypotheses_differ"] == 0


def test_data(work):
    """`eatt data -o DIR`: the Ding task's pinned splits, written as text (tests/test_ding.py
    checks the rules)."""
    r = both_modes(["data", "-o", str(work / "ding")], "sentence pairs")
    assert r["pinned"] == "same" and r["written"] == str(work / "ding")
    lines = (work / "ding" / "test.de").read_text(encoding="utf-8").splitlines()
    assert len(lines) == r["splits"]["test"]["pairs"] == 1234


def test_experiment_quick(work):
    r = both_modes(
        ["experiment", "eatt-vs-vanilla", "--quick", "-o", str(work / "results")], "vanilla"
    )
    assert (work / "results" / "eatt-vs-vanilla" / "results.json").is_file()
    assert r["rows"] if "rows" in r else r
    # --resume: a staged experiment run again reuses its finished runs (none trained again)
    out = ["-o", str(work / "staged")]
    first = eatt("experiment", "window-unit", "--quick", *out, "--json")
    assert first.returncode == 0, first.stderr[-3000:]
    checkpoints = sorted((work / "staged" / "window-unit" / "runs").glob("*/best.pt"))
    stamps = [p.stat().st_mtime_ns for p in checkpoints]
    r = both_modes(["experiment", "window-unit", "--quick", "--resume", *out], "local-p")
    assert [p.stat().st_mtime_ns for p in checkpoints] == stamps and checkpoints
    assert [row["bleu"] for row in r["rows"]] == [
        row["bleu"] for row in json.loads(first.stdout)["rows"]
    ]
    both_modes(["experiment", "ablation", "--quick", "--resume", *out], "--resume: only", code=2)
    assert not (work / "staged" / "ablation").exists()
    # a moved folder resumes too: a fine-tuned run's init_checkpoint is stored relative to it
    (work / "staged").rename(work / "moved")
    moved = sorted((work / "moved" / "window-unit" / "runs").glob("*/best.pt"))
    stamps = [p.stat().st_mtime_ns for p in moved]
    again = eatt("experiment", "window-unit", "--quick", "--resume", "-o", str(work / "moved"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert [p.stat().st_mtime_ns for p in moved] == stamps
