"""`eatt ...` as the tests run it: a new process for every command, as a user's shell starts
one, without paying for torch's and Brevitas' import each time.

A user's `eatt export` spends ~3.5 s of its life importing torch and Brevitas before it does
anything (more than half of a small command's time; measured 2026-12-03 on
tests/test_readme_trained.py: 33 such processes, about 120 of its 284 s). The tests start a few
hundred of them, so each command here is a child forked from a server process (one per test
worker) that imported those libraries once, the way multiprocessing's forkserver preloads
modules for its workers (multiprocessing itself is not used: it would run the parent's
``__main__``, pytest's, again in the child). The child is a fresh process all the same: its own
pid, working folder, environment, stdin from /dev/null, stdout and stderr captured, `eatt.cli`
imported anew (only third-party libraries are preloaded, no eatt module) and run through its
``main`` as ``python -m eatt.cli`` runs it, its exit code and its atexit handlers as at a
normal interpreter exit.

A command whose environment changes what the preloaded libraries read when imported (thread,
device and Python settings) runs as a plain ``python -m eatt.cli`` subprocess instead, as do
the tests that need a process of their own (signals, resource limits, a closed pipe; Ray's
sweeps in tests/test_sweep.py: README's sweep runs forked, its Ray driver in the child).
Shared with the server and so the same for every command of a worker: the hash seed, numpy's
global random state before anything seeds it, the umask and resource limits at its start.
``EATT_TESTS_SUBPROCESS=1`` runs every command that way (to compare, or to rule this out).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

#: imported once by the server, inherited by every command's process
PRELOAD = ("numpy", "torch", "brevitas", "onnx")
#: environment variables those libraries read at import: a command that sets one of them
#: differently runs in a plain subprocess
_IMPORT_TIME_ENV = (
    "OMP_", "MKL_", "KMP_", "OPENBLAS_", "GOTO_", "NPY_", "NUMPY_", "TORCH", "PYTORCH", "CUDA",
    "BREVITAS", "PYTHON", "LD_", "LANG", "LC_", "HOME",
)  # fmt: skip

#: the server: preloads, then for each request line (JSON: argv, cwd, env, stdout and stderr
#: paths) forks a child that runs eatt's main, answers the child's pid, waits for it and
#: answers its exit code (negative: the signal that ended it). The child leaves the server's
#: loop by SystemExit, so its end is the interpreter's own: threads joined, atexit handlers,
#: streams flushed, an uncaught exception's traceback and exit code 1.
_SERVER = r"""
import json, os, sys
rfd, wfd = os.dup(0), os.dup(1)
requests, answers = os.fdopen(rfd, "rb"), os.fdopen(wfd, "wb")
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
os.close(null)
for name in sys.argv[1:]:
    __import__(name)
def child(req):
    for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    requests.close()
    answers.close()
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    import tempfile
    tempfile.tempdir = None  # read TMPDIR again, from this environment
    sys.argv = [req["prog"], *req["argv"]]
    from eatt.cli import main
    raise SystemExit(main(list(req["argv"])))
for line in requests:
    req = json.loads(line)
    sys.__stdout__.flush()
    sys.__stderr__.flush()
    pid = os.fork()
    if pid == 0:
        child(req)
    answers.write(b"%d\n" % pid)
    answers.flush()
    _, status = os.waitpid(pid, 0)
    answers.write(b"%d\n" % os.waitstatus_to_exitcode(status))
    answers.flush()
"""

_lock = threading.Lock()
_server: subprocess.Popen | None = None
_server_env: dict[str, str] = {}  # the environment the server imported its libraries in


def _start() -> subprocess.Popen:
    global _server, _server_env
    if _server is None or _server.poll() is not None:
        _server_env = dict(os.environ)
        # unbuffered: an answer read is never more than its line, so select() on the pipe
        # sees the next one (the pid and the exit code can arrive together)
        _server = subprocess.Popen(
            [sys.executable, "-c", _SERVER, *PRELOAD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        atexit.register(_server.kill)
    return _server


def _answer(server: subprocess.Popen, timeout: float | None) -> int | None:
    ready, _, _ = select.select([server.stdout], [], [], timeout)
    if not ready:
        return None
    line = server.stdout.readline()
    if not line:
        raise RuntimeError("tests/cli.py: the command server ended")
    return int(line)


def _subprocess(argv, cwd, env, timeout) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eatt.cli", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def run_eatt(
    *args: str | os.PathLike, cwd: Path | str | None = None, env: dict | None = None,
    timeout: float = 900,
) -> subprocess.CompletedProcess:  # fmt: skip
    """`eatt ARGS` in a new process: its exit code, stdout and stderr (text), as
    ``subprocess.run([python, -m, eatt.cli, ...], capture_output=True, text=True)`` gives them;
    ``env`` replaces the environment as subprocess's does; TimeoutExpired after ``timeout``."""
    argv = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    cwd = str(cwd if cwd is not None else os.getcwd())
    if not os.path.isdir(cwd):  # what subprocess raises for it
        raise FileNotFoundError(2, "No such file or directory", cwd)
    # against the environment the server imported its libraries in (the caller's, if none yet)
    base = _server_env if _server is not None and _server.poll() is None else os.environ
    changed = set(env) ^ set(base) | {k for k in env if env[k] != base.get(k)}
    if os.environ.get("EATT_TESTS_SUBPROCESS") == "1" or any(
        k.startswith(_IMPORT_TIME_ENV) for k in changed
    ):
        return _subprocess(argv, cwd, env, timeout)
    shown = [sys.executable, "-m", "eatt.cli", *argv]
    with _lock, tempfile.TemporaryDirectory(prefix="eatt-cli-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        server = _start()
        request = dict(argv=argv, cwd=cwd, env=env, stdout=str(out), stderr=str(err),
                       prog=str(Path(sys.executable).parent / "eatt"))  # fmt: skip
        try:
            server.stdin.write((json.dumps(request) + "\n").encode())
            server.stdin.flush()
            pid = _answer(server, None)
            assert pid is not None and pid > 0, pid
            code = _answer(server, timeout)
            if code is None:
                os.kill(pid, signal.SIGKILL)
                _answer(server, None)
                raise subprocess.TimeoutExpired(shown, timeout)
        except BaseException as stop:  # an answer may be left unread: start a new server
            if not isinstance(stop, subprocess.TimeoutExpired):
                server.kill()
                server.wait()
            raise
        text = [p.read_text(encoding="utf-8") if p.exists() else "" for p in (out, err)]
    return subprocess.CompletedProcess(shown, code, text[0], text[1])
