"""slang (pyslang) compiles every kind of RTL folder with no error and no warning of its default
set: the cores (eatt, dot) at both levels with and without adder_levels, the E-ATT datapath
variants, and the window unit with each score and position mode (rtl_sim/lint.py)."""

from __future__ import annotations

import json

import pytest

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig
from eatt.quant.golden import random_weights
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.lint import lint_rtl

CORES = {
    "eatt": dict(kind="eatt", len_q=2, len_k=3, dim=4, heads=2),
    "vanilla": dict(
        kind="vanilla", len_q=2, len_k=2, dim=6, heads=1, in_bits=6, in_frac=3, qk_bits=7
    ),
}
CORE_CASES = [
    (kind, level, levels)
    for kind in sorted(CORES)
    for level in ("alignment", "attention")
    for levels in (0, 1, 2)
]
DATAPATHS = {  # the E-ATT datapath variants other than the default (docs/rtl.md)
    "min": {"scores": "min"},
    "abs-chain": {"scores": "abs", "tree": "chain"},
    "select-config": {"projection": "select", "widths": "config"},
    "rom3": {"rom_inputs": 3},
}
WINDOW = dict(kind="window", len_q=1, len_k=10, dim=4, heads=2, window_d=2)
WINDOW_CASES = [(score, position) for score in ("eatt", "dot") for position in
                ("none", "gaussian", "flexible")]  # fmt: skip


def _generate(tmp_path, cfg_dict: dict, level: str | None = None, **options):
    cfg = CoreConfig.from_dict(cfg_dict)
    out = tmp_path / "rtl"
    at = {} if level is None else {"level": level}
    generate_rtl(cfg, random_weights(cfg, seed=3), out, options=BuildOptions(**options), **at)
    return out


@pytest.mark.parametrize("kind,level,levels", CORE_CASES)
def test_cores_compile_clean(kind, level, levels, tmp_path):
    out = _generate(tmp_path, CORES[kind], level=level, adder_levels=levels)
    assert lint_rtl(out) == []


@pytest.mark.parametrize("variant", sorted(DATAPATHS))
def test_eatt_datapath_variants_compile_clean(variant, tmp_path):
    out = _generate(tmp_path, CORES["eatt"], level="attention", datapath=DATAPATHS[variant])
    assert lint_rtl(out) == []


@pytest.mark.parametrize("score,position", WINDOW_CASES)
def test_window_compiles_clean(score, position, tmp_path):
    out = _generate(tmp_path, {**WINDOW, "window_score": score, "position": position})
    meta = json.loads((out / "metadata.json").read_text())
    # the hand-written unit and its leaves (l1_score_row for both: Yosys' hierarchy check
    # wants the module of both score branches)
    leaves = ["window_unit.sv", "window_ctrl.sv", "window_ram.sv", "recip_normalize.sv"]
    leaves += ["piece_mult.sv"]
    leaves += ["l1_score_row.sv"]
    assert meta["sources"] == ["window_attention.sv", *leaves]
    assert lint_rtl(out) == []


def test_window_whole_memory_compiles_clean(tmp_path):
    """D >= l_k: the window is the whole memory (window rows = l_k, a power of two)."""
    cfg = dict(WINDOW, len_k=4, window_d=5, position="flexible", g_levels=3, window_sigma=1.5)
    assert lint_rtl(_generate(tmp_path, cfg)) == []


def test_problems_are_reported_one_line_each(tmp_path):
    """A planted default-set warning and an error come back as one line each, with the file,
    the position and slang's option name; the hand-written files are compiled too."""
    out = _generate(tmp_path, CORES["vanilla"])
    top = out / "vanilla_alignment.sv"
    text = top.read_text().replace(
        "endmodule", "    logic [3:0] planted;\n    assign planted = 4'd20;\nendmodule"
    )
    top.write_text(text)
    ctrl = out / "ap_pipe_ctrl.sv"
    ctrl.write_text(ctrl.read_text().replace("valid <= stage_en;", "valid <= $no_such(stage_en);"))
    found = lint_rtl(out)
    assert len(found) == 2, found
    assert all("\n" not in line for line in found)
    assert found[0].startswith("ap_pipe_ctrl.sv:") and ": error: " in found[0]
    assert "[-Wunknown-sys-name]" in found[0]
    assert found[1].startswith("vanilla_alignment.sv:") and ": warning: " in found[1]
    assert found[1].endswith("[-Wvector-overflow]")
    # more warnings on request (slang command-line options)
    assert len(lint_rtl(out, ["-Wno-vector-overflow"])) == 1


def test_bad_folder_and_options(tmp_path):
    with pytest.raises(ValueError, match="not an RTL directory"):
        lint_rtl(tmp_path)
    out = _generate(tmp_path, CORES["eatt"])
    with pytest.raises(ValueError, match="options not understood"):
        lint_rtl(out, ["--no-such-option"])


def test_no_size_cast_right_after_a_unary_operator():
    """Yosys' parser reads a sized cast right after a unary operator (`~W'(3)`, `-W'(x)`)
    otherwise than the simulators do: the netlist then computes something else while every RTL
    simulation passes. The hand-written modules write such a value through a signal or a
    parenthesis instead."""
    import re

    from eatt.rtl_sim.rtldir import RTL_DIR

    cast = re.compile(r"[~!-]\s*[A-Za-z_][A-Za-z_0-9]*\s*'\s*\(")
    found = []
    for path in sorted(RTL_DIR.glob("*.sv")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//")[0]
            for m in cast.finditer(code):
                before = code[: m.start()].rstrip()
                if not before or before[-1] in "=(,?:&|^~!<>+*/%{[":  # unary, not a - b
                    found.append(f"{path.name}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
