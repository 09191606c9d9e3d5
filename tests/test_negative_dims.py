"""Negative dims in graph inputs, outputs and value_info (paddle2onnx writes ``[-1, 3, ?, ?]``
for PaddleOCR's inputs): every command reads them as unknown, as onnxruntime does; ``fix``
clears them; the evaluator takes any size there; verify generates one and says so when the
model needs a real one."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from clirun import opshift
from conftest import make_model
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import opshift as api
from opshift.errors import ConversionError, OpshiftError
from opshift.evaluator import evaluate


def _dims(vi) -> list:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param or None
            for d in vi.type.tensor_type.shape.dim]


def _prelu(opset: int, x_shape, slope_shape=(3,)) -> onnx.ModelProto:
    slope = numpy_helper.from_array(np.linspace(0.1, 0.3, int(np.prod(slope_shape)))
                                    .astype(np.float32).reshape(slope_shape), "slope")
    return make_model([helper.make_node("PRelu", ["x", "slope"], ["y"], name="p")],
                      [helper.make_tensor_value_info("x", T.FLOAT, list(x_shape))],
                      [helper.make_tensor_value_info("y", T.FLOAT, list(x_shape))],
                      opset=opset, initializers=[slope], ir_version=4)


def test_fix_clears_them_and_says_so(tmp_path):
    m = _prelu(9, [-1, 3, 4, 5], (3, 1, 1))
    m.graph.node[0].input[0] = "t"
    m.graph.node.insert(0, helper.make_node("Identity", ["x"], ["t"]))
    m.graph.value_info.append(helper.make_tensor_value_info("t", T.FLOAT, [-1, 3, 4, -7]))
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(m, src)
    before = src.read_bytes()
    p = opshift("inspect", src)
    assert "would fix  negative_dim      3" in p.stdout
    p = opshift("fix", src, "-o", out, "--verify")
    assert p.returncode == 0, p.stderr
    assert "input 'x': [-1, 3, 4, 5] -> [?, 3, 4, 5]" in p.stdout
    assert "value_info 't': [-1, 3, 4, -7] -> [?, 3, 4, ?]" in p.stdout
    fixed = onnx.load(out)
    assert _dims(fixed.graph.input[0]) == [None, 3, 4, 5]
    assert _dims(fixed.graph.output[0]) == [None, 3, 4, 5]
    assert _dims(fixed.graph.value_info[0]) == [None, 3, 4, None]
    onnx.checker.check_model(fixed, full_check=True)
    assert src.read_bytes() == before
    assert "0 changes" in opshift("fix", out, "--dry-run").stdout


def test_fix_with_input_shape_clears_the_declared_input_it_writes_back(tmp_path):
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(_prelu(9, [-1, 3, 4, 5], (3, 1, 1)), src)
    p = opshift("fix", src, "-o", out, "--input-shape", "x:2,3,4,5")
    assert p.returncode == 0, p.stderr
    assert "input 'x': [-1, 3, 4, 5] -> [?, 3, 4, 5]" in p.stdout
    # the size --input-shape gave the open dim is declared: what fix checked it for
    assert _dims(onnx.load(out).graph.input[0]) == [2, 3, 4, 5]


def test_convert_reads_them_as_unknown_and_keeps_them(tmp_path):
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(_prelu(6, [-1, 3, 4, 5]), src)
    p = opshift("convert", src, "--opset", "17", "-o", out, "--verify")
    assert p.returncode == 0, p.stderr
    assert "slope 'slope' reshaped in place to [3, 1, 1]" in p.stdout
    assert _dims(onnx.load(out).graph.input[0]) == [-1, 3, 4, 5]


def test_a_negative_channel_dim_is_not_a_size():
    # read as a number, -1 != 3 would make the [3] slope last-axis (numpy) at PRelu-6 and
    # leave it as it is; unknown, the reading cannot be decided: refused
    m = _prelu(6, [1, -1, 4, 3])
    with pytest.raises(ConversionError, match="cannot decide whether slope 'slope'"):
        api.convert(m, 17)


def test_the_evaluator_takes_any_size_there():
    m = _prelu(9, [-1, 3, 4, 5], (3, 1, 1))
    x = np.linspace(-1, 1, 2 * 60, dtype=np.float32).reshape(2, 3, 4, 5)
    y = evaluate(m, {"x": x})["y"]
    slope = np.array([0.1, 0.2, 0.3], np.float32).reshape(3, 1, 1)
    np.testing.assert_array_equal(y, np.where(x < 0, x * slope, x))


def test_verify_says_when_a_guessed_size_is_what_failed(tmp_path):
    pool = make_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[900, 900])],
                      [helper.make_tensor_value_info("x", T.FLOAT, [-1, 3, -1, -1])],
                      [helper.make_tensor_value_info("y", T.FLOAT, None)], opset=13)
    src = tmp_path / "pool.onnx"
    onnx.save(pool, src)
    p = opshift("verify", src, src)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1
    assert "does not run on generated inputs at any of the sizes tried for its open dims; " \
        "at batch 2, spatial 64, other 16: " in p.stderr and "--input-shape" in p.stderr
    p = opshift("verify", src, src, "--input-shape", "x:1,3,900,900")
    assert p.returncode == 0, p.stderr
    with pytest.raises(OpshiftError, match="sizes tried for its open dims"):
        api.verify(pool, pool)
