"""``qat``: float E-ATT vs quantization-aware E-ATT (``quant-eatt``: the hardware core's Brevitas
module, binarized inputs, 8-bit and 4-bit weights at a least-squares power-of-two scale), each
quantized model fine-tuned from the float one (``from_float``), beside the float model
fine-tuned for the same steps and the quantized models before fine-tuning (PTQ)."""

from __future__ import annotations

from pathlib import Path

import torch

from ..corpus import load_data
from ..seq2seq import ModelConfig, build_model, load_checkpoint, save_checkpoint
from .base import BLEU_TOLERANCE, _log, _markdown_table, _num, _sizes
from .staged import StagedExperiment, _eval, _fine_tune, _row, _train_and_eval

#: weight widths of the qat experiment
QAT_BITS = (8, 4)


def _quantized_copy(float_checkpoint: str, cfg: ModelConfig, path: Path) -> str:
    """A checkpoint of the model ``cfg`` holding a float checkpoint's weights, untrained: the
    quantized model before quantization-aware fine-tuning (post-training quantization)."""
    model, src_vocab, tgt_vocab, payload = load_checkpoint(float_checkpoint)
    quantized = build_model(cfg, len(src_vocab), len(tgt_vocab))
    quantized.load_state_dict(model.state_dict())
    keep = ("train_config", "data_config", "data_fingerprint")
    path.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(path, quantized, src_vocab, tgt_vocab, {k: payload[k] for k in keep})
    return str(path)


def _attention_weights(checkpoint: str) -> list[torch.Tensor]:
    """The Q/K/V/O projection weights of every attention module of a checkpoint."""
    model = load_checkpoint(checkpoint)[0]
    return [
        getattr(module.core, f"{p}_proj").weight
        for _, _, module in model.attention_modules()
        for p in ("q", "k", "v", "o")
    ]


def _hw(row: dict, arithmetic: str, key: str, fmt: str) -> str:
    """A --hardware number of a quantized row ("-" for a float row or an older report)."""
    value = (row.get("hardware") or {}).get(arithmetic, {}).get(key)
    return "-" if value is None else format(value, fmt)


class Qat(StagedExperiment):
    name = "qat"
    tasks = ("synthetic", "ding")

    def stages(self, quick: bool, folder: Path, quiet: bool) -> dict:
        from eatt.quant.modules import calibrate_weight_frac  # Brevitas: imported when needed

        data_cfg, model, train_cfg = _sizes(quick)
        train_cfg, beam = train_cfg.replace(data=data_cfg), 1 if quick else 4
        data = load_data(data_cfg)
        float_cfg = model.replace(attention="eatt")
        summary, result = _train_and_eval(
            "float eatt", float_cfg, train_cfg, data, folder, beam, quiet
        )
        trained = summary["checkpoint"]
        rows = [_row("float eatt", result, bits=None, weight_frac=None, steps=train_cfg.steps)]
        fine_cfg = _fine_tune(train_cfg, 2, trained)
        fine_steps = fine_cfg.steps
        total = train_cfg.steps + fine_steps
        # the float model trained for as many steps as the quantized ones: the fair reference
        _, ref = _train_and_eval("float eatt +", float_cfg, fine_cfg, data, folder, beam, quiet)
        rows.append(_row("float eatt, fine-tuned", ref, bits=None, weight_frac=None, steps=total))
        weights = _attention_weights(trained)
        for bits in QAT_BITS:
            frac = calibrate_weight_frac(weights, bits)
            cfg = float_cfg.replace(
                attention="quant-eatt", quant_weight_bits=bits, quant_weight_frac=frac
            )
            ptq = _quantized_copy(trained, cfg, folder / "runs" / f"ptq_w{bits}" / "model.pt")
            _log(f"[{folder.name}] quant-eatt w{bits} before fine-tuning (frac {frac})", quiet)
            label = f"quant-eatt w{bits}"
            result = _eval(ptq, data, "test", beam, hardware=True)
            rows.append(
                _row(f"{label}, PTQ", result, bits=bits, weight_frac=frac, steps=train_cfg.steps)
            )
            _, result = _train_and_eval(
                label, cfg, fine_cfg, data, folder, beam, quiet, hardware=True
            )
            rows.append(_row(f"{label}, QAT", result, bits=bits, weight_frac=frac, steps=total))
        w8 = next(r for r in rows if r["bits"] == 8 and r["label"].endswith("QAT"))
        target = {
            "what": "quantized E-ATT (8-bit weights) within 0.5 BLEU of float E-ATT "
            "(same training steps)",
            "bleu_float": ref["bleu"],
            "bleu_w8": w8["bleu"],
            "bleu_drop": ref["bleu"] - w8["bleu"],
            "met": w8["bleu"] >= ref["bleu"] - BLEU_TOLERANCE,
        }
        return {
            "beam": beam,
            "rows": rows,
            "fine_tune_steps": fine_steps,
            "target": target,
            "data": data_cfg.__dict__.copy(),
            "model": float_cfg.to_dict(),
            "train": {k: v for k, v in train_cfg.to_dict().items() if k != "data"},
        }

    def table_lines(self, report: dict) -> list[str]:
        quick = " (quick)" if report["quick"] else ""
        return [
            f"qat{quick}: test BLEU (beam {report['beam']}) of float E-ATT and quantized E-ATT "
            "(quant-eatt: binarized inputs, weights <bits, frac>); QAT rows are fine-tuned "
            f"from the float model for {report['fine_tune_steps']} steps, PTQ rows are the "
            "float weights rounded to the grid. A quantized model's BLEU is its cores' integer "
            "arithmetic (tables, shifts; eval computes what the exported core computes: "
            "'differ' counts the hypotheses that change when every attention runs as the "
            "exported core, len max_len with masks); the surrogate column decodes with the "
            "QAT surrogate (float softmax) instead",
            "",
            *_markdown_table(
                [
                    "model",
                    "weight bits",
                    "weight frac",
                    "training steps",
                    "BLEU",
                    "differ",
                    "BLEU, surrogate",
                ],
                [
                    [
                        r["label"],
                        _num(r["bits"], "d"),
                        _num(r["weight_frac"], "d"),
                        str(r["steps"]),
                        _num(r["bleu"]),
                        _hw(r, "exported", "hypotheses_differ", "d"),
                        _hw(r, "surrogate", "bleu", ".2f"),
                    ]
                    for r in report["rows"]
                ],
            ),
        ]

    def figure(self, report: dict, plt):
        """BLEU per row as bars."""
        rows = report["rows"]
        fig, ax = plt.subplots(figsize=(6.5, 3.6))
        ax.bar(range(len(rows)), [r["bleu"] for r in rows])
        ax.set_xticks(range(len(rows)), [r["label"] for r in rows], rotation=20, fontsize=7)
        ax.set_ylabel("test BLEU")
        low = min(r["bleu"] for r in rows)
        ax.set_ylim(max(0.0, low - 5.0), max(r["bleu"] for r in rows) + 2.0)
        fig.suptitle(self.name)
        return fig


EXPERIMENT = Qat()
