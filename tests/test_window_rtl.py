"""RTL of the windowed attention unit (rtl_sim/window.py): bit-exact with quant/window.py,
cycles that follow the window, compaction, handshake, lint, CLI.

Each config is built once (module-scoped fixture, ~15 s of Verilator each); later runs on the
same build only simulate. The second config (dot scores, Flexible, D >= l_k) is marked slow.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from eatt.config import CoreConfig
from eatt.quant.golden import random_weights
from eatt.quant.window import WindowGolden, compact_memory
from eatt.rtl_sim.generate import generate_rtl, load_metadata
from eatt.rtl_sim.runner import simulate
from eatt.rtl_sim.tools import verilator_env
from eatt.rtl_sim.window import LATENCY_EXTRA, simulate_window, window_steps
from tests.cli import run_eatt

pytestmark = pytest.mark.rtl

VECTORS = 160

CONFIGS = {
    # E-ATT scores, local-p Gaussian, two heads
    "eatt-gauss-lk10-d4-h2": dict(
        kind="window", len_q=1, len_k=10, dim=4, heads=2, window_d=2, position="gaussian"
    ),
    # dot scores, Flexible's quantized strength, narrow formats, D >= l_k (whole memory)
    "dot-flex-lk6-d4-h1": dict(
        kind="window", len_q=1, len_k=6, dim=4, heads=1, window_score="dot", position="flexible",
        window_d=7, g_levels=3, window_sigma=1.5, qk_bits=7, v_bits=8, count_bits=4,
    ),
}  # fmt: skip


@pytest.fixture(
    scope="module",
    params=[
        "eatt-gauss-lk10-d4-h2",
        # a second Verilator build: keeps the file well under a minute by default
        pytest.param("dot-flex-lk6-d4-h1", marks=pytest.mark.slow),
    ],
)
def simulated(request, tmp_path_factory):
    cfg = CoreConfig.from_dict(CONFIGS[request.param])
    out = tmp_path_factory.mktemp(request.param) / "rtl"
    meta = generate_rtl(cfg, random_weights(cfg, seed=2), out)
    return cfg, out, meta, simulate(out, vectors=VECTORS, seed=4)


def test_bit_exact_and_handshake(simulated):
    cfg, out, meta, result = simulated
    assert result["level"] == "window" and result["vectors"] == VECTORS
    assert result["mismatches"] == 0, result["first_mismatch"]
    assert result["first_mismatch"] is None
    assert result["reset_ok"] is True
    assert result["memories"] == VECTORS // 8


def test_cycles_follow_the_window(simulated):
    cfg, out, meta, result = simulated
    assert result["cycles_rule_holds"] is True
    rows = {int(r): v for r, v in result["cycles_by_rows"].items()}
    assert max(rows) == cfg.window_rows and 1 in rows
    for r, v in rows.items():
        assert v["latency_cycles"] == r + LATENCY_EXTRA
        assert v["ii_cycles"] in (None, r)
    assert result["ii_cycles"] == cfg.window_rows
    assert meta["latency_cycles_max"] == cfg.window_rows + LATENCY_EXTRA


def test_compacted_memory_in_rtl(simulated):
    """L0Drop Algorithm 1 in hardware: N' kept rows + one zero row with count N - N' give
    the golden output of the full gated memory, in N' + 1 rows of cycles."""
    cfg, out, meta, _ = simulated
    golden = WindowGolden(cfg, random_weights(cfg, seed=2))
    steps = window_steps(cfg, 24, seed=9, steps_per_memory=4)
    rng = np.random.default_rng(9)
    lk, groups = cfg.len_k, len(steps["keys"])
    gates = rng.random((groups, lk)) < np.linspace(0.1, 0.9, groups)[:, None]
    gates[:, 0] = True
    gated_k = np.where(gates[..., None], steps["keys"], 0)
    gated_v = np.where(gates[..., None], steps["values"], 0)
    packed = [compact_memory(gated_k[i], gated_v[i], gates[i]) for i in range(groups)]
    steps["keys"] = np.stack([c[0] for c in packed])
    steps["values"] = np.stack([c[1] for c in packed])
    steps["counts"] = np.stack([c[2] for c in packed])
    steps["length"] = np.array([c[3] for c in packed])
    group = steps["group"]
    full_w = min(cfg.window_d, lk)
    steps["p"] = np.zeros_like(group)
    steps["w"] = np.full_like(group, full_w)
    if cfg.position != "none":
        steps["g"] = np.zeros_like(group)  # Flexible g = 0: no penalty, position-free
    result = simulate_window(out, inputs=steps, seed=1)
    assert result["mismatches"] == 0, result["first_mismatch"]
    if cfg.position == "flexible":
        n = len(group)
        full = golden.forward(
            steps["x"], np.zeros(n, int), np.full(n, full_w), gated_k[group], gated_v[group],
            length=np.full(n, lk), g=np.zeros(n, int),
        )  # fmt: skip
        compact = golden.forward(
            steps["x"], steps["p"], steps["w"], steps["keys"][group], steps["values"][group],
            steps["counts"][group], steps["length"][group], steps["g"],
        )  # fmt: skip
        assert (full == compact).all()
        rows = {int(r) for r in result["cycles_by_rows"]}
        assert rows == {int(min(full_w + 1, n_rows)) for n_rows in steps["length"]}


def test_metadata_contract(simulated):
    cfg, out, meta, _ = simulated
    assert load_metadata(out) == meta
    assert meta["sources"][0] == "window_attention.sv" and meta["top"] == "window_attention"
    assert CoreConfig.from_dict(meta["config"]) == cfg
    iface = meta["interface"]
    assert iface["protocol"] == "ap_ctrl_hs"
    assert set(iface["memory_write"]) >= {"mem_we", "mem_addr", "mem_k", "mem_v", "mem_cnt"}
    assert ("g" in iface["inputs"]) == (cfg.position == "flexible")
    # Flexible's focus F (Eq. 4), the next step's p: one row per head, valid with O
    assert ("f" in iface["outputs"]) == (cfg.position == "flexible")
    if cfg.position == "flexible":
        f = iface["outputs"]["f"]
        assert f["shape"] == [cfg.heads] and f["valid"] == "o_vld"
        assert f["element_bits"] == iface["widths"]["addr_bits"]


def test_the_focus_is_compared(simulated):
    """With position flexible the testbench records F after O and every F is checked."""
    cfg, out, meta, _ = simulated
    result = simulate(out, vectors=40, seed=9)  # the build is cached; its own run folder
    assert result["mismatches"] == 0, result["first_mismatch"]
    got = np.load(Path(result["results_dir"]) / "got.npy")
    extra = cfg.heads if cfg.position == "flexible" else 0
    assert got.shape == (40, cfg.dim + extra)
    if extra:  # the foci spread over the memory's rows
        assert len(np.unique(got[:, cfg.dim :])) > 2


def test_lint_wall_clean(simulated):
    cfg, out, meta, _ = simulated
    hand = meta["sources"][1:]  # the hand-written files, each leaf clean on its own
    assert {"window_unit.sv", "window_ctrl.sv", "window_ram.sv", "recip_normalize.sv"} <= set(hand)
    # (window_unit needs the generated constants' modules: linted with the whole design below)
    for top in (name.removesuffix(".sv") for name in hand if name != "window_unit.sv"):
        cmd = ["verilator", "--lint-only", "-Wall", "--top-module", top, f"{top}.sv"]
        proc = subprocess.run(cmd, cwd=out, env=verilator_env(), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
    files = [meta["sources"][0], *hand]
    cmd = ["verilator", "--lint-only", "-Wall", "-Wno-DECLFILENAME", "--top-module", meta["top"]]
    proc = subprocess.run(
        [*cmd, *files], cwd=out, env=verilator_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_cli_sim_json(simulated):
    cfg, out, meta, _ = simulated
    proc = run_eatt("sim", str(out), "--vectors", "40", "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["vectors"] == 40 and result["mismatches"] == 0
    assert {"latency_cycles", "ii_cycles", "cycles_by_rows"} <= set(result)


def test_bad_window_inputs_are_refused(simulated):
    cfg, out, meta, _ = simulated
    steps = window_steps(cfg, 8, seed=0)
    steps["w"] = steps["w"] + cfg.window_d + 1
    with pytest.raises(ValueError, match="w has values"):
        simulate_window(out, inputs=steps)


def test_yosys_reads_the_sources(simulated):
    """Yosys' SystemVerilog front end is stricter than Verilator's in places (e.g. a cast
    after a unary minus): elaborate the sources as `eatt resources` will (about 2 s)."""
    from eatt.rtl_sim.resources import find_yosys
    from eatt.rtl_sim.tools import ToolMissing

    cfg, out, meta, _ = simulated
    try:
        cmd = find_yosys()
    except ToolMissing as err:
        pytest.skip(str(err))
    reads = " ".join(meta["sources"])
    script = f"read_verilog -sv {reads}; hierarchy -check -top {meta['top']}; proc"
    proc = subprocess.run(
        [*cmd, "-q", "-p", script], cwd=out, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-2000:]
