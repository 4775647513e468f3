"""Pipelining for a clock (``adder_levels``): the register stages of one datapath.

``_Pipe`` numbers the register stages as the emitters write them (ap_pipe_ctrl stage_en)
and cuts the adder trees so that at most N adder levels lie between two registers
(docs/rtl.md, "Pipelining for a clock").
"""

from __future__ import annotations

from eatt.rtl_sim.sv_writer import _loops, _Writer
from eatt.rtl_sim.widths import _bits


# -- pipelining for a clock (adder_levels) ---------------------------------------------------------
class _Pipe:
    """The register stages of one datapath, numbered as the writer goes (ap_pipe_ctrl stage_en).

    The datapath is a row of segments, each ending in a fixed register stage (alignment:
    projections | scores; attention: projections | scores | softmax weights | sum, numerator |
    normalize | output projection). adder_levels = 0: no register inside a segment (the fixed
    pipeline). adder_levels = N >= 1: the adder trees of a segment get registers wherever a sum
    would take more than N adder levels since the last register (ROM lookups, multipliers and
    the leaf's own subtract are not cut: a leaf brings 0 or 1 level); an operand that arrives
    stages earlier than its partner is delayed, and at the end of the segment every tree result
    (and any value passed through it, such as V) is delayed to the segment's deepest tree, so
    all values of a stage belong to the same vector and the II stays 1.
    """

    def __init__(self, out: _Writer, levels: int) -> None:
        self.out, self.levels = out, levels
        self.base = 0  # stage_en index of the first register inside the open segment
        self.extra = 0  # registers inside the open segment (its deepest tree)
        self.roots: list[tuple] = []  # tree results of the open segment, assigned at close
        self.segments: dict[str, int] = {}  # segment -> registers inside it (metadata)
        self.max_levels = 0  # most adder levels between two registers in any tree

    def reg(self, name: str, expr: str, bits: int, signed: bool, stage: int) -> str:
        """A register inside the open segment, loaded from `expr` at its inner stage `stage`."""
        sign = "signed " if signed else ""
        self.out(f"    logic {sign}[{bits - 1}:0] {name};")
        self.out(
            f"    always_ff @(posedge ap_clk) if (stage_en[{self.base + stage}]) "
            f"{name} <= {bits}'({expr});"
        )
        return name

    def delay(self, name: str, sig: tuple, to: int, bits: int, signed: bool) -> tuple:
        """sig = (expr, lo, hi, stage, levels) registered until it reaches stage `to`."""
        expr, lo, hi, stage, lev = sig
        while stage < to:
            expr = self.reg(f"{name}_r{stage}", expr, bits, signed, stage)
            stage, lev = stage + 1, 0
        return expr, lo, hi, stage, lev

    def tree(
        self,
        name: str,
        terms: list[tuple[str, int, int, int]],
        balanced: bool,
        width: int | None = None,
        bits: list[tuple[str, int, int, int]] | None = None,
        signed: bool = True,
    ) -> tuple:
        """Sum of leaves (expression, lo, hi, levels) split as _sum_tree splits them; with `bits`
        (one 1-bit carry-in per adder, as _carry_in_tree) every adder is a named (* keep *)
        carry chain. Returns (expression, lo, hi, stage, levels) of the sum."""

        def size(lo: int, hi: int) -> int:
            return width or _bits(lo, hi)

        def rec(path: str, terms: list, cin: list | None) -> tuple:
            if len(terms) == 1:
                expr, lo, hi, lev = terms[0]
                self.max_levels = max(self.max_levels, lev)
                return expr, lo, hi, 0, lev
            half = (len(terms) + 1) // 2 if balanced else len(terms) - 1
            left = rec(f"{path}l", terms[:half], cin[: half - 1] if cin else None)
            right = rec(f"{path}r", terms[half:], cin[half - 1 : -1] if cin else None)
            ops = [(f"{path}l", left), (f"{path}r", right)]
            if cin:
                expr, lo, hi, lev = cin[-1]
                ops.append((f"{path}c", (expr, lo, hi, 0, lev)))
            # the adder sits in the latest operand's stage, one stage later if that operand
            # already went through `levels` adders; earlier operands are delayed to it
            stage = max(op[3] for _, op in ops)
            lev = max(op[4] for _, op in ops if op[3] == stage)
            if lev >= self.levels:
                stage, lev = stage + 1, 0
            exprs = [self.delay(p, op, stage, size(op[1], op[2]), signed)[0] for p, op in ops]
            lo, hi = sum(op[1] for _, op in ops), sum(op[2] for _, op in ops)
            n = size(lo, hi)
            expr = " + ".join(f"{n}'({e})" for e in exprs)
            if cin:
                self.out(f"    (* keep *) logic signed [{n - 1}:0] {path};")
                self.out(f"    assign {path} = {expr};")
                expr = path
            self.max_levels = max(self.max_levels, lev + 1)
            return expr, lo, hi, stage, lev + 1

        root = rec(name, terms, bits)
        self.extra = max(self.extra, root[3])
        return root

    def result(self, lhs: str, bits: int, name: str, root: tuple, width=None, signed=True):
        """`assign lhs = bits'(root)` once the segment closes (after the delay to its end)."""
        self.roots.append((lhs, bits, name, root, width or _bits(root[1], root[2]), signed))

    def delay_array(self, name: str, decl: str, dims: list[tuple[str, int]]) -> str:
        """An array that passes through the open segment beside its trees: delayed by the
        segment's inner registers (declared `decl name_rS [..]`); returns the delayed name."""
        src = name
        for s in range(self.extra):
            dst = f"{name}_r{s}"
            shape = "".join(f"[{n}]" for _, n in dims)
            index = "".join(f"[{v}]" for v, _ in dims)
            self.out(f"    {decl} {dst} {shape};")
            self.out("    always_ff @(posedge ap_clk) begin")
            self.out(f"        if (stage_en[{self.base + s}]) begin")
            _loops(self.out, 12, dims, [f"{dst}{index} <= {src}{index};"])
            self.out("        end")
            self.out("    end")
            src = dst
        return src

    def close(self, segment: str) -> int:
        """End the open segment: its tree results, delayed to its deepest tree, are assigned;
        returns the stage_en index of the fixed register stage that ends it."""
        for lhs, bits, name, root, width, signed in self.roots:
            expr = self.delay(name, root, self.extra, width, signed)[0]
            self.out(f"    assign {lhs} = {bits}'({expr});")
        stage = self.base + self.extra
        self.segments[segment] = self.extra
        self.base, self.extra, self.roots = stage + 1, 0, []
        return stage

    @property
    def latency(self) -> int:
        return self.base
