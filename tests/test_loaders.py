"""No loader unpickles arbitrary objects (issue 39, item 1): every torch.load / np.load in the
package refuses objects, and a planted file whose pickle would run a command is refused by each
loader without running it."""

from __future__ import annotations

import ast
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("eatt", "model", "quant", "hls", "rtl_sim", "bench", "examples")


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name):
                yield f"{owner.id}.{node.func.attr}", node


def test_every_loader_refuses_objects():
    """torch.load with weights_only=True, np.load without allow_pickle=True, no pickle.load(s)."""
    bad = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for name, node in _calls(tree):
                kw = {k.arg: k.value for k in node.keywords}
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                if name == "torch.load":
                    value = kw.get("weights_only")
                    if not (isinstance(value, ast.Constant) and value.value is True):
                        bad.append(f"{where}: torch.load without weights_only=True")
                elif name == "np.load":
                    value = kw.get("allow_pickle")
                    if isinstance(value, ast.Constant) and value.value is True:
                        bad.append(f"{where}: np.load(allow_pickle=True)")
                elif name in ("pickle.load", "pickle.loads"):
                    bad.append(f"{where}: {name}")
    assert not bad, "\n".join(bad)


class _Payload:
    """Unpickling this runs a command (it touches the marker file)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _planted(path: Path, marker: Path, **fields) -> Path:
    torch.save({**fields, "payload": _Payload(marker)}, path)
    return path


def test_planted_checkpoints_are_refused_without_running(tmp_path):
    from eatt.model import layers, seq2seq
    from eatt.model.experiments.staged import finished_run
    from eatt.model.seq2seq import CHECKPOINT_FORMAT
    from eatt.quant import modules

    marker = tmp_path / "ran"
    ckpt = _planted(tmp_path / "model.pt", marker, format=CHECKPOINT_FORMAT)
    with pytest.raises(ValueError):
        seq2seq.load_checkpoint(ckpt, "cpu")
    assert layers.is_model_checkpoint(ckpt) is False
    with pytest.raises(ValueError, match="not an eatt checkpoint"):
        modules.load_checkpoint(ckpt)

    run = tmp_path / "run"  # experiment --resume: a finished-looking run with a planted last.pt
    run.mkdir()
    (run / "train.json").write_text(json.dumps({"steps": 1}))
    (run / "best.pt").write_bytes(b"")
    _planted(run / "last.pt", marker, step=1)
    with pytest.raises(ValueError, match="last.pt: holds objects"):
        finished_run(None, None, run, None)
    assert not marker.exists()


def test_planted_npz_files_are_refused_without_running(tmp_path):
    from eatt.quant.vectors import load_capture
    from eatt.rtl_sim.generate import load_weights

    marker = tmp_path / "ran"
    objects = np.array([_Payload(marker)], dtype=object)
    path = tmp_path / "acts.npz"
    np.savez(path, meta=np.array(json.dumps({"format": "eatt.capture/1"})), x=objects)
    with pytest.raises(ValueError):
        load_capture(path)
    np.savez(tmp_path / "weights.npz", **{k: objects for k in ("wq", "wk", "wv", "wo")})
    with pytest.raises(ValueError, match="not a weights file"):
        load_weights(tmp_path, {"weights": "weights.npz"})
    assert not marker.exists()
    assert pickle.dumps(1)  # the module's own pickle use is this test's only one
