"""The golden model's self-check: widths hold on real data, and the float model agrees.

Run by `eatt golden` and `eatt flow`: random vectors plus edge vectors through GoldenCore, every
intermediate checked against the width docs/golden.md derives for it, and the outputs compared
with the float PyTorch twin within float_check.float_error_bound.
"""

from __future__ import annotations

import numpy as np

from eatt.config import CoreConfig
from eatt.quant.float_check import compare_with_float
from eatt.quant.golden import CoreWeights, GoldenCore, edge_inputs, random_inputs


def width_violations(golden: GoldenCore, stages: dict[str, np.ndarray]) -> list[str]:
    """Intermediates outside their declared range: each would be a silent overflow in hardware."""
    cfg, f = golden.cfg, golden.formats

    def signed(bits: int) -> tuple[int, int]:
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    limits = {
        "q": signed(cfg.qk_bits),
        "k": signed(cfg.qk_bits),
        "v": signed(cfg.v_bits),
        "scores": (-f.score_bound, f.score_bound),
        "exp": (0, 2**cfg.exp_frac),
        "attn": signed(cfg.v_bits),
        "out": signed(cfg.out_bits),
    }
    problems = []
    for name, (lo, hi) in limits.items():
        t = stages[name]
        if t.size and (t.min() < lo or t.max() > hi):
            problems.append(f"{name} in [{t.min()}, {t.max()}] exceeds [{lo}, {hi}]")
    return problems


def golden_check(cfg: CoreConfig, weights: CoreWeights, vectors: int = 1000, seed: int = 1) -> dict:
    golden = GoldenCore(cfg, weights)
    x, y = random_inputs(cfg, vectors, seed=seed)
    ex, ey = edge_inputs(cfg)
    x, y = np.concatenate([x, ex]), np.concatenate([y, ey])
    stages = golden.forward(x, y, intermediates=True)
    problems = width_violations(golden, stages)
    cmp = compare_with_float(cfg, weights, x, y)
    return {
        "config": cfg.to_dict(),
        "formats": golden.formats.to_dict(),
        "vectors": vectors,
        "edge_vectors": int(len(ex)),
        "width_violations": problems,
        "float": cmp,
        "ok": not problems and cmp["within_bound"],
    }


def format_golden_check(r: dict) -> str:
    c, f, fl = r["config"], r["formats"], r["float"]
    lines = [
        f"golden model: kind={c['kind']} len_q={c['len_q']} len_k={c['len_k']} dim={c['dim']} "
        f"heads={c['heads']} tau={c['tau']}",
        f"  formats: Q/K >> {f['q_shift']} into {c['qk_bits']} bits (lsb {f['q_lsb']:g}), "
        f"V >> {f['v_shift']} into {c['v_bits']} bits (lsb {f['v_lsb']:g}), "
        f"exp index >> {f['exp_shift']}, out >> {f['out_shift']} into {c['out_bits']} bits "
        f"(lsb {f['out_lsb']:g})",
        f"  vectors: {r['vectors']} random + {r['edge_vectors']} edge",
        "  widths: "
        + (
            "all intermediates inside their declared ranges"
            if not r["width_violations"]
            else "; ".join(r["width_violations"])
        ),
        f"  vs float: max |error| {fl['max_abs_error']:.6g} <= bound {fl['bound']:.6g}: "
        + ("yes" if fl["within_bound"] else f"NO (worst vector {fl['worst_vector']})"),
        "  result: " + ("PASS" if r["ok"] else "FAIL"),
    ]
    return "\n".join(lines)
