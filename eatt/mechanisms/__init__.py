"""Attention mechanisms: the score functions, one object each, that every level asks.

A config names its mechanism by ``score_kind`` (CoreConfig: the mechanism of its kind;
WindowConfig: its ``window_score``); :func:`mechanism_of` looks it up. Each mechanism lives in
its own module (the interface in :mod:`eatt.mechanisms.base`) and registers here with one line:

    eatt       E-ATT's adder-only L1 scores of binarized-input projections (l1.py)
    dot        vanilla's dot product, the peer (dot.py)
    dense      the Dense Synthesizer: scores from a two-layer projection of the query (dense.py)
    randinit   the Random Synthesizer: a learned, input-independent score matrix (randinit.py)

The integer helpers every mechanism shares (binarize_int, matmul_int, l1_scores_int) are
re-exported here and by eatt.quant.golden. This package is numpy-only: the config, the float
reference and every stage below may ask it.
"""

from __future__ import annotations

from eatt.mechanisms.base import (  # noqa: F401 - the interface and helpers, re-exported
    FACET_PARAMETERS,
    Mechanism,
    QueryKey,
    Synthesized,
    binarize_int,
    l1_scores_int,
    matmul_int,
    requantize,
    scale_of,
    split_heads,
)
from eatt.mechanisms.dense import DENSE
from eatt.mechanisms.dot import DOT
from eatt.mechanisms.l1 import EATT
from eatt.mechanisms.randinit import RANDINIT

#: every mechanism by its name (a config's score_kind); one line each
MECHANISMS: dict[str, Mechanism] = {m.name: m for m in (EATT, DOT, DENSE, RANDINIT)}

#: the peer every mechanism is compared with in the same run (a flow's second core, the
#: denominator of energy ratios): the dot product
PEER: Mechanism = DOT


def mechanism_of(cfg) -> Mechanism:
    """The mechanism of a config (its ``score_kind``), of a score kind's name or of a core
    config's kind."""
    name = cfg if isinstance(cfg, str) else cfg.score_kind
    if name in MECHANISMS:
        return MECHANISMS[name]
    for mechanism in MECHANISMS.values():  # a core config's kind (vanilla: dot)
        if mechanism.kind == name:
            return mechanism
    known = ", ".join(MECHANISMS)
    raise ValueError(f"kind: no attention mechanism {name!r} (known: {known})")


def core_kinds() -> tuple[str, ...]:
    """The CoreConfig kinds: one per mechanism."""
    return tuple(m.kind for m in MECHANISMS.values())


def synthesized_kinds() -> tuple[str, ...]:
    """The core kinds whose scores are synthesized without keys (Dense, RandInit)."""
    return tuple(m.kind for m in MECHANISMS.values() if isinstance(m, Synthesized))


def folded_kinds() -> tuple[str, ...]:
    """The core kinds the folded engine builds."""
    return tuple(m.kind for m in MECHANISMS.values() if m.folded)


def query_key_scores() -> tuple[str, ...]:
    """The mechanisms that score queries against keys (the window unit's choices)."""
    return tuple(m.name for m in MECHANISMS.values() if isinstance(m, QueryKey))
