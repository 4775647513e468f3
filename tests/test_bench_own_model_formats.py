"""bench/own_model_formats.py at a tiny size: every setting and kind trained, the files
written; a bad --out or --seeds gives exit 2 and writes nothing."""

from __future__ import annotations

import json

from bench_module import load_bench


def test_tiny_run_writes_results(tmp_path, capsys):
    bench = load_bench("own_model_formats")
    out = tmp_path / "formats.json"
    assert bench.main(["--seeds", "1", "--steps", "4", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["summary"]) == set(bench.SETTINGS)
    assert len(result["runs"]) == len(bench.SETTINGS) * len(bench.KINDS)
    calibrated = result["runs"]["qat-calibrated/eatt/1"]["formats"]
    default = result["runs"]["qat-default/eatt/1"]["formats"]
    assert default == {"in_frac": 4, "weight_frac": 6, "v_bits": 12, "out_bits": 12}
    assert calibrated != default and result["runs"]["float/eatt/1"]["formats"] is None
    assert out.with_suffix(".md").is_file() and out.with_suffix(".png").is_file()
    assert "| qat-calibrated |" in capsys.readouterr().out


def test_bad_arguments(tmp_path, capsys):
    bench = load_bench("own_model_formats")
    assert bench.main(["--out", str(tmp_path / "x.txt")]) == 2
    assert bench.main(["--seeds", "a,b", "--out", str(tmp_path / "x.json")]) == 2
    assert "--seeds" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
