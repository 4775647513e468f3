"""A user's whole Brevitas model with a biased QuantLinear after eatt attention through hls4ml
(docs/own_model.md, section 6): hls4ml turns the bias Add into an ApplyAlpha broadcast over
the tokens, which its batch-norm fusion could not multiply into the Dense (numpy's broadcast
error) and whose fused bias its multi-dimensional Dense -> convolution pass dropped
(eatt/hls/passes.py TokenAlphaToFeatures). A bias on a power-of-two grid is exact; a float one
is named as what fixed point cannot equal (under a failed check)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from eatt.nn import MultiheadAttention
from tests.cli import run_eatt


def _biased_model(bias_quant, fixed_weights: bool = True):
    """Input quantizer, eatt attention, a fixed-point requantizer, QuantLinear with a bias
    (``bias_quant``: Brevitas' bias quantizer, None for a float bias; ``fixed_weights`` False:
    Brevitas' default weight quantizer, a scale that is not a power of two), ReLU."""
    from brevitas.nn import QuantIdentity, QuantLinear

    from eatt.quant.modules import fixed_point_act_quant, fixed_point_weight_quant

    class Biased(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = QuantIdentity(act_quant=fixed_point_act_quant(8, 4))
            self.attn = MultiheadAttention(8, 2, batch_first=True, max_len=4, v_bits=14,
                                           out_bits=18)  # fmt: skip
            self.mid = QuantIdentity(act_quant=fixed_point_act_quant(12, 6),
                                     return_quant_tensor=True)  # fmt: skip
            weights = {"weight_quant": fixed_point_weight_quant(8, 6)} if fixed_weights else {}
            self.fc = QuantLinear(8, 4, bias=True, bias_quant=bias_quant, **weights)

        def forward(self, x):
            h = self.inp(x)
            return torch.relu(self.fc(self.mid(self.attn(h, h, h, need_weights=False)[0])))

    torch.manual_seed(3)
    model = Biased().eval()
    with torch.no_grad():
        model.fc.bias.uniform_(-0.5, 0.5)  # large enough that a dropped bias shows
    return model


@pytest.mark.hls
def test_a_biased_quant_linear_after_attention_is_exact_in_hls4ml(tmp_path):
    from brevitas.export import export_qonnx
    from brevitas.quant import Int32Bias

    from eatt.cli.hls import _inexact_lines
    from eatt.hls.model_project import _model, inexact_parameters, write_model_project

    xs = torch.randn(20, 4, 8) * 2
    exact = tmp_path / "int_bias.onnx"
    model = _biased_model(Int32Bias)
    export_qonnx(model, (torch.randn(1, 4, 8),), str(exact))
    result = write_model_project(exact, tmp_path / "hls", [xs.numpy()])
    assert result["ok"] and result["max_abs_diff"] == 0.0 and result["inexact"] == []
    with torch.no_grad():
        want = model(xs).numpy()
    assert want.shape == (20, 4, 4) and np.abs(want).max() > 0

    # a float bias: what fixed point cannot equal in general (here the C simulation may still
    # round alike); a failed check says it under the result
    floating = tmp_path / "float_bias.onnx"
    export_qonnx(_biased_model(None), (torch.randn(1, 4, 8),), str(floating))
    found = inexact_parameters(_model(floating))
    assert len(found) == 1 and "(Add): its constant" in found[0] and "on no Quant grid" in found[0]
    lines = _inexact_lines({"ok": False, "inexact": found})
    assert lines[0].startswith("  fixed point cannot equal the float graph here: ")
    assert _inexact_lines({"ok": True, "inexact": found}) == []
    assert inexact_parameters(_model(exact)) == []
    # a grid finer, or a range wider, than the layers' default precision holds is named too
    graph = _model(exact)
    quant = next(n for n in graph.graph.node if n.op_type == "Quant")
    graph.set_initializer(quant.input[1], np.float32(2.0**-30))
    assert "grid 2^-30 is finer than fixed<48,24>'s 24 fractional bits" in "".join(
        inexact_parameters(graph)
    )
    graph.set_initializer(quant.input[1], np.float32(2.0**20))
    assert "wider than fixed<48,24>'s 24 integer bits" in "".join(inexact_parameters(graph))

    # Brevitas' default weight quantizer and a float bias (a weight-scale ApplyAlpha between
    # the Dense and the bias): converted, not exact, and what cannot be is named
    default = tmp_path / "default_weights.onnx"
    export_qonnx(_biased_model(None, fixed_weights=False), (torch.randn(1, 4, 8),), str(default))
    result = write_model_project(default, tmp_path / "hls_default", [xs.numpy()])
    assert any("is not a power of two" in line for line in result["inexact"])
    assert any("on no Quant grid" in line for line in result["inexact"])

    # the single-core commands name a whole model for what it is, nothing written
    r = run_eatt("rtl", str(exact), "-o", str(tmp_path / "rtl"), timeout=300)
    assert r.returncode == 2 and "a whole model? `eatt hls` takes one" in r.stderr
    assert not (tmp_path / "rtl").exists()
