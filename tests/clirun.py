"""Run ``python -m opshift`` as a user does: a new process, its exit code, stdout, stderr.

Each command is a process of its own, forked from a server that has already imported opshift
(one per test worker, started at its first command): a fresh interpreter would spend most of
a small command's time importing onnx, numpy and opshift, in about 230 of the suite's 290
commands. The child is what ``python -m opshift`` runs (``runpy`` of ``opshift.__main__``)
with its own stdin, stdout and stderr pipes, working directory, environment (the test's, as
it is at the call), exit code and signals. What a fresh interpreter alone shows (what a
command imports, start-up, environment variables read at import) is tested with
``subprocess`` directly."""

from __future__ import annotations

import atexit
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
from pathlib import Path

from conftest import ROOT

_SERVER = r"""
import atexit, json, os, runpy, socket, sys, traceback

def run(request, fds):
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["opshift", *request["argv"]]
        try:
            runpy.run_module("opshift", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:  # as the interpreter reads it
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                code = code or 120
    finally:
        os._exit(code)

channel = socket.socket(fileno=int(sys.argv[1]))
sys.path[0] = os.getcwd()  # the checkout, as `python -m` run there puts it
import importlib, pkgutil, opshift
for module in pkgutil.walk_packages(opshift.__path__, "opshift."):
    if not module.name.startswith(("opshift.__main__", "opshift.plugins")):
        importlib.import_module(module.name)
while True:
    message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 3)
    if not message:
        break
    pid = os.fork()
    if pid == 0:
        channel.close()
        run(json.loads(message), fds)
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    channel.send(str(os.waitstatus_to_exitcode(status)).encode())
"""

_lock = threading.Lock()
_server: tuple[subprocess.Popen, socket.socket] | None = None


def _channel() -> socket.socket:
    global _server
    if _server is None or _server[0].poll() is not None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(theirs.fileno())],
                                pass_fds=[theirs.fileno()], cwd=ROOT)
        theirs.close()
        _server = proc, ours
        atexit.register(_stop, proc, ours)
    return _server[1]


def _stop(proc: subprocess.Popen, channel: socket.socket) -> None:
    channel.close()  # the server reads an end of file and returns
    proc.wait(timeout=30)


def _run(argv: list[str], stdin: bytes | None, cwd: Path) -> tuple[int, bytes, bytes]:
    """Fork a command from the server; feed ``stdin``, read stdout and stderr as they come."""
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    with _lock:
        channel = _channel()
        socket.send_fds(channel, [json.dumps({"argv": argv, "cwd": str(cwd),
                                                     "env": dict(os.environ)}).encode()],
                        [r_in, w_out, w_err])
        for fd in (r_in, w_out, w_err):
            os.close(fd)
        out, err = _communicate(w_in, r_out, r_err, stdin or b"")
        reply = channel.recv(64)
    if not reply:
        raise RuntimeError("the command server stopped (see the worker's stderr)")
    return int(reply), out, err


def _communicate(w_in: int, r_out: int, r_err: int, data: bytes) -> tuple[bytes, bytes]:
    chunks: dict[int, list[bytes]] = {r_out: [], r_err: []}
    with selectors.DefaultSelector() as sel:
        if data:
            os.set_blocking(w_in, False)
            sel.register(w_in, selectors.EVENT_WRITE)
        else:
            os.close(w_in)
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        sent = 0
        while sel.get_map():
            for key, _ in sel.select():
                fd = key.fd
                if fd == w_in:
                    try:
                        sent += os.write(w_in, data[sent:sent + (1 << 16)])
                    except BrokenPipeError:
                        sent = len(data)  # the command stopped reading, as with subprocess
                    if sent >= len(data):
                        sel.unregister(w_in)
                        os.close(w_in)
                    continue
                block = os.read(fd, 1 << 16)
                if block:
                    chunks[fd].append(block)
                else:
                    sel.unregister(fd)
                    os.close(fd)
    return b"".join(chunks[r_out]), b"".join(chunks[r_err])


def opshift(*argv, stdin: bytes | None = None, cwd: Path | None = None,
            binary: bool = False) -> subprocess.CompletedProcess:
    """``python -m opshift *argv`` (paths given as Path objects are made strings)."""
    args = [str(a) for a in argv]
    code, out, err = _run(args, stdin, cwd or ROOT)
    p = subprocess.CompletedProcess([sys.executable, "-m", "opshift", *args], code, out, err)
    if not binary:
        p.stdout = p.stdout.decode()
    p.stderr = p.stderr.decode()
    return p


def json_lines(text: str) -> list[dict]:
    """Every line of ``text`` parsed as one JSON object."""
    return [json.loads(line) for line in text.splitlines()]
