"""The attention mechanisms as plug-ins (eatt.mechanisms): every registered mechanism at the
levels it has, against the numpy golden model, and the Synthesizer's two (Dense, RandInit)
beside E-ATT and the dot product: golden vs its float reference within the derived bound, the
Brevitas QAT module bit-exact in eval and train, gradients into each of its layers, the float
twin round trip, the QONNX file executed by qonnx, and the operation counts of the paper's
Table 2."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

from eatt.config import CoreConfig, default_config
from eatt.mechanisms import MECHANISMS, Synthesized, mechanism_of
from eatt.model import energy
from eatt.model.synthesizer import DenseSynthesizer, RandomSynthesizer
from eatt.quant.export import check_export, export_core, load_core
from eatt.quant.float_check import compare_with_float
from eatt.quant.golden import (
    CoreWeights,
    GoldenCore,
    edge_inputs,
    random_inputs,
    random_masks,
    random_weights,
    weight_shapes,
)
from eatt.quant.modules import from_float, from_integer, integer_weights, to_float
from tests.cli import run_eatt
from tests.test_rtl import _assert_lint_clean

KINDS = tuple(m.kind for m in MECHANISMS.values())
ROOT = Path(__file__).resolve().parent.parent
SYNTHESIZERS = tuple(m.kind for m in MECHANISMS.values() if isinstance(m, Synthesized))


def core(kind: str, **over) -> CoreConfig:
    base = {"len_q": 3, "len_k": 5, "dim": 8, "heads": 2, "key_padding": True, "causal": True}
    return default_config().replace(kind=kind, **{**base, **over})


def test_every_mechanism_is_its_own_module_and_one_registration_line():
    root = Path(__file__).resolve().parent.parent / "eatt" / "mechanisms"
    for mechanism in MECHANISMS.values():
        module = type(mechanism).__module__
        assert module.startswith("eatt.mechanisms."), module
        assert (root / f"{module.rpartition('.')[2]}.py").is_file()
    registry = (root / "__init__.py").read_text(encoding="utf-8")
    assert (
        "MECHANISMS: dict[str, Mechanism] = {m.name: m for m in (EATT, DOT, DENSE, RANDINIT)}"
        in (registry)
    )
    assert set(KINDS) == set(CoreConfig.KINDS) and SYNTHESIZERS == ("dense", "randinit")


@pytest.mark.parametrize("kind", KINDS)
def test_weights_are_the_mechanisms_then_v_and_o(kind):
    cfg = core(kind)
    shapes = weight_shapes(cfg)
    assert list(shapes)[-2:] == ["wv", "wo"]
    assert tuple(shapes)[:-2] == mechanism_of(cfg).weight_names
    w = random_weights(cfg, seed=1)
    assert {k: v.shape for k, v in w.as_dict().items()} == shapes
    wrong = CoreWeights(**{**w.as_dict(), "wv": w.wv[:, :3]})
    with pytest.raises(ValueError, match="wv has shape"):
        wrong.check(cfg)
    first = next(iter(shapes))
    with pytest.raises(ValueError, match=f"missing {first}"):
        CoreWeights(**{k: v for k, v in w.as_dict().items() if k != first}).check(cfg)


def test_dense_and_randinit_weights_are_shaped_by_the_lengths():
    assert weight_shapes(core("dense"))["w2"] == (8, 2 * 5)  # dim -> heads * len_k
    assert weight_shapes(core("randinit"))["r"] == (2 * 3, 5)  # heads * len_q, len_k


@pytest.mark.parametrize("kind", KINDS)
def test_golden_is_within_the_float_bound(kind):
    cfg = core(kind)
    w = random_weights(cfg, seed=2)
    x, y = random_inputs(cfg, 300, seed=3)
    result = compare_with_float(cfg, w, x, y, random_masks(cfg, 300, seed=3))
    assert result["within_bound"], result
    xe, ye = edge_inputs(cfg)
    assert compare_with_float(cfg, w, xe, ye)["within_bound"]


def test_randinit_scores_do_not_depend_on_the_inputs():
    cfg = core("randinit", key_padding=False, causal=False)
    golden = GoldenCore(cfg, random_weights(cfg, seed=4))
    x, y = random_inputs(cfg, 20, seed=5)
    stages = golden.forward(x, y, intermediates=True)
    assert (stages["scores"] == stages["scores"][:1]).all()
    assert (stages["exp"] == stages["exp"][:1]).all()


def test_dense_scores_come_from_the_queries_only():
    cfg = core("dense", key_padding=False, causal=False)
    golden = GoldenCore(cfg, random_weights(cfg, seed=6))
    x, y = random_inputs(cfg, 10, seed=7)
    _, y2 = random_inputs(cfg, 10, seed=8)
    a, b = golden.forward(x, y, intermediates=True), golden.forward(x, y2, intermediates=True)
    np.testing.assert_array_equal(a["scores"], b["scores"])
    assert (a["hidden"] >= 0).all() and a["hidden"].max() < 2 ** (cfg.qk_bits - 1)


@pytest.mark.parametrize("kind", SYNTHESIZERS)
def test_the_qat_module_is_the_golden_model_and_trains(kind):
    cfg = core(kind)
    w = random_weights(cfg, seed=9)
    module = from_integer(cfg, w)
    x, y = random_inputs(cfg, 40, seed=10)
    masks = random_masks(cfg, 40, seed=10)
    golden = GoldenCore(cfg, w)
    expected = golden.forward(x, y, masks=masks) * golden.formats.out_lsb
    xr = torch.from_numpy(x * 2.0**-cfg.in_frac).float()
    yr = torch.from_numpy(y * 2.0**-cfg.in_frac).float()
    tmasks = {k: torch.from_numpy(v) for k, v in masks.items()}
    with torch.no_grad():
        np.testing.assert_array_equal(module(xr, yr, masks=tmasks).numpy(), expected)
    module.train()
    out = module(xr, yr, masks=tmasks)
    np.testing.assert_array_equal(out.detach().numpy(), expected)  # train mode too
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    for name, p in module.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("kind", SYNTHESIZERS)
def test_the_float_twin_round_trips(kind):
    cfg = core(kind)
    w = random_weights(cfg, seed=11)
    twin = to_float(from_integer(cfg, w))
    back = integer_weights(from_float(twin, cfg))
    for name, value in w.as_dict().items():
        np.testing.assert_array_equal(getattr(back, name), value)


def test_a_trained_synthesizer_with_a_longer_max_len_gives_the_cores_slice():
    cfg = core("dense", key_padding=False, causal=False)
    torch.manual_seed(0)
    dense = DenseSynthesizer(cfg.dim, cfg.heads, max_len=9, mlp_bias=False).eval()
    quant = from_float(dense, cfg)
    w2 = dense.w2.weight.detach().T.reshape(cfg.dim, cfg.heads, 9)[:, :, : cfg.len_k]
    lsb = 2.0**-cfg.weight_frac
    codes = torch.clamp(torch.round(w2 / lsb), -cfg.weight_max, cfg.weight_max).to(torch.int64)
    np.testing.assert_array_equal(integer_weights(quant).w2, codes.reshape(cfg.dim, -1).numpy())
    with pytest.raises(ValueError, match="bias: w1"):
        from_float(DenseSynthesizer(cfg.dim, cfg.heads, max_len=9), cfg)
    randinit = core("randinit")
    with pytest.raises(ValueError, match="max_len"):
        from_float(RandomSynthesizer(randinit.dim, randinit.heads, max_len=4), randinit)


@pytest.mark.parametrize("kind", SYNTHESIZERS)
def test_the_qonnx_file_executes_bit_exact(tmp_path, kind):
    cfg = core(kind)
    w = random_weights(cfg, seed=12)
    path = tmp_path / "core.onnx"
    export_core(cfg, w, path)
    cfg2, w2 = load_core(path)
    assert cfg2 == cfg and w2.names == w.names
    result = check_export(path, vectors=200, seed=13)
    assert result["ok"] and result["mismatches"] == 0, result


def test_operation_counts_are_the_papers_table_2():
    l, d = 22, 512  # E-ATT's Table 2 counts the alignment at one head: l d^2 + l^2 d for Dense
    dense = energy.core_counts("dense", l, l, d, 1, "alignment")
    assert dense.muls == l * d * d + l * l * d
    assert energy.core_counts("randinit", l, l, d, 8, "alignment").muls == 0
    vanilla = energy.core_counts("vanilla", l, l, d, 8, "alignment")
    assert vanilla.muls == 2 * l * d * d + l * l * d
    assert energy.core_counts("eatt", l, l, d, 8, "alignment").muls == 0


@pytest.mark.hls
@pytest.mark.parametrize("kind", SYNTHESIZERS)
def test_hls4ml_csim_is_bit_exact_with_the_mechanisms_own_kernel(tmp_path, kind):
    from eatt.hls.project import write_project  # hls4ml

    cfg = core(kind)  # key_padding and causal: the masked layer
    result = write_project(cfg, tmp_path / kind, seed=14, vectors=300, vector_seed=15)
    assert result["ok"] and result["csim"]["mismatches"] == 0, result["csim"]
    firmware = tmp_path / kind / "firmware"
    score = mechanism_of(cfg).hls_score
    assert f"using score = nnet::{score}_score<C>;" in (firmware / "parameters.h").read_text()
    assert (firmware / "nnet_utils" / f"nnet_{score}_score.h").is_file()


@pytest.mark.rtl
@pytest.mark.parametrize("kind", SYNTHESIZERS)
def test_unrolled_rtl_is_bit_exact_on_both_simulators(tmp_path, kind):
    """The mechanism's own front end (rtl_sim/emit_synthesizer.py) in the unrolled tops: the
    attention level on Verilator, the alignment level on Icarus, both lint-clean under -Wall;
    and the folded engine (its score ROM: Dense's W_2, RandInit's R), lint-clean and
    bit-exact on Icarus."""
    from eatt.rtl_sim.generate import generate_rtl
    from eatt.rtl_sim.runner import simulate

    cfg = core(kind, len_q=2, len_k=3, dim=4, heads=2)  # masked (key_padding, causal)
    w = random_weights(cfg, seed=16)
    for level, simulator in (("attention", "verilator"), ("alignment", "icarus")):
        out = tmp_path / level
        meta = generate_rtl(cfg, w, out, level=level)
        _assert_lint_clean(out, meta)
        result = simulate(out, vectors=300, seed=17, simulator=simulator)
        assert result["ok"] and result["mismatches"] == 0, result.get("first_mismatch")
    out = tmp_path / "folded"
    meta = generate_rtl(cfg, w, out, level="folded")
    _assert_lint_clean(out, meta)
    result = simulate(out, vectors=40, seed=17, simulator="icarus")
    assert result["mismatches"] == 0 and result["cycles_match"], result.get("first_mismatch")


@pytest.mark.rtl
@pytest.mark.hls
@pytest.mark.parametrize("kind", SYNTHESIZERS)
def test_eatt_flow_of_the_example_config_passes_on_both_simulators(tmp_path, kind):
    """Issue 41: `eatt flow --config examples/KIND.yaml` passes every level (golden, QONNX,
    hls4ml C-sim, unrolled RTL on Verilator) beside its vanilla peer, and `eatt sim` of each
    RTL folder on Icarus finds no mismatch either."""
    import json

    def cli(*args):
        return run_eatt(*args, timeout=900)

    out = tmp_path / "flow"
    config = ROOT / "examples" / f"{kind}.yaml"
    r = cli("flow", "--config", str(config), "-o", str(out), "--no-resources", "--no-window",
            "--vectors", "60", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["ok"] and set(result["cores"]) == {kind, "vanilla"}
    for level in ("alignment", "attention"):
        assert result["cores"][kind]["sim"][level]["mismatches"] == 0
        r = cli("sim", str(out / kind / f"rtl_{level}"), "--simulator", "icarus", "--vectors",
                "60", "--json")  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        sim = json.loads(r.stdout)
        assert sim["ok"] and sim["mismatches"] == 0 and sim["vectors"] >= 60
    # folded (--reuse-factor): the folded hls4ml layer and RTL engine of both cores, the
    # Synthesizer's at its own least datapath within R
    out = tmp_path / "folded"
    r = cli("flow", "--config", str(config), "-o", str(out), "--no-resources", "--no-window",
            "--vectors", "20", "--reuse-factor", "300", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["ok"] and set(result["cores"]) == {kind, "vanilla"}
    core = result["cores"][kind]
    assert core["sim"]["folded"]["mismatches"] == 0 and core["hls"]["folding"]
    assert core["sim"]["folded"]["ii_cycles"] <= 300
    assert "each folded to its least datapath" in (out / "report.md").read_text()


#: a branch on a mechanism's name or kind compares a string of these
_MECHANISM_STRINGS = {n for m in MECHANISMS.values() for n in (m.name, m.kind, f"quant-{m.kind}")}
#: switches of the float models that share a word with a mechanism but are not one: Luong's
#: score functions (model/windowed.py, Luong et al. 2015 Eq. 8: dot, general, concat, and
#: E-ATT's L1) and the l1/dot score switch of E-ATT's Table 5 variants (model/attention.py)
_OTHER_SWITCHES = {"score", "selection"}


def _mechanism_branches(path: Path) -> list[str]:
    def strings(node) -> set:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return set().union(set(), *(strings(e) for e in node.elts))
        return set()

    def switch(node) -> str | None:
        return node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)

    hits = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(strings(s) & _MECHANISM_STRINGS for s in sides) and not any(
                switch(s) in _OTHER_SWITCHES for s in sides
            ):
                hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return hits


def test_no_branch_on_a_mechanism_outside_the_mechanisms():
    """Issue 41's contract: code outside eatt/mechanisms asks the mechanism (its title, its
    weights, binarized, its paper_ops, PEER, folded_kinds(), ...), never compares a kind
    string; the package and the benches are scanned (ast), the testbenches and tests not."""
    hits = []
    for folder in ("eatt", "model", "quant", "hls", "rtl_sim", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "mechanisms" in path.parts or "tb" in path.parts:
                continue
            hits += _mechanism_branches(path)
    assert not hits, "branches on a mechanism's kind:\n" + "\n".join(hits)


def test_each_mechanism_prices_the_paper_s_appendix_a():
    """paper_ops gives the three levels for every mechanism, and the block adds the same
    9 l d^2 multiply-adds (W_O and the FFN) to each attention."""
    for m in MECHANISMS.values():
        ops = m.paper_ops(4, 8)
        assert set(ops) == {"alignment", "attention", "block"}, m.name
        assert ops["block"][1] - ops["attention"][1] == 9 * 4 * 8 * 8, m.name
    assert MECHANISMS["eatt"].paper_ops(4, 8)["alignment"][1] == 0  # adder-only
