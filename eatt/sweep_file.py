"""The sweep file of `eatt sweep` (YAML, docs/sweep.md) read into one spec per point.

    load_sweep(path) / make_sweep(data, where, folder, file)
        {"file", "dsp_luts", "points": [spec, ...]}: each point's overrides, its whole config,
        its stages, its key (a hash of everything that decides the result), its unique ID and
        its Ray resources

A core sweep overrides a base core's keys (a grid and/or a list of points); a model sweep
(``run``) overrides "section.key" of an `eatt train` run config. Every error is a SweepError,
one line naming the file and the key. eatt.sweep runs the specs; it re-exports these names.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import fields
from pathlib import Path

from eatt.config import (
    ConfigError,
    CoreConfig,
    config_class,
    default_config,
    first_line,
    kinds,
    load_config,
    read_mapping,
)
from eatt.model.train import load_run_config
from eatt.sweep_point import MODEL_STAGES, NEEDS_RTL, STAGES, file_digest
from eatt.sweep_report import DSP_LUTS

#: per-point keys besides the core config's: where and how the point runs
POINT_KEYS = (
    "backend",
    "level",
    "folding",
    "adder_levels",
    "stages",
    "abc_verify",
    "name",
    "cpus",
    "memory_gb",
    "timeout_s",
)
#: keys of a sweep file
SWEEP_KEYS = (
    "base",
    "run",
    "beam",
    "split",
    "inputs",
    "grid",
    "points",
    "vectors",
    "seed",
    "weights_seed",
    "dsp_luts",
    *POINT_KEYS,
)
LEVELS = ("alignment", "attention", "folded")
#: hls4ml backends of the hls stage (eatt.hls.project.BACKENDS)
HLS_BACKENDS = ("vitis", "vivado")
DEFAULTS = {
    "backend": "vitis",
    "level": None,  # folded where the point's reuse_factor > 1, else attention
    "folding": None,
    "adder_levels": 0,
    "abc_verify": True,
    "name": None,
    "cpus": 1,
    "memory_gb": 2.0,
    "timeout_s": None,
    "stages": ["golden", "rtl", "sim"],
    "vectors": 100,
    "seed": 1,
    "weights_seed": 1,
}


class SweepError(ValueError):
    """A sweep file or option eatt cannot run; one line naming the file or flag."""


# -- the sweep file ---------------------------------------------------------------------------
def _check_point_keys(where: str, over: dict) -> None:
    known = set(POINT_KEYS) | _config_keys()
    for key in over:
        if key not in known:
            raise SweepError(
                f"{where}: unknown key '{key}' (a core config key or one of "
                f"{', '.join(POINT_KEYS)})"
            )
    if "backend" in over and over["backend"] not in HLS_BACKENDS:
        raise SweepError(
            f"{where}: backend: one of {', '.join(HLS_BACKENDS)} (hls4ml), got {over['backend']!r}"
        )
    if "level" in over and over["level"] not in LEVELS:
        raise SweepError(f"{where}: level: one of {', '.join(LEVELS)}, got {over['level']!r}")
    if over.get("folding") is not None:
        f = over["folding"]
        if not isinstance(f, dict) or set(f) - {"lanes", "simd", "pe"}:
            raise SweepError(f"{where}: folding: a mapping of lanes, simd and pe, got {f!r}")
        for k, v in f.items():
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 2**31 - 1:
                raise SweepError(f"{where}: folding.{k}: an integer >= 1, got {v!r}")
    if "abc_verify" in over and not isinstance(over["abc_verify"], bool):
        raise SweepError(f"{where}: abc_verify: true or false, got {over['abc_verify']!r}")
    name = over.get("name")
    if name is not None and not (isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9._+-]+", name)):
        raise SweepError(f"{where}: name: letters, digits and . _ + - only, got {name!r}")
    for key in ("cpus", "memory_gb", "timeout_s"):
        v = over.get(key)
        if v is not None and (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not math.isfinite(v)  # NaN passes `v <= 0` and reaches Ray
            or v <= 0
        ):
            raise SweepError(f"{where}: {key}: a positive finite number, got {v!r}")


def _config_keys() -> set[str]:
    """Every core config key of any kind (a point's kind decides which are valid)."""
    return {f.name for k in kinds() for f in fields(config_class(k))}


def _grid(where: str, grid, known: set | None = None, dotted: bool = False) -> list[dict]:
    """Every combination of the grid's axes, in file order (the last axis varies fastest). An
    axis named by an override key lists that key's values; any other name lists mappings of
    overrides (one axis that sets several keys, like a size)."""
    if grid is None:
        return []
    if not isinstance(grid, dict) or not grid:
        raise SweepError(f"{where}: grid: a mapping of axis names to lists of values")
    combos: list[dict] = [{}]
    known = set(POINT_KEYS) | _config_keys() if known is None else known
    for axis, values in grid.items():
        if not isinstance(values, list) or not values:
            raise SweepError(f"{where}: grid.{axis}: a non-empty list of values")
        options = []
        for v in values:
            if axis in known or (dotted and "." in axis):
                options.append({axis: v})
            elif isinstance(v, dict):
                options.append(dict(v))
            else:
                raise SweepError(
                    f"{where}: grid.{axis}: '{axis}' is not a config key, so its values must be "
                    f"mappings of keys (like {{len_q: 4, dim: 8}}), got {v!r}"
                )
        combos = [{**c, **o} for c in combos for o in options]
    return combos


def _slug(over: dict) -> str:
    parts = []
    if "kind" in over:
        parts.append(str(over["kind"]))
    if "len_q" in over or "len_k" in over:
        parts.append(f"l{over.get('len_q', '')}x{over.get('len_k', '')}")
    if "dim" in over:
        parts.append(f"d{over['dim']}")
    if "heads" in over:
        parts.append(f"h{over['heads']}")
    if "level" in over:
        parts.append(str(over["level"]))
    if over.get("folding"):
        f = over["folding"]
        parts.append(f"p{f.get('lanes', '')}s{f.get('simd', '')}")
        if f.get("pe") is not None:
            parts[-1] += f"pe{f['pe']}"
    skip = {"kind", "len_q", "len_k", "dim", "heads", "level", "folding", "stages", "name"}
    parts += [f"{k}{v}" for k, v in over.items() if k not in skip]
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", "-".join(parts))[:60]


def _file(where: str, key: str, name: str, folder: Path, what: str) -> Path:
    path = (folder / name) if not Path(name).is_absolute() else Path(name)
    if not path.is_file():
        raise SweepError(f"{where}: {key}: {name}: no such {what}")
    return path.resolve()


def _base(where: str, base, folder: Path) -> tuple[dict, dict]:
    """(the base config, the trained layer it comes from: {"onnx", "sha256"} or {})."""
    if base is None:
        return default_config().to_dict(), {}
    if isinstance(base, dict):
        try:
            return CoreConfig.from_dict(base, source=f"{where}: base").to_dict(), {}
        except ConfigError as err:
            raise SweepError(str(err)) from None
    if isinstance(base, str) and base.endswith(".onnx"):  # a trained layer (eatt export --layer)
        path = _file(where, "base", base, folder, "layer file (eatt export --layer writes one)")
        from eatt.quant.export import load_core  # onnx, qonnx

        try:
            cfg, _ = load_core(path)
        except ValueError as err:
            raise SweepError(f"{where}: base: {first_line(err)}") from None
        return cfg.to_dict(), {"onnx": str(path), "sha256": file_digest(path)}
    if isinstance(base, str):
        path = _file(where, "base", base, folder, "config file")
        try:
            return load_config(path).to_dict(), {}
        except (ConfigError, ValueError) as err:
            raise SweepError(f"{where}: base: {first_line(err)}") from None
    raise SweepError(f"{where}: base: a config file, a layer's .onnx or a mapping, got {base!r}")


#: the config keys a trained layer's point may change: its weights fix the function
LAYER_KEYS = CoreConfig.HARDWARE_KEYS


def _stages(where: str, stages) -> list[str]:
    """The stages in their fixed order, with rtl where a stage reads the RTL."""
    if not isinstance(stages, list) or not stages or any(s not in STAGES for s in stages):
        raise SweepError(f"{where}: stages: a list of {', '.join(STAGES)}, got {stages!r}")
    if any(s in NEEDS_RTL for s in stages) and "rtl" not in stages:
        stages = [*stages, "rtl"]
    return [s for s in STAGES if s in stages]


def _default_level(config: dict) -> str:
    reuse = config.get("reuse_factor", 1)
    return "folded" if isinstance(reuse, int) and reuse > 1 else "attention"


def load_sweep(path: str | os.PathLike) -> dict:
    """The sweep file as :func:`make_sweep` gives it; SweepError names the file and the key."""
    path = Path(path)
    try:
        data = read_mapping(path)
    except (ConfigError, ValueError, OSError) as err:
        raise SweepError(first_line(err)) from None
    return make_sweep(data, str(path), path.parent, file=str(path.resolve()))


#: a model sweep's sections of the run config (`eatt train`) its points override as
#: "section.key"
RUN_SECTIONS = ("model", "train", "data")
#: the keys of a point of a model sweep besides "section.key"
RUN_POINT_KEYS = ("stages", "name", "cpus", "memory_gb", "timeout_s")
SPLITS = ("test", "dev", "train")


def _run_overrides(where: str, over: dict) -> dict:
    """A model sweep's point: its "section.key" overrides as nested sections."""
    nested: dict = {}
    for key, value in over.items():
        if key in RUN_POINT_KEYS:
            continue
        section, _, name = key.partition(".")
        if section not in RUN_SECTIONS or not name:
            raise SweepError(
                f"{where}: unknown key '{key}' (a model sweep changes model.KEY, train.KEY or "
                f"data.KEY of its run config, or one of {', '.join(RUN_POINT_KEYS)})"
            )
        nested.setdefault(section, {})[name] = value
    return nested


def _finish(spec: dict, merged: dict, slug: str, at: str, seen: dict) -> dict:
    """A point's spec made whole: its key (a hash of everything that decides the result, so
    before the keys that only say where it runs), its unique ID, and its Ray resources."""
    spec["key"] = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    index = spec["index"]
    spec["id"] = merged["name"] or f"p{index:03d}" + (f"-{slug}" if slug else "")
    if spec["id"] in seen:
        raise SweepError(f"{at}: name: {spec['id']!r} is taken by point {seen[spec['id']]}")
    seen[spec["id"]] = index
    spec.update(cpus=merged["cpus"], memory_gb=merged["memory_gb"], timeout_s=merged["timeout_s"])
    return spec


def _dsp_luts(where: str, data: dict) -> float:
    dsp_luts = data.get("dsp_luts", DSP_LUTS)
    if isinstance(dsp_luts, bool) or not isinstance(dsp_luts, (int, float)) or dsp_luts < 0:
        raise SweepError(f"{where}: dsp_luts: a number >= 0, got {dsp_luts!r}")
    return dsp_luts


def _model_sweep(data: dict, where: str, folder: Path, file: str | None) -> dict:
    """make_sweep of a model sweep (``run``: an `eatt train` run config; stages train, bleu)."""
    if "base" in data or "inputs" in data:
        raise SweepError(f"{where}: run: a model sweep has no base or inputs (a core sweep does)")
    path = _file(where, "run", data["run"], folder, "run config (eatt train takes one)")
    try:
        run = read_mapping(path)
        load_run_config(path)  # the base run must be valid; a point's is checked when it runs
    except (ConfigError, ValueError) as err:
        raise SweepError(f"{where}: run: {first_line(err)}") from None
    beam, split = data.get("beam", 4), data.get("split", "test")
    if isinstance(beam, bool) or not isinstance(beam, int) or not 1 <= beam <= 256:
        raise SweepError(f"{where}: beam: an integer in [1, 256], got {beam!r}")
    if split not in SPLITS:
        raise SweepError(f"{where}: split: one of {', '.join(SPLITS)}, got {split!r}")
    overs = _grid(where, data.get("grid"), known=set(RUN_POINT_KEYS), dotted=True)
    overs += [dict(p) for p in (data.get("points") or [])] or ([] if overs else [{}])
    points, seen = [], {}
    for index, over in enumerate(overs):
        at = f"{where}: point {index}"
        nested = _run_overrides(at, over)
        _check_point_keys(at, {k: v for k, v in over.items() if k in RUN_POINT_KEYS})
        merged = {**DEFAULTS, "stages": ["train", "bleu"], **data, **over}
        stages = merged["stages"]
        if not isinstance(stages, list) or not stages or set(stages) - set(MODEL_STAGES):
            raise SweepError(f"{at}: stages: a model sweep's are {', '.join(MODEL_STAGES)}")
        spec = {
            "index": index,
            "overrides": over,
            "run": {sec: {**(run.get(sec) or {}), **nested.get(sec, {})} for sec in RUN_SECTIONS},
            "base": {},
            "config": {},
            "level": None,
            "folding": None,
            "stages": [s for s in MODEL_STAGES if s in stages or s == "train"],
            "beam": beam,
            "split": split,
        }
        slug = re.sub(r"[^A-Za-z0-9._+-]+", "_", "-".join(f"{v}" for v in over.values()))[:60]
        points.append(_finish(spec, merged, slug, at, seen))
    dsp_luts = data.get("dsp_luts", DSP_LUTS)
    return {"file": file, "dsp_luts": dsp_luts, "points": points}


def make_sweep(data: dict, where: str, folder: Path, file: str | None = None) -> dict:
    """{"file", "dsp_luts", "points": [point spec, ...]} of a sweep file's mapping (``where``
    names it in errors, ``folder`` is where a base config file is looked for). A point's core
    config is checked when it runs: an impossible point is a failed record, not a refused
    sweep."""
    for key in data:
        if key not in SWEEP_KEYS:
            raise SweepError(f"{where}: unknown key '{key}' (known: {', '.join(SWEEP_KEYS)})")
    if "run" in data:
        return _model_sweep(data, where, folder, file)
    for key in ("beam", "split"):
        if key in data:
            raise SweepError(f"{where}: {key}: for a model sweep (run: RUN.yaml) only")
    base, layer = _base(where, data.get("base"), folder)
    inputs = None
    if data.get("inputs") is not None:
        if not isinstance(data["inputs"], str):
            got = data["inputs"]
            raise SweepError(f"{where}: inputs: a capture file (eatt capture), got {got!r}")
        path = _file(where, "inputs", data["inputs"], folder, "capture file (eatt capture)")
        inputs = {"path": str(path), "sha256": file_digest(path)}
    for key in ("vectors", "seed", "weights_seed"):
        v = data.get(key, DEFAULTS[key])
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if key == "vectors" else 0):
            raise SweepError(f"{where}: {key}: an integer >= {1 if key == 'vectors' else 0}")
    dsp_luts = _dsp_luts(where, data)
    common = {k: data[k] for k in POINT_KEYS if k in data}
    _check_point_keys(where, common)
    overs = _grid(where, data.get("grid"))
    extra = data.get("points") or []
    if not isinstance(extra, list) or any(not isinstance(p, dict) for p in extra):
        raise SweepError(f"{where}: points: a list of mappings of overrides")
    overs += [dict(p) for p in extra]
    if not overs:
        overs = [{}]
    points, seen = [], {}
    for index, over in enumerate(overs):
        at = f"{where}: point {index}"
        _check_point_keys(at, over)
        fixed = [k for k in over if k not in POINT_KEYS and k not in LAYER_KEYS]
        if layer and fixed:
            raise SweepError(
                f"{at}: {fixed[0]}: the base is a trained layer, whose weights fix its config; "
                f"a point may change {', '.join(LAYER_KEYS)} and {', '.join(POINT_KEYS)}"
            )
        merged = {**DEFAULTS, **common, **over}
        spec = {
            "index": index,
            "overrides": over,
            "base": base,
            "config": {k: v for k, v in over.items() if k not in POINT_KEYS},
            "level": merged["level"] or _default_level({**base, **over}),
            "folding": merged["folding"],
            "adder_levels": merged["adder_levels"],
            "abc_verify": merged["abc_verify"],
            "backend": merged["backend"],
            "stages": _stages(at if "stages" in over else where, merged["stages"]),
            "vectors": data.get("vectors", DEFAULTS["vectors"]),
            "seed": data.get("seed", DEFAULTS["seed"]),
            "weights_seed": data.get("weights_seed", DEFAULTS["weights_seed"]),
            "layer": layer or None,
            "inputs": inputs,
        }
        points.append(_finish(spec, merged, _slug(over), at, seen))
    return {"file": file, "dsp_luts": dsp_luts, "points": points}
