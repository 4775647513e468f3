"""bench/quant_synthesizers.py on tiny trained models: the rows (BLEU with the cores'
arithmetic, 0 exported hypotheses differing), the files; bad input gives exit 2, nothing
written."""

from __future__ import annotations

import json

from bench_module import load_bench

from eatt.model.train import train_from_config

RUN = (
    "model: {{dim: 8, heads: 2, ffn_dim: 16, enc_layers: 1, dec_layers: 1, attention: {kind},\n"
    "        max_len: 12}}\n"
    "train: {{steps: 3, max_tokens: 256, eval_every: 3, progress: false}}\n"
    "data: {{n_train: 40, n_dev: 8, n_test: 6, max_len: 8}}\n"
)


def test_tiny_runs_write_results(tmp_path, capsys):
    runs = []
    for kind in ("quant-vanilla", "quant-randinit"):
        (tmp_path / f"{kind}.yaml").write_text(RUN.format(kind=kind))
        train_from_config(tmp_path / f"{kind}.yaml", tmp_path / kind, progress=False)
        runs += ["--run", f"{kind}={tmp_path / kind}"]
    bench = load_bench("quant_synthesizers")
    out = tmp_path / "results" / "q.json"
    assert bench.main([*runs, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["reference"] == "quant-vanilla"
    assert [r["kind"] for r in result["rows"]] == ["quant-vanilla", "quant-randinit"]
    for row in result["rows"]:
        assert row["exported_differ"] == 0 and row["bleu_exported"] == row["bleu"]
        assert (tmp_path / row["kind"] / "eval_hw.json").is_file()  # kept for the next run
    assert result["rows"][0]["bleu_ratio"] in (1.0, None)
    assert result["rows"][0]["energy_ratio"]["asic"] == 1.0
    assert result["rows"][1]["energy_ratio"]["asic"] < 1.0  # RandInit: no alignment work
    assert out.with_suffix(".md").is_file() and out.with_suffix(".png").is_file()
    assert "| quant-randinit |" in capsys.readouterr().out


def test_bad_arguments(tmp_path, capsys):
    bench = load_bench("quant_synthesizers")
    out = tmp_path / "x.json"
    assert bench.main(["--run", f"quant-eatt={tmp_path / 'none'}", "--out", str(out)]) == 2
    assert bench.main(["--run", f"quant-eatt={tmp_path}", "--out", str(tmp_path / "x.txt")]) == 2
    err = capsys.readouterr().err
    assert "best.pt is missing" in err and "--out" in err
    assert not list(tmp_path.iterdir())
