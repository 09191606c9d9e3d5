"""Text output fits the terminal: COLUMNS or the terminal's width when stdout is one, 100
columns otherwise; cells wrap between words, a name too long for its column is shortened in
the middle, a word is never split across lines."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import numpy as np
import onnx
import pytest
from conftest import ROOT
from onnx import TensorProto, helper, numpy_helper

from opshift.tables import shorten, table


def _yolo_names(path, blocks: int = 3):
    """Conv -> PRelu blocks named the way an exporter names them (long, path-like)."""
    nodes, inits, x = [], [], "images"
    for i in range(blocks):
        s = f"/model.{i}/Split_output_0"
        nodes.append(helper.make_node("Conv", [x, f"model.{i}.w"], [s], name=f"/model.{i}/Conv"))
        inits += [numpy_helper.from_array(np.full((4, 4, 1, 1), 0.5, np.float32), f"model.{i}.w"),
                  numpy_helper.from_array(np.full((4, 1, 1), 0.25, np.float32),
                                          f"model.{i}.act.slope_of_the_block")]
        y = f"/model.{i}/act/PRelu_output_0"
        nodes.append(helper.make_node("PRelu", [s, f"model.{i}.act.slope_of_the_block"], [y],
                                      name=f"/model.{i}/act/PRelu_with_a_rather_long_name"))
        x = y
    nodes.append(helper.make_node("LeakyRelu", [x], ["output0"], name="/model.22/LeakyRelu",
                                  alpha=0.1))
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 8, 8])
          for n in ("images", "output0")]
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", vi[:1], vi[1:], inits),
                                opset_imports=[helper.make_opsetid("", 13)], ir_version=7),
              path)
    return path, [n.name for n in nodes] + [o for n in nodes for o in n.output]


def _env(**set_):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return {**env, **set_}


def _run(*argv, columns: str | None = None) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "opshift", *map(str, argv)], capture_output=True,
                       text=True, cwd=ROOT, env=_env(**({"COLUMNS": columns} if columns else {})))
    assert p.returncode == 0, p.stderr
    return p


def _assert_no_split_names(text: str, names: list[str]) -> None:
    """Every name-like word is a whole name or one shortened in the middle."""
    for word in re.findall(r"/model\S*", text):
        word = word.rstrip(",")
        if word in names:
            continue
        assert "..." in word, f"{word!r} is a piece of a name"
        head, tail = word.split("...", 1)
        assert any(n.startswith(head) and n.endswith(tail) for n in names), word


@pytest.mark.parametrize("columns", ["80", "90"])
def test_inspect_all_fits_the_columns_without_splitting_names(tmp_path, columns):
    src, names = _yolo_names(tmp_path / "m.onnx")
    text = _run("inspect", src, "--all", "--opset", "9", columns=columns).stdout
    lines = text.splitlines()
    assert max(map(len, lines)) <= int(columns), text
    _assert_no_split_names(text, names)
    row = next(x for x in lines if x.startswith("/m"))
    assert "PRelu-9" in row and "float" in row  # one row per node, not a cell per line
    # the slope class's explanation is said once, below the table
    assert text.count("per_channel_broadcast") == 1 and "slope classes:" in text
    assert text.count("per-channel") == 4


def test_verify_table_fits_80_columns_shapes_whole(tmp_path):
    src, names = _yolo_names(tmp_path / "m.onnx")
    p = _run("inline", src, "-o", tmp_path / "o.onnx", "--verify", "-v", columns="80")
    lines = p.stdout.splitlines()
    i = next(k for k, x in enumerate(lines) if x.startswith("verify with"))
    end = next(k for k, x in enumerate(lines) if x.startswith("verify: ok"))
    table_lines = lines[i + 1:end]
    assert table_lines[0].split() == ["check", "output", "dtype", "shape", "max", "abs", "err",
                                      "max", "ulp", "result"]
    assert max(map(len, table_lines)) <= 80
    assert len(table_lines) == 6  # the heading and one line per check: nothing wrapped
    assert all("[1, 4, 8, 8]" in x for x in table_lines[1:])
    _assert_no_split_names("\n".join(table_lines), names)


def test_not_a_terminal_and_no_columns_keeps_100(tmp_path):
    src, names = _yolo_names(tmp_path / "m.onnx", blocks=12)
    plain = _run("inspect", src, "--all").stdout
    assert plain == _run("inspect", src, "--all", columns="100").stdout
    assert plain != _run("inspect", src, "--all", columns="80").stdout
    assert max(map(len, plain.splitlines())) <= 100
    assert max(map(len, plain.splitlines())) > 80
    # the names are whole in --json, whatever the width
    d = _run("inspect", src, "--all", "--json", columns="40").stdout
    assert all(f'"{n}"' in d for n in names if "PRelu_with" in n)


def _in_a_pty(argv, cols: int) -> str:
    """``opshift *argv`` with stdout a terminal of ``cols`` columns and COLUMNS unset."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    try:
        p = subprocess.run([sys.executable, "-m", "opshift", *map(str, argv)], cwd=ROOT,
                           stdout=follower, stderr=subprocess.PIPE, env=_env(), timeout=120)
        os.close(follower)
        follower = -1
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            out += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert p.returncode == 0, p.stderr
    return out.decode().replace("\r\n", "\n")


@pytest.mark.parametrize("cols", [72, 160])
def test_a_terminal_s_width_is_used(tmp_path, cols):
    src, names = _yolo_names(tmp_path / "m.onnx")
    text = _in_a_pty(["inspect", src, "--all"], cols)
    lines = text.splitlines()
    assert "PRelu 3, LeakyRelu 1" in text
    assert max(map(len, lines)) <= cols
    _assert_no_split_names(text, names)
    whole = [n for n in names if n.endswith("long_name")]
    if cols == 160:  # wide enough for every name: none shortened
        assert all(n in text for n in whole) and "/model..." not in text
        assert max(map(len, lines)) > 100
    else:
        assert not any(n in text for n in whole)


def test_table_never_splits_a_word():
    head = ["name", "what"]
    rows = [["/model.2/Split_output_0", "a cell of several words that wraps between them"],
            ["x" * 50, "y"]]
    lines = table(head, rows, width=40)
    assert max(map(len, lines)) <= 40
    words = {w for r in rows for c in r for w in c.split()} | set(head)
    for line in lines:
        for w in line.split():
            assert w in words or ("..." in w and any(
                x.startswith(w.split("...")[0]) and x.endswith(w.split("...")[1])
                for x in words)), w
    assert shorten("/model.2/Split_output_0", 16) == "/model...utput_0"
    assert shorten("abc", 16) == "abc"
