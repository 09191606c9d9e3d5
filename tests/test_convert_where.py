"""Where below 9 (from 7): two constant values of one element as a Gather of them at the
condition (every type, NaN and -0.0 included), integers as x * c + y * (1 - c) (8- and
16-bit through int32, extremes included), bool as (c and x) or (not c and y), anything else
as a Gather from x and y flattened and joined (broadcasting over static, symbolic and
run-time-1 dims); unknown ranks and targets below 7 refused. Bit for bit against Where-16 on
the evaluator, with numpy's where as the meaning, and on onnxruntime where it runs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_conversion_exact, converted, make_model, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError

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


SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -3.4e38])


def _values(rng, shape, dtype) -> np.ndarray:
    """Random values of ``shape`` with NaN, infinities, signed zeros and extremes first."""
    v = rng.standard_normal(shape).astype(dtype)
    flat = v.reshape(-1)
    with np.errstate(over="ignore", under="ignore"):
        flat[:min(len(SPECIAL), flat.size)] = SPECIAL[:flat.size].astype(dtype)
    return v


#: (declared shapes of c, x, y and the output; the shapes fed, when the declared are not)
BROADCASTS = [
    ((2, 4), (2, 4), (4,), (2, 4), None),
    ((2, 1, 3), (1, 4, 1), (), (2, 4, 3), None),
    (("a", "b"), ("c", "d"), (), ("a", "e"), ((2, 5), (2, 5), ())),
    (("a", 1), (1, "b"), ("c", "b"), ("a", "b"), ((3, 1), (1, 4), (3, 4))),
    (("a", "b"), ("a", "b"), ("a", "b"), ("a", "b"), ((3, 4), (1, 4), (3, 1))),
    (("a", 0), ("a", 0), (), ("a", 0), ((2, 0), (2, 0), ())),
    ((), (), (), (), None),
    ((1,), ("n",), (), (None,), ((1,), (5,), ())),
]


@pytest.mark.parametrize("target", [7, 8])
@pytest.mark.parametrize("case", range(len(BROADCASTS)))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64], ids=lambda t: t.__name__)
def test_computed_where_below_9_is_a_gather_of_both(dtype, case, target):
    """Computed values of any other type: a Gather from x and y, flattened and joined, at
    the flat position each output element reads; dims that may be 1 are read at run time,
    and output sizes no shape gives from the Shape of a broadcast."""
    cs, xs, ys, os, fed = BROADCASTS[case]
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([helper.make_node("Where", ["c", "x", "y"], ["out"])],
                   [vi("c", T.BOOL, list(cs)), vi("x", elem, list(xs)), vi("y", elem, list(ys))],
                   [vi("out", elem, list(os))], opset=16)
    c = _converted(m, target)
    assert {"Concat", "Gather"} <= {n.op_type for n in c.graph.node}
    rng = np.random.default_rng(case)
    fc, fx, fy = fed or (cs, xs, ys)
    feeds = {"c": rng.random(fc) < 0.5, "x": _values(rng, fx, dtype),
             "y": _values(rng, fy, dtype)}
    _same(m, c, feeds, np.where(feeds["c"], feeds["x"], feeds["y"]))


def test_where_of_a_constant_below_9():
    """One constant value (a fill: -inf where c is false), the other computed."""
    y = np.float32(-np.inf)
    m = _where(T.FLOAT, {"y": y}, y_shape=())
    c = _converted(m, 7)
    x = _values(np.random.default_rng(1), (2, 4), np.float32)
    _same(m, c, {"c": COND, "x": x}, np.where(COND, x, y))


def test_where_below_7_and_of_unknown_rank_are_refused():
    with pytest.raises(ConversionError, match=r"below opset 7 the ops it is written with"):
        convert_proto(_where(T.INT32), 6)
    m = _where(T.FLOAT)
    m.graph.input[1].type.tensor_type.ClearField("shape")
    m.graph.output[0].type.tensor_type.ClearField("shape")
    with pytest.raises(ConversionError, match=r"the rank of 'x' is unknown"):
        convert_proto(m, 8)


@pytest.mark.parametrize("dims", [(2, 4), ("a", "b")])
def test_the_change_says_when_positions_are_counted_by_a_loop(dims):
    """Positions along an axis of a size known at run time only are a Loop's trips below 9:
    the change says so, and that --input-shape makes them constants."""
    m = make_model([helper.make_node("Where", ["c", "x", "y"], ["out"])],
                   [vi("c", T.BOOL, list(dims)), vi("x", T.FLOAT, list(dims)),
                    vi("y", T.FLOAT, list(dims))], [vi("out", T.FLOAT, list(dims))], opset=16)
    result = convert_proto(m, 7)
    (change,) = [c for c in result.changes if "Gather of x and y" in c.what]
    counted = "counted by a Loop" in change.what
    assert counted == (dims == ("a", "b")), change.what
    assert ("Loop" in {n.op_type for n in m.graph.node}) == counted
