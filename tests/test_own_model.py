"""Your own model (issue 40): eatt.nn.MultiheadAttention as a drop-in, the any-model API
(eatt.layers, eatt.capture, eatt.export_layer), the stages' check against the model's own
outputs, and examples/own_model.py at its tiny size."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import eatt
from eatt.nn import MultiheadAttention
from eatt.quant.export import check_export
from eatt.quant.golden import GoldenCore
from eatt.quant.vectors import load_capture
from tests.cli import run_eatt

ROOT = Path(__file__).resolve().parent.parent
FORMATS = {"v_bits": 14, "out_bits": 18}  # fine output LSB at dim 8-16 (no coarse warning)


def _padding(lengths, width):
    return torch.arange(width)[None, :] >= torch.tensor(lengths)[:, None]


@pytest.mark.parametrize("kind", ["eatt", "vanilla"])
def test_drop_in_transformer_layers_train_pickle_trace(kind):
    """PyTorch's own encoder and decoder layers with eatt attention train, pickle whole with
    torch.save(model), and trace with torch.fx (the module is one call_module leaf)."""
    torch.manual_seed(0)
    enc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    enc.self_attn = MultiheadAttention(16, 2, kind=kind, batch_first=True, max_len=8, **FORMATS)
    dec = nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0)  # sequence-first
    dec.self_attn = MultiheadAttention(16, 2, kind=kind, max_len=8, **FORMATS)
    dec.multihead_attn = MultiheadAttention(16, 2, kind=kind, max_len=8, **FORMATS)
    x, pad = torch.randn(3, 6, 16), _padding([6, 4, 1], 6)
    tgt, memory = torch.randn(5, 3, 16), torch.randn(6, 3, 16)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    params = [*enc.parameters(), *dec.parameters()]
    opt = torch.optim.SGD(params, lr=0.1)
    out = enc(x, src_key_padding_mask=pad)
    y = dec(tgt, memory, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=pad)
    (out.pow(2).mean() + y.pow(2).mean()).backward()
    assert dec.self_attn.core.q_proj.weight.grad.abs().sum() > 0
    assert dec.multihead_attn.core.v_proj.weight.grad.abs().sum() > 0
    opt.step()

    enc.eval()
    with torch.no_grad():
        before = enc(x, src_key_padding_mask=pad)
    buf = io.BytesIO()
    torch.save(enc, buf)
    buf.seek(0)
    again = torch.load(buf, weights_only=False)
    with torch.no_grad():
        assert torch.equal(again(x, src_key_padding_mask=pad), before)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = MultiheadAttention(16, 2, kind=kind, batch_first=True, max_len=8,
                                           **FORMATS)  # fmt: skip
            self.head = nn.Linear(16, 2)

        def forward(self, h):
            return self.head(self.attn(h, h, h, need_weights=False)[0].mean(1))

    model = Model().eval()
    traced = torch.fx.symbolic_trace(model)
    assert [n.op for n in traced.graph.nodes].count("call_module") == 2
    with torch.no_grad():
        assert torch.equal(traced(x), model(x))


def test_float_vanilla_equals_torch_multihead_attention():
    """The float dot kind is nn.MultiheadAttention (bias=False) with the same weights: outputs
    and weights, with key padding and a causal mask, batch-first or not, unbatched."""
    torch.manual_seed(1)
    ref = nn.MultiheadAttention(16, 4, bias=False, batch_first=True)
    ours = MultiheadAttention(16, 4, kind="vanilla", quantized=False, batch_first=True)
    wq, wk, wv = ref.in_proj_weight.detach().chunk(3)
    with torch.no_grad():
        for name, w in (("q", wq), ("k", wk), ("v", wv), ("o", ref.out_proj.weight)):
            getattr(ours.core, f"{name}_proj").weight.copy_(w)
    q, kv = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    pad = _padding([7, 3], 7)
    got, got_w = ours(q, kv, kv, key_padding_mask=pad, average_attn_weights=False)
    want, want_w = ref(q, kv, kv, key_padding_mask=pad, average_attn_weights=False)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_w, want_w)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    got, got_w = ours(q, q, q, attn_mask=mask)
    want, want_w = ref(q, q, q, attn_mask=mask)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_w, want_w)
    got, _ = ours(q[0], kv[0], kv[0], need_weights=False)
    torch.testing.assert_close(got, ref(q[0], kv[0], kv[0], need_weights=False)[0])


def test_quantized_call_is_the_padded_core():
    """A quantized call at its own lengths equals the max_len core's golden model with the
    call padded, its length and causal offset as mask inputs."""
    torch.manual_seed(2)
    m = MultiheadAttention(8, 2, batch_first=True, max_len=6, **FORMATS).eval()
    x = torch.randn(3, 4, 8) * 2
    pad = _padding([4, 2, 3], 4)
    causal = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)
    with torch.no_grad():
        out, w = m(x, x, x, key_padding_mask=pad, attn_mask=causal)
    cfg, weights = eatt.layer_core(m, causal=True)
    xc = np.zeros((3, 6, 8), dtype=np.int64)
    xc[:, :4] = m.core.input_codes(x).numpy()
    masks = {"length": np.array([4, 2, 3]), "offset": np.zeros(3, dtype=np.int64)}
    golden = GoldenCore(cfg, weights).forward(xc, xc, masks=masks)[:, :4]
    assert np.array_equal(np.round(out.numpy() / m.core.formats.out_lsb), golden)
    assert torch.allclose(w.sum(-1), torch.ones(3, 4, dtype=w.dtype))
    assert float(w[1, :, 2:].abs().sum()) == 0.0  # padding keys get no weight


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m, x: m(x, x, x.clone() + 1), "key and value"),
        (
            lambda m, x: m(x, x, x, key_padding_mask=torch.tensor([[True, False, False]] * 2)),
            "padding at the end",
        ),  # fmt: skip
        (lambda m, x: m(x, x, x, attn_mask=torch.eye(3, dtype=torch.bool)), "causal mask"),
        (lambda m, x: m(x, x, x, attn_mask=torch.full((3, 3), 0.5)), "0 and -inf"),
        (lambda m, x: m(torch.randn(2, 9, 8), x, x), "max_len"),
        (
            lambda m, x: m(x, x, x, attn_mask=torch.zeros(4, 3, 3, dtype=torch.bool)),
            r"one \(3, 3\)",
        ),
    ],
)
def test_calls_the_core_cannot_compute_are_refused(call, message):
    m = MultiheadAttention(8, 2, batch_first=True, max_len=4, **FORMATS)
    with pytest.raises(ValueError, match=message):
        call(m, torch.randn(2, 3, 8))


def test_constructor_refuses_what_the_core_lacks_and_warns_on_coarse_formats():
    for kwargs, key in (({"dropout": 0.1}, "dropout"), ({"bias": True}, "bias"),
                        ({"kdim": 4}, "kdim"), ({"kind": "dense"}, "kind")):  # fmt: skip
        with pytest.raises(ValueError, match=key):
            MultiheadAttention(8, 2, **kwargs)
    with pytest.warns(UserWarning, match="output LSB is 4 at dim 16.*out_bits"):
        MultiheadAttention(16, 2)


class _Decoder(nn.Module):
    """A user's decoder: PyTorch's layer, eatt self-attention (causal) and cross-attention."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.layer.self_attn = MultiheadAttention(8, 2, batch_first=True, max_len=6, **FORMATS)
        self.layer.multihead_attn = MultiheadAttention(
            8, 2, kind="vanilla", batch_first=True, max_len=6, **FORMATS
        )

    def forward(self, tgt, memory, memory_padding):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.layer(tgt, memory, tgt_mask=mask, tgt_is_causal=True,
                          memory_key_padding_mask=memory_padding)  # fmt: skip


def _decoder_inputs(n_batches=3):
    g = torch.Generator().manual_seed(5)
    for b in range(n_batches):
        lt, lm = 3 + b, 6 - b
        pad = _padding([lm, max(1, lm - 2), 1, lm], lm)
        yield (torch.randn(4, lt, 8, generator=g) * 2, torch.randn(4, lm, 8, generator=g) * 2, pad)


def _trained_decoder(seed: int) -> _Decoder:
    """_Decoder after a few Adam steps on _decoder_inputs (both layers get gradients)."""
    torch.manual_seed(seed)
    model = _Decoder()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for tgt, memory, pad in _decoder_inputs():
        model(tgt, memory, pad).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    return model


def test_decoder_layers_capture_export_qonnx_and_tampered_captures(tmp_path):
    """Both layers of a user's decoder: eatt.layers finds them, capture records them (the
    causal self-attention with an offset input), the exported cores execute in qonnx equal to
    the golden model and to the module's own outputs; a capture whose model_out was changed
    fails, one without its config is refused."""
    model = _trained_decoder(3)
    names = list(eatt.layers(model))
    assert names == ["layer.self_attn", "layer.multihead_attn"]
    for name, causal in zip(names, (True, False), strict=True):
        acts, core = tmp_path / f"{name}.npz", tmp_path / f"{name}.onnx"
        report = eatt.capture(model, name, list(_decoder_inputs()), acts)
        assert report["config"]["causal"] is causal and report["config"]["key_padding"]
        assert report["vectors"] == 12 and report["golden_vs_model"]["mismatches"] == 0
        eatt.export_layer(eatt.layers(model)[name], core, causal=causal)
        result = check_export(core, vectors=100, inputs=acts)
        assert result["ok"] and result["mismatches"] == 0
        assert result["vs_model"] == {"vectors": 12, "mismatches": 0, "first_mismatch": None}

    name = names[0]
    c = load_capture(tmp_path / f"{name}.npz")
    arrays = {k: c[k] for k in ("x", "y", "queries", "model_out")}
    arrays.update(c["masks"])
    tampered = dict(arrays, model_out=np.full_like(c["model_out"], 7))
    np.savez(tmp_path / "tampered.npz", meta=np.array(json.dumps(c["meta"])), **tampered)
    result = check_export(tmp_path / f"{name}.onnx", vectors=100, inputs=tmp_path / "tampered.npz")
    assert result["mismatches"] == 0 and result["vs_model"]["mismatches"] == 12
    assert not result["ok"]
    bare = {"format": c["meta"]["format"]}
    np.savez(tmp_path / "bare.npz", meta=np.array(json.dumps(bare)), **arrays)
    with pytest.raises(ValueError, match="no layer config"):
        check_export(tmp_path / f"{name}.onnx", vectors=10, inputs=tmp_path / "bare.npz")
    # the causal layer exported without causal=True: the capture says how it was called
    eatt.export_layer(eatt.layers(model)[name], tmp_path / "plain.onnx")
    with pytest.raises(ValueError, match="called with a causal mask; export it with causal=True"):
        check_export(tmp_path / "plain.onnx", vectors=10, inputs=tmp_path / f"{name}.npz")


def test_api_refusals(tmp_path):
    model = nn.Sequential(nn.Linear(8, 8))
    assert eatt.layers(model) == {}
    with pytest.raises(ValueError, match="no eatt attention 'x'.*none"):
        eatt.capture(model, "x", [], tmp_path / "a.npz")
    with pytest.raises(ValueError, match="vbits: not a core option .*v_bits"):
        MultiheadAttention(8, 2, vbits=14)  # a misspelt format: one line naming it
    float_model = nn.Sequential(MultiheadAttention(8, 2, quantized=False))
    with pytest.raises(ValueError, match="float.*quantized=True"):
        eatt.capture(float_model, "0", [], tmp_path / "a.npz")
    quant = MultiheadAttention(8, 2, max_len=4, **FORMATS)
    mine = tmp_path / "mine.onnx"
    mine.write_text("my notes")
    with pytest.raises(ValueError, match="not an eatt core file: not replaced"):
        eatt.export_layer(quant, mine)
    assert mine.read_text() == "my notes"
    with pytest.raises(ValueError, match="never called"):
        eatt.capture(nn.Sequential(quant), "0", [], tmp_path / "a.npz")
    assert not (tmp_path / "a.npz").exists()


def test_cli_points_to_the_api_for_a_foreign_checkpoint(tmp_path):
    """A checkpoint eatt did not write: one line naming the file and docs/own_model.md."""
    path = tmp_path / "mine.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, path)
    for args in (["export", str(path), "--list-layers"],
                 ["export", str(path), "--layer", "enc", "-o", str(tmp_path / "l.onnx")],
                 ["flow", str(path), "--layer", "enc"],
                 ["capture", str(path), "--layer", "enc", "-o", str(tmp_path / "a.npz")],
                 ):  # fmt: skip
        r = run_eatt(*args, timeout=300)
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "docs/own_model.md" in lines[0] and str(path) in lines[0]


@pytest.mark.slow
def test_example_own_model_quick(tmp_path):
    """examples/own_model.py at its tiny size: QAT, capture, QONNX, hls4ml C simulation and
    RTL on Verilator and Icarus, every level equal to the golden model and to the module."""
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "own_model.py"), "--quick", "--json",
         "-o", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert report["ok"] and report["capture"]["vectors"] == 64
    for level in (report["qonnx"], report["hls"]["csim"], *report["rtl"].values()):
        assert level["mismatches"] == 0 and level["vs_model"]["mismatches"] == 0
    # text mode, into the same folder (the files it wrote are replaced; the builds are cached)
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "own_model.py"), "--quick",
         "-o", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines()[-1] == "PASS" and "RTL (icarus)" in r.stdout
    assert not r.stdout.lstrip().startswith("{")


def _whole_model(seed: int = 4):
    """A user's Brevitas model: input quantizer, eatt attention (a padding mask when given),
    QuantLinear, ReLU."""
    from brevitas.nn import QuantIdentity, QuantLinear

    from eatt.quant.modules import fixed_point_act_quant, fixed_point_weight_quant

    class Whole(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = QuantIdentity(act_quant=fixed_point_act_quant(8, 4))
            self.attn = MultiheadAttention(8, 2, batch_first=True, max_len=4, **FORMATS)
            self.fc = QuantLinear(8, 4, bias=False, weight_quant=fixed_point_weight_quant(8, 6))

        def forward(self, x, padding=None):
            h = self.inp(x)
            a = self.attn(h, h, h, key_padding_mask=padding, need_weights=False)[0]
            return torch.relu(self.fc(a))

    torch.manual_seed(seed)
    return Whole().eval()


@pytest.mark.parametrize("dynamo", [False, True])
def test_brevitas_export_qonnx_whole_model(tmp_path, dynamo):
    """brevitas.export.export_qonnx of a model holding eatt attention: one AttentionCore node
    amid Brevitas' own export; qonnx executes the file equal to the model (the layer's output
    codes bit for bit, the model's output too); torch's own trace of a bare core refuses."""
    from brevitas.export import export_qonnx
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes

    from eatt.quant.ops import core_from_node

    model = _whole_model()
    x, pad = torch.randn(3, 4, 8) * 2, _padding([4, 2, 1], 4)
    path = tmp_path / "whole.onnx"
    export_qonnx(model, (x, pad), str(path), dynamo=dynamo)
    wrapped = ModelWrapper(str(path)).transform(InferShapes())
    cores = [n for n in wrapped.graph.node if n.op_type == "AttentionCore"]
    assert len(cores) == 1
    cfg, weights = core_from_node(cores[0])
    want_cfg, want_w = eatt.layer_core(model.attn)
    assert cfg.key_padding and not cfg.causal and (cfg.len_q, cfg.len_k) == (4, 4)
    for k in ("wq", "wk", "wv", "wo"):
        assert np.array_equal(getattr(weights, k), getattr(want_w, k))
    names = [i.name for i in wrapped.graph.input]
    ctx = execute_onnx(wrapped, dict(zip(names, [x.numpy(), pad.numpy()], strict=True)),
                       return_full_exec_context=True)  # fmt: skip
    seen = {}
    model.attn.register_forward_hook(lambda m, i, o: seen.update(out=o[0]))  # returns None
    with torch.no_grad():
        out = model(x, pad)
    assert np.array_equal(ctx[cores[0].output[0]], seen["out"].numpy())
    assert np.array_equal(ctx[wrapped.graph.output[0].name], out.numpy())

    bare = nn.Sequential(eatt.layers(model)["attn"].core)
    with pytest.raises(RuntimeError, match="numpy.*eatt.nn.MultiheadAttention"):
        torch.jit.trace(bare, (torch.randn(1, 4, 8),))


@pytest.mark.slow
def test_readme_flow_of_a_users_layer(tmp_path):
    """README: `eatt flow layer.onnx --inputs acts.npz --no-window` on a user's layer, in text
    and --json mode: every level equal to the golden model and to the module's outputs."""
    torch.manual_seed(6)
    model = nn.Sequential(MultiheadAttention(4, 1, batch_first=True, max_len=3, **FORMATS))

    class Call(nn.Module):  # the user's model calls the layer as self-attention with padding
        def __init__(self):
            super().__init__()
            self.attn = model[0]

        def forward(self, h, pad):
            return self.attn(h, h, h, key_padding_mask=pad, need_weights=False)[0]

    user = Call()
    g = torch.Generator().manual_seed(2)
    batches = [(torch.randn(8, n, 4, generator=g) * 2, _padding([n, 1, 2, n] * 2, n))
               for n in (3, 2)]  # fmt: skip
    acts, core = tmp_path / "acts.npz", tmp_path / "layer.onnx"
    eatt.capture(user, "attn", batches, acts)
    eatt.export_layer(user.attn, core)
    base = ["flow", str(core), "--inputs", str(acts), "--no-window", "--no-resources",
            "--vectors", "16"]  # fmt: skip
    r = run_eatt(*base, "-o", str(tmp_path / "text"), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "flow: PASS" in r.stdout and "vs the model's own outputs (model_out): 16" in r.stdout
    assert "C simulation vs the model's own outputs (model_out): 16 captured" in r.stdout
    r = run_eatt(*base, "-o", str(tmp_path / "json"), "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout)
    assert result["ok"]
    own = result["cores"]["eatt"]
    assert own["export"]["check"]["vs_model"]["mismatches"] == 0
    assert own["hls"]["csim"]["vs_model"] == {
        "vectors": 16,
        "mismatches": 0,
        "first_mismatch": None,
    }
    assert own["sim"]["attention"]["vs_model"]["mismatches"] == 0
    # the capture drives the dot-product peer too: its golden count only (another function)
    peer = result["cores"]["vanilla"]
    assert peer["sim"]["attention"]["captured"] and peer["sim"]["attention"]["mismatches"] == 0
    assert peer["sim"]["attention"].get("vs_model") is None


@pytest.mark.hls
def test_hls4ml_whole_model_project(tmp_path):
    """hls4ml converts the exported whole model (Quant, eatt attention, QuantLinear, ReLU): its
    C simulation equals qonnx's execution of the file (and so the model); a model with a node
    hls4ml has no layer for is refused in one line naming it, nothing written."""
    from brevitas.export import export_qonnx

    from eatt.hls.model_project import write_model_project

    model = _whole_model(seed=7)
    path = tmp_path / "whole.onnx"
    export_qonnx(model, (torch.randn(1, 4, 8),), str(path))
    xs = torch.randn(30, 4, 8) * 2
    result = write_model_project(path, tmp_path / "hls", [xs.numpy()])
    assert result["ok"] and result["vectors"] == 30 and result["max_abs_diff"] == 0.0
    assert any("AttentionCore" in layer for layer in result["layers"])
    with torch.no_grad():
        want = model(xs).numpy()
    assert result["mismatches"] == 0 and want.shape == (30, 4, 4)

    # the CLI: `eatt hls MODEL.onnx -o DIR` (random inputs), text and --json
    base = ["hls", str(path), "--vectors", "20"]
    r = run_eatt(*base, "-o", str(tmp_path / "cli"), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "C simulation vs qonnx execution: 20 random inputs (seed 1), 0 mismatching" in r.stdout
    r = run_eatt(*base, "-o", str(tmp_path / "cli_json"), "--json", timeout=600)
    assert r.returncode == 0 and json.loads(r.stdout)["mismatches"] == 0
    r = run_eatt(*base, "-o", str(tmp_path / "x"), "--reuse-factor", "4", timeout=600)
    assert r.returncode == 2 and "is a whole model" in r.stderr
    assert not (tmp_path / "x").exists()

    seq = nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 8))
    emb = tmp_path / "emb.onnx"
    export_qonnx(seq, (torch.zeros(1, 4, dtype=torch.long),), str(emb))
    with pytest.raises(ValueError, match=r"emb.onnx: hls4ml has no layer for .*\(Gather\)"):
        write_model_project(emb, tmp_path / "hls_emb", [np.zeros((1, 4))])
    assert not (tmp_path / "hls_emb").exists()


@pytest.mark.slow
def test_decoder_layers_through_hls_and_rtl(tmp_path):
    """The user's decoder layer (eatt causal self-attention, dot cross-attention with key
    padding), trained briefly: each captured layer through hls4ml C simulation and the RTL
    (Icarus: a quick build), equal to the golden model and to the module's own outputs."""
    from eatt.hls.project import write_project
    from eatt.quant.vectors import capture_inputs
    from eatt.rtl_sim.generate import generate_rtl
    from eatt.rtl_sim.runner import simulate

    model = _trained_decoder(8)
    for name, layer in eatt.layers(model).items():
        acts, core = tmp_path / f"{name}.npz", tmp_path / f"{name}.onnx"
        report = eatt.capture(model, name, list(_decoder_inputs()), acts)
        cfg = report["config"]
        eatt.export_layer(layer, core, causal=cfg["causal"])
        hls = write_project(core, tmp_path / f"hls_{name}", vectors=100, inputs=acts)
        assert hls["ok"] and hls["csim"]["vs_model"]["mismatches"] == 0
        cfg, weights = eatt.layer_core(layer, causal=cfg["causal"])
        generate_rtl(cfg, weights, tmp_path / f"rtl_{name}", level="attention")
        sim = simulate(tmp_path / f"rtl_{name}", vectors=100, simulator="icarus",
                       inputs=capture_inputs(acts, cfg))  # fmt: skip
        assert sim["ok"] and sim["vectors"] == 12 and sim["vs_model"]["mismatches"] == 0
        codes = np.load(sim["outputs"])  # the RTL's own output codes, returned
        c = load_capture(acts)
        want = c["model_out"]
        valid = np.arange(cfg.len_q)[None, :, None] < c["queries"][:, None, None]
        assert np.array_equal(np.where(valid, codes.reshape(want.shape), 0), want)


def test_calibrate_picks_formats_from_ranges(tmp_path):
    """eatt.quant.calibrate: the input grid holds the largest input seen, the output and value
    LSBs at most the input LSB, the float weights kept; the module still computes its golden
    model (a capture of it passes); a model without a quantized layer is refused."""
    from eatt.quant import calibrate
    from eatt.quant.golden import derive_formats

    torch.manual_seed(9)
    model = nn.Sequential(MultiheadAttention(16, 2, batch_first=True, max_len=6, **FORMATS))
    layer = model[0]
    before = layer.core.q_proj.weight.detach().clone()
    x = torch.randn(4, 6, 16) * 3  # a peak near 10: in_frac 3 holds +-16
    chosen = calibrate(layer, [(x, x, x)])
    keys = chosen[""]
    peak = float(x.abs().max())
    assert 2.0 ** (7 - keys["in_frac"]) >= peak > 2.0 ** (6 - keys["in_frac"])
    f = derive_formats(layer.cfg)
    assert f.out_lsb <= 2.0 ** -keys["in_frac"] and f.v_lsb <= 2.0 ** -keys["in_frac"]
    assert torch.equal(layer.core.q_proj.weight, before)
    assert layer.cfg.in_frac == keys["in_frac"] and layer._init_args["out_bits"] == keys["out_bits"]

    class Call(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = layer

        def forward(self, h):
            return self.attn(h, h, h, need_weights=False)[0]

    report = eatt.capture(Call(), "attn", [x], tmp_path / "acts.npz")
    assert report["golden_vs_model"]["mismatches"] == 0
    assert report["config"]["in_frac"] == keys["in_frac"]
    with pytest.raises(ValueError, match="no quantized"):
        calibrate(nn.Sequential(MultiheadAttention(8, 2, quantized=False)), [torch.zeros(1, 2, 8)])
