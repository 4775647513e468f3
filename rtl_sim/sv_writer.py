"""Writing SystemVerilog text: the line collector the emitters write into.

``_Writer`` collects lines (and writes constant tables as case-statement functions),
``_lit`` a sized signed literal, ``_loops`` nested for loops around body lines.
"""

from __future__ import annotations

import numpy as np


def _lit(value: int, width: int) -> str:
    """A signed SystemVerilog literal of the given width (the value must fit)."""
    value = int(value)
    if not -(2 ** (width - 1)) <= value < 2 ** (width - 1):
        raise AssertionError(f"literal {value} does not fit {width} signed bits")
    return f"{width}'sd{value}" if value >= 0 else f"-{width}'sd{-value}"


class _Writer:
    """Collects lines of SystemVerilog; small helpers for the repeated shapes."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str = "") -> None:
        self.lines.append(line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def rom(self, name: str, index_bits: int, value_bits: int, table: np.ndarray) -> None:
        """A constant table as a function with a case statement (0 outside the entries)."""
        self(f"    function automatic logic [{value_bits - 1}:0] {name}(")
        self(f"        input logic [{index_bits - 1}:0] idx);")
        self("        case (idx)")
        for i, value in enumerate(table.tolist()):
            if i >= 2**index_bits:
                break
            if value:
                self(f"            {index_bits}'d{i}: {name} = {value_bits}'d{int(value)};")
        self(f"            default: {name} = {value_bits}'d0;")
        self("        endcase")
        self("    endfunction")


def _loops(out: _Writer, indent: int, dims: list[tuple[str, int]], body: list[str]) -> None:
    """Nested for loops over (variable, count) around body lines."""
    pad = " " * indent
    for depth, (var, count) in enumerate(dims):
        out(f"{pad}{'    ' * depth}for (int {var} = 0; {var} < {count}; {var}++) begin")
    for line in body:
        out(f"{pad}{'    ' * len(dims)}{line}")
    for depth in reversed(range(len(dims))):
        out(f"{pad}{'    ' * depth}end")
