"""`eatt sim DIR --netlist ecp5`: the RTL folder's mapped ECP5 netlist simulated against the
golden model, its outputs only.

The netlist is the one `eatt power --target fpga` measures and `eatt pnr` places: Yosys
``synth_ecp5`` of the folder (rtl_sim/fpga_power.py ``synthesize``, cached by
rtl_sim/yosys_cache.py), simulated with Yosys' ECP5 cell models and eatt's models of the cells
Yosys ships as blackboxes (rtl_sim/ecp5_models.py: MULT18X18D, the DP16KD modes it maps).
Unlike `eatt power` it records no activity, so Verilator builds the netlist without its trace,
with only its ports public (rtl_sim/cocotb_run.py): a check of a trained layer's captured calls
(a 19k-cell engine runs about 8,000 cycles a second; docs/pnr.md).

Result (also ``DIR/netlist_ecp5/result.json``; the folder, written in a temporary one beside
it, holds the netlist, the logs and the simulation)::

    {"netlist": "ecp5", "top", "level", "kind", "vectors", "inputs", "mismatches",
     "first_mismatch", "cycles", "ok"[, "vs_model"], "yosys": {...},
     "sim": {"simulator", "build_seconds", "sim_seconds", "cached_build"}, "seconds"}

A missing tool is :class:`eatt.rtl_sim.tools.ToolMissing`; a bad directory or option is
ValueError (one line); a tool that fails is RuntimeError. A netlist that differs from the
golden model is a result with ``ok`` false and the first mismatch.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from eatt.config import CoreConfig, atomic_write_text
from eatt.outdir import check_result_dir, result_dir
from eatt.quant.golden import GoldenCore
from eatt.quant.vectors import compare_model, inputs_model
from eatt.rtl_sim.ecp5_models import find_ecp5_models, model_library
from eatt.rtl_sim.fpga_power import LARGEST_PART, simulable_netlist
from eatt.rtl_sim.gate_activity import activity, gate_folder
from eatt.rtl_sim.pnr import weights_beyond_part
from eatt.rtl_sim.resources import find_yosys
from eatt.rtl_sim.rtldir import load_metadata, load_weights
from eatt.rtl_sim.runner import check_simulator, core_vectors

NETLIST_DIR = "netlist_ecp5"
#: what eatt.outdir's marker of DIR/netlist_ecp5 says
WHAT = "eatt sim --netlist ecp5"
#: the mapped netlists eatt simulates (a device family each)
NETLISTS = ("ecp5",)


def simulate_netlist(
    rtl_dir: str | os.PathLike,
    vectors: int = 100,
    seed: int = 1,
    inputs: tuple | None = None,
    simulator: str = "verilator",
    timeout: float | None = None,
    dsp_registers: bool = False,
) -> dict:
    """The module doc's check of rtl_dir on ``vectors`` edge + random vectors (seed), or on
    the captured ``inputs`` (capture_inputs' tuple); the result dict. ``dsp_registers``: the
    netlist `eatt pnr --dsp-registers` places (each multiplier's flip-flops in its block)."""
    out = Path(rtl_dir).resolve()
    meta = load_metadata(out)
    if meta["level"] not in ("alignment", "attention", "folded"):
        raise ValueError(
            f"{out}: level {meta['level']!r}: --netlist simulates the cores (alignment, "
            "attention, folded)"
        )
    check_result_dir(out, NETLIST_DIR, WHAT)  # before any work
    beyond = weights_beyond_part(meta, LARGEST_PART)
    if beyond:
        raise ValueError(f"{out}: {beyond}")
    cfg = CoreConfig.from_dict(meta["config"], source=str(out / "metadata.json"))
    check_simulator(simulator)
    models = model_library(find_ecp5_models(find_yosys()))
    x, y, masks = core_vectors(cfg, vectors, seed, inputs)
    golden = GoldenCore(cfg, load_weights(out, meta))
    if meta["level"] == "alignment":
        expected = golden.alignment(x, y)
    else:
        expected = golden.forward(x, y, masks=masks)
    t0 = time.perf_counter()
    with result_dir(out, NETLIST_DIR, WHAT) as work:
        synth, _ = simulable_netlist(out, meta, work, timeout, models, dsp_registers)
        gate, gmeta = gate_folder(work, meta, simulator=simulator, trace=False)
        run = activity(gate, gmeta, x, y, masks, expected)
        model = inputs_model(inputs) if meta["level"] != "alignment" else None
        vs_model = compare_model(model, run["got"], cfg.kind)  # the netlist's own outputs
        result = {
            "netlist": "ecp5",
            "top": meta["top"],
            "level": meta["level"],
            "kind": meta.get("kind", cfg.kind),
            "vectors": len(x),
            "inputs": "given" if inputs is not None else f"edge + random (seed {seed})",
            "mismatches": run["mismatches"],
            "first_mismatch": run["first_mismatch"],
            "cycles": run["cycles"],
            "ok": run["mismatches"] == 0 and (vs_model or {}).get("mismatches", 0) == 0,
            **({"vs_model": vs_model} if vs_model else {}),
            "yosys": synth,
            "sim": {
                "simulator": simulator,
                **{k: run[k] for k in ("build_seconds", "sim_seconds", "cached_build")},
            },
            "seconds": round(time.perf_counter() - t0, 3),
        }
        atomic_write_text(work / "result.json", json.dumps(result, indent=1) + "\n")
    return result
