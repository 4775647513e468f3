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
of the same domain, executed by WindowGolden (quant/window_ops.py, re-exported here; docs/export.md
"Kind window").
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto, TensorProto, helper
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
from eatt.quant.op_common import (  # noqa: F401 - re-exported: what the nodes share
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
from eatt.quant.window_ops import (  # noqa: F401 - re-exported: the window unit's node
    WINDOW_INPUTS,
    WINDOW_OP_TYPE,
    WindowAttention,
    make_window_node,
    window_derived_attributes,
    window_focus_datatype,
    window_from_node,
    window_input_fracs,
    window_input_names,
    window_output_datatype,
    window_output_names,
)

OP_TYPE = "AttentionCore"

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


#: qonnx's registry reads this dict (op_type -> CustomOp class)
custom_op = {OP_TYPE: AttentionCore, WINDOW_OP_TYPE: WindowAttention}
