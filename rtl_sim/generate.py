"""RTL generation of any unit: a config + integer weights -> an RTL directory (SystemVerilog +
metadata.json) that a simulator or a synthesizer can use on its own ("An RTL directory",
docs/rtl.md).

``generate_rtl(cfg, weights, out_dir, level=..., options=BuildOptions(...))`` checks what every
unit shares, then asks the registry (eatt/units.py) for cfg's unit's generator: the core's
(rtl_sim/folded.py: generate_core_levels; level folded there, the unrolled levels alignment and
attention in rtl_sim/unrolled.py, which describes their arithmetic) or the window unit's
(rtl_sim/window.py). How it is built (folding, adder_levels, the E-ATT datapath) travels as one
BuildOptions (eatt/build_options.py), apart from the config (what it computes). The names of the
unrolled core's pieces are re-exported here (their homes: unrolled.py, widths.py,
eatt_datapath.py, emit_alignment.py, emit_attention.py, rtldir.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from eatt.build_options import BuildOptions
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
    "BuildOptions",
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
    options: BuildOptions | None = None,
    source: dict | None = None,
) -> dict:
    """Write the RTL of cfg's unit into out_dir; return the metadata (also in metadata.json).

    Dispatches to the unit's generator (eatt.units: rtl_sim.folded.generate_core_levels for
    the core's kinds, rtl_sim.window.generate_window_rtl for the window unit) after the checks
    every unit shares. ``level`` is the one level written; ``options`` (eatt/build_options.py,
    default BuildOptions()) how it is built: ``folding`` ({"lanes": P, "simd": S, "pe": N}) for
    the core's level folded (rtl_sim/folded.py), ``adder_levels``, ``datapath`` (the unrolled
    E-ATT levels' EATT_DATAPATH keys). ``source`` (JSON-ready: the QONNX file, and the
    checkpoint and layer it was taken from) is recorded in metadata.json.
    """
    options = BuildOptions() if options is None else options
    options.check()
    check_output_dir(out_dir, "RTL", legacy=_legacy_rtl_dir)  # refuse before any work
    generate = unit_for(cfg).load("generate_rtl")
    meta = generate(cfg, weights, out_dir, level=level, options=options)
    if source is not None:  # the folder is ours now: add the provenance to its metadata
        meta["source"] = source
        atomic_write_text(Path(out_dir) / "metadata.json", json.dumps(meta, indent=2) + "\n")
    return meta
