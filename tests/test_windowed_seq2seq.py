"""Tests of eatt.model.windowed as the Transformer's cross-attention (incremental decoding,
Flexible's strength, the vision span), L0Drop in the Transformer, the windowed and LSTM
checkpoints through training and evaluation, and the quick staged experiments (the mechanisms
alone: tests/test_windowed.py)."""

import pytest
import torch

from eatt.model.data import BOS, EOS, PAD
from eatt.model.evaluate import beam_search, greedy_decode, translate_with_stats
from eatt.model.seq2seq import ModelConfig, Seq2Seq, build_model, load_checkpoint
from eatt.model.windowed import WINDOW_KINDS


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# -- in the Transformer --------------------------------------------------------------------------
SRC_V, TGT_V = 19, 23


def _seq2seq(kind, **kw):
    cfg = ModelConfig(
        dim=16, heads=2, ffn_dim=32, dropout=0.0, cross=kind, window_d=2, max_len=24, **kw
    )
    return Seq2Seq(cfg, SRC_V, TGT_V).double().eval()


def _batch(batch=3, src_len=9, tgt_len=6):
    src = torch.randint(4, SRC_V, (batch, src_len))
    src[:, -1] = EOS
    src[0, 5:] = PAD
    src[0, 4] = EOS
    tgt = torch.randint(4, TGT_V, (batch, tgt_len))
    tgt[:, 0] = BOS
    return src, tgt


@pytest.mark.parametrize(
    "kind, score, tau",
    [(k, "general", None) for k in WINDOW_KINDS]
    + [("flexible", "eatt", 0.8), ("local-p", "concat", None), ("local-m", "dot", None)],
)
def test_transformer_incremental_decoding_equals_full(kind, score, tau):
    model = _seq2seq(kind, window_score=score, flexible_tau=tau)
    src, tgt = _batch()
    full = model(src, tgt)
    memory, padding = model.encode(src)
    cache = model.init_cache()
    steps = [model.decode(tgt[:, t : t + 1], memory, padding, cache, offset=t) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-9, atol=1e-9)
    assert greedy_decode(model, src, max_len=8) == greedy_decode(
        model, src, max_len=8, incremental=False
    )
    wide = beam_search(model, src, beam=3, max_len=8)
    assert len(wide) == 3


def test_flexible_trains_and_reports_its_strength():
    model = _seq2seq("flexible", flexible_beta=0.1).train()
    src, tgt = _batch()
    tgt[1, 4:] = PAD  # a shorter target: its padded steps do not count
    logits = model(src, tgt)
    aux = model.aux_losses()
    assert set(aux) == {"flexible_g"} and 0 < float(aux["flexible_g"].detach()) < 1
    # Eq. 9 per sentence: sum_i (1/T_i) sum_t g_i(t) over real target steps, / target tokens
    real = tgt.ne(PAD)
    per_layer = []
    for layer in model.decoder:
        g = torch.stack(layer.cross_attn.last_state["g_steps"], 1).detach()
        sentence = (g * real).sum(1) / real.sum(1)
        per_layer.append(sentence.sum() / real.sum())
    assert float(aux["flexible_g"].detach()) == pytest.approx(float(torch.stack(per_layer).mean()))
    (logits.logsumexp(-1).mean() - aux["flexible_g"]).backward()
    # a direct decode (another batch) refreshes the target mask the term averages over
    memory, padding = model.encode(src[:2])
    model.decode(tgt[:2], memory, padding)
    assert model.aux_losses()["flexible_g"].shape == ()
    assert model.decoder[0].cross_attn.core.v_g.bias.grad is not None
    assert _seq2seq("local-p").aux_losses() == {}


def test_vision_span_through_evaluation():
    model = _seq2seq("flexible", flexible_tau=0.3)
    for layer in model.decoder:
        layer.cross_attn.core.fixed_strength = 1.0
    src, _ = _batch()

    class _Batch:
        def __init__(self, src):
            self.src, self.index = src, list(range(src.shape[0]))

    _, stats = translate_with_stats(model, [_Batch(src)], beam=1, device=torch.device("cpu"))
    assert 1.0 <= stats["vision_span"] <= 3.0
    assert stats["sparsity_rate"] is None and stats["decode_seconds"] > 0
    model = _seq2seq("global")
    _, stats = translate_with_stats(model, [_Batch(src)], beam=2, device=torch.device("cpu"))
    lengths = (~src.eq(PAD)).sum(1).double()
    assert lengths.min() <= stats["vision_span"] <= lengths.max()


def test_build_model_and_cross_only():
    assert isinstance(build_model(ModelConfig(dim=16, heads=2), SRC_V, TGT_V), Seq2Seq)
    names = {n for n, _ in _seq2seq("local-p").named_parameters()}
    assert "decoder.0.cross_attn.core.w_p.weight" in names
    assert "decoder.0.cross_attn.o_proj.weight" in names


# -- L0Drop in the Transformer -------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["vanilla", "eatt"])
def test_transformer_compacted_memory_decodes_like_the_gated_memory(kind):
    model = Seq2Seq(
        ModelConfig(dim=16, heads=2, ffn_dim=32, dropout=0.0, attention=kind, l0drop=True),
        SRC_V,
        TGT_V,
    ).double()
    model.eval()
    with torch.no_grad():  # close about half of the gates
        model.l0drop.w.copy_(torch.randn(16, dtype=torch.float64) * 3)
    src, tgt = _batch()
    memory, padding, counts = model.encode_for_decoding(src)
    gated, gpad = model.encode(src)
    closed = model.gate_stats[0]
    assert 0 < closed < model.gate_stats[1]
    assert memory.shape[1] < gated.shape[1] or bool(counts.gt(1).any())
    torch.testing.assert_close(
        model.decode(tgt, memory, padding, counts=counts), model.decode(tgt, gated, gpad)
    )
    model.compact_memory = False
    assert model.encode_for_decoding(src)[2] is None
    model.compact_memory = True
    src_only = type("B", (), {"src": src, "index": list(range(3))})
    _, stats = translate_with_stats(model, [src_only], beam=2, device=torch.device("cpu"))
    assert 0 < stats["sparsity_rate"] < 1
    model.train()
    model(src, tgt)
    assert set(model.aux_losses()) == {"l0"}


def test_transformer_rule_pattern_gates():
    cfg = ModelConfig(dim=16, heads=2, ffn_dim=32, l0drop=True, l0drop_rule="group")
    model = Seq2Seq(cfg, SRC_V, TGT_V).eval()
    src, tgt = _batch()
    memory, padding, counts = model.encode_for_decoding(src)
    real = (~src.eq(PAD)).sum(1)
    # group keeps 1-based odd positions: ceil(n / 2) rows, then the zero row
    for b, n in enumerate(real.tolist()):
        kept = (n + 1) // 2
        assert bool(counts[b, :kept].eq(1).all()) and int(counts[b, kept]) == n // 2
    assert model.aux_losses() == {}


# -- the LSTM checkpoint and the quick experiments -----------------------------------------------
def _tiny_data():
    from eatt.model.data import TaskConfig

    return TaskConfig(
        n_train=60, n_dev=8, n_test=8, max_len=8, n_nouns=6, n_verbs=3, n_adjs=3, seed=5
    )


@pytest.mark.parametrize(
    "model",
    [
        {
            "arch": "lstm",
            "dim": 16,
            "enc_layers": 1,
            "dec_layers": 1,
            "cross": "flexible",
            "flexible_beta": 0.1,
            "flexible_tau": 1.0,
        },
        {
            "dim": 16,
            "heads": 2,
            "ffn_dim": 32,
            "enc_layers": 1,
            "dec_layers": 1,
            "cross": "local-p",
            "l0drop": True,
            "l0drop_lambda": 0.5,
        },
        {
            "dim": 16,
            "heads": 2,
            "ffn_dim": 32,
            "enc_layers": 1,
            "dec_layers": 1,
            "cross": "quant-local-p",
            "window_score": "eatt",
            "max_len": 16,
        },
    ],
)
def test_train_and_evaluate_windowed_and_lstm_checkpoints(tmp_path, model):
    from eatt.model.evaluate import evaluate
    from eatt.model.seq2seq import load_checkpoint
    from eatt.model.train import TrainConfig, train

    cfg = ModelConfig.from_dict(model)
    summary = train(
        cfg,
        TrainConfig(steps=3, eval_every=0, progress=False, max_tokens=256, data=_tiny_data()),
        tmp_path,
    )
    loaded = load_checkpoint(summary["checkpoint"])[0]
    assert type(loaded).__name__ == ("LSTMSeq2Seq" if cfg.arch == "lstm" else "Seq2Seq")
    result = evaluate(summary["checkpoint"], beam=2, device="cpu")
    assert result["arch"] == cfg.arch and result["vision_span"] > 0
    assert result["decode_seconds"] > 0 and 0 <= result["bleu"] <= 100
    if cfg.l0drop:
        assert 0.0 <= result["sparsity_rate"] <= 1.0
    else:
        assert result["sparsity_rate"] is None
    wide = evaluate(
        summary["checkpoint"], beam=2, device="cpu", model_overrides={"flexible_tau": None}
    )
    if cfg.cross == "flexible":  # tau = infinity scores the whole source
        assert wide["vision_span"] >= result["vision_span"]


@pytest.mark.parametrize(
    "name",
    [
        "window",
        "window-lstm",
        "flexible-train-window",
        "window-eatt",
        "window-unit",
        "flexible-unit",
        "l0drop",
        "l0drop-redundant",
        "l0drop-unit",
        "qat",
    ],
)
def test_quick_staged_experiments_write_their_tables(tmp_path, monkeypatch, name):
    from eatt.model import experiments
    from eatt.model.experiments import base as sizes

    monkeypatch.setattr(sizes, "_QUICK_TRAIN", sizes._QUICK_TRAIN.replace(steps=3))
    monkeypatch.setattr(sizes, "_QUICK_DATA", _tiny_data())
    report = experiments.run_experiment(name, quick=True, out_dir=tmp_path, quiet=True)
    table = (tmp_path / name / "results.md").read_text()
    saved = (tmp_path / name / "results.json").read_text()
    assert '"rows"' in saved and table.startswith(f"{name} (quick)")
    rows = {r["label"]: r for r in report["rows"]}
    if report["plot"] is not None:
        assert (tmp_path / name / f"{name}.png").stat().st_size > 0
    if name == "window-lstm":
        assert report["model"]["arch"] == "lstm" and report["model"]["window_score"] == "concat"
        assert report["train"]["peak_lr"] == experiments.window.LSTM_PEAK_LR  # the LSTM's
        assert not any(label.startswith("quant-") for label in rows)
    if name == "window":  # the unit's kinds beside the float ones, checked as exported
        unit = rows["quant-local-p (the unit, dot)"]
        assert unit["hardware"]["exported"]["hypotheses_differ"] == 0
        assert 1 <= unit["vision_span"] <= 2 * experiments.WINDOW_D + 1
        for tau in ("inf", "on dev"):  # Flexible on the unit: its focus is the next centre
            for score in ("dot", "eatt"):
                flex = rows[f"quant-flexible (the unit, {score}), tau {'= ' * (tau == 'inf')}{tau}"]
                assert flex["hardware"]["exported"]["hypotheses_differ"] == 0
        for score, stage in report["flexible"].items():  # beta picked on dev from the grid
            assert [b["beta"] for b in stage["beta_search"]] == [0.1, 1.0]
            name = "flexible" if score == "general" else f"flexible {score}"
            assert f"{name} fine-tuned (beta {stage['beta']:g}), tau on dev" in rows
        assert "eatt scores, beta picked on dev:" in table
        assert set(report["flexible"]) == {"general", "eatt"}
        assert "eatt scores: window" in table and "(eatt scores) over tau" in table
    if name == "flexible-train-window":  # each beta with and without the window in training
        assert list(rows)[:2] == ["flexible, tau = inf", "flexible, tau on dev"]
        for score, stage in report["flexible"].items():
            grid = [(b["beta"], b["train_tau"]) for b in stage["beta_search"]]
            assert grid == [(0.1, None), (0.1, 1.6), (1.0, None), (1.0, 1.6)]
            assert f"{score} scores, beta picked on dev:" in table
        assert "beta 1, window in training at tau 1.6: tau" in table
        assert report["flexible_train_taus"] == [None, 1.6]
        assert not any(label.startswith(("global", "local", "quant-")) for label in rows)
        # every tau picked within 0.5 dev BLEU of the best fine-tune at tau = inf
        for stage in report["flexible"].values():
            best = max(b["dev_bleu_inf"] for b in stage["beta_search"])
            assert stage["dev_bleu_reference"] == best
            for b in stage["beta_search"]:
                assert b["tau"] is None or b["dev_bleu"] >= best - 0.5
        # --resume: the finished runs are reused (not trained again), the report is the same
        runs = sorted((tmp_path / name / "runs").glob("*/best.pt"))
        stamps = [p.stat().st_mtime_ns for p in runs]
        again = experiments.run_experiment(name, quick=True, out_dir=tmp_path, quiet=True,
                                           resume=True)  # fmt: skip
        assert [p.stat().st_mtime_ns for p in runs] == stamps
        # nor evaluated again: every row (its decode_seconds too) is the one saved beside the
        # checkpoint (evaluations.json)
        assert again["rows"] == report["rows"]
        assert all((p.parent / "evaluations.json").is_file() for p in runs)
    if name in ("window", "window-lstm"):
        assert list(rows)[:4] == ["global", "local-m", "local-p", "flexible, tau = inf"]
        assert [c["tau"] for c in report["curve"]] == list(experiments.TAUS)
        spans = [c["vision_span"] for c in report["curve"]]
        assert spans[0] <= spans[-1]  # tau 0.3 vs 999 (the outputs may differ in between)
        assert rows["local-m"]["vision_span"] <= 2 * experiments.WINDOW_D + 1
        assert rows["global"]["vision_span"] == pytest.approx(
            rows["flexible, tau = inf"]["vision_span"]
        )
        assert "Target: Flexible cuts" in table
    if name == "window-eatt":
        assert {r["score"] for r in report["rows"]} == {"dot", "eatt"}
        units = [r for r in report["rows"] if r.get("window") == "unit"]
        assert [r["label"] for r in units][:3] == [
            "quant-local-p dot (the unit)", "quant-local-p eatt (the unit)",
            "quant-flexible dot (the unit)",
        ]  # fmt: skip
        assert all(r["hardware"]["exported"]["hypotheses_differ"] == 0 for r in units)
        assert "quant-flexible eatt, tau = 1: 0" in table
        # its models are independent: two Ray workers give the same rows, in the same order
        # (local-p's four models: float and unit, dot and E-ATT scores)
        monkeypatch.setattr(experiments.window_eatt, "QUICK_KINDS", ("local-p",))
        again = experiments.run_experiment(
            name, quick=True, out_dir=tmp_path / "w2", quiet=True, workers=2
        )
        keep = ("label", "bleu", "vision_span")
        assert [{k: r[k] for k in keep} for r in again["rows"]] == [
            {k: r[k] for k in keep} for r in report["rows"] if "local-p" in r["label"]
        ]
    if name == "window-unit":
        assert list(rows) == [
            "local-p eatt, luong",
            "local-p eatt, inside, integer p",
            "quant-local-p eatt, the unit",
        ]
        assert "| inside | integer |" in table
        unit = rows["quant-local-p eatt, the unit"]["hardware"]
        assert unit["exported"]["hypotheses_differ"] == 0
        assert "0 differ as exported" in table
    if name == "flexible-unit":
        assert list(rows) == [
            "flexible dot, paper",
            "flexible dot, paper, tau on dev",
            "flexible dot, integer focus, g levels",
            "flexible dot, integer focus, g levels, tau on dev",
            "quant-flexible dot, the unit",
            "quant-flexible dot, the unit, tau on dev",
        ]
        for label in ("quant-flexible dot, the unit", "quant-flexible dot, the unit, tau on dev"):
            assert rows[label]["hardware"]["exported"]["hypotheses_differ"] == 0
        assert "0 differ as exported" in table and "| flexible dot, paper | inf |" in table
    if name in ("l0drop", "l0drop-redundant"):
        assert list(rows)[:2] == ["no pruning", "no pruning, fine-tuned"] and "rule group" in rows
        assert report["task"] == ("redundant" if name.endswith("redundant") else "dense")
        assert report["data"]["redundant"] == (report["task"] == "redundant")
        scratch = rows["L0Drop lambda 0.3, from scratch (ramp)"]
        assert scratch["scratch"] and 0.0 <= scratch["sparsity_rate"] <= 1.0
        costs = report["break_even"]
        assert costs["sentences"] == 5 and costs["q10"] <= costs["q40"] <= costs["q75"]
        assert report["target"]["break_even_lambda_40"] == costs["lambda_40"]
        assert "Break-even lambda of the unpruned model (5 test sentences)" in table
        assert report["target"]["bleu_reference"] == rows["no pruning, fine-tuned"]["bleu"]
        assert 0.3 < rows["rule group"]["sparsity_rate"] < 0.7  # odd positions only
        timing = report["timing"][0]
        assert timing["same_output"] and timing["seconds_full"] > 0
        assert "| source length | compacted length |" in table
        assert report["fine_tune_steps"] >= 1
        payload = load_checkpoint(tmp_path / name / "runs" / "lambda_0.5" / "best.pt")[3]
        assert payload["train_config"]["init_checkpoint"].endswith("no_pruning/best.pt")
    if name == "l0drop-unit":
        assert list(rows) == ["no pruning", "L0Drop lambda 0.5", "rule group"]
        assert report["steps"] == 6  # twice the (test's) base steps
        for row in rows.values():
            assert row["hardware"]["exported"]["hypotheses_differ"] == 0
        assert report["data"]["redundant"] and report["model"]["cross"] == "quant-global"
        group = rows["rule group"]  # every other position: the unit reads about half the rows
        assert 0.3 < group["sparsity_rate"] < 0.7 and group["cycles_ratio"] < 0.8
        assert "rows (cycles) per step" in table
    if name == "qat":
        assert list(rows) == [
            "float eatt",
            "float eatt, fine-tuned",
            "quant-eatt w8, PTQ",
            "quant-eatt w8, QAT",
            "quant-eatt w4, PTQ",
            "quant-eatt w4, QAT",
        ]
        assert rows["quant-eatt w4, QAT"]["bits"] == 4 and "Target: quantized E-ATT" in table
        assert rows["quant-eatt w8, QAT"]["steps"] == rows["float eatt, fine-tuned"]["steps"]
        payload = load_checkpoint(tmp_path / name / "runs" / "quant-eatt_w8" / "best.pt")[3]
        assert payload["train_config"]["init_checkpoint"].endswith("float_eatt/best.pt")
        assert payload["model_config"]["attention"] == "quant-eatt"


@pytest.mark.parametrize(
    "keys, weight, param",
    [
        ({"cross": "flexible"}, "flexible_beta", "decoder.0.cross_attn.core.v_g.bias"),
        ({"l0drop": True}, "l0drop_lambda", "l0drop.w"),
    ],
)
def test_training_applies_the_aux_loss_weights(tmp_path, keys, weight, param):
    from eatt.model.seq2seq import load_checkpoint
    from eatt.model.train import TrainConfig, train

    got = []
    for value in (0.0, 5.0):
        cfg = ModelConfig(
            dim=16, heads=2, ffn_dim=32, enc_layers=1, dec_layers=1, **keys, **{weight: value}
        )
        tc = TrainConfig(steps=3, eval_every=0, progress=False, max_tokens=256, data=_tiny_data())
        summary = train(cfg, tc, tmp_path / str(value))
        got.append(dict(load_checkpoint(summary["checkpoint"])[0].named_parameters())[param])
    assert not torch.equal(got[0], got[1])


def test_resume_reuses_a_run_saved_before_a_key_was_added(tmp_path):
    """--resume reads a finished run's configs as a checkpoint load does: a model key added
    since (here flexible_train_tau) takes its default, so the run is the same model."""
    import json

    from eatt.model.data import synthetic_task
    from eatt.model.experiments.staged import _window_sizes, finished_run

    data_cfg, model, train_cfg, _ = _window_sizes(True)
    data = synthetic_task(data_cfg)
    cfg = model.replace(cross="flexible")
    stored = cfg.to_dict()
    del stored["flexible_train_tau"]  # written before the key existed
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.json").write_text(json.dumps({"steps": train_cfg.steps}))
    (run / "best.pt").write_bytes(b"")
    payload = {"train_config": train_cfg.to_dict(), "data_fingerprint": data.fingerprint()}
    torch.save({**payload, "model_config": stored, "step": train_cfg.steps}, run / "last.pt")
    done = finished_run(cfg, train_cfg, run, data)
    assert done is not None and done["checkpoint"] == str(run / "best.pt")
    # another value of the new key, another model, or an unreadable config: trained again
    assert finished_run(cfg.replace(flexible_train_tau=1.6), train_cfg, run, data) is None
    assert finished_run(cfg.replace(flexible_beta=0.123), train_cfg, run, data) is None
    unknown = {**stored, "no_such_key": 1}
    torch.save({**payload, "model_config": unknown, "step": train_cfg.steps}, run / "last.pt")
    assert finished_run(cfg, train_cfg, run, data) is None
