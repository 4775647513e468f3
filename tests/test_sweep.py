"""`eatt sweep` (eatt/sweep.py, eatt/sweep_point.py): a sweep on a local Ray instance, the same
sweep on a Ray cluster started here on loopback (identical records), resume after the driver is
killed mid-sweep, failures (an impossible config, a forced timeout) recorded while the others
finish, and the sweep file's one-line errors.

Ray runs with its files in a short temporary folder (RAY_TMPDIR), token authentication with a
token of the test's own (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN: nothing written to the home
folder) and usage statistics off; the cluster is
`ray start --head` bound to 127.0.0.1, its processes in their own group, stopped at the end.
The points are the small folded cores of tests/test_folded.py (their Verilator builds cached).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from eatt.sweep import SweepError, load_sweep

ROOT = Path(__file__).resolve().parent.parent
RAY = Path(sys.executable).parent / "ray"

SWEEP = """\
base: {kind: eatt, len_q: 3, len_k: 4, dim: 8, heads: 2}
level: folded
stages: [golden, rtl, sim, energy]
vectors: 12
weights_seed: 3
points:
  - {kind: eatt, folding: {lanes: 2, simd: 2}}
  - {kind: vanilla, folding: {lanes: 1, simd: 4}}
  - {kind: eatt, dim: 7}                      # impossible: dim not divisible by heads
  - {kind: vanilla, timeout_s: 0.5}           # stopped by its timeout
"""


@pytest.fixture(scope="module", autouse=True)
def ray_env():
    """Ray's files in a short temporary folder (its socket paths have a length limit), a
    token of our own, no usage statistics; restored afterwards."""
    tmp = tempfile.mkdtemp(prefix="eray", dir="/tmp")
    env = {
        "RAY_TMPDIR": tmp,
        "RAY_AUTH_MODE": "token",  # `ray start`'s default; a driver must ask for it
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "RAY_USAGE_STATS_ENABLED": "0",
        "EATT_PROGRESS": "1",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield tmp
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    shutil.rmtree(tmp, ignore_errors=True)


def eatt(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eatt.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def records(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((out / "records").glob("*.json"))}


def stable(record: dict) -> dict:
    """A record without its "run" part (wall time, memory, host, paths, cache state)."""
    return {k: v for k, v in record.items() if k != "run"}


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sweep") / "small.yaml"
    path.write_text(SWEEP)
    return path


@pytest.fixture(scope="module")
def local(sweep_file, tmp_path_factory) -> tuple[Path, dict, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("local") / "sweep"
    run = eatt("sweep", str(sweep_file), "-o", str(out), "--json")
    return out, records(out), run


def test_local_sweep_records_and_failures(local):
    out, recs, run = local
    assert run.returncode == 1, run.stderr[-3000:]  # two points failed: a failed check
    assert "Traceback" not in run.stderr
    assert "Token authentication" not in run.stderr  # Ray's default said, not warned about
    result = json.loads(run.stdout)
    assert (result["points"], result["done"], result["failed"]) == (4, 2, 2)
    assert len(recs) == 4
    done = [r for r in recs.values() if r["status"] == "done"]
    for r in done:
        m = r["metrics"]
        assert m["mismatches"] == 0 and m["golden_ok"]
        assert m["cycles"] == r["stages"]["rtl"]["ii_cycles"]  # measured == metadata
        assert m["energy_analytic_pj"] > 0
        assert r["run"]["peak_mb"] > 0 and r["run"]["wall_s"] > 0
        assert (Path(r["run"]["artifacts"]) / "rtl" / "metadata.json").is_file()
    config = recs["p002-eatt-d7"]
    assert config["failed_stage"] == "config" and "dim=7 is not divisible" in config["error"]
    timeout = recs["p003-vanilla-timeout_s0.5"]
    assert timeout["status"] == "failed" and "timeout after 0.5 s" in timeout["error"]
    # the report: Markdown, JSON, the failures listed
    assert (out / "report.md").is_file() and (out / "report.json").is_file()
    md = (out / "report.md").read_text()
    assert "p002-eatt-d7" in md and "timeout after 0.5 s" in md
    assert "progress" not in run.stdout and "sweep: 4/4 finished (2 failed)" in run.stderr


def test_cluster_on_loopback_gives_identical_records(local, sweep_file, tmp_path, ray_env):
    """The same sweep on a cluster: `ray start --head` on 127.0.0.1 (a local instance's
    setting, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, binds loopback only), eatt as its driver."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    log = open(tmp_path / "ray.log", "w")
    head = subprocess.Popen(
        [str(RAY), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
         "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={ray_env}"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert head.poll() is None, (tmp_path / "ray.log").read_text()[-2000:]
            time.sleep(0.5)
        out = tmp_path / "cluster"
        run = eatt("sweep", str(sweep_file), "-o", str(out), "--address", f"127.0.0.1:{port}")
        assert run.returncode == 1, run.stderr[-3000:]
        assert "2 done, 2 failed" in run.stdout
        listening = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
        ours = [ln for ln in listening.splitlines() if f":{port} " in ln]
        assert ours and all("127.0.0.1" in ln for ln in ours), ours
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        log.close()
    cluster = records(out)
    _, here, _ = local
    assert sorted(cluster) == sorted(here)
    for name in ("p000-eatt-p2s2", "p001-vanilla-p1s4", "p002-eatt-d7"):
        assert stable(cluster[name]) == stable(here[name]), name
    assert cluster["p003-vanilla-timeout_s0.5"]["error"].endswith("timeout after 0.5 s")


def _points_running(out: Path) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [ln for ln in ps.splitlines() if "eatt.sweep_point" in ln and str(out) in ln]


def test_resume_after_the_driver_is_killed(tmp_path):
    """SIGKILL the driver (and the local Ray it started) after the first record: that record
    stays as written; the running point's process ends on its own; --resume keeps the
    finished points and runs the rest."""
    sweep = tmp_path / "three.yaml"
    sweep.write_text(
        "base: {kind: eatt, len_q: 3, len_k: 4, dim: 8, heads: 2}\n"
        "level: folded\nstages: [golden, rtl, sim]\nvectors: 6\nweights_seed: 3\n"
        "grid:\n  kind: [eatt, vanilla]\n  folding: [{lanes: 2, simd: 2}, {lanes: 1, simd: 4}]\n"
    )
    out = tmp_path / "sweep"
    driver = subprocess.Popen(
        [sys.executable, "-m", "eatt.cli", "sweep", str(sweep), "-o", str(out),
         "--max-parallel", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not list((out / "records").glob("*.json")) and time.monotonic() < deadline:
            assert driver.poll() is None, "the sweep ended before it could be killed"
            time.sleep(0.2)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    first = records(out)
    assert 1 <= len(first) < 4
    deadline = time.monotonic() + 30
    while _points_running(out) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _points_running(out), "a point's process outlived the killed sweep"

    refused = eatt("sweep", str(sweep), "-o", str(out))
    assert refused.returncode == 2 and "--resume continues it" in refused.stderr
    run = eatt("sweep", str(sweep), "-o", str(out), "--resume", "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert (result["done"], result["kept"], result["ran"]) == (4, len(first), 4 - len(first))
    after = records(out)
    for name, record in first.items():
        assert after[name] == record  # kept as written, not run again


@pytest.mark.parametrize(
    "text, message",
    [
        ("stages: [rtl, bogus]\n", "stages: a list of golden, hls, rtl"),
        ("grid: {size: [4, 8]}\n", "grid.size: 'size' is not a config key"),
        ("frobnicate: 1\n", "unknown key 'frobnicate'"),
        ("level: unrolled\n", "level: one of alignment, attention, folded"),
        ("points: [{lanes: 2}]\n", "point 0: unknown key 'lanes'"),
        ("folding: 4\n", "folding: a mapping of lanes, simd and pe"),
        ("vectors: 0\n", "vectors: an integer >= 1"),
        ("base: missing.yaml\n", "base: missing.yaml: no such config file"),
        ("run: missing.yaml\n", "run: missing.yaml: no such run config"),
        ("beam: 2\n", "beam: for a model sweep (run: RUN.yaml) only"),
        # issue 39 item 8: refused before Ray starts, not written as NaN
        ("memory_gb: .nan\n", "memory_gb: a positive finite number"),
        ("timeout_s: .nan\n", "timeout_s: a positive finite number"),
        ("cpus: .inf\n", "cpus: a positive finite number"),
        ("folding: {bogus: 2}\n", "folding: a mapping of lanes, simd and pe"),
        ("folding: {lanes: 0}\n", "folding.lanes: an integer >= 1"),
    ],
)
def test_sweep_file_errors_name_the_file(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SweepError, match="bad.yaml") as err:
        load_sweep(path)
    assert message in str(err.value)


def test_cli_errors_are_one_line(tmp_path, sweep_file):
    (tmp_path / "bad.yaml").write_text("stages: [nope]\n")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "mine.txt").write_text("keep")
    for args, code, message in (
        ([str(tmp_path / "none.yaml")], 2, "none.yaml: no such sweep file"),
        ([str(tmp_path / "bad.yaml")], 2, "bad.yaml: stages"),
        ([str(sweep_file), "-o", str(notes)], 2, "not empty and was not made by eatt"),
        ([str(sweep_file), "--max-parallel", "0"], 2, "--max-parallel: must be >= 1"),
    ):
        run = eatt("sweep", *args)
        assert run.returncode == code, (args, run.stderr)
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], run.stderr
    assert (notes / "mine.txt").read_text() == "keep" and len(list(notes.iterdir())) == 1


def test_a_second_sweep_into_a_running_ones_folder_is_refused(tmp_path, sweep_file):
    """The running sweep holds DIR/.lock (as eatt sim holds an RTL folder's): a second sweep
    into DIR is refused in one line before any work, the folder left as it was (issue 39)."""
    from eatt.outdir import claim_dir
    from eatt.rtl_sim.procs import try_lock
    from eatt.sweep import LOCK_FILE, WHAT

    out = claim_dir(tmp_path / "out", WHAT)
    before = sorted(p.name for p in out.iterdir())
    held = try_lock(out / LOCK_FILE)  # the first sweep, still running
    try:
        run = eatt("sweep", str(sweep_file), "-o", str(out))
    finally:
        os.close(held)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "another eatt sweep is running in this folder" in lines[0]
    assert sorted(p.name for p in out.iterdir()) == before + [LOCK_FILE]


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_ends_the_sweep_and_its_ray_instance(tmp_path, sweep_file, sig, code):
    """SIGTERM / SIGHUP while the local Ray instance starts: the command's exit code (not
    Ray's sys.exit(15) or its stack dump), one line, and no Ray process left (issue 39 item 5)."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="rs", dir="/tmp"))  # short: Ray's socket paths
    env = {**os.environ, "RAY_TMPDIR": str(ray_tmp)}
    args = [sys.executable, "-m", "eatt.cli", "sweep", str(sweep_file), "-o", str(tmp_path / "o")]
    run = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=env)
    while (line := run.stderr.readline()) and "to run" not in line:
        pass
    time.sleep(2)
    run.send_signal(sig)
    rest = run.stderr.read()
    assert run.wait(timeout=120) == code, rest[-3000:]
    assert "Traceback" not in rest and rest.strip().splitlines()[-1] == "eatt: terminated"
    time.sleep(5)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert not [p for p in ps.splitlines() if str(ray_tmp) in p]
    shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_stopped_point_keeps_its_finished_stages(tmp_path):
    """A point stopped from outside (timeout, kill) keeps what its partial record holds."""
    from eatt.sweep import _stopped
    from eatt.sweep_point import PARTIAL_FILE

    spec = load_sweep(ROOT / "examples" / "sweep_folded.yaml")["points"][0]
    partial = {
        "stages": {"rtl": {"ii_cycles": 1412}},
        "metrics": {"cycles": 1412, "LUT": 797},
        "tools": {"eatt": "x"},
        "run": {"stages": {"resources": {"seconds": 9.0}}},
    }
    (tmp_path / PARTIAL_FILE).write_text(json.dumps(partial))
    r = _stopped(spec, tmp_path, "nodsp", "nodsp: timeout after 60 s", {"wall_s": 60.0})
    assert r["status"] == "failed" and r["failed_stage"] == "nodsp"
    assert r["metrics"] == {"cycles": 1412, "LUT": 797} and r["stages"]["rtl"]["ii_cycles"] == 1412
    assert r["run"]["wall_s"] == 60.0 and r["run"]["stages"]["resources"]["seconds"] == 9.0
    assert _stopped(spec, tmp_path / "none", "rtl", "rtl: x", {})["metrics"] == {}


def test_example_sweep_has_twelve_points():
    sweep = load_sweep(ROOT / "examples" / "sweep_folded.yaml")
    ids = [p["id"] for p in sweep["points"]]
    assert len(ids) == 12 == len(set(ids))
    assert {p["config"]["kind"] for p in sweep["points"]} == {"eatt", "vanilla"}
    assert all(p["stages"] == ["rtl", "sim", "resources"] for p in sweep["points"])
    assert len({p["key"] for p in sweep["points"]}) == 12


@pytest.mark.hls
def test_hls_stage_per_backend(tmp_path):
    """The hls stage: the hls4ml project of each point's backend, C simulation bit-exact."""
    (tmp_path / "h.yaml").write_text(
        "base: {kind: eatt, len_q: 2, len_k: 3, dim: 4, heads: 1}\nstages: [hls]\n"
        "vectors: 10\ngrid:\n  backend: [vitis, vivado]\n"
    )
    run = eatt("sweep", str(tmp_path / "h.yaml"), "-o", str(tmp_path / "out"), "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    rows = json.loads(run.stdout)["rows"]
    assert [r["backend"] for r in rows] == ["vitis", "vivado"]
    assert all(r["status"] == "done" and r["hls_mismatches"] == 0 for r in rows)
    record = json.loads((tmp_path / "out" / "records" / "p001-backendvivado.json").read_text())
    assert record["stages"]["hls"]["backend"] == "vivado"
    with pytest.raises(SweepError, match="backend: one of vitis, vivado"):
        (tmp_path / "b.yaml").write_text("backend: quartus\n")
        load_sweep(tmp_path / "b.yaml")


@pytest.mark.hls
def test_hls_stage_of_a_folded_point_is_the_folded_layer(tmp_path):
    """A point at level folded (its folding, or the one its reuse_factor selects) gets the
    folded hls4ml layer, folded as its RTL (docs/hls.md, "Folded")."""
    (tmp_path / "f.yaml").write_text(
        "base: {kind: eatt, len_q: 2, len_k: 3, dim: 4, heads: 1}\nstages: [hls]\n"
        "vectors: 10\npoints:\n  - {level: folded, folding: {lanes: 3, simd: 2, pe: 1}}\n"
        "  - {reuse_factor: 200}\n  - {}\n"
    )
    run = eatt("sweep", str(tmp_path / "f.yaml"), "-o", str(tmp_path / "out"), "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    rows = json.loads(run.stdout)["rows"]
    assert all(r["status"] == "done" and r["hls_mismatches"] == 0 for r in rows)
    records = sorted((tmp_path / "out" / "records").glob("p*.json"))
    hls = [json.loads(path.read_text())["stages"]["hls"] for path in records]
    assert hls[0]["folding"] == {"lanes": 3, "simd": 2, "pe": 1}
    assert hls[1]["folding"] and hls[1]["reuse_factor"] == 200
    assert hls[1]["iterations"]["ii"] <= 200
    assert hls[2]["folding"] is None  # the unrolled core


@pytest.mark.rtl
@pytest.mark.slow
def test_power_and_pnr_stages(tmp_path):
    """The measured stages on the tiny alignment: eatt power (OSU cells; skipped where its
    Debian tools are missing) and eatt pnr (nextpnr-ecp5), one point."""
    from eatt.rtl_sim.power import find_liberty, find_sta
    from eatt.rtl_sim.runner import check_simulator
    from eatt.rtl_sim.tools import ToolMissing

    try:
        find_liberty(), find_sta(), check_simulator("icarus")
    except ToolMissing as err:
        pytest.skip(str(err))
    (tmp_path / "p.yaml").write_text(
        "base: {kind: eatt, len_q: 2, len_k: 3, dim: 4, heads: 1}\nlevel: alignment\n"
        "stages: [rtl, power, pnr]\nvectors: 20\n"
    )
    run = eatt("sweep", str(tmp_path / "p.yaml"), "-o", str(tmp_path / "out"), "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    (row,) = json.loads(run.stdout)["rows"]
    assert row["energy_pj"] > 0 and row["area_um2"] > 0 and row["fmax_mhz"] > 0
    assert row["pnr_fmax_mhz"] > 0 and row["pnr_fits"]
    # the unrolled core: a call a cycle, so calls/s = Fmax (rtl_sim/throughput.py)
    assert row["calls_per_s"] == pytest.approx(row["fmax_mhz"] * 1e6)
    assert row["pnr_calls_per_s"] == pytest.approx(row["pnr_fmax_mhz"] * 1e6)


TINY_RUN = (
    "model: {dim: 8, heads: 2, ffn_dim: 32, enc_layers: 1, dec_layers: 1, attention: eatt,\n"
    "        cross: quant-eatt, max_len: 12}\n"
    "train: {steps: 4, max_tokens: 256, eval_every: 4, progress: false}\n"
    "data: {n_train: 40, n_dev: 8, n_test: 8, max_len: 8}\n"
)


def test_model_sweep_trains_and_scores_bleu(tmp_path):
    """A model sweep (run: an `eatt train` run config): each point trains and evaluates BLEU;
    the report plots analytic attention energy against BLEU."""
    (tmp_path / "run.yaml").write_text(TINY_RUN)
    (tmp_path / "models.yaml").write_text(
        "run: run.yaml\nbeam: 1\ngrid:\n  model.cross: [quant-eatt, quant-vanilla]\n"
    )
    sweep = load_sweep(tmp_path / "models.yaml")
    assert [p["id"] for p in sweep["points"]] == ["p000-quant-eatt", "p001-quant-vanilla"]
    assert sweep["points"][1]["run"]["model"]["cross"] == "quant-vanilla"
    run = eatt("sweep", str(tmp_path / "models.yaml"), "-o", str(tmp_path / "out"), "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    for row in result["rows"]:
        assert row["status"] == "done" and 0 <= row["bleu"] <= 100
        assert row["energy_analytic_pj"] > 0 and row["kind"] in ("quant-eatt", "quant-vanilla")
    eatt_row, dot_row = result["rows"]
    assert eatt_row["energy_analytic_pj"] < dot_row["energy_analytic_pj"]
    assert "energy_analytic_pj_vs_bleu" in result["fronts"]
    assert (tmp_path / "out" / "pareto.png").is_file()
    (tmp_path / "bad.yaml").write_text("run: run.yaml\ngrid: {modle.cross: [x]}\n")
    with pytest.raises(SweepError, match="unknown key 'modle.cross'"):
        load_sweep(tmp_path / "bad.yaml")
