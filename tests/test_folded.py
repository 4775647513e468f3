"""The folded attention engine (issue 19, first slice): RTL level ``folded`` of the core.

Bit-exact with GoldenCore.forward for every mechanism (E-ATT, vanilla, Dense, RandInit), with
and without masks, at two folding
factors each; every vector's first input and output beat where folded_schedule (the
overlapped phases' hand-over) puts them, latency and II equal to metadata.json (the testbench
asserts it on every vector, the result reports it); the folding flags' one-line errors; the
weight files' layout; generation at the paper's size (l 22, d 512, 8 heads) stays small.

Each Verilator build takes 15-20 s here; builds are cached by the runner (keyed by the RTL
text, which holds no weights), so the CLI test reuses the first config's build.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
import yaml

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig
from eatt.mechanisms import mechanism_of
from eatt.quant.golden import random_weights
from eatt.rtl_sim.folded import (
    SETTLED_VECTORS,
    check_folding,
    datapath_cost,
    default_folding,
    folded_cycles,
    folded_schedule,
    folding_for_reuse,
    generate_folded_rtl,
    hex_lines,
    peer_foldings,
    weight_tiles,
)
from eatt.rtl_sim.folding import max_stages, walk_drain, walk_start
from eatt.rtl_sim.generate import generate_rtl, load_metadata
from eatt.rtl_sim.lint import lint_rtl
from eatt.rtl_sim.runner import simulate
from tests.cli import run_eatt
from tests.test_rtl import _assert_lint_clean

SMALL = dict(len_q=3, len_k=4, dim=8, heads=2)
MASKED = dict(SMALL, key_padding=True, causal=True)
#: (config, lanes, simd, pe[, adder_levels]): both kinds, with and without masks, two folding
#: factors each; E-ATT also with its multiply walk narrower than the select walk (pe < simd)
CASES = {
    "eatt-l2-s2": (dict(kind="eatt", **SMALL), 2, 2, 2),
    "eatt-masked-l4-s1": (dict(kind="eatt", **MASKED), 4, 1, 1),
    "eatt-masked-l2-s4-pe1": (dict(kind="eatt", **MASKED), 2, 4, 1),
    "eatt-lq6-l2-s2-pe1": (dict(kind="eatt", **dict(SMALL, len_q=6)), 2, 2, 1),
    "vanilla-l1-s4": (dict(kind="vanilla", **SMALL), 1, 4, 4),
    "vanilla-masked-l2-s2": (dict(kind="vanilla", **MASKED), 2, 2, 2),
    # one query, one head, one chunk a token (DC = HC = KB = 1): the narrowest counters
    "eatt-q1-h1-l2-s4-pe2": (dict(kind="eatt", len_q=1, len_k=2, dim=4, heads=1), 2, 4, 2),
    # the walks pipelined for a clock (adder_levels: registered reads, cut adder trees)
    "eatt-masked-l2-s4-pe1-levels1": (dict(kind="eatt", **MASKED), 2, 4, 1, 1),
    "vanilla-l1-s4-levels2": (dict(kind="vanilla", **SMALL), 1, 4, 4, 2),
    # the Synthesizers (issue 41): Dense's hidden layer against W_2's ROM, RandInit's R read
    "dense-masked-l2-s2": (dict(kind="dense", **MASKED), 2, 2, 2),
    "dense-l4-s4-levels1": (dict(kind="dense", **SMALL), 4, 4, 4, 1),
    "randinit-masked-l2-s2": (dict(kind="randinit", **MASKED), 2, 2, 2),
    "randinit-l1-s4-levels1": (dict(kind="randinit", **SMALL), 1, 4, 4, 1),
}
VECTORS = 60  # 36 edge vectors, then random ones (every length and offset among them)


@pytest.fixture(scope="module", params=sorted(CASES))
def simulated(request, tmp_path_factory):
    config, lanes, simd, pe, *levels = CASES[request.param]
    cfg = CoreConfig.from_dict(config)
    out = tmp_path_factory.mktemp(request.param) / "rtl"
    folding = {"lanes": lanes, "simd": simd, "pe": pe}
    options = BuildOptions(folding=folding, adder_levels=levels[0] if levels else 0)
    meta = generate_rtl(cfg, random_weights(cfg, seed=3), out, level="folded", options=options)
    return cfg, out, meta, simulate(out, vectors=VECTORS, seed=5)


@pytest.mark.rtl
def test_folded_bit_exact_and_cycles(simulated):
    cfg, out, meta, result = simulated
    assert result["mismatches"] == 0, result["first_mismatch"]
    assert result["vectors"] == VECTORS and result["stall_vectors"] > 0 and result["reset_ok"]
    # the testbench measured every vector's latency and II; both equal the formula
    cycles = folded_cycles(cfg, **meta["folding"], adder_levels=meta["adder_levels"])
    assert result["latency_cycles"] == meta["latency_cycles"] == cycles["latency"]
    assert result["ii_cycles"] == meta["ii_cycles"] == cycles["ii"]
    assert result["cycles_match"]


@pytest.mark.rtl
def test_folded_lint_wall_clean(simulated):
    """verilator -Wall: no warning in any case (the narrowest counters among them)."""
    _, out, meta, _ = simulated
    _assert_lint_clean(out, meta)


@pytest.mark.rtl
def test_folded_reports_a_mismatch(simulated):
    """A wrong weight file is caught: the first differing vector is named."""
    cfg, out, meta, _ = simulated
    if cfg.kind != "eatt" or cfg.causal or cfg.len_q != 3:
        pytest.skip("one case is enough")
    path = out / "wv.mem"
    good = path.read_text()
    first = good.splitlines()[0]
    path.write_text(("0" if first[0] != "0" else "1") + good[1:])
    try:
        result = simulate(out, vectors=8, seed=5)
    finally:
        path.write_text(good)
    assert result["mismatches"] > 0
    assert "first at vector" in result["first_mismatch"]["message"]


def test_cycle_formula():
    size = dict(len_q=22, len_k=22, dim=512, heads=8)
    eatt = CoreConfig.from_dict(dict(kind="eatt", **size))
    vanilla = CoreConfig.from_dict(dict(kind="vanilla", **size))
    dc, hc, kb = 512 // 16, 64 // 16, 22 // 11
    v = folded_cycles(vanilla, lanes=11, simd=16)
    assert v["load"] == 44 * dc
    assert v["projections"] == 88 * dc * dc + 8  # K, V, Q, O one after another, 2 drains each
    assert v["attention"] == 22 * 8 * (2 * kb * hc + kb + 9)  # + the pipelines' drains
    assert v["attention_fill"] == 22 * 8 * 9
    # one vector alone: a cycle at each of four hand-overs between units, one reading Z
    assert v["latency"] == v["load"] + v["projections"] + v["attention"] + 4
    # the phases overlap across vectors: the busiest unit (the walks, pre and post) + a cycle
    # a job
    assert v["longest_phase"] == v["projections"]
    assert v["ii"] == v["walks"] == v["projections"] + 2
    # E-ATT: K on the select walk in step with V on the multiply walk, then Q
    e = folded_cycles(eatt, lanes=11, simd=16)
    assert e["projections"] == (44 * dc * dc + 2) + (22 * dc * dc + 2)
    # a multiply walk half as wide: K, then a Q token, in step with each key token's V
    e2 = folded_cycles(eatt, lanes=11, simd=16, pe=8)
    assert e2["projections"] == (44 * dc * dc + 2) + (44 * dc * dc + 2)
    assert e2["ii"] == v["ii"] - 4  # equal throughput with half the multipliers (fewer drains)
    assert {k: e2[k] for k in ("load", "attention", "out")} == {
        k: v[k] for k in ("load", "attention", "out")
    }
    # adder_levels 1 (the walks pipelined for a clock): each pass drains 2 + 4 + 3 + 1 + 2
    # cycles (the words registered twice as read and once chosen, the terms, a register after
    # tree levels 1, 2 and 3 of 4, the codes registered before the memories, a register on
    # each side of the multipliers; the select walk pads those two)
    assert walk_drain(16, 1) == 12 and walk_drain(16, 2) == 10 and walk_drain(1, 1) == 9
    p1 = folded_cycles(vanilla, lanes=11, simd=16, adder_levels=1)
    # + 1 before and after attention: each walk job's start registered (walk_start)
    assert walk_start(1) == 1 and walk_start(0) == 0
    assert p1["projections"] == 88 * dc * dc + 4 * 12 + 2
    # the score lanes' 2 + 3 stages (as a walk's tile) and q and k's second read register, the
    # block max over 11 lanes registered after each of its 4 compare levels, exp's read
    # registered and the numerators' twice (2 + 1),
    # exp's table index registered (1),
    # e x V's pieces with a register on each side (3), E's leading one and the reciprocal's
    # index registered (2), N and R beside the multipliers, N x R's pieces likewise (3) and
    # N x R registered and shifted in two stages (6), O registered before its memory (1)
    # (18: the reads 2 + 1 + 1, the exp word's second register 1, then 1 + 3 + 2 + 6 + 1)
    assert max_stages(11, 1) == 4 and max_stages(11, 2) == 2 and max_stages(1, 1) == 1
    assert max_stages(2, 1) == 1 and max_stages(4, 0) == 0
    assert p1["attention"] == v["attention"] + 22 * 8 * (6 + 4 + 18)
    # the Synthesizers: Dense's walk V then H, its lanes over the whole token (DC chunks);
    # RandInit's walk V only, a key block's scores one read (its lane: two stages pipelined)
    dense = folded_cycles(CoreConfig("dense", **size), lanes=11, simd=16)
    assert dense["projections"] == (44 * dc * dc + 4) + (22 * dc * dc + 2)
    assert dense["attention"] == 22 * 8 * (kb * dc + kb + kb * hc + 9)
    rand = folded_cycles(CoreConfig("randinit", **size), lanes=11, simd=16)
    assert rand["projections"] == (22 * dc * dc + 2) + (22 * dc * dc + 2)
    assert rand["attention"] == 22 * 8 * (kb + kb + kb * hc + 9)
    r1 = folded_cycles(CoreConfig("randinit", **size), lanes=11, simd=16, adder_levels=1)
    assert r1["attention"] == rand["attention"] + 22 * 8 * (3 + 4 + 18)  # the max as above


def test_schedule_settles_on_the_busiest_unit():
    """folded_schedule (the hand-over the testbench checks cycle by cycle): one vector alone
    takes the latency (in a stream the walks take the next vector's pre before the first's
    post, so the first output comes later); a stream settles on II (each gap from the
    seventh vector on), within 10 % of the longest phase at the default model's and the
    paper's sizes, either unit the busiest."""
    cases = [  # (shape, folding)
        (dict(len_q=64, len_k=64, dim=128, heads=4), dict(lanes=4, simd=8, pe=4)),
        (dict(len_q=22, len_k=22, dim=512, heads=8), dict(lanes=2, simd=8, pe=8)),
        (dict(SMALL), dict(lanes=1, simd=1, pe=1)),  # attention the busiest
        (dict(len_q=1, len_k=2, dim=4, heads=1), dict(lanes=2, simd=4, pe=2)),
    ]
    busiest = set()
    for shape, folding in cases:
        for kind in ("eatt", "vanilla"):
            cfg = CoreConfig.from_dict(dict(kind=kind, **shape))
            if kind == "vanilla":
                folding = dict(folding, pe=folding["simd"])
            c = folded_cycles(cfg, **folding)
            s = folded_schedule(cfg, vectors=SETTLED_VECTORS + 4, **folding)
            gaps = [b - a for a, b in zip(s["in"], s["in"][1:], strict=False)]
            assert set(gaps[SETTLED_VECTORS - 2 :]) == {c["ii"]}, (shape, kind, gaps)
            out_gaps = [b - a for a, b in zip(s["out"][5:-1], s["out"][6:-1], strict=False)]
            assert out_gaps == [c["ii"]] * 5  # (the last vector's post needs no pre after it)
            if cfg.len_q > 3:  # (the real sizes; at toy sizes the cycle a job weighs more)
                assert c["ii"] <= 1.1 * c["longest_phase"]
            busiest.add("walks" if c["ii"] == c["walks"] else "attention")
            one = folded_schedule(cfg, vectors=1, **folding)
            assert one == {"in": [0], "out": [c["latency"]]}
    assert busiest == {"walks", "attention"}


def test_folding_errors_are_one_line(tmp_path):
    cfg = CoreConfig.from_dict(dict(kind="eatt", **SMALL))
    with pytest.raises(ValueError, match=r"^--lanes: must divide len_k = 4 \(allowed: 1, 2, 4\)"):
        check_folding(cfg, 3, 2)
    with pytest.raises(ValueError, match=r"^--simd: must divide d_head = dim / heads = 4"):
        check_folding(cfg, 2, 8)
    with pytest.raises(ValueError, match=r"^--pe: must divide simd = 4 \(allowed: 1, 2, 4\)"):
        check_folding(cfg, 2, 4, 3)
    vanilla = CoreConfig.from_dict(dict(kind="vanilla", **SMALL))
    with pytest.raises(ValueError, match=r"^--pe: only E-ATT narrows its V/O tile"):
        check_folding(vanilla, 2, 4, 2)
    with pytest.raises(ValueError, match="--lanes"):
        options = BuildOptions(folding={"lanes": 0})
        generate_folded_rtl(cfg, random_weights(cfg), tmp_path / "x", options)
    assert not (tmp_path / "x").exists()
    assert default_folding(cfg) == {"lanes": 4, "simd": 4, "pe": 4}


@pytest.mark.parametrize("kind", ["eatt", "vanilla"])
def test_reuse_factor_picks_the_least_datapath_within_its_cycles(kind):
    """reuse_factor R (hls4ml's word): the folding with the least datapath whose II <= R."""
    cfg = CoreConfig.from_dict(dict(kind=kind, len_q=22, len_k=22, dim=512, heads=8))
    for reuse in (9_000, 30_000, 120_000, 400_000):
        f = folding_for_reuse(cfg, reuse)
        assert folded_cycles(cfg, **f)["ii"] <= reuse
        cost = datapath_cost(cfg, **f)
        for lanes in (1, 2, 11, 22):  # no cheaper folding meets R
            for simd in (1, 2, 4, 8, 16, 32, 64):
                for pe in [d for d in (1, 2, 4, 8, 16, 32, 64) if simd % d == 0]:
                    if kind == "vanilla" and pe != simd:
                        continue
                    if folded_cycles(cfg, lanes, simd, pe)["ii"] <= reuse:
                        assert datapath_cost(cfg, lanes, simd, pe) >= cost
    if kind == "vanilla":
        assert folding_for_reuse(cfg, 400_000) == {"lanes": 1, "simd": 8, "pe": 8}
    fewest = folded_cycles(cfg, 22, 64)["ii"]
    with pytest.raises(ValueError, match=rf"^reuse_factor: 4000 is below .* {fewest} \(lanes 22"):
        folding_for_reuse(cfg, 4000)


@pytest.mark.parametrize(
    "size, reuse, eatt, vanilla, iis",
    [
        # the walks the busiest unit, len_q <= len_k: E-ATT's multiply walk half as wide,
        # four cycles fewer
        ((4, 4, 8, 2), 300, (1, 2, 1), (1, 2, 2), (262, 266)),
        ((22, 22, 512, 8), 100_000, (1, 16, 8), (1, 16, 16), (90_118, 90_122)),
        # attention the busiest: equal cycles, E-ATT's walk as narrow as it may be
        ((64, 64, 128, 4), 40_000, (4, 16, 8), (4, 16, 16), (22_785, 22_785)),
        ((6, 4, 8, 2), 300, (1, 4, 1), (1, 4, 4), (253, 253)),
    ],
)
def test_peer_foldings_pair_the_kinds_at_equal_cycles(size, reuse, eatt, vanilla, iis):
    """What the flows compare: vanilla's folding for R, E-ATT at its lanes and simd with the
    narrowest multiply walk that is not slower (where folding_for_reuse alone gives E-ATT
    (4, 16, 4) at 32,774 cycles against vanilla's 22,785 for the third row)."""
    cfg = CoreConfig("eatt", *size)
    pair = peer_foldings(cfg, reuse)
    names = ("lanes", "simd", "pe")
    assert pair == {
        "eatt": dict(zip(names, eatt, strict=True)),
        "vanilla": dict(zip(names, vanilla, strict=True)),
    }
    got = tuple(folded_cycles(cfg.replace(kind=k), **pair[k])["ii"] for k in ("eatt", "vanilla"))
    assert got == iis and max(got) <= reuse
    with pytest.raises(ValueError, match="below the folded engine's fewest"):
        peer_foldings(cfg, 5)


def test_the_paper_example_folds_both_kinds_at_equal_cycles():
    """examples/paper.yaml (the E-ATT paper's l 22, d 512, 8 heads; README): reuse_factor
    100000 selects E-ATT (1, 16, 8) alone (90,118 cycles), and the flow's pair (1, 16, 8)
    against (1, 16) at 90,118 / 90,122 cycles (the phases overlapped: the walks the busiest;
    before, 88,709 cycles took lanes 2 and pe 16, the pair lanes 11)."""
    from pathlib import Path

    from eatt.config import load_config

    cfg = load_config(Path(__file__).parents[1] / "examples" / "paper.yaml")
    assert (cfg.kind, cfg.len_q, cfg.len_k, cfg.dim, cfg.heads) == ("eatt", 22, 22, 512, 8)
    assert folding_for_reuse(cfg, cfg.reuse_factor) == {"lanes": 1, "simd": 16, "pe": 8}
    pair = peer_foldings(cfg, cfg.reuse_factor)
    assert pair["eatt"] == {"lanes": 1, "simd": 16, "pe": 8}
    iis = {k: folded_cycles(cfg.replace(kind=k), **f)["ii"] for k, f in pair.items()}
    assert iis == {"eatt": 90_118, "vanilla": 90_122}
    # a Synthesizer's config: its own least datapath within R beside the pair
    for kind in ("dense", "randinit"):
        trio = peer_foldings(cfg.replace(kind=kind), cfg.reuse_factor)
        assert set(trio) == {"eatt", "vanilla", kind} and trio[kind]["pe"] == trio[kind]["simd"]
        assert trio[kind] == folding_for_reuse(cfg.replace(kind=kind), cfg.reuse_factor)
        assert folded_cycles(cfg.replace(kind=kind), **trio[kind])["ii"] <= cfg.reuse_factor


def test_reuse_factor_in_a_config_builds_the_folded_engine(tmp_path):
    """`eatt rtl --config` with reuse_factor > 1 and no --level: the folded engine, II <= R,
    simulated bit-exact; with an unrolled --level or --lanes it is a one-line error."""
    cfg = dict(kind="eatt", **SMALL, reuse_factor=350)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    r = _eatt("rtl", "--config", str(tmp_path / "c.yaml"), "-o", str(tmp_path / "rtl"), "--json")
    assert r.returncode == 0, r.stderr
    meta = json.loads(r.stdout)
    assert meta["level"] == "folded" and meta["reuse_factor"] == 350
    assert meta["folding"] == folding_for_reuse(CoreConfig.from_dict(cfg), 350)
    assert meta["ii_cycles"] <= 350
    result = simulate(tmp_path / "rtl", vectors=12, seed=2)
    assert result["mismatches"] == 0 and result["ii_cycles"] == meta["ii_cycles"] <= 350
    for flags, message in (
        (["--level", "alignment"], "reuse_factor: 350 folds the core"),
        (["--lanes", "2"], "--lanes/--simd/--pe: the config's reuse_factor 350 sets the"),
    ):
        bad = _eatt("rtl", "--config", str(tmp_path / "c.yaml"), "-o", str(tmp_path / "x"), *flags)
        assert bad.returncode == 2 and message in bad.stderr and len(bad.stderr.splitlines()) == 1
    assert not (tmp_path / "x").exists()


def _eatt(*args: str) -> subprocess.CompletedProcess:
    return run_eatt(*args, timeout=600)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--lanes", "3"], "eatt: error: --lanes: must divide len_k = 4 (allowed: 1, 2, 4), got 3"),
        (["--simd", "0"], "eatt: error: --simd: must divide d_head = dim / heads = 4"),
        (["--pe", "3"], "eatt: error: --pe: must divide simd = 4 (allowed: 1, 2, 4), got 3"),
        (["--level", "attention", "--pe", "2"], "eatt: error: --lanes/--simd/--pe: only with"),
    ],
)
def test_cli_folding_errors(tmp_path, flags, message):
    level = [] if "--level" in flags else ["--level", "folded"]
    proc = _eatt("rtl", *level, *flags, "-o", str(tmp_path / "rtl"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), proc.stderr


@pytest.mark.rtl
def test_cli_rtl_and_sim(tmp_path):
    """eatt rtl --level folded then eatt sim through the registry (the build is the first
    case's: same config and folding, so the cached one)."""
    config, lanes, simd, pe = CASES["eatt-l2-s2"]
    cfg_file = tmp_path / "core.yaml"
    cfg_file.write_text(yaml.safe_dump(config))
    out = tmp_path / "rtl"
    proc = _eatt(
        "rtl", "--config", str(cfg_file), "--level", "folded", "--lanes", str(lanes),
        "--simd", str(simd), "-o", str(out), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    meta = json.loads(proc.stdout)
    assert meta["level"] == "folded"
    assert meta["folding"] == {"lanes": lanes, "simd": simd, "pe": pe}
    proc = _eatt("sim", str(out), "--vectors", "40", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["mismatches"] == 0 and result["latency_cycles"] == meta["latency_cycles"]


def test_weight_files_layout():
    w = np.arange(36).reshape(6, 6) - 18
    tiles = weight_tiles(w, 3)  # tile (rc, cc) at word cc*2 + rc, w[rc*3 + r][cc*3 + c]
    assert tiles.shape == (4, 9)
    assert tiles[1].tolist() == w[3:6, 0:3].reshape(-1).tolist()
    assert tiles[2].tolist() == w[0:3, 3:6].reshape(-1).tolist()
    text = hex_lines(np.array([[-1, 2], [5, -8]]), 4)  # field 0 in the low bits
    assert text == "2f\n85\n"
    assert hex_lines(np.array([[-1], [3]]), 6) == "3f\n03\n"
    # S x PE tiles (E-ATT's V/O walk): tile (rc, cc) at word cc*2 + rc, w[rc*3 + r][cc*1 + c]
    narrow = weight_tiles(w, 3, 1)
    assert narrow.shape == (12, 3)
    assert narrow[5].tolist() == w[3:6, 2].tolist()


def test_score_rom_layout():
    """The Synthesizers' score ROM (WS_FILE): Dense's W_2, word (h KB + jb) DC + c holding
    lane l's rows c*simd.. of column h len_k + jb lanes + l at fields l*simd + t; RandInit's
    R, word (h len_q + i) KB + jb holding the scores of keys jb lanes + l."""
    dense = CoreConfig.from_dict(dict(kind="dense", **SMALL))  # dim 8, heads 2, len_k 4
    w = random_weights(dense, seed=1)
    words = mechanism_of(dense).score_rom_words(dense, w, 2, 2)  # KB 2, DC 4
    assert words.shape == (2 * 2 * 4, 4)
    h, jb, c, lane, t = 1, 1, 3, 1, 0
    col = h * 4 + jb * 2 + lane
    assert words[(h * 2 + jb) * 4 + c, lane * 2 + t] == w.w2[c * 2 + t, col]
    rand = CoreConfig.from_dict(dict(kind="randinit", **SMALL))  # len_q 3
    r = random_weights(rand, seed=1)
    words = mechanism_of(rand).score_rom_words(rand, r, 2, 2)
    assert words.shape == (2 * 3 * 2, 2)
    h, i, jb, lane = 1, 2, 1, 0
    assert words[(h * 3 + i) * 2 + jb, lane] == r.r[h * 3 + i, jb * 2 + lane]


def test_paper_size_generation_is_small(tmp_path):
    """l 22, d 512, 8 heads: about 170 KB of SystemVerilog (the hand-written modules, whatever
    the size), the weights in .mem files."""
    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=22, len_k=22, dim=512, heads=8))
    out = tmp_path / "rtl"
    options = BuildOptions(folding={"lanes": 11, "simd": 16})
    meta = generate_folded_rtl(cfg, random_weights(cfg), out, options)
    assert load_metadata(out)["level"] == "folded"
    sv = sum((out / s).stat().st_size for s in meta["sources"])
    # the hand-written engine and its leaves (fixed: every mechanism's), the memories among them
    assert sv < 200_000
    assert len((out / "wq.mem").read_text().splitlines()) == (512 // 16) ** 2


@pytest.mark.parametrize(
    "name",
    [
        "eatt-masked-l4-s1",
        "eatt-masked-l2-s4-pe1",
        "vanilla-l1-s4",
        "eatt-masked-l2-s4-pe1-levels1",
        "dense-masked-l2-s2",
        "dense-l4-s4-levels1",
        "randinit-masked-l2-s2",
        "randinit-l1-s4-levels1",
    ],
)
def test_folded_compiles_clean_in_slang(name, tmp_path):
    config, lanes, simd, pe, *levels = CASES[name]
    cfg = CoreConfig.from_dict(config)
    out = tmp_path / "rtl"
    folding = {"lanes": lanes, "simd": simd, "pe": pe}
    options = BuildOptions(folding=folding, adder_levels=levels[0] if levels else 0)
    generate_folded_rtl(cfg, random_weights(cfg), out, options)
    assert lint_rtl(out) == []


@pytest.mark.rtl
@pytest.mark.skipif(not shutil.which("iverilog"), reason="Icarus Verilog not installed")
@pytest.mark.parametrize(
    "name",
    [
        "eatt-masked-l2-s4-pe1",
        "eatt-masked-l2-s4-pe1-levels1",
        "dense-masked-l2-s2",
        "randinit-l1-s4-levels1",
    ],
)
def test_folded_in_icarus(name, tmp_path):
    """4-state: no X reaches an output (every control register is reset, every memory word
    is written before it is read); the same outputs and cycles as in Verilator."""
    config, lanes, simd, pe, *levels = CASES[name]
    cfg = CoreConfig.from_dict(config)
    out = tmp_path / "rtl"
    folding = {"lanes": lanes, "simd": simd, "pe": pe}
    options = BuildOptions(folding=folding, adder_levels=sum(levels))
    meta = generate_folded_rtl(cfg, random_weights(cfg, seed=3), out, options)
    result = simulate(out, vectors=12, seed=5, simulator="icarus")
    assert result["mismatches"] == 0, result["first_mismatch"]
    assert result["latency_cycles"] == meta["latency_cycles"] and result["reset_ok"]
