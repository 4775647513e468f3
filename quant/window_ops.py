"""The QONNX node of the windowed cross-attention unit (kind window): ``WindowAttention`` of
the domain eatt.quant.ops (qonnx finds it there: eatt.quant.ops re-exports it and lists it in
its ``custom_op``), executed by eatt.quant.window.WindowGolden (docs/export.md, "Kind window")."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto, TensorProto, helper
from qonnx.core.datatype import DataType
from qonnx.custom_op.base import CustomOp

from eatt.config import CoreConfig
from eatt.quant.golden import CoreWeights, exp_table, recip_table
from eatt.quant.op_common import (
    _CONFIG_ATTRS,
    DOMAIN,
    FORMAT_VERSION,
    CoreAttributeError,
    _onnx_type,
    _to_array,
    from_codes,
    lsb_frac,
    to_codes,
    weight_dtype,
)
from eatt.quant.window import (
    WindowGolden,
    core_config,
    derive_window_formats,
    has_focus,
    penalty_table,
)

# -- the windowed cross-attention unit (kind window) ---------------------------------------------
# One decoding step of eatt.quant.window.WindowGolden as one node (docs/export.md, "Kind window").
# Inputs, in the order of window.STEP_INPUTS: X (batch, dim) the query on the input grid; P, W
# (batch, 1) the window centre and effective half-width (Luong local-p Eq. 9, Flexible Sec. 3);
# K (batch, len_k, dim) key codes * 2**-key_frac; V (batch, len_k, dim) value codes *
# 2**-value_frac; C (batch, len_k) row counts (L0Drop Algorithm 1); L (batch, 1) valid rows; and,
# for position flexible only, G (batch, 1) the strength level. Output O (batch, dim): the
# attention output, codes * 2**-value_frac; for position flexible also F (batch, heads), the
# focus rows (Flexible Eq. 4, the next step's P). Integer values travel as exact float32.
WINDOW_OP_TYPE = "WindowAttention"
#: the node's input names (graph inputs of an exported file), flexible adds G
WINDOW_INPUTS = ("X", "P", "W", "K", "V", "C", "L")

_WINDOW_CONFIG_ATTRS: dict[str, str] = {
    # the core's keys but its masks (the window unit has its own length input)
    **{k: v for k, v in _CONFIG_ATTRS.items() if k not in ("key_padding", "causal")},
    "window_score": "s",
    "window_d": "i",
    "position": "s",
    "window_sigma": "s",  # repr(float) or "" for None (sigma = window_d / 2)
    "g_levels": "i",
    "count_bits": "i",
}
_WINDOW_DERIVED_ATTRS: dict[str, str] = {
    "tau_int": "i",
    "d_head": "i",
    "q_shift": "i",
    "exp_shift": "i",
    "recip_index_bits": "i",
    "key_frac": "i",  # real key = code * 2**-key_frac (Q/K format)
    "value_frac": "i",  # real value and output = code * 2**-value_frac (V format)
    "qk_code_bits": "i",
    "v_code_bits": "i",
    "window_rows": "i",
    "count_max": "i",
    "exp_table": "t",
    "recip_table": "t",
    "penalty_table": "t",  # (levels, window_d + 1): P[level][|s - p|] in score units
}


def window_input_names(cfg: CoreConfig) -> tuple[str, ...]:
    """The WindowAttention node's inputs for cfg: G only for position flexible."""
    return (*WINDOW_INPUTS, "G") if cfg.position == "flexible" else WINDOW_INPUTS


def window_output_names(cfg: CoreConfig) -> tuple[str, ...]:
    """The WindowAttention node's outputs for cfg: F (the focus) only for position flexible."""
    return ("O", "F") if has_focus(cfg) else ("O",)


def window_focus_datatype(cfg: CoreConfig) -> DataType:
    """qonnx annotation of F: an unsigned row address."""
    return DataType[f"UINT{derive_window_formats(cfg).addr_bits}"]


def window_derived_attributes(cfg: CoreConfig) -> dict[str, Any]:
    """The derived attributes of a WindowAttention node (Python ints / int32 tables)."""
    wf = derive_window_formats(cfg)
    f = wf.core
    core = core_config(cfg)
    return {
        "tau_int": int(cfg.tau_int),
        "d_head": int(cfg.d_head),
        "q_shift": int(f.q_shift),
        "exp_shift": int(f.exp_shift),
        "recip_index_bits": int(f.recip_index_bits),
        "key_frac": lsb_frac(f.q_lsb),
        "value_frac": lsb_frac(f.v_lsb),
        "qk_code_bits": int(wf.qk_code_bits),
        "v_code_bits": int(wf.v_code_bits),
        "window_rows": int(wf.window_rows),
        "count_max": int(wf.count_max),
        "exp_table": exp_table(core).astype(np.int32),
        "recip_table": recip_table(core).astype(np.int32),
        "penalty_table": penalty_table(cfg, f).astype(np.int32),
    }


def window_output_datatype(cfg: CoreConfig) -> DataType:
    """qonnx annotation of O: FIXED<v_bits, int bits> where qonnx allows it."""
    frac = window_derived_attributes(cfg)["value_frac"]
    if frac >= 1:
        return DataType[f"FIXED<{cfg.v_bits},{cfg.v_bits - frac}>"]
    return DataType[f"SCALEDINT<{cfg.v_bits}>"]


def make_window_node(
    cfg: CoreConfig, weights: CoreWeights, inputs: list[str], outputs: list[str], name: str
) -> NodeProto:
    """The WindowAttention node: config, W_Q (the only weight inside the unit), tables;
    ``outputs`` as window_output_names (O, and F for position flexible)."""
    attrs: dict[str, Any] = {"format_version": FORMAT_VERSION}
    for key in _WINDOW_CONFIG_ATTRS:
        value = getattr(cfg, key)
        if key in ("tau", "window_sigma"):
            value = "" if value is None else repr(float(value))
        attrs[key] = value
    for key, value in window_derived_attributes(cfg).items():
        if isinstance(value, np.ndarray):
            value = helper.make_tensor(key, _onnx_type(np.int32), value.shape, value.ravel())
        attrs[key] = value
    dtype = weight_dtype(cfg)
    wq = weights.wq.astype(dtype)
    attrs["wq"] = helper.make_tensor("wq", _onnx_type(dtype), wq.shape, wq.ravel())
    return helper.make_node(WINDOW_OP_TYPE, inputs, outputs, name=name, domain=DOMAIN, **attrs)


def window_from_node(node: NodeProto) -> tuple[CoreConfig, CoreWeights]:
    """(config, weights) of a WindowAttention node, every attribute checked (one-line error).

    Only W_Q is stored: the memory holds K and V already projected and W_O is outside the unit,
    so the CoreWeights returned have wk, wv, wo all zero.
    """
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    where = f"{WINDOW_OP_TYPE} node '{node.name}'"
    version = attrs.get("format_version")
    if version != FORMAT_VERSION:
        raise CoreAttributeError(
            f"{where}: format_version is {version!r}, this eatt reads {FORMAT_VERSION}"
        )
    for key in (*_WINDOW_CONFIG_ATTRS, *_WINDOW_DERIVED_ATTRS, "wq"):
        if key not in attrs:
            raise CoreAttributeError(f"{where}: missing attribute '{key}'")
    data: dict[str, Any] = {}
    for key in _WINDOW_CONFIG_ATTRS:
        value = attrs[key]
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        if key in ("tau", "window_sigma"):
            if key == "window_sigma" and value == "":
                value = None
            else:
                try:
                    value = float(value)
                except ValueError:
                    raise CoreAttributeError(f"{where}: {key} {value!r} is not a number") from None
        data[key] = value
    if data["kind"] != "window":
        raise CoreAttributeError(
            f"{where}: kind {data['kind']!r} has no {WINDOW_OP_TYPE} semantics"
        )
    try:
        cfg = CoreConfig.from_dict(data, source=where)
    except ValueError as err:
        raise CoreAttributeError(str(err)) from None
    for key, want in window_derived_attributes(cfg).items():
        got = attrs[key]
        if isinstance(want, np.ndarray):
            got = _to_array(got)
            same = got.shape == want.shape and np.array_equal(got, want)
        else:
            same = got == want
        if not same:
            raise CoreAttributeError(
                f"{where}: attribute '{key}' disagrees with the golden model's value for this "
                "config (file written by another eatt version, or edited)"
            )
    wq = _to_array(attrs["wq"])
    if not np.issubdtype(wq.dtype, np.integer):
        raise CoreAttributeError(f"{where}: weight 'wq' is {wq.dtype}, expected integers")
    zero = np.zeros((cfg.dim, cfg.dim), dtype=np.int64)
    weights = CoreWeights(wq.astype(np.int64), zero, zero.copy(), zero.copy())
    try:
        weights.check(cfg)
    except ValueError as err:
        raise CoreAttributeError(f"{where}: {err}") from None
    return cfg, weights


def window_input_fracs(cfg: CoreConfig) -> dict[str, int]:
    """Input name -> f with real = code * 2**-f (0 for the integer inputs)."""
    d = window_derived_attributes(cfg)
    fracs = {"X": cfg.in_frac, "K": d["key_frac"], "V": d["value_frac"]}
    return {name: fracs.get(name, 0) for name in window_input_names(cfg)}


class WindowAttention(CustomOp):
    """One step of the windowed cross-attention unit, bit-exact to WindowGolden.forward."""

    def get_nodeattr_types(self):
        types: dict[str, tuple] = {"format_version": ("i", True, FORMAT_VERSION)}
        for key, dtype in _WINDOW_CONFIG_ATTRS.items():
            types[key] = (dtype, True, "" if dtype == "s" else 0)
        types["kind"] = ("s", True, "", {"window"})
        for key, dtype in _WINDOW_DERIVED_ATTRS.items():
            types[key] = (dtype, True, np.zeros(0, dtype=np.int32) if dtype == "t" else 0)
        types["wq"] = ("t", True, np.zeros((0, 0), dtype=np.int8))
        return types

    def golden(self):
        return WindowGolden(*window_from_node(self.onnx_node))

    def make_shape_compatible_op(self, model):
        # O has the shape of X, (batch, dim); F (flexible) keeps its declared (batch, heads)
        return helper.make_node(
            "Cast", [self.onnx_node.input[0]], [self.onnx_node.output[0]], to=TensorProto.FLOAT
        )

    def infer_node_datatype(self, model):
        cfg, _ = window_from_node(self.onnx_node)
        model.set_tensor_datatype(self.onnx_node.output[0], window_output_datatype(cfg))
        if len(self.onnx_node.output) > 1:
            model.set_tensor_datatype(self.onnx_node.output[1], window_focus_datatype(cfg))

    def execute_node(self, context, graph):
        node = self.onnx_node
        golden = self.golden()
        cfg = golden.cfg
        names = window_input_names(cfg)
        if len(node.input) != len(names):
            raise ValueError(f"{WINDOW_OP_TYPE}: expected {len(names)} inputs ({', '.join(names)})")
        fracs = window_input_fracs(cfg)
        codes = {
            label: to_codes(context[tensor], fracs[label], f"{WINDOW_OP_TYPE} input {label}")
            for label, tensor in zip(names, node.input, strict=True)
        }
        n = len(codes["X"])
        if len(node.output) != len(window_output_names(cfg)):
            raise ValueError(
                f"{WINDOW_OP_TYPE}: expected outputs {', '.join(window_output_names(cfg))}"
            )
        step = {label: codes[label].reshape(n) for label in ("P", "W", "L", "G") if label in codes}
        out = golden.forward(
            codes["X"].reshape(n, cfg.dim),
            step["P"],
            step["W"],
            codes["K"],
            codes["V"],
            codes["C"].reshape(n, cfg.len_k),
            step["L"],
            step.get("G"),
            with_focus=has_focus(cfg),
        )
        if has_focus(cfg):
            out, focus = out
            context[node.output[1]] = focus.astype(np.float32)
        context[node.output[0]] = from_codes(out, fracs["V"])

    def verify_node(self):
        node = self.onnx_node
        messages = [
            f"domain is {DOMAIN}" if node.domain == DOMAIN else f"domain should be {DOMAIN}"
        ]
        try:
            cfg, _ = window_from_node(node)
            messages.append("attributes describe a valid window unit")
            names = window_input_names(cfg)
            if len(node.input) == len(names):
                messages.append(f"{len(names)} inputs ({', '.join(names)})")
            else:
                messages.append(f"{WINDOW_OP_TYPE} needs {len(names)} inputs ({', '.join(names)})")
            outs = window_output_names(cfg)
            if len(node.output) == len(outs):
                messages.append(f"{len(outs)} output{'s' * (len(outs) > 1)} ({', '.join(outs)})")
            else:
                messages.append(f"{WINDOW_OP_TYPE} needs {len(outs)} outputs ({', '.join(outs)})")
        except ValueError as err:
            messages.append(str(err))
        return messages
