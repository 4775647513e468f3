"""An RTL directory on disk: writing it all or nothing, reading and checking it back.

``write_rtl_dir`` writes the generated sources, copies of the hand-written leaves from
rtl_sim/rtl/ (RTL_DIR), weights.npz and metadata.json (docs/rtl.md, "An RTL directory");
``load_metadata`` and ``load_weights`` read a directory back for the simulators, the linters
and the synthesis flows. Every unit's generator (generate.py, folded.py, window.py) writes
through here.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from eatt.config import CoreConfig
from eatt.mechanisms import core_kinds
from eatt.outdir import OutputError, replaced_dir
from eatt.quant.golden import CoreWeights, weight_shapes
from eatt.rtl_sim.procs import try_lock

#: the hand-written SystemVerilog leaves, copied into every RTL directory that uses them
RTL_DIR = Path(__file__).parent / "rtl"
CTRL_FILE = "ap_pipe_ctrl.sv"


#: what an RTL folder held besides its sources before the marker: run results and builds
_LEGACY_RTL_EXTRA = {"metadata.json", "weights.npz", "sim", "sim_build", "synth", "da4ml"}


def _legacy_rtl_dir(path: Path) -> bool:
    """An RTL folder written before the output marker: its metadata.json names our generator
    and it holds nothing but what eatt writes there (a user's file makes it not ours)."""
    try:
        meta = json.loads((path / "metadata.json").read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(meta, dict) or not str(meta.get("generator", "")).startswith(
        ("eatt", "da4ml")
    ):
        return False
    sources = {str(s).split("/")[0] for s in meta.get("sources", [])}
    return {p.name for p in path.iterdir()} <= sources | _LEGACY_RTL_EXTRA


@contextmanager
def _no_sim_running(out: Path):
    """Hold `eatt sim`'s folder lock while the folder is replaced; refuse if a simulation of
    it is running (it would lose its folder halfway)."""
    lock = Path(out) / "sim" / ".lock"
    fd = try_lock(lock) if lock.is_file() else None
    if lock.is_file() and fd is None:
        raise OutputError(f"{out}: an eatt sim of this folder is running; wait for it to end")
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def write_rtl_dir(
    out: Path, generated: dict[str, str], hand_written: list[str], weights: CoreWeights, meta: dict
) -> None:
    """An RTL directory, all or nothing (eatt.outdir.replaced_dir): the generated files, copies
    of hand-written ones from rtl_sim/rtl/, weights.npz and metadata.json are written to a
    temporary directory beside `out`, which then replaces `out` (a reader never sees half of it,
    no stale file stays). A folder eatt did not make is refused (OutputError), never replaced."""
    with _no_sim_running(out), replaced_dir(out, "RTL", legacy=_legacy_rtl_dir) as tmp:
        for name, text in generated.items():
            (tmp / name).write_text(text)
        for name in hand_written:
            shutil.copyfile(RTL_DIR / name, tmp / name)
        np.savez(tmp / "weights.npz", **weights.as_dict())
        (tmp / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")


def load_metadata(out_dir: str | os.PathLike) -> dict:
    """metadata.json of an RTL directory; ValueError (one line) when it is missing or bad."""
    out = Path(out_dir)
    path = out / "metadata.json"
    if not path.is_file():
        raise ValueError(f"{out}: not an RTL directory (no metadata.json); run `eatt rtl` first")
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    for key in ("config", "level", "top", "sources", "weights", "interface"):
        if key not in meta:
            raise ValueError(f"{path}: missing key '{key}'")
    for rel in [*meta["sources"], meta["weights"]]:
        if not (out / rel).is_file():
            raise ValueError(f"{out}: metadata lists {rel} but the file is missing")
    top_text = (out / meta["sources"][0]).read_text()
    if f"module {meta['top']}" not in top_text:
        raise ValueError(f"{out}: top module {meta['top']} is not in {meta['sources'][0]}")
    return meta


def load_weights(out_dir: str | os.PathLike, meta: dict) -> CoreWeights:
    path = Path(out_dir) / meta["weights"]
    names = CoreWeights.NAMES  # the query-key cores' (and every folder written before)
    if isinstance(meta.get("config"), dict) and meta["config"].get("kind") in core_kinds():
        names = tuple(weight_shapes(CoreConfig.from_dict(meta["config"])))
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [name for name in names if name not in data.files]
            if missing:
                raise ValueError(f"{path}: no array {missing[0]!r} (has {', '.join(data.files)})")
            return CoreWeights(**{name: data[name].astype(np.int64) for name in names})
    except (OSError, EOFError, ValueError, AttributeError) as err:
        if isinstance(err, ValueError) and str(err).startswith(str(path)):
            raise
        why = "not an .npz archive" if "pickle" in str(err) else str(err).splitlines()[0]
        raise ValueError(f"{path}: not a weights file written by eatt rtl ({why})") from None
