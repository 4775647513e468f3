"""The vectors every check runs and how it reports a difference: random and edge inputs of a
core (the edge vectors: the extremes, tau and tau + 1 LSB), its mask inputs (every length and
offset in turn, then at random; the extremes for the edge vectors), and the one-line report of
the first mismatch every level prints the same way. Re-exported by eatt.quant.golden."""

from __future__ import annotations

import numpy as np

from eatt.config import CoreConfig


def random_inputs(cfg: CoreConfig, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n random input pairs (X: (n, len_q, dim), Y: (n, len_k, dim)) over the full input range.

    Half of the vectors are drawn near tau so that E-ATT's binarization sees both outcomes often,
    including inputs exactly equal to tau (which must binarize to 0: Eq. 4 is strict).
    """
    rng = np.random.default_rng(seed)
    lo, hi = -(2 ** (cfg.in_bits - 1)), 2 ** (cfg.in_bits - 1) - 1

    def draw(length: int) -> np.ndarray:
        full = rng.integers(lo, hi + 1, size=(n, length, cfg.dim), dtype=np.int64)
        near = np.clip(cfg.tau_int + rng.integers(-3, 4, size=full.shape), lo, hi)
        pick = (np.arange(n) % 2 == 1)[:, None, None]
        return np.where(pick, near, full)

    return draw(cfg.len_q), draw(cfg.len_k)


def edge_inputs(cfg: CoreConfig) -> tuple[np.ndarray, np.ndarray]:
    """Edge vectors: all zeros, all most-negative, all most-positive, all equal to tau, tau+1
    LSB, and alternating extremes, for X and Y in every combination."""
    lo, hi = -(2 ** (cfg.in_bits - 1)), 2 ** (cfg.in_bits - 1) - 1
    levels = [0, lo, hi, min(max(cfg.tau_int, lo), hi), min(max(cfg.tau_int + 1, lo), hi)]
    patterns = [np.full(cfg.dim, v, dtype=np.int64) for v in levels]
    patterns.append(np.where(np.arange(cfg.dim) % 2 == 0, lo, hi).astype(np.int64))
    xs, ys = [], []
    for px in patterns:
        for py in patterns:
            xs.append(np.tile(px, (cfg.len_q, 1)))
            ys.append(np.tile(py, (cfg.len_k, 1)))
    return np.stack(xs), np.stack(ys)


def random_masks(cfg: CoreConfig, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Mask inputs for n vectors (only those cfg takes). Every valid length 1..len_k and every
    offset 0..len_k - 1 comes up in turn (the first vectors cover them all), the rest at
    random; offset 0 (query 0 sees key 0 only) and length 1 (every query sees one key) are
    among them."""
    rng = np.random.default_rng(seed + 0x6D61736B)
    masks = {}
    if cfg.key_padding:
        cycle = 1 + np.arange(n) % cfg.len_k
        masks["length"] = np.where(
            np.arange(n) < 2 * cfg.len_k, cycle, rng.integers(1, cfg.len_k + 1, n)
        )
    if cfg.causal:
        # the offset cycles at another pace, so lengths and offsets meet in many pairs
        cycle = (np.arange(n) // 2) % cfg.len_k
        masks["offset"] = np.where(
            np.arange(n) < 2 * cfg.len_k, cycle, rng.integers(0, cfg.len_k, n)
        )
    return {k: v.astype(np.int64) for k, v in masks.items()}


def edge_masks(cfg: CoreConfig, n: int) -> dict[str, np.ndarray]:
    """Mask inputs for n edge vectors: the extremes in turn (length len_k, 1; offset 0,
    len_k - 1), so each edge pattern meets a full and a one-key row."""
    masks = {}
    if cfg.key_padding:
        masks["length"] = np.where(np.arange(n) % 2 == 0, cfg.len_k, 1)
    if cfg.causal:
        masks["offset"] = np.where(np.arange(n) % 4 < 2, 0, cfg.len_k - 1)
    return {k: v.astype(np.int64) for k, v in masks.items()}


def vector_masks(cfg: CoreConfig, vectors: int, seed: int, n_edge: int) -> dict[str, np.ndarray]:
    """The mask inputs of a check's vectors: ``vectors`` random ones (random_masks) then
    ``n_edge`` edge ones (edge_masks), as random_inputs and edge_inputs order the data."""
    rand, edge = random_masks(cfg, vectors, seed), edge_masks(cfg, n_edge)
    return {name: np.concatenate([rand[name], edge[name]]) for name in rand}


def vector_report(
    expected: np.ndarray, got: np.ndarray, vectors: int, seed: int, captured: bool = False
) -> dict:
    """Compare per vector: ``vectors`` random ones (from ``seed``; ``captured``: a capture
    file's, in its order) first, then edge vectors.

    {"vectors", "edge_vectors", "mismatches" (vectors with any differing element),
    "first_mismatch" (one line naming the vector, output index, expected and got, or None)}:
    the report of every check against the golden model (qonnx, hls4ml C simulation).
    """
    expected, got = np.asarray(expected), np.asarray(got)
    n = len(expected)
    bad = np.flatnonzero((expected != got).reshape(n, -1).any(axis=1))
    first = None
    if len(bad):
        i = int(bad[0])
        first_kind = f"captured vector {i}" if captured else f"random vector {i} (seed {seed})"
        where = first_kind if i < vectors else f"edge vector {i - vectors}"
        idx = tuple(int(v) for v in np.argwhere(expected[i] != got[i])[0])
        first = (
            f"{len(bad)} of {n} vectors differ; first: {where}, output index {idx}: "
            f"expected {int(expected[i][idx])}, got {int(got[i][idx])}"
        )
    return {
        "vectors": int(vectors),
        "edge_vectors": int(n - vectors),
        "mismatches": int(len(bad)),
        "first_mismatch": first,
        **({"captured": True} if captured else {}),
    }


def first_mismatch(expected: np.ndarray, got: np.ndarray) -> str | None:
    """None when equal, else one line naming the first differing vector, index and values."""
    expected, got = np.asarray(expected), np.asarray(got)
    if expected.shape != got.shape:
        return f"shape mismatch: expected {expected.shape}, got {got.shape}"
    diff = np.argwhere(expected != got)
    if not len(diff):
        return None
    first = tuple(int(i) for i in diff[0])
    return (
        f"{len(diff)} mismatching elements; first at vector {first[0]}, index {first[1:]}: "
        f"expected {expected[first]}, got {got[first]}"
    )
