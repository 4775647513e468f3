"""Every width of the hardware is the golden model's (issue 17, outcome 3).

The HLS typedefs of each layer's CONFIG_T struct and the RTL ports, registers and ROMs that
carry Q/K, V, scores, softmax weights, the sum, numerator, product and outputs must equal the
widths in eatt.quant.golden.Formats / eatt.quant.window.WindowFormats. Text only: no
compilation, no simulation.
"""

from __future__ import annotations

import re

import pytest

from eatt.config import CoreConfig, WindowConfig
from eatt.quant.golden import derive_formats, random_weights
from eatt.quant.window import derive_window_formats

DEFAULT = dict(len_q=4, len_k=4, dim=8, heads=2)
NARROW = dict(
    len_q=2,
    len_k=3,
    dim=4,
    heads=1,
    tau=0.5,
    in_bits=4,
    in_frac=2,
    weight_bits=4,
    qk_bits=6,
    v_bits=6,
    out_bits=6,
    exp_table_size=32,
    exp_frac=6,
    recip_table_size=16,
    recip_frac=8,
)
WIDE = dict(
    len_q=2,
    len_k=5,
    dim=4,
    heads=2,
    in_bits=10,
    in_frac=5,
    weight_bits=10,
    qk_bits=16,
    v_bits=20,
    out_bits=16,
    exp_frac=14,
    recip_frac=16,
)
CORES = {
    f"{kind}-{name}": CoreConfig(kind=kind, **shape)
    for name, shape in (("default", DEFAULT), ("narrow", NARROW), ("wide", WIDE))
    for kind in ("eatt", "vanilla")
}
WINDOWS = {
    "eatt-none": dict(window_score="eatt", position="none", window_d=2),
    "dot-gaussian": dict(window_score="dot", position="gaussian", window_d=3),
    "eatt-flexible": dict(window_score="eatt", position="flexible", window_d=3, g_levels=4),
    "dot-flexible-narrow": dict(
        window_score="dot",
        position="flexible",
        window_d=1,
        g_levels=2,
        count_bits=3,
        **{k: v for k, v in NARROW.items() if k not in ("len_q", "len_k", "dim", "heads")},
    ),
}


def window_config(name: str) -> CoreConfig:
    return WindowConfig(kind="window", len_q=1, len_k=12, dim=8, heads=2, **WINDOWS[name])


# -- HLS: the typedefs of the config struct ----------------------------------------------------
def hls_layer(cfg: CoreConfig, tmp_path):
    from eatt.hls.project import convert, load_source

    model, cfg, _, _ = load_source(cfg)
    hls_model = convert(model, cfg, tmp_path)
    (layer,) = [
        n for n in hls_model.get_layers() if n.class_name in ("AttentionCore", "WindowAttention")
    ]
    return layer


def typedefs(text: str) -> dict[str, tuple[bool, int]]:
    found = re.findall(r"typedef ap_(u?)int<(\d+)> (\w+);", text)
    return {name: (not u, int(width)) for u, width, name in found}


def core_hls_expected(f) -> dict[str, tuple[bool, int]]:
    return {
        "in_code_t": (True, f.in_bits),
        "qacc_t": (True, f.q_acc_bits),
        "qk_t": (True, f.qk_code_bits),
        "diff_t": (True, f.diff_bits),
        "score_t": (True, f.score_bits),
        "zidx_t": (False, f.zdiff_bits),
        "vacc_t": (True, f.v_acc_bits),
        "v_t": (True, f.attn_bits),
        "exp_t": (False, f.exp_bits),
        "esum_t": (False, f.esum_bits),
        "norm_t": (False, f.norm_bits),
        "recip_t": (False, f.recip_bits),
        "numer_t": (True, f.numer_bits),
        "prod_t": (True, f.prod_bits),
        "oacc_t": (True, f.out_acc_bits),
        "out_code_t": (True, f.out_code_bits),
    }


@pytest.mark.parametrize("name", list(CORES))
def test_hls_core_typedefs_are_golden(name, tmp_path):
    from eatt.hls.handlers import AttentionCoreConfigTemplate

    cfg = CORES[name]
    f = derive_formats(cfg)
    layer = hls_layer(cfg, tmp_path)
    text = AttentionCoreConfigTemplate().format(layer)
    assert typedefs(text) == core_hls_expected(f)
    assert f"static const unsigned esum_bits = {f.esum_bits};" in text
    assert layer.get_weights("exp_table").type.precision.width == f.exp_bits
    assert layer.get_weights("recip_table").type.precision.width == f.recip_bits


@pytest.mark.parametrize("name", list(WINDOWS))
def test_hls_window_typedefs_are_golden(name, tmp_path):
    from eatt.hls.handlers import WindowAttentionConfigTemplate

    cfg = window_config(name)
    wf = derive_window_formats(cfg)
    f = wf.core
    layer = hls_layer(cfg, tmp_path)
    text = WindowAttentionConfigTemplate().format(layer)
    assert typedefs(text) == {
        "in_code_t": (True, f.in_bits),
        "qacc_t": (True, f.q_acc_bits),
        "qk_t": (True, wf.qk_code_bits),
        "diff_t": (True, f.diff_bits),
        "score_t": (True, f.score_bits),
        "logit_t": (True, wf.logit_bits),
        "zidx_t": (False, wf.diff_bits),
        "exp_t": (False, f.exp_bits),
        "count_t": (False, wf.count_bits),
        "cexp_t": (False, wf.weighted_bits),
        "esum_t": (False, wf.esum_bits),
        "norm_t": (False, wf.norm_bits),
        "recip_t": (False, wf.recip_bits),
        "v_t": (True, wf.attn_bits),
        "vcode_t": (True, wf.v_code_bits),
        "numer_t": (True, wf.numer_bits),
        "prod_t": (True, wf.prod_bits),
    }
    assert f"typedef ap_fixed<{wf.int_bits}, {wf.int_bits}> int_fixed_t;" in text
    assert layer.get_weights("penalty_table").type.precision.width == wf.penalty_bits
    assert layer.get_weights("recip_table").type.precision.width == wf.recip_bits


# -- RTL: ports, registers and ROMs of the generated SystemVerilog ------------------------------
DECL = re.compile(
    r"^\s*(?:input\s+wire\s+|output\s+)?logic\s+(signed\s+)?\[(\d+):0\]\s*(\w+)", re.MULTILINE
)
ROM = re.compile(
    r"function automatic logic \[(\d+):0\] (\w+)\(\s*input logic \[(\d+):0\] idx\)", re.MULTILINE
)


def declarations(text: str) -> dict[str, tuple[bool, int]]:
    """name -> (signed, width) of every `logic [N-1:0] name` (first declaration wins)."""
    out: dict[str, tuple[bool, int]] = {}
    for signed, top, name in DECL.findall(text):
        out.setdefault(name, (bool(signed), int(top) + 1))
    return out


def roms(text: str) -> dict[str, tuple[int, int]]:
    """ROM name -> (index bits, value bits)."""
    return {name: (int(i) + 1, int(v) + 1) for v, name, i in ROM.findall(text)}


INSTANCE = re.compile(r"^\s*(\w+) #\((.*?)\)\s*u_\w+\s*\(", re.MULTILINE | re.DOTALL)


def leaf_parameters(text: str, module: str) -> list[dict[str, int]]:
    """The parameters of every instance of a hand-written leaf, in order."""
    found = []
    for name, params in INSTANCE.findall(text):
        if name == module:
            pairs = re.findall(r"\.(\w+)\((-?\d+)\)", params)
            found.append({key: int(value) for key, value in pairs})
    return found


def recip_normalize_expected(cfg, f) -> dict[str, int]:
    """recip_normalize's parameters: the golden widths of the sum, numerator, table, product
    and output (f: Formats or WindowFormats, which name them alike)."""
    return {
        "LANES": cfg.d_head,
        "SUM_W": f.esum_bits,
        "NUMER_W": f.numer_bits,
        "INDEX_W": derive_formats(
            cfg.core() if isinstance(cfg, WindowConfig) else cfg
        ).recip_index_bits,
        "RECIP_W": f.recip_bits,
        "RECIP_FRAC": cfg.recip_frac,
        "PROD_W": f.prod_bits,
        "OUT_W": f.attn_bits,
    }


def rtl_text(cfg, level, tmp_path) -> str:
    from eatt.rtl_sim.generate import generate_rtl

    weights = random_weights(cfg.core() if isinstance(cfg, WindowConfig) else cfg, seed=3)
    meta = generate_rtl(cfg, weights, tmp_path / "rtl", level=level)
    return (tmp_path / "rtl" / meta["sources"][0]).read_text()


@pytest.mark.parametrize("name", list(CORES))
def test_rtl_core_widths_are_golden(name, tmp_path):
    cfg = CORES[name]
    f = derive_formats(cfg)
    lq, lk, dim, heads = cfg.len_q, cfg.len_k, cfg.dim, cfg.heads
    al = declarations(rtl_text(cfg, "alignment", tmp_path / "a"))
    assert al["x"] == (False, lq * dim * f.in_bits)
    assert al["s"] == (False, heads * lq * lk * f.score_bits)
    assert al["qa"] == al["ka"] == (True, f.q_acc_bits)

    text = rtl_text(cfg, "attention", tmp_path / "b")
    d = declarations(text)
    expected = {
        "x": (False, lq * dim * f.in_bits),
        "y": (False, lk * dim * f.in_bits),
        "qa": (True, f.q_acc_bits),
        "ka": (True, f.q_acc_bits),
        "q": (True, f.qk_code_bits),
        "k": (True, f.qk_code_bits),
        "va": (True, f.v_acc_bits),
        "v1": (True, f.v_code_bits),
        "s1": (True, f.score_bits),
        "sdiff": (True, f.score_bits + 1),
        "ec": (False, f.exp_bits),
        "e_sum": (False, f.esum_bits),
        "numer": (True, f.numer_bits),
        "recip_index": (False, f.recip_index_bits),
        "recip": (False, f.recip_bits),
        "o_norm": (False, cfg.d_head * f.attn_bits),
        "za": (True, f.out_acc_bits),
        "z": (False, lq * dim * f.out_code_bits),
    }
    assert {key: d[key] for key in expected} == expected
    r = roms(text)
    assert r["exp_rom"] == (f.exp_index_bits, f.exp_bits)
    assert r["recip_rom"] == (f.recip_index_bits, f.recip_bits)
    # the normalization leaf (recip_normalize.sv), one per head and query, at golden widths
    assert leaf_parameters(text, "recip_normalize") == [recip_normalize_expected(cfg, f)] * (
        heads * lq
    )


@pytest.mark.parametrize("name", list(WINDOWS))
def test_rtl_window_widths_are_golden(name, tmp_path):
    cfg = window_config(name)
    wf = derive_window_formats(cfg)
    f = wf.core
    text = rtl_text(cfg, "alignment", tmp_path)
    d = declarations(text)  # the generated top: its ports
    ports = {
        "x": (False, cfg.dim * f.in_bits),
        "p": (False, wf.addr_bits),
        "w": (False, wf.w_bits),
        "len": (False, wf.len_bits),
        "mem_addr": (False, wf.addr_bits),
        "mem_k": (False, cfg.dim * wf.qk_code_bits),
        "mem_v": (False, cfg.dim * wf.v_code_bits),
        "mem_cnt": (False, wf.count_bits),
        "o": (False, cfg.dim * wf.attn_bits),
    }
    # window_unit.sv declares every register and wire from its parameters: the golden widths
    unit = {
        "IB": f.in_bits, "AB": f.q_acc_bits, "QB": wf.qk_code_bits, "VB": wf.v_code_bits,
        "CB": wf.count_bits, "SB": f.score_bits, "PNB": wf.penalty_bits, "LB": wf.logit_bits,
        "DB": wf.diff_bits, "EIB": wf.exp_index_bits, "EKB": wf.exp_table_bits,
        "EW": f.exp_bits, "CEB": wf.weighted_bits, "TB": wf.esum_bits, "NB": wf.numer_bits,
        "KI": f.recip_index_bits, "RB": wf.recip_bits, "OB": wf.attn_bits,
        "ADB": wf.addr_bits, "LNB": wf.len_bits, "WB": wf.w_bits, "DSB": wf.dist_bits,
        "IXB": wf.index_bits, "RWB": wf.rows_bits, "ROWS": wf.window_rows,
    }  # fmt: skip
    leaf = recip_normalize_expected(cfg, wf)
    if cfg.position == "flexible":
        ports["g"] = (False, wf.g_bits)
        ports["f"] = (False, cfg.heads * wf.addr_bits)
        unit["GW"], unit["FNB"] = wf.g_bits, wf.focus_numer_bits
        # the focus F: F_N = sum_j e_j j is one more lane of O's reciprocal leaf
        leaf["LANES"] += 1
        leaf["NUMER_W"] = max(wf.numer_bits, wf.focus_numer_bits)
        leaf["PROD_W"] = max(wf.prod_bits, wf.focus_prod_bits)
    assert {key: d.get(key) for key in ports} == ports
    (params,) = leaf_parameters(text, "window_unit")
    assert {key: params[key] for key in unit} == unit
    # the unit's recip_normalize leaf, one per head, from these parameters
    assert {
        "LANES": params["LEAF_LANES"], "SUM_W": params["TB"], "NUMER_W": params["LEAF_NB"],
        "INDEX_W": params["KI"], "RECIP_W": params["RB"], "RECIP_FRAC": params["RECIP_FRAC"],
        "PROD_W": params["LEAF_PB"], "OUT_W": params["OB"],
    } == leaf  # fmt: skip
    # the tables: (index bits, value bits) of each generated lookup module
    assert roms(module_text(text, "window_exp_rom"))["lookup"] == (
        wf.exp_table_bits,
        f.exp_bits,
    )
    assert roms(module_text(text, "window_recip_rom"))["lookup"] == (
        f.recip_index_bits,
        wf.recip_bits,
    )
    assert roms(module_text(text, "window_pen_rom"))["lookup"][1] == wf.penalty_bits


def module_text(text: str, name: str) -> str:
    """One module of a file with several (the window unit's generated top)."""
    start = text.index(f"module {name} (")
    return text[start : text.index("endmodule", start)]


# -- the golden widths themselves hold their bounds ------------------------------------------
@pytest.mark.parametrize("name", list(CORES))
def test_golden_widths_hold_their_bounds(name):
    f = derive_formats(CORES[name])
    for bound, bits in (
        (f.q_acc_bound, f.q_acc_bits),
        (f.score_bound, f.score_bits),
        (f.numer_bound, f.numer_bits),
        (f.prod_bound, f.prod_bits),
        (f.out_acc_bound, f.out_acc_bits),
    ):
        assert -(2 ** (bits - 1)) <= -bound and bound <= 2 ** (bits - 1) - 1
        assert bound > 2 ** (bits - 2) - 1  # and not a bit wider than needed
    assert f.esum_bound < 2**f.esum_bits <= 2 * f.esum_bound
    assert f.zdiff_bound < 2**f.zdiff_bits
    # |N R + half| with the largest reciprocal entry and the largest rounding half
    assert f.prod_bound == f.numer_bound * 2**f.recip_frac + 2 ** (f.recip_frac + f.esum_bits - 2)
