"""The folded engine's memories as memory macros (issue 42 item 1): folded_ram / folded_rom /
folded_macro in simulation (bit-exact with every memory a macro, both simulators), eatt power
keeping them as black boxes and pricing each access (CACTI through zigzag-dse, Horowitz without
it), the counts against the engine's schedule, and the refusal lifted where the weights are
macros."""

from __future__ import annotations

import json
import shutil

import pytest

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig
from eatt.quant.golden import random_weights
from eatt.rtl_sim import memory_energy as mem
from eatt.rtl_sim.folded import generate_folded_rtl, simulate_folded
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.power import check_tools, power, too_many_weights
from eatt.rtl_sim.tools import ToolMissing
from tests.cli import run_eatt

# dim 4, 2 tokens each side, 1 head: every memory of the engine, a few hundred cells of logic
TINY = dict(len_q=2, len_k=2, dim=4, heads=1, in_bits=4, in_frac=2, weight_bits=4, qk_bits=6)
VECTORS = 4


def _tools() -> None:
    try:
        check_tools()
    except ToolMissing as err:
        pytest.skip(str(err))


def test_cacti_and_its_fallback(monkeypatch):
    """CACTI prices an 8 KB array of 64-bit words near Horowitz' 10 pJ a read at 45 nm; a
    smaller array costs less a bit; without CACTI the Horowitz table answers; 180 nm is no
    CACTI node (one line)."""
    if mem.cacti_folder() is None:
        pytest.skip("zigzag-dse (CACTI) is not installed")
    big = mem.cacti(64, 1024, 45)
    assert 3.0 < big["read_pj"] < 20.0 and big["write_pj"] > 0 and big["rows"] == 1024
    small = mem.cacti(64, 64, 45)
    assert small["read_pj"] < big["read_pj"]
    assert mem.priced_shape(11, 20) == (16, 32) and mem.priced_shape(64, 1408) == (64, 2048)
    with pytest.raises(ValueError, match="memory node 180 nm: CACTI models 22, 32, 45"):
        mem.cacti(64, 1024, 180)
    assert mem.horowitz(64, 1024)["read_pj"] == pytest.approx(10.0)  # 8 KB
    assert mem.horowitz(64, 4096)["read_pj"] == pytest.approx(20.0)  # 32 KB
    monkeypatch.setattr(mem, "cacti_folder", lambda: None)
    rows = [dict(name="u_engine.x_mem.g_macro.u_macro", kind="ram", width=64, depth=1024,
                 read_ports=1, sync=0, reads=10, writes=5)]  # fmt: skip
    priced = mem.price(rows, calls=1, run_ns=100.0)
    assert priced["node_nm"] == 45 and "Horowitz" in priced["source"]
    assert priced["at_node_pj_per_call"]["dynamic"] == pytest.approx(150.0)
    # weights in DRAM: an off-chip access, not scaled to the logic's node like the SRAM
    rom = dict(rows[0], name="u_engine.u_multiply.g_rom[1].g_used.rom.g_macro.u_macro",
               kind="rom", writes=0)  # fmt: skip
    dram = mem.price([rows[0], rom], calls=1, run_ns=100.0, weights="dram")
    factor = dram["scaled_to"]["factor"]
    off_chip = 10 * 64 * mem.DRAM_PJ_PER_BIT
    assert factor > 1 and dram["pj_per_call"]["dynamic"] == pytest.approx(factor * 150.0 + off_chip)


def test_weights_that_are_macros_are_not_refused(tmp_path):
    """dim 128 (65,536 weights): with ROMs of 1,024 words (simd 4) the weights are macros and
    eatt power measures the engine; with 16 words (simd 32) they would be cells: refused."""
    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=2, len_k=2, dim=128, heads=4))
    deep, shallow = tmp_path / "deep", tmp_path / "shallow"
    for out, simd in ((deep, 4), (shallow, 32)):
        options = BuildOptions(folding={"simd": simd})
        generate_rtl(cfg, random_weights(cfg), out, level="folded", options=options)
    assert too_many_weights(cfg, "folded", deep) is None
    why = too_many_weights(cfg, "folded", shallow)
    assert "65,536 weights would become standard cells" in why and "fewer than 32 words" in why


@pytest.mark.rtl
@pytest.mark.parametrize("kind", ["eatt", "vanilla"])
def test_every_memory_a_macro_is_bit_exact(kind, tmp_path):
    """macro_rows 1: every memory of the engine a folded_macro instance; the engine equals the
    golden model with back-pressure, in Verilator and (4-state) in Icarus."""
    cfg = CoreConfig.from_dict(dict(kind=kind, **TINY))
    out = tmp_path / "rtl"
    folding = {"lanes": 2, "simd": 2, "pe": 1 if kind == "eatt" else 2, "macro_rows": 1}
    meta = generate_folded_rtl(cfg, random_weights(cfg, seed=2), out, BuildOptions(folding=folding))
    assert meta["parameters"]["MACRO_ROWS"] == 1
    assert {"folded_macro.sv", "folded_ram.sv", "folded_rom.sv"} <= set(meta["sources"])
    simulators = ["verilator"] + (["icarus"] if shutil.which("iverilog") else [])
    for simulator in simulators:
        r = simulate_folded(out, vectors=12, seed=4, simulator=simulator)
        assert r["mismatches"] == 0, (simulator, r["first_mismatch"])


def _names(result: dict) -> dict[str, dict]:
    return {m["name"]: m for m in result["memories"]["macros"]}


@pytest.mark.rtl
@pytest.mark.slow
def test_power_prices_every_macro(tmp_path):
    """eatt power on the engine with every memory a macro: the netlist (logic and registers)
    equals the golden model; each macro's reads and writes follow the schedule; the energy is
    the netlist's plus the macros' (scaled to the Liberty's 180 nm), split into parts that add
    up; the same vectors give the same numbers; Verilator's SAIF gives the same counts and the
    netlist's energy within its power-up toggles; weights in DRAM cost more; the CLI's text and
    --json report them."""
    _tools()
    cfg = CoreConfig.from_dict(dict(kind="vanilla", **TINY))
    out = tmp_path / "rtl"
    folding = {"lanes": 1, "simd": 2, "pe": 2, "macro_rows": 1}
    generate_folded_rtl(cfg, random_weights(cfg, seed=2), out, BuildOptions(folding=folding))
    r = power(out, vectors=VECTORS, seed=1, timeout=900)
    assert r["mismatches"] == 0 and r["level"] == "folded"
    names = _names(r)
    dc = cfg.dim // 2  # chunks of a token (simd 2)
    x, y = names["u_engine.g_x_mem.x_mem.g_macro.u_macro"], names["u_engine.y_mem.g_macro.u_macro"]
    assert x["writes"] == VECTORS * cfg.len_q * dc and y["writes"] == VECTORS * cfg.len_k * dc
    assert x["reads"] == VECTORS * cfg.len_q * dc * dc  # Q: each x chunk against DC tiles
    assert y["reads"] == VECTORS * 2 * cfg.len_k * dc * dc  # K and V
    wq = names["u_engine.u_multiply.g_rom[2].g_used.rom.g_macro.u_macro"]
    assert wq["kind"] == "rom" and wq["writes"] == 0 and wq["reads"] == x["reads"]
    z = next(m for n, m in names.items() if ".z_sub." in n)
    assert z["reads"] == z["writes"] == VECTORS * cfg.len_q * dc  # Z written once, streamed
    for m in names.values():
        assert m["source"] == "cacti" or mem.cacti_folder() is None
        assert m["reads"] > 0 and (m["writes"] > 0) == (m["kind"] == "ram")
    e = r["energy_per_call_pj"]
    assert e["total"] == pytest.approx(e["netlist"] + e["memories"], rel=1e-6)
    assert e["memories"] == pytest.approx(r["memories"]["pj_per_call"]["total"])
    parts = r["parts"]
    assert sum(p["pj"] for p in parts.values()) == pytest.approx(e["total"], rel=1e-4)
    assert parts["memories"]["node_nm"] == 180 and "CACTI" in parts["memories"]["source"]
    assert "macro_pj" in r["by_stage"]["projections"]  # the weight ROMs, the Q, K, V memories
    again = power(out, vectors=VECTORS, seed=1, timeout=900)
    assert again["energy_per_call_pj"] == e and again["memories"] == r["memories"]
    ver = power(out, vectors=VECTORS, seed=1, timeout=900, simulator="verilator")
    assert ver["mismatches"] == 0 and ver["sim"]["simulator"] == "verilator"
    assert r["sim"]["simulator"] == "icarus"  # auto: a short run
    assert ver["cycles"] == r["cycles"]
    assert [(m["reads"], m["writes"]) for m in ver["memories"]["macros"]] == [
        (m["reads"], m["writes"]) for m in r["memories"]["macros"]
    ]
    # Verilator starts every net at 0 and counts its first rise (gate_activity's module doc)
    assert ver["energy_per_call_pj"]["netlist"] == pytest.approx(e["netlist"], rel=0.03)
    dram = power(out, vectors=VECTORS, seed=1, timeout=900, weights="dram")
    assert dram["memories"]["pj_per_call"]["total"] > r["memories"]["pj_per_call"]["total"]
    assert _names(dram)[wq["name"]]["source"] == "dram"
    cli = ["power", str(out), "--vectors", "2"]
    text = run_eatt(*cli, timeout=900)
    assert text.returncode == 0, text.stderr
    assert "memory macros" in text.stdout and "15 macros priced by" in text.stdout
    js = run_eatt(*cli, "--json", "--memory-node", "45", timeout=900)
    assert js.returncode == 0, js.stderr
    assert json.loads(js.stdout)["memories"]["node_nm"] == 45
    bad = run_eatt(*cli, "--memory-node", "180")
    assert bad.returncode == 2 and "--memory-node" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "flags",
    [["--memory-node", "45"], ["--weights", "dram"]],
    ids=["node", "weights"],
)
def test_memory_flags_are_asic_only(flags, tmp_path):
    """The memory macros' flags price the ASIC netlist's memories: with --target fpga they are
    refused in one line (exit 2) before the folder is read."""
    r = run_eatt("power", str(tmp_path), "--target", "fpga", *flags, timeout=120)
    assert r.returncode == 2 and f"{flags[0]}: only for --target asic" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
