"""hls4ml optimizer passes eatt adds to hls4ml's flows (registered by eatt.hls.register).

- :class:`MatmulConstToTokenDense` replaces hls4ml's ``matmul_const_to_dense`` in the
  ``parse_qonnx`` flow. A MatMul of a (tokens, features) tensor and a constant weight is a Dense
  over the last axis, applied to every token (what Brevitas exports for a QuantLinear after an
  attention layer). hls4ml 1.3's pass gives that Dense ``n_in`` = the product of the input's
  dimensions, which makes its output (tokens, tokens x n_out) and the result wrong; here
  ``n_in`` is the last axis, as for a Keras Dense on such a tensor, which hls4ml then computes
  as a pointwise convolution; its weights are put on the Quant node's grid here, since that
  conversion keeps the weight data but not the quantizer. On a 1-D input both passes agree.
- :class:`TokenAlphaToFeatures`, added to the end of ``parse_qonnx``: hls4ml turns a Mul or Add
  by a constant (a QuantLinear's bias, Brevitas' scale of its output) into an ApplyAlpha whose
  scale and bias are broadcast to the whole (tokens, features) input, since its C++ does not
  broadcast; after a Dense its ``fuse_batch_normalization`` then multiplies the Dense's
  (features in, out) weights by that (tokens, out) scale and stops with numpy's broadcast
  error, and where it does fuse, its Dense -> pointwise convolution pass reads the old weight
  and bias attributes (the bias dropped). Where the arrays are the same for every token, this
  pass keeps one row (``n_filt`` = the features: hls4ml's normalize indexes them by the
  feature) and folds an ApplyAlpha into the Dense before it, weights and attributes, by
  hls4ml's own fusion rule.
"""

from __future__ import annotations

import numpy as np
from hls4ml.model.layers import ApplyAlpha, Constant, Dense, MatMul
from hls4ml.model.optimizer import OptimizerPass

#: the name of the pass in hls4ml's registry, and the one of hls4ml it replaces
PASS_NAME = "eatt_matmul_const_to_token_dense"
REPLACES = "matmul_const_to_dense"
#: the name of TokenAlphaToFeatures in hls4ml's registry
ALPHA_PASS_NAME = "eatt_token_alpha_to_features"


class MatmulConstToTokenDense(OptimizerPass):
    """MatMul(x, constant W) -> Dense(W) over x's last axis."""

    def match(self, node) -> bool:
        return (
            isinstance(node, MatMul)
            and len(node.inputs) == 2
            and isinstance(node.get_input_node(node.inputs[1]), Constant)
        )

    def transform(self, model, node) -> bool:
        const = node.get_input_node(node.inputs[1])
        weight = const.attributes["value"]
        quantizer = const.get_attr("quantizer")
        if quantizer is not None:
            # on the Quant node's grid already: hls4ml's multi-dimensional Dense becomes a
            # pointwise convolution that keeps the weight data and drops the quantizer
            weight = np.asarray(quantizer(weight), dtype=np.float64)
        features = node.get_input_variable(node.inputs[0]).shape[-1]
        if weight.ndim != 2 or weight.shape[0] != features:
            raise ValueError(
                f"{node.name}: a MatMul of {features} features by a {weight.shape} constant is "
                "not a Dense"
            )
        name = f"Dense_{node.name}"
        config = model.config.get_layer_config(node)
        model.config.set_name_config(name, config)
        model.config.parse_name_config(name, config)
        attributes = {
            "weight_data": weight,
            "weight_quantizer": quantizer,
            "bias_data": np.zeros(weight.shape[1]),
            "use_bias": False,
            "n_in": features,
            "n_out": weight.shape[1],
        }
        dense = model.make_node(Dense, name, attributes, [node.inputs[0]], list(node.outputs))
        model.remove_node(const)
        del node.inputs[1]
        model.replace_node(node, dense)
        return True


def per_feature(values) -> np.ndarray | None:
    """The one row of a (tokens.., features) array that is the same for every token; None
    for a 0-D or 1-D array (nothing to reduce) or one that differs between tokens."""
    a = np.asarray(values)
    if a.ndim < 2:
        return None
    rows = a.reshape(-1, a.shape[-1])
    return rows[0].copy() if (rows == rows[0]).all() else None


class TokenAlphaToFeatures(OptimizerPass):
    """ApplyAlpha on (tokens.., features), its scale and bias the same for every token -> one
    row per feature (n_filt); after a token-wise Dense, folded into it (its weight and bias
    data and attributes) where hls4ml's fusion would fold it."""

    def match(self, node) -> bool:
        if not isinstance(node, ApplyAlpha) or len(node.get_input_variable().shape) < 2:
            return False
        arrays = [node.weights[w].data for w in ("scale", "bias")]
        if any(np.ndim(a) >= 2 for a in arrays):  # broadcast over the tokens: reduce it
            return all(per_feature(a) is not None or np.ndim(a) < 2 for a in arrays)
        return _foldable(node, *arrays)  # one row per feature already: fold it or leave it

    def transform(self, model, node) -> bool:
        features = node.get_input_variable().shape[-1]
        rows = {}
        for name in ("scale", "bias"):
            data = node.weights[name].data
            row = per_feature(data) if np.ndim(data) >= 2 else np.broadcast_to(data, features)
            rows[name] = np.array(row, dtype=np.float64)
        if _foldable(node, rows["scale"], rows["bias"]):
            _fold(model, node, rows["scale"], rows["bias"])
            return True
        for name, add in (("scale", node.add_weights), ("bias", node.add_bias)):
            weight = node.weights[name]
            quantizer = node.get_attr(f"{name}_quantizer")
            add(rows[name], quantizer=quantizer, precision=weight.type.precision)
            node.set_attr(f"{name}_data", rows[name])
        node.set_attr("n_filt", features)
        return True


def _foldable(node, scale, bias) -> bool:
    """Whether the ApplyAlpha ``node`` (per-feature ``scale``, ``bias``) folds into the Dense
    before it, by hls4ml's own rule (FuseBatchNormalization.match): unless that would multiply
    a quantized weight by a scale other than 1, or add two quantized biases."""
    dense = node.get_input_node()
    if not isinstance(dense, Dense) or len(dense.get_output_use_map()[dense.outputs[0]]) > 1:
        return False
    b0 = dense.weights["bias"].data
    w_q, s_q = dense.get_attr("weight_quantizer"), node.get_attr("scale_quantizer")
    b0_q, b1_q = dense.get_attr("bias_quantizer"), node.get_attr("bias_quantizer")
    scale_ok = (w_q is None and s_q is None) or (np.all(scale == 1) and s_q is None)
    bias_ok = (
        (b0_q is None and b1_q is None)
        or (np.all(b0 == 0) and b0_q is None)
        or (np.all(bias == 0) and b1_q is None)
    )
    return bool(scale_ok and bias_ok)


def _fold(model, node, scale, bias) -> None:
    """The ApplyAlpha ``node`` folded into the Dense before it, its weights and its attributes:
    hls4ml's multi-dimensional Dense becomes a pointwise convolution built from the attributes
    (weight_data, bias_data), which its own fusion leaves as they were."""
    dense = node.get_input_node()
    weight = dense.weights["weight"].data * scale
    bias = dense.weights["bias"].data * scale + bias
    w_quantizer = node.get_attr("scale_quantizer") or dense.get_attr("weight_quantizer")
    b_quantizer = node.get_attr("bias_quantizer") or dense.get_attr("bias_quantizer")
    dense.add_weights_variable("weight", "w{index}", data=weight, quantizer=w_quantizer)
    dense.add_weights_variable("bias", "b{index}", data=bias, quantizer=b_quantizer)
    attributes = {"weight_data": weight, "bias_data": bias, "use_bias": True,
                  "weight_quantizer": w_quantizer, "bias_quantizer": b_quantizer}  # fmt: skip
    for key, value in attributes.items():
        dense.set_attr(key, value)
    model.remove_node(node)


def register() -> None:
    """Register the passes: MatmulConstToTokenDense in hls4ml's parse_qonnx flow in place of
    REPLACES, TokenAlphaToFeatures after it (call once: eatt.hls.register)."""
    from hls4ml.model.flow import get_flow, update_flow
    from hls4ml.model.optimizer import register_pass

    register_pass(PASS_NAME, MatmulConstToTokenDense)
    register_pass(ALPHA_PASS_NAME, TokenAlphaToFeatures)
    flow = get_flow("parse_qonnx")
    remove = [REPLACES] if REPLACES in flow._optimizers else []
    update_flow(
        "parse_qonnx", add_optimizers=[PASS_NAME, ALPHA_PASS_NAME], remove_optimizers=remove
    )
