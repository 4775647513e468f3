"""Decoding and evaluation of a trained seq2seq checkpoint (``eatt evaluate CHECKPOINT``).

* :func:`greedy_decode` / :func:`beam_search` -- incremental decoding with cached keys/values;
  beam search ranks finished hypotheses by ``log p / lp(len)`` with GNMT's length penalty
  ``lp = ((5 + len) / 6) ** alpha`` (Wu et al. 2016; the E-ATT paper's "decoding alpha").
* :func:`bleu` -- corpus BLEU with sacrebleu on detokenized text.
* :func:`binarization_ratios` -- the ratio of non-zero values in each binarized representation,
  per layer and role (the paper's Fig. 3): ``enc_self``, ``dec_self``, ``cross_query``,
  ``cross_key``; padding positions are not counted. Measured with teacher forcing on the
  references.
* :func:`attention_energy` -- the analytic energy (eatt.model.energy, the paper's Appendix A) of
  all attention modules of the model, summed over the test sentences at their actual lengths.
* :func:`decoding_stats` -- what the windowed cross-attention and L0Drop saved while decoding:
  the average vision span (positions scored per decoding step, averaged over steps and rows,
  beam hypotheses included; Shu & Nakayama 2017, Sec. 5) and the sparsity rate (closed gates
  over source positions; Zhang et al. 2021).
* :func:`evaluate` -- all of the above for one checkpoint and split, as one JSON-ready dict.

Models with L0Drop decode on the compacted memory with counts (Algorithm 1) when they offer
``encode_for_decoding``; an LSTM checkpoint (eatt.model.rnn) goes through the same functions.
"""

from __future__ import annotations

import math
import os
import time
from collections import defaultdict

import sacrebleu
import torch
from torch import Tensor

from .config import QUANT_KINDS, QUANT_WINDOW_KINDS
from .corpus import data_config_from_dict, detokenize, load_data, token_kind
from .data import (
    BOS,
    EOS,
    PAD,
    TranslationData,
    encode_pairs,
    make_batches,
)
from .energy import CORE_LEVELS, core_counts, energy_pj, paper_counts
from .seq2seq import Seq2Seq, load_checkpoint, set_arithmetic
from .train import resolve_device
from .windowed import WindowedAttention

__all__ = [
    "attention_energy",
    "beam_search",
    "binarization_ratios",
    "bleu",
    "evaluate",
    "format_evaluation",
    "greedy_decode",
    "length_penalty",
    "decoding_stats",
    "translate_batches",
    "translate_with_stats",
]

#: Appendix A method of each attention kind (the Table 5 ablations have no formula there)
ENERGY_METHOD = {"vanilla": "vanilla", "eatt": "eatt", "dense": "dense", "randinit": "randinit"}


def _max_steps(model: Seq2Seq, src: Tensor, max_len: int | None) -> int:
    steps = max_len if max_len is not None else int(src.shape[1] * 1.5) + 10
    if model._uses_max_len:
        steps = min(steps, model.cfg.max_len)
    return max(1, steps)


def _encode(model, src: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
    """(memory, padding, counts or None): the compacted memory where the model offers one."""
    if hasattr(model, "encode_for_decoding"):
        return model.encode_for_decoding(src)
    memory, padding = model.encode(src)
    return memory, padding, None


def _decode(model, tokens, memory, padding, cache, offset, counts) -> Tensor:
    if counts is None:
        return model.decode(tokens, memory, padding, cache, offset=offset)
    return model.decode(tokens, memory, padding, cache, offset=offset, counts=counts)


def _strip(ids: list[int]) -> list[int]:
    out = []
    for i in ids:
        if i == EOS:
            break
        out.append(i)
    return out


@torch.no_grad()
def greedy_decode(
    model: Seq2Seq, src: Tensor, max_len: int | None = None, incremental: bool = True
) -> list[list[int]]:
    """Greedy output ids (without <eos>) for each row of ``src``.

    ``incremental=False`` recomputes the whole prefix every step (no cache): the reference the
    cached path is tested against.
    """
    model.eval()
    memory, padding, counts = _encode(model, src)
    batch = src.shape[0]
    tokens = torch.full((batch, 1), BOS, dtype=torch.long, device=src.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    cache = model.init_cache() if incremental else None
    for t in range(_max_steps(model, src, max_len)):
        if incremental:
            logits = _decode(model, tokens[:, -1:], memory, padding, cache, t, counts)[:, -1]
        else:
            logits = _decode(model, tokens, memory, padding, None, 0, counts)[:, -1]
        nxt = _never_special(logits).argmax(-1).masked_fill(finished, PAD)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        finished |= nxt.eq(EOS)
        if bool(finished.all()):
            break
    return [_strip(row[1:]) for row in tokens.tolist()]


def _never_special(logits: Tensor) -> Tensor:
    """Logits with <pad> and <bos> ruled out: a decoder emits neither (an untrained or coarsely
    quantized model could, and a <pad> in the prefix would be masked on re-reading it)."""
    logits = logits.clone()
    logits[..., PAD] = -math.inf
    logits[..., BOS] = -math.inf
    return logits


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's ((5 + length) / 6) ** alpha."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: Seq2Seq, src: Tensor, beam: int = 4, alpha: float = 0.6, max_len: int | None = None
) -> list[list[int]]:
    """Beam search output ids (without <eos>) for each row of ``src``.

    A hypothesis ends when it emits <eos>; a sentence is done when ``beam`` hypotheses have
    ended (or at the length limit, where the open ones end too). The best ended hypothesis by
    ``sum log p / length_penalty(len incl. <eos>, alpha)`` wins. ``beam=1`` is greedy search.
    """
    if beam < 1:
        raise ValueError(f"beam must be >= 1, got {beam}")
    model.eval()
    batch, device = src.shape[0], src.device
    memory, padding, counts = _encode(model, src)
    rows = torch.arange(batch, device=device).repeat_interleave(beam)
    memory, padding = memory.index_select(0, rows), padding.index_select(0, rows)
    if counts is not None:
        counts = counts.index_select(0, rows)
    cache = model.init_cache()
    scores = torch.full((batch, beam), -math.inf, device=device, dtype=torch.float64)
    scores[:, 0] = 0.0
    hyps: list[list[list[int]]] = [[[] for _ in range(beam)] for _ in range(batch)]
    ended: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
    done = [False] * batch
    last = torch.full((batch * beam, 1), BOS, dtype=torch.long, device=device)
    steps = _max_steps(model, src, max_len)
    for t in range(steps):
        logits = _decode(model, last, memory, padding, cache, t, counts)[:, -1]
        logp = torch.log_softmax(_never_special(logits.double()), dim=-1)
        vocab = logp.shape[-1]
        cand = (scores.view(-1, 1) + logp).view(batch, beam * vocab)
        top_scores, top_index = cand.topk(min(2 * beam, beam * vocab), dim=-1)
        top_scores, top_index = top_scores.tolist(), top_index.tolist()
        next_scores = torch.full((batch, beam), -math.inf, dtype=torch.float64)
        next_tokens = torch.full((batch, beam), PAD, dtype=torch.long)
        origin = torch.arange(batch * beam).view(batch, beam).clone()
        new_hyps: list[list[list[int]]] = []
        for b in range(batch):
            alive: list[list[int]] = []
            if not done[b]:
                for score, index in zip(top_scores[b], top_index[b], strict=True):
                    if score == -math.inf:
                        break
                    k, token = divmod(index, vocab)
                    if token == EOS:
                        length = len(hyps[b][k]) + 1
                        ended[b].append((score / length_penalty(length, alpha), hyps[b][k]))
                        if len(ended[b]) >= beam:
                            break
                        continue
                    slot = len(alive)
                    next_scores[b, slot] = score
                    next_tokens[b, slot] = token
                    origin[b, slot] = b * beam + k
                    alive.append(hyps[b][k] + [token])
                    if len(alive) == beam:
                        break
                if len(ended[b]) >= beam or not alive:
                    done[b] = True
            new_hyps.append(alive + [[] for _ in range(beam - len(alive))])
        hyps = new_hyps
        if all(done):
            break
        scores = next_scores.to(device)
        cache = model.reorder_cache(cache, origin.view(-1).to(device))
        last = next_tokens.view(-1, 1).to(device)
    for b in range(batch):
        if not done[b]:  # the length limit: open hypotheses end here
            for k in range(beam):
                if scores[b, k] > -math.inf:
                    normalized = float(scores[b, k]) / length_penalty(len(hyps[b][k]) + 1, alpha)
                    ended[b].append((normalized, hyps[b][k]))
    return [max(e, key=lambda item: item[0])[1] if e else [] for e in ended]


def translate_batches(
    model: Seq2Seq, batches, beam: int = 1, alpha: float = 0.6, device: torch.device | None = None
) -> dict[int, list[int]]:
    """{pair index: output ids} over length-bucketed batches."""
    device = device or next(model.parameters()).device
    out: dict[int, list[int]] = {}
    for batch in batches:
        src = batch.src.to(device)
        ids = greedy_decode(model, src) if beam == 1 else beam_search(model, src, beam, alpha)
        out.update(zip(batch.index, ids, strict=True))
    return out


def _is_window(module) -> bool:
    """A windowed cross-attention with vision-span counters: WindowedAttention, or the window
    unit's quantized twin (eatt.quant.window_cross: the same interface, not imported here)."""
    return isinstance(module, WindowedAttention) or hasattr(module, "total_row_steps")


def translate_with_stats(
    model, batches, beam: int = 1, alpha: float = 0.6, device: torch.device | None = None
) -> tuple[dict[int, list[int]], dict]:
    """:func:`translate_batches` plus :func:`decoding_stats` of exactly that decoding."""
    windows = [m for m in model.modules() if _is_window(m)]
    for m in windows:
        m.reset_counters()
    # the models count their gates themselves (source words, <eos> not counted)
    own = getattr(model, "gate_stats", None)
    if own is not None:
        own[0] = own[1] = 0
    start = time.perf_counter()
    outputs = translate_batches(model, batches, beam=beam, alpha=alpha, device=device)
    seconds = time.perf_counter() - start
    closed, total = (own[0], own[1]) if own is not None else (0, 0)
    stats = decoding_stats(windows, closed, total, own is not None)
    stats["decode_seconds"] = seconds
    return outputs, stats


def decoding_stats(windows, closed: int, total: int, gated: bool) -> dict:
    """{"vision_span", "vision_span_per_layer", "sparsity_rate"} (None where not applicable)."""
    spans = [m.total_scored / m.total_row_steps for m in windows if m.total_row_steps]
    return {
        "vision_span": sum(spans) / len(spans) if spans else None,
        "vision_span_per_layer": spans or None,
        "sparsity_rate": closed / total if gated and total else None,
    }


def bleu(hypotheses: list[str], references: list[str]) -> dict:
    """Corpus BLEU (sacrebleu, 13a tokenization) of detokenized strings."""
    metric = sacrebleu.metrics.BLEU()
    result = metric.corpus_score(hypotheses, [references])
    return {"bleu": result.score, "signature": str(metric.get_signature())}


# -- statistics ----------------------------------------------------------------------------------
class _BinaryCounter:
    """Recorder: ones and elements of each binarized representation over non-padding rows."""

    def __init__(self) -> None:
        self.ones: dict[str, int] = defaultdict(int)
        self.total: dict[str, int] = defaultdict(int)

    def __call__(self, name: str, bits: Tensor, padding: Tensor | None) -> None:
        if padding is not None:
            bits = bits[~padding]  # (rows, dim)
        self.ones[name] += int(bits.sum())
        self.total[name] += bits.numel()


_FIG3_NAMES = {"enc_self/": "enc_self", "dec_self/": "dec_self", "cross/": "cross_query"}
#: the paper's Fig. 3 series: Enc-Self, Dec-Self, Dec-Crs-Query, Dec-Crs-Key
FIG3_ROLES = ("enc_self", "dec_self", "cross_query", "cross_key")


@torch.no_grad()
def binarization_ratios(model: Seq2Seq, batches, device=None) -> dict[str, list[float]]:
    """{role: [ratio of ones per layer]} for the binarized Q/K inputs (Fig. 3); {} if none."""
    device = device or next(model.parameters()).device
    model.eval()
    counter = _BinaryCounter()
    model.set_recorder(counter)
    try:
        for batch in batches:
            batch = batch.to(device)
            model(batch.src, batch.tgt_in)
    finally:
        model.set_recorder(None)
    found: dict[str, dict[int, float]] = defaultdict(dict)
    for name, total in counter.total.items():
        role, layer, which = name.split("/")
        label = "cross_key" if which == "key" else _FIG3_NAMES[f"{role}/"]
        found[label][int(layer)] = counter.ones[name] / max(total, 1)
    return {
        label: [found[label].get(i, math.nan) for i in range(max(found[label]) + 1)]
        for label in FIG3_ROLES
        if label in found
    }


def attention_energy(
    model: Seq2Seq, lengths: list[tuple[int, int]], level: str = "attention"
) -> dict:
    """Analytic energy (pJ, the paper's Table 1 per-op costs) of the model's attention modules.

    ``lengths`` holds (source length with <eos>, target length with <bos>) per sentence. Each
    module is counted with :func:`eatt.model.energy.paper_counts` (Appendix A, which assumes
    l1 = l2): encoder self-attention at the source length, decoder self- and cross-attention at
    the target length. Summed over sentences and modules; ``percent_of_vanilla`` compares with
    the same model with vanilla attention everywhere. The fixed-point kinds (quant-eatt,
    quant-vanilla, quant-dense, quant-randinit) are counted as their hardware core computes
    (:func:`core_counts`: the attention level includes W_O; no block level). Kinds without a
    formula (binary-dot, linear-l1) make the totals None.
    """
    dim = model.cfg.dim
    totals = {"asic": 0.0, "fpga": 0.0}
    vanilla = {"asic": 0.0, "fpga": 0.0}
    per_role: dict[str, dict[str, float]] = {}
    modeled = True
    for role, _, module in model.attention_modules():
        method = ENERGY_METHOD.get(module.kind)
        hardware = QUANT_KINDS.get(module.kind) if level in CORE_LEVELS else None
        role_total = per_role.setdefault(role, {"asic": 0.0, "fpga": 0.0})
        for src_len, tgt_len in lengths:
            length = src_len if role == "enc_self" else tgt_len
            base = paper_counts("vanilla", level, length, dim)
            if hardware is not None:
                counts = core_counts(hardware, length, length, dim, model.cfg.heads, level)
            elif method is not None:
                counts = paper_counts(method, level, length, dim)
            for target in totals:
                vanilla[target] += energy_pj(base, target=target)
                if method is None and hardware is None:
                    continue
                e = energy_pj(counts, target=target)
                totals[target] += e
                role_total[target] += e
        modeled = modeled and (method is not None or hardware is not None)
    result = {
        "level": level,
        "table": "paper",
        "sentences": len(lengths),
        "energy_pj": totals if modeled else None,
        "vanilla_energy_pj": vanilla,
        "percent_of_vanilla": (
            {t: 100.0 * totals[t] / vanilla[t] for t in totals} if modeled and lengths else None
        ),
        "per_role_pj": per_role if modeled else None,
    }
    return result


# -- the whole evaluation ------------------------------------------------------------------------
def checkpoint_data(checkpoint, payload: dict, data: TranslationData | None = None):
    """The data a checkpoint was trained on (its data config, regenerated and checked against
    its fingerprint), unless ``data`` is given."""
    if data is not None:
        return data
    if "data_config" not in payload:
        raise ValueError(f"{checkpoint}: checkpoint has no data config; pass data")
    data = load_data(data_config_from_dict(payload["data_config"]))
    if payload.get("data_fingerprint", data.fingerprint()) != data.fingerprint():
        raise ValueError(
            f"{checkpoint}: its data config no longer gives the data it was trained on "
            "(the data files or the generator changed); pass the data explicitly"
        )
    return data


def evaluate(
    checkpoint: str | os.PathLike,
    beam: int = 4,
    alpha: float = 0.6,
    split: str = "test",
    device: str = "auto",
    max_tokens: int = 4096,
    data: TranslationData | None = None,
    limit: int = 0,
    model_overrides: dict | None = None,
    compact: bool = True,
    hardware: bool = False,
) -> dict:
    """BLEU, binarization ratios and attention energy of a checkpoint on one split.

    The data comes from the checkpoint's own data config (the synthetic task is regenerated
    from its seed) unless ``data`` is given; ``limit`` > 0 keeps only the first pairs.
    ``model_overrides``: config keys without weights to change (e.g. ``flexible_tau``);
    ``compact=False`` decodes an L0Drop model on the gated full memory instead of Algorithm 1's
    compacted one. ``hardware`` (a model with quantized kinds): decode the split again with
    every quantized attention run as its exported core runs it (len_q = len_k = max_len, the
    valid length and causal offset as mask inputs) and once with the training surrogate (float
    softmax); ``result["hardware"]`` gives each one's BLEU and how many hypotheses differ from
    the model's own (its eval computes the core's arithmetic: 0 expected).
    """
    if split not in ("train", "dev", "test"):
        raise ValueError(f"split must be train, dev or test, got {split!r}")
    dev = resolve_device(device)
    model, src_vocab, tgt_vocab, payload = load_checkpoint(checkpoint, dev, model_overrides)
    if hasattr(model, "compact_memory"):
        model.compact_memory = compact
    data = checkpoint_data(checkpoint, payload, data)
    pairs = getattr(data, split)
    if limit:
        pairs = pairs[:limit]
    kind = token_kind(payload.get("data_config", {}))
    encoded = encode_pairs(pairs, src_vocab, tgt_vocab)
    batches = make_batches(encoded, max_tokens, max_sentences=128)
    outputs, stats = translate_with_stats(model, batches, beam=beam, alpha=alpha, device=dev)
    seconds = stats["decode_seconds"]
    hyps = [detokenize(tgt_vocab.decode(outputs[i]), kind) for i in range(len(pairs))]
    refs = [detokenize(t, kind) for _, t in pairs]
    compared = None
    if hardware:
        hardware_kinds = (*QUANT_KINDS, *QUANT_WINDOW_KINDS)
        if not any(k in hardware_kinds for k in model.cfg.attentions.values()):
            raise ValueError(
                f"{checkpoint}: --hardware needs a model with quantized attention "
                f"({', '.join(hardware_kinds)}); its kinds are "
                + ", ".join(sorted(set(model.cfg.attentions.values())))
            )
        compared = {}
        for arithmetic in ("exported", "surrogate"):
            set_arithmetic(model, arithmetic)
            try:
                other, other_stats = translate_with_stats(
                    model, batches, beam=beam, alpha=alpha, device=dev
                )
            finally:
                set_arithmetic(model, "hardware")
            other_hyps = [detokenize(tgt_vocab.decode(other[i]), kind) for i in range(len(pairs))]
            compared[arithmetic] = {
                "bleu": bleu(other_hyps, refs)["bleu"],
                "hypotheses_differ": sum(a != b for a, b in zip(hyps, other_hyps, strict=True)),
                "decode_seconds": other_stats["decode_seconds"],
            }
    result = {
        "checkpoint": str(checkpoint),
        "split": split,
        "sentences": len(pairs),
        "beam": beam,
        "alpha": alpha,
        **bleu(hyps, refs),
        "exact_match": sum(h == r for h, r in zip(hyps, refs, strict=True)) / max(len(refs), 1),
        "decode_seconds": seconds,
        "arch": model.cfg.arch,
        "vision_span": stats["vision_span"],
        "vision_span_per_layer": stats["vision_span_per_layer"],
        "sparsity_rate": stats["sparsity_rate"],
        "attention": model.cfg.attentions,
        "binarization": binarization_ratios(model, batches, dev),
        "energy": attention_energy(
            model, [(len(s) + 1, len(t) + 1) for s, t in pairs], level="attention"
        ),
        "examples": [
            {"source": detokenize(pairs[i][0], kind), "reference": refs[i], "output": hyps[i]}
            for i in range(min(3, len(pairs)))
        ],
    }
    if compared is not None:
        result["hardware"] = compared
    return result


def format_evaluation(result: dict) -> str:
    """A few lines of text for the CLI."""
    lines = [
        f"{result['checkpoint']}: {result['split']} ({result['sentences']} sentences), "
        f"beam {result['beam']}, alpha {result['alpha']}",
        f"BLEU {result['bleu']:.2f}  exact match {100 * result['exact_match']:.1f}%  "
        f"({result['signature']})",
        "attention: " + ", ".join(f"{r}={k}" for r, k in result["attention"].items()),
        f"decoding {result['decode_seconds']:.2f} s",
    ]
    names = {
        "exported": "the exported cores or window unit (max_len, masks)",
        "surrogate": "the QAT surrogate",
    }
    for arithmetic, c in (result.get("hardware") or {}).items():
        lines.append(
            f"BLEU with {names[arithmetic]}: {c['bleu']:.2f}, {c['hypotheses_differ']} of "
            f"{result['sentences']} hypotheses differ from the model's"
        )
    if result.get("vision_span") is not None:
        lines.append(f"average vision span: {result['vision_span']:.2f} source positions per step")
    if result.get("sparsity_rate") is not None:
        lines.append(f"L0Drop sparsity rate: {100 * result['sparsity_rate']:.1f}%")
    for role, ratios in result["binarization"].items():
        lines.append(f"non-zero ratio {role}: " + " ".join(f"{r:.3f}" for r in ratios))
    energy = result["energy"]
    if energy["percent_of_vanilla"] is not None:
        pct = energy["percent_of_vanilla"]
        lines.append(
            f"attention energy: {energy['energy_pj']['asic'] / 1e6:.2f} uJ ASIC, "
            f"{energy['energy_pj']['fpga'] / 1e6:.2f} uJ FPGA = {pct['asic']:.2f}% / "
            f"{pct['fpga']:.2f}% of vanilla"
        )
    return "\n".join(lines)
