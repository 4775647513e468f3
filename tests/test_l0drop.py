"""L0Drop (Zhang, Titov & Sennrich 2021): HardConcrete gates, penalty, Algorithm 1, rules."""

from __future__ import annotations

import math

import pytest
import torch

from eatt.model import functional as F
from eatt.model.data import EOS
from eatt.model.l0drop import (
    L0Drop,
    compact,
    counted_softmax,
    deterministic_gates,
    hard_concrete_sample,
    prob_zero,
    rule_gates,
    sparsity_rate,
    vocab_token_rank,
)
from eatt.model.seq2seq import ModelConfig
from eatt.model.train import l0drop_lambda

BETA, EPS = 2.0 / 3.0, 0.1


def _prob_one(log_alpha: torch.Tensor, beta: float, eps: float) -> torch.Tensor:
    # g = 1 iff s > (1 + eps) / (1 + 2 eps), whose logit is log((1 + eps) / eps)
    return torch.sigmoid(log_alpha - beta * math.log((1 + eps) / eps))


@pytest.mark.parametrize("beta,eps", [(BETA, EPS), (0.5, 0.2)])
def test_hard_concrete_point_masses_match_closed_form(beta, eps):
    n = 200_000
    gen = torch.Generator().manual_seed(0)
    for value in (-2.0, 0.0, 0.7, 2.5):
        log_alpha = torch.full((n,), value, dtype=torch.float64)
        g = hard_concrete_sample(log_alpha, beta, eps, generator=gen)
        assert float(g.min()) >= 0.0 and float(g.max()) <= 1.0
        for observed, expected in (
            (g.eq(0).double().mean(), prob_zero(log_alpha[:1], beta, eps)[0]),
            (g.eq(1).double().mean(), _prob_one(log_alpha[:1], beta, eps)[0]),
        ):
            p = float(expected)
            # 5 standard errors of a binomial proportion over n samples
            tol = 5.0 * math.sqrt(p * (1 - p) / n)
            assert abs(float(observed) - p) < tol, (value, float(observed), p, tol)


def test_prob_zero_closed_form_value():
    # sigmoid(beta log(eps / (1 + eps)) - log alpha) at log alpha = 0, paper's beta and epsilon
    expected = 1.0 / (1.0 + math.exp(-(BETA * math.log(EPS / (1 + EPS)))))
    assert float(prob_zero(torch.zeros(1), BETA, EPS)) == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="beta"):
        prob_zero(torch.zeros(1), 0.0, EPS)


def test_deterministic_gates_eq13_and_eval_mode():
    torch.manual_seed(0)
    layer = L0Drop(6).eval()
    with torch.no_grad():
        layer.w.copy_(torch.tensor([3.0, -3.0, 0.5, 0.0, 1.0, -1.0]))
    memory = torch.randn(2, 5, 6)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    gated, gates, _ = layer(memory, padding)
    gated2, gates2, _ = layer(memory, padding)
    assert torch.equal(gates, gates2) and torch.equal(gated, gated2)
    log_alpha = memory @ layer.w
    by_hand = torch.clamp(torch.sigmoid(log_alpha) * (1 + 2 * EPS) - EPS, 0, 1)
    torch.testing.assert_close(gates, by_hand.masked_fill(padding, 0))
    assert bool(gates[padding].eq(0).all())
    torch.testing.assert_close(gated, memory * gates[..., None])
    # saturated log alpha gives exact 0 / 1 gates
    big = deterministic_gates(torch.tensor([-10.0, 10.0, 0.0]), EPS)
    assert big[0] == 0 and big[1] == 1 and 0 < big[2] < 1


def test_training_gates_are_sampled_and_padding_closed():
    torch.manual_seed(1)
    layer = L0Drop(4).train()
    memory = torch.randn(3, 7, 4)
    padding = torch.zeros(3, 7, dtype=torch.bool)
    padding[1, 5:] = True
    _, g1, _ = layer(memory, padding)
    _, g2, _ = layer(memory, padding)
    assert not torch.equal(g1, g2)
    assert bool(g1[padding].eq(0).all()) and bool(((g1 >= 0) & (g1 <= 1)).all())


def test_gate_weights_start_as_the_references():
    # Glorot uniform over (dim, 1), bzhangGo/zero's initialiser: bound sqrt(6 / (dim + 1))
    torch.manual_seed(0)
    w = L0Drop(256).w.detach()
    bound = (6 / 257) ** 0.5
    assert float(w.abs().max()) <= bound and float(w.abs().max()) > 0.9 * bound
    assert abs(float(w.std()) - (2 / 257) ** 0.5) < 0.15 * (2 / 257) ** 0.5


def test_fixed_gates_are_the_test_time_gates_detached():
    """L0Drop.fixed (the trainer's l0drop_fix phase): in train mode the gates are Eq. 13's,
    no gradient reaches w, and the penalty is 0."""
    torch.manual_seed(3)
    layer = L0Drop(6).train()
    layer.fixed = True
    memory = torch.randn(2, 5, 6, requires_grad=True)
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[1, 3:] = True
    gated, gates, penalty = layer(memory, padding)
    expected = deterministic_gates(layer.log_alpha(memory), layer.epsilon).masked_fill(padding, 0)
    assert torch.equal(gates, expected.detach()) and float(penalty) == 0.0
    (gated.sum() + penalty).backward()
    assert layer.w.grad is None and memory.grad is not None


def test_lambda_ramp():
    cfg = ModelConfig(l0drop=True, l0drop_lambda=0.4, l0drop_ramp=100)
    assert [l0drop_lambda(cfg, s) for s in (1, 50, 100, 500)] == pytest.approx(
        [0.004, 0.2, 0.4, 0.4]
    )
    assert l0drop_lambda(cfg) == 0.4
    assert l0drop_lambda(cfg.replace(l0drop_ramp=0), 1) == 0.4


def test_penalty_is_mean_expected_l0_and_gradient_flows_to_w():
    torch.manual_seed(2)
    layer = L0Drop(5)
    memory = torch.randn(2, 6, 5, dtype=torch.float64)
    layer = layer.double()
    padding = torch.zeros(2, 6, dtype=torch.bool)
    padding[0, 4:] = True
    _, _, penalty = layer(memory, padding)
    log_alpha = memory @ layer.w.detach()
    open_prob = 1 - prob_zero(log_alpha, BETA, EPS)
    expected = open_prob[~padding].sum() / (~padding).sum()
    torch.testing.assert_close(penalty.detach(), expected)
    penalty.backward()
    # d/dw of mean sigmoid(log alpha - c) = mean sigmoid'(.) x_i over non-pad positions
    deriv = (open_prob * (1 - open_prob))[..., None] * memory
    torch.testing.assert_close(layer.w.grad, deriv[~padding].sum(0) / (~padding).sum())
    assert float(layer.w.grad.abs().sum()) > 0
    # lowering log alpha everywhere lowers the penalty: the direction training pushes
    with torch.no_grad():
        layer.w.sub_(layer.w.grad * 10)
    _, _, lower = layer(memory, padding)
    assert float(lower.detach()) < float(penalty.detach())


def _gated_case(seed: int = 3):
    gen = torch.Generator().manual_seed(seed)
    memory = torch.randn(3, 9, 8, generator=gen, dtype=torch.float64)
    gates = torch.rand(3, 9, generator=gen, dtype=torch.float64)
    gates[gates < 0.45] = 0.0  # closed gates
    gates[gates > 0.8] = 1.0
    gates[2] = 1.0  # a sentence with nothing pruned: the zero row must count 0
    padding = torch.zeros(3, 9, dtype=torch.bool)
    padding[0, 6:] = True
    padding[2, 8:] = True
    gates = gates.masked_fill(padding, 0.0)
    return memory, gates, padding


def test_compact_layout():
    memory, gates, padding = _gated_case()
    mem_c, counts, pad_c = compact(memory, gates, padding)
    kept = gates.ne(0) & ~padding
    assert mem_c.shape == (3, int(kept.sum(1).max()) + 1, 8)
    assert counts.dtype == torch.long
    assert torch.equal(counts.sum(1), (~padding).sum(1))
    assert torch.equal(pad_c, counts.eq(0))
    # the window unit's layout: kept rows, then the zero row, then padding (a suffix)
    for b in range(3):
        rows = memory[b][kept[b]] * gates[b][kept[b]][:, None]
        n = len(rows)
        torch.testing.assert_close(mem_c[b, :n], rows)
        assert bool(mem_c[b, n:].eq(0).all()) and bool(counts[b, :n].eq(1).all())
        assert int(counts[b, n]) == int((~padding[b]).sum()) - n
        valid = int((~pad_c[b]).sum())
        assert not bool(pad_c[b, :valid].any()) and bool(pad_c[b, valid:].all())
    n2 = int(kept[2].sum())
    assert int(counts[2, n2]) == 0 and bool(pad_c[2, n2])  # nothing pruned: no zero row


def _attend_full(scores, v, padding):
    weights = torch.softmax(scores.masked_fill(padding[:, None, :], float("-inf")), dim=-1)
    return weights @ v


@pytest.mark.parametrize("score", ["dot", "eatt"])
def test_algorithm1_equals_attention_over_full_gated_memory(score):
    memory, gates, padding = _gated_case()
    gen = torch.Generator().manual_seed(4)
    dim = memory.shape[-1]
    w_q, w_k, w_v = (torch.randn(dim, dim, generator=gen, dtype=torch.float64) for _ in range(3))
    b_k, b_v = (torch.randn(dim, generator=gen, dtype=torch.float64) for _ in range(2))
    queries = torch.randn(3, 4, dim, generator=gen, dtype=torch.float64)

    def scores_of(keys_in):
        if score == "dot":
            return (queries @ w_q) @ (keys_in @ w_k + b_k).transpose(1, 2) / math.sqrt(dim)
        # E-ATT: binarized query and key inputs select rows of W (Eq. 4), L1 scores (Eq. 10)
        q = F.binarize(queries, 0.5) @ w_q
        k = F.binarize(keys_in, 0.5) @ w_k + b_k
        return F.l1_scores(q, k, impl="torch") / math.sqrt(dim)

    full = memory * gates[..., None]
    reference = _attend_full(scores_of(full), full @ w_v + b_v, padding)
    mem_c, counts, pad_c = compact(memory, gates, padding)
    weights = counted_softmax(scores_of(mem_c), counts[:, None, :], pad_c[:, None, :])
    torch.testing.assert_close(weights @ (mem_c @ w_v + b_v), reference)
    # the weights over the compacted rows sum to one; the zero row carries the pruned ones' mass
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, dtype=torch.float64))


def test_counted_softmax_is_softmax_with_repeated_rows():
    scores = torch.tensor([[0.3, -1.0, 2.0, 0.0]])
    counts = torch.tensor([[3, 1, 0, 2]])
    weights = counted_softmax(scores, counts)
    expanded = torch.tensor([[0.3, 0.3, 0.3, -1.0, 0.0, 0.0]])
    dense = torch.softmax(expanded, -1)
    torch.testing.assert_close(
        weights,
        torch.stack([dense[0, :3].sum(), dense[0, 3], torch.tensor(0.0), dense[0, 4:].sum()])[None],
    )
    empty = counted_softmax(scores, torch.zeros(1, 4, dtype=torch.long))
    assert bool(empty.eq(0).all())


def test_rule_patterns_drop_what_they_say():
    specials, words = 4, 6
    token_rank = vocab_token_rank(specials + words)
    assert token_rank[:specials].tolist() == [-1] * specials
    assert token_rank[specials:].tolist() == list(range(words))
    # training counts: ranks 0 and 1 (ids 4, 5) cover 50% of the tokens, the 2 rarest 10%
    token_counts = torch.tensor([0, 0, 0, 0, 30, 20, 20, 20, 6, 4])
    src = torch.tensor([[4, 6, 5, 9, 8, 2, 0], [7, 4, 4, 9, 2, 0, 0]])
    padding = src.eq(0)
    freq = rule_gates(src, padding, "freq", 0.5, token_rank, token_counts)
    assert freq.tolist() == [[0, 1, 0, 1, 1, 1, 0], [1, 0, 0, 1, 1, 0, 0]]
    inv = rule_gates(src, padding, "inv-freq", 0.1, token_rank, token_counts)
    assert inv.tolist() == [[1, 1, 1, 0, 0, 1, 0], [1, 1, 1, 0, 1, 0, 0]]
    group = rule_gates(src, padding, "group", 0.5, token_rank)
    assert group.tolist() == [[1, 0, 1, 0, 1, 0, 0], [1, 0, 1, 0, 1, 0, 0]]
    # without training counts the shares come from the batch: id 4 is 3 of 10 word tokens,
    # ids 4 + 5 are 4 of 10, ids 4 + 5 + 6 are 5 of 10
    batch_freq = rule_gates(src, padding, "freq", 0.42, token_rank)
    assert batch_freq.tolist() == [[0, 1, 0, 1, 1, 1, 0], [1, 0, 0, 1, 1, 0, 0]]
    # <eos> (a special) is never dropped; padding is always 0
    for gates in (freq, inv, group, batch_freq):
        assert bool(gates[padding].eq(0).all())
    with pytest.raises(ValueError, match="unknown L0Drop rule"):
        rule_gates(src, padding, "pos", 0.5, token_rank)
    with pytest.raises(ValueError, match="rate"):
        rule_gates(src, padding, "freq", 1.5, token_rank)


def test_sparsity_rate():
    gates = torch.tensor([[0.0, 1.0, 0.3, 0.0], [0.0, 0.0, 1.0, 0.0]])
    padding = torch.tensor([[False, False, False, False], [False, False, False, True]])
    # pruned: 2 of 4 in row 0, 2 of 3 in row 1 (the pad's 0 does not count)
    assert sparsity_rate(gates, padding) == pytest.approx(4 / 7)
    assert sparsity_rate(gates, torch.ones_like(padding)) == 0.0
    # with the source ids, <eos> is not a source word: 1 of 3 in row 0, 2 of 2 in row 1
    src = torch.tensor([[5, 6, 7, EOS], [5, 6, EOS, 0]])
    assert sparsity_rate(gates, padding, src) == pytest.approx(3 / 5)
