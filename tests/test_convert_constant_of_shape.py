"""ConstantOfShape below opset 9 (conversion/steps/constant.py): its value broadcast to the
shape, as an Expand (8), a Tile of the value as [1] * rank (6, 7) or the tensor written out
(below 6, constant shapes only); every result checked on the evaluator against the
original, the refusals tested."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import make_model, onnxruntime_outputs
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import opshift
from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.verify import compare

X = np.random.default_rng(6).standard_normal((2, 3, 4)).astype(np.float32)


def _model(value: np.ndarray | None, shape: list[int] | None) -> onnx.ModelProto:
    """ConstantOfShape of ``value`` to ``shape`` (a constant) or, None, to x's shape."""
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    inits, nodes = [], []
    if shape is None:
        nodes.append(helper.make_node("Shape", ["x"], ["s"]))
    else:
        inits.append(numpy_helper.from_array(np.array(shape, np.int64), "s"))
    nodes.append(helper.make_node("ConstantOfShape", ["s"], ["y"], **attrs))
    out_type = T.FLOAT if value is None else helper.np_dtype_to_tensor_dtype(value.dtype)
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, list(X.shape))],
                      [helper.make_tensor_value_info("y", out_type, list(X.shape) if shape is
                                                     None else shape)],
                      opset=9, initializers=inits)


def _same(a: onnx.ModelProto, b: onnx.ModelProto) -> np.ndarray:
    ya, yb = evaluate(a, {"x": X})["y"], evaluate(b, {"x": X})["y"]
    c = compare(ya, yb)
    assert c.ok, c.reason
    return yb


VALUES = [None, np.array([1.5], np.float32), np.array([-7], np.int64), np.array([True]),
          np.array([2.25], np.float16)]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: "default" if v is None else v.dtype.name)
@pytest.mark.parametrize("shape", [None, [2, 0, 3], [4], []], ids=str)
@pytest.mark.parametrize("target", [8, 7, 6, 5, 1])
def test_constant_of_shape_below_9(value, shape, target):
    m = _model(value, shape)
    if target < 6 and shape is None:
        with pytest.raises(ConversionError, match=r"ConstantOfShape.*shape input is not a "
                                                  r"constant: below opset 6"):
            opshift.convert(m, target)
        return
    out = opshift.convert(m, target)
    onnx.checker.check_model(out, full_check=True)
    ops = [n.op_type for n in out.graph.node if n.op_type != "Shape"]
    want = {8: ["Expand"], 7: ["Tile"], 6: ["Tile"]}.get(target, [])
    if target in (6, 7) and shape == []:
        want = ["Identity"]  # a scalar: the value itself
    assert ops == want
    y = _same(m, out)
    assert y.dtype == (np.float32 if value is None else value.dtype)
    if target >= 7:  # a second opinion where onnxruntime runs the opset
        theirs = onnxruntime_outputs(out, {"x": X})
        if not isinstance(theirs, str):
            np.testing.assert_array_equal(theirs[0], y)


def test_tile_needs_the_length_of_the_shape():
    m = make_model([helper.make_node("ConstantOfShape", ["s"], ["y"])],
                   [helper.make_tensor_value_info("s", T.INT64, ["n"])],
                   [helper.make_tensor_value_info("y", T.FLOAT, ["a"])], opset=9)
    assert [n.op_type for n in opshift.convert(m, 8).graph.node] == ["Expand"]
    with pytest.raises(ConversionError, match=r"length of its shape input is unknown"):
        opshift.convert(m, 7)


def test_written_out_tensor_has_a_limit():
    m = _model(np.array([1.0], np.float32), [1 << 20, 1 << 9])  # 2 GiB
    with pytest.raises(ConversionError, match=r"would be 2048 MiB written out.*limit is 256"):
        opshift.convert(m, 5)
    assert [n.op_type for n in opshift.convert(m, 6).graph.node] == ["Tile"]


@pytest.mark.parametrize("value", [np.array([3], np.int64), np.array([0.5], np.float32)])
def test_value_inside_a_function_below_9(value):
    """Inside a function the value is a Constant node: float types only before 9."""
    fn = helper.make_function("local", "F", ["s"], ["y"], [
        helper.make_node("ConstantOfShape", ["s"], ["y"],
                         value=numpy_helper.from_array(value))],
        [helper.make_opsetid("", 9)])
    elem = helper.np_dtype_to_tensor_dtype(value.dtype)
    m = make_model([helper.make_node("F", ["s"], ["y"], domain="local")],
                   [helper.make_tensor_value_info("s", T.INT64, [2])],
                   [helper.make_tensor_value_info("y", elem, ["a", "b"])], opset=9)
    m.opset_import.append(helper.make_opsetid("local", 1))
    m.functions.append(fn)
    if value.dtype == np.int64:
        with pytest.raises(ConversionError, match=r"INT64.*Constant node.*float types only"):
            opshift.convert(m, 8)
        return
    out = opshift.convert(m, 8)
    assert [n.op_type for n in out.functions[0].node] == ["Constant", "Expand"]
    feeds = {"s": np.array([2, 3], np.int64)}
    y = evaluate(out, feeds)["y"]
    assert compare(evaluate(m, feeds)["y"], y).ok and y.shape == (2, 3)
