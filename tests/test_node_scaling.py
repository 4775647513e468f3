"""Energy between nodes (rtl_sim/node_scaling.py): Stillmaker & Baas' equations and the classical
rule, and the memory prices' scaling to the Liberty's node (rtl_sim/memory_energy.price)."""

from __future__ import annotations

import pytest

from eatt.rtl_sim import memory_energy as mem
from eatt.rtl_sim import node_scaling as scaling


def test_the_papers_equations():
    # E = a V^2 + b V + c: 90 nm at 1.3 V, 180 nm at 1.8 V (the paper's Table 4 rows)
    assert scaling.energy(90, 1.3) == pytest.approx(4.762 * 1.69 - 4.781 * 1.3 + 2.092)
    assert scaling.energy(180, 1.8) == pytest.approx(24.64 * 1.8 - 17.98)
    assert scaling.factor(90, 1.3, 180, 1.8) == pytest.approx(6.72, abs=0.01)
    assert scaling.classical_factor(90, 1.3, 180, 1.8) == pytest.approx(3.83, abs=0.01)
    assert scaling.factor(22, 0.8, 20, 0.8) == pytest.approx(1.0)  # CACTI's 22 nm: the 20 nm row
    assert scaling.factor(180, 1.8, 90, 1.3) == pytest.approx(1 / 6.72, rel=1e-3)
    assert not scaling.has_equation(350) and scaling.has_equation(45)
    with pytest.raises(ValueError, match="no scaling equation for 350 nm"):
        scaling.energy(350, 3.3)


def test_memories_scale_by_the_equations_where_they_exist(monkeypatch):
    macros = [dict(name="u_engine.x_mem.g_macro.u_macro", kind="ram", width=8, depth=64,
                   read_ports=1, sync=0, reads=100, writes=50)]  # fmt: skip
    monkeypatch.setattr(mem, "cacti_folder", lambda: None)  # Horowitz at 45 nm, 0.9 V
    r = mem.price(macros, calls=1, run_ns=10.0, to_node_nm=180, to_vdd=1.8)
    s = r["scaled_to"]
    assert s["rule"] == scaling.SOURCE and s["factor"] == pytest.approx(
        scaling.factor(45, 0.9, 180, 1.8), rel=1e-5
    )
    assert s["classical_factor"] == pytest.approx(4 * (1.8 / 0.9) ** 2)
    total = r["at_node_pj_per_call"]["total"] * s["factor"]
    assert r["pj_per_call"]["total"] == pytest.approx(total, rel=1e-5)
    old = mem.price(macros, calls=1, run_ns=10.0, to_node_nm=350, to_vdd=3.3)
    assert old["scaled_to"]["rule"] == scaling.CLASSICAL  # no equation at 350 nm
    assert old["scaled_to"]["factor"] == old["scaled_to"]["classical_factor"]
