"""The folded attention engine: RTL level ``folded`` of the core (every mechanism: eatt,
vanilla, dense, randinit).

The unrolled levels (rtl_sim/unrolled.py) compute every operation of a vector in one cycle, so
their size grows with len_q x len_k x dim. The folded level reuses one small datapath over
many cycles, set by its folding parameters:

    lanes   keys scored per cycle (divides len_k)
    simd    features consumed per cycle (divides d_head = dim / heads)
    pe      E-ATT: output columns of V and O per cycle (divides simd; vanilla: simd)

and computes the same function, ``GoldenCore(cfg, weights).forward(x, y, masks)``, bit for bit.
The datapath is hand-written and parameterized (rtl_sim/rtl/folded_attention.sv, its
attention unit folded_attend.sv and the other modules of HAND_WRITTEN); this
module writes only a small wrapper that sets the golden widths as parameters, and the weights
and softmax tables as $readmemh files next to the RTL, so the text stays a few KB at any size
(docs/folded.md):

    metadata.json            config, level "folded", folding, cycle formula, interface, sources
    <kind>_folded.sv         generated wrapper (parameters only)
    folded_attention.sv      the engine; folded_attend.sv, folded_proj_walk.sv and the
                             leaves (HAND_WRITTEN)
    wq.mem wk.mem wv.mem wo.mem   the weights, one tile per line (SIMD rows x SIMD columns;
                             E-ATT's wv, wo: SIMD x PE); Dense: w1.mem (tiles), w2.mem;
                             RandInit: r.mem (the score ROM, Mechanism.score_rom_words)
    exp.mem recip.mem        the softmax tables (eatt.quant.golden.exp_table / recip_table)
    weights.npz              the integer weights (the golden model checks the RTL with them)

The core unit's generate_rtl and simulate stages point here (eatt/units.py): the folded level
is handled in this module, the unrolled levels go on to rtl_sim/unrolled.py and
rtl_sim/sim_run.py.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np

from eatt.build_options import BuildOptions
from eatt.config import CoreConfig
from eatt.mechanisms import mechanism_of
from eatt.quant.golden import (
    CoreWeights,
    GoldenCore,
    derive_formats,
    exp_table,
    recip_table,
    weight_shapes,
)
from eatt.quant.vectors import compare_model, inputs_model
from eatt.rtl_sim.folding import (  # noqa: F401  (their home was this module)
    CYCLE_FORMULA,
    SETTLED_VECTORS,
    check_folding,
    datapath_cost,
    default_folding,
    folded_cycles,
    folded_schedule,
    folding_for_reuse,
    peer_foldings,
)
from eatt.rtl_sim.memory_energy import MIN_ROWS
from eatt.rtl_sim.rtldir import load_metadata, load_weights, write_rtl_dir
from eatt.rtl_sim.sim_run import (
    compare_runs,
    core_vectors,
    sim_run,
    simulate_core,
    write_vectors_job,
)
from eatt.rtl_sim.unrolled import generate_core_rtl

LEVEL = "folded"
ENGINE_FILE = "folded_attention.sv"
#: the hand-written files of the folded level, after the generated wrapper
HAND_WRITTEN = [
    ENGINE_FILE,
    "folded_attend.sv",
    "folded_v_banks.sv",
    "folded_norm.sv",
    "folded_out.sv",
    "folded_proj_walk.sv",
    "folded_ram.sv",
    "folded_rom.sv",
    "folded_macro.sv",
    "folded_proj_tile.sv",
    "folded_adder_tree.sv",
    "folded_scores_qk.sv",
    "folded_scores_dense.sv",
    "folded_scores_randinit.sv",
    "folded_score_lane.sv",
    "folded_max_tree.sv",
    "folded_numer.sv",
    "recip_normalize.sv",
    "piece_mult.sv",
]
#: memories of at least this many words are memory macros (CACTI's smallest array)
MACRO_ROWS = MIN_ROWS
#: the $readmemh files every engine reads (parameter -> file name); the mechanism's own
#: (Mechanism.folded_roms) come before them (mem_files)
MEM_FILES = {
    "WV_FILE": "wv.mem",
    "WO_FILE": "wo.mem",
    "EXP_FILE": "exp.mem",
    "RECIP_FILE": "recip.mem",
}


def mem_files(cfg: CoreConfig) -> dict[str, str]:
    """The engine's $readmemh file parameters of a config: its mechanism's ROMs, then
    MEM_FILES."""
    roms = mechanism_of(cfg).folded_roms
    return {**{param: f"{weight}.mem" for param, weight in roms}, **MEM_FILES}


# -- parameters and interface ---------------------------------------------------------------------
def mask_fields(cfg: CoreConfig) -> tuple[int, int]:
    """Bits of the length and offset fields of s_axis_tuser (both always present)."""
    return cfg.len_k.bit_length(), max(1, (cfg.len_k - 1).bit_length())


#: the walks' passes (folded_proj_walk.sv PASS_*)
PASS_CODES = {"k": 0, "v": 1, "q": 2, "o": 3}


def walk_parameters(cfg: CoreConfig, simd: int) -> dict[str, int]:
    """What the mechanism asks of the engine's walks and attention unit: the multiply walk's
    passes before attention (PRE, 2 bits each, the first at [1:0]; N_PRE of them), the ROMs
    it reads (USES, a bit per pass; O always), Dense's relu, E-ATT's select walk, the score
    phase's chunks a key block (SC) and a score lane's terms (LANE_TERMS)."""
    m = mechanism_of(cfg)
    passes = [PASS_CODES[p] for p in m.folded_passes]
    return {
        "SELECT_WALK": int(m.binarized),
        "N_PRE": len(passes),
        "PRE": sum(code << (2 * i) for i, code in enumerate(passes)),
        "USES": sum(1 << code for code in {*passes, PASS_CODES["o"]}),
        "RELU": int(m.folded_relu),
        "SC": m.folded_score_chunks(cfg, simd),
        "LANE_TERMS": m.folded_lane_terms(simd),
    }


def folded_parameters(cfg: CoreConfig, lanes: int, simd: int, pe: int) -> dict[str, int]:
    """The engine's parameters: the config, the folding, the mechanism's walks and scores
    (walk_parameters) and the golden widths."""
    f = derive_formats(cfg)
    len_w, off_w = mask_fields(cfg)
    return {
        "SCORE": mechanism_of(cfg).rtl_score,  # its score front end (folded_attend.sv)
        **walk_parameters(cfg, simd),
        "LEN_Q": cfg.len_q,
        "LEN_K": cfg.len_k,
        "DIM": cfg.dim,
        "HEADS": cfg.heads,
        "LANES": lanes,
        "SIMD": simd,
        "PE": pe,
        "IN_W": cfg.in_bits,
        "TAU": cfg.tau_int,
        "W_W": cfg.weight_bits,
        "ACC_W": max(f.q_acc_bits, f.v_acc_bits, f.out_acc_bits),
        "Q_SHIFT": f.q_shift,
        "QK_W": f.qk_code_bits,
        "V_SHIFT": f.v_shift,
        "V_W": f.v_code_bits,
        "SCORE_W": f.score_bits,
        "EXP_SHIFT": f.exp_shift,
        "EXP_SIZE": f.exp_table_size,
        "EXP_W": f.exp_bits,
        "SUM_W": f.esum_bits,
        "NUMER_W": f.numer_bits,
        "RIDX_W": f.recip_index_bits,
        "RECIP_W": f.recip_bits,
        "RECIP_FRAC": f.recip_frac,
        "PROD_W": f.prod_bits,
        "ATTN_W": f.attn_bits,
        "O_SHIFT": f.out_shift,
        "OUT_W": f.out_code_bits,
        "KEY_PADDING": int(cfg.key_padding),
        "CAUSAL": int(cfg.causal),
        "LEN_W": len_w,
        "OFF_W": off_w,
    }


def folded_interface(cfg: CoreConfig, lanes: int, simd: int) -> dict:
    """The port list of the folded top (also written to metadata.json)."""
    f = derive_formats(cfg)
    len_w, off_w = mask_fields(cfg)
    dc = cfg.dim // simd
    return {
        "protocol": "axi4-stream",
        "clock": "clk",
        "reset": {"name": "rst", "active": "high", "kind": "synchronous"},
        "inputs": {
            "s_axis": {
                "tdata_bits": simd * cfg.in_bits,
                "element_bits": cfg.in_bits,
                "signed": True,
                "beats": (cfg.len_q + cfg.len_k) * dc,
                "packing": (
                    f"x then y, token by token, {dc} beats per token; beat b of token i "
                    f"carries elements d = b*{simd} + t at [t*in_bits +: in_bits]"
                ),
                "tuser_bits": len_w + off_w,
                "tuser": (
                    f"first beat of a vector: length at [0 +: {len_w}], offset at "
                    f"[{len_w} +: {off_w}] (read only where the config has the mask)"
                ),
                "tlast": "on the vector's last beat (the engine counts beats)",
            }
        },
        "outputs": {
            "m_axis": {
                "tdata_bits": simd * f.out_code_bits,
                "element_bits": f.out_code_bits,
                "signed": True,
                "beats": cfg.len_q * dc,
                "packing": f"z, token by token, {dc} beats per token, as s_axis",
                "tlast": "on the vector's last beat",
            }
        },
        "masks": list(cfg.mask_inputs),
    }


# -- memory files ---------------------------------------------------------------------------------
def hex_lines(fields: np.ndarray, bits: int) -> str:
    """$readmemh text: one line per row of `fields` (words, n) holding n two's-complement
    fields of `bits` bits, field 0 in the least significant bits."""
    fields = np.asarray(fields, dtype=np.int64)
    words, n = fields.shape
    unsigned = fields & ((1 << bits) - 1)
    # bit b of field k, least significant first: (words, n * bits)
    bitplane = ((unsigned[:, :, None] >> np.arange(bits)) & 1).reshape(words, n * bits)
    digits = -(-(n * bits) // 4)
    pad = np.zeros((words, digits * 4 - n * bits), dtype=np.int64)
    nibbles = np.concatenate([bitplane, pad], axis=1).reshape(words, digits, 4)
    values = (nibbles * (1 << np.arange(4))).sum(axis=2)[:, ::-1]  # most significant first
    chars = np.array(list("0123456789abcdef"))[values]
    return "\n".join("".join(row) for row in chars) + "\n"


def weight_tiles(w: np.ndarray, simd: int, cols: int | None = None) -> np.ndarray:
    """(dim, dim) weights (input row r, output column c) -> (DC * dim/cols, simd*cols) tiles:
    tile (row chunk rc, column chunk cc) at word cc*DC + rc, w[rc*simd + r][cc*cols + c] at
    field r*cols + c (folded_proj_walk.sv reads them in this order); cols defaults to simd."""
    cols = simd if cols is None else cols
    w = np.asarray(w)
    dc, nc = w.shape[0] // simd, w.shape[1] // cols
    t = w.reshape(dc, simd, nc, cols)  # (rc, r, cc, c)
    return t.transpose(2, 0, 1, 3).reshape(nc * dc, simd * cols)


def weight_count(cfg: CoreConfig) -> int:
    """The weights the folded engine keeps in its ROMs (:func:`memory_files`): its mechanism's
    (W_Q, W_K; Dense's W_1, W_2; RandInit's R) and W_V, W_O."""
    return sum(n_in * n_out for n_in, n_out in weight_shapes(cfg).values())


def weight_files(cfg: CoreConfig) -> list[str]:
    """The .mem files of the weights (:func:`memory_files`), not the softmax tables."""
    return [f"{name}.mem" for name in weight_shapes(cfg)]


def memory_files(
    cfg: CoreConfig, weights: CoreWeights, simd: int, pe: int, lanes: int
) -> dict[str, str]:
    """The .mem files: the walks' weights in S x S tiles (wv, wo: S x PE, the multiply
    walk's), the mechanism's score ROM (Dense's w2, RandInit's r) as it lays it out."""
    f = derive_formats(cfg)
    mechanism = mechanism_of(cfg)
    scores = dict(mechanism.folded_roms).get("WS_FILE")
    files = {}
    for name, w in weights.as_dict().items():
        if name == scores:
            words = mechanism.score_rom_words(cfg, weights, lanes, simd)
        else:
            words = weight_tiles(w, simd, pe if name in ("wv", "wo") else simd)
        files[f"{name}.mem"] = hex_lines(words, cfg.weight_bits)
    files["exp.mem"] = hex_lines(exp_table(cfg)[:, None], f.exp_bits)
    files["recip.mem"] = hex_lines(recip_table(cfg)[:, None], f.recip_bits)
    return files


# -- generation -----------------------------------------------------------------------------------
def wrapper_sv(cfg: CoreConfig, top: str, params: dict[str, int], cycles: dict) -> str:
    """The generated top: folded_attention with this config's parameters, nothing else."""
    p = params
    lines = [
        f"// {top}: the folded {cfg.kind!r} attention core (folded_attention with its parameters).",
        "// GENERATED by eatt.rtl_sim.folded from the config: do not edit. The weights and",
        "// tables are the .mem files next to this file; docs/folded.md describes the engine.",
        "// Bit-exact with eatt.quant.golden.GoldenCore(cfg, weights).forward(x, y, masks).",
        f"// lanes {p['LANES']}, simd {p['SIMD']}, pe {p['PE']}: latency {cycles['latency']} "
        f"cycles, II {cycles['ii']} cycles per vector",
        "",
        "`default_nettype none",
        "",
        f"module {top} (",
        "    input  wire logic clk,",
        "    input  wire logic rst,",
        f"    input  wire logic [{p['SIMD'] * p['IN_W'] - 1}:0] s_axis_tdata,",
        "    input  wire logic s_axis_tvalid,",
        "    output logic      s_axis_tready,",
        "    input  wire logic s_axis_tlast,",
        f"    input  wire logic [{p['LEN_W'] + p['OFF_W'] - 1}:0] s_axis_tuser,",
        f"    output logic      [{p['SIMD'] * p['OUT_W'] - 1}:0] m_axis_tdata,",
        "    output logic      m_axis_tvalid,",
        "    input  wire logic m_axis_tready,",
        "    output logic      m_axis_tlast",
        ");",
        "    folded_attention #(",
    ]
    entries = [f"        .{k}({v})" for k, v in params.items()]
    entries += [f'        .{k}("{v}")' for k, v in mem_files(cfg).items()]
    lines.append(",\n".join(entries))
    lines += [
        "    ) u_engine (",
        "        .clk(clk), .rst(rst),",
        "        .s_axis_tdata(s_axis_tdata), .s_axis_tvalid(s_axis_tvalid),",
        "        .s_axis_tready(s_axis_tready), .s_axis_tlast(s_axis_tlast),",
        "        .s_axis_tuser(s_axis_tuser),",
        "        .m_axis_tdata(m_axis_tdata), .m_axis_tvalid(m_axis_tvalid),",
        "        .m_axis_tready(m_axis_tready), .m_axis_tlast(m_axis_tlast)",
        "    );",
        "endmodule",
        "",
        "`default_nettype wire",
        "",
    ]
    return "\n".join(lines)


def generate_folded_rtl(
    cfg: CoreConfig,
    weights: CoreWeights,
    out_dir: str | os.PathLike,
    options: BuildOptions | None = None,
) -> dict:
    """Write the folded RTL of one core into out_dir (all or nothing, as every RTL folder);
    return the metadata (also in metadata.json). Of the options: ``folding`` {lanes, simd, pe,
    macro_rows}, each optional (lanes and simd: default_folding; pe: simd); memories of at
    least macro_rows words are memory macros (folded_ram.sv, folded_rom.sv; eatt power prices
    them per access), smaller ones flip-flops. ``adder_levels`` N >= 1 pipelines the engine for
    a clock (registered block-RAM reads; the walks' tiles and the score lanes with their terms
    and adder trees registered every N levels; the lanes' max and N x R registered; walk_drain
    and attention_fill in rtl_sim/folding.py count the cycles)."""
    options = BuildOptions() if options is None else options
    folding = dict(options.folding or {})
    unknown = sorted(set(folding) - {"lanes", "simd", "pe", "macro_rows"})
    if unknown:
        raise ValueError(f"folding: unknown key {unknown[0]!r} (lanes, simd, pe, macro_rows)")
    macro_rows = folding.get("macro_rows", MACRO_ROWS)
    if isinstance(macro_rows, bool) or not isinstance(macro_rows, int) or macro_rows < 1:
        raise ValueError(f"macro_rows: a positive number of words, got {macro_rows!r}")
    options.check()  # adder_levels
    adder_levels = options.adder_levels
    default = default_folding(cfg)
    lanes, simd, pe = (folding.get(k) for k in ("lanes", "simd", "pe"))
    lanes = default["lanes"] if lanes is None else lanes
    simd = default["simd"] if simd is None else simd
    check_folding(cfg, lanes, simd, pe)
    pe = simd if pe is None else pe
    weights.check(cfg)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a directory")
    top = f"{cfg.kind}_{LEVEL}"
    params = {**folded_parameters(cfg, lanes, simd, pe), "MACRO_ROWS": macro_rows}
    params["ADDER_LEVELS"] = adder_levels
    cycles = folded_cycles(cfg, lanes, simd, pe, adder_levels)
    generated = {f"{top}.sv": wrapper_sv(cfg, top, params, cycles)}
    mems = memory_files(cfg, weights, simd, pe, lanes)
    generated.update(mems)
    meta = {
        "generator": "eatt.rtl_sim.folded",
        "level": LEVEL,
        "kind": cfg.kind,
        "config": cfg.to_dict(),
        "top": top,
        "sources": [f"{top}.sv", *HAND_WRITTEN],
        "memory_files": sorted(mems),
        "weights": "weights.npz",
        "interface": folded_interface(cfg, lanes, simd),
        "folding": {"lanes": lanes, "simd": simd, "pe": pe},
        "reuse_factor": cfg.reuse_factor,
        "adder_levels": adder_levels,
        "cycles": cycles,
        "cycle_formula": CYCLE_FORMULA,
        "latency_cycles": cycles["latency"],
        "ii_cycles": cycles["ii"],
        "parameters": params,
        "formats": derive_formats(cfg).to_dict(),
    }
    write_rtl_dir(out, generated, HAND_WRITTEN, weights, meta)
    return meta


def generate_core_levels(
    cfg: CoreConfig,
    weights: CoreWeights,
    out_dir: str | os.PathLike,
    level: str = "alignment",
    options: BuildOptions | None = None,
) -> dict:
    """The core unit's generate_rtl stage: level folded here (generate_folded_rtl; the
    folding: options.folding, else the one the config's reuse_factor selects, else
    default_folding), the unrolled levels in rtl_sim/unrolled.py (generate_core_rtl)."""
    options = BuildOptions() if options is None else options
    folding = options.folding
    reuse = cfg.reuse_factor
    if (level == LEVEL or reuse > 1) and not mechanism_of(cfg).folded:
        raise ValueError(
            f"kind: the folded engine has no {cfg.kind} mechanism yet (the unrolled levels "
            "alignment and attention have it)"
        )
    if level != LEVEL:
        if folding:
            raise ValueError("--lanes/--simd/--pe: only for --level folded")
        if reuse > 1:
            raise ValueError(
                f"reuse_factor: {reuse} folds the core: --level folded (or no --level) builds "
                f"it; the {level} level is the unrolled core (reuse_factor 1)"
            )
        return generate_core_rtl(cfg, weights, out_dir, level, options)
    if options.datapath:
        raise ValueError("eatt_datapath: the folded level has one E-ATT datapath")
    if folding and reuse > 1:
        raise ValueError(
            f"--lanes/--simd/--pe: the config's reuse_factor {reuse} sets the folding; give one "
            f"of them"
        )
    if reuse > 1:  # (no folding given)
        options = replace(options, folding=folding_for_reuse(cfg, reuse))
    return generate_folded_rtl(cfg, weights, out_dir, options)


# -- simulation -----------------------------------------------------------------------------------
def simulate_core_levels(
    out_dir: str | os.PathLike,
    vectors: int = 1000,
    seed: int = 0,
    build_dir: str | os.PathLike | None = None,
    inputs: tuple | None = None,
    simulator: str = "verilator",
    lock_timeout: float | None = None,
) -> dict:
    """The core unit's simulate stage: level folded here, the others in sim_run.simulate_core."""
    out = Path(out_dir).resolve()
    args = dict(vectors=vectors, seed=seed, build_dir=build_dir, inputs=inputs)
    args.update(simulator=simulator, lock_timeout=lock_timeout)
    if load_metadata(out)["level"] != LEVEL:
        return simulate_core(out, **args)
    return simulate_folded(out, **args)


#: vectors of the run with random stalls on both streams
STALL_VECTORS = 16


def simulate_folded(
    out_dir: str | os.PathLike,
    vectors: int = 200,
    seed: int = 0,
    build_dir: str | os.PathLike | None = None,
    inputs: tuple | None = None,
    simulator: str = "verilator",
    lock_timeout: float | None = None,
) -> dict:
    """Simulate a folded RTL folder on `vectors` vectors (edge vectors first, then random ones,
    their masks from golden edge_masks / random_masks; or the given (x, y[, masks])) through
    rtl_sim/tb/test_folded.py, and compare every output with GoldenCore.forward.

    Three runs: every vector back to back with no stall (each vector's first input and output
    beat against folded_schedule: the overlapped phases' hand-over; II: the gap between the
    last two vectors), the first
    STALL_VECTORS again with random pauses on both streams (AXI4-Stream backpressure), and a
    reset in the middle of a vector followed by one clean vector (alone in the engine: its
    latency)."""
    out = Path(out_dir).resolve()
    meta = load_metadata(out)
    cfg = CoreConfig.from_dict(meta["config"], source=str(out / "metadata.json"))
    golden = GoldenCore(cfg, load_weights(out, meta))
    x, y, masks = core_vectors(cfg, vectors, seed, inputs)
    expected = golden.forward(x, y, masks=masks)

    with sim_run(out, meta, simulator, build_dir, lock_timeout) as sr:
        run = sr.dir
        for name in meta["memory_files"]:  # $readmemh reads them from the run's folder
            shutil.copyfile(out / name, run / name)
        job = write_vectors_job(
            run,
            seed,
            meta,
            x,
            y,
            masks,
            parameters=meta["parameters"],
            ii_cycles=meta["ii_cycles"],
            timing_vectors=max(len(x), SETTLED_VECTORS),
            # a top around the engine (metadata "wrapper": a pin wrapper's register slices)
            # moves the beats by its slices: its latency is checked, not the engine's schedule
            schedule=None
            if meta.get("wrapper")
            else folded_schedule(
                cfg,
                vectors=max(len(x), SETTLED_VECTORS),
                adder_levels=meta.get("adder_levels", 0),
                **meta["folding"],
            ),
            bubble_vectors=min(len(x), STALL_VECTORS),
        )
        tb = sr.test(meta["top"], "test_folded", seed, f"{len(x)} vectors")
        got = np.load(run / "got.npy").reshape(expected.shape)
        nb = job["bubble_vectors"]
        got_stalls = np.load(run / "got_bubbles.npy").reshape(expected[:nb].shape)
        after_reset = np.asarray(tb.pop("reset_output")).reshape(expected[0].shape)
        runs = {
            "stream": (expected, got),
            "stalls": (expected[:nb], got_stalls),
            "reset": (expected[:1], after_reset[None]),
        }
        compared, wrong, first = compare_runs(runs, len(x))
        vs_model = compare_model(inputs_model(inputs), got, cfg.kind)
        result = {
            "level": LEVEL,
            "kind": meta["kind"],
            "top": meta["top"],
            "folding": meta["folding"],
            "vectors": int(len(x)),
            "mismatches": int(wrong.sum()),
            "mismatched_elements": compared["stream"]["mismatched_elements"],
            "first_mismatch": first,
            "stall_vectors": nb,
            "latency_cycles": tb["latency_cycles"],
            "ii_cycles": tb["ii_cycles"],
            "stream_cycles": tb["stream_cycles"],
            "metadata_latency_cycles": meta["latency_cycles"],
            "metadata_ii_cycles": meta["ii_cycles"],
            # every vector's first input and output beat where folded_schedule puts them
            "cycles_match": bool(tb["schedule_match"])
            and tb["latency_cycles"] == meta["latency_cycles"],
            "reset_ok": tb.get("reset_ok", False),
            # the RTL's output codes of the stream run, one row a vector (numpy .npy)
            "outputs": str(run / "got.npy"),
            **({"vs_model": vs_model} if vs_model else {}),
            **sr.fields(),
        }
        sr.publish(result)
    return result
