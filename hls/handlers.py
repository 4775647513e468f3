"""The ONNX handler and the backend templates of the AttentionCore layer.

- ``parse_attention_core``: hls4ml's ONNX front end calls it for every node of op_type
  ``AttentionCore``. It reads the node with eatt.quant.ops.core_from_node (which checks every
  attribute against the golden model) and returns the layer dict hls4ml builds the layer from.
  Anything it cannot represent is a ``ConversionError`` whose message names the node.
- ``AttentionCoreConfigTemplate`` / ``AttentionCoreFunctionTemplate``: hls4ml "templates" (passes
  that write the layer's CONFIG_T struct and its call in myproject.cpp), registered for the
  Vivado and Vitis backends (the same C++ serves both).
"""

from __future__ import annotations

from dataclasses import fields

from hls4ml.backends.template import FunctionCallTemplate, LayerConfigTemplate

from eatt.config import CoreConfig
from eatt.hls.layers import (
    INT_ATTRS,
    TABLE_NAMES,
    WEIGHT_NAMES,
    AttentionCore,
    ap_type,
    datapath_widths,
)
from eatt.quant.ops import DOMAIN, OP_TYPE, core_from_node, derived_attributes

HEADER = "nnet_utils/nnet_attention_core.h"


class ConversionError(ValueError):
    """A QONNX file (or node) the hls4ml extension cannot convert; the message names the node."""


def parse_attention_core(node, input_names, input_shapes, graph):
    """hls4ml ONNX handler: AttentionCore node -> hls4ml layer dict (class AttentionCore)."""
    where = f"{OP_TYPE} node '{node.name}'"
    if node.domain != DOMAIN:
        raise ConversionError(f"{where}: domain {node.domain!r} is not {DOMAIN!r}")
    if len(input_names) != 2 or len(node.output) != 1:
        raise ConversionError(f"{where}: expected 2 inputs (X, Y) and 1 output")
    try:
        cfg, weights = core_from_node(node)
    except ValueError as err:
        raise ConversionError(str(err)) from None
    derived = derived_attributes(cfg)
    known = {"format_version", *(f.name for f in fields(CoreConfig)), *derived, *WEIGHT_NAMES}
    unknown = sorted({a.name for a in node.attribute} - known)
    if unknown:
        raise ConversionError(f"{where}: unsupported attribute '{unknown[0]}'")
    layer = {
        "class_name": "AttentionCore",
        "name": node.name,
        "inputs": list(input_names),
        "outputs": list(node.output),
        "kind": cfg.kind,
    }
    for key in INT_ATTRS:
        layer[key] = int(derived[key]) if key in derived else int(getattr(cfg, key))
    for key, w in weights.as_dict().items():
        layer[key + "_data"] = w
    for key in TABLE_NAMES:
        layer[key + "_data"] = derived[key].astype("int64")
    return layer


config_template = """struct config{index} : nnet::attention_core_config {{
    static const unsigned len_q = {len_q};
    static const unsigned len_k = {len_k};
    static const unsigned dim = {dim};
    static const unsigned heads = {heads};
    static const unsigned d_head = {d_head};
    static const int tau_int = {tau_int};
    static const unsigned q_shift = {q_shift};
    static const unsigned v_shift = {v_shift};
    static const unsigned exp_shift = {exp_shift};
    static const unsigned exp_table_size = {exp_table_size};
    static const unsigned recip_index_bits = {recip_index_bits};
    static const unsigned recip_frac = {recip_frac};
    static const unsigned out_shift = {out_shift};
    static const int v_min = {v_min};
    static const int v_max = {v_max};
    static const unsigned esum_bits = {esum_bits};
    static const unsigned reuse_factor = {reuse};
    typedef ap_fixed<{in_bits}, {in_int}> in_fixed_t;
    typedef ap_fixed<{out_bits}, {out_int}> out_fixed_t;
{typedefs}
    typedef {wq_t} wq_t;
    typedef {wk_t} wk_t;
    typedef {wv_t} wv_t;
    typedef {wo_t} wo_t;
    typedef {exp_table_t} exp_table_t;
    typedef {recip_table_t} recip_table_t;
}};
"""

function_template = (
    "nnet::attention_core_{kind}<{x_t}, {y_t}, {output_t}, {config}>"
    "({x}, {y}, {output}, {wq}, {wk}, {wv}, {wo}, {exp_table}, {recip_table});"
)


class AttentionCoreConfigTemplate(LayerConfigTemplate):
    def __init__(self):
        super().__init__(AttentionCore)
        self.template = config_template

    def format(self, node):
        params = self._default_config_params(node)
        widths = datapath_widths(params)
        params["typedefs"] = "\n".join(
            f"    typedef {ap_type(signed, width)} {name};"
            for name, (signed, width) in widths.items()
        )
        params["esum_bits"] = widths["esum_t"][1]
        params["v_min"] = -(2 ** (params["v_bits"] - 1))
        params["v_max"] = 2 ** (params["v_bits"] - 1) - 1
        params["in_int"] = params["in_bits"] - params["in_frac"]
        params["out_int"] = params["out_bits"] - params["out_frac"]
        for name in (*WEIGHT_NAMES, *TABLE_NAMES):
            params[name + "_t"] = node.get_weights(name).type.name
        return self.template.format(**params)


class AttentionCoreFunctionTemplate(FunctionCallTemplate):
    def __init__(self):
        super().__init__(AttentionCore, include_header=[HEADER])
        self.template = function_template

    def format(self, node):
        x = node.get_input_variable(node.inputs[0])
        y = node.get_input_variable(node.inputs[1])
        params = {
            "kind": node.get_attr("kind"),
            "config": f"config{node.index}",
            "x_t": x.type.name,
            "y_t": y.type.name,
            "x": x.name,
            "y": y.name,
            "output_t": node.get_output_variable().type.name,
            "output": node.get_output_variable().name,
        }
        for name in (*WEIGHT_NAMES, *TABLE_NAMES):
            params[name] = node.get_weights(name).name
        return self.template.format(**params)
