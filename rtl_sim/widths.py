"""Widths and port lists of the generated cores (the unrolled levels).

The bit widths of the alignment and attention datapaths, read from the golden model's
Formats (eatt.quant.golden), the port list each top writes to metadata.json
("interface"), and ``_bits``: the signed width of an integer range, which sizes every
adder of the generated RTL from its bounds.
"""

from __future__ import annotations

from eatt.config import CoreConfig
from eatt.quant.golden import Formats, derive_formats, signed_bits


def _bits(lo: int, hi: int) -> int:
    """Signed bits holding every integer in [lo, hi]."""
    return signed_bits(max(-lo, hi, 0))


def alignment_widths(cfg: CoreConfig, formats: Formats | None = None) -> dict[str, int]:
    """Bit widths of the alignment datapath: read from the golden model's Formats."""
    f = formats or derive_formats(cfg)
    return {
        "in_bits": f.in_bits,
        "acc_bits": f.q_acc_bits,  # |Q| before the shift <= q_acc_bound
        "q_shift": f.q_shift,
        "qk_bits": f.qk_code_bits,  # what the arithmetic shift leaves (<= cfg.qk_bits)
        "score_bits": f.score_bits,
    }


def alignment_interface(cfg: CoreConfig) -> dict:
    """The port list of the alignment top (also written to metadata.json)."""
    w = alignment_widths(cfg)
    return {
        "protocol": "ap_ctrl_hs",
        "clock": "ap_clk",
        "reset": {"name": "ap_rst", "active": "high", "kind": "synchronous"},
        "control": ["ap_start", "ap_done", "ap_idle", "ap_ready"],
        "inputs": {
            "x": {
                "shape": [cfg.len_q, cfg.dim],
                "element_bits": cfg.in_bits,
                "signed": True,
                "width": cfg.len_q * cfg.dim * cfg.in_bits,
                "packing": "element (i, d) at bits [(i*dim + d)*in_bits +: in_bits]",
            },
            "y": {
                "shape": [cfg.len_k, cfg.dim],
                "element_bits": cfg.in_bits,
                "signed": True,
                "width": cfg.len_k * cfg.dim * cfg.in_bits,
                "packing": "element (j, d) at bits [(j*dim + d)*in_bits +: in_bits]",
            },
        },
        "outputs": {
            "s": {
                "shape": [cfg.heads, cfg.len_q, cfg.len_k],
                "element_bits": w["score_bits"],
                "signed": True,
                "width": cfg.heads * cfg.len_q * cfg.len_k * w["score_bits"],
                "packing": (
                    "element (h, i, j) at bits [((h*len_q + i)*len_k + j)*score_bits +: score_bits]"
                ),
                "valid": "s_vld",
            }
        },
        "widths": w,
    }


def attention_widths(cfg: CoreConfig, formats: Formats | None = None) -> dict[str, int]:
    """Bit widths of the whole-core datapath (attention level): read from the golden Formats."""
    f = formats or derive_formats(cfg)
    w = alignment_widths(cfg, f)
    w.update(
        v_acc_bits=f.v_acc_bits,
        v_shift=f.v_shift,
        v_bits=f.v_code_bits,  # |V| <= 2**(v_bits-1) (<= cfg.v_bits)
        diff_bits=f.zdiff_bits,  # max_j S - S in [0, 2 * score_bound], unsigned
        exp_shift=f.exp_shift,
        exp_index_bits=f.exp_index_bits,
        exp_bits=f.exp_bits,
        total_bits=f.esum_bits,  # E <= len_k * 2**exp_frac
        numer_bits=f.numer_bits,
        recip_index_bits=f.recip_index_bits,
        recip_bits=f.recip_bits,  # RECIP[i] <= 2**recip_frac, unsigned
        prod_bits=f.prod_bits,  # N * R + 2**(recip_frac + n - 1)
        attn_bits=f.attn_bits,  # O is clamped into cfg.v_bits (golden weighted_values)
        out_acc_bits=f.out_acc_bits,
        out_shift=f.out_shift,
        out_bits=f.out_code_bits,
    )
    return w


def mask_bits(cfg: CoreConfig) -> dict[str, int]:
    """Width of each mask input port the core takes (golden MASK_INPUTS): length in
    [1, len_k], offset in [0, len_k - 1], unsigned (the QONNX file's UINT widths)."""
    bits = {"length": cfg.len_k.bit_length(), "offset": max(1, (cfg.len_k - 1).bit_length())}
    return {m: bits[m] for m in cfg.mask_inputs}


def attention_interface(cfg: CoreConfig) -> dict:
    """The port list of the attention top (also written to metadata.json)."""
    iface = alignment_interface(cfg)
    for name, bits in mask_bits(cfg).items():
        iface["inputs"][name] = {
            "shape": [],
            "element_bits": bits,
            "signed": False,
            "width": bits,
            "packing": "one unsigned integer per vector, sampled with x and y",
        }
    w = attention_widths(cfg)
    zb = w["out_bits"]
    iface["outputs"] = {
        "z": {
            "shape": [cfg.len_q, cfg.dim],
            "element_bits": zb,
            "signed": True,
            "width": cfg.len_q * cfg.dim * zb,
            "packing": "element (i, d) at bits [(i*dim + d)*out_bits +: out_bits]",
            "valid": "z_vld",
        }
    }
    iface["widths"] = w
    return iface
