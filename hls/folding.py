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
"""

from __future__ import annotations

from eatt.config import CoreConfig
from eatt.mechanisms import QueryKey, folded_kinds, mechanism_of
from eatt.rtl_sim.folded import check_folding, default_folding, folding_for_reuse

#: the header of the folded layer (registered with the others, eatt.hls.register)
FOLDED_HEADER = "nnet_utils/nnet_folded_attention.h"

#: the formula of hls_iterations, as metadata.json writes it
ITERATION_FORMULA = {
    "symbols": "DC = dim/simd, HC = d_head/simd, KB = len_k/lanes, M = simd/pe",
    "load": "(len_q + len_k) * DC",
    "projections": (
        "vanilla: (2*len_k + 2*len_q) * DC^2; eatt: (M * len_k + max(0, len_q - (M - 1) * "
        "len_k) + M * len_q) * DC^2 (the select and multiply walks at once, then O)"
    ),
    "attention": "len_q * heads * (2*KB*HC + KB)",
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
    kinds = [k for k in folded_kinds() if isinstance(mechanism_of(k), QueryKey)]  # (HLS: these)
    if cfg.kind not in kinds:
        if folded or reuse_factor > 1:
            raise ValueError(
                f"reuse_factor / --lanes/--simd/--pe: the folded layer is for kinds "
                f"{' and '.join(kinds)}, not {cfg.kind}"
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
    tiles, m = dc * dc, simd // pe
    if mechanism_of(cfg).binarized:  # E-ATT's select walk
        rest = max(0, cfg.len_q - (m - 1) * cfg.len_k)
        before, after = (m * cfg.len_k + rest) * tiles, m * cfg.len_q * tiles
    else:
        before, after = (2 * cfg.len_k + cfg.len_q) * tiles, cfg.len_q * tiles
    load = (cfg.len_q + cfg.len_k) * dc
    attention = cfg.len_q * cfg.heads * (2 * kb * hc + kb)
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
