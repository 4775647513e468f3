"""The exit-code contract of the `eatt` command, in one place.

Every command returns 0 (ok) or 1 (a check failed: a mismatch, a design that does not route);
everything else is decided here, from what the command raised:

==== ==================================================================================
0    ok
1    a check failed (EXIT_CHECK_FAILED; also a CommandError that carries this code)
2    bad input: one line on stderr naming the flag or file, no traceback (CommandError,
     ConfigError, ValueError, OSError such as a read-only folder, MemoryError)
3    an external tool is missing (ToolMissing)
70   an unexpected error, a bug: one line; EATT_DEBUG=1 shows the traceback (EX_SOFTWARE)
130  interrupted (Ctrl-C); 128 + the signal for SIGTERM (143) and SIGHUP (129)
141  the reader of stdout went away (`eatt energy | head -3`), as if killed by SIGPIPE
==== ==================================================================================
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from eatt.config import ConfigError, first_line
from eatt.rtl_sim.tools import ToolMissing

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT, EXIT_TOOL_MISSING = 0, 1, 2, 3
#: an unexpected error (a bug): one line, EATT_DEBUG=1 for the traceback (BSD's EX_SOFTWARE)
EXIT_INTERNAL = 70
#: Ctrl-C, as a shell reports a process that SIGINT ended (128 + 2)
EXIT_INTERRUPTED = 130
#: stdout's reader went away, as a shell reports a process that SIGPIPE ended (128 + 13)
EXIT_BROKEN_PIPE = 141


class CommandError(Exception):
    """An error with its exit code; printed as one line, never a traceback."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT):
        super().__init__(message)
        self.code = code


@contextmanager
def tool_failures(*, first_line_only: bool = True) -> Iterator[None]:
    """Around a run of external tools (simulators, Yosys, nextpnr, OpenSTA): a missing tool is
    exit 3, a tool that failed (RuntimeError: a build, a handshake assertion, a netlist that
    differs) is a failed check, exit 1. ``first_line_only``: the message's first line (the log
    tail that follows it stays out of the one line)."""
    try:
        yield
    except ToolMissing as err:
        raise CommandError(str(err), EXIT_TOOL_MISSING) from None
    except RuntimeError as err:
        message = str(err).splitlines()[0] if first_line_only else str(err)
        raise CommandError(message, EXIT_CHECK_FAILED) from None


def exit_code(command: Callable[[], int]) -> int:
    """Run ``command`` (parse the arguments, run one sub-command) and give its exit code.

    Errors become one line on stderr (``eatt: error: ...``) and the code of the table above.
    SIGTERM and SIGHUP end the command like Ctrl-C while it runs, so cleanups run and
    temporary files go; the previous handlers come back afterwards.
    """
    held = (signal.SIGTERM, signal.SIGHUP)
    previous = (
        {sig: signal.signal(sig, _terminate) for sig in held}
        if threading.current_thread() is threading.main_thread()
        else {}
    )
    _RECEIVED.clear()
    try:
        code = command()
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        if _RECEIVED:  # a signal whose exception a library dropped (an at-fork hook of Ray's
            return _terminated(_RECEIVED[-1])  # process starts): terminated all the same
        return code
    except BaseException as err:  # noqa: BLE001 - every way out has its code
        if _RECEIVED:  # the signal, whatever a library made of it (Ray: a lost worker, a
            return _terminated(_RECEIVED[-1])  # plain KeyboardInterrupt): terminated
        return _error_code(err)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _error_code(error: BaseException) -> int:
    """The exit code of a command that raised ``error``, its one line said on stderr."""
    try:
        raise error
    except CommandError as err:
        print(f"eatt: error: {err}", file=sys.stderr)
        return err.code
    except ToolMissing as err:
        print(f"eatt: error: {first_line(err)}", file=sys.stderr)
        return EXIT_TOOL_MISSING
    except (ConfigError, ValueError) as err:
        print(f"eatt: error: {first_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # the reader closed stdout: say nothing more there, exit like a tool killed by SIGPIPE
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError as err:  # read-only folder, a file where a folder goes, disk full, ...
        print(f"eatt: error: {_one_line_os_error(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print("eatt: error: out of memory (a smaller core or fewer --vectors)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except _Terminated as err:
        return _terminated(err.signum)
    except KeyboardInterrupt:
        print("eatt: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # a bug: still one line, and the traceback on request
        if os.environ.get("EATT_DEBUG"):
            raise
        print(
            f"eatt: internal error: {type(err).__name__}: {first_line(err)} "
            "(please report it; EATT_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _one_line_os_error(err: OSError) -> str:
    """'PATH: reason' for a file-system fault (read-only, no space, a file where a folder goes)."""
    what = err.strerror or str(err) or type(err).__name__
    name = err.filename if err.filename is not None else None
    if err.filename2 is not None:
        name = f"{err.filename} -> {err.filename2}"
    return f"{name}: {what}" if name else what


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwinds like Ctrl-C, and remembers which signal it was."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _terminated(signum: int) -> int:
    """Say the command was terminated; its exit code 128 + signum. A process that ran Ray
    ends here (its cleanups have run, ray.shutdown among them): Ray's C++ teardown after an
    interrupted call can crash the interpreter's exit (SIGSEGV, SIGABRT) and change the code."""
    print("eatt: terminated", file=sys.stderr)
    if "ray" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signum)
    return 128 + signum


#: the termination signals the running command received (_terminate), latest last
_RECEIVED: list[int] = []


def _terminate(signum, frame) -> None:
    """SIGTERM / SIGHUP end a command like Ctrl-C: cleanups run, temporary files go."""
    _RECEIVED.append(signum)
    raise _Terminated(signum)
