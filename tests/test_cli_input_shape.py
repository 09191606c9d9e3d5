"""``--input-shape NAME:D0,D1,...`` in every command, and the IR-3 model whose initializers
are not graph inputs (its shapes cannot be inferred until it gets the IR version fix gives)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from clirun import opshift
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.evaluator import evaluate


def _legacy_prelu(path, x_shape):
    """PRelu-6 with a [3] slope on X whose rank (with x_shape None) is unknown."""
    s = numpy_helper.from_array(np.array([0.25, 0.5, 2.0], np.float32), "slope")
    n = helper.make_node("PRelu", ["x", "slope"], ["y"], name="pr")
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", T.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)], [s])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 6)])
    m.ir_version = 4
    onnx.save(m, path)
    return m


def _ir3_conv_prelu(path):
    """Conv then PRelu-6 at IR 3, initializers not listed as graph inputs: shape inference
    does not see the weights, so PRelu's X has no inferred rank."""
    s = numpy_helper.from_array(np.array([0.25, 0.5, 2.0], np.float32), "slope")
    w = numpy_helper.from_array(np.eye(3, dtype=np.float32).reshape(3, 3, 1, 1), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("PRelu", ["c", "slope"], ["y"], name="pr")]
    vi = [helper.make_tensor_value_info(n, T.FLOAT, [1, 3, 4, 4]) for n in "xy"]
    m = helper.make_model(helper.make_graph(nodes, "g", vi[:1], vi[1:], [s, w]),
                          opset_imports=[helper.make_opsetid("", 6)])
    m.ir_version = 3
    onnx.save(m, path)
    return m


def _per_channel(x, slope):
    return np.where(x < 0, x * slope.reshape(1, 3, 1, 1), x)


def test_input_shape_decides_the_legacy_slope(tmp_path):
    src, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    _legacy_prelu(src, None)
    p = opshift("convert", src, "--opset", "13", "-o", out)
    assert p.returncode == 2 and "--input-shape NAME:D0,D1,... gives them" in p.stderr
    p = opshift("convert", src, "--opset", "13", "-o", out, "--input-shape", "x:1,3,2,2",
                "--verify")
    assert p.returncode == 0, p.stderr
    assert ("note: --input-shape sized what the model leaves open (x (no shape) as [1, 3, 2, "
            "2]): the written model declares those sizes, the only ones it was rewritten and "
            "checked for") in p.stdout
    m = onnx.load(out)
    dims = m.graph.input[0].type.tensor_type.shape.dim  # the sizes it holds for, declared
    assert [d.dim_value for d in dims] == [1, 3, 2, 2]
    x = np.random.default_rng(0).standard_normal((1, 3, 2, 2)).astype(np.float32)
    slope = np.array([0.25, 0.5, 2.0], np.float32)
    np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], _per_channel(x, slope))


@pytest.mark.parametrize("argv", [["inline", "-o", "OUT"], ["fuse", "-o", "OUT"],
                                  ["fix", "-o", "OUT"], ["inspect"], ["verify", "IN"]],
                         ids=lambda a: a[0])
def test_every_command_takes_input_shapes(tmp_path, argv):
    src, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    _legacy_prelu(src, ["N", 3, "H", "W"])
    argv = [str(src) if a == "IN" else str(out) if a == "OUT" else a for a in argv]
    p = opshift(argv[0], src, *argv[1:], "--input-shape", "x:2,3,4,5", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    if argv[0] == "inspect":
        assert d["details"]["activations"][0]["x_shape"] == [2, 3, 4, 5]
    if argv[0] == "verify":
        assert d["verify"]["inputs"]["x"]["shape"] == [2, 3, 4, 5]
    if out.exists():  # the written model declares the sizes given, and says so
        dims = onnx.load(out).graph.input[0].type.tensor_type.shape.dim
        assert [d.dim_param or d.dim_value for d in dims] == [2, 3, 4, 5]
        assert any("(x [N, 3, H, W] as [2, 3, 4, 5])" in n for n in d["notes"]), d["notes"]


@pytest.mark.parametrize("spec,needle", [
    ("x:1,3", "rank 2 given, the model declares rank 4 ([N, 3, H, W])"),
    ("x:1,4,2,2", "dim 1 is 4, the model declares 3"),
    ("nope:1", "no graph input of that name (inputs: x)"),
    ("slope:3", "no graph input of that name"),
    ("x=1,3", "expected NAME:D0,D1,..."),
    ("x:1,-3", "expected NAME:D0,D1,..."),
])
def test_bad_input_shapes_are_one_line(tmp_path, spec, needle):
    src = tmp_path / "in.onnx"
    _legacy_prelu(src, ["N", 3, "H", "W"])
    p = opshift("inspect", src, "--input-shape", spec)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and needle in p.stderr, p.stderr


@pytest.mark.parametrize("command", ["convert", "inline"])
def test_ir3_unlisted_initializers_get_the_ir_fix_gives(tmp_path, command):
    src, out = tmp_path / "ir3.onnx", tmp_path / "out.onnx"
    model = _ir3_conv_prelu(src)
    extra = ["--opset", "13"] if command == "convert" else []
    p = opshift(command, src, *extra, "-o", out, "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    (repair,) = [c for c in d["changes"] if c.get("kind") == "ir_version"]
    assert repair["what"] == "IR version 3 -> 4 (as 'opshift fix' does)"
    assert "'slope'" in repair["why"] or "'w'" in repair["why"]
    x = np.random.default_rng(1).standard_normal((1, 3, 4, 4)).astype(np.float32)
    slope = np.array([0.25, 0.5, 2.0], np.float32)
    np.testing.assert_array_equal(evaluate(onnx.load(out), {"x": x})["y"],
                                  _per_channel(x, slope))
    assert model.ir_version == 3 and onnx.load(src).ir_version == 3  # input untouched
    p = opshift(command, src, *extra, "-o", out)  # and people are told
    assert "repaired: IR version 3 -> 4 (as 'opshift fix' does)" in p.stdout


def test_input_shape_decides_which_branch_an_if_takes(tmp_path):
    """PyTorch's ``if x.shape[-1] == 1: x = x.squeeze(-1)`` on an input of open shape: below
    11 refused, saying input shapes would decide it; with --input-shape the If is replaced by
    the branch taken, said in a note and marked ``take_branch`` in JSON, and verified."""
    from test_convert_if_shapes import _squeeze_if_last_is_1

    src, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(_squeeze_if_last_is_1(("N", "T")), src)
    p = opshift("convert", src, "--opset", "9", "-o", out)
    assert p.returncode == 2 and "--input-shape NAME:D0,D1,... gives them" in p.stderr
    assert not out.exists()
    p = opshift("convert", src, "--opset", "9", "-o", out, "--input-shape", "x:2,1",
                "--verify", "--ulp", "0", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert [c["node"] for c in d["changes"] if c.get("kind") == "take_branch"] == ["if"]
    p = opshift("convert", src, "--opset", "9", "-o", out, "--input-shape", "x:2,1", "--force")
    assert "note: replaced 1 If node by the branch its condition takes before converting" \
        in p.stdout
    m = onnx.load(out)
    assert [n.op_type for n in m.graph.node][-2:] == ["Squeeze", "Relu"]
    x = np.array([[-1.5], [2.0]], np.float32)
    np.testing.assert_array_equal(evaluate(m, {"x": x})["out"], np.maximum(x[:, 0], 0))
