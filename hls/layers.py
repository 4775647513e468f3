"""The hls4ml layer class of one attention core, and the integer widths of its datapath.

``AttentionCore`` is an hls4ml ``Layer`` (registered under the name ``AttentionCore`` by
eatt.hls.register): two inputs (X: len_q x dim, Y: len_k x dim, real values on the core's input
grid), then a masked core's length / offset (L, O: one unsigned integer each, ``mask_widths``;
attribute ``mask_inputs`` names them, CoreConfig.mask_inputs), one output (len_q x dim, real
values on the <out_bits, out_frac> grid), and six weight variables that hls4ml writes into
firmware/weights/ like any layer's weights: the integer matrices wq, wk, wv, wo and the softmax
tables exp_table, recip_table.

``datapath_widths`` reads every intermediate width from the golden model's formats
(eatt.quant.golden.Formats, docs/golden.md), so the C++ adders are exactly as wide as the worst
case needs and nothing can overflow; the config template writes them into the layer's CONFIG_T
struct as ap_int typedefs. The layer carries its config as JSON (attribute ``golden_config``,
set by the ONNX handlers) so that the formats are derived from the config, not re-derived here.

``WindowAttention`` is the layer of the windowed unit (kind window): inputs X, P, W, K, V, C,
L[, G] as in the QONNX file (docs/export.md), output O (dim), weights wq and the exp,
reciprocal and position tables; ``window_datapath_widths`` reads its widths from
eatt.quant.window.WindowFormats (sums over at most window_rows rows weighted by counts,
docs/window.md).
"""

from __future__ import annotations

import json

import numpy as np
from hls4ml.model.attributes import Attribute, ChoiceAttribute, WeightAttribute
from hls4ml.model.layers import Layer
from hls4ml.model.types import FixedPrecisionType, IntegerPrecisionType

from eatt.config import CoreConfig
from eatt.hls.folding import folded_form
from eatt.mechanisms import core_kinds, mechanism_of
from eatt.quant.golden import derive_formats
from eatt.quant.window import WindowFormats, derive_window_formats
from eatt.rtl_sim.folded import weight_tiles

#: integer attributes of the layer (from the AttentionCore node: config and derived formats)
INT_ATTRS = (
    "len_q",
    "len_k",
    "dim",
    "heads",
    "d_head",
    "in_bits",
    "in_frac",
    "weight_bits",
    "weight_frac",
    "qk_bits",
    "v_bits",
    "out_bits",
    "out_frac",
    "tau_int",
    "q_shift",
    "v_shift",
    "exp_shift",
    "exp_table_size",
    "exp_frac",
    "recip_index_bits",
    "recip_frac",
    "out_shift",
)
#: weight variables of the layer: the mechanism's two alignment weights in the slots wq, wk
#: (E-ATT, dot: W_Q, W_K; dense: W_1, W_2; randinit: R and a one-entry placeholder; the
#: config's n_wq, n_wk their sizes), then W_V, W_O
WEIGHT_NAMES = ("wq", "wk", "wv", "wo")
TABLE_NAMES = ("exp_table", "recip_table")
KINDS = core_kinds()
#: the folded layer's parameters (templates/nnet_folded_attention.h); lanes 0: unrolled
FOLDING_ATTRS = ("lanes", "simd", "pe")


#: the layer attribute that carries the node's config (JSON of CoreConfig.to_dict())
CONFIG_ATTR = "golden_config"


def layer_config(a) -> CoreConfig:
    """The CoreConfig of a layer, from its ``golden_config`` attribute."""
    return CoreConfig.from_dict(json.loads(a[CONFIG_ATTR]))


def datapath_widths(a) -> dict[str, tuple[bool, int]]:
    """(signed, width) of every integer type of the datapath: the golden Formats' widths."""
    f = derive_formats(layer_config(a))
    return {
        "in_code_t": (True, f.in_bits),
        "qacc_t": (True, f.q_acc_bits),
        "qk_t": (True, f.qk_code_bits),
        "diff_t": (True, f.diff_bits),
        "score_t": (True, f.score_bits),
        "zidx_t": (False, f.zdiff_bits),
        "vacc_t": (True, f.v_acc_bits),
        "v_t": (True, f.attn_bits),  # V codes (<= v_code_bits) and O (clamped into v_bits)
        "exp_t": (False, f.exp_bits),
        "esum_t": (False, f.esum_bits),
        "norm_t": (False, f.norm_bits),
        "recip_t": (False, f.recip_bits),
        "numer_t": (True, f.numer_bits),
        "prod_t": (True, f.prod_bits),  # N * R + the rounding half
        "oacc_t": (True, f.out_acc_bits),
        "out_code_t": (True, f.out_code_bits),
    }


def mask_widths(len_k: int) -> dict[str, int]:
    """Widths of the mask inputs' unsigned types: length_t holds 1..len_k, offset_t
    0..len_k - 1 (the QONNX inputs' UINT datatypes, eatt.quant.ops.mask_datatypes)."""
    return {"length_t": int(len_k).bit_length(), "offset_t": max(1, (int(len_k) - 1).bit_length())}


def ap_type(signed: bool, width: int) -> str:
    return f"ap_int<{width}>" if signed else f"ap_uint<{width}>"


class AttentionCore(Layer):
    """One E-ATT or dot-product attention core; arithmetic of eatt.quant.golden.GoldenCore."""

    _expected_attributes = [
        ChoiceAttribute("kind", list(KINDS), configurable=False),
        Attribute("mask_inputs", value_type=list, default=[], configurable=False),
        *[Attribute(name) for name in INT_ATTRS],
        # the folding (eatt.hls.folding): lanes 0 is the unrolled layer; set from the layer's
        # hls4ml config (keys Lanes, Simd, Pe) by eatt.hls.project.convert
        *[Attribute(name, value_type=int, default=0) for name in FOLDING_ATTRS],
        *[WeightAttribute(name) for name in (*WEIGHT_NAMES, *TABLE_NAMES)],
    ]

    def initialize(self):
        a = self.attributes
        shape = [a["len_q"], a["dim"]]
        # The output's real value is code * 2**-out_frac. When out_frac < 0 (LSB above 1) the
        # port type is widened to an integer-valued fixed type: same values, and no ap_fixed
        # with I > W, which hls4ml's testbench printing warns about once per element.
        integer = a["out_bits"] - a["out_frac"]
        out = FixedPrecisionType(width=max(a["out_bits"], integer), integer=integer, signed=True)
        self.add_output_variable(shape, precision=out)
        for name in WEIGHT_NAMES:
            self.add_weights_variable(
                name=name,
                var_name=name + "{index}",
                type_name=name + "{index}_t",
                precision=IntegerPrecisionType(width=a["weight_bits"], signed=True),
                data=self._weight_data(name),
            )
        f = derive_formats(layer_config(a))
        widths = {"exp_table": f.exp_bits, "recip_table": f.recip_bits}
        for name in TABLE_NAMES:
            self.add_weights_variable(
                name=name,
                var_name=name + "{index}",
                type_name=name + "{index}_t",
                precision=IntegerPrecisionType(width=widths[name], signed=False),
                data=self.get_attr(name + "_data"),
            )

    def _weight_data(self, name: str):
        """A weight matrix as the layer reads it: row-major, or for a folded layer tile by tile
        as the RTL's ROMs (eatt.rtl_sim.folded.weight_tiles): wv, wo in S x S tiles (E-ATT's in
        S x PE: the multiply walk's), the alignment weights wq, wk as the mechanism's folded
        form reads them (eatt.hls.folding.FoldedForm.layout: the walks' S x S tiles, Dense's
        W_2 in S x P tiles, RandInit's R row-major)."""
        data = self.get_attr(name + "_data")
        if not self.get_attr("lanes", 0):
            return data
        simd, pe, lanes = self.get_attr("simd"), self.get_attr("pe"), self.get_attr("lanes")
        kind, dim = self.get_attr("kind"), self.get_attr("dim")
        if name in ("wq", "wk"):
            return folded_form(kind).layout(WEIGHT_NAMES.index(name), data, dim, simd, lanes)
        cols = pe if mechanism_of(kind).binarized else simd  # E-ATT's narrower multiply walk
        return weight_tiles(np.asarray(data).reshape(dim, dim), simd, cols).ravel()


# -- the windowed cross-attention unit (kind window) ---------------------------------------------
#: integer attributes of the WindowAttention layer (config, derived formats and bounds)
WINDOW_INT_ATTRS = (
    "len_k",
    "dim",
    "heads",
    "d_head",
    "window_d",
    "window_rows",
    "penalty_levels",
    "g_level",
    "in_bits",
    "in_frac",
    "weight_bits",
    "tau_int",
    "q_shift",
    "exp_shift",
    "exp_table_size",
    "exp_frac",
    "recip_index_bits",
    "recip_frac",
    "v_bits",
    "qk_code_bits",
    "v_code_bits",
    "key_frac",
    "value_frac",
    "count_bits",
    "count_max",
    "int_bits",
    "q_acc_bound",
    "score_bound",
    "penalty_max",
    "diff_bound",
)
WINDOW_TABLE_NAMES = ("exp_table", "recip_table", "penalty_table")
SCORES = ("eatt", "dot")
POSITIONS = ("none", "gaussian", "flexible")


def window_formats(a) -> WindowFormats:
    """The golden WindowFormats of a WindowAttention layer (from its ``golden_config``)."""
    return derive_window_formats(layer_config(a))


def window_datapath_widths(a) -> dict[str, tuple[bool, int]]:
    """(signed, width) of every integer type of the window datapath: the golden WindowFormats'.

    The sums run over at most window_rows rows, each weighted by a count <= count_max. With
    position flexible the numerator and product types also hold the focus's (sum_r e_r r and
    its product by the reciprocal: the RTL's one more lane of the normalization).
    """
    wf = window_formats(a)
    f = wf.core
    numer, prod = wf.numer_bits, wf.prod_bits
    if a["position"] == "flexible":
        numer, prod = max(numer, wf.focus_numer_bits), max(prod, wf.focus_prod_bits)
    return {
        "in_code_t": (True, f.in_bits),
        "qacc_t": (True, f.q_acc_bits),
        "qk_t": (True, wf.qk_code_bits),
        "diff_t": (True, f.diff_bits),
        "score_t": (True, f.score_bits),
        "logit_t": (True, wf.logit_bits),
        "zidx_t": (False, wf.diff_bits),
        "exp_t": (False, f.exp_bits),
        "count_t": (False, wf.count_bits),
        "cexp_t": (False, wf.weighted_bits),
        "esum_t": (False, wf.esum_bits),
        "norm_t": (False, wf.norm_bits),
        "recip_t": (False, wf.recip_bits),
        "v_t": (True, wf.attn_bits),
        "vcode_t": (True, wf.v_code_bits),
        "numer_t": (True, numer),
        "prod_t": (True, prod),
    }


def fixed_port(bits: int, frac: int) -> FixedPrecisionType:
    """The port type of a <bits, frac> grid; an LSB above 1 (frac < 0) widens it to an integer
    type (same values, and no ap_fixed with I > W on the ports, see AttentionCore)."""
    integer = bits - frac
    return FixedPrecisionType(width=max(bits, integer), integer=integer, signed=True)


class WindowAttention(Layer):
    """One step of the windowed unit; arithmetic of eatt.quant.window.WindowGolden."""

    _expected_attributes = [
        ChoiceAttribute("window_score", list(SCORES), configurable=False),
        ChoiceAttribute("position", list(POSITIONS), configurable=False),
        *[Attribute(name) for name in WINDOW_INT_ATTRS],
        *[WeightAttribute(name) for name in ("wq", *WINDOW_TABLE_NAMES)],
    ]

    def get_layer_precision(self):
        """Every output's type: hls4ml keeps one ``result_t`` attribute (the last output's),
        so with two outputs (O and the focus F) defines.h would miss O's type."""
        precision = super().get_layer_precision()
        for var in self.variables.values():
            precision[var.type.name] = var.type
        return precision

    def initialize(self):
        a = self.attributes
        self.add_output_variable([a["dim"]], precision=fixed_port(a["v_bits"], a["value_frac"]))
        if len(self.outputs) > 1:  # position flexible: the focus F per head, unsigned rows
            self.add_output_variable(
                [a["heads"]],
                out_name=self.outputs[1],
                var_name="layer{index}_focus",
                type_name="layer{index}_focus_t",
                precision=IntegerPrecisionType(width=window_formats(a).addr_bits, signed=False),
            )

        self.add_weights_variable(
            name="wq",
            var_name="wq{index}",
            type_name="wq{index}_t",
            precision=IntegerPrecisionType(width=a["weight_bits"], signed=True),
            data=self.get_attr("wq_data"),
        )
        wf = window_formats(a)
        widths = {
            "exp_table": wf.core.exp_bits,
            "recip_table": wf.recip_bits,
            "penalty_table": wf.penalty_bits,
        }
        for name in WINDOW_TABLE_NAMES:
            self.add_weights_variable(
                name=name,
                var_name=name + "{index}",
                type_name=name + "{index}_t",
                precision=IntegerPrecisionType(width=widths[name], signed=False),
                data=self.get_attr(name + "_data"),
            )
