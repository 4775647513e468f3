"""E-ATT vs dot: the folded engine's alignment datapath, at equal throughput (issue 19's target
"E-ATT alignment <= 0.5x dot's alignment LUTs, dot's products in DSP48E1 counted").

The paper's alignment is what derives the attention scores: the Q and K projections and the
score function (E-ATT Table 2: vanilla 2ld^2 + l^2d multiplications). In the folded engine
(docs/folded.md) that is, per kind, a SIMD x SIMD projection tile (E-ATT: the select tile,
inputs binarized (x > tau) choosing weight rows to add; dot: the multiply tile) and LANES
score lanes (E-ATT: -sum |q - k|; dot: sum q * k), the same leaves (rtl_sim/rtl/folded_proj_tile.sv,
folded_score_lane.sv) with the engine's own parameters (eatt.rtl_sim.folded.folded_parameters),
so both project Q/K and score at the same rate. The rest of the engine is left out: the
memories, the walks' counters and the accumulators are alike in both kinds, and V, O, the
softmax and the value weighting are the attention level's (bench/folded_compare.py). Dot's tile
takes its input at IN_W bits here (in the whole engine it is as wide as the attention outputs,
because it computes O too), which favours dot slightly.

Each kind's leaves are synthesized as one combinational module with Yosys synth_xilinx (xc7),
with DSP48E1 and all-fabric (-nodsp); LUT-equivalents count a DSP48E1 as
eatt.sweep_report.DSP_LUTS LUTs (130: the LUTs a DSP48E1 replaces in our own cores' -nodsp
runs). Beside each ratio: the paper's analytic alignment energy ratio for the same (l, d).

Usage: ``python bench/folded_alignment.py [--points small|paper|all] [--out PATH]``: writes
PATH (default bench/results/folded_alignment.json), .md and .png. ``paper`` is (l 22, d 512,
8 heads) at the two foldings of bench/sweep_paper.yaml; ``small`` two toy sizes (seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from eatt.config import CoreConfig, atomic_write_text
from eatt.mechanisms import MECHANISMS, mechanism_of
from eatt.model import energy
from eatt.rtl_sim.folded import check_folding, folded_parameters
from eatt.rtl_sim.resources import resources
from eatt.sweep_report import DSP_LUTS

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
RTL = ROOT / "rtl_sim" / "rtl"
LEAVES = ("folded_proj_tile.sv", "folded_score_lane.sv", "folded_adder_tree.sv")
TOP = "alignment_leaves"
#: (len, dim, heads, lanes, simd, E-ATT pe, all-fabric too): the foldings of
#: examples/sweep_folded.yaml's and bench/sweep_paper.yaml's rows (pe only sizes E-ATT's V/O
#: tile, not its alignment); dot's all-fabric leaves at lanes 11 / simd 16 (432 products) were
#: still in ABC after 16 minutes, so that point is synthesized with DSP48E1 only
POINTS = {
    "small": [(4, 8, 2, 2, 2, 1, True), (8, 16, 2, 4, 4, 2, True)],
    "paper": [(22, 512, 8, 2, 8, 4, True), (22, 512, 8, 11, 16, 8, False)],
}
POINTS["all"] = POINTS["small"] + POINTS["paper"]
KINDS = ("eatt", "vanilla")
CELLS = ("LUT", "CARRY4", "DSP48E1")


def leaves_sv(p: dict[str, int]) -> str:
    """The alignment leaves of one kind as one module: E-ATT's binarization of the input
    (Eq. 4, as folded_proj_walk.sv: x > tau), the SIMD x SIMD projection tile and LANES score
    lanes, with the engine's parameters ``p`` (folded_parameters)."""
    select = int(p["SCORE"] == MECHANISMS["eatt"].rtl_score)  # 1: E-ATT's select walk
    simd, lanes, qk, score = p["SIMD"], p["LANES"], p["QK_W"], p["SCORE_W"]
    a_w, w_w, acc, tau = p["IN_W"], p["W_W"], p["ACC_W"], p["TAU"]
    what = "E-ATT" if select else "dot"
    return f"""`default_nettype none
// The folded engine's alignment datapath ({what}), written by bench/folded_alignment.py
module {TOP} (
    input  wire logic [{simd * a_w}-1:0]           a,
    input  wire logic [{simd * simd * w_w}-1:0]    w,
    output logic      [{simd * acc}-1:0]           part,
    input  wire logic [{simd * qk}-1:0]            q,
    input  wire logic [{lanes * simd * qk}-1:0]    k,
    output logic      [{lanes * score}-1:0]        s
);
    logic [{simd}-1:0] sel;
    for (genvar r = 0; r < {simd}; r++) begin : g_sel
        logic signed [{a_w}-1:0] x;
        assign x = a[r*{a_w} +: {a_w}];
        assign sel[r] = {"(32'(x) > " + str(tau) + ")" if select else "1'b0"};
    end
    folded_proj_tile #(.SIMD({simd}), .COLS({simd}), .A_W({a_w}), .W_W({w_w}), .ACC_W({acc}),
                       .SELECT({select})) u_tile (.sel(sel), .a(a), .w(w), .part(part));
    for (genvar l = 0; l < {lanes}; l++) begin : g_lane
        folded_score_lane #(.SIMD({simd}), .QK_W({qk}), .SCORE_W({score}), .L1({select}))
            u_score (.q(q), .k(k[l*{simd * qk} +: {simd * qk}]), .part(s[l*{score} +: {score}]));
    end
endmodule
`default_nettype wire
"""


def measure(kind: str, point: tuple, work: Path) -> dict:
    """Yosys synth_xilinx of one kind's alignment leaves, with DSP48E1 and all-fabric."""
    length, dim, heads, lanes, simd, pe, fabric_too = point
    cfg = CoreConfig.from_dict(
        {"kind": kind, "len_q": length, "len_k": length, "dim": dim, "heads": heads}
    )
    pe = pe if mechanism_of(kind).binarized else simd  # a multiply walk: E-ATT's
    check_folding(cfg, lanes, simd, pe)
    params = folded_parameters(cfg, lanes, simd, pe)
    folder = work / f"{kind}-{length}x{dim}x{heads}-l{lanes}s{simd}"
    folder.mkdir(parents=True)
    for leaf in LEAVES:
        shutil.copy(RTL / leaf, folder / leaf)
    (folder / f"{TOP}.sv").write_text(leaves_sv(params))
    # an RTL folder as eatt.rtl_sim.resources reads one (no weights: the tile takes them as input)
    (folder / "weights.npz").write_bytes(b"")
    meta = {"top": TOP, "sources": [f"{TOP}.sv", *LEAVES], "config": cfg.to_dict(),
            "level": "alignment leaves", "weights": "weights.npz", "interface": {}}  # fmt: skip
    (folder / "metadata.json").write_text(json.dumps(meta))
    fabric = resources(folder)
    nodsp = resources(folder, nodsp=True) if fabric_too else None
    row = {k: fabric[k] for k in CELLS}
    row["LUT_equiv"] = fabric["LUT"] + DSP_LUTS * fabric["DSP48E1"]
    row["LUT_nodsp"] = nodsp["LUT"] if nodsp else None
    row["CARRY4_nodsp"] = nodsp["CARRY4"] if nodsp else None
    row["parameters"] = {k: params[k] for k in ("SIMD", "LANES", "IN_W", "W_W", "ACC_W", "QK_W")}
    row["parameters"]["SCORE_W"] = params["SCORE_W"]
    row["yosys_seconds"] = round(fabric["seconds"] + (nodsp["seconds"] if nodsp else 0), 1)
    return row


def compare(points: list[tuple], work: Path, log=print) -> list[dict]:
    rows = []
    for point in points:
        length, dim, heads, lanes, simd, pe, _ = point
        row = {"len": length, "dim": dim, "heads": heads, "lanes": lanes, "simd": simd, "pe": pe}
        for kind in KINDS:
            start = time.perf_counter()
            row[kind] = measure(kind, point, work)
            log(f"[folded_alignment] {kind} {length}x{dim}x{heads} lanes {lanes} simd {simd}: "
                f"{row[kind]['LUT']} LUT, {row[kind]['DSP48E1']} DSP48E1 "
                f"({time.perf_counter() - start:.0f} s)")  # fmt: skip
        e, v = row["eatt"], row["vanilla"]
        row["ratios"] = {
            k: round(e[k] / v[k], 4) for k in ("LUT_equiv", "LUT_nodsp") if e[k] and v[k]
        }
        ratios = energy.energy_ratios(length, dim)["eatt"]["alignment"]
        row["paper_alignment_energy_ratio"] = round(ratios["asic"] / 100, 4)
        rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [
        "The folded engine's alignment datapath (the Q/K projection tile and the score lanes), "
        f"E-ATT vs dot at the same folding; LUT-eq = LUT + {DSP_LUTS} x DSP48E1 (Yosys "
        "synth_xilinx, xc7). Target: E-ATT <= 0.5x dot in LUT-eq.",
        "",
        "| size (len, dim, heads) | lanes, simd | E-ATT LUT / CARRY4 / DSP / LUT-eq | "
        "dot LUT / CARRY4 / DSP / LUT-eq | LUT-eq ratio | all-fabric LUT E-ATT / dot (ratio) | "
        "paper's analytic alignment energy ratio |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        e, v = r["eatt"], r["vanilla"]

        def cells(m: dict) -> str:
            return f"{m['LUT']:,} / {m['CARRY4']:,} / {m['DSP48E1']:,} / {m['LUT_equiv']:,}"

        ratio = r["ratios"]["LUT_equiv"]
        verdict = "met" if ratio <= 0.5 else "missed"
        fabric = (
            f"{e['LUT_nodsp']:,} / {v['LUT_nodsp']:,} ({r['ratios']['LUT_nodsp']:.3f})"
            if "LUT_nodsp" in r["ratios"]
            else "not asked"
        )
        lines.append(
            f"| {r['len']}, {r['dim']}, {r['heads']} | {r['lanes']}, {r['simd']} | {cells(e)} | "
            f"{cells(v)} | **{ratio:.3f}** ({verdict}) | {fabric} | "
            f"{r['paper_alignment_energy_ratio']:.4f} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['len']}x{r['dim']}x{r['heads']}\nl{r['lanes']} s{r['simd']}" for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 3, 3.6))
    width = 0.38
    for i, (kind, name) in enumerate((("eatt", "E-ATT"), ("vanilla", "dot"))):
        ax.bar([j + (i - 0.5) * width for j in x], [r[kind]["LUT_equiv"] for r in rows],
               width, label=name)  # fmt: skip
    ax.set_xticks(list(x), labels)
    ax.set_yscale("log")
    ax.set_ylabel(f"LUT-eq (LUT + {DSP_LUTS} x DSP48E1)")
    ax.set_title("folded engine: alignment datapath at equal throughput")
    ax.legend()
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    return str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", choices=sorted(POINTS), default="all")
    ap.add_argument("--out", type=Path, default=RESULTS / "folded_alignment.json")
    args = ap.parse_args(argv)
    if args.out.suffix != ".json":
        print(f"folded_alignment: --out {args.out}: expected a .json path", file=sys.stderr)
        return 2
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="folded_alignment-") as tmp:
        rows = compare(POINTS[args.points], Path(tmp), log=lambda m: print(m, file=sys.stderr))
    result = {
        "benchmark": "folded_alignment",
        "points": args.points,
        "dsp_luts": DSP_LUTS,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "seconds": round(time.perf_counter() - start, 1),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
    atomic_write_text(args.out.with_suffix(".md"), markdown(rows))
    plot(rows, args.out.with_suffix(".png"))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
