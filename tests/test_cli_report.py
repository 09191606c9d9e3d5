"""What the commands print: the before/after op counts, the one --verify table, verify's
tolerance and backend options, numbers, plurals and slope classes, tables within 100
columns."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from clirun import opshift
from conftest import MODELS, make_model
from onnx import TensorProto as T
from onnx import helper, numpy_helper

SMALL = MODELS / "small_cnn.onnx"
REWRITES = {"convert": ["--opset", "6"], "inline": [], "fuse": [], "fix": []}
VERIFY_HEAD = ("verify with the opshift evaluator, within 4 ulp (float64, float32), "
               "2 ulp (float16, bfloat16):")
COLUMNS = ["check", "output", "dtype", "shape", "max", "abs", "err", "max", "ulp", "result"]


@pytest.fixture(scope="module")
def inlined(tmp_path_factory):
    """small_cnn with its activations inlined: something for fuse to fuse."""
    out = tmp_path_factory.mktemp("report") / "inlined.onnx"
    assert opshift("inline", SMALL, "-o", out, "-q").returncode == 0
    return out


def _src(command, inlined):
    return inlined if command == "fuse" else SMALL


@pytest.mark.parametrize("command", list(REWRITES))
def test_op_counts_one_line_and_full_with_v(tmp_path, command, inlined):
    src, out = _src(command, inlined), tmp_path / "o.onnx"
    p = opshift(command, src, *REWRITES[command], "-o", out)
    assert p.returncode == 0, p.stderr
    (line,) = [x for x in p.stdout.splitlines() if x.startswith("ops: ")]
    before, after = (onnx.load(src), onnx.load(out))
    nb, na = len(before.graph.node), len(after.graph.node)
    assert line.startswith(f"ops: {nb} -> {na} nodes (" if nb != na else f"ops: {nb} nodes")
    p = opshift(command, src, *REWRITES[command], "-o", out, "-v")
    table = p.stdout.splitlines()
    head = next(i for i, x in enumerate(table) if x.split() == ["op", "before", "after"])
    assert table[head + 1:].index(next(x for x in table if x.startswith("total nodes"))) > 0
    assert any(x.startswith("model size") and "KiB" in x for x in table)
    # -q: nothing (test_cli_options); --json: ops_before/ops_after (test_cli_json)


def test_inline_op_counts_say_what_changed(tmp_path):
    d = json.loads(opshift("inline", SMALL, "-o", tmp_path / "o.onnx", "--json").stdout)
    assert d["ops_before"]["PRelu"] == d["ops_before"]["Selu"] == 1
    assert not {"PRelu", "LeakyRelu", "Selu"} & set(d["ops_after"])
    assert d["ops_after"]["Where"] == 3


@pytest.mark.parametrize("command", [*REWRITES, "verify"])
def test_verify_prints_the_same_table_everywhere(tmp_path, command, inlined):
    src = _src(command, inlined)
    if command == "verify":
        p = opshift("verify", src, src)
    else:
        p = opshift(command, src, *REWRITES[command], "-o", tmp_path / "o.onnx", "--verify")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    i = lines.index(VERIFY_HEAD)
    assert lines[i + 1].split() == COLUMNS
    assert any(x.split()[:2] == ["whole", "model"] and x.endswith("pass") for x in lines)
    end = next(k for k, x in enumerate(lines) if x.startswith("verify: ok: "))
    assert max(map(len, lines[i:end])) <= 100  # the table, wrapped to fit


def test_inline_verify_counts_rewrites_not_outputs(tmp_path):
    p = opshift("inline", SMALL, "-o", tmp_path / "o.onnx", "--verify")
    assert "verify: ok: 3 rewrites and the whole model (1 output) match" in p.stdout


def test_nothing_checked_says_why_and_prints_no_empty_table(tmp_path):
    op = "RandomNormalLike"  # no evaluator kernel: its output is random
    vi = [helper.make_tensor_value_info(n, T.FLOAT, [3]) for n in "xy"]
    src = tmp_path / "m.onnx"
    onnx.save(make_model([helper.make_node(op, ["x"], ["y"], name="n")], vi[:1], vi[1:],
                         opset=22), src)
    p = opshift("convert", src, "--opset", "22", "-o", tmp_path / "o.onnx", "--verify")
    assert p.returncode == 4  # nothing checked: incomplete, not ok
    assert "check" not in p.stdout.split()  # no table header over no rows
    (line,) = [x for x in p.stdout.splitlines() if x.startswith("verify:")]
    assert line.startswith("verify: incomplete: nothing checked, 1 thing not (whole model: ")
    assert f"({op}-" in line
    p = opshift("convert", src, "--opset", "22", "-o", tmp_path / "o.onnx", "--verify",
                "--allow-incomplete")
    assert p.returncode == 0 and "verify: incomplete: " in p.stdout


def _scaled(path, scale):
    vi = [helper.make_tensor_value_info(n, T.FLOAT, [64]) for n in "xy"]
    c = numpy_helper.from_array(np.array(scale, np.float32), "c")
    onnx.save(make_model([helper.make_node("Mul", ["x", "c"], ["y"])], vi[:1], vi[1:],
                         opset=13, initializers=[c]), path)
    return path


def test_verify_tolerance_options(tmp_path):
    a = _scaled(tmp_path / "a.onnx", np.float32(0.1))
    b = _scaled(tmp_path / "b.onnx", np.nextafter(np.float32(0.1), np.float32(1)))
    assert opshift("verify", a, b).returncode == 0  # within 4 ulp
    p = opshift("verify", a, b, "--ulp", "0")
    assert p.returncode == 1 and "more than 0 ulp apart" in p.stdout
    assert "within 0 ulp:" in p.stdout
    p = opshift("verify", a, b, "--ulp", "0", "--rtol", "1e-6", "--json")
    d = json.loads(p.stdout)
    assert p.returncode == 0 and d["verify"]["tolerance"]["rtol"] == 1e-6
    assert d["verify"]["tolerance"]["ulp"]["float32"] == 0
    p = opshift("verify", a, b, "--ulp", "0", "--atol", "1e-30")
    assert p.returncode == 1 and "+ 0.0*|expected|" in p.stdout


def test_verify_backend_onnxruntime_is_named(tmp_path):
    pytest.importorskip("onnxruntime")
    src = MODELS / "prelu16.onnx"
    p = opshift("verify", src, src, "--backend", "onnxruntime")
    if p.returncode == 2 and "onnxruntime cannot run it" in p.stderr:
        pytest.skip(f"onnxruntime cannot run the model: {p.stderr.strip()}")
    assert p.returncode == 0 and "verify with onnxruntime (CPU)" in p.stdout
    p = opshift("fix", src, "-o", tmp_path / "o.onnx", "--verify", "--backend", "onnxruntime",
                "--json")
    assert json.loads(p.stdout)["verify"]["backend"] == "onnxruntime"


def test_fix_verify_has_no_silent_fallback(tmp_path):
    """fix --verify runs the evaluator like every other command; onnxruntime only on
    request."""
    p = opshift("fix", SMALL, "-o", tmp_path / "o.onnx", "--verify", "--json")
    v = json.loads(p.stdout)["verify"]
    assert v["backend"] == "opshift" and v["checks"] == {"rewrites": 0, "whole_model": True}


def _activations(path, opset, slope_shape, alpha=0.01, name="p"):
    x = helper.make_tensor_value_info("x", T.FLOAT, [2, 3, 4, 5])
    y = helper.make_tensor_value_info("y", T.FLOAT, [2, 3, 4, 5])
    slope = numpy_helper.from_array(np.full(slope_shape, 0.5, np.float32), "s")
    nodes = [helper.make_node("LeakyRelu", ["x"], ["a"], name="lr", alpha=alpha),
             helper.make_node("PRelu", ["a", "s"], ["y"], name=name)]
    onnx.save(make_model(nodes, [x], [y], opset=opset, initializers=[slope]), path)
    return path


def test_numbers_plurals_and_slope_classes(tmp_path):
    p = opshift("inspect", _activations(tmp_path / "m16.onnx", 16, [3, 1, 1]))
    assert "alpha=0.01" in p.stdout and "0.0099999" not in p.stdout
    assert "2 nodes (2 in the main graph)" in p.stdout
    assert "numpy broadcast of [C,1,...,1]" in p.stdout and "PRelu-6" not in p.stdout
    assert "legacy" not in p.stdout
    p = opshift("inspect", _activations(tmp_path / "m6.onnx", 6, [3]))
    assert "per-channel axis 1 (PRelu-6's 1-D slope rule" in p.stdout
    single = tmp_path / "one.onnx"
    vi = [helper.make_tensor_value_info(n, T.FLOAT, [3]) for n in "xy"]
    onnx.save(make_model([helper.make_node("Selu", ["x"], ["y"])], vi[:1], vi[1:], opset=13),
              single)
    p = opshift("inspect", single)
    assert "; 1 node (1 in the main graph)" in p.stdout and "1 nodes" not in p.stdout
    assert "1 PRelu/LeakyRelu/Selu node," in p.stdout
    p = opshift("convert", single, "--opset", "13", "-o", tmp_path / "o.onnx")
    assert "0 nodes changed" in p.stdout and "ops: 1 node," in p.stdout


def test_inspect_summary_fits_a_screen_all_lists_every_node(tmp_path):
    from conftest import block_model

    src = tmp_path / "big.onnx"
    onnx.save(block_model(3000, 13), src)
    p = opshift("inspect", src)
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and len(lines) <= 24 and max(map(len, lines)) <= 100
    assert lines[1].startswith("ops (5 types): Add 1,000, Conv 1,000, ")
    p = opshift("inspect", src, "--all")
    assert len(p.stdout.splitlines()) >= 999 and max(map(len, p.stdout.splitlines())) <= 100


def test_inspect_impossible_conversion_said_once_exit_2():
    p = opshift("inspect", MODELS / "selu22_bf16.onnx", "--opset", "11")
    assert p.returncode == 2
    text = p.stdout + p.stderr
    assert text.count("impossible") == 1 and "Selu-6" not in p.stdout
    assert p.stderr.startswith("opshift inspect: error: ") and "to opset 11 is impossible" \
        in p.stderr


def test_long_names_are_shortened_within_100_columns(tmp_path):
    src = _activations(tmp_path / "m.onnx", 13, [3, 1, 1], name="p" * 150)
    p = opshift("inspect", src, "--all")
    assert max(map(len, p.stdout.splitlines())) <= 100 and "p" * 150 not in p.stdout
    # shortened in the middle on one line, never cut into pieces on several
    (row,) = [x for x in p.stdout.splitlines() if re.match(r"p{5,}\.\.\.p{5,} ", x)]
    assert len(re.findall(r"p{5,}", p.stdout)) == 2
    p = opshift("convert", src, "--opset", "6", "-o", tmp_path / "o.onnx", "--verify", "-v")
    assert p.returncode == 0
    table = p.stdout[p.stdout.index(VERIFY_HEAD):p.stdout.index("verify: ok")]
    assert max(map(len, table.splitlines())) <= 100


def _prelu_chain(path, opset, n=25):
    """``n`` PRelu nodes in a row on [1, 3, 4, 5], each with its own 1-D slope [3]: what fix
    repairs at opset 9 and convert reshapes from opset 6 (one change per node)."""
    nodes, inits, x = [], [], "x"
    for i in range(n):
        inits.append(numpy_helper.from_array(np.full(3, 0.1 * (i + 1), np.float32), f"s{i}"))
        nodes.append(helper.make_node("PRelu", [x, f"s{i}"], [f"y{i}"], name=f"p{i}"))
        x = f"y{i}"
    vi = [helper.make_tensor_value_info(v, T.FLOAT, [1, 3, 4, 5]) for v in ("x", x)]
    onnx.save(make_model(nodes, vi[:1], vi[1:], opset=opset, initializers=inits,
                         ir_version=4), path)  # (IR 3 would list the slopes as inputs)
    return path


@pytest.mark.parametrize("command", ["fix", "convert"])
def test_long_change_lists_show_twenty_and_count_the_rest(tmp_path, command):
    src = _prelu_chain(tmp_path / "m.onnx", 9 if command == "fix" else 6)
    args = [command, src, "-o", tmp_path / "o.onnx", *(["--opset", "17"]
                                                        if command == "convert" else [])]
    mark = "fixed: " if command == "fix" else "(PRelu-6->16): "
    p = opshift(*args)
    assert p.returncode == 0, p.stderr
    assert sum(mark in line for line in p.stdout.splitlines()) == 20
    assert "  ... 5 more (-v lists all" in p.stdout
    p = opshift(*args, "-v")
    assert p.returncode == 0 and "more (-v lists all" not in p.stdout
    assert sum(f"p{i}" in p.stdout for i in range(25)) == 25
