"""Liberty reader and netlist energy (rtl_sim.liberty): a hand-written two-cell library whose
energies are worked out by hand below, unit conversion, errors, and Debian's OSU 0.18 um library."""

from __future__ import annotations

from pathlib import Path

import pytest

from eatt.rtl_sim.liberty import netlist_energy, read_liberty

OSU018 = (
    Path(__file__).resolve().parents[1]
    / ".venv/debian/usr/share/qflow/tech/osu018/osu018_stdcells.lib"
)


def tiny_lib(cap_unit: str = "pf", leak_unit: str = "nW") -> str:
    """INV and NAND2; numbers are written in pF / nW and scaled to the units asked for."""
    c = {"pf": 1.0, "ff": 1000.0}[cap_unit]  # pF -> file unit (energies are C x V^2: same scale)
    w = {"nW": 1.0, "uW": 0.001}[leak_unit]  # nW -> file unit

    def cs(*xs: float) -> str:
        return ", ".join(f"{x * c:g}" for x in xs)

    return f"""
/* a tiny library */
library (tiny) {{
  time_unit : "1ns";
  voltage_unit : "1V";
  leakage_power_unit : "1{leak_unit}";
  capacitive_load_unit (1, {cap_unit});
  nom_voltage : 1.8;
  power_lut_template (e2x2) {{
    variable_1 : total_output_net_capacitance;
    variable_2 : input_transition_time;
    index_1 ("{cs(0.01, 0.03)}");
    index_2 ("0.1, 0.3");
  }}
  power_lut_template (p2) {{ variable_1 : input_transition_time; index_1 ("0.1, 0.3"); }}
  cell (INV) {{
    area : 10;
    cell_leakage_power : {1 * w:g};
    pin (A) {{ direction : input; capacitance : {cs(0.01)}; }}
    pin (Y) {{
      direction : output;
      function : "(!A)";
      internal_power () {{
        related_pin : "A";
        rise_power (e2x2) {{ values ("{cs(0.01, 0.02)}", "{cs(0.03, 0.04)}"); }}
        fall_power (e2x2) {{
          index_1 ("{cs(0.01, 0.03)}");
          index_2 ("0.1, 0.3");
          values ("{cs(0.05, 0.06)}", \\
                  "{cs(0.07, 0.08)}");
        }}
      }}
    }}
  }}
  cell (NAND2) {{
    area : 20;
    cell_leakage_power : {2 * w:g};
    pin (A) {{ direction : input; capacitance : {cs(0.02)}; }}
    pin (B) {{
      direction : input;
      capacitance : {cs(0.03)};
      internal_power () {{
        rise_power (p2) {{ values ("{cs(0.001, 0.003)}"); }}
        fall_power (p2) {{ values ("{cs(0.002, 0.004)}"); }}
      }}
    }}
    pin (Y) {{
      direction : output;
      function : "!(A & B)";
      internal_power () {{
        related_pin : "A";
        power (e2x2) {{ values ("{cs(0.1, 0.1)}", "{cs(0.1, 0.1)}"); }}
      }}
      internal_power () {{
        related_pin : "B";
        rise_power (e2x2) {{ values ("{cs(0.2, 0.3)}", "{cs(0.4, 0.5)}"); }}
        fall_power (e2x2) {{ values ("{cs(0.4, 0.4)}", "{cs(0.4, 0.4)}"); }}
      }}
    }}
  }}
}}
"""


# in a --> INV u1 --(net 4)--> NAND2 u2 .A ; in b --> u2 .B ; u2 .Y --> out y; out tie = constant 0
MODULE = {
    "ports": {
        "a": {"direction": "input", "bits": [2]},
        "b": {"direction": "input", "bits": [3]},
        "y": {"direction": "output", "bits": [5]},
        "tie": {"direction": "output", "bits": ["0"]},
    },
    "cells": {
        "u1": {
            "type": "INV",
            "port_directions": {"A": "input", "Y": "output"},
            "connections": {"A": [2], "Y": [4]},
        },
        "u2": {
            "type": "NAND2",
            "port_directions": {"A": "input", "B": "input", "Y": "output"},
            "connections": {"A": [4], "B": [3], "Y": [5]},
        },
    },
    "netnames": {"a": {"bits": [2]}, "b": {"bits": [3]}, "n4": {"bits": [4]}, "y": {"bits": [5]}},
}
TOGGLES = {2: 10, 3: 4, 4: 10, 5: 6}
RUN = {"cycles": 20, "period_ns": 5.0, "slew_ns": 0.15, "output_load_pf": 0.05}


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.lib"
    path.write_text(tiny_lib())
    return read_liberty(path)


def test_tiny_library_read(tiny):
    assert tiny.name == "tiny" and tiny.voltage == 1.8 and set(tiny.cells) == {"INV", "NAND2"}
    inv = tiny.cell("INV")
    assert inv.area == 10 and inv.leakage_nw == 1 and not inv.sequential
    assert inv.pins["A"].capacitance_pf == 0.01 and inv.pins["Y"].function == "(!A)"
    (ip,) = inv.pins["Y"].internal_power
    assert ip.related_pin == "A" and ip.rise.index_1 == (0.01, 0.03)  # from the template
    # NAND2 A's `power` table serves both directions
    a_group = tiny.cell("NAND2").pins["Y"].internal_power[0]
    assert a_group.rise is a_group.fall is not None
    with pytest.raises(ValueError, match="NOR9: not a cell of library tiny"):
        tiny.cell("NOR9")


def test_lookup_interpolates_and_extrapolates(tiny):
    rise = tiny.cell("INV").pins["Y"].internal_power[0].rise  # [[.01, .02], [.03, .04]]
    assert rise.variables == ("total_output_net_capacitance", "input_transition_time")
    # at the index points: the table itself
    assert rise.lookup(0.01, 0.1) == pytest.approx(0.01)
    assert rise.lookup(0.03, 0.1) == pytest.approx(0.03)  # rows are capacitance
    # inside: C = 0.02 halfway (0.5), slew 0.15 a quarter (0.25) of the way
    # row 0: .01 + .25 * .01 = .0125; row 1: .03 + .25 * .01 = .0325; halfway: .0225
    assert rise.lookup(0.02, 0.15) == pytest.approx(0.0225)
    # outside: C = 0.05 is 2 steps of (0.03 - 0.01) from 0.01, slew 0.0 is -0.5 of a step
    # row 0: .01 - .5 * .01 = .005; row 1: .03 - .5 * .01 = .025; .005 + 2 * (.025 - .005) = .045
    assert rise.lookup(0.05, 0.0) == pytest.approx(0.045)
    clk = tiny.cell("NAND2").pins["B"].internal_power[0].rise  # 1-D: slew (0.1, 0.3)
    assert clk.lookup(123.0, 0.2) == pytest.approx(0.002)  # the load is not an axis
    assert clk.lookup(0.0, 0.5) == pytest.approx(0.005)  # .001 + 2 * .002


def test_netlist_energy_by_hand(tiny):
    r = netlist_energy(MODULE, TOGGLES, tiny, **RUN)
    # loads: net 2 -> INV.A 0.01; net 3 -> NAND2.B 0.03; net 4 -> NAND2.A 0.02; net 5 -> out 0.05
    # switching 0.5 * C * V^2 * t, 0.5 * 1.8^2 = 1.62:
    #   net 2: 1.62 * .01 * 10 = .162   net 3: 1.62 * .03 * 4 = .1944   (input ports)
    #   net 4: 1.62 * .02 * 10 = .324   (INV)    net 5: 1.62 * .05 * 6 = .486   (NAND2)
    bt = r["by_type"]
    assert bt["input ports"]["switching_pj"] == pytest.approx(0.162 + 0.1944)
    assert bt["INV"]["switching_pj"] == pytest.approx(0.324)
    assert bt["NAND2"]["switching_pj"] == pytest.approx(0.486)
    assert r["switching_pj"] == pytest.approx(1.1664)
    # internal, INV Y at C = .02, slew .15: rise .0225 (see the lookup test); fall on
    # [[.05, .06], [.07, .08]]: rows .0525 and .0725, halfway .0625; (.0225 + .0625) / 2 = .0425,
    # x 10 toggles of net 4 = .425
    assert bt["INV"]["internal_pj"] == pytest.approx(0.425)
    # NAND2 Y at C = .05 (2 steps out), slew .15 (.25 in):
    #   group A: `power` .1 both ways -> .1
    #   group B: rise [[.2, .3], [.4, .5]]: rows .225, .425 -> .225 + 2 * .2 = .625; fall .4;
    #            (.625 + .4) / 2 = .5125
    #   mean (.1 + .5125) / 2 = .30625, x 6 toggles = 1.8375
    # NAND2 B input pin: 1-D at .15: rise .0015, fall .0025 -> .002, x 4 toggles of net 3 = .008
    assert bt["NAND2"]["internal_pj"] == pytest.approx(1.8375 + 0.008)
    assert r["internal_pj"] == pytest.approx(0.425 + 1.8455)
    assert r["dynamic_pj"] == pytest.approx(1.1664 + 2.2705)
    # leakage: (1 + 2) nW over 20 x 5 ns = 300 nW ns = 300e-18 J = 3e-4 pJ
    assert r["leakage_nw"] == pytest.approx(3.0)
    assert r["leakage_pj"] == pytest.approx(3e-4)
    assert bt["INV"]["leakage_pj"] == pytest.approx(1e-4)
    assert r["total_pj"] == pytest.approx(3.4369 + 3e-4)
    assert (r["area"], r["cells"], bt["NAND2"]["count"], bt["NAND2"]["area"]) == (30, 2, 1, 20)
    assert (r["voltage"], r["slew_ns"], r["cycles"], r["period_ns"]) == (1.8, 0.15, 20, 5.0)
    assert bt["input ports"]["count"] == 0


def test_units_femtofarad_microwatt(tiny, tmp_path):
    path = tmp_path / "tiny_ff.lib"
    path.write_text(tiny_lib("ff", "uW"))
    lib = read_liberty(path)
    assert lib.cap_unit_pf == 0.001 and lib.leakage_unit_nw == 1000.0
    assert lib.cell("NAND2").pins["B"].capacitance_pf == pytest.approx(0.03)
    assert lib.cell("NAND2").leakage_nw == pytest.approx(2.0)
    ours, ref = (
        netlist_energy(MODULE, TOGGLES, lib, **RUN),
        netlist_energy(MODULE, TOGGLES, tiny, **RUN),
    )
    for key in ("switching_pj", "internal_pj", "leakage_pj", "total_pj", "leakage_nw"):
        assert ours[key] == pytest.approx(ref[key]), key


@pytest.mark.parametrize(
    "text, line",
    [
        ("library (x) {\n  cell (A) {\n    area : 1;\n  }\n", 5),  # unclosed library
        ("library (x) {\n  area : ;\n}\n", 2),
        ("library (x) {\n  cell (A) { area 1; }\n}\n", 2),
        ("cell (A) { }\n", 1),  # no library group
    ],
)
def test_syntax_error_names_file_and_line(tmp_path, text, line):
    path = tmp_path / "bad.lib"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        read_liberty(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}:") and "\n" not in message


def test_unknown_cell_type(tiny):
    module = {"cells": {"u9": {"type": "XOR9", "connections": {"A": [2]}}}, "ports": {}}
    with pytest.raises(ValueError, match="XOR9"):
        netlist_energy(module, {}, tiny, cycles=1, period_ns=1.0)


@pytest.fixture(scope="module")
def osu():
    if not OSU018.is_file():
        pytest.skip(f"OSU 0.18 um library not unpacked at {OSU018}")
    return read_liberty(OSU018)


def test_osu018(osu):
    assert osu.name == "osu018_stdcells" and osu.voltage == 1.8 and len(osu.cells) == 32
    and2 = osu.cell("AND2X1")
    assert and2.area == 32 and and2.leakage_nw == pytest.approx(0.0746794)
    assert and2.pins["A"].capacitance_pf == pytest.approx(0.0129077)
    rise_a = next(g for g in and2.pins["Y"].internal_power if g.related_pin == "A").rise
    assert rise_a.lookup(0.005, 0.06) == pytest.approx(0.012351)
    assert {n for n, c in osu.cells.items() if c.sequential} == {
        "DFFNEGX1",
        "DFFPOSX1",
        "DFFSR",
        "LATCH",
    }
    dff = osu.cell("DFFPOSX1")
    assert dff.pins["CLK"].clock and dff.pins["CLK"].internal_power  # passive clock energy
    assert dff.pins["CLK"].internal_power[0].rise.variables == ("input_transition_time",)
    for cell in osu.cells.values():
        for pin in cell.pins.values():
            if pin.direction == "output":
                assert pin.internal_power, f"{cell.name}/{pin.name}"
