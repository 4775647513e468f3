"""A second SystemVerilog front end on every RTL folder: slang (the PyPI package ``pyslang``).

Verilator is the simulator and its ``--lint-only -Wall`` already runs in the tests; slang is an
independent, standard-strict compiler (the front end of several commercial-grade flows), so a
construct that only Verilator accepts, or one that another tool would read differently, shows up
here. ``lint_rtl(dir)`` compiles every source that the folder's metadata.json lists (the
generated top and the hand-written files) as one design with ``--top`` = its top module,
elaborates it and runs slang's post-elaboration analysis, and returns every error and warning
of slang's default warning set (what the ``slang`` command prints) as one line each:

    window_attention.sv:320:17: warning: <message> [-W<option>]

An empty list means clean. ``options`` adds slang command-line options (``["-Wextra"]``,
``["-Weverything"]``, ``["-Wno-width-trunc"]``, ...). A folder without metadata.json raises
ValueError (load_metadata); no pyslang raises eatt.rtl_sim.tools.ToolMissing.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from eatt.rtl_sim.rtldir import load_metadata
from eatt.rtl_sim.tools import ToolMissing


def _pyslang():
    try:
        import pyslang
    except ImportError:
        raise ToolMissing(
            "pyslang not found: pip install pyslang (the slang check needs it)"
        ) from None
    return pyslang


def lint_rtl(rtl_dir: str | os.PathLike, options: Sequence[str] = ()) -> list[str]:
    """slang's errors and warnings on the RTL folder's sources, one line each (sorted by file
    and position; a diagnostic that several instances share is listed once)."""
    out = Path(rtl_dir)
    meta = load_metadata(out)
    pyslang = _pyslang()
    driver = pyslang.driver.Driver()
    driver.addStandardArgs()
    files = [str(out / rel) for rel in meta["sources"]]
    command = shlex.join(["slang", "--top", meta["top"], *options, *files])
    cmdline_ok = driver.parseCommandLine(command, pyslang.driver.CommandLineOptions())
    if not (cmdline_ok and driver.processOptions()):
        raise ValueError(f"slang: options not understood: {' '.join(options)}")
    if not driver.parseAllSources():
        raise ValueError(f"{out}: slang could not read the sources {meta['sources']}")
    driver.diagEngine.clearClients()  # nothing printed: the diagnostics are returned
    sm = driver.sourceManager
    comp = driver.createCompilation()
    diags = list(comp.getAllDiagnostics())
    if not any(d.isError() for d in diags):  # slang analyses only a design that elaborated
        diags += list(driver.runAnalysis(comp).getDiagnostics())

    engine = driver.diagEngine
    severity = pyslang.DiagnosticSeverity
    names = {severity.Warning: "warning", severity.Error: "error", severity.Fatal: "fatal"}
    found: dict[tuple, str] = {}
    for diag in diags:
        level = engine.getSeverity(diag.code, diag.location)
        if level not in names:  # ignored by the warning set, or a note
            continue
        loc = diag.location
        name = sm.getFileName(loc)
        if name:
            where = (Path(name).name, sm.getLineNumber(loc), sm.getColumnNumber(loc))
        else:  # a diagnostic without a place in a file (whole-design checks)
            where = ("<design>", 0, 0)
        message = " ".join(engine.formatMessage(diag).split())
        option = engine.getOptionName(diag.code)
        text = f"{where[0]}:{where[1]}:{where[2]}: {names[level]}: {message}"
        found[(*where, text)] = text + (f" [-W{option}]" if option else "")
    return [found[key] for key in sorted(found)]
