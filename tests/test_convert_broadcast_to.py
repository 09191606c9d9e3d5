"""Ops that broadcast a tensor to a shape, below their opset (conversion/steps/
broadcast_to.py): ConstantOfShape below 9 as an Expand (8), a Tile of the value as
[1] * rank (6, 7) or the tensor written out (below 6, constant shapes only); Expand below 8
as a Tile of X where its dims are 1 (6, 7). Every result checked on the evaluator against
the original (bits, signed zeros, NaN), onnxruntime a second opinion at 7 and 8; the
refusals tested."""

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


def _expand(x_shape: list, shape: list[int] | None, elem: int = T.FLOAT,
            out_shape: list | None = None) -> onnx.ModelProto:
    """Expand of x (``x_shape``) to the constant ``shape``, or (None) to the shape of a
    second input ``t`` of ``out_shape``."""
    inputs = [helper.make_tensor_value_info("x", elem, x_shape)]
    nodes, inits = [], []
    if shape is None:
        inputs.append(helper.make_tensor_value_info("t", T.FLOAT, out_shape))
        nodes.append(helper.make_node("Shape", ["t"], ["s"]))
    else:
        inits.append(numpy_helper.from_array(np.array(shape, np.int64), "s"))
    nodes.append(helper.make_node("Expand", ["x", "s"], ["y"]))
    return make_model(nodes, inputs, [helper.make_tensor_value_info("y", elem, out_shape)],
                      opset=13, initializers=inits)


def _values(shape: tuple, dtype) -> np.ndarray:
    rng = np.random.default_rng(9)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-50, 50, shape).astype(dtype)
    v = rng.standard_normal(shape).astype(dtype)
    flat = v.reshape(-1)
    flat[: min(3, flat.size)] = np.array([-0.0, np.nan, -np.inf], dtype)[: min(3, flat.size)]
    return v


EXPANDS = [  # x shape, constant shape (None: computed from t), output shape
    ([3, 1], [2, 3, 4], [2, 3, 4]),
    ([1, 4], [3, 1], [3, 4]),
    ([2, 1, 3], [1], [2, 1, 3]),
    ([2, 1], None, [2, 5]),
    ([4], None, [3, 2, 4]),
    ([1, 1], None, [1, 1]),
    ([2, 1], [2, 0], [2, 0]),
]


@pytest.mark.parametrize("elem", [T.FLOAT, T.FLOAT16, T.INT64, T.BOOL],
                         ids=lambda t: T.DataType.Name(t))
@pytest.mark.parametrize("case", EXPANDS, ids=str)
@pytest.mark.parametrize("target", [7, 6])
def test_expand_below_8_as_a_tile(case, elem, target):
    x_shape, shape, out_shape = case
    m = _expand(x_shape, shape, elem, out_shape)
    out = opshift.convert(m, target)
    onnx.checker.check_model(out, full_check=True)
    assert "Expand" not in [n.op_type for n in out.graph.node]
    feeds = {"x": _values(tuple(x_shape), helper.tensor_dtype_to_np_dtype(elem))}
    if shape is None:
        feeds["t"] = np.zeros(out_shape, np.float32)
    ya, yb = evaluate(m, feeds)["y"], evaluate(out, feeds)["y"]
    assert yb.shape == tuple(out_shape) and yb.dtype == ya.dtype
    c = compare(ya, yb)
    assert c.ok, c.reason
    if target == 7:
        theirs = onnxruntime_outputs(out, feeds)
        if not isinstance(theirs, str):
            assert compare(ya, theirs[0]).ok


@pytest.mark.parametrize("x_shape, shape, target, pattern", [
    ([2, 1], [4, 3], 7, r"dim 0 of X is 2, which the shape's 4 cannot broadcast"),
    (None, [2, 3], 7, r"the shape of X .'x'. is unknown"),
    ([3, 1], [2, 3, 4], 5, r"Tile-6 .* does not exist either"),
])
def test_expand_refusals(x_shape, shape, target, pattern):
    m = _expand(x_shape, shape, out_shape=None if shape is not None else [4, 3])
    before = m.SerializeToString()
    with pytest.raises(ConversionError, match=r"Expand does not exist at opset \d.*" + pattern):
        opshift.convert(m, target)
    assert m.SerializeToString() == before


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("target", [7, 6])
def test_expand_of_a_dim_of_unknown_size_reads_it_at_run_time(n, constant, target):
    """Whether X's symbolic dim is 1 (tiled) or the shape's (kept) is read from X's shape
    at run time: Equal(Shape(X), 1) masks the repeats."""
    m = _expand(["n", 1, 3], [4, 2, 1] if constant else None, out_shape=[4, 2, 3])
    out = opshift.convert(m, target)
    onnx.checker.check_model(out, full_check=True)
    assert "Equal" in [n.op_type for n in out.graph.node]
    feeds = {"x": _values((n, 1, 3), np.float32)}
    if not constant:
        feeds["t"] = np.zeros((4, 2, 3), np.float32)
    ya, yb = evaluate(m, feeds)["y"], evaluate(out, feeds)["y"]
    assert yb.shape == (4, 2, 3)
    c = compare(ya, yb)
    assert c.ok, c.reason
    np.testing.assert_array_equal(yb, np.broadcast_to(feeds["x"], (4, 2, 3)))
    if target == 7:
        theirs = onnxruntime_outputs(out, feeds)
        if not isinstance(theirs, str):
            assert compare(ya, theirs[0]).ok


def test_expand_with_a_symbolic_dim_the_shape_keeps():
    """A symbolic dim of X where the shape asks for 1 keeps X's dim: it is not tiled."""
    m = _expand(["n", 1], [1, 3], out_shape=["n", 3])
    out = opshift.convert(m, 7)
    feeds = {"x": _values((5, 1), np.float32)}
    ya, yb = evaluate(m, feeds)["y"], evaluate(out, feeds)["y"]
    assert yb.shape == (5, 3) and compare(ya, yb).ok
