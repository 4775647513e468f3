"""Brevitas' own QONNX export of a model that holds eatt.nn attention (docs/own_model.md).

``brevitas.export.export_qonnx(model, args, path)`` traces the model; the rest of it exports as
Brevitas exports it (Quant nodes, MatMul, ...), and each quantized ``eatt.nn.MultiheadAttention``
becomes one ``AttentionCore`` node (docs/export.md), its inputs the layer's Quant nodes and its
mask inputs computed in the graph from the model's masks:

- the TorchScript exporter (``dynamo=False``) meets :class:`_CoreFunction`, an autograd
  Function whose ``symbolic`` emits the node;
- the dynamo exporter (``dynamo=True``, torch's default) meets ``torch.onnx.ops.symbolic``.

Both emit a placeholder node with one attribute, ``eatt_core`` (the core's config as JSON: the
dynamo exporter takes no tensor attributes, and under torch.export the weights are not at hand
in the forward) and the four weights as inputs (Brevitas' weight Quant nodes);
:func:`expand_cores`, registered as a model transform of Brevitas' QONNX managers, evaluates
those and turns each placeholder into the full AttentionCore node that qonnx executes, hls4ml
converts and ``eatt.quant.export.load_core`` reads. A bare
QuantAttentionCore is not traceable (its forward is the golden model in numpy): tracing it
raises instead of writing a constant (QuantAttentionCore.call).
"""

from __future__ import annotations

import json

import numpy as np
import torch

from eatt.config import CoreConfig
from eatt.quant.golden import CoreWeights
from eatt.quant.modules import TRACE_OK
from eatt.quant.ops import DOMAIN, OP_TYPE, make_core_node, to_codes

#: the attribute of the node the exporters emit (expand_cores replaces the node)
SPEC_ATTR = "eatt_core"
#: the weight inputs the emitted node carries after X, Y and the masks, in this order
WEIGHT_INPUTS = ("wq", "wk", "wv", "wo")


def spec(cfg: CoreConfig) -> str:
    """The JSON a traced layer's node carries: its core's config (the weights are inputs)."""
    return json.dumps(cfg.to_dict(), sort_keys=True)


class _CoreFunction(torch.autograd.Function):
    """The TorchScript exporter's view of one core call: the node, and the real output."""

    @staticmethod
    def symbolic(g, text, value, *inputs):
        out = g.op(f"{DOMAIN}::{OP_TYPE}", *inputs, **{f"{SPEC_ATTR}_s": text})
        out.setType(inputs[0].type())
        return out

    @staticmethod
    def forward(ctx, text, value, *inputs):
        return value.clone()


def core_node(inputs: list, text: str, compute):
    """The layer's output while a model is exported: a placeholder AttentionCore node in the
    graph on ``inputs`` (X and Y from the layer's Quant nodes, the mask inputs, then the four
    weights from their Quant nodes: W_Q, W_K, W_V, W_O as (out, in)), which expand_cores
    completes. ``compute()``: the output values, for a TorchScript trace to carry on with
    (computed with the trace paused: the graph has the node, not the golden model's steps)."""
    xq = inputs[0]
    if torch.compiler.is_compiling():  # torch.export: the dynamo exporter
        return torch.onnx.ops.symbolic(
            f"{DOMAIN}::{OP_TYPE}",
            tuple(inputs),
            {SPEC_ATTR: text},
            dtype=xq.dtype,
            shape=xq.shape,
            version=1,
        )
    state = torch._C._get_tracing_state()
    torch._C._set_tracing_state(None)
    token = TRACE_OK.set(True)
    try:
        value = compute().detach()
    finally:
        TRACE_OK.reset(token)
        torch._C._set_tracing_state(state)
    return _CoreFunction.apply(text, value, *inputs)


def expand_cores(model):
    """Every exported placeholder node (attribute ``eatt_core``) as the full AttentionCore
    node: its weights read from the graph (the Quant nodes of the initializers, evaluated) into
    the node's attributes, the nodes and initializers that only fed them removed, the eatt
    domain declared. Other nodes as they are. Returns the model (onnx)."""
    from onnx import helper

    graph = model.graph
    found = 0
    twins: list[str] = []  # self-attention's X read twice: Y gets a Quant node of its own
    for i, node in enumerate(graph.node):
        attrs = {a.name: a for a in node.attribute}
        if node.domain != DOMAIN or node.op_type != OP_TYPE or SPEC_ATTR not in attrs:
            continue
        where = f"{OP_TYPE} node {node.name}"
        data = json.loads(helper.get_attribute_value(attrs[SPEC_ATTR]).decode("utf-8"))
        cfg = CoreConfig.from_dict(data, source=where)
        names = list(node.input)
        codes = {}
        for key, name in zip(WEIGHT_INPUTS, names[-len(WEIGHT_INPUTS) :], strict=True):
            value = _constant(model, name, where)
            codes[key] = to_codes(value, cfg.weight_frac, f"{where}: {key}").T  # (in, out)
        weights = CoreWeights(**codes)
        name = node.name or f"{OP_TYPE}_{i}"
        inputs = names[: -len(WEIGHT_INPUTS)]
        if inputs[0] == inputs[1]:
            inputs[1] = f"{inputs[1]}_y"
            twins.append(inputs[0])
        graph.node[i].CopyFrom(make_core_node(cfg, weights, inputs, node.output[0], name))
        found += 1
    for tensor in twins:  # after the loop: inserting shifts the nodes
        _own_copy(graph, tensor)
    if found:
        _prune(graph)
        if not any(o.domain == DOMAIN for o in model.opset_import):
            model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return model


def _own_copy(graph, tensor: str) -> None:
    """A second copy of the node computing ``tensor``, its output ``<tensor>_y`` (self-attention's
    Y: the dynamo exporter merges the layer's two input Quant nodes into one, and a node that
    reads one tensor twice loses the second name in qonnx's renaming, hls4ml's cleanup)."""
    from onnx import helper

    producer = next((n for n in graph.node if tensor in n.output), None)
    if producer is None:  # a graph input: an Identity gives Y a name of its own
        copy = helper.make_node("Identity", [tensor], [f"{tensor}_y"], name=f"{tensor}_y")
    else:
        copy = helper.make_node(
            producer.op_type,
            list(producer.input),
            [f"{tensor}_y"],
            name=f"{producer.name}_y",
            domain=producer.domain,
        )
        copy.attribute.extend(producer.attribute)
    index = list(graph.node).index(producer) + 1 if producer is not None else 0
    graph.node.insert(index, copy)


def _constant(model, name: str, where: str) -> np.ndarray:
    """The value of tensor ``name`` when only initializers and constant nodes feed it (each node
    executed as qonnx executes it); a one-line ValueError otherwise."""
    from onnx import numpy_helper
    from qonnx.core.onnx_exec import execute_node
    from qonnx.util.basic import get_preferred_qonnx_opset

    graph = model.graph
    opsets = {o.domain: o.version for o in model.opset_import}
    preferred = get_preferred_qonnx_opset()
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    producers = {out: n for n in graph.node for out in n.output}

    def value(tensor: str) -> np.ndarray:
        if tensor in inits:
            return inits[tensor]
        node = producers.get(tensor)
        if node is None:
            raise ValueError(f"{where}: its weight {name} is not a constant of the graph")
        context = {i: value(i) for i in node.input if i}
        context.update({o: None for o in node.output})
        execute_node(node, context, graph, opsets.get(node.domain, preferred))
        inits[tensor] = np.asarray(context[tensor])
        return inits[tensor]

    return value(name)


def _prune(graph) -> None:
    """Remove nodes whose outputs nothing reads, then the initializers (and their graph inputs)
    nothing reads."""
    outputs = {o.name for o in graph.output}
    while True:
        used = {i for n in graph.node for i in n.input} | outputs
        dead = [n for n in graph.node if not any(o in used for o in n.output)]
        if not dead:
            break
        for n in dead:
            graph.node.remove(n)
    used = {i for n in graph.node for i in n.input} | outputs
    unused = [t for t in graph.initializer if t.name not in used]
    gone = {t.name for t in unused}
    for t in unused:
        graph.initializer.remove(t)
    for inp in [i for i in graph.input if i.name in gone]:
        graph.input.remove(inp)


def register() -> None:
    """Add expand_cores to Brevitas' QONNX managers' model transforms (once)."""
    from brevitas.export.onnx.qonnx.manager import QONNXManager

    if expand_cores not in QONNXManager.model_transforms:
        QONNXManager.model_transforms = [*QONNXManager.model_transforms, expand_cores]
