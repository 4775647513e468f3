"""Which stage of a core each cell of its mapped netlist works for: ``eatt power``'s split of
the energy by stage (projections, scores, softmax, values; the folded engine's input token
memories; control).

``eatt power`` synthesizes a flattened netlist: ABC's cells get new names and no source
attribute, so the RTL hierarchy cannot say where a gate came from. The flip-flops can: Yosys
names a flip-flop's output net after the register it holds, with the instance path of a leaf of
the folded engine (``u_engine.u_attend.g_lane[0].s_bank[3]``, ``u_engine.u_multiply.acc[5]``). So:

1. a flip-flop belongs to the stage that computes the value its register holds (Q and K are
   the projections', also in the folded engine's memories; O is the values'): the first
   pattern of :data:`STAGES` for the core's level that matches the register's name with its
   indices dropped (``u_engine.u_attend.g_lane[].s_bank[]``); no match is ``control`` (the engine's
   state and counters, handshakes, pipeline enables; the folded walks' own state machines
   count with the projections);
2. a combinational cell belongs to the stages of the flip-flops, and of the output ports
   (:data:`OUTPUT_STAGE`), that its output reaches through combinational cells only: the logic
   that computes a register's next value is that register's stage. A cell that feeds k stages
   counts 1/k for each (a shared read multiplexer, an address decoder); one that reaches none
   is ``control``.

A flip-flop whose register drives an output port directly may carry the port's name (Yosys
keeps one name per net: the port's), so each level's output ports name their stage too
(``s`` of the alignment is its output). The names are read from a JSON netlist written after
Yosys gave the cells their final names and before it hid the wires' (``synth_script`` in
power.py), so the cells are the netlist's.
:func:`liberty.netlist_energy` then adds each cell's energy to its stages: a net's switching and
its driver's internal energy to the driver's stages, a net driven by an input port (the clock,
the stream's data) to the stages of the cells it drives, by their pin capacitance.
"""

from __future__ import annotations

import re
from collections import defaultdict

from eatt.rtl_sim.liberty import net_bits

#: level -> (stage, regular expression on a register's name, indices dropped); the first match
#: wins. The names are the RTL's: rtl_sim/generate.py (the unrolled cores) and
#: rtl_sim/rtl/folded_*.sv (the folded engine, under its instance u_engine).
STAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "alignment": (
        # Q and K: the binarized selection (E-ATT) or products; with adder_levels, the inner
        # registers of their trees (rtl_sim/pipeline.py _Pipe: qa_<i>_<j>l_r<s>, ...)
        ("projections", r"^[qk]\[\]|^(qa|ka)_\w*_r\d+"),
        ("scores", r"^s(\[\]|$)|^score_\w*_r\d+"),  # the packed scores, the trees' registers
    ),
    "attention": (
        ("values", r"^v0_r\d+"),  # V on its way beside the score trees (adder_levels)
        # Q, K, V, and the output projection Z, with their trees' inner registers
        ("projections", r"^(q|k|v0|z)(\[\]|$)|^(qa|ka|va|za)_\w*_r\d+"),
        ("scores", r"^s1\[\]|^score_\w*_r\d+"),
        ("softmax", r"^(e2|e_sum)\[\]|^e_sum_\w*_r\d+"),  # the exp weights and their sum
        # V on its way, the weighted sums, O (normalized)
        ("values", r"^(numer|v1|v2|o4)\[\]|^numer_\w*_r\d+|^recip_nrm_r\d+"),
    ),
    "folded": (
        # the walks (E-ATT's select walk: Q and K; the multiply walk: V and O, dot's Q and K
        # too) with their own state, counters and weight ROMs, their O partial sums, and the Q,
        # K, V memories they fill. A memory is an instance (folded_ram / folded_rom): its
        # flip-flops (u_engine.x_mem.g_flops.mem[3]) or its macro (...x_mem.g_macro.u_macro)
        (
            "projections",
            r"(^|\.)(u_select|u_multiply|g_select|u_vbanks)\."
            r"|(^|\.)(z_sub|q_mem|k_bank|v_bank)(\[\]|\.)",
        ),
        # the scores, a score's running sum, a lane's chunk sum; the score front end (its
        # lanes, the Synthesizers' score ROM; its Q and K memories are the projections')
        ("scores", r"(^|\.)(s_bank|s_acc|part_r)(\[\]|$|\.)|(^|\.)u_scores\."),
        ("softmax", r"(^|\.)(e_read|e_bank|esum|smax|exp_rom)(\[\]|$|\.)"),
        # N and O, the reciprocal table
        ("values", r"(^|\.)(numer|a_mem|recip_rom)(\[\]|$|\.)|(^|\.)u_normalize\."),
        ("memories", r"(^|\.)(x_mem|y_mem)(\[\]|\.)"),  # the input tokens
    ),
}
#: the stage of the logic between the last registers and the output ports
OUTPUT_STAGE = {"alignment": "scores", "attention": "projections", "folded": "values"}
#: registers no pattern matches, and logic that reaches no register or output
OTHER = "control"
_INDEX = re.compile(r"\[\d+\]")


def stage_names(level: str) -> list[str]:
    """The stages of a level, in the order a report lists them."""
    names = [s for s, _ in STAGES.get(level, ())]
    extra = [OUTPUT_STAGE.get(level, OTHER), OTHER]
    return names + [s for s in extra if s not in names]


def register_stage(level: str, register: str) -> str:
    """The stage of a register by its name (``q[3][1]``,
    ``u_engine.u_attend.g_lane[0].s_bank[2]``)."""
    base = _INDEX.sub("[]", register.lstrip("\\"))
    for stage, pattern in STAGES.get(level, ()):
        if re.search(pattern, base):
            return stage
    return OTHER


def register_names(named: dict, lib) -> dict[str, str]:
    """{flip-flop cell: the register it holds} from a Yosys JSON module whose wires still have
    their RTL names (the shortest public name of a net on an output pin of the cell); ``lib``:
    the :class:`liberty.Library` of its cells."""
    public: dict[int, list[str]] = defaultdict(list)
    for name, net in named["netnames"].items():
        if net.get("hide_name"):
            continue
        for bit, index in net_bits(net):
            public[bit].append(name if len(net["bits"]) == 1 else f"{name}[{index}]")
    out = {}
    for inst, c in named["cells"].items():
        cell = lib.cells.get(c["type"])
        if cell is None or not cell.sequential:
            continue
        names = [
            n
            for port, bits in c["connections"].items()
            if port in cell.pins and cell.pins[port].direction == "output"
            for b in bits
            if isinstance(b, int)
            for n in public.get(b, ())
        ]
        if names:
            out[inst] = min(names, key=lambda n: (len(n), n))
    return out


def cell_stages(module: dict, lib, level: str, registers: dict[str, str]) -> dict[str, dict]:
    """{cell: {stage: weight}} for every cell of a Yosys JSON module (weights sum to 1), by the
    module doc's rules; ``lib`` is the :class:`liberty.Library` the cells come from."""
    cells = module.get("cells", {})
    driver: dict[int, str] = {}
    inputs: dict[str, list[int]] = {}
    seq: dict[str, bool] = {}
    for inst, c in cells.items():
        cell = lib.cell(c["type"])
        seq[inst] = cell.sequential
        ins = []
        for port, bits in c["connections"].items():
            pin = cell.pins.get(port)
            if pin is None:
                continue
            for b in bits:
                if not isinstance(b, int):
                    continue
                if pin.direction in ("output", "inout"):
                    driver[b] = inst
                if pin.direction in ("input", "inout") and not pin.clock:
                    ins.append(b)
        inputs[inst] = ins
    reached: dict[str, set[str]] = defaultdict(set)

    def walk(stage: str, bits: list[int]) -> None:
        todo = list(bits)
        while todo:
            d = driver.get(todo.pop())
            if d is None or seq[d] or stage in reached[d]:
                continue
            reached[d].add(stage)
            todo.extend(inputs[d])

    roots: dict[str, list[int]] = defaultdict(list)
    for inst in cells:
        if seq[inst]:
            roots[register_stage(level, registers.get(inst, ""))].extend(inputs[inst])
    out_stage = OUTPUT_STAGE.get(level, OTHER)
    for port in module.get("ports", {}).values():
        if port["direction"] in ("output", "inout"):
            roots[out_stage].extend(b for b in port["bits"] if isinstance(b, int))
    for stage, bits in roots.items():
        walk(stage, bits)
    out = {}
    for inst in cells:
        if seq[inst]:
            out[inst] = {register_stage(level, registers.get(inst, "")): 1.0}
        else:
            found = sorted(reached.get(inst, ())) or [OTHER]
            out[inst] = {s: 1.0 / len(found) for s in found}
    return out
