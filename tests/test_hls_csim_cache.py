"""The C simulation's library cache (eatt.hls.csim_cache): the same C++ is compiled once."""

from __future__ import annotations

import os

import pytest

from eatt.config import CoreConfig
from eatt.hls.csim_cache import CACHE_FORMAT, library_key
from eatt.hls.project import write_project

pytestmark = pytest.mark.hls

CFG = CoreConfig("eatt", 3, 4, 8, 2)


def test_the_same_core_links_the_cached_library(tmp_path, monkeypatch):
    """A second project of the same core takes the library from the cache (same codes, no
    g++); other weights miss; a cache that cannot be written still gives the C simulation."""
    monkeypatch.setenv("EATT_CACHE", str(tmp_path / "cache"))
    first = write_project(CFG, tmp_path / "a", seed=3, vectors=20)["csim"]
    again = write_project(CFG, tmp_path / "b", seed=3, vectors=20)["csim"]
    assert not first["compile_cached"] and again["compile_cached"]
    assert first["mismatches"] == again["mismatches"] == 0
    assert again["compile_s"] < first["compile_s"]
    entries = [p for p in (tmp_path / "cache" / "csim").iterdir() if p.is_dir()]
    assert len(entries) == 1 and (entries[0] / ".complete").is_file()
    other = write_project(CFG, tmp_path / "c", seed=4, vectors=20)["csim"]  # other weights
    assert not other["compile_cached"] and other["mismatches"] == 0

    # the key: the firmware and the bridge, not the project's random stamp or its folder
    keys = {library_key(tmp_path / name, "myproject", _stamp(tmp_path / name)) for name in "ab"}
    assert len(keys) == 1 and CACHE_FORMAT == 1
    assert library_key(tmp_path / "c", "myproject", _stamp(tmp_path / "c")) not in keys

    monkeypatch.setenv("EATT_CSIM_CACHE", "0")  # off: compiled although the cache holds it
    assert not write_project(CFG, tmp_path / "e", seed=3, vectors=4)["csim"]["compile_cached"]
    monkeypatch.delenv("EATT_CSIM_CACHE")

    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("EATT_CACHE", str(blocked))
    r = write_project(CFG, tmp_path / "d", seed=3, vectors=20)["csim"]
    assert not r["compile_cached"] and r["mismatches"] == 0
    assert blocked.read_text().startswith("a file")


def _stamp(project) -> str:
    """The random stamp hls4ml named the project's library with."""
    (lib,) = (project / "firmware").glob("myproject-*.so")
    return lib.stem.split("-", 1)[1]


def test_a_changed_source_is_another_key(tmp_path, monkeypatch):
    monkeypatch.setenv("EATT_CACHE", str(tmp_path / "cache"))
    write_project(CFG, tmp_path / "a", seed=3, vectors=4)
    stamp = _stamp(tmp_path / "a")
    key = library_key(tmp_path / "a", "myproject", stamp)
    header = tmp_path / "a" / "firmware" / "parameters.h"
    os.chmod(header, 0o644)
    header.write_text(header.read_text() + "\n// edited\n")
    assert library_key(tmp_path / "a", "myproject", stamp) != key
