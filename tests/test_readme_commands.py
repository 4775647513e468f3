"""Every command README.md shows, run as a user runs it, in text mode and in --json mode (the
paper-size ones, examples/paper.yaml, in test_readme_paper.py; those on trained models in
test_readme_trained.py).

Small cores keep it quick; each form checks its exit code, that text mode prints what README
says it prints (and no JSON), that --json prints exactly one JSON object, and that nothing but
progress reaches stderr. Commands that need an earlier artifact (sim needs rtl, evaluate needs
train) take it from a fixture made once per module.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli import run_eatt

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
    return run_eatt(*args, cwd=cwd, timeout=900)


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
