"""eatt power --clock-gating (rtl_sim/clock_gating.py): Yosys' clockgate with a latch-based
gate of the OSU cells; the gated netlist equals the golden model, its registers and clock cost
less than the ungated one's on the same vectors, and the gates' own energy is a part of its own."""

from __future__ import annotations

import json

import pytest

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig
from eatt.quant.golden import random_weights
from eatt.rtl_sim import clock_gating as gating
from eatt.rtl_sim.folded import generate_folded_rtl
from eatt.rtl_sim.power import check_tools, power
from eatt.rtl_sim.tools import ToolMissing
from tests.cli import run_eatt

TINY = dict(len_q=2, len_k=2, dim=4, heads=1, in_bits=4, in_frac=2, weight_bits=4, qk_bits=6)


def test_the_gate_is_the_librarys_cells():
    cells = gating.cells_for("osu018", {"INVX1", "LATCH", "AND2X1"})
    text = gating.icg_verilog(cells)
    assert f"module {gating.MODULE} (input E, input CLK, output GCLK)" in text
    assert text.count(f"(* {gating.ATTRIBUTE} *)") == 3
    assert "LATCH u_latch (.CLK(clk_n), .D(E), .Q(enable))" in text  # open while CLK is low
    with pytest.raises(ValueError, match="--clock-gating: the Liberty my.lib has no LATCH"):
        gating.cells_for("my.lib", {"INVX1", "AND2X1"})


@pytest.mark.rtl
@pytest.mark.slow
def test_gated_clocks_save_register_energy(tmp_path):
    try:
        check_tools()
    except ToolMissing as err:
        pytest.skip(str(err))
    cfg = CoreConfig.from_dict(dict(kind="eatt", **TINY))
    out = tmp_path / "rtl"
    folding = {"lanes": 1, "simd": 2, "pe": 2}
    generate_folded_rtl(cfg, random_weights(cfg, seed=2), out, BuildOptions(folding=folding))
    plain = power(out, vectors=4, seed=1)
    gated = power(out, vectors=4, seed=1, clock_gating=4)
    assert plain["mismatches"] == gated["mismatches"] == 0
    assert plain["clock_gating"] == {"gates": 0}
    g = gated["clock_gating"]
    assert g["gates"] > 0 and 0 < g["gated_flip_flops"] <= g["flip_flops"]
    assert g["cells"] == ["INVX1", "LATCH", "AND2X1"] and g["min_flip_flops"] == 4
    p, q = plain["parts"], gated["parts"]
    assert "clock_gating" not in p and q["clock_gating"]["pj"] > 0
    # the registers hold most cycles here: their clock pins and the clock net lose most toggles
    assert q["registers"]["pj"] < 0.6 * p["registers"]["pj"]
    assert q["clock_and_inputs"]["pj"] < 0.6 * p["clock_and_inputs"]["pj"]
    assert gated["energy_per_call_pj"]["total"] < plain["energy_per_call_pj"]["total"]
    total = gated["energy_per_call_pj"]["total"]
    assert sum(v["pj"] for v in q.values()) == pytest.approx(total, rel=1e-4)
    # a gate for every enable of >= 64 flip-flops: fewer gates
    few = power(out, vectors=4, seed=1, clock_gating=64)
    assert few["mismatches"] == 0 and few["clock_gating"]["gates"] < g["gates"]
    cli = ["power", str(out), "--vectors", "2"]
    text = run_eatt(*cli, "--clock-gating", timeout=900)
    assert text.returncode == 0, text.stderr
    assert "clock gates (INVX1 + LATCH + AND2X1) clock" in text.stdout
    js = run_eatt(*cli, "--clock-gating", "8", "--json", timeout=900)
    assert js.returncode == 0, js.stderr
    assert json.loads(js.stdout)["clock_gating"]["min_flip_flops"] == 8


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--clock-gating", "0"], "--clock-gating: must be >= 1"),
        (["--target", "fpga", "--clock-gating"], "--clock-gating: only for --target asic"),
    ],
    ids=["zero", "fpga"],
)
def test_bad_clock_gating_is_one_line(flags, message, tmp_path):
    r = run_eatt("power", str(tmp_path), *flags, timeout=120)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
