"""The report of an `eatt sweep`: its per-point records as a Markdown table, a JSON summary and
Pareto plots (cycles against LUT equivalents, energy and fabric-only LUTs; energy against BLEU).

Pure: records in, files out (numpy-free arithmetic, matplotlib only when a plot is drawn).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from eatt.config import atomic_write, atomic_write_text

# The LUT cost of one DSP48E1, for LUT equivalents, measured on this project's own cores:
# (LUTs of the Yosys `synth_xilinx -nodsp` run - LUTs of the with-DSP run) / DSP48E1 of the
# with-DSP run = 125-141 over the alignment and attention cores in bench/results/rtl_compare.json
# (126 at alignment 4x8, 141 at attention 4x8).
DSP_LUTS = 130

#: Pareto views: (x key, y key, x label, y label, x better, y better); "min" or "max"
AXES = (
    ("cycles", "LUT_equiv", "cycles per call", "LUT equivalents (LUT + DSP_LUTS x DSP48E1)",
     "min", "min"),
    ("cycles", "energy_pj", "cycles per call", "energy per call (pJ)", "min", "min"),
    ("energy_pj", "bleu", "energy per call (pJ)", "BLEU", "min", "max"),
    ("energy_analytic_pj", "bleu", "attention energy, analytic (pJ)", "BLEU", "min", "max"),
    ("cycles", "LUT_nodsp", "cycles per call", "LUTs, all fabric (-nodsp)", "min", "min"),
)  # fmt: skip

#: metric columns of the Markdown table, in this order (those present in any row)
METRIC_COLUMNS = (
    "cycles",
    "LUT",
    "FF",
    "CARRY4",
    "DSP48E1",
    "BRAM",
    "LUT_equiv",
    "LUT_nodsp",
    "energy_pj",
    "area_um2",
    "fmax_mhz",
    "calls_per_s",
    "pnr_fmax_mhz",
    "pnr_calls_per_s",
    "energy_analytic_pj",
    "bleu",
    "dev_loss",
    "mismatches",
    "hls_mismatches",
)

#: plot style per kind: (colour, marker); other kinds take FALLBACK_STYLES in order
KIND_STYLES = {"eatt": ("tab:green", "o"), "vanilla": ("tab:blue", "s")}
FALLBACK_STYLES = (
    ("tab:orange", "^"),
    ("tab:purple", "D"),
    ("tab:brown", "v"),
    ("tab:pink", "P"),
    ("tab:olive", "X"),
    ("tab:cyan", "*"),
)

REPORT_FILES = {"md": "report.md", "json": "report.json", "png": "pareto.png"}


def lut_equivalents(metrics: dict, dsp_luts: float = DSP_LUTS) -> float | None:
    """LUT + dsp_luts * DSP48E1 (no DSP48E1: none used); None without LUT."""
    lut = _number(metrics.get("LUT"))
    if lut is None:
        return None
    return float(lut + dsp_luts * (_number(metrics.get("DSP48E1")) or 0))


def view_name(view: tuple) -> str:
    return f"{view[0]}_vs_{view[1]}"


def pareto_front(points, x_better: str = "min", y_better: str = "min") -> list[bool]:
    """True where a point (x, y) is not dominated: no other point at least as good in both and
    strictly better in one (equal points are both on the front)."""
    sx, sy = _sign(x_better), _sign(y_better)
    p = [(sx * x, sy * y) for x, y in points]
    return [not any(a <= x and b <= y and (a < x or b < y) for a, b in p) for x, y in p]


def summarize(records: list[dict], dsp_luts: float = DSP_LUTS) -> dict:
    """The JSON-ready summary: counts, one flat row per record (sorted by id), the Pareto fronts
    (ids, for all kinds and per kind) of each view with two or more done points, the failures."""
    records = sorted(records, key=lambda r: str(r["id"]))
    rows, override_keys = [], []
    for r in records:
        overrides = _flatten(r.get("overrides") or {})
        override_keys += [k for k in overrides if k not in override_keys]
        metrics = {k: _clean(v) for k, v in (r.get("metrics") or {}).items()}
        config = r.get("config") or {}
        kind = (
            config.get("kind")
            or (r.get("overrides") or {}).get("kind")
            or (config.get("model") or {}).get("cross")  # a model sweep: its cross-attention
        )
        rows.append(
            {
                "id": r["id"],
                "status": r.get("status"),
                "kind": kind,
                **{k: _clean(v) for k, v in overrides.items() if k != "kind"},
                **metrics,
                "LUT_equiv": lut_equivalents(metrics, dsp_luts),
                "error": r.get("error"),
            }
        )
    fronts = {}
    for view in AXES:
        x_key, y_key, _, _, x_better, y_better = view
        pts = _view_rows(rows, x_key, y_key)
        if len(pts) < 2:
            continue
        front = {"all": _front_ids(pts, x_key, y_key, x_better, y_better)}
        for kind in _kinds(pts):
            mine = [row for row in pts if row["kind"] == kind]
            front[kind] = _front_ids(mine, x_key, y_key, x_better, y_better)
        fronts[view_name(view)] = front
    done = sum(r.get("status") == "done" for r in records)
    return {
        "points": len(records),
        "done": done,
        "failed": len(records) - done,
        "dsp_luts": dsp_luts,
        "override_keys": override_keys,
        "rows": rows,
        "fronts": fronts,
        "failures": [
            {"id": r["id"], "failed_stage": r.get("failed_stage"), "error": r.get("error")}
            for r in records
            if r.get("status") != "done"
        ],
    }


def format_markdown(summary: dict) -> str:
    """report.md: counts, the DSP-to-LUT factor, one table row per point (the override keys that
    vary, the metrics present), front membership of the first view, the failures."""
    rows = summary["rows"]
    candidates = ["kind"] + [k for k in summary.get("override_keys", []) if k != "kind"]
    varying = [k for k in candidates if len({_key(row.get(k)) for row in rows}) > 1]
    metrics = [m for m in METRIC_COLUMNS if any(row.get(m) is not None for row in rows)]
    first = next((v for v in AXES if view_name(v) in summary["fronts"]), None)
    on_front = set(summary["fronts"][view_name(first)]["all"]) if first else set()
    lines = [
        "# eatt sweep report",
        "",
        f"{summary['points']} points: {summary['done']} done, {summary['failed']} failed.",
        "",
        f"LUT equivalents (LUT_equiv) = LUT + {summary['dsp_luts']} x DSP48E1 (one DSP48E1 counted"
        f" as {summary['dsp_luts']} LUTs, measured on this project's cores: -nodsp LUTs minus"
        " with-DSP LUTs, per DSP48E1).",
    ]
    if first:
        lines += ["", f"`*`: on the Pareto front of {first[0]} vs {first[1]} (all kinds)."]
    columns = ["id", "status", *varying, *metrics]
    lines += ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [f"{row['id']}{'*' if row['id'] in on_front else ''}", str(row["status"])]
        cells += [_fmt(row.get(k)) for k in (*varying, *metrics)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    if summary["failures"]:
        lines += ["", "## Failures", ""]
        lines += [
            f"- `{f['id']}` (stage: {f['failed_stage'] or '-'}): {f['error'] or 'no reason given'}"
            for f in summary["failures"]
        ]
    return "\n".join(lines) + "\n"


def plot_pareto(summary: dict, path: str | Path) -> bool:
    """pareto.png: one panel per view with fronts, per kind a colour and marker, dominated points
    faded, each kind's front joined by a step line. False (nothing written) without data."""
    from matplotlib.figure import Figure  # matplotlib: only when a report is plotted

    views = [v for v in AXES if view_name(v) in summary["fronts"]]
    if not views:
        return False
    ncols = min(2, len(views))
    nrows = math.ceil(len(views) / ncols)
    fig = Figure(figsize=(6.0 * ncols, 4.5 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(views) :]:
        ax.set_visible(False)
    kinds = _kinds(summary["rows"])
    extra = iter(FALLBACK_STYLES * (len(kinds) // len(FALLBACK_STYLES) + 1))
    styles = {k: KIND_STYLES.get(k) or next(extra) for k in kinds}
    for ax, view in zip(axes, views, strict=False):
        x_key, y_key, x_label, y_label, x_better, _ = view
        pts = _view_rows(summary["rows"], x_key, y_key)
        front = summary["fronts"][view_name(view)]
        for kind in _kinds(pts):
            color, marker = styles[kind]
            mine = [row for row in pts if row["kind"] == kind]
            on = [row for row in mine if row["id"] in set(front.get(kind, []))]
            off = [row for row in mine if row["id"] not in set(front.get(kind, []))]
            if off:
                ax.scatter(*_xy(off, x_key, y_key), color=color, marker=marker, alpha=0.25)
            ax.scatter(*_xy(on, x_key, y_key), color=color, marker=marker, label=str(kind))
            on.sort(key=lambda row: (row[x_key], row[y_key]))
            where = "post" if x_better == "min" else "pre"
            ax.step(*_xy(on, x_key, y_key), where=where, color=color, linewidth=1.2)
        xs, ys = _xy(pts, x_key, y_key)
        if _wide(xs):
            ax.set_xscale("log")
        if _wide(ys):
            ax.set_yscale("log")
        ax.set_xlabel(x_label.replace("DSP_LUTS", str(summary["dsp_luts"])))
        ax.set_ylabel(y_label.replace("DSP_LUTS", str(summary["dsp_luts"])))
        ax.set_title(f"{y_label.split(' (')[0]} vs {x_label.split(' (')[0]}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, title="front solid, dominated faded", title_fontsize=7)
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110), suffix=".png")
    return True


def write_report(records: list[dict], out_dir: str | Path, dsp_luts: float = DSP_LUTS) -> dict:
    """report.md, report.json (the summary) and pareto.png (when there is something to plot) in
    out_dir; returns {"md", "json", "png" (None when not plotted), "summary"}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(records, dsp_luts)
    png = out_dir / REPORT_FILES["png"]
    if not plot_pareto(summary, png):
        png.unlink(missing_ok=True)  # no stale plot of an earlier run beside this report
        png = None
    atomic_write_text(out_dir / REPORT_FILES["md"], format_markdown(summary))
    atomic_write_text(
        out_dir / REPORT_FILES["json"], json.dumps(summary, indent=2, allow_nan=False) + "\n"
    )
    return {
        "md": str(out_dir / REPORT_FILES["md"]),
        "json": str(out_dir / REPORT_FILES["json"]),
        "png": str(png) if png else None,
        "summary": summary,
    }


def _sign(better: str) -> int:
    if better not in ("min", "max"):
        raise ValueError(f"better must be 'min' or 'max', not {better!r}")
    return 1 if better == "min" else -1


def _number(value) -> float | None:
    """A finite number as a float (numpy scalars too), else None; bools are not numbers."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _clean(value):
    """A strict JSON value: numpy scalars as Python numbers, NaN or infinity as None."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()  # numpy scalar
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _flatten(d: dict, prefix: str = "") -> dict:
    """Nested dicts as one level of dotted keys: {"folding": {"lanes": 2}} -> folding.lanes."""
    flat = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            flat.update(_flatten(v, f"{prefix}{k}."))
        else:
            flat[f"{prefix}{k}"] = v
    return flat


def _view_rows(rows: list[dict], x_key: str, y_key: str) -> list[dict]:
    """Done rows with a number for both keys."""
    return [
        row
        for row in rows
        if row.get("status") == "done"
        and _number(row.get(x_key)) is not None
        and _number(row.get(y_key)) is not None
    ]


def _front_ids(rows, x_key, y_key, x_better, y_better) -> list[str]:
    mask = pareto_front(list(zip(*_xy(rows, x_key, y_key), strict=True)), x_better, y_better)
    return [row["id"] for row, on in zip(rows, mask, strict=True) if on]


def _xy(rows, x_key, y_key) -> tuple[list[float], list[float]]:
    return [float(row[x_key]) for row in rows], [float(row[y_key]) for row in rows]


def _kinds(rows) -> list:
    """Kinds in order: eatt, vanilla, then the others sorted."""
    found = {row.get("kind") for row in rows}
    known = [k for k in KIND_STYLES if k in found]
    return known + sorted(found - set(known), key=str)


def _wide(values: list[float]) -> bool:
    """Spans more than 20x (all positive): plotted on a log scale."""
    return bool(values) and min(values) > 0 and max(values) / min(values) > 20


def _key(value):
    return json.dumps(value, sort_keys=True, default=str)


def _fmt(value) -> str:
    """A table cell: integers with thousands separators, floats to 3 significant digits (at
    least to the unit, with separators, from 1,000), None empty."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    if isinstance(value, int) or value.is_integer():
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"
