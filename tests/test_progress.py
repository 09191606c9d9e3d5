"""Progress moves (done/total with an ETA, or elapsed time), is drawn only on a terminal, and
never with -q or --json."""

from __future__ import annotations

import argparse
import os
import pty
import select
import subprocess
import sys

import pytest
from conftest import ROOT

from opshift import progress
from opshift.cli import progress_line


def test_counted_phase_shows_done_total_and_eta():
    bar = progress_line.Progress("opshift verify", enabled=False)
    with bar.phase("verify", 200, "rewrites"):
        start = bar._stack[-1].start
        for _ in range(50):
            progress.advance()  # not drawn: no reporter is registered, the seam does nothing
        assert bar._stack[-1].done == 0
        bar.advance(50)
        line = bar.line(now=start + 10.0)
    assert "verify 50/200 rewrites" in line and "25%" in line and "ETA 30s" in line


def test_nested_stage_shows_while_it_lasts_with_the_batch_count(capsys):
    bar = progress_line.Progress("opshift convert", enabled=True)
    with bar.phase("", 3, "models"):  # a batch's phase, as commands._batch.run has it
        bar.advance()
        with progress.stage("whole model", 4, "runs"):
            progress.advance(2)
            inner = bar.line()
        outer = bar.line()
    bar.close()
    assert inner.startswith("opshift convert [1/3 models]: whole model 2/4 runs")
    assert outer.startswith("opshift convert: 1/3 models [#")
    assert progress.reporter() is None  # the line is no reporter once the phase ends


def test_uncounted_phase_shows_elapsed_time():
    bar = progress_line.Progress("opshift fix", enabled=False)
    with bar.phase("fix"):
        line = bar.line(now=bar._stack[-1].start + 2.5)
    assert line.startswith("opshift fix: fix ") and line.endswith("2.5s")


def test_the_seam_forwards_to_the_reporter_registered():
    """opshift.progress draws nothing itself: stage and advance reach whatever reporter the
    caller registered (none by default)."""
    import contextlib

    seen = []

    class Reporter:
        @contextlib.contextmanager
        def phase(self, label, total=None, unit=""):
            seen.append(("phase", label, total, unit))
            yield

        def advance(self, n=1):
            seen.append(("advance", n))

    assert progress.reporter() is None
    with progress.stage("nothing", 3, "nodes"):
        progress.advance()
    previous = progress.report_to(Reporter())
    try:
        with progress.stage("fix", 2, "repairs"):
            progress.advance(2)
    finally:
        progress.report_to(previous)
    assert seen == [("phase", "fix", 2, "repairs"), ("advance", 2)]


def test_quiet_json_and_pipes_get_no_bar(monkeypatch):
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    for flags in ({"quiet": True, "json": False}, {"quiet": False, "json": True}):
        assert not progress_line.for_args(argparse.Namespace(**flags), "x").enabled
    assert progress_line.for_args(argparse.Namespace(quiet=False, json=False), "x").enabled
    monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
    assert not progress_line.for_args(argparse.Namespace(quiet=False, json=False), "x").enabled


def _stderr_on_a_terminal(argv: list[str]) -> tuple[int, str]:
    """Run ``python -m opshift argv`` with stderr on a pseudo-terminal; its exit code and
    everything it drew there."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "opshift", *argv], stderr=slave,
                         stdout=subprocess.DEVNULL, cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif p.poll() is not None:
            break
    rc = p.wait()
    os.close(master)
    return rc, b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def big_model(tmp_path_factory):
    import onnx
    from conftest import block_model

    path = tmp_path_factory.mktemp("progress") / "big.onnx"
    onnx.save(block_model(1000, 13), path)
    return path


def test_verify_progress_counts_runs_with_an_eta_on_a_terminal(big_model):
    import re

    rc, drawn = _stderr_on_a_terminal(["verify", str(big_model), str(big_model)])
    assert rc == 0, drawn
    # (whether a redraw falls after a run is done depends on the machine's load: the lines
    # that show one are checked, and the test is skipped only when no redraw showed any)
    counted = [line for line in drawn.split("\r\x1b[2K")
               if re.match(r"opshift verify: whole model [1-9][\d,]*/[\d,]+ runs \[", line)]
    if not counted:
        pytest.skip("no redraw fell after a run was done")
    assert all(re.search(r"\] \d+%  \d+\.\ds  ETA \d", line) for line in counted), counted
    assert drawn.endswith("\x1b[2K")  # the line is cleared at the end


def test_a_batch_counts_its_models_on_a_terminal(tmp_path):
    import re

    import onnx
    from conftest import block_model

    for k in range(12):
        onnx.save(block_model(2000, 13), tmp_path / f"m{k:02}.onnx")
    # with -j 2 the models' own phases are not drawn (the workers draw nothing): the count is
    rc, drawn = _stderr_on_a_terminal(["inspect", str(tmp_path), "-j", "2"])
    assert rc == 0, drawn
    if not drawn:
        pytest.skip("the batch ended before a redraw")
    assert re.search(r"\x1b\[2Kopshift inspect: \d+/12 models \[[#.]{10}\] ", drawn), drawn
    assert "models models" not in drawn
    assert drawn.endswith("\x1b[2K")


@pytest.mark.parametrize("flag", ["-q", "--json"])
def test_no_progress_with_quiet_or_json_even_on_a_terminal(big_model, flag):
    rc, drawn = _stderr_on_a_terminal(["verify", str(big_model), str(big_model), flag])
    assert rc == 0 and drawn == ""


class _Recording(progress_line.Progress):
    """A progress that draws nothing and notes (label, total, done) at every count."""

    def __init__(self):
        super().__init__("opshift", enabled=False)
        self.seen: list[tuple[str, int | None, int]] = []

    def advance(self, n: int = 1) -> None:
        super().advance(n)
        p = self._stack[-1]
        self.seen.append((p.label, p.total, p.done))


def _counts(monkeypatch, argv) -> dict[str, list[tuple[int | None, int]]]:
    """Run the command in-process; its counted phases: label -> [(total, done), ...]."""
    from opshift.cli import main

    rec = _Recording()
    previous = progress.report_to(rec)
    try:
        with rec.phase("model"):
            assert main([str(a) for a in argv]) == 0
    finally:
        progress.report_to(previous)
    out: dict[str, list[tuple[int | None, int]]] = {}
    for label, total, done in rec.seen:
        out.setdefault(label, []).append((total, done))
    return out


@pytest.mark.parametrize("opset", [8, 13])  # the legacy band and the function band
def test_inline_counts_its_nodes(tmp_path, monkeypatch, opset):
    import onnx
    from conftest import block_model

    m = block_model(300, opset)
    onnx.save(m, tmp_path / "m.onnx")
    sites = sum(n.op_type in ("PRelu", "LeakyRelu", "Selu") for n in m.graph.node)
    seen = _counts(monkeypatch, ["inline", tmp_path / "m.onnx", "-o", tmp_path / "o.onnx",
                                 "-q"])["inline"]
    assert sites == 100 and {t for t, _ in seen} == {sites}
    assert [d for _, d in seen] == list(range(1, sites + 1))


def test_fuse_counts_the_nodes_it_visits(tmp_path, monkeypatch):
    import onnx
    from conftest import block_model

    from opshift import inline

    m = inline(block_model(60, 13))
    onnx.save(m, tmp_path / "m.onnx")
    seen = _counts(monkeypatch, ["fuse", tmp_path / "m.onnx", "-o", tmp_path / "o.onnx",
                                 "-q"])["fuse"]
    assert {t for t, _ in seen} == {len(m.graph.node)}
    assert [d for _, d in seen] == list(range(1, len(seen) + 1))
    assert len(seen) >= len(m.graph.node) - 40  # every node but those fused into others


def test_fix_counts_its_repairs(tmp_path, monkeypatch):
    import onnx
    from conftest import block_model

    onnx.save(block_model(30, 9), tmp_path / "m.onnx")
    seen = _counts(monkeypatch, ["fix", tmp_path / "m.onnx", "-o", tmp_path / "o.onnx",
                                 "-q"])["fix"]
    # seven repairs, but for the values-defined-twice one: the check found no such value
    assert seen == [(6, k) for k in range(1, 7)]


def test_convert_counts_the_nodes_it_plans(tmp_path, monkeypatch):
    import onnx
    from conftest import block_model

    m = block_model(1000, 6)  # PRelu's slope step plans node by node
    onnx.save(m, tmp_path / "m.onnx")
    seen = _counts(monkeypatch, ["convert", tmp_path / "m.onnx", "--opset", "17", "-o",
                                 tmp_path / "o.onnx", "-q"])["convert"]
    total = len(m.graph.node)
    assert total > 512 and {t for t, _ in seen} == {total}
    done = [d for _, d in seen]
    assert done == sorted(done) and done[-1] == total and len(done) >= total // 256
