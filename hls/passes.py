"""hls4ml optimizer passes eatt adds to hls4ml's flows (registered by eatt.hls.register).

- :class:`MatmulConstToTokenDense` replaces hls4ml's ``matmul_const_to_dense`` in the
  ``parse_qonnx`` flow. A MatMul of a (tokens, features) tensor and a constant weight is a Dense
  over the last axis, applied to every token (what Brevitas exports for a QuantLinear after an
  attention layer). hls4ml 1.3's pass gives that Dense ``n_in`` = the product of the input's
  dimensions, which makes its output (tokens, tokens x n_out) and the result wrong; here
  ``n_in`` is the last axis, as for a Keras Dense on such a tensor, which hls4ml then computes
  as a pointwise convolution; its weights are put on the Quant node's grid here, since that
  conversion keeps the weight data but not the quantizer. On a 1-D input both passes agree.
"""

from __future__ import annotations

import numpy as np
from hls4ml.model.layers import Constant, Dense, MatMul
from hls4ml.model.optimizer import OptimizerPass

#: the name of the pass in hls4ml's registry, and the one of hls4ml it replaces
PASS_NAME = "eatt_matmul_const_to_token_dense"
REPLACES = "matmul_const_to_dense"


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


def register() -> None:
    """Register the pass and put it in hls4ml's parse_qonnx flow in place of REPLACES (call
    once: eatt.hls.register)."""
    from hls4ml.model.flow import get_flow, update_flow
    from hls4ml.model.optimizer import register_pass

    register_pass(PASS_NAME, MatmulConstToTokenDense)
    flow = get_flow("parse_qonnx")
    remove = [REPLACES] if REPLACES in flow._optimizers else []
    update_flow("parse_qonnx", add_optimizers=[PASS_NAME], remove_optimizers=remove)
