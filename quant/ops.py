"""Our QONNX custom-op domain: one attention core as one node, executed by the golden model.

qonnx resolves a node's ``domain`` to a Python module and looks the ``op_type`` up in that
module's ``custom_op`` dict (qonnx.custom_op.registry.getCustomOp), so a node of domain
``eatt.quant.ops`` and op_type ``AttentionCore`` is executed by the class below when eatt is
installed: ``qonnx.core.onnx_exec.execute_onnx``, ``qonnx-exec`` and qonnx's cleanup and
inference transformations all work on our files.

The node carries the whole core: every CoreConfig field as an attribute, the integer weights
as int tensor attributes, and the derived formats and tables the hardware needs (docs/export.md
lists them). Its two inputs are the fixed-point inputs X (1, len_q, dim) and Y (1, len_k, dim)
as real values (integer code * 2**-in_frac, the output of a QONNX Quant node); its output is the
real value of the core's integer output, out * out_lsb. Execution converts the inputs back to
integer codes, runs GoldenCore.forward and scales the result, so qonnx execution equals the
golden model by construction; what the file adds is a self-describing, tool-readable artifact.

The windowed cross-attention unit (kind window, eatt.quant.window) is the node ``WindowAttention``
of the same domain, executed by WindowGolden: see the section at the end of this module and
docs/export.md "Kind window".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper
from qonnx.core.datatype import DataType
from qonnx.custom_op.base import CustomOp

from eatt.config import CoreConfig
from eatt.mechanisms import MECHANISMS, core_kinds
from eatt.quant.golden import (
    CoreWeights,
    GoldenCore,
    derive_formats,
    exp_table,
    recip_table,
    weight_shapes,
)
from eatt.quant.window import (
    WindowGolden,
    core_config,
    derive_window_formats,
    has_focus,
    penalty_table,
)

#: the ONNX domain of our nodes: the import path of this module (how qonnx finds it)
DOMAIN = "eatt.quant.ops"
OP_TYPE = "AttentionCore"
#: bumped whenever the node's attributes or semantics change; load_core refuses other versions
FORMAT_VERSION = 2

#: kinds of core the node represents (CoreConfig kinds the golden model implements: one per
#: attention mechanism)
EXPORTABLE_KINDS = core_kinds()

#: the core node's mask inputs (CoreConfig.mask_inputs), after X and Y: integer graph inputs
#: of shape (batch, 1), one value per call
MASK_INPUT_NAMES = {"length": "L", "offset": "O"}


def core_node_inputs(cfg: CoreConfig) -> list[str]:
    """The AttentionCore node's inputs, in order: X, Y, then L (key_padding), O (causal)."""
    return ["X", "Y", *(MASK_INPUT_NAMES[m] for m in cfg.mask_inputs)]


def mask_datatypes(cfg: CoreConfig) -> dict[str, str]:
    """qonnx datatype of each mask graph input: length in [1, len_k], offset in [0, len_k-1]."""
    bits = {"length": cfg.len_k.bit_length(), "offset": max(1, (cfg.len_k - 1).bit_length())}
    return {MASK_INPUT_NAMES[m]: f"UINT{bits[m]}" for m in cfg.mask_inputs}


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

# Derived from the config by the golden model; stored so that an HLS/RTL generator reads the
# hardware's numbers from the file, and checked against derive_formats on load and execution.
_DERIVED_ATTRS: dict[str, str] = {
    "tau_int": "i",
    "d_head": "i",
    "q_shift": "i",
    "v_shift": "i",
    "exp_shift": "i",
    "recip_index_bits": "i",
    "out_shift": "i",
    "out_frac": "i",  # real output = integer output * 2**-out_frac
    "exp_table": "t",
    "recip_table": "t",
}

#: weight attributes (int tensors, input -> output order as in CoreWeights): every mechanism's
#: (a node carries its kind's, eatt.quant.golden.weight_shapes), then W_V and W_O
WEIGHT_ATTRS = tuple(
    dict.fromkeys(n for m in MECHANISMS.values() for n in m.weight_names + ("wv", "wo")).keys()
)


def lsb_frac(lsb: float) -> int:
    """The f with lsb == 2**-f (every LSB the golden model derives is a power of two)."""
    mantissa, exponent = math.frexp(lsb)
    if mantissa != 0.5:
        raise ValueError(f"formats: LSB {lsb!r} is not a power of two")
    return 1 - exponent


def weight_dtype(cfg: CoreConfig) -> type:
    """Smallest numpy integer type holding the config's weights."""
    return np.int8 if cfg.weight_bits <= 8 else np.int16


def derived_attributes(cfg: CoreConfig) -> dict[str, Any]:
    """The derived attributes of a node for cfg, as Python ints / numpy int32 tables."""
    f = derive_formats(cfg)
    return {
        "tau_int": int(cfg.tau_int),
        "d_head": int(cfg.d_head),
        "q_shift": int(f.q_shift),
        "v_shift": int(f.v_shift),
        "exp_shift": int(f.exp_shift),
        "recip_index_bits": int(f.recip_index_bits),
        "out_shift": int(f.out_shift),
        "out_frac": lsb_frac(f.out_lsb),
        "exp_table": exp_table(cfg).astype(np.int32),
        "recip_table": recip_table(cfg).astype(np.int32),
    }


def output_datatype(cfg: CoreConfig) -> DataType:
    """qonnx annotation of the output: FIXED<out_bits, int bits> where qonnx allows it."""
    out_frac = lsb_frac(derive_formats(cfg).out_lsb)
    if out_frac >= 1:
        return DataType[f"FIXED<{cfg.out_bits},{cfg.out_bits - out_frac}>"]
    return DataType[f"SCALEDINT<{cfg.out_bits}>"]


def make_core_node(
    cfg: CoreConfig, weights: CoreWeights, inputs: list[str], output: str, name: str
) -> NodeProto:
    """The AttentionCore node for (cfg, weights); weights must already pass weights.check."""
    attrs: dict[str, Any] = {"format_version": FORMAT_VERSION}
    for key in _CONFIG_ATTRS:
        value = getattr(cfg, key)
        attrs[key] = repr(float(value)) if key == "tau" else value
        if key in ("key_padding", "causal"):
            attrs[key] = int(value)
    attrs.update(derived_attributes(cfg))
    dtype = weight_dtype(cfg)
    for key, w in weights.as_dict().items():
        attrs[key] = helper.make_tensor(key, _onnx_type(dtype), w.shape, w.astype(dtype).ravel())
    for key in ("exp_table", "recip_table"):
        t = attrs[key]
        attrs[key] = helper.make_tensor(key, _onnx_type(np.int32), t.shape, t.ravel())
    return helper.make_node(OP_TYPE, inputs, [output], name=name, domain=DOMAIN, **attrs)


def _onnx_type(dtype: type) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


class CoreAttributeError(ValueError):
    """An AttentionCore node whose attributes do not describe a valid core (one-line message)."""


def core_from_node(node: NodeProto) -> tuple[CoreConfig, CoreWeights]:
    """Read (config, weights) from an AttentionCore node, checking every attribute.

    Raises CoreAttributeError (a ValueError) with one line naming the attribute at fault.
    """
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    where = f"{OP_TYPE} node '{node.name}'"
    version = attrs.get("format_version")
    if version != FORMAT_VERSION:
        raise CoreAttributeError(
            f"{where}: format_version is {version!r}, this eatt reads {FORMAT_VERSION}"
        )
    for key in (*_CONFIG_ATTRS, *_DERIVED_ATTRS):
        if key not in attrs:
            raise CoreAttributeError(f"{where}: missing attribute '{key}'")
    data: dict[str, Any] = {}
    for key in _CONFIG_ATTRS:
        value = attrs[key]
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        if key == "tau":
            try:
                value = float(value)
            except ValueError:
                raise CoreAttributeError(f"{where}: tau {value!r} is not a number") from None
        if key in ("key_padding", "causal"):
            if value not in (0, 1):
                raise CoreAttributeError(f"{where}: {key} is {value!r}, expected 0 or 1")
            value = bool(value)
        data[key] = value
    try:
        cfg = CoreConfig.from_dict(data, source=where)
    except ValueError as err:
        raise CoreAttributeError(str(err)) from None
    if cfg.kind not in EXPORTABLE_KINDS:
        raise CoreAttributeError(f"{where}: kind {cfg.kind!r} has no {OP_TYPE} semantics")
    expected = derived_attributes(cfg)
    for key, want in expected.items():
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
    weights = {}
    for key in weight_shapes(cfg):
        if key not in attrs:
            raise CoreAttributeError(f"{where}: missing attribute '{key}'")
        w = _to_array(attrs[key])
        if not np.issubdtype(w.dtype, np.integer):
            raise CoreAttributeError(f"{where}: weight '{key}' is {w.dtype}, expected integers")
        weights[key] = w.astype(np.int64)
    core_weights = CoreWeights(**weights)
    try:
        core_weights.check(cfg)
    except ValueError as err:
        raise CoreAttributeError(f"{where}: {err}") from None
    return cfg, core_weights


def _to_array(tensor: Any) -> np.ndarray:
    return tensor if isinstance(tensor, np.ndarray) else numpy_helper.to_array(tensor)


class AttentionCore(CustomOp):
    """One multi-head attention core (E-ATT or dot product), bit-exact to GoldenCore.

    Inputs: X (batch, len_q, dim), Y (batch, len_k, dim), real values on the <in_bits, in_frac>
    grid; with key_padding L (batch, 1), the valid key length, with causal O (batch, 1), the
    offset (integers). Output: (batch, len_q, dim), real values on the <out_bits, out_frac> grid.
    """

    def get_nodeattr_types(self):
        types: dict[str, tuple] = {"format_version": ("i", True, FORMAT_VERSION)}
        types["kind"] = ("s", True, "", set(EXPORTABLE_KINDS))
        for key, dtype in _CONFIG_ATTRS.items():
            if key != "kind":
                types[key] = (dtype, True, "" if dtype == "s" else 0)
        for key, dtype in _DERIVED_ATTRS.items():
            types[key] = (dtype, True, np.zeros(0, dtype=np.int32) if dtype == "t" else 0)
        for key in WEIGHT_ATTRS:  # the node's kind says which it needs
            types[key] = ("t", False, np.zeros((0, 0), dtype=np.int8))
        return types

    def core(self) -> GoldenCore:
        cfg, weights = core_from_node(self.onnx_node)
        return GoldenCore(cfg, weights)

    def make_shape_compatible_op(self, model):
        # The output has the shape of X, (batch, len_q, dim): a Cast of X is shape-compatible
        # (and, unlike a constant-shape op, works while X's own shape is still being inferred).
        return helper.make_node(
            "Cast", [self.onnx_node.input[0]], [self.onnx_node.output[0]], to=TensorProto.FLOAT
        )

    def infer_node_datatype(self, model):
        cfg, _ = core_from_node(self.onnx_node)
        model.set_tensor_datatype(self.onnx_node.output[0], output_datatype(cfg))

    def execute_node(self, context, graph):
        node = self.onnx_node
        golden = self.core()
        cfg = golden.cfg
        expect = core_node_inputs(cfg)
        if len(node.input) != len(expect):
            raise ValueError(f"{OP_TYPE}: expected {len(expect)} inputs ({', '.join(expect)})")
        x, y = (
            to_codes(context[name], cfg.in_frac, f"{OP_TYPE} input {name}")
            for name in node.input[:2]
        )
        masks = {
            mask: to_codes(context[name], 0, f"{OP_TYPE} input {name}").reshape(len(x))
            for mask, name in zip(cfg.mask_inputs, node.input[2:], strict=True)
        }
        out = golden.forward(x, y, masks=masks)
        context[node.output[0]] = from_codes(out, lsb_frac(golden.formats.out_lsb))

    def verify_node(self):
        node = self.onnx_node
        messages = []
        messages.append(
            f"domain is {DOMAIN}" if node.domain == DOMAIN else f"domain should be {DOMAIN}"
        )
        try:
            cfg, _ = core_from_node(node)
            messages.append("attributes describe a valid core")
        except ValueError as err:
            messages.append(str(err))
            return messages
        names = core_node_inputs(cfg)
        n = len(names)
        messages.append(
            f"{n} inputs ({', '.join(names)})"
            if len(node.input) == n
            else f"{OP_TYPE} needs {n} inputs ({', '.join(names)})"
        )
        return messages


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


#: qonnx's registry reads this dict (op_type -> CustomOp class)
custom_op = {OP_TYPE: AttentionCore}


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


custom_op[WINDOW_OP_TYPE] = WindowAttention
