"""CPU decoding time with and without L0Drop's compacted memory (Algorithm 1).

An LSTM encoder-decoder (eatt.model.rnn.LSTMSeq2Seq, global attention, general score) decodes
``steps`` target positions greedily with its cache (one LSTM step, one attention step and the
output projection per position) for a batch of long sources. The gated memory has a given share
of its rows pruned (gate 0, chosen at random per sentence, as L0Drop's Eq. 13 gates would be);
the same memory is decoded

* ``uncompacted``: attention over all N rows of the gated memory, and
* ``compacted``: Algorithm 1 -- the N' kept rows plus one zero row counted N - N' times,

whose outputs are equal (tests/test_rnn.py checks it; here the logits are compared too). The
reported time includes building the compacted memory (once per batch). Besides whole decoding,
the attention steps alone are timed (same states), since the LSTM and output layer cost the
same in both and dilute the gain. Weights are untrained: the cost does not depend on them.

Usage: ``python bench/l0drop_decode.py [--quick] [--out PATH]``; one torch thread. The last
stdout line is the JSON summary (``ratio`` = compacted time / uncompacted time, < 1 is faster).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import torch

from eatt.config import atomic_write_text
from eatt.model.data import BOS, EOS, PAD
from eatt.model.l0drop import compact, sparsity_rate
from eatt.model.rnn import LSTMSeq2Seq
from eatt.model.seq2seq import ModelConfig
from eatt.model.windowed import vision_span

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "l0drop_decode.json"
VOCAB = 1000


def _source(batch: int, length: int, gen: torch.Generator) -> torch.Tensor:
    src = torch.randint(4, VOCAB, (batch, length), generator=gen)
    src[:, -1] = EOS
    # lengths between 80% and 100% of the longest, padded at the end
    for b in range(batch):
        n = int(length * (0.8 + 0.2 * b / max(1, batch - 1)))
        src[b, n:] = PAD
        src[b, n - 1] = EOS
    return src


def _gates(padding: torch.Tensor, rate: float, gen: torch.Generator) -> torch.Tensor:
    """Gates closing ``rate`` of each sentence's rows (rounded), open (1) elsewhere."""
    gates = torch.ones(padding.shape)
    for b in range(padding.shape[0]):
        n = int((~padding[b]).sum())
        pruned = torch.randperm(n, generator=gen)[: round(rate * n)]
        gates[b, pruned] = 0.0
    return gates.masked_fill(padding, 0.0)


def _compacted(memory, gates, padding, compacted: bool):
    """(memory, padding, counts): Algorithm 1's compacted memory, or the full gated one."""
    if compacted:
        mem_c, counts, pad_c = compact(memory, gates, padding)
        return mem_c, pad_c, counts
    return memory * gates[..., None], padding, None


@torch.no_grad()
def _decode(model: LSTMSeq2Seq, memory, gates, padding, steps: int, compacted: bool):
    memory, padding, counts = _compacted(memory, gates, padding, compacted)
    cache = model.init_cache()
    tokens = torch.full((memory.shape[0], 1), BOS, dtype=torch.long)
    out = []
    for t in range(steps):
        logits = model.decode(tokens, memory, padding, cache, offset=t, counts=counts)[:, -1]
        tokens = logits.argmax(-1, keepdim=True)
        out.append(logits)
    return torch.stack(out, 1)


@torch.no_grad()
def _attention_only(model: LSTMSeq2Seq, memory, gates, padding, queries, compacted: bool):
    memory, padding, counts = _compacted(memory, gates, padding, compacted)
    state = model.attention.init_state(memory, padding, counts)
    for t in range(queries.shape[1]):
        model.attention.step(queries[:, t], state)
    return state


def _median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(
    lengths: list[int], rates: list[float], batch: int, dim: int, steps: int, repeats: int
) -> dict:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    cfg = ModelConfig(
        arch="lstm", dim=dim, enc_layers=2, dec_layers=2, dropout=0.0, l0drop=True, cross="global"
    )
    model = LSTMSeq2Seq(cfg, VOCAB, VOCAB).eval()
    rows = []
    for length in lengths:
        src = _source(batch, length, gen)
        with torch.no_grad():
            memory, padding, _ = model._encode(src)  # ungated rows
        queries = torch.randn(batch, steps, dim, generator=gen)
        for rate in rates:
            gates = _gates(padding, rate, gen)
            row = {"src_len": length, "target_sparsity": rate}
            row["sparsity_rate"] = round(sparsity_rate(gates, padding), 4)
            full = _decode(model, memory, gates, padding, steps, False)
            compacted = _decode(model, memory, gates, padding, steps, True)
            # equal outputs (Algorithm 1 is exact); float32 reassociation only
            row["max_abs_logit_diff"] = float((compacted - full).abs().max())
            for what, fn in (
                ("decode", partial(_decode, model, memory, gates, padding, steps)),
                ("attention", partial(_attention_only, model, memory, gates, padding, queries)),
            ):
                # alternate the two variants so machine load hits both alike
                samples = {False: [], True: []}
                for _ in range(repeats):
                    for flag in (False, True):
                        samples[flag].append(_median_time(partial(fn, flag), 1))
                t_full = statistics.median(samples[False])
                t_compact = statistics.median(samples[True])
                row[f"{what}_uncompacted_s"] = round(t_full, 5)
                row[f"{what}_compacted_s"] = round(t_compact, 5)
                row[f"{what}_ratio"] = round(t_compact / t_full, 4)
            for flag in (False, True):
                span = vision_span(_attention_only(model, memory, gates, padding, queries, flag))
                row[f"positions_per_step_{'compacted' if flag else 'uncompacted'}"] = round(span, 2)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return {
        "what": "greedy LSTM decoding (cache) on L0Drop-gated memory, compacted (Algorithm 1) "
        "vs uncompacted; ratio = compacted / uncompacted time (median), < 1 is faster",
        "config": {
            "batch": batch,
            "dim": dim,
            "enc_layers": 2,
            "dec_layers": 2,
            "target_vocab": VOCAB,
            "steps": steps,
            "repeats": repeats,
            "score": cfg.window_score,
            "threads": torch.get_num_threads(),
        },
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "processor": platform.processor() or platform.machine(),
        },
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.quick:
        result = run([40], [0.5], batch=4, dim=32, steps=5, repeats=1)
    else:
        result = run([200, 800], [0.0, 0.5, 0.8], batch=32, dim=128, steps=50, repeats=7)
    atomic_write_text(args.out, json.dumps(result, indent=2) + "\n")
    summary = {
        f"S{r['src_len']}_sparsity{r['target_sparsity']}": {
            "decode_ratio": r["decode_ratio"],
            "attention_ratio": r["attention_ratio"],
        }
        for r in result["rows"]
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
