"""RTL generation and simulation (rtl_sim): bit-exact with the golden model, handshake, errors.

Verilator builds take about 10 s each, so every config is built once (module-scoped fixtures)
and the cores are small.
"""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pytest

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig, default_config
from eatt.outdir import MARKER
from eatt.quant.golden import (
    GoldenCore,
    derive_formats,
    edge_inputs,
    random_weights,
    signed_bits,
)
from eatt.rtl_sim.generate import (  # noqa: E402
    ALIGNMENT_LATENCY,
    ATTENTION_LATENCY,
    LEVELS,
    generate_rtl,
    load_metadata,
)
from eatt.rtl_sim.runner import simulate  # noqa: E402
from eatt.rtl_sim.tools import verilator_env  # noqa: E402

pytestmark = pytest.mark.rtl

VECTORS = 400

CONFIGS = {
    "eatt-2x3-d4-h2": dict(kind="eatt", len_q=2, len_k=3, dim=4, heads=2),
    # narrow Q/K (q_shift > 0 for E-ATT too), negative tau, 4-bit weights
    "eatt-4x4-d8-h2-narrow": dict(
        kind="eatt", len_q=4, len_k=4, dim=8, heads=2, tau=-0.5, weight_bits=4, qk_bits=5
    ),
    "dot-2x3-d4-h2": dict(kind="vanilla", len_q=2, len_k=3, dim=4, heads=2),
    "dot-3x2-d6-h1-narrow": dict(
        kind="vanilla", len_q=3, len_k=2, dim=6, heads=1, in_bits=6, in_frac=3, qk_bits=7
    ),
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def simulated(request, tmp_path_factory):
    cfg = CoreConfig.from_dict(CONFIGS[request.param])
    out = tmp_path_factory.mktemp(request.param) / "rtl"
    meta = generate_rtl(cfg, random_weights(cfg, seed=3), out)
    return cfg, out, meta, simulate(out, vectors=VECTORS, seed=5)


def test_alignment_bit_exact(simulated):
    cfg, out, meta, result = simulated
    assert result["vectors"] == VECTORS
    assert result["mismatches"] == 0, result["first_mismatch"]
    assert result["first_mismatch"] is None
    assert result["latency_cycles"] == meta["latency_cycles"] == 2
    assert result["ii_cycles"] == 1
    assert result["reset_ok"] is True
    assert result["stream_cycles"] == VECTORS - 1 + result["latency_cycles"]
    assert result["bubble_vectors"] == 32


def test_edge_vectors_come_first_and_given_inputs(simulated):
    cfg, out, meta, _ = simulated
    x, y = edge_inputs(cfg)
    result = simulate(out, inputs=(x, y))  # reuses the build
    assert result["vectors"] == len(x)
    assert result["mismatches"] == 0, result["first_mismatch"]


def test_metadata_contract(simulated):
    cfg, out, meta, _ = simulated
    on_disk = json.loads((out / "metadata.json").read_text())
    assert on_disk == meta
    assert on_disk["config"] == cfg.to_dict()
    assert on_disk["sources"][0] == f"{cfg.kind}_alignment.sv"  # top module first
    assert f"module {on_disk['top']}" in (out / on_disk["sources"][0]).read_text()
    s = on_disk["interface"]["outputs"]["s"]
    assert s["shape"] == [cfg.heads, cfg.len_q, cfg.len_k]
    # the score port holds every score the golden model can produce
    golden = GoldenCore(cfg, random_weights(cfg, seed=3))
    bound = golden.formats.score_bound
    assert bound < 2 ** (s["element_bits"] - 1)


def _assert_lint_clean(rtl_dir, meta) -> None:
    """verilator --lint-only -Wall on an RTL directory's sources: no warning at all."""
    files = [str(rtl_dir / rel) for rel in meta["sources"]]
    proc = subprocess.run(
        ["verilator", "--lint-only", "-Wall", "--top-module", meta["top"], *files],
        env=verilator_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_lint_wall_clean(simulated):
    _, out, meta, _ = simulated
    _assert_lint_clean(out, meta)


def test_corrupted_rtl_is_detected(tmp_path):
    cfg = CoreConfig.from_dict(CONFIGS["eatt-2x3-d4-h2"])
    out = tmp_path / "rtl"
    meta = generate_rtl(cfg, random_weights(cfg, seed=3), out)
    assert simulate(out, vectors=100, seed=1)["mismatches"] == 0
    top = out / meta["sources"][0]
    text = top.read_text()
    # move the first W_Q table entry (a single weight) one LSB towards zero
    m = re.search(r"(\d+)'d1: (wq_c\d+_g\d+) = (-?)(\d+)'sd(\d+);", text)
    assert m, "no W_Q subset-sum table found"
    sign, width, value = m.group(3), m.group(4), int(m.group(5))
    bad = m.group(0).replace(f"{sign}{width}'sd{value};", f"{sign}{width}'sd{value - 1};")
    top.write_text(text.replace(m.group(0), bad, 1))
    result = simulate(out, vectors=200, seed=1)  # same build dir: must rebuild the change
    assert result["mismatches"] > 0
    first = result["first_mismatch"]
    assert first is not None and first["run"] == "stream"
    assert first["expected"] != first["got"]
    assert len(first["index"]) == 3 and 0 <= first["vector"] < 200
    assert "first at vector" in first["message"]


# -- E-ATT datapath variants (generate.EATT_DATAPATH): all bit-exact, they differ in resources --
DATAPATH_CASES = {
    # the first straightforward datapath: a mux and an adder input per weight, full widths
    "select-abs-chain-config": dict(
        projection="select", scores="abs", tree="chain", widths="config"
    ),
    "abs-scores": dict(scores="abs"),
    "min-row-sums": dict(scores="min"),
    # dim 7 into tables of 3 inputs: chunks of 2 and 3 rows (7 is not a multiple of 3)
    "rom3-dim7": dict(rom_inputs=3),
}


@pytest.mark.parametrize("case", sorted(DATAPATH_CASES))
def test_eatt_datapath_variants_bit_exact(case, tmp_path):
    opts = DATAPATH_CASES[case]
    dims = dict(len_q=3, len_k=2, dim=7, heads=1) if case == "rom3-dim7" else {}
    cfg = CoreConfig.from_dict({**CONFIGS["eatt-4x4-d8-h2-narrow"], **dims})
    out = tmp_path / "rtl"
    meta = generate_rtl(cfg, random_weights(cfg, seed=4), out, options=BuildOptions(datapath=opts))
    assert {k: meta["eatt_datapath"][k] for k in opts} == opts
    result = simulate(out, vectors=200, seed=6)
    assert result["mismatches"] == 0, result["first_mismatch"]
    if case == "rom3-dim7":
        text = (out / meta["sources"][0]).read_text()
        sizes = {int(n) for n in re.findall(r"input logic \[(\d+):0\] idx", text)}
        assert sizes <= {0, 1, 2} and 2 in sizes  # tables of at most 3 inputs


def test_small_weights_give_narrow_widths(tmp_path):
    """Weights in {-1, 0, 1} under an 8-bit config: the tables and the score adders are sized
    from the actual weights (a few bits), not from the 8-bit worst case, and stay bit-exact."""
    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=3, len_k=3, dim=8, heads=2))
    w = random_weights(cfg, seed=7)
    for name in w.NAMES:
        setattr(w, name, np.clip(getattr(w, name), -1, 1))
    out = tmp_path / "rtl"
    meta = generate_rtl(cfg, w, out)
    text = (out / meta["sources"][0]).read_text()
    table_bits = [int(n) + 1 for n in re.findall(r"logic signed \[(\d+):0\] w[qk]_c", text)]
    assert table_bits and max(table_bits) <= 4  # |subset sum| <= 6 rows of 1
    # the l1_score_row leaves' subtracts: per lane signed_bits(DIFF_MAX), the |q - k| bound
    bounds = [
        int(n) for n in re.findall(r"32'd(\d+)", " ".join(re.findall(r"DIFF_MAX_H\d+ = .*", text)))
    ]
    diff_bits = [signed_bits(b) for b in bounds]
    assert diff_bits and max(diff_bits) <= 6  # |q - k| <= 16, not 2**12 - 1
    # the score port keeps the config's worst-case width
    assert meta["interface"]["widths"]["score_bits"] == signed_bits(derive_formats(cfg).score_bound)
    result = simulate(out, vectors=300, seed=2)
    assert result["mismatches"] == 0, result["first_mismatch"]
    x, y = edge_inputs(cfg)
    assert simulate(out, inputs=(x, y))["mismatches"] == 0


def test_bad_datapath_option(tmp_path):
    cfg = CoreConfig.from_dict(CONFIGS["eatt-2x3-d4-h2"])
    with pytest.raises(ValueError, match="scores"):
        options = BuildOptions(datapath={"scores": "l2"})
        generate_rtl(cfg, random_weights(cfg), tmp_path / "a", options=options)
    with pytest.raises(ValueError, match="unknown key"):
        options = BuildOptions(datapath={"luts": 6})
        generate_rtl(cfg, random_weights(cfg), tmp_path / "b", options=options)
    assert not (tmp_path / "a").exists()


def test_regenerate_leaves_no_stale_files(tmp_path):
    cfg = CoreConfig.from_dict(CONFIGS["dot-2x3-d4-h2"])
    out = tmp_path / "rtl"
    generate_rtl(cfg, random_weights(cfg, seed=1), out)
    (out / "stale.sv").write_text("// left over\n")
    cfg2 = cfg.replace(kind="eatt")
    meta = generate_rtl(cfg2, random_weights(cfg2, seed=2), out)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([*meta["sources"], "metadata.json", "weights.npz", MARKER])
    assert not list(tmp_path.glob(".rtl.*")), "temporary directories left behind"
    assert load_metadata(out)["kind"] == "eatt"


def test_bad_directories(tmp_path):
    with pytest.raises(ValueError, match="no metadata.json") as err:
        simulate(tmp_path, vectors=4)
    assert "\n" not in str(err.value)
    cfg = CoreConfig.from_dict(CONFIGS["eatt-2x3-d4-h2"])
    out = tmp_path / "rtl"
    meta = generate_rtl(cfg, random_weights(cfg), out)
    (out / meta["sources"][1]).unlink()
    with pytest.raises(ValueError, match="file is missing"):
        simulate(out, vectors=4)
    (out / "metadata.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        simulate(out, vectors=4)


def test_generate_rejects_bad_input(tmp_path):
    cfg = CoreConfig.from_dict(CONFIGS["eatt-2x3-d4-h2"])
    with pytest.raises(ValueError, match="level"):
        generate_rtl(cfg, random_weights(cfg), tmp_path / "a", level="window")
    w = random_weights(cfg)
    w.wq = np.full_like(w.wq, cfg.weight_max + 1)
    with pytest.raises(ValueError, match="wq"):
        generate_rtl(cfg, w, tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    window = default_config("window")  # one form: no pipelined one, no folded one
    for options, message in (
        (BuildOptions(adder_levels=1), "^adder_levels: the window unit has a fixed pipeline"),
        (BuildOptions(folding={"simd": 2}), "^folding: the window unit has no folded form"),
    ):
        with pytest.raises(ValueError, match=message):
            generate_rtl(window, random_weights(window), tmp_path / "c", options=options)
    assert not (tmp_path / "c").exists()


# -- attention level: the whole core ---------------------------------------------------------------
ATTENTION_CONFIGS = {
    "eatt-2x3-d4-h2": dict(kind="eatt", len_q=2, len_k=3, dim=4, heads=2),
    # small tables and narrow formats: indices past the exp table, a 4-entry reciprocal table
    "eatt-3x4-d4-h1-tables": dict(
        kind="eatt", len_q=3, len_k=4, dim=4, heads=1, weight_bits=4, qk_bits=5, v_bits=6,
        out_bits=6, exp_table_size=16, exp_frac=4, recip_table_size=4, recip_frac=5,
    ),
    "dot-2x3-d4-h2": dict(kind="vanilla", len_q=2, len_k=3, dim=4, heads=2),
    "dot-3x2-d6-h2-tables": dict(
        kind="vanilla", len_q=3, len_k=2, dim=6, heads=2, in_bits=6, in_frac=3, qk_bits=6, v_bits=5,
        out_bits=7, exp_table_size=8, exp_frac=3, recip_table_size=2, recip_frac=3,
    ),
}  # fmt: skip


@pytest.fixture(scope="module", params=sorted(ATTENTION_CONFIGS))
def attention(request, tmp_path_factory):
    cfg = CoreConfig.from_dict(ATTENTION_CONFIGS[request.param])
    out = tmp_path_factory.mktemp(f"att-{request.param}") / "rtl"
    meta = generate_rtl(cfg, random_weights(cfg, seed=3), out, level="attention")
    return cfg, out, meta, simulate(out, vectors=VECTORS, seed=5)


def test_attention_bit_exact(attention):
    cfg, out, meta, result = attention
    assert result["level"] == "attention" and result["top"] == f"{cfg.kind}_attention"
    assert result["vectors"] == VECTORS
    assert result["mismatches"] == 0, result["first_mismatch"]
    assert result["latency_cycles"] == meta["latency_cycles"] == 6
    assert result["ii_cycles"] == 1
    assert result["reset_ok"] is True
    assert result["stream_cycles"] == VECTORS - 1 + result["latency_cycles"]
    # the vectors exercise the softmax: outputs differ between vectors
    got = np.load(out / "sim" / "verilator" / "got.npy")
    assert len(np.unique(got.reshape(len(got), -1), axis=0)) > VECTORS // 4


def test_attention_metadata_and_widths(attention):
    cfg, out, meta, _ = attention
    assert meta["sources"][0] == f"{cfg.kind}_attention.sv"
    z = meta["interface"]["outputs"]["z"]
    assert z["shape"] == [cfg.len_q, cfg.dim] and z["valid"] == "z_vld"
    golden = GoldenCore(cfg, random_weights(cfg, seed=3))
    assert z["element_bits"] <= cfg.out_bits
    assert golden.formats.out_acc_bound >> golden.formats.out_shift < 2 ** (z["element_bits"] - 1)
    w = meta["interface"]["widths"]
    assert w["exp_bits"] == cfg.exp_frac + 1 and w["attn_bits"] == cfg.v_bits
    assert int(golden.exp_table.max()) < 2 ** w["exp_bits"]
    assert int(golden.recip_table.max()) < 2 ** w["recip_bits"]


def test_attention_lint_wall_clean(attention):
    _, out, meta, _ = attention
    files = [str(out / rel) for rel in meta["sources"]]
    proc = subprocess.run(
        ["verilator", "--lint-only", "-Wall", "--top-module", meta["top"], *files],
        env=verilator_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_attention_corrupted_table_is_detected(tmp_path):
    """One exp-table entry off by one LSB: the check must report mismatches."""
    cfg = CoreConfig.from_dict(ATTENTION_CONFIGS["eatt-3x4-d4-h1-tables"])
    out = tmp_path / "rtl"
    meta = generate_rtl(cfg, random_weights(cfg, seed=3), out, level="attention")
    top = out / meta["sources"][0]
    text = top.read_text()
    m = re.search(r"(\d+)'d1: exp_rom = (\d+)'d(\d+);", text)
    assert m, "exp_rom entry 1 not found"
    bad = m.group(0).replace(f"'d{m.group(3)};", f"'d{int(m.group(3)) - 1};")
    top.write_text(text.replace(m.group(0), bad))
    result = simulate(out, vectors=VECTORS, seed=5)
    assert result["mismatches"] > 0
    first = result["first_mismatch"]
    assert first["expected"] != first["got"] and len(first["index"]) == 2


@pytest.mark.parametrize("kind", ["eatt", "vanilla"])
def test_attention_output_clamp_in_rtl(kind, tmp_path):
    """The vectors of tests/test_golden.py's clamp case: the RTL clamps exactly as golden does."""
    from test_golden import clamp_case  # tests/ is on sys.path (pytest prepend import mode)

    cfg, w, x, y = clamp_case(kind)
    generate_rtl(cfg, w, tmp_path / "rtl", level="attention")
    result = simulate(tmp_path / "rtl", inputs=(x, y))
    assert result["vectors"] == 2 and result["mismatches"] == 0, result.get("first_mismatch")


# -- pipelining for a clock: adder_levels --------------------------------------------------------
PIPE_CONFIGS = {
    # d_head 4: each score is a subtract and 2 adder levels, so adder_levels 2 cuts it too
    "eatt": dict(kind="eatt", len_q=2, len_k=2, dim=4, heads=1),
    # 6 products per projection and per score: 3 adder levels each
    "vanilla": dict(
        kind="vanilla", len_q=2, len_k=2, dim=6, heads=1, in_bits=6, in_frac=3, qk_bits=7
    ),
}
# E-ATT alignment at 1 level: the chain tree with mux leaves (unbalanced: the late terms wait in
# delay registers), so the projection is cut too; the attention cases use the default datapath
PIPE_CASES = [
    (k, lvl, n, "chain" if (k, lvl, n) == ("eatt", "alignment", 1) else "default")
    for k in sorted(PIPE_CONFIGS)
    for lvl in LEVELS
    for n in (1, 2)
]
BASE_LATENCY = {"alignment": ALIGNMENT_LATENCY, "attention": ATTENTION_LATENCY}


@pytest.fixture(scope="module", params=PIPE_CASES, ids=lambda c: "-".join(map(str, c)))
def pipelined(request, tmp_path_factory):
    kind, level, levels, datapath = request.param
    cfg = CoreConfig.from_dict(PIPE_CONFIGS[kind])
    tmp = tmp_path_factory.mktemp(f"pipe-{kind}-{level}-{levels}")
    w = random_weights(cfg, seed=3)
    opts = DATAPATH_CASES["select-abs-chain-config"] if datapath == "chain" else None
    base_options = BuildOptions(datapath=opts)  # adder_levels 0
    base = generate_rtl(cfg, w, tmp / "base", level=level, options=base_options)
    options = BuildOptions(datapath=opts, adder_levels=levels)
    meta = generate_rtl(cfg, w, tmp / "rtl", level=level, options=options)
    if datapath == "chain":
        assert meta["tree_stages"]["projection"] >= 1
    return levels, tmp, base, meta, simulate(tmp / "rtl", vectors=100, seed=5)


def test_pipelined_bit_exact_and_longer(pipelined):
    levels, tmp, base, meta, result = pipelined
    assert result["mismatches"] == 0, result["first_mismatch"]
    # the testbench checks the latency against metadata itself; here: it grew, by the tree cuts
    assert result["latency_cycles"] == meta["latency_cycles"] > base["latency_cycles"]
    assert meta["latency_cycles"] == BASE_LATENCY[meta["level"]] + sum(meta["tree_stages"].values())
    assert result["ii_cycles"] == 1 and result["reset_ok"] is True
    assert result["stream_cycles"] == 100 - 1 + meta["latency_cycles"]
    assert result["bubble_vectors"] == 32
    assert meta["adder_levels"] == levels and 1 <= meta["max_adder_levels_per_stage"] <= levels
    assert base["adder_levels"] == 0 and set(base["tree_stages"].values()) == {0}


def test_pipelined_lint_wall_clean(pipelined):
    _, tmp, _, meta, _ = pipelined
    _assert_lint_clean(tmp / "rtl", meta)


def test_adder_levels_0_is_the_fixed_pipeline(pipelined):
    """adder_levels 0: the fixed stages (no register inside a tree); N: the stage enables
    0 .. latency-1 are each used, one-line tree registers appear."""
    _, tmp, base, meta, _ = pipelined
    for m, sub in ((base, "base"), (meta, "rtl")):
        text = (tmp / sub / m["sources"][0]).read_text()
        used = {int(n) for n in re.findall(r"stage_en\[(\d+)\]", text)}
        assert used == set(range(m["latency_cycles"])), (sub, used)
        assert (
            f"latency {m['latency_cycles']})" in text and f"LATENCY({m['latency_cycles']})" in text
        )
        inner = re.findall(r"always_ff @\(posedge ap_clk\) if \(stage_en", text)
        assert bool(inner) == (sub == "rtl")
    assert base["latency_cycles"] == BASE_LATENCY[base["level"]]


def test_testbench_checks_metadata_latency(pipelined):
    """A metadata latency one cycle off fails the testbench itself (the build is reused)."""
    _, tmp, _, meta, _ = pipelined
    path = tmp / "rtl" / "metadata.json"
    good = path.read_text()
    path.write_text(json.dumps({**meta, "latency_cycles": meta["latency_cycles"] + 1}))
    try:
        stated = meta["latency_cycles"] + 1
        with pytest.raises(RuntimeError, match=f"latency {stated - 1}, metadata says {stated}"):
            simulate(tmp / "rtl", vectors=4, seed=5)
    finally:
        path.write_text(good)


def test_bad_adder_levels(tmp_path, capsys):
    from eatt.cli import main

    cfg = CoreConfig.from_dict(CONFIGS["eatt-2x3-d4-h2"])
    for bad in (-1, 1.5, "2", True):
        with pytest.raises(ValueError, match=r"^adder_levels: must be an integer >= 0, got "):
            BuildOptions(adder_levels=bad)
    from eatt.steps import BuildOptions as steps_options  # its old home re-exports it

    assert steps_options is BuildOptions
    changed = BuildOptions()
    changed.adder_levels = -1  # set after it was made: generate_rtl checks again
    with pytest.raises(ValueError, match=r"^adder_levels: must be an integer >= 0, got -1$"):
        generate_rtl(cfg, random_weights(cfg), tmp_path / "a", options=changed)
    with pytest.raises(ValueError, match="min"):
        options = BuildOptions(datapath={"scores": "min"}, adder_levels=1)
        generate_rtl(cfg, random_weights(cfg), tmp_path / "a", options=options)
    assert not (tmp_path / "a").exists()
    for arg in ("-1", "x"):
        code = main(["rtl", "--adder-levels", arg, "-o", str(tmp_path / "b")])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("eatt: error:") and err.count("\n") == 1, err
        assert "adder" in err
    assert not (tmp_path / "b").exists()
