"""The C++ optimization of a Verilator build (rtl_sim/cocotb_run.py, cxx_opt)."""

from __future__ import annotations

import pytest

from eatt.rtl_sim import cocotb_run


def test_a_netlist_build_gives_make_its_cxx_optimization(tmp_path, monkeypatch):
    """cxx_opt (a gate-level build's, rtl_sim/gate_activity.py NETLIST_CXX_OPT) reaches the make
    of Verilator's C++ as OPT_FAST; a build without it leaves Verilator's default."""
    seen = []
    monkeypatch.setattr(cocotb_run, "run_group", lambda cmd, **kw: seen.append(cmd) or 0)
    src = tmp_path / "top.v"
    src.write_text("module top(input a, output y); assign y = a; endmodule\n")
    cocotb_run._cocotb_build("verilator", [src], "top", tmp_path / "b1", cxx_opt="-O1")
    cocotb_run._cocotb_build("verilator", [src], "top", tmp_path / "b2")
    makes = [cmd for cmd in seen if cmd[0] == "make"]
    assert len(makes) == 2 and makes[0][-1] == "OPT_FAST=-O1"
    assert not any(a.startswith("OPT_FAST") for a in makes[1])
    with pytest.raises(ValueError, match="cxx_opt '-O9'"):
        cocotb_run._cocotb_build("verilator", [src], "top", tmp_path / "b3", cxx_opt="-O9")
