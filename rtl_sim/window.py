"""RTL of the windowed attention unit (kind ``window``): a sequential unit, not an unrolled one.

``generate_window_rtl(cfg, weights, out_dir)`` writes an RTL directory like the cores'
(rtl_sim/generate.py; ``eatt rtl`` dispatches here for kind window):

    metadata.json      config, level "window", interface, latency, formats, sources (top first)
    window_attention.sv   generated top: window_unit with the config's parameters, and the
                       config's constants as four small modules (the Q projection with W_Q,
                       the position, exp and reciprocal tables as lookups)
    window_unit.sv     hand-written unit: score datapath, position term, window buffer,
                       reduction, normalization (bit-exact with eatt.quant.window.WindowGolden)
    window_ctrl.sv     hand-written handshake (ap_ctrl_hs) and address generator
    window_ram.sv      hand-written memory: one row = {count, V codes, K codes}, synchronous read
    recip_normalize.sv hand-written O = N / E with the reciprocal table, as the core's (one per
                       head; the table itself is a lookup in the generated top)
    piece_mult.sv      hand-written DSP-sized multiplier (recip_normalize's PIPE 2; listed for
                       Yosys' hierarchy check)
    l1_score_row.sv    hand-written E-ATT score, as the core's (one per head; E-ATT scores only,
                       listed for every mechanism: Yosys' hierarchy check wants it)
    weights.npz        the integer weights (W_Q is used; the memory holds K and V projected)

Scheme (docs/window.md "RTL"): the memory is loaded through the write port (mem_we, mem_addr,
mem_k, mem_v, mem_cnt; one row per cycle) while the unit is idle. A step (ap_start with x, p,
w, len[, g]) reads the rows [max(p - w, 0), min(p + w, len - 1)] one per cycle (window_ctrl),
scores each row as it arrives (E-ATT: the cores' l1_score_row leaf; dot: d_head multipliers
and an adder tree), subtracts the position term from a table indexed by
{g level, |s - p|} (no multiplier, Flexible Eq. 7 / local-p Eq. 10 in the log domain), and
writes the logit, V row and count into a window buffer of min(2 D + 1, len_k) entries while a
running max is kept. Pass two reads the whole buffer at once: e = count * EXP[(max - S') >>
exp_shift], E = sum e, N = sum e V (a tree over the window, D-sized, not l_k-sized), then the
reciprocal and normalization by the core's leaf (recip_normalize.sv). Latency rows + 3
cycles; the next step is accepted after `rows` cycles (the reduction of one step overlaps the
scoring of the next).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig, WindowConfig
from eatt.quant.golden import CoreWeights
from eatt.quant.vectors import window_step_inputs
from eatt.quant.window import (
    WindowGolden,
    derive_window_formats,
    has_focus,
    random_window_inputs,
)
from eatt.rtl_sim.eatt_datapath import L1_SCORE_ROW_FILE
from eatt.rtl_sim.emit_attention import PIECE_MULT_FILE, RECIP_NORMALIZE_FILE
from eatt.rtl_sim.emit_window import (  # noqa: F401 - re-exported: the top's pieces
    LATENCY_EXTRA,
    TOP,
    UNIT_FILE,
    _window_sv,
    window_interface,
    window_widths,
)
from eatt.rtl_sim.rtldir import load_metadata, load_weights, write_rtl_dir
from eatt.rtl_sim.sim_run import compare_runs, sim_run, write_job

#: the unit (window_unit.sv instantiates the others; l1_score_row only where it binarizes, but
#: Yosys' `hierarchy -check` wants the module of both generate branches: Verilator and Icarus
#: do without it)
HAND_WRITTEN = (
    UNIT_FILE,
    "window_ctrl.sv",
    "window_ram.sv",
    RECIP_NORMALIZE_FILE,
    PIECE_MULT_FILE,
    L1_SCORE_ROW_FILE,
)


def generate_window_rtl(
    cfg: CoreConfig,
    weights: CoreWeights,
    out_dir: str | os.PathLike,
    level: str = "window",
    options: BuildOptions | None = None,
) -> dict:
    """Write the window unit's RTL directory; return its metadata (also metadata.json).

    One level (the sequential unit): `level` and `options.datapath` (the core's, passed by
    generate_rtl) are not read; a pipelined form (adder_levels) and a folded one do not exist.
    """
    options = BuildOptions() if options is None else options
    if not isinstance(cfg, WindowConfig):
        raise ValueError(f"kind: expected window, got {cfg.kind}")
    if options.adder_levels:
        raise ValueError("adder_levels: the window unit has a fixed pipeline; use 0")
    if options.folding:
        raise ValueError("folding: the window unit has no folded form")
    weights.check(cfg)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a directory")
    text = _window_sv(cfg, weights)
    rows = cfg.window_rows
    hand = list(HAND_WRITTEN)
    meta = {
        "generator": "eatt.rtl_sim.window",
        "level": "window",
        "kind": cfg.kind,
        "config": cfg.to_dict(),
        "top": TOP,
        "sources": [f"{TOP}.sv", *hand],
        "weights": "weights.npz",
        "interface": window_interface(cfg),
        "latency": {
            "rows": "hi - lo + 1 with [lo, hi] = [max(p - w, 0), min(p + w, len - 1)]",
            "latency_cycles": f"rows + {LATENCY_EXTRA} (ap_start accepted -> ap_done)",
            "ii_cycles": "rows (back-to-back starts; the reduction overlaps the next step)",
            "memory_load_cycles": "one per row written",
        },
        "latency_cycles_max": rows + LATENCY_EXTRA,
        "window_rows": rows,
        "formats": derive_window_formats(cfg).to_dict(),
    }
    write_rtl_dir(out, {f"{TOP}.sv": text}, hand, weights, meta)
    return meta


# -- simulation (eatt sim for kind window) --------------------------------------------------------
def window_steps(
    cfg: CoreConfig, vectors: int, seed: int = 0, steps_per_memory: int = 8
) -> dict[str, np.ndarray]:
    """`vectors` random steps in groups of steps_per_memory that share one memory (keys,
    values, counts, length: per group; x, p, w, g and the group index: per step)."""
    inp = random_window_inputs(cfg, vectors, seed)
    group = np.arange(vectors) // steps_per_memory
    first = np.arange(0, vectors, steps_per_memory)
    length = inp["length"][first]
    p = np.minimum(inp["p"], length[group] - 1)
    # the last step of every group sits at the far edge of its memory
    p[np.minimum(first + steps_per_memory - 1, vectors - 1)] = length - 1
    return {
        "x": inp["x"],
        "p": p,
        "w": inp["w"],
        "g": inp["g"],
        "group": group,
        "keys": inp["keys"][first],
        "values": inp["values"][first],
        "counts": inp["counts"][first],
        "length": length,
    }


#: the arrays of grouped steps (window_steps)
WINDOW_STEPS = ("x", "p", "w", "g", "group", "keys", "values", "counts", "length")


def expected_outputs(golden: WindowGolden, steps: dict[str, np.ndarray]) -> np.ndarray:
    """The golden model's outputs of grouped steps (window_steps' layout): O (n, dim), with
    position flexible followed by the focus F (n, dim + heads), as the testbench records them."""
    inputs = window_step_inputs(steps)
    if not has_focus(golden.cfg):
        return golden.forward(**inputs)
    return np.concatenate(golden.forward(**inputs, with_focus=True), axis=1)


def simulate_window(
    out_dir: str | os.PathLike,
    vectors: int = 1000,
    seed: int = 0,
    build_dir: str | os.PathLike | None = None,
    inputs: dict[str, np.ndarray] | None = None,
    simulator: str = "verilator",
    lock_timeout: float | None = None,
) -> dict:
    """Simulate a window RTL directory on `vectors` random steps (or the given grouped steps
    `inputs`, window_steps' layout: a capture's, eatt.quant.vectors.load_window_capture) in
    `simulator` and compare every output bit with WindowGolden (runner.simulate's build
    cache, run folder, locks and result keys)."""
    out = Path(out_dir).resolve()
    meta = load_metadata(out)
    cfg = CoreConfig.from_dict(meta["config"], source=str(out / "metadata.json"))
    golden = WindowGolden(cfg, load_weights(out, meta))
    if inputs is None:
        if vectors < 1:
            raise ValueError(f"vectors: must be at least 1, got {vectors}")
        inputs = window_steps(cfg, vectors, seed)
    steps = {k: np.asarray(inputs[k], dtype=np.int64) for k in WINDOW_STEPS}
    expected = expected_outputs(golden, steps)  # also checks every input's range

    with sim_run(out, meta, simulator, build_dir, lock_timeout) as sr:
        result = _run_window(sr, meta, cfg, steps, expected, seed)
        sr.publish(result)
    return result


def _run_window(sr, meta: dict, cfg: CoreConfig, steps: dict, expected, seed: int) -> dict:
    """One window run inside sim_run: the job, the testbench, the comparison."""

    n = len(expected)
    run = sr.dir
    np.savez(run / "steps.npz", **steps)
    job = write_job(
        run,
        seed,
        interface=meta["interface"],
        latency_cycles_max=meta["latency_cycles_max"],
        data=str(run / "steps.npz"),
    )
    tb = sr.test(meta["top"], "test_window", seed, f"{n} steps")
    got = np.load(run / "got.npy").reshape(expected.shape)
    nb = min(n, job["bubble_vectors"])
    got_bubbles = np.load(run / "got_bubbles.npy").reshape(expected[:nb].shape)
    runs = {
        "stream": (expected, got),
        "bubbles": (expected[:nb], got_bubbles),
        "latency": (expected[:1], np.asarray(tb["latency_output"])[None]),
        "after_reset": (expected[:1], np.asarray(tb["after_reset_output"])[None]),
    }
    compared, wrong, first = compare_runs(runs, n)

    # cycles per step against the window's rows (stream run: starts held high per memory)
    lo = np.maximum(steps["p"] - steps["w"], 0)
    hi = np.minimum(steps["p"] + steps["w"], steps["length"][steps["group"]] - 1)
    rows = hi - lo + 1
    accepted, done = np.asarray(tb["accepted"]), np.asarray(tb["done"])
    latency = done - accepted
    same = steps["group"][1:] == steps["group"][:-1]
    ii = np.diff(accepted)[same]
    by_rows: dict[str, dict] = {}
    for r in np.unique(rows):
        lat = np.unique(latency[rows == r]).tolist()
        iis = np.unique(ii[rows[:-1][same] == r]).tolist()
        by_rows[str(int(r))] = {
            "steps": int((rows == r).sum()),
            "latency_cycles": lat[0] if len(lat) == 1 else lat,
            "ii_cycles": (iis[0] if len(iis) == 1 else iis) if iis else None,
        }
    model_ok = bool((latency == rows + LATENCY_EXTRA).all() and (ii == rows[:-1][same]).all())
    result = {
        "level": "window",
        "kind": cfg.kind,
        "top": meta["top"],
        "vectors": int(n),
        "memories": int(len(steps["keys"])),
        "mismatches": int(wrong.sum()),
        "mismatched_elements": compared["stream"]["mismatched_elements"],
        "first_mismatch": first,
        "bubble_vectors": nb,
        "latency_cycles": tb["latency_cycles"],
        "ii_cycles": int(ii.max()) if len(ii) else None,
        "cycles_by_rows": by_rows,
        "cycles_rule": f"latency = rows + {LATENCY_EXTRA}, ii = rows",
        "cycles_rule_holds": model_ok,
        "stream_cycles": int(done[-1] - accepted[0]),
        "metadata_latency_cycles": meta["latency_cycles_max"],
        "reset_ok": tb.get("reset_ok", False),
        **sr.fields(),
    }
    return result
