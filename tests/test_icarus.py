"""The second simulator: every cocotb testbench (alignment, attention, window; E-ATT and dot)
also runs in Icarus Verilog, and gives the same result as Verilator, key for key (bit-exact
outputs, the same cycle counts).

The configs, weights and vectors are those of tests/test_rtl.py and tests/test_window_rtl.py,
so the Verilator builds come from the build cache when those ran (or run) in the same cache.
Icarus builds take well under a second; its simulations a few seconds. Without iverilog these
tests skip (apt-get install iverilog).
"""

from __future__ import annotations

import shutil

import pytest

from eatt.config import CoreConfig
from eatt.quant.golden import random_weights
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.runner import simulate
from eatt.rtl_sim.tools import ToolMissing

HAVE_ICARUS = shutil.which("iverilog") is not None and shutil.which("vvp") is not None
needs_icarus = pytest.mark.skipif(
    not HAVE_ICARUS,
    reason="Icarus Verilog not installed: apt-get install iverilog (brew install icarus-verilog)",
)
pytestmark = pytest.mark.rtl

#: what differs between simulators by nature: which, where, how long
RUN_KEYS = {"simulator", "cached_build", "build_seconds", "sim_seconds", "build_dir", "results_dir",
            "outputs"}  # fmt: skip

WINDOW = dict(kind="window", len_q=1, len_k=10, dim=4, heads=2, window_d=2, position="gaussian")
#: position flexible: the focus F is one more lane of O's reciprocal leaf; as a second,
#: differently parameterized recip_normalize instance it made Icarus 11 compute O wrong
WINDOW_FLEX = dict(
    kind="window", len_q=1, len_k=12, dim=8, heads=2, position="flexible", window_d=3,
)  # fmt: skip
WINDOW_DOT = dict(
    kind="window", len_q=1, len_k=6, dim=4, heads=1, window_score="dot", position="flexible",
    window_d=7, g_levels=3, window_sigma=1.5, qk_bits=7, v_bits=8, count_bits=4,
)  # fmt: skip
# (config, level, weight seed, vectors, simulation seed): as in test_rtl.py / test_window_rtl.py
CORE = dict(len_q=2, len_k=3, dim=4, heads=2)
CASES = {
    "alignment-eatt": (dict(kind="eatt", **CORE), "alignment", 3, 400, 5),
    "alignment-vanilla": (dict(kind="vanilla", **CORE), "alignment", 3, 400, 5),
    "attention-eatt": (dict(kind="eatt", **CORE), "attention", 3, 400, 5),
    "attention-vanilla": (dict(kind="vanilla", **CORE), "attention", 3, 400, 5),
    "window-eatt": (WINDOW, None, 2, 160, 4),
    "window-dot": (WINDOW_DOT, None, 2, 160, 4),
    "window-flexible": (WINDOW_FLEX, None, 2, 160, 4),
}  # fmt: skip


@needs_icarus
@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.slow) if c == "window-dot" else c for c in sorted(CASES)],
)
def test_icarus_equals_verilator(case, tmp_path):
    config, level, wseed, vectors, seed = CASES[case]
    cfg = CoreConfig.from_dict(config)
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=wseed), out, **({"level": level} if level else {}))
    icarus = simulate(out, vectors=vectors, seed=seed, simulator="icarus")
    verilator = simulate(out, vectors=vectors, seed=seed)
    assert icarus["simulator"] == "icarus" and verilator["simulator"] == "verilator"
    assert icarus["mismatches"] == 0, icarus["first_mismatch"]
    assert icarus["reset_ok"] is True
    same = {k: v for k, v in icarus.items() if k not in RUN_KEYS}
    assert same == {k: v for k, v in verilator.items() if k not in RUN_KEYS}
    # each simulator's run beside the RTL, the builds outside it
    for r in (icarus, verilator):
        assert (out / "sim" / r["simulator"] / "summary.json").is_file()
        assert str(out) not in r["build_dir"]
    again = simulate(out, vectors=4, seed=seed, simulator="icarus")
    assert again["cached_build"] is True and again["mismatches"] == 0


def test_missing_icarus_is_tool_missing(tmp_path, monkeypatch):
    import eatt.rtl_sim.runner as runner

    cfg = CoreConfig.from_dict(CASES["alignment-eatt"][0])
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=3), out)
    real = shutil.which
    monkeypatch.setattr(
        runner.shutil, "which", lambda n, *a, **k: None if n == "iverilog" else real(n, *a, **k)
    )
    with pytest.raises(ToolMissing, match="apt-get install iverilog") as err:
        simulate(out, vectors=4, simulator="icarus")
    assert "\n" not in str(err.value)
    assert not (out / "sim").exists()  # refused before anything was written
    with pytest.raises(ValueError, match="not one of verilator, icarus"):
        simulate(out, vectors=4, simulator="modelsim")
