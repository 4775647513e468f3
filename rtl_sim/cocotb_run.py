"""cocotb's runner as eatt sim drives it: builds and testbench runs of one top level.

    _cocotb_build(simulator, sources, top, bdir, parameters, roots, trace, public)
        cocotb's build of ``top`` in ``bdir`` (Verilator: only the top's signals public, or
        only the names in ``public``)
    _cocotb_test(simulator, test_module, top, bdir, run, seed, log, vcd)
        cocotb's run of one testbench module (rtl_sim/tb/) on a built top

Every command runs in a process group of its own, ended as a whole on an interrupt
(rtl_sim/procs.py); :func:`_sim_environ` sets the environment and sys.path for one build or
run. A failure is a RuntimeError naming the log and its tail. eatt.rtl_sim.runner (the build
cache: eatt.rtl_sim.sim_build) uses them; it re-exports these names.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from eatt.config import atomic_write_text
from eatt.progress import say
from eatt.rtl_sim.procs import run_group
from eatt.rtl_sim.tools import verilator_env

TB_DIR = Path(__file__).parent / "tb"

LABEL = {"verilator": "Verilator", "icarus": "Icarus Verilog"}

#: Verilator: cocotb's runner passes --public-flat-rw (every signal of the design public and
#: writable through VPI, which stops Verilator from optimizing them away); the testbenches
#: touch only the top level's ports, so --no-public-flat-rw (the last one wins) and a
#: configuration file (:func:`_public_top`) that makes just the top module's signals public.
#: A synthesized netlist is one flat module: its top's signals are every net, and a public net
#: is one Verilator must assume written from outside, so the logic it drives is evaluated again
#: in every eval (its "ico" region). Its builds make only the ports public (``public``): the
#: trained layer's ECP5 netlist ran at about 1,500 cycles a second with every net public.
#: The folded engine at the default model's size simulates 7x faster (500k idle cycles: 7.6 s
#: -> 1.1 s).
_BUILD_ARGS = {"verilator": ["-Wno-fatal", "--no-public-flat-rw"], "icarus": []}
PUBLIC_TOP_VLT = "eatt_public_top.vlt"
#: how Verilator's log starts an internal error (see :func:`_cocotb_build`)
VERILATOR_INTERNAL = "%Error: Internal Error:"
#: a build with ``trace="saif"`` (Verilator; eatt power's netlist simulation): dump.saif in the
#: run folder with the toggle count of every net of the top module (a synthesized netlist's
#: nets are named _123_, which Verilator leaves out of a trace without --trace-underscore; depth
#: 1 leaves out the cells' insides, which would double the build time)
TRACE_ARGS = {"saif": ["--trace-saif", "--trace-underscore", "--trace-depth", "1"]}
#: a build's ``cxx_opt``: the C++ optimization of Verilator's fast-path code (its OPT_FAST, -Os by
#: default). A synthesized netlist's C++ is tens of MB of flat gate expressions (70 MB for the
#: paper-size folded E-ATT engine's 75k cells): -O1 compiles a 0.9 MB file in 6.7 s against
#: 15.6 s at -Os, and its simulation was not slower (the default folded engine's netlist,
#: 194,082 cycles: 91 s at -O1, 142 s at -Os, both beside other builds; docs/power.md)
CXX_OPTS = ("-O0", "-O1", "-O2", "-Os")


def _public_top(bdir: Path, top: str, names: list[str] | None = None) -> Path:
    """bdir/eatt_public_top.vlt: the top module's signals (its ports among them) public and
    writable, the only ones a cocotb testbench here reads or drives; with ``names``, only
    those (a netlist's ports)."""
    path = bdir / PUBLIC_TOP_VLT
    lines = [f'public_flat_rw -module "{top}" -var "{name}"' for name in names or ["*"]]
    atomic_write_text(path, "`verilator_config\n" + "\n".join(lines) + "\n")
    return path


# -- cocotb ---------------------------------------------------------------------------------------
def _execute_cmds(self, cmds, cwd, stdout=None) -> None:
    """cocotb Runner._execute_cmds, each command in a process group of its own, ended as a
    whole on an interrupt (rtl_sim/procs.py)."""
    for cmd in cmds:
        stderr = None if stdout is None else subprocess.STDOUT
        code = run_group(cmd, cwd=cwd, env=self.env, stdout=stdout, stderr=stderr)
        if code != 0:
            raise RuntimeError(f"Command failed with return code: {code}")


def _runner(simulator: str, vcd: bool = False, make_vars: tuple[str, ...] = ()):
    """cocotb's runner for `simulator`, its commands run in process groups of their own.
    ``vcd`` (Icarus): the design's own $dumpfile writes VCD (cocotb passes vvp -none);
    ``make_vars`` (Verilator): "NAME=value" given to the make of the C++ build."""
    from cocotb_tools.runner import get_runner

    runner = get_runner(simulator)
    runner._execute_cmds = types.MethodType(_execute_cmds, runner)
    if make_vars:
        base_build = runner._build_command
        runner._build_command = lambda: [
            [*cmd, *make_vars] if cmd[:1] == ["make"] else cmd for cmd in base_build()
        ]
    if vcd:
        base = runner._test_command
        runner._test_command = lambda: [
            ["-vcd" if arg == "-none" else arg for arg in cmd] for cmd in base()
        ]
    return runner


@contextmanager
def _sim_environ(simulator: str, tb_dir: Path = TB_DIR, **extra: str) -> Iterator[None]:
    """cocotb's runner copies os.environ (over its own extra_env) into every command and hands
    sys.path over as PYTHONPATH (tb_dir first: the testbench module's folder): set both for the
    duration of one build or run."""
    saved = dict(os.environ)
    if simulator == "verilator":
        os.environ.update(verilator_env())
    os.environ.update(extra)
    sys.path.insert(0, str(tb_dir))
    try:
        yield
    finally:
        try:
            sys.path.remove(str(tb_dir))
        except ValueError:
            pass
        os.environ.clear()
        os.environ.update(saved)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _cocotb_build(
    simulator: str,
    sources: list[Path],
    top: str,
    bdir: Path,
    parameters: dict | None = None,
    roots: list[str] | None = None,
    trace: str | None = None,
    public: list[str] | None = None,
    cxx_opt: str | None = None,
) -> None:
    """cocotb's build of `top`; ``roots`` (Icarus): more top-level modules elaborated beside it
    (eatt power's VCD dumper); ``trace`` (Verilator): "saif", a build whose runs with waves
    write dump.saif (:data:`TRACE_ARGS`); ``public`` (Verilator): the top's signals the
    testbench touches (default: all of them); ``cxx_opt`` (Verilator): the C++ optimization of
    its fast-path code (:data:`CXX_OPTS`; default Verilator's -Os)."""
    log = bdir / "build.log"
    if roots and simulator != "icarus":
        raise ValueError(f"extra top-level modules {roots}: Icarus only")
    if trace and (simulator != "verilator" or trace not in TRACE_ARGS):
        raise ValueError(f"trace {trace!r}: Verilator's {', '.join(TRACE_ARGS)} only")
    if cxx_opt and (simulator != "verilator" or cxx_opt not in CXX_OPTS):
        raise ValueError(f"cxx_opt {cxx_opt!r}: Verilator's {', '.join(CXX_OPTS)} only")
    extra = [a for r in roots or () for a in ("-s", r)] + TRACE_ARGS.get(trace or "", [])
    given = sources
    if simulator == "verilator":
        bdir.mkdir(parents=True, exist_ok=True)
        sources = [*sources, _public_top(bdir, top, public)]
    with _sim_environ(simulator):
        try:
            _runner(simulator, make_vars=(f"OPT_FAST={cxx_opt}",) if cxx_opt else ()).build(
                sources=sources,
                hdl_toplevel=top,
                build_dir=bdir,
                build_args=_BUILD_ARGS[simulator] + extra,
                waves=bool(trace),
                parameters=parameters or {},
                timescale=("1ns", "1ps"),
                log_file=log,
            )
        except (RuntimeError, SystemExit) as err:
            if public and trace and VERILATOR_INTERNAL in _tail(log, 5):
                # Verilator's trace of some hashed (long) net names fails unless they are public
                # (measured on an ECP5 netlist's SAIF build): that build as before, all public
                say(f"{LABEL[simulator]}: internal error with the ports public; all nets public")
                _cocotb_build(simulator, given, top, bdir, parameters, roots, trace, None, cxx_opt)
                return
            message = f"{LABEL[simulator]} build failed ({err}); see {log}:\n{_tail(log)}"
            raise RuntimeError(message) from None


def _cocotb_test(
    simulator: str, test_module: str, top: str, bdir, run: Path, seed: int, log, vcd=False
):
    """cocotb's runner.test of one testbench module on a built top; its results.xml path.
    ``vcd``: the run writes its activity (Icarus: the design's $dumpfile; Verilator: the
    build's trace, dump.saif). A failure to run is a RuntimeError naming the log and its tail."""
    try:
        waves = {"waves": True} if vcd and simulator == "verilator" else {}
        return _runner(simulator, vcd and simulator == "icarus").test(
            **waves,
            test_module=test_module,
            hdl_toplevel=top,
            hdl_toplevel_lang="verilog",
            build_dir=bdir,
            test_dir=run,
            results_xml=str(run / "results.xml"),
            seed=seed,
            log_file=log,
        )
    except (RuntimeError, SystemExit) as err:
        raise RuntimeError(f"simulation failed ({err}); see {log}:\n{_tail(log)}") from None
