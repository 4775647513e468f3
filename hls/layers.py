"""The hls4ml layer class of one attention core, and the integer widths of its datapath.

``AttentionCore`` is an hls4ml ``Layer`` (registered under the name ``AttentionCore`` by
eatt.hls.register): two inputs (X: len_q x dim, Y: len_k x dim, real values on the core's input
grid), one output (len_q x dim, real values on the <out_bits, out_frac> grid), and six weight
variables that hls4ml writes into firmware/weights/ like any layer's weights: the integer
matrices wq, wk, wv, wo and the softmax tables exp_table, recip_table.

``datapath_widths`` derives every intermediate width from the golden model's bounds
(docs/golden.md), so the C++ adders are exactly as wide as the worst case needs and nothing can
overflow; the config template writes them into the layer's CONFIG_T struct as ap_int typedefs.

``WindowAttention`` is the layer of the windowed unit (kind window): inputs X, P, W, K, V, C,
L[, G] as in the QONNX file (docs/export.md), output O (dim), weights wq and the exp,
reciprocal and position tables; ``window_datapath_widths`` gives its widths (sums over at most
window_rows rows weighted by counts, docs/window.md).
"""

from __future__ import annotations

from hls4ml.model.attributes import Attribute, ChoiceAttribute, WeightAttribute
from hls4ml.model.layers import Layer
from hls4ml.model.types import FixedPrecisionType, IntegerPrecisionType

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
#: weight variables of the layer: name -> (signed, width attribute or None for weight_bits)
WEIGHT_NAMES = ("wq", "wk", "wv", "wo")
TABLE_NAMES = ("exp_table", "recip_table")
KINDS = ("eatt", "dot")


def signed_bits(bound: int) -> int:
    """Bits of a signed integer holding [-bound, bound] (as quant.golden.signed_bits)."""
    return int(bound).bit_length() + 1


def unsigned_bits(bound: int) -> int:
    """Bits of an unsigned integer holding [0, bound]."""
    return max(1, int(bound).bit_length())


def datapath_widths(a: dict) -> dict[str, tuple[bool, int]]:
    """(signed, width) of every integer type of the datapath, from the layer's attributes.

    The bounds are docs/golden.md's (worst case over every weight and input in range).
    """
    wmax = 2 ** (a["weight_bits"] - 1) - 1
    x_abs = 2 ** (a["in_bits"] - 1)
    qk_abs = 2 ** (a["qk_bits"] - 1)
    if a["kind"] == "eatt":
        q_acc_bound = a["dim"] * wmax
        score_bound = a["d_head"] * (2 * qk_abs - 1)
    else:
        q_acc_bound = a["dim"] * x_abs * wmax
        score_bound = a["d_head"] * qk_abs * qk_abs
    v_acc_bound = a["dim"] * x_abs * wmax
    exp_max = 2 ** a["exp_frac"]
    esum_bound = a["len_k"] * exp_max
    numer_bound = esum_bound * 2 ** (a["v_bits"] - 1)
    recip_bound = 2 ** a["recip_frac"]
    k = a["recip_index_bits"]
    return {
        "in_code_t": (True, a["in_bits"]),
        "qacc_t": (True, signed_bits(q_acc_bound)),
        "qk_t": (True, a["qk_bits"]),
        "diff_t": (True, a["qk_bits"] + 1),
        "score_t": (True, signed_bits(score_bound)),
        "zidx_t": (False, unsigned_bits(2 * score_bound)),
        "vacc_t": (True, signed_bits(v_acc_bound)),
        "v_t": (True, a["v_bits"]),
        "exp_t": (False, unsigned_bits(exp_max)),
        "esum_t": (False, unsigned_bits(esum_bound)),
        "norm_t": (False, max(unsigned_bits(esum_bound), k + 1)),
        "recip_t": (False, unsigned_bits(recip_bound)),
        "numer_t": (True, signed_bits(numer_bound)),
        # N * R, plus one bit for the rounding constant, plus one of margin
        "prod_t": (True, signed_bits(numer_bound * recip_bound) + 2),
        "oacc_t": (True, signed_bits(a["dim"] * 2 ** (a["v_bits"] - 1) * wmax)),
        "out_code_t": (True, a["out_bits"]),
    }


def ap_type(signed: bool, width: int) -> str:
    return f"ap_int<{width}>" if signed else f"ap_uint<{width}>"


class AttentionCore(Layer):
    """One E-ATT or dot-product attention core; arithmetic of eatt.quant.golden.GoldenCore."""

    _expected_attributes = [
        ChoiceAttribute("kind", list(KINDS), configurable=False),
        *[Attribute(name) for name in INT_ATTRS],
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
                data=self.get_attr(name + "_data"),
            )
        widths = {
            "exp_table": unsigned_bits(2 ** a["exp_frac"]),
            "recip_table": unsigned_bits(2 ** a["recip_frac"]),
        }
        for name in TABLE_NAMES:
            self.add_weights_variable(
                name=name,
                var_name=name + "{index}",
                type_name=name + "{index}_t",
                precision=IntegerPrecisionType(width=widths[name], signed=False),
                data=self.get_attr(name + "_data"),
            )


# -- the windowed cross-attention unit (kind window) ---------------------------------------------
#: integer attributes of the WindowAttention layer (config, derived formats and bounds)
WINDOW_INT_ATTRS = (
    "len_k",
    "dim",
    "heads",
    "d_head",
    "half_width",
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


def window_datapath_widths(a: dict) -> dict[str, tuple[bool, int]]:
    """(signed, width) of every integer type of the window datapath (docs/window.md bounds).

    The sums run over at most window_rows rows, each weighted by a count <= count_max.
    """
    exp_max = 2 ** a["exp_frac"]
    cexp_bound = exp_max * a["count_max"]
    esum_bound = a["window_rows"] * cexp_bound
    numer_bound = esum_bound * 2 ** (a["v_code_bits"] - 1)
    recip_bound = 2 ** a["recip_frac"]
    return {
        "in_code_t": (True, a["in_bits"]),
        "qacc_t": (True, signed_bits(a["q_acc_bound"])),
        "qk_t": (True, a["qk_code_bits"]),
        "diff_t": (True, a["qk_code_bits"] + 1),
        "score_t": (True, signed_bits(a["score_bound"])),
        "logit_t": (True, signed_bits(a["score_bound"] + a["penalty_max"])),
        "zidx_t": (False, unsigned_bits(a["diff_bound"])),
        "exp_t": (False, unsigned_bits(exp_max)),
        "count_t": (False, a["count_bits"]),
        "cexp_t": (False, unsigned_bits(cexp_bound)),
        "esum_t": (False, unsigned_bits(esum_bound)),
        "norm_t": (False, max(unsigned_bits(esum_bound), a["recip_index_bits"] + 1)),
        "recip_t": (False, unsigned_bits(recip_bound)),
        "v_t": (True, a["v_bits"]),
        "vcode_t": (True, a["v_code_bits"]),
        "numer_t": (True, signed_bits(numer_bound)),
        "prod_t": (True, signed_bits(numer_bound * recip_bound) + 2),
    }


def fixed_port(bits: int, frac: int) -> FixedPrecisionType:
    """The port type of a <bits, frac> grid; an LSB above 1 (frac < 0) widens it to an integer
    type (same values, and no ap_fixed with I > W on the ports, see AttentionCore)."""
    integer = bits - frac
    return FixedPrecisionType(width=max(bits, integer), integer=integer, signed=True)


class WindowAttention(Layer):
    """One step of the windowed unit; arithmetic of eatt.quant.window.WindowGolden."""

    _expected_attributes = [
        ChoiceAttribute("score", list(SCORES), configurable=False),
        ChoiceAttribute("position", list(POSITIONS), configurable=False),
        *[Attribute(name) for name in WINDOW_INT_ATTRS],
        *[WeightAttribute(name) for name in ("wq", *WINDOW_TABLE_NAMES)],
    ]

    def initialize(self):
        a = self.attributes
        self.add_output_variable([a["dim"]], precision=fixed_port(a["v_bits"], a["value_frac"]))
        self.add_weights_variable(
            name="wq",
            var_name="wq{index}",
            type_name="wq{index}_t",
            precision=IntegerPrecisionType(width=a["weight_bits"], signed=True),
            data=self.get_attr("wq_data"),
        )
        widths = {
            "exp_table": unsigned_bits(2 ** a["exp_frac"]),
            "recip_table": unsigned_bits(2 ** a["recip_frac"]),
            "penalty_table": unsigned_bits(a["penalty_max"]),
        }
        for name in WINDOW_TABLE_NAMES:
            self.add_weights_variable(
                name=name,
                var_name=name + "{index}",
                type_name=name + "{index}_t",
                precision=IntegerPrecisionType(width=widths[name], signed=False),
                data=self.get_attr(name + "_data"),
            )
