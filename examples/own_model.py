"""Your own model's attention in hardware, end to end (docs/own_model.md).

A small classifier built from PyTorch's own ``nn.TransformerEncoderLayer`` whose ``self_attn``
is ``eatt.nn.MultiheadAttention`` (E-ATT, Brevitas QAT), trained briefly on a toy task (is the
first token of a padded sequence equal to its last?), then:

1. ``eatt.capture``: the layer's integer calls on held-out sequences (checked call by call
   against the golden model),
2. ``eatt.export_layer``: the layer's QONNX core, executed by qonnx on the captured vectors,
3. hls4ml: the C simulation on the captured vectors,
4. RTL: Verilator and Icarus (cocotb) on the captured vectors,

each compared with the golden model and with the module's own outputs. Run from the repository
root after ``make install``:

    .venv/bin/python examples/own_model.py -o runs/own_model [--steps 300] [--calls 1000]

``--quick`` is the tiny size the test runs. Exit 0 when every level equals the module.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from torch import nn

import eatt
from eatt.hls.project import write_project
from eatt.nn import MultiheadAttention
from eatt.quant.export import check_export
from eatt.quant.vectors import capture_inputs
from eatt.rtl_sim.generate import generate_rtl
from eatt.rtl_sim.runner import simulate


class Classifier(nn.Module):
    """Embeddings, one pre-norm Transformer encoder layer (eatt attention), mean pooling."""

    def __init__(self, vocab: int, dim: int, heads: int, max_len: int, **attention) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.randn(max_len, dim) * 0.5)
        self.encoder = nn.TransformerEncoderLayer(
            dim, heads, 2 * dim, dropout=0.0, batch_first=True, norm_first=True
        )
        self.encoder.self_attn = MultiheadAttention(
            dim, heads, batch_first=True, max_len=max_len, **attention
        )
        self.head = nn.Linear(dim, 2)

    def forward(self, tokens: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens) + self.position[: tokens.shape[1]]
        h = self.encoder(h, src_key_padding_mask=padding)
        keep = (~padding).unsqueeze(-1).to(h.dtype)
        return self.head((h * keep).sum(1) / keep.sum(1))


def toy_batch(n: int, max_len: int, vocab: int, generator: torch.Generator):
    """(tokens, padding, labels): sequences of 2..max_len tokens; label 1 when the first token
    equals the last valid one (half of them, by construction)."""
    lengths = torch.randint(2, max_len + 1, (n,), generator=generator)
    tokens = torch.randint(0, vocab, (n, max_len), generator=generator)
    labels = torch.randint(0, 2, (n,), generator=generator)
    rows = torch.arange(n)
    other = (tokens[:, 0] + 1 + torch.randint(0, vocab - 1, (n,), generator=generator)) % vocab
    tokens[rows, lengths - 1] = torch.where(labels.bool(), tokens[:, 0], other)
    padding = torch.arange(max_len)[None, :] >= lengths[:, None]
    return tokens.masked_fill(padding, 0), padding, labels


def train(model: nn.Module, steps: int, args, seed: int) -> float:
    """Adam on fresh batches; returns held-out accuracy."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for i in range(steps):
        tokens, padding, labels = toy_batch(64, args.max_len, args.vocab, g)
        loss = nn.functional.cross_entropy(model(tokens, padding), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (i + 1) % max(1, steps // 5) == 0:
            print(f"own_model: step {i + 1}/{steps}, loss {loss.item():.3f}", file=sys.stderr)
    model.eval()
    held_out = torch.Generator().manual_seed(7)
    tokens, padding, labels = toy_batch(1000, args.max_len, args.vocab, held_out)
    with torch.no_grad():
        return float((model(tokens, padding).argmax(-1) == labels).float().mean())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", default="runs/own_model", help="output folder")
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--max-len", type=int, default=8)
    p.add_argument("--vocab", type=int, default=10)
    p.add_argument("--steps", type=int, default=300, help="training steps")
    p.add_argument("--calls", type=int, default=1000, help="captured vectors (batch rows)")
    p.add_argument("--quick", action="store_true", help="the tiny size of the test")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = p.parse_args(argv)
    if args.quick:
        args.dim, args.heads, args.max_len, args.steps, args.calls = 8, 2, 4, 20, 64
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"size": {"dim": args.dim, "heads": args.heads, "max_len": args.max_len}}
    times: dict[str, float] = {}
    t = time.perf_counter()

    torch.manual_seed(0)
    # the formats: 18-bit outputs and 14-bit values keep the output LSB fine at this width
    # (eatt.nn warns when the defaults are coarse for the dim)
    model = Classifier(args.vocab, args.dim, args.heads, args.max_len, v_bits=14, out_bits=18)
    report["accuracy"] = train(model, args.steps, args, seed=1)
    times["train"] = time.perf_counter() - t
    print(f"own_model: QAT accuracy {report['accuracy']:.3f}", file=sys.stderr)

    name = "encoder.self_attn"
    assert list(eatt.layers(model)) == [name]
    t = time.perf_counter()
    g = torch.Generator().manual_seed(11)
    batches = []
    for _ in range((args.calls + 63) // 64):
        tokens, padding, _ = toy_batch(64, args.max_len, args.vocab, g)
        batches.append((tokens, padding))
    acts, core = out / "acts.npz", out / "layer.onnx"
    report["capture"] = eatt.capture(model, name, batches, acts, max_vectors=args.calls)
    eatt.export_layer(model.encoder.self_attn, core)
    times["capture_export"] = time.perf_counter() - t

    t = time.perf_counter()
    report["qonnx"] = check_export(core, vectors=args.calls, inputs=acts)
    times["qonnx"] = time.perf_counter() - t
    t = time.perf_counter()
    report["hls"] = write_project(core, out / "hls", vectors=args.calls, inputs=acts)
    times["hls_csim"] = time.perf_counter() - t
    cfg, weights = eatt.layer_core(model.encoder.self_attn)
    t = time.perf_counter()
    generate_rtl(cfg, weights, out / "rtl", level="attention")
    captured = capture_inputs(acts, cfg, args.calls)
    report["rtl"] = {}
    for simulator in ("verilator", "icarus"):
        report["rtl"][simulator] = simulate(
            out / "rtl", vectors=args.calls, inputs=captured, simulator=simulator
        )
    times["rtl"] = time.perf_counter() - t
    report["seconds"] = {k: round(v, 1) for k, v in times.items()}

    levels = {
        "qonnx": report["qonnx"],
        "hls4ml C simulation": report["hls"]["csim"],
        **{f"RTL ({s})": r for s, r in report["rtl"].items()},
    }
    ok = report["capture"]["golden_vs_model"]["mismatches"] == 0
    lines = [f"captured {report['capture']['vectors']} vectors of {name}: golden = module"]
    for level, r in levels.items():
        vs = r.get("vs_model") or {}
        good = r["mismatches"] == 0 and vs.get("mismatches") == 0
        ok &= good
        lines.append(
            f"{level:<22} vs golden {r['mismatches']} mismatches, vs the module's outputs "
            f"{vs.get('mismatches')} of {vs.get('vectors')}"
        )
    report["ok"] = bool(ok)
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    if args.json:
        print(json.dumps(report, default=str))
    else:
        print("\n".join([*lines, f"times (s): {report['seconds']}", "PASS" if ok else "FAIL"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
