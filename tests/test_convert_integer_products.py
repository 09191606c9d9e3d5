"""MatMulInteger and ConvInteger below 10 (from 7): the zero-point-free integers multiplied as
int32 (MatMul from 9) or as float32 or float64 cast to int32 (below 9, and Conv: float32 while
its sums are exact there), with zero points per
tensor, per row of A, per column of B and per output channel of W; bit for bit against the
ops on the evaluator, the extremes of each type included, and on onnxruntime where it runs;
float64 sums too long to stay within int32, and other types, refused."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_conversion_exact, converted, make_model, onnxruntime_outputs, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.errors import ConversionError
from opshift.passes.convert import convert_proto

RNG = np.random.default_rng(0)


def _ints(dtype, shape) -> np.ndarray:
    info = np.iinfo(dtype)
    v = RNG.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    v.flat[:2] = (info.min, info.max)
    return v


def _matmul(at, bt, zero_points: str | None, k: int = 5):
    ins, inits = ["a", "b"], []
    if zero_points == "tensor":
        inits = [numpy_helper.from_array(_ints(at, ()), "za"),
                 numpy_helper.from_array(_ints(bt, ()), "zb")]
    elif zero_points == "row and column":
        inits = [numpy_helper.from_array(_ints(at, (3,)), "za"),
                 numpy_helper.from_array(_ints(bt, (4,)), "zb")]
    ins += [i.name for i in inits]
    ea, eb = (helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in (at, bt))
    return make_model([helper.make_node("MatMulInteger", ins, ["y"])],
                      [vi("a", ea, [3, k]), vi("b", eb, [k, 4])], [vi("y", T.INT32, [3, 4])],
                      opset=10, initializers=inits)


@pytest.mark.parametrize("target", [9, 8, 7])
@pytest.mark.parametrize("zero_points", [None, "tensor", "row and column"])
@pytest.mark.parametrize("at,bt", [(np.uint8, np.int8), (np.int8, np.int8),
                                   (np.uint8, np.uint8), (np.int8, np.uint8)])
def test_matmul_integer_below_10(at, bt, zero_points, target):
    m = _matmul(at, bt, zero_points)
    c = converted(m, target)
    ops = [n.op_type for n in c.graph.node]
    assert "MatMulInteger" not in ops and "MatMul" in ops
    a, b = _ints(at, (3, 5)), _ints(bt, (5, 4))
    meaning = None
    if zero_points is None:  # the meaning: the product of the integers
        meaning = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    assert_conversion_exact(m, c, {"a": a, "b": b}, meaning, output="y")


@pytest.mark.parametrize("target", [9, 7])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("channels", [3, 40])  # sums of 27 terms in float32, 360 in float64
def test_conv_integer_below_10(per_channel, target, channels):
    w = _ints(np.int8, (4, channels, 3, 3))
    zw = _ints(np.int8, (4,) if per_channel else ())
    m = make_model([helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"],
                                     pads=[1, 1, 1, 1], strides=[2, 1])],
                   [vi("x", T.UINT8, [1, channels, 6, 6])], [vi("y", T.INT32, [1, 4, 3, 6])],
                   opset=10, initializers=[numpy_helper.from_array(w, "w"),
                                           numpy_helper.from_array(np.array(128, np.uint8),
                                                                   "zx"),
                                           numpy_helper.from_array(zw, "zw")])
    c = converted(m, target)
    assert [n.op_type for n in c.graph.node].count("Conv") == 1
    wide = next(a.i for n in c.graph.node if n.op_type == "Cast" for a in n.attribute)
    assert wide == (T.FLOAT if channels == 3 else T.DOUBLE)
    assert_conversion_exact(m, c, {"x": _ints(np.uint8, (1, channels, 6, 6))}, output="y")


def test_int32_matmul_runs_on_onnxruntime():
    """A second opinion that MatMul-9 on int32 is what the converted model needs."""
    m = _matmul(np.uint8, np.int8, "tensor")
    c = converted(m, 9)
    got = onnxruntime_outputs(c, {"a": _ints(np.uint8, (3, 5)), "b": _ints(np.int8, (5, 4))})
    if isinstance(got, str):
        pytest.skip(got)
    assert got[0].dtype == np.int32


def test_long_sums_below_9_and_other_types_are_refused():
    with pytest.raises(ConversionError, match=r"its sums have 40000 terms: it is summed in "
                                              r"floats"):
        convert_proto(_matmul(np.uint8, np.int8, None, k=40000), 8)
    convert_proto(_matmul(np.uint8, np.int8, None, k=40000), 9)  # (int32 wraps as it does)
    m = _matmul(np.uint8, np.int8, None)
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "k"
    m.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "k"  # (B's gives it else)
    with pytest.raises(ConversionError, match=r"the length of its sums is unknown"):
        convert_proto(m, 7)
    with pytest.raises(ConversionError, match=r"below opset 7"):
        convert_proto(_matmul(np.uint8, np.int8, None), 6)
