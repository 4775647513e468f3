"""The ONNX handler and the backend templates of the AttentionCore layer.

- ``parse_attention_core``: hls4ml's ONNX front end calls it for every node of op_type
  ``AttentionCore``. It reads the node with eatt.quant.ops.core_from_node (which checks every
  attribute against the golden model) and returns the layer dict hls4ml builds the layer from;
  a masked core (key_padding / causal) has the inputs L, O after X, Y.
  Anything it cannot represent is a ``ConversionError`` whose message names the node.
- ``AttentionCoreConfigTemplate`` / ``AttentionCoreFunctionTemplate``: hls4ml "templates" (passes
  that write the layer's CONFIG_T struct and its call in myproject.cpp), registered for the
  Vivado and Vitis backends (the same C++ serves both).
- ``parse_window_attention`` and ``WindowAttentionConfigTemplate`` /
  ``WindowAttentionFunctionTemplate``: the same for the windowed unit's WindowAttention node
  (kind window, templates/nnet_window_attention.h).
"""

from __future__ import annotations

import json
from dataclasses import fields

import numpy as np
from hls4ml.backends.template import FunctionCallTemplate, LayerConfigTemplate

from eatt.config import CoreConfig
from eatt.hls.folding import FOLDED_HEADERS, folded_form
from eatt.hls.layers import (
    CONFIG_ATTR,
    FOLDING_ATTRS,
    INT_ATTRS,
    TABLE_NAMES,
    WEIGHT_NAMES,
    WINDOW_INT_ATTRS,
    WINDOW_TABLE_NAMES,
    AttentionCore,
    WindowAttention,
    ap_type,
    datapath_widths,
    mask_widths,
    window_datapath_widths,
)
from eatt.mechanisms import MECHANISMS, mechanism_of
from eatt.quant.ops import (
    DOMAIN,
    OP_TYPE,
    WEIGHT_ATTRS,
    WINDOW_OP_TYPE,
    core_from_node,
    core_node_inputs,
    derived_attributes,
    window_derived_attributes,
    window_from_node,
    window_input_names,
    window_output_names,
)
from eatt.quant.window import derive_window_formats, penalty_levels

HEADER = "nnet_utils/nnet_attention_core.h"
WINDOW_HEADER = "nnet_utils/nnet_window_attention.h"


class ConversionError(ValueError):
    """A QONNX file (or node) the hls4ml extension cannot convert; the message names the node."""


def parse_attention_core(node, input_names, input_shapes, graph):
    """hls4ml ONNX handler: AttentionCore node -> hls4ml layer dict (class AttentionCore)."""
    where = f"{OP_TYPE} node '{node.name}'"
    if node.domain != DOMAIN:
        raise ConversionError(f"{where}: domain {node.domain!r} is not {DOMAIN!r}")
    try:
        cfg, weights = core_from_node(node)
    except ValueError as err:
        raise ConversionError(str(err)) from None
    mechanism = mechanism_of(cfg)
    if mechanism.hls_score is None:
        raise ConversionError(
            f"{where}: kind {cfg.kind}: its mechanism has no HLS kernel yet (golden model, "
            "Brevitas and QONNX only)"
        )
    labels = core_node_inputs(cfg)  # X, Y, then L (key_padding), O (causal)
    if len(input_names) != len(labels) or len(node.output) != 1:
        raise ConversionError(
            f"{where}: expected {len(labels)} inputs ({', '.join(labels)}) and 1 output"
        )
    derived = derived_attributes(cfg)
    known = {"format_version", *(f.name for f in fields(CoreConfig)), *derived, *WEIGHT_ATTRS}
    unknown = sorted({a.name for a in node.attribute} - known)
    if unknown:
        raise ConversionError(f"{where}: unsupported attribute '{unknown[0]}'")
    layer = {
        "class_name": "AttentionCore",
        "name": node.name,
        "inputs": list(input_names),
        "outputs": list(node.output),
        "kind": cfg.kind,
        "mask_inputs": list(cfg.mask_inputs),  # length, offset: the inputs after X, Y
        CONFIG_ATTR: json.dumps(cfg.to_dict(), sort_keys=True),  # widths: golden Formats
    }
    for key in INT_ATTRS:
        layer[key] = int(derived[key]) if key in derived else int(getattr(cfg, key))
    for key, w in alignment_slots(mechanism, weights).items():
        layer[key + "_data"] = w
    for key in TABLE_NAMES:
        layer[key + "_data"] = derived[key].astype("int64")
    return layer


def alignment_slots(mechanism, weights) -> dict:
    """The layer's weights by slot: the mechanism's alignment weights in wq, wk (a one-entry
    zero where it has one), then wv, wo."""
    own = [weights.as_dict()[n] for n in mechanism.weight_names]
    own += [np.zeros((1, 1), dtype=np.int64)] * (2 - len(own))
    return {"wq": own[0], "wk": own[1], "wv": weights.wv, "wo": weights.wo}


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
    static const unsigned n_wq = {n_wq};
    static const unsigned n_wk = {n_wk};
    template <class C> using score = nnet::{score}_score<C>;
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
    "nnet::attention_core<{x_t}, {y_t}, {output_t}, {config}>"
    "({x}, {y}, {output}, {wq}, {wk}, {wv}, {wo}, {exp_table}, {recip_table});"
)
#: the folded layer (lanes > 0; templates/nnet_folded_attention.h; CONFIG_T::folded, the
#: mechanism's folded form, picks what differs):
#: the length and offset of the call after X and Y always (an input the core does not take hides
#: nothing and is ignored); io_stream: folded_attention_stream, each mask read from its stream
folded_function_template = (
    "nnet::folded_attention{stream}<{x_t}, {y_t}, {output_t}, {config}>"
    "({x}, {y}, {length}, {offset}, {output}, {wq}, {wk}, {wv}, {wo}, {exp_table}, "
    "{recip_table});"
)
#: a core with masks: the length and offset of the call after X and Y (templates/
#: nnet_attention_core.h attention_core_masked)
masked_function_template = (
    "nnet::attention_core_masked<{x_t}, {y_t}, {output_t}, {config}>"
    "({x}, {y}, {length}, {offset}, {output}, {wq}, {wk}, {wv}, {wo}, {exp_table}, "
    "{recip_table});"
)


def folded_constants(node) -> dict[str, int]:
    """The folded layer's CONFIG_T constants: lanes, simd, pe and what the header derives from
    them (templates/nnet_folded_attention.h: tiles = DC^2, pair_steps = M DC^2, the words of a
    select and a multiply tile, and of the slots wq, wk in the mechanism's folded form),
    written as numbers so the E-ATT select path needs no `*`."""
    lanes, simd, pe = (int(node.get_attr(name)) for name in FOLDING_ATTRS)
    dc = int(node.get_attr("dim")) // simd
    form = folded_form(node.get_attr("kind"))
    return {
        "lanes": lanes,
        "simd": simd,
        "pe": pe,
        "tiles": dc * dc,
        "pair_steps": simd // pe * dc * dc,
        "select_words": simd * simd,
        "multiply_words": simd * pe,
        "wq_words": form.words(0, simd, lanes),
        "wk_words": form.words(1, simd, lanes),
    }


class AttentionCoreConfigTemplate(LayerConfigTemplate):
    def __init__(self):
        super().__init__(AttentionCore)
        self.template = config_template

    def format(self, node):
        params = self._default_config_params(node)
        params["score"] = mechanism_of(node.get_attr("kind")).hls_score  # CONFIG_T::score
        for name in ("wq", "wk"):  # the sizes of the mechanism's alignment weights
            params[f"n_{name}"] = int(np.asarray(node.get_attr(name + "_data")).size)
        widths = datapath_widths(params)
        params["typedefs"] = "\n".join(
            f"    typedef {ap_type(signed, width)} {name};"
            for name, (signed, width) in widths.items()
        )
        masks = node.get_attr("mask_inputs") or []
        if masks:  # a core without masks writes the same struct as before they existed
            lines = [
                f"    static const bool key_padding = {str('length' in masks).lower()};",
                f"    static const bool causal = {str('offset' in masks).lower()};",
            ]
            lines += [
                f"    typedef {ap_type(False, width)} {name};"
                for name, width in mask_widths(params["len_k"]).items()
            ]
            params["typedefs"] += "\n" + "\n".join(lines)
        if node.get_attr("lanes", 0):  # the folded layer's parameters and form
            params["typedefs"] += "\n" + "\n".join(
                f"    static const unsigned {name} = {value};"
                for name, value in folded_constants(node).items()
            )
            params["typedefs"] += (
                f"\n    template <class C> using folded = nnet::folded_{params['score']}<C>;"
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
        headers = [m.hls_header for m in MECHANISMS.values() if m.hls_header]
        super().__init__(AttentionCore, include_header=[HEADER, *FOLDED_HEADERS, *headers])
        self.template = function_template

    def format(self, node):
        x = node.get_input_variable(node.inputs[0])
        y = node.get_input_variable(node.inputs[1])
        params = {
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
        masks = node.get_attr("mask_inputs") or []
        folded = bool(node.get_attr("lanes", 0))
        if not masks and not folded:
            return self.template.format(**params)
        # each mask input's one value; one the core does not take hides nothing (ignored)
        config = params["config"]
        params["length"] = f"{config}::len_k"
        params["offset"] = f"{config}::len_k - 1"
        stream = node.model.config.get_config_value("IOType") == "io_stream"
        for mask, name in zip(masks, node.inputs[2:], strict=True):
            var = node.get_input_variable(name).name
            params[mask] = f"nnet::folded_mask_read({var})" if stream else var + "[0]"
        if not folded:
            return masked_function_template.format(**params)
        return folded_function_template.format(**params, stream="_stream" if stream else "")


# -- the windowed cross-attention unit ------------------------------------------------------------
def window_layer_attributes(cfg: CoreConfig) -> dict:
    """Integer attributes of the WindowAttention layer for a window config."""

    wf = derive_window_formats(cfg)
    d = window_derived_attributes(cfg)
    attrs = {key: int(d[key]) for key in WINDOW_INT_ATTRS if key in d and key != "exp_table"}
    attrs.update(
        len_k=cfg.len_k,
        dim=cfg.dim,
        heads=cfg.heads,
        window_d=cfg.window_d,
        penalty_levels=penalty_levels(cfg),
        g_level=0,  # no G input: the one row of the gaussian (or zero) table
        in_bits=cfg.in_bits,
        in_frac=cfg.in_frac,
        weight_bits=cfg.weight_bits,
        exp_table_size=cfg.exp_table_size,
        exp_frac=cfg.exp_frac,
        recip_frac=cfg.recip_frac,
        v_bits=cfg.v_bits,
        count_bits=cfg.count_bits,
        int_bits=wf.int_bits,
        q_acc_bound=wf.core.q_acc_bound,
        score_bound=wf.core.score_bound,
        penalty_max=wf.penalty_max,
        diff_bound=wf.diff_bound,
    )
    return {key: int(attrs[key]) for key in WINDOW_INT_ATTRS}


def parse_window_attention(node, input_names, input_shapes, graph):
    """hls4ml ONNX handler: WindowAttention node -> hls4ml layer dict (class WindowAttention)."""
    where = f"{WINDOW_OP_TYPE} node '{node.name}'"
    if node.domain != DOMAIN:
        raise ConversionError(f"{where}: domain {node.domain!r} is not {DOMAIN!r}")
    try:
        cfg, weights = window_from_node(node)
    except ValueError as err:
        raise ConversionError(str(err)) from None
    names, outs = window_input_names(cfg), window_output_names(cfg)
    if len(input_names) != len(names) or len(node.output) != len(outs):
        raise ConversionError(
            f"{where}: expected {len(names)} inputs ({', '.join(names)}), "
            f"{len(outs)} output{'s' * (len(outs) > 1)} ({', '.join(outs)})"
        )
    derived = window_derived_attributes(cfg)
    known = {"format_version", "wq", *(f.name for f in fields(type(cfg))), *derived}
    unknown = sorted({a.name for a in node.attribute} - known)
    if unknown:
        raise ConversionError(f"{where}: unsupported attribute '{unknown[0]}'")
    layer = {
        "class_name": "WindowAttention",
        "name": node.name,
        "inputs": list(input_names),
        "outputs": list(node.output),
        "window_score": cfg.window_score,
        "position": cfg.position,
        CONFIG_ATTR: json.dumps(cfg.to_dict(), sort_keys=True),  # widths: golden WindowFormats
        **window_layer_attributes(cfg),
        "wq_data": weights.wq,
    }
    for key in WINDOW_TABLE_NAMES:
        layer[key + "_data"] = derived[key].astype("int64").ravel()
    return layer


window_config_template = """struct config{index} : nnet::window_attention_config {{
    static const unsigned len_k = {len_k};
    static const unsigned dim = {dim};
    static const unsigned heads = {heads};
    static const unsigned d_head = {d_head};
    static const unsigned window_d = {window_d};
    static const unsigned window_rows = {window_rows};
    static const unsigned penalty_levels = {penalty_levels};
    static const unsigned g_level = {g_level};
    typedef nnet::{score}_mechanism mechanism;
    static const bool focus = {focus};
    static const int tau_int = {tau_int};
    static const unsigned q_shift = {q_shift};
    static const unsigned exp_shift = {exp_shift};
    static const unsigned exp_table_size = {exp_table_size};
    static const unsigned recip_index_bits = {recip_index_bits};
    static const unsigned recip_frac = {recip_frac};
    static const int v_min = {v_min};
    static const int v_max = {v_max};
    static const unsigned esum_bits = {esum_bits};
    static const unsigned reuse_factor = {reuse};
    typedef ap_fixed<{in_bits}, {in_int}> in_fixed_t;
    typedef ap_fixed<{qk_code_bits}, {k_int}> k_fixed_t;
    typedef ap_fixed<{v_code_bits}, {vc_int}> vc_fixed_t;
    typedef ap_fixed<{int_bits}, {int_bits}> int_fixed_t;
    typedef ap_fixed<{v_bits}, {out_int}> out_fixed_t;
{typedefs}
    typedef {wq_t} wq_t;
    typedef {exp_table_t} exp_table_t;
    typedef {recip_table_t} recip_table_t;
    typedef {penalty_table_t} penalty_table_t;
}};
"""


class WindowAttentionConfigTemplate(LayerConfigTemplate):
    def __init__(self):
        super().__init__(WindowAttention)
        self.template = window_config_template

    def format(self, node):
        params = self._default_config_params(node)
        widths = window_datapath_widths(params)
        params["typedefs"] = "\n".join(
            f"    typedef {ap_type(signed, width)} {name};"
            for name, (signed, width) in widths.items()
        )
        params["score"] = mechanism_of(params["window_score"]).hls_score  # CONFIG_T::mechanism
        params["focus"] = "true" if params["position"] == "flexible" else "false"
        params["esum_bits"] = widths["esum_t"][1]
        params["v_min"] = -(2 ** (params["v_bits"] - 1))
        params["v_max"] = 2 ** (params["v_bits"] - 1) - 1
        params["in_int"] = params["in_bits"] - params["in_frac"]
        params["k_int"] = params["qk_code_bits"] - params["key_frac"]
        params["vc_int"] = params["v_code_bits"] - params["value_frac"]
        params["out_int"] = params["v_bits"] - params["value_frac"]
        for name in ("wq", *WINDOW_TABLE_NAMES):
            params[name + "_t"] = node.get_weights(name).type.name
        return self.template.format(**params)


class WindowAttentionFunctionTemplate(FunctionCallTemplate):
    def __init__(self):
        super().__init__(WindowAttention, include_header=[WINDOW_HEADER])

    def format(self, node):
        ins = [node.get_input_variable(name) for name in node.inputs]
        outs = [node.get_output_variable(name) for name in node.outputs]  # O[, F]
        flexible = node.get_attr("position") == "flexible"
        name = "window_attention_flexible" if flexible else "window_attention"
        types = ", ".join([*(v.type.name for v in (*ins, *outs)), f"config{node.index}"])
        args = [
            *(v.name for v in (*ins, *outs)),
            *(node.get_weights(w).name for w in ("wq", *WINDOW_TABLE_NAMES)),
        ]
        return f"nnet::{name}<{types}>({', '.join(args)});"


def core_templates() -> tuple[type, ...]:
    """The attention core's backend templates (the unit registry's ``hls_templates``)."""
    return (AttentionCoreConfigTemplate, AttentionCoreFunctionTemplate)


def window_templates() -> tuple[type, ...]:
    """The windowed unit's backend templates (the unit registry's ``hls_templates``)."""
    return (WindowAttentionConfigTemplate, WindowAttentionFunctionTemplate)
