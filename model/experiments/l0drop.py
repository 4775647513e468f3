"""``l0drop``: BLEU against sparsity rate over lambda (Zhang et al. 2021, Fig. 4), the rule
patterns Freq / Inv Freq / Group at the learned sparsity (Table 2), and beam-4 decoding time with
and without the compacted memory (Algorithm 1) at long sources; the gated runs fine-tune the
trained baseline, as the paper does, and one more trains from scratch with a ramped lambda.

Two tasks: ``l0drop`` on the bundled (dense) task, ``l0drop-redundant`` on its redundant
variant (``TaskConfig.redundant``: case markers, an auxiliary, punctuation, subword pieces that
the target does not need). Both measure the break-even lambda of the trained baseline
(:func:`break_even`): what closing each source word costs, in lambda units.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..corpus import load_data
from ..data import BOS, EOS, PAD, encode_pairs
from ..evaluate import beam_search
from ..seq2seq import load_checkpoint
from .base import BLEU_TOLERANCE, TASK, _markdown_table, _num
from .staged import StagedExperiment, _fine_tune, _row, _train_and_eval, _window_sizes

#: lambdas of the L0Drop sweep, and the source lengths of the compaction timing
L0_LAMBDAS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
#: ... on the redundant task: its measured break-even lambdas (a quarter of the words below
#: 0.1, the 40% quantile near 2) call for a sweep that reaches past them
REDUNDANT_LAMBDAS = (0.1, 0.3, 0.5, 1.0, 2.0, 4.0)
_QUICK_L0_LAMBDAS = (0.5,)
#: the from-scratch run: this lambda, ramped from 0 over the first half of its steps
SCRATCH_LAMBDA = 0.3
#: test sentences the break-even lambda is measured on, and the reported quantiles
BREAK_EVEN_SENTENCES = 200
_QUICK_BREAK_EVEN_SENTENCES = 5
BREAK_EVEN_QUANTILES = (0.1, 0.25, 0.4, 0.5, 0.75)
LONG_SOURCES = (100, 400, 1000)
_QUICK_LONG_SOURCES = (40,)


def _long_sources(data, length: int, batch: int) -> torch.Tensor:
    """(batch, length) source ids: test sentences concatenated, cut to ``length`` - 1, <eos>."""
    pairs = encode_pairs(data.test, data.src_vocab, data.tgt_vocab)
    words = [i for p in pairs for i in p[0] if i != EOS]
    rows = []
    for b in range(batch):
        start = (b * 97) % max(1, len(words) - length)
        row = (words[start:] + words)[: length - 1]
        rows.append(row + [EOS])
    return torch.tensor(rows, dtype=torch.long)


def _compaction_timing(checkpoint: str, data, lengths, steps: int, repeats: int) -> list[dict]:
    """Beam-4 decoding seconds on the gated full memory vs the compacted memory (Algorithm 1)."""
    model = load_checkpoint(checkpoint, "cpu")[0]
    out = []
    for length in lengths:
        src = _long_sources(data, length, batch=8)
        times, outputs = {}, {}
        for compact in (False, True):
            model.compact_memory = compact
            beam_search(model, src[:1], beam=4, max_len=2)  # warm-up
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                outputs[compact] = beam_search(model, src, beam=4, max_len=steps)
                best = min(best, time.perf_counter() - start)
            times[compact] = best
        model.gate_stats[:] = [0, 0]
        model.compact_memory = True
        memory, padding, counts = model.encode_for_decoding(src)
        out.append(
            {
                "source_length": length,
                "compacted_length": int(memory.shape[1]),
                "seconds_full": times[False],
                "seconds_compacted": times[True],
                "speedup": times[False] / times[True],
                "same_output": outputs[False] == outputs[True],
                "sparsity_rate": model.gate_stats[0] / max(model.gate_stats[1], 1),
            }
        )
    return out


@torch.no_grad()
def break_even(checkpoint: str, data, sentences: int) -> dict:
    """What closing one source position costs a trained model, in lambda units.

    For each of the first ``sentences`` test pairs and each source position i, the target's
    summed cross entropy (nats, teacher forcing) with memory row i zeroed -- a closed gate --
    minus with none zeroed: delta_i. The objective adds lambda * (open gates / source
    positions) to (cross entropy / target tokens), so closing i pays when lambda >
    delta_i * N_src / N_tgt (corpus counts, ``<eos>`` included as the penalty counts it): that
    is position i's break-even lambda. Returned: its quantiles over source words (``<eos>``
    apart), the median of ``<eos>``, and ``lambda_40``: the lambda above which closing the
    cheapest 40 % of the words, one at a time, pays (the sparsity target's).
    """
    model = load_checkpoint(checkpoint, "cpu")[0].eval()
    pairs = encode_pairs(data.test[:sentences], data.src_vocab, data.tgt_vocab)
    words, eos, n_src, n_tgt = [], [], 0, 0
    for src_ids, tgt_ids in pairs:
        n = len(src_ids)
        src = torch.tensor([src_ids] * (n + 1))
        tgt_in = torch.tensor([[BOS, *tgt_ids]] * (n + 1))
        tgt_out = torch.tensor([[*tgt_ids, EOS]] * (n + 1))
        memory, padding = model.encode(src)
        keep = torch.ones(n + 1, n, 1, dtype=memory.dtype)
        keep[torch.arange(n), torch.arange(n)] = 0  # row n keeps every position
        logits = model.decode(tgt_in, memory * keep, padding)
        nll = nn.functional.cross_entropy(
            logits.transpose(1, 2).float(), tgt_out, ignore_index=PAD, reduction="none"
        ).sum(1)
        delta = (nll[:n] - nll[n]).tolist()
        words += delta[:-1]
        eos.append(delta[-1])
        n_src, n_tgt = n_src + n, n_tgt + len(tgt_ids) + 1
    scale = n_src / max(n_tgt, 1)
    costs = np.asarray(words, dtype=np.float64) * scale
    quantiles = {f"q{int(100 * q)}": float(np.quantile(costs, q)) for q in BREAK_EVEN_QUANTILES}
    return {
        "sentences": len(pairs),
        "source_per_target": scale,
        **quantiles,
        "lambda_40": quantiles["q40"],
        "eos_median": float(np.median(eos) * scale),
        "words_below_0_1": float(np.mean(costs < 0.1)),
    }


def sparsest_within(rows: list[dict], reference_bleu: float) -> tuple[dict | None, dict]:
    """The row with the most pruning within 0.5 BLEU of ``reference_bleu`` (None: none is),
    and the target's fields for it: its sparsity, the reference and the BLEU drop."""
    fine = [r for r in rows if r["bleu"] >= reference_bleu - BLEU_TOLERANCE]
    best = max(fine, key=lambda r: r["sparsity_rate"]) if fine else None
    return best, {
        "sparsity_rate": None if best is None else best["sparsity_rate"],
        "bleu_reference": reference_bleu,
        "bleu_drop": None if best is None else reference_bleu - best["bleu"],
    }


class L0Drop(StagedExperiment):
    def __init__(self, name: str = "l0drop", redundant: bool = False) -> None:
        self.name, self.redundant = name, redundant
        #: the redundant variant is the synthetic task's (its rules add the droppable words)
        self.tasks = ("synthetic",) if redundant else ("synthetic", "ding")

    def stages(self, quick: bool, folder: Path, quiet: bool) -> dict:
        data_cfg, model, train_cfg, beam = _window_sizes(quick)
        if self.redundant:
            data_cfg = dataclasses.replace(data_cfg, redundant=True)
        train_cfg = train_cfg.replace(data=data_cfg)
        data = load_data(data_cfg)
        rows = []
        summary, base = _train_and_eval("no pruning", model, train_cfg, data, folder, beam, quiet)
        rows.append(_row("no pruning", {**base, "sparsity_rate": 0.0}, rule=None, l0_lambda=None))
        costs = break_even(
            summary["checkpoint"],
            data,
            _QUICK_BREAK_EVEN_SENTENCES if quick else BREAK_EVEN_SENTENCES,
        )
        # as the paper does (Sec. 5): fine-tune the trained baseline with the gates, per lambda;
        # the rule patterns and the reference without gates get the same fine-tuning
        fine_cfg = _fine_tune(train_cfg, 2, summary["checkpoint"])
        fine_steps = fine_cfg.steps
        _, base = _train_and_eval("no pruning +", model, fine_cfg, data, folder, beam, quiet)
        rows.append(
            _row(
                "no pruning, fine-tuned", {**base, "sparsity_rate": 0.0}, rule=None, l0_lambda=None
            )
        )
        first = len(rows)  # the learned rows start here
        learned = []
        sweep = REDUNDANT_LAMBDAS if self.redundant else L0_LAMBDAS
        for lam in _QUICK_L0_LAMBDAS if quick else sweep:
            cfg = model.replace(l0drop=True, l0drop_lambda=lam)
            tuned, result = _train_and_eval(
                f"lambda {lam}", cfg, fine_cfg, data, folder, beam, quiet
            )
            learned.append(tuned["checkpoint"])
            rows.append(_row(f"L0Drop lambda {lam}", result, rule=None, l0_lambda=lam))
        # from scratch, as long as the fine-tuned rows have trained in all, lambda ramped up over
        # the first half (the authors' warm-up); compared like them with the fine-tuned reference
        total = train_cfg.steps + fine_steps
        scratch_cfg = model.replace(
            l0drop=True, l0drop_lambda=SCRATCH_LAMBDA, l0drop_ramp=max(1, total // 2)
        )
        scratch, result = _train_and_eval(
            f"scratch lambda {SCRATCH_LAMBDA}",
            scratch_cfg,
            train_cfg.replace(steps=total),
            data,
            folder,
            beam,
            quiet,
        )
        learned.append(scratch["checkpoint"])
        rows.append(
            _row(
                f"L0Drop lambda {SCRATCH_LAMBDA}, from scratch (ramp)",
                result,
                rule=None,
                l0_lambda=SCRATCH_LAMBDA,
                scratch=True,
            )
        )
        # the rule patterns at the sparsity of the learned run closest to 50% (Table 2's setting)
        nearest = min(
            range(len(learned)), key=lambda i: abs(rows[first + i]["sparsity_rate"] - 0.5)
        )
        rate = rows[first + nearest]["sparsity_rate"]
        for rule in ("freq", "inv-freq", "group"):
            cfg = model.replace(
                l0drop=True, l0drop_rule=rule, l0drop_rule_rate=min(max(rate, 0), 1)
            )
            _, result = _train_and_eval(f"rule {rule}", cfg, fine_cfg, data, folder, beam, quiet)
            rows.append(_row(f"rule {rule}", result, rule=rule, l0_lambda=None))
        # the learned run with the most pruning within 0.5 BLEU of no pruning; the timing uses
        # it, or (none within, or it prunes nothing) the run nearest 50% sparsity, never a
        # collapsed all-pruned one (against the fine-tuned reference: every compared row has
        # seen the same steps)
        mine = rows[first : first + len(learned)]
        best, fields = sparsest_within(mine, base["bleu"])
        pruning = best is not None and best["sparsity_rate"] > 0
        timed = learned[mine.index(best)] if pruning else learned[nearest]
        timing = _compaction_timing(
            timed,
            data,
            _QUICK_LONG_SOURCES if quick else LONG_SOURCES,
            steps=5 if quick else 30,
            repeats=1 if quick else 3,
        )
        target = {
            "what": "L0Drop prunes >= 40% of source words within 0.5 BLEU of no pruning "
            "(fine-tuned as long); compacted decoding faster at long sources",
            "break_even_lambda_40": costs["lambda_40"],
            **fields,
            "speedup_longest": timing[-1]["speedup"],
            "met": best is not None
            and best["sparsity_rate"] >= 0.4
            and timing[-1]["speedup"] > 1.0,
        }
        # the synthetic task's variant; on the Ding task its name (the report's task key)
        on_ding = TASK.get() != "synthetic"
        variant = TASK.get() if on_ding else "redundant" if self.redundant else "dense"
        return {
            "beam": beam,
            "rows": rows,
            "matched_rate": rate,
            "timing": timing,
            "timed_checkpoint": timed,
            "break_even": costs,
            "task": variant,
            "fine_tune_steps": fine_steps,
            "target": target,
            "data": dataclasses.asdict(data_cfg),
            "model": model.to_dict(),
            "train": {k: v for k, v in train_cfg.to_dict().items() if k != "data"},
        }

    def table_lines(self, report: dict) -> list[str]:
        quick = " (quick)" if report["quick"] else ""
        costs = report.get("break_even")  # (reports before issue 21 have none)
        lines = [
            f"{self.name}{quick}: {report.get('task', 'dense')} task; test BLEU and sparsity "
            f"rate (closed gates / source words, <eos> not counted), beam {report['beam']}; "
            "rules trained at the learned sparsity closest to 50% "
            f"({100 * report['matched_rate']:.1f}%)",
            "",
            *_markdown_table(
                ["model", "sparsity %", "BLEU", "decode s"],
                [
                    [
                        r["label"],
                        _num(100 * (r["sparsity_rate"] or 0.0), ".1f"),
                        _num(r["bleu"]),
                        _num(r["decode_seconds"]),
                    ]
                    for r in report["rows"]
                ],
            ),
            "",
            "Beam-4 decoding (batch 8, CPU, best of the repeats) on the gated full memory vs the "
            "compacted memory (Algorithm 1):",
            "",
            *_markdown_table(
                [
                    "source length",
                    "compacted length",
                    "full s",
                    "compacted s",
                    "speed-up",
                    "same output",
                ],
                [
                    [
                        str(t["source_length"]),
                        str(t["compacted_length"]),
                        f"{t['seconds_full']:.3f}",
                        f"{t['seconds_compacted']:.3f}",
                        f"{t['speedup']:.2f}x",
                        str(t["same_output"]),
                    ]
                    for t in report["timing"]
                ],
            ),
        ]
        if not costs:
            return lines
        return [
            *lines,
            "",
            f"Break-even lambda of the unpruned model ({costs['sentences']} test sentences): "
            "closing one source word pays above lambda = its cross-entropy cost x source / "
            "target tokens. Quantiles over the words: "
            + ", ".join(
                f"{k[1:]}% {costs[k]:.3g}" for k in costs if k.startswith("q") and k[1:].isdigit()
            )
            + f"; <eos> {costs['eos_median']:.3g} (median); "
            f"{100 * costs['words_below_0_1']:.1f}% of the words cost less than 0.1.",
        ]

    def figure(self, report: dict, plt):
        """BLEU against sparsity (the lambda sweep, the rules, the references) and the
        decoding time of the full vs the compacted memory."""
        rows = report["rows"]
        fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(9, 3.6))
        learned = [r for r in rows if r["l0_lambda"] is not None and not r.get("scratch")]
        ax.plot(
            [100 * r["sparsity_rate"] for r in learned],
            [r["bleu"] for r in learned],
            marker="o",
            label="L0Drop (lambda sweep)",
        )
        for r in rows:
            if r["rule"] is not None or r["l0_lambda"] is None or r.get("scratch"):
                ax.scatter(
                    [100 * (r["sparsity_rate"] or 0.0)], [r["bleu"]], marker="s", label=r["label"]
                )
        ax.set_xlabel("sparsity rate (%)")
        ax.set_ylabel("test BLEU")
        ax.legend(fontsize=7)
        t = report["timing"]
        ax_t.plot(
            [x["source_length"] for x in t],
            [x["seconds_full"] for x in t],
            marker="o",
            label="full gated memory",
        )
        ax_t.plot(
            [x["source_length"] for x in t],
            [x["seconds_compacted"] for x in t],
            marker="s",
            label="compacted (Algorithm 1)",
        )
        ax_t.set_xlabel("source length")
        ax_t.set_ylabel("beam-4 decoding s (CPU)")
        ax_t.legend(fontsize=7)
        fig.suptitle(self.name)
        return fig


EXPERIMENT = L0Drop()
#: the same stages on the redundant variant of the task (Fig. 4's curve, where pruning can pay)
REDUNDANT = L0Drop("l0drop-redundant", redundant=True)
