"""L0Drop: HardConcrete gates that prune encoder outputs (Zhang, Titov & Sennrich, 2021).

A layer between encoder and decoder multiplies every encoder output x_i by a gate g_i (Eq. 4):

* training: g_i ~ HardConcrete(alpha_i, beta, epsilon) (Eq. 5-8) with ``log alpha_i = x_i w``
  (Eq. 9): a BinaryConcrete sample ``s = sigmoid((log u - log(1 - u) + log alpha) / beta)``,
  stretched to (-epsilon, 1 + epsilon) (Eq. 7) and clipped to [0, 1] (Eq. 8);
* penalty: the expected L0 norm ``sum_i 1 - p(g_i = 0)`` (Eq. 10) with the closed form
  ``p(g_i = 0) = sigmoid(beta log(epsilon / (1 + epsilon)) - log alpha_i)``, weighted by lambda
  in the objective (Eq. 12) -- the caller applies lambda;
* test time: deterministic gates ``min(1, max(0, sigmoid(log alpha)(1 + 2 epsilon) - epsilon))``
  (Eq. 13), often exactly 0 or 1.

:func:`compact` is step 1 of Algorithm 1 (drop the closed gates, scale the kept rows by their
gates, one zero row standing for the N - N' pruned ones, with counts); :func:`counted_softmax` is
its step 2 (softmax with counts: ``c exp(e) / sum c exp(e)``, computed as a softmax over
``e + log c``). Attention over the compacted memory equals attention over the full gated memory
for any score that depends only on the key row (dot, general, concat, E-ATT/L1): all pruned rows
are the same zero row, so they get the same score and are merged exactly.

:func:`rule_gates` gives the rule-based patterns of Sec. 7 (Freq, Inv Freq, Group) and
:func:`sparsity_rate` the paper's metric: #(g_i = 0) over the number of source words
(:func:`source_words`: padding and the final ``<eos>`` are not counted).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .data import EOS

__all__ = [
    "RULES",
    "L0Drop",
    "compact",
    "counted_softmax",
    "deterministic_gates",
    "hard_concrete_sample",
    "prob_zero",
    "rule_gates",
    "source_words",
    "sparsity_rate",
    "vocab_token_rank",
]

#: rule-based patterns of Sec. 7 (the POS pattern needs a tagger and is left out)
RULES = ("freq", "inv-freq", "group")
#: how far uniform noise stays from 0 and 1, so that log u and log(1 - u) are finite
_U_EPS = 1e-6


# -- the HardConcrete distribution ---------------------------------------------------------------
def _check_shape_params(beta: float, epsilon: float) -> None:
    if not beta > 0:
        raise ValueError(f"beta (temperature) must be > 0, got {beta}")
    if not epsilon > 0:
        raise ValueError(f"epsilon (stretch) must be > 0, got {epsilon}")


def hard_concrete_sample(
    log_alpha: Tensor, beta: float, epsilon: float, generator: torch.Generator | None = None
) -> Tensor:
    """Gates g ~ HardConcrete(alpha, beta, epsilon) (Eq. 6-8), reparameterized (differentiable
    in ``log_alpha``)."""
    _check_shape_params(beta, epsilon)
    u = torch.rand(log_alpha.shape, generator=generator, device=log_alpha.device)
    u = u.to(log_alpha.dtype).clamp(_U_EPS, 1.0 - _U_EPS)
    s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + log_alpha) / beta)  # Eq. 6
    s_bar = s * (1.0 + 2.0 * epsilon) - epsilon  # Eq. 7
    return s_bar.clamp(0.0, 1.0)  # Eq. 8


def prob_zero(log_alpha: Tensor, beta: float, epsilon: float) -> Tensor:
    """p(g = 0 | alpha, beta, epsilon) = sigmoid(beta log(epsilon / (1 + epsilon)) - log alpha)."""
    _check_shape_params(beta, epsilon)
    return torch.sigmoid(beta * math.log(epsilon / (1.0 + epsilon)) - log_alpha)


def deterministic_gates(log_alpha: Tensor, epsilon: float) -> Tensor:
    """Test-time gates (Eq. 13): min(1, max(0, sigmoid(log alpha)(1 + 2 epsilon) - epsilon))."""
    return (torch.sigmoid(log_alpha) * (1.0 + 2.0 * epsilon) - epsilon).clamp(0.0, 1.0)


# -- the layer -----------------------------------------------------------------------------------
class L0Drop(nn.Module):
    """Gates between encoder and decoder: ``forward(memory, padding) -> (gated, gates, penalty)``.

    ``gates`` are sampled (Eq. 5-8) in training mode and deterministic (Eq. 13) in eval mode;
    padding positions always get gate 0. ``penalty`` is the expected L0 norm (Eq. 10) summed over
    the non-pad positions of the batch and divided by their number (so lambda does not depend on
    the batch size); it is computed in both modes, with gradient to ``w`` and to the memory.

    ``fixed = True`` (the trainer's ``l0drop_fix`` phase): training mode uses the test-time
    gates too, detached (no gradient to ``w`` or through the gates), and the penalty is 0.
    """

    def __init__(self, dim: int, beta: float = 2.0 / 3.0, epsilon: float = 0.1) -> None:
        super().__init__()
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        _check_shape_params(beta, epsilon)
        self.dim, self.beta, self.epsilon = dim, float(beta), float(epsilon)
        # Eq. 9 has no bias. The authors' code (bzhangGo/zero) initialises w as its other
        # linear maps: uniform unit scaling, Glorot uniform over fan_in dim and fan_out 1
        # (std sqrt(2 / (dim + 1))), so log alpha starts spread around 0, not pinned at it.
        self.w = nn.Parameter(torch.empty(dim))
        bound = math.sqrt(6.0 / (dim + 1))
        nn.init.uniform_(self.w, -bound, bound)
        self.fixed = False

    def log_alpha(self, memory: Tensor) -> Tensor:
        """log alpha_i = x_i w (Eq. 9), (B, S)."""
        if memory.shape[-1] != self.dim:
            raise ValueError(f"memory has {memory.shape[-1]} features, L0Drop expects {self.dim}")
        return memory @ self.w

    def forward(self, memory: Tensor, padding: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        if memory.dim() != 3 or padding.shape != memory.shape[:2]:
            raise ValueError(
                f"expected memory (B, S, D) and padding (B, S), got {tuple(memory.shape)} and "
                f"{tuple(padding.shape)}"
            )
        log_alpha = self.log_alpha(memory)
        if self.fixed:
            gates = deterministic_gates(log_alpha.detach(), self.epsilon).masked_fill(padding, 0)
            return memory * gates.unsqueeze(-1), gates, memory.new_zeros(())
        if self.training:
            gates = hard_concrete_sample(log_alpha, self.beta, self.epsilon)
        else:
            gates = deterministic_gates(log_alpha, self.epsilon)
        gates = gates.masked_fill(padding, 0.0)
        real = ~padding
        open_prob = (1.0 - prob_zero(log_alpha, self.beta, self.epsilon)).masked_fill(padding, 0)
        penalty = open_prob.sum() / real.sum().clamp(min=1)
        return memory * gates.unsqueeze(-1), gates, penalty


# -- Algorithm 1 ---------------------------------------------------------------------------------
def compact(memory: Tensor, gates: Tensor, padding: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Step 1 of Algorithm 1: (memory', counts, padding'), each (B, N'max + 1, ...).

    The window unit's layout (eatt.quant.window.compact_memory, docs/window.md): rows 0..N'-1
    of every sentence are the kept rows (g_i != 0, not padding) in source order, multiplied by
    their gates (count 1); row N' is the zero encoding standing for its N - N' pruned positions
    (count N - N'; padding, count 0, when nothing was pruned); the rest is padding (count 0), so
    padding is a suffix and the valid length is N' + 1 (N' when nothing was pruned). ``memory``
    is the ungated encoder output (rows with gate 1 may be passed already gated).
    """
    if memory.dim() != 3 or gates.shape != memory.shape[:2] or padding.shape != gates.shape:
        raise ValueError(
            f"expected memory (B, S, D), gates and padding (B, S), got {tuple(memory.shape)}, "
            f"{tuple(gates.shape)} and {tuple(padding.shape)}"
        )
    batch, _, dim = memory.shape
    kept = gates.ne(0) & ~padding
    n_kept = kept.sum(1)
    n_pruned = (~padding).sum(1) - n_kept
    width = int(n_kept.max()) + 1 if batch else 1
    rows, cols = kept.nonzero(as_tuple=True)
    dest = (kept.cumsum(1) - 1)[rows, cols]  # the kept rows first, in source order
    out = memory.new_zeros(batch, width, dim)
    out[rows, dest] = memory[rows, cols] * gates[rows, cols].unsqueeze(-1).to(memory.dtype)
    slots = torch.arange(width, device=memory.device)
    counts = (slots[None, :] < n_kept[:, None]).long()
    counts[torch.arange(batch, device=memory.device), n_kept] = n_pruned  # the zero row
    return out, counts, counts.eq(0)


def counted_softmax(scores: Tensor, counts: Tensor, padding: Tensor | None = None) -> Tensor:
    """Step 2 of Algorithm 1 (line 7): ``a_i = c_i exp(e_i) / sum_j c_j exp(e_j)``.

    ``scores`` (..., S) with ``counts`` (and ``padding``, True = pad) broadcastable to it.
    Computed as softmax(e + log c): positions with count 0 or padding get weight 0; a row with
    no position left gets all-zero weights (not NaN).
    """
    logits = scores + torch.log(counts.to(scores.dtype))  # log 0 = -inf: excluded
    if padding is not None:
        logits = logits.masked_fill(padding, float("-inf"))
    empty = torch.isneginf(logits).all(dim=-1, keepdim=True)
    weights = torch.softmax(logits.masked_fill(empty, 0.0), dim=-1)
    return weights.masked_fill(empty, 0.0)


# -- rule-based patterns (Sec. 7) ---------------------------------------------------------------
def vocab_token_rank(vocab_size: int, specials: int = 4) -> Tensor:
    """Frequency rank of each id of a :class:`~eatt.model.data.Vocab` (built most frequent
    first, after ``specials`` special ids): id - specials, and -1 (never dropped) for specials."""
    ids = torch.arange(vocab_size)
    return torch.where(ids >= specials, ids - specials, torch.full_like(ids, -1))


def _rank_cutoff(shares: Tensor, rate: float) -> int:
    """Number k of leading entries of ``shares`` (token shares sorted by the order of dropping)
    whose cumulative share is the closest to ``rate`` (the paper: top 100 words = 46.3%)."""
    cumulative = torch.cat([shares.new_zeros(1), shares.cumsum(0)])
    return int((cumulative - rate).abs().argmin())


def rule_gates(
    src_ids: Tensor,
    padding: Tensor,
    rule: str,
    rate: float,
    token_rank: Tensor,
    token_counts: Tensor | None = None,
) -> Tensor:
    """Gates (B, S) in {0, 1} of a rule-based pattern (Sec. 7); padding gets 0.

    * ``"freq"``: drop the most frequent source words: ids with rank < k, k chosen so that the
      dropped words cover the share of source tokens closest to ``rate``;
    * ``"inv-freq"``: drop the rarest words, the same way from the other end of the ranking;
    * ``"group"``: keep only the odd positions 1, 3, 5, ... (1-based), ``rate`` unused (~50%).

    ``token_rank`` (V,) long: frequency rank of each vocabulary id (0 = most frequent; negative
    = never dropped, e.g. special tokens; see :func:`vocab_token_rank`). ``token_counts`` (V,):
    the training frequency of each id; when None, the shares are counted in ``src_ids`` itself.
    """
    if rule not in RULES:
        raise ValueError(f"unknown L0Drop rule {rule!r}; choose from {', '.join(RULES)}")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rule rate must be in [0, 1], got {rate}")
    if src_ids.shape != padding.shape:
        raise ValueError(
            f"src_ids {tuple(src_ids.shape)} and padding {tuple(padding.shape)} differ"
        )
    real = ~padding
    if rule == "group":
        positions = torch.arange(src_ids.shape[1], device=src_ids.device)
        keep = (positions % 2 == 0).expand_as(src_ids)  # 0-based even = 1-based odd
        return (keep & real).float()
    token_rank = token_rank.to(src_ids.device)
    if src_ids.numel() and int(src_ids.max()) >= token_rank.numel():
        raise ValueError(f"src_ids hold ids beyond token_rank's {token_rank.numel()} entries")
    rankable = token_rank >= 0
    n_ranked = int(rankable.sum())
    order = torch.arange(n_ranked, device=token_rank.device)
    if not torch.equal(token_rank[rankable].sort().values, order):
        raise ValueError("token_rank must number the ranked ids 0, 1, 2, ... without gaps")
    ranks = token_rank[src_ids]
    if token_counts is None:
        counted = src_ids[real & (ranks >= 0)]
        per_id = torch.bincount(counted, minlength=token_rank.numel()).double()
    else:
        if token_counts.shape != token_rank.shape:
            raise ValueError("token_counts and token_rank must both have one entry per id")
        per_id = token_counts.to(src_ids.device).double()
    # shares by rank: share_by_rank[r] = share of the id with rank r
    share_by_rank = torch.zeros(n_ranked, dtype=torch.float64, device=src_ids.device)
    share_by_rank[token_rank[rankable]] = per_id[rankable]
    total = share_by_rank.sum()
    if total > 0:
        share_by_rank = share_by_rank / total
    if rule == "freq":
        k = _rank_cutoff(share_by_rank, rate)
        drop = (ranks >= 0) & (ranks < k)
    else:
        k = _rank_cutoff(share_by_rank.flip(0), rate)
        drop = (ranks >= 0) & (ranks >= n_ranked - k)
    return (real & ~drop).float()


def source_words(src: Tensor, padding: Tensor) -> Tensor:
    """The positions the sparsity rate counts (B, S): source words, neither padding nor the
    ``<eos>`` every sentence ends with (the paper's rate is over source words)."""
    return ~padding & src.ne(EOS)


def sparsity_rate(gates: Tensor, padding: Tensor, src: Tensor | None = None) -> float:
    """#(g_i = 0) over the number of source words (with ``src``: ``<eos>`` not counted; else
    every non-pad position); 0.0 for an empty batch."""
    real = ~padding if src is None else source_words(src, padding)
    n = int(real.sum())
    return float((gates.eq(0) & real).sum()) / n if n else 0.0
