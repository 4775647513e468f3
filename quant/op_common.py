"""What the nodes of our QONNX domain share: the domain and format version, the config's
attribute types, integer codes <-> real values on a fixed-point grid, and the one-line error of a
node whose attributes are not a valid unit. quant/ops.py (AttentionCore) and quant/window_ops.py
(WindowAttention) build on it; eatt.quant.ops re-exports it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from onnx import helper, numpy_helper

from eatt.config import CoreConfig

#: the ONNX domain of our nodes: the import path of eatt.quant.ops, whose custom_op dict
#: qonnx reads (how it finds AttentionCore and WindowAttention)
DOMAIN = "eatt.quant.ops"

#: bumped whenever the node's attributes or semantics change; load_core refuses other versions
FORMAT_VERSION = 2

# Config fields and their ONNX attribute types. tau is a string holding repr(tau): an ONNX float
# attribute is 32-bit and would not give back the config's tau (the integer threshold the
# hardware compares against is stored exactly as tau_int).
_CONFIG_ATTRS: dict[str, str] = {
    "kind": "s",
    "len_q": "i",
    "len_k": "i",
    "dim": "i",
    "heads": "i",
    "tau": "s",
    "in_bits": "i",
    "in_frac": "i",
    "weight_bits": "i",
    "weight_frac": "i",
    "qk_bits": "i",
    "v_bits": "i",
    "out_bits": "i",
    "exp_table_size": "i",
    "exp_frac": "i",
    "recip_table_size": "i",
    "recip_frac": "i",
    "key_padding": "i",
    "causal": "i",
}


def lsb_frac(lsb: float) -> int:
    """The f with lsb == 2**-f (every LSB the golden model derives is a power of two)."""
    mantissa, exponent = math.frexp(lsb)
    if mantissa != 0.5:
        raise ValueError(f"formats: LSB {lsb!r} is not a power of two")
    return 1 - exponent


def weight_dtype(cfg: CoreConfig) -> type:
    """Smallest numpy integer type holding the config's weights."""
    return np.int8 if cfg.weight_bits <= 8 else np.int16


def _onnx_type(dtype: type) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


class CoreAttributeError(ValueError):
    """An AttentionCore node whose attributes do not describe a valid core (one-line message)."""


def _to_array(tensor: Any) -> np.ndarray:
    return tensor if isinstance(tensor, np.ndarray) else numpy_helper.to_array(tensor)


def to_codes(real: np.ndarray, frac: int, what: str = "tensor") -> np.ndarray:
    """Real values on the 2**-frac grid -> int64 codes; off-grid values are an error."""
    scaled = np.asarray(real, dtype=np.float64) * 2.0**frac
    codes = np.rint(scaled)
    if not np.array_equal(codes, scaled):
        raise ValueError(f"{what}: values are not on the 2**-{frac} grid (feed it through Quant)")
    return codes.astype(np.int64)


def from_codes(codes: np.ndarray, frac: int) -> np.ndarray:
    """int codes -> float32 real values codes * 2**-frac (exact: codes have <= 24 bits)."""
    return (np.asarray(codes, dtype=np.float64) * 2.0**-frac).astype(np.float32)
