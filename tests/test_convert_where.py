"""Where below 9 (from 7): two constant values of one element as a Gather of them at the
condition (every type, NaN and -0.0 included), integers as x * c + y * (1 - c) (8- and
16-bit through int32, extremes included), bool as (c and x) or (not c and y); computed
floats and targets below 7 refused. Bit for bit against Where-16 on the evaluator, with
numpy's where as the meaning, and on onnxruntime where it runs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_conversion_exact, converted, make_model, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.errors import ConversionError
from opshift.passes.convert import convert_proto

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
COND = np.array([[True, False, True, False], [False, True, True, False]])


def _where(elem: int, consts: dict[str, np.ndarray] | None = None,
           x_shape=(2, 4), y_shape=(4,)) -> onnx.ModelProto:
    consts = consts or {}
    inputs = [vi("c", T.BOOL, [2, 4])] + [vi(n, elem, list(s)) for n, s in
                                         (("x", x_shape), ("y", y_shape)) if n not in consts]
    return make_model([helper.make_node("Where", ["c", "x", "y"], ["out"])], inputs,
                      [vi("out", elem, [2, 4])], opset=16,
                      initializers=[numpy_helper.from_array(v, n) for n, v in consts.items()])


def _converted(m: onnx.ModelProto, target: int) -> onnx.ModelProto:
    c = converted(m, target)
    assert "Where" not in {n.op_type for n in c.graph.node}
    return c


def _same(m, c, feeds, meaning):
    assert_conversion_exact(m, c, feeds, meaning, output="out")


@pytest.mark.parametrize("target", [7, 8])
@pytest.mark.parametrize("dtype", INTS, ids=lambda t: t.__name__)
def test_integer_where_below_9(dtype, target):
    info = np.iinfo(dtype)
    x = np.array([[info.max, info.min, 1, 0], [info.min, info.max, 0, 1]], dtype)
    y = np.array([info.min, info.max, info.max, info.min], dtype)
    m = _where(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    c = _converted(m, target)
    assert {"Mul", "Add"} <= {n.op_type for n in c.graph.node}
    feeds = {"c": COND, "x": x, "y": y}
    _same(m, c, feeds, np.where(COND, x, y))


def test_bool_where_below_9():
    m = _where(T.BOOL)
    c = _converted(m, 7)
    x = np.array([[True, True, False, False], [True, False, True, False]])
    y = np.array([True, False, True, False])
    _same(m, c, {"c": COND, "x": x, "y": y}, np.where(COND, x, y))


@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (2, 1), (2, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int64, np.bool_])
def test_where_of_two_constants_below_9_is_a_gather(dtype, shape):
    """A mask filled with one of two numbers (-inf and -0.0: the bits are copied), each
    held in a constant that broadcasts into the condition's shape."""
    if dtype == np.bool_:
        x, y = np.ones(shape, dtype), np.zeros(shape, dtype)
    elif np.dtype(dtype).kind == "f":
        x, y = np.full(shape, -np.inf, dtype), np.full(shape, -0.0, dtype)
    else:
        x, y = np.full(shape, np.iinfo(dtype).min, dtype), np.full(shape, 7, dtype)
    m = _where(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), {"x": x, "y": y})
    c = _converted(m, 7)
    assert [n.op_type for n in c.graph.node] == ["Cast", "Gather"]
    _same(m, c, {"c": COND}, np.where(COND, x, y))


def test_computed_float_where_and_where_below_7_are_refused():
    with pytest.raises(ConversionError, match=r"its values are FLOAT, not two constants of "
                                              r"one value each.*: below 9 no op picks"):
        convert_proto(_where(T.FLOAT), 8)
    # one computed value is enough to refuse floats
    with pytest.raises(ConversionError, match=r"FLOAT, not two constants"):
        convert_proto(_where(T.FLOAT, {"y": np.zeros(4, np.float32)}), 7)
    with pytest.raises(ConversionError, match=r"below opset 7 the ops it is written with"):
        convert_proto(_where(T.INT32), 6)
    # constants of more than one value, or that would widen the condition's shape
    two = np.array([[0, -0.0, 0, 0], [0, 0, 0, 0]], np.float32)
    wide = np.zeros((3, 2, 4), np.float32)
    for y in (two, wide):
        m = _where(T.FLOAT, {"x": np.float32(1), "y": y}, y_shape=y.shape)
        m.graph.output[0].type.tensor_type.shape.Clear()
        with pytest.raises(ConversionError, match=r"FLOAT, not two constants"):
            convert_proto(m, 7)
