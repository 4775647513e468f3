"""RTL generation of any unit: a config + integer weights -> an RTL directory (SystemVerilog +
metadata.json) that a simulator or a synthesizer can use on its own ("An RTL directory",
docs/rtl.md).

``generate_rtl(cfg, weights, out_dir, level=...)`` checks what every unit shares, then asks the
registry (eatt/units.py) for cfg's unit's generator: the core's (rtl_sim/folded.py:
generate_core_levels; level folded there, the unrolled levels alignment and attention in
rtl_sim/unrolled.py, which describes their arithmetic) or the window unit's
(rtl_sim/window.py). The names of the unrolled core's pieces are re-exported here (their homes:
unrolled.py, widths.py, eatt_datapath.py, emit_alignment.py, emit_attention.py, rtldir.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from eatt.config import CoreConfig, atomic_write_text
from eatt.outdir import check_output_dir
from eatt.quant.golden import CoreWeights
from eatt.rtl_sim.eatt_datapath import EATT_DATAPATH, L1_SCORE_ROW_FILE, l1_score_row_parameters
from eatt.rtl_sim.emit_alignment import ALIGNMENT_LATENCY
from eatt.rtl_sim.emit_attention import ATTENTION_LATENCY, RECIP_NORMALIZE_FILE
from eatt.rtl_sim.rtldir import (
    CTRL_FILE,
    RTL_DIR,
    _legacy_rtl_dir,
    load_metadata,
    load_weights,
    write_rtl_dir,
)
from eatt.rtl_sim.unrolled import LEVELS, generate_core_rtl
from eatt.rtl_sim.widths import (
    alignment_interface,
    alignment_widths,
    attention_interface,
    attention_widths,
    mask_bits,
)
from eatt.units import unit_for

#: names importers still take from here (their homes are the modules above)
__all__ = [
    "ALIGNMENT_LATENCY",
    "ATTENTION_LATENCY",
    "CTRL_FILE",
    "EATT_DATAPATH",
    "L1_SCORE_ROW_FILE",
    "LEVELS",
    "RECIP_NORMALIZE_FILE",
    "RTL_DIR",
    "alignment_interface",
    "alignment_widths",
    "attention_interface",
    "attention_widths",
    "generate_core_rtl",
    "generate_rtl",
    "l1_score_row_parameters",
    "load_metadata",
    "load_weights",
    "mask_bits",
    "write_rtl_dir",
]


def generate_rtl(
    cfg: CoreConfig,
    weights: CoreWeights,
    out_dir: str | os.PathLike,
    level: str = "alignment",
    eatt_datapath: dict | None = None,
    adder_levels: int = 0,
    source: dict | None = None,
    folding: dict | None = None,
) -> dict:
    """Write the RTL of cfg's unit into out_dir; return the metadata (also in metadata.json).

    Dispatches to the unit's generator (eatt.units: rtl_sim.folded.generate_core_levels for
    kinds eatt and vanilla, rtl_sim.window.generate_window_rtl for the window unit) after the
    checks every unit shares. ``source`` (JSON-ready: the QONNX file, and the checkpoint and
    layer it was taken from) is recorded in metadata.json. ``folding`` ({"lanes": P, "simd": S,
    "pe": N}) is for the core's level folded (rtl_sim/folded.py).
    """
    if isinstance(adder_levels, bool) or not isinstance(adder_levels, int) or adder_levels < 0:
        raise ValueError(f"adder_levels: must be an integer >= 0, got {adder_levels!r}")
    check_output_dir(out_dir, "RTL", legacy=_legacy_rtl_dir)  # refuse before any work
    generate = unit_for(cfg).load("generate_rtl")
    meta = generate(
        cfg,
        weights,
        out_dir,
        level=level,
        eatt_datapath=eatt_datapath,
        adder_levels=adder_levels,
        **({"folding": folding} if folding else {}),
    )
    if source is not None:  # the folder is ours now: add the provenance to its metadata
        meta["source"] = source
        atomic_write_text(Path(out_dir) / "metadata.json", json.dumps(meta, indent=2) + "\n")
    return meta
