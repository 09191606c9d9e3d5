"""The test command of the README runs the suite in parallel and ends with pytest's summary
line (CI reads it); every lower bound of pyproject.toml is pinned in constraints/lowest.txt;
the suite's command runner (tests/clirun.py) gives what a fresh ``python -m opshift`` gives."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import tomllib
from clirun import opshift
from conftest import ROOT

BOUND = re.compile(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9.]*)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _release(version: str) -> tuple[int, ...]:
    parts = [int(p) for p in version.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def test_every_lower_bound_is_pinned_in_lowest_constraints():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    bounds = {}
    for req in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        m = BOUND.match(req)
        assert m, f"{req!r} has no lower bound"
        bounds[_norm(m[1])] = m[2]
    pins = {}
    for line in (ROOT / "constraints" / "lowest.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[_norm(name)] = version.strip()
    assert set(pins) == set(bounds)
    assert {n: _release(v) for n, v in pins.items()} == {
        n: _release(v) for n, v in bounds.items()}
    # the extras that the suite's parallel run and its ImageDecoder cases need
    assert {"pytest-xdist", "pillow"} <= set(bounds)


#: a quick test for pytest to run in a new process (the one above)
_QUICK = "tests/test_suite_setup.py::test_every_lower_bound_is_pinned_in_lowest_constraints"


def test_pytest_runs_on_workers_and_ends_with_its_summary_line():
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", _QUICK],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"^(created|bringing up nodes)", p.stdout, re.M), p.stdout
    last = p.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"1 passed in [\d.]+s( \(\S+\))?", last), last
    # `-n 0` runs the same test in this one process
    q = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n",
                        "0", _QUICK], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert q.returncode == 0 and "bringing up nodes" not in q.stdout, q.stdout
    assert q.stdout.strip().splitlines()[-1].startswith("1 passed in "), q.stdout


def test_pillow_is_there_for_the_image_decoder_cases():
    """Without it test_backend_conformance skips its ImageDecoder cases (onnx.reference's
    kernel decodes with Pillow)."""
    from PIL import Image

    assert Image.open


@pytest.mark.parametrize("argv,stdin", [
    (["inspect", "models/small_cnn.onnx"], None),
    (["convert", "-", "--opset", "9", "-o", "-", "--verify"], "models/small_cnn.onnx"),
    (["convert", "models/small_cnn.onnx", "--opset", "0"], None),
    (["verify", "models/small_cnn.onnx", "nothing-here.onnx", "-v"], None),
    (["fuse", "--help"], None),
], ids=["inspect", "stdin to stdout", "usage error", "error with traceback", "help"])
def test_the_suites_command_runner_gives_what_a_new_interpreter_gives(argv, stdin):
    """tests/clirun.py forks the suite's commands from a process that has imported opshift:
    the exit code and every byte of stdout and stderr are a fresh ``python -m opshift``'s."""
    data = (ROOT / stdin).read_bytes() if stdin else None
    fresh = subprocess.run([sys.executable, "-m", "opshift", *argv], input=data,
                           capture_output=True, cwd=ROOT, timeout=300)
    forked = opshift(*argv, stdin=data, binary=True)
    assert fresh.returncode == forked.returncode
    assert fresh.stdout == forked.stdout
    assert fresh.stderr.decode() == forked.stderr
    assert fresh.returncode == (0 if argv[0] in ("inspect", "fuse") or stdin else 2)


def test_the_command_runner_gives_each_command_the_environment_at_the_call(monkeypatch):
    argv = ["inspect", "models/small_cnn.onnx", "--all"]
    monkeypatch.delenv("COLUMNS", raising=False)
    wide = opshift(*argv).stdout  # not a terminal: 100 columns
    monkeypatch.setenv("COLUMNS", "60")
    narrow = opshift(*argv)
    fresh = subprocess.run([sys.executable, "-m", "opshift", *argv], capture_output=True,
                           text=True, cwd=ROOT, timeout=300)
    assert narrow.stdout == fresh.stdout != wide
    assert max(map(len, narrow.stdout.splitlines())) == 60
