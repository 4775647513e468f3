"""The folded hls4ml layer: which folding a project gets, and the cycles its loops take.

An AttentionCore layer with ``lanes`` > 0 is written as the folded core of
templates/nnet_folded_attention.h (docs/hls.md, "Folded"): the same function as the unrolled
layer, computed by a datapath of lanes x simd (and, for E-ATT's V and O, simd x pe) operators
over many cycles. The folding comes from the project's ``reuse_factor`` (hls4ml's word) through
the folded engine's rule, eatt.rtl_sim.folded.folding_for_reuse, so the RTL and the HLS layer of
one config fold alike; or it is given (``lanes``, ``simd``, ``pe``).

``hls_iterations`` is the number of pipelined-loop iterations (II = 1, so cycles, without the
pipelines' fill) of one call ("total"); the C simulation counts them (eatt_folded_iterations
in the header) and the project's metadata.json carries both. The layer is a DATAFLOW region of
processes (the loads, the projections before attention, attention, the output projection,
the output), so consecutive calls overlap: "ii" is the slowest process's iterations, the
interval the reuse_factor bounds, as the RTL engine's II.

Each folded mechanism has a form (``FoldedForm``, by its ``hls_score``: the name of its C++
form ``nnet::folded_<hls_score>``, as rtl_sim's FRONTS are by ``rtl_front``): the walks before
attention, the score phase's chunks, the layout of its alignment weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eatt.config import CoreConfig
from eatt.mechanisms import folded_kinds, mechanism_of
from eatt.rtl_sim.folded import check_folding, default_folding, folding_for_reuse, weight_tiles

#: the headers of the folded layer (registered with the others, eatt.hls.register): the layer
#: and the query-key forms, its projection walks, its io_stream top, the Synthesizer's forms
FOLDED_HEADERS = (
    "nnet_utils/nnet_folded_attention.h",
    "nnet_utils/nnet_folded_walks.h",
    "nnet_utils/nnet_folded_stream.h",
    "nnet_utils/nnet_folded_synth.h",
)


@dataclass(frozen=True)
class FoldedForm:
    """How the folded layer lays out one mechanism's weights (templates: the struct
    ``nnet::folded_<hls_score>``, whose constants say the same to the C++). The walk's passes
    and the score phase's chunks are the mechanism's (Mechanism.folded_passes,
    folded_score_chunks), as the RTL engine's."""

    #: the layout of the slots wq and wk: "tiles" S x S (the walks'), "lanes" S x P (a score
    #: cycle's W_2), "rows" row-major, P entries a word (R), "one" the one-entry placeholder
    slots: tuple[str, str]

    def words(self, slot: int, simd: int, lanes: int) -> int:
        """The entries of one word of slot 0 (wq) or 1 (wk): one ROM read a cycle."""
        return {"tiles": simd * simd, "lanes": simd * lanes, "rows": lanes, "one": 1}[
            self.slots[slot]
        ]

    def layout(self, slot: int, w, dim: int, simd: int, lanes: int) -> np.ndarray:
        """The weights of slot 0 (wq) or 1 (wk) in the order the folded layer reads them (the
        tiled ones have dim input rows: W_Q, W_K, W_1 and W_2)."""
        order = self.slots[slot]
        if order in ("tiles", "lanes"):
            rows = np.asarray(w).reshape(dim, -1)
            return weight_tiles(rows, simd, simd if order == "tiles" else lanes).ravel()
        return np.asarray(w).ravel()


#: the folded forms by hls_score: the query-key mechanisms, the Synthesizer's Dense and RandInit
FOLDED_FORMS = {
    "l1": FoldedForm(slots=("tiles", "tiles")),
    "dot": FoldedForm(slots=("tiles", "tiles")),
    "dense": FoldedForm(slots=("tiles", "lanes")),
    "randinit": FoldedForm(slots=("rows", "one")),
}


def folded_form(cfg) -> FoldedForm:
    """The folded form of a config's (or a kind's) mechanism."""
    return FOLDED_FORMS[mechanism_of(cfg).hls_score]


#: the formula of hls_iterations, as metadata.json writes it
ITERATION_FORMULA = {
    "symbols": (
        "DC = dim/simd, HC = d_head/simd, KB = len_k/lanes, M = simd/pe, SC = score chunks "
        "per key block (eatt, vanilla: HC; dense: DC; randinit: 1)"
    ),
    "load": "(len_q + len_k) * DC",
    "projections": (
        "vanilla: (2*len_k + 2*len_q) * DC^2; dense: (len_k + 2*len_q) * DC^2 (V and the "
        "hidden layer, then O); randinit: (len_k + len_q) * DC^2 (V, then O); eatt: (M * len_k "
        "+ max(0, len_q - (M - 1) * len_k) + M * len_q) * DC^2 (the select and multiply walks "
        "at once, then O)"
    ),
    "attention": "len_q * heads * (KB*SC + KB + KB*HC)",
    "out": "io_stream: len_q (one output beat a token); io_parallel: 0",
    "total": "load + projections + attention + out (pipelined-loop iterations at II = 1)",
    "ii": "max(len_q * DC, len_k * DC, projections before, attention, projections after, "
    "out): the DATAFLOW processes' slowest (consecutive calls overlap)",
}


def resolve_folding(
    cfg: CoreConfig, reuse_factor: int = 1, folding: dict | None = None
) -> dict[str, int] | None:
    """The folding of a project: None (the unrolled layer) when reuse_factor is 1 and folding
    is None; the one reuse_factor selects when it is > 1; else the given one, its missing keys
    from default_folding ({} folds with the defaults, as `eatt rtl --level folded`), checked.
    ValueError (one line, naming the flag) for a bad or doubled choice."""
    folded = folding is not None
    folding = {k: v for k, v in (folding or {}).items() if v is not None}
    if folding and reuse_factor > 1:
        raise ValueError(
            f"--lanes/--simd/--pe: reuse_factor {reuse_factor} sets the folding; give one of them"
        )
    if cfg.kind not in folded_kinds():
        if folded or reuse_factor > 1:
            raise ValueError(
                f"reuse_factor / --lanes/--simd/--pe: the folded layer is for kinds "
                f"{', '.join(folded_kinds())}, not {cfg.kind}"
            )
        return None
    if reuse_factor > 1:
        return folding_for_reuse(cfg, reuse_factor)
    if folded:
        unknown = sorted(set(folding) - {"lanes", "simd", "pe"})
        if unknown:
            raise ValueError(f"folding: unknown key {unknown[0]!r} (lanes, simd, pe)")
        base = default_folding(cfg)
        lanes = folding.get("lanes", base["lanes"])
        simd = folding.get("simd", base["simd"])
        pe = folding.get("pe", simd)
        check_folding(cfg, lanes, simd, pe if "pe" in folding else None)
        return {"lanes": lanes, "simd": simd, "pe": pe}
    return None


def hls_iterations(
    cfg: CoreConfig, lanes: int, simd: int, pe: int | None = None, stream: bool = False
) -> dict[str, int]:
    """Pipelined-loop iterations of one call of the folded layer, by phase, their total (a
    call's latency) and "ii" (the slowest DATAFLOW process: the interval of consecutive
    calls); ``stream``: the io_stream layer, which writes its len_q output beats in a loop of
    its own ("out"; io_parallel's outputs are the output projection's registers)."""
    pe = simd if pe is None else pe
    dc, hc, kb = cfg.dim // simd, cfg.d_head // simd, cfg.len_k // lanes
    tiles, m, mechanism = dc * dc, simd // pe, mechanism_of(cfg)
    if mechanism.binarized:  # E-ATT's select walk
        rest = max(0, cfg.len_q - (m - 1) * cfg.len_k)
        before, after = (m * cfg.len_k + rest) * tiles, m * cfg.len_q * tiles
    else:  # one multiply walk: its passes (K, V, Q; or V and the hidden layer; or V), then O
        passes = mechanism.folded_passes
        tokens = sum(cfg.len_q if p == "q" else cfg.len_k for p in passes)
        before, after = tokens * tiles, cfg.len_q * tiles
    load = (cfg.len_q + cfg.len_k) * dc
    sc = mechanism.folded_score_chunks(cfg, simd)
    attention = cfg.len_q * cfg.heads * kb * (sc + 1 + hc)
    out = cfg.len_q if stream else 0
    processes = (cfg.len_q * dc, cfg.len_k * dc, before, attention, after, out)
    return {
        "load": load,
        "projections": before + after,
        "projections_before": before,
        "projections_after": after,
        "attention": attention,
        "out": out,
        "total": load + before + after + attention + out,
        "ii": max(processes),
    }


def format_folded(result: dict) -> str:
    """One line on a write_project result's folded layer (the CLI's and the flows' reports):
    its folding, what chose it, and the iterations per call, formula and counted."""
    f, it = result["folding"], result["iterations"]
    chosen = f"reuse_factor {result['reuse_factor']}" if result["reuse_factor"] > 1 else "given"
    counted = (result.get("csim") or {}).get("iterations_per_call")
    return (
        f"folded layer ({result['io_type']}, {chosen}): lanes {f['lanes']}, simd {f['simd']}, "
        f"pe {f['pe']}: {it['total']:,} cycles a call (pipelined-loop iterations"
        + ("" if counted is None else f"; counted in C simulation: {counted:,.0f}")
        + f"), a call every {it['ii']:,} (DATAFLOW: its slowest process)"
    )
