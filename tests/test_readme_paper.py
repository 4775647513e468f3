"""README's paper-size commands (examples/paper.yaml), in a file of their own so that `make
test`'s workers (pytest-xdist, one file at a time) run them beside test_readme_commands.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_readme_commands import both_modes


@pytest.mark.rtl
@pytest.mark.hls
@pytest.mark.slow
def test_the_paper_size_example(tmp_path):
    """README: examples/paper.yaml, one core at the E-ATT paper's size (l 22, d 512, 8 heads),
    reuse_factor 100000: `eatt rtl` builds E-ATT with the least datapath within it, `eatt flow`
    both kinds at equal cycles (2 vectors here; README's run has 20)."""
    paper = str(Path(__file__).parents[1] / "examples" / "paper.yaml")
    r = both_modes(["rtl", "--config", paper, "-o", str(tmp_path / "rtl")], "folded RTL")
    assert r["folding"] == {"lanes": 1, "simd": 16, "pe": 8} and r["ii_cycles"] == 90118
    args = ["flow", "--config", paper, "--no-window", "--no-resources", "--vectors", "2"]
    r = both_modes([*args, "-o", str(tmp_path / "flow")], "flow: PASS")
    assert r["ok"]
    iis = {kind: c["sim"]["folded"]["ii_cycles"] for kind, c in r["cores"].items()}
    assert iis == {"eatt": 90118, "vanilla": 90122}
