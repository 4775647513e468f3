"""Each unit's types in its converted hls4ml model (the ``hls_ports`` and ``hls_finish`` stages
of eatt/units.py), which eatt.hls.convert.convert asks the registry for:

    core_hls_ports, window_hls_ports      the graph inputs' hls4ml types and the Model options
    core_hls_finish, window_hls_finish    the last touches to the converted model: a folded
                                          core's weight types, the window memories' layout

eatt.hls.project re-exports them.
"""

from __future__ import annotations

from eatt.config import CoreConfig
from eatt.hls.handlers import window_layer_attributes
from eatt.hls.layers import WEIGHT_NAMES, fixed_port, mask_widths
from eatt.quant.ops import window_derived_attributes, window_input_fracs


def core_hls_ports(cfg: CoreConfig, inputs: list[str]) -> tuple[dict[str, str], dict]:
    """convert's settings for a core: X and Y on the core's input grid, the mask inputs (L, O,
    after them in the node's order) unsigned integers (eatt.hls.layers.mask_widths: the QONNX
    UINT datatypes), hls4ml's defaults."""
    in_type = f"fixed<{cfg.in_bits},{cfg.in_bits - cfg.in_frac}>"
    types = dict.fromkeys(inputs[:2], in_type)
    widths = mask_widths(cfg.len_k)
    for mask, name in zip(cfg.mask_inputs, inputs[2:], strict=True):
        types[name] = f"uint<{widths[mask + '_t']}>"
    return types, {}


def window_hls_ports(cfg: CoreConfig, inputs: list[str]) -> tuple[dict[str, str], dict]:
    """convert's settings for the window unit: each input's own grid (window_port_types), and
    not a pipelined top (which would unroll the window loops): the loops carry their own
    PIPELINE II=1 (templates/nnet_window_attention.h)."""
    return window_port_types(cfg), {"PipelineStyle": "dataflow"}


def core_hls_finish(cfg: CoreConfig, hls_model) -> None:
    """A folded layer's weight types: ``ap_int<weight_bits>`` under ``__SYNTHESIS__``, and for
    g++ (the C simulation) a plain integer of the same values (signed char, short or int).
    A dim x dim ``ap_int`` array is initialized element by element at run time, which g++
    compiles with -O3 into more than 10 minutes and 6 GB for each 512 x 512 matrix (the
    paper's size); a plain array is static data, compiled in seconds. The values, and so the
    C simulation's outputs, are the same; the synthesized ROMs stay weight_bits wide."""
    for layer in hls_model.get_layers():
        if layer.class_name != "AttentionCore" or not layer.get_attr("lanes", 0):
            continue
        names = {layer.get_weights(w).type.name for w in WEIGHT_NAMES}
        for type_var in layer.get_layer_precision().values():
            if type_var.name in names:
                type_var.definition_cpp = _csim_plain_type(type_var, cfg.weight_bits)


def _csim_plain_type(type_var, bits: int):
    """A definition_cpp for type_var: its own typedef for synthesis, a plain integer of the
    same signed range (bits <= 32) for the C simulation."""
    plain = "signed char" if bits <= 8 else "short" if bits <= 16 else "int"
    synthesis = type_var.definition_cpp()

    def definition_cpp(*args, **kwargs) -> str:
        return (
            f"#ifdef __SYNTHESIS__\n{synthesis}#else  // C simulation (eatt.hls.project."
            f"core_hls_finish)\ntypedef {plain} {type_var.name};\n#endif\n"
        )

    return definition_cpp


def window_hls_finish(cfg: CoreConfig, hls_model) -> None:
    """The memory arrays: one row (dim codes) per word, so a window row is read per cycle."""
    for var in hls_model.get_input_variables():
        if var.name in ("K", "V"):
            var.pragma = ("reshape", "cyclic", cfg.dim)


def window_port_types(cfg: CoreConfig) -> dict[str, str]:
    """hls4ml precision of each graph input of a window file (the grids of window_input_fracs)."""
    d = window_derived_attributes(cfg)
    ib = window_layer_attributes(cfg)["int_bits"]
    bits = {"X": cfg.in_bits, "K": d["qk_code_bits"], "V": d["v_code_bits"]}
    types = {}
    for name, frac in window_input_fracs(cfg).items():
        t = fixed_port(bits[name], frac) if name in bits else fixed_port(ib, 0)
        types[name] = f"fixed<{t.width},{t.integer}>"
    return types
