"""Ops that take some element types only from a later version (conversion/steps/late_types.py):
float Equal below 11, Pow's exponent type below 12, integer Max/Min below 12, integer
Less/Greater below 9, integer TopK below 11; bit for bit on the evaluator."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import make_model, vi
from convert_helpers import I64, F, convert_other_ops, one, roundtrip
from onnx import TensorProto, helper, numpy_helper

from opshift.errors import ConversionError
from opshift.evaluator import evaluate


@pytest.mark.parametrize("op", ["Equal", "GreaterOrEqual", "LessOrEqual"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("target", [10, 9, 8, 7, 6])
@pytest.mark.parametrize("const_b", [False, True])
def test_float_equal_below_11(op, dtype, target, const_b):
    """Equal takes floats from 11: below, Not(Less or Greater) and neither a NaN (IsNaN from
    9, below ``x < inf or x > -inf``); so GreaterOrEqual/LessOrEqual's bodies go there too.
    +0 equals -0, infinities themselves, NaN nothing; a constant B without NaN needs no
    test; below 7 refused."""
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    a = np.array([[0, -0.0, np.inf, np.nan, -np.inf], [-0.0, 2, -np.inf, 3, np.nan]], dtype)
    b = np.array([-0.0, np.inf if const_b else np.nan, np.inf, 3, -np.inf], dtype)
    inits = [numpy_helper.from_array(b, "b")] if const_b else []
    m = make_model([one(op, ["a", "b"], ["y"])],
                   [vi("a", t, [2, 5])] + ([] if const_b else [vi("b", t, [5])]),
                   [vi("y", TensorProto.BOOL, [2, 5])], opset=13, initializers=inits)
    feeds = {"a": a} if const_b else {"a": a, "b": b}
    if target < 7:
        with pytest.raises(ConversionError, match=r"below opset 7 Less and Greater"):
            convert_other_ops(m, 13, target)
        return
    roundtrip(m, 13, target, feeds)
    assert op not in [n.op_type for n in m.graph.node]
    want = {"Equal": np.equal, "GreaterOrEqual": np.greater_equal,
            "LessOrEqual": np.less_equal}[op](a, b)
    np.testing.assert_array_equal(evaluate(m, feeds)["y"], want)
    if op == "Equal":  # one NaN test per input that may hold one
        ops = [n.op_type for n in m.graph.node]
        tests = 1 if const_b else 2
        assert (ops.count("IsNaN"), ops.count("Less")) == \
            ((tests, 1) if target >= 9 else (0, 1 + tests))


@pytest.mark.parametrize("exponent, etype, ok", [
    ([2], np.int64, True), ([-3, 0, 1], np.int32, True), ([0.5], np.float64, True),
    ([2**25 + 1], np.int64, False), ([0.1], np.float64, False)])
@pytest.mark.parametrize("target", [11, 7])
def test_pow_exponent_of_another_type_below_12(exponent, etype, ok, target):
    """Pow-12 takes an exponent of another type; before, X's: a constant exponent exact in
    X's type is written in it (the same power), else refused."""
    e = numpy_helper.from_array(np.array(exponent, etype), "e")
    shape = [len(exponent)]
    m = make_model([one("Pow", ["x", "e"], ["y"])], [vi("x", F, shape)], [vi("y", F, shape)],
                   opset=13, initializers=[e])
    if not ok:
        with pytest.raises(ConversionError, match=r"Pow-12 -> Pow-7.*not exact in FLOAT"):
            convert_other_ops(m, 13, target)
        return
    roundtrip(m, 13, target, {"x": np.array([-1.5, 0.0, np.inf][:len(exponent)], np.float32)})


def test_pow_computed_integer_exponent_is_refused_below_12():
    m = make_model([one("Pow", ["x", "e"], ["y"])], [vi("x", F, [2]), vi("e", I64, [2])],
                   [vi("y", F, [2])], opset=13)
    with pytest.raises(ConversionError, match=r"exponent 'e' is INT64 and computed"):
        convert_other_ops(m, 13, 11)


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64,
                                   np.uint64])
@pytest.mark.parametrize("target", [11, 9, 8, 7, 6])
def test_integer_max_min_below_12(op, dtype, target):
    """Max/Min take integers from 12: below, Where(Less) input by input (from 9), or float64
    and back for 8-, 16- and 32-bit types (6..8); 64-bit ones picked by a 64-bit Less at 7
    and 8, refused at 6. The full range of each type is fed, with broadcasting of three
    inputs."""
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([one(op, ["a", "b", "c"], ["y"])],
                   [vi("a", t, [2, 3]), vi("b", t, [3]), vi("c", t, [2, 1])],
                   [vi("y", t, [2, 3])], opset=13)
    info, rng = np.iinfo(dtype), np.random.default_rng(10)
    feeds = {k: rng.integers(info.min, info.max, s, dtype=dtype, endpoint=True)
             for k, s in (("a", (2, 3)), ("b", (3,)), ("c", (2, 1)))}
    feeds["a"][0, :2] = [info.min, info.max]
    if target < 7 and np.dtype(dtype).itemsize == 8:
        with pytest.raises(ConversionError, match=r"U?INT64 inputs.*rounds values past 2\*\*53"):
            convert_other_ops(m, 13, target)
        return
    roundtrip(m, 13, target, feeds)
    assert op not in [n.op_type for n in m.graph.node] or target < 9


@pytest.mark.parametrize("target", [8, 6])
def test_int64_max_of_positions_and_a_small_constant_below_9(target):
    """64-bit Max goes through float64 at 6..8 when its inputs are positions or sizes an op
    computes (here Shape's) and constants within 2**53; one past 2**53 is refused at 6 (at
    7 and 8 a 64-bit Less picks)."""
    for bound, ok in ((2**53, True), (2**53 + 1, target > 6)):
        m = make_model([one("Shape", ["x"], ["s"]), one("Max", ["s", "lim"], ["y"])],
                       [vi("x", F, ["n", 3])], [vi("y", I64, [2])], opset=13,
                       initializers=[numpy_helper.from_array(np.array([2, bound], np.int64),
                                                             "lim")])
        if not ok:
            with pytest.raises(ConversionError, match=r"INT64 inputs.*past 2\*\*53"):
                convert_other_ops(m, 13, target)
            continue
        feeds = {"x": np.zeros((5, 3), np.float32)}
        roundtrip(m, 13, target, feeds)
        assert evaluate(m, feeds)["y"].tolist() == [5, bound]


@pytest.mark.parametrize("op", ["Less", "Greater"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.uint32, np.int64,
                                   np.uint64])
@pytest.mark.parametrize("target", [8, 7])
def test_integer_less_greater_below_9(op, dtype, target):
    """Less/Greater take integers from 9: below (from 7), 32-bit and narrower as float64;
    64-bit as (high, low) halves of their floor division by 2**32, so that neighbours past
    2**53 (which a double rounds together) still compare, negatives and extremes too."""
    info = np.iinfo(dtype)
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([one(op, ["a", "b"], ["y"])], [vi("a", t, [2, 6]), vi("b", t, [6])],
                   [vi("y", TensorProto.BOOL, [2, 6])], opset=13)
    big = 2**53 if info.bits == 64 else info.max // 2
    a = np.array([[info.min, info.max, 0, big + 1, big, 5],
                  [info.max - 1, info.min + 1, 1, big, big + 1, 5]], dtype)
    b = np.array([info.min + 1, info.max - 1, 0, big, big + 1, 5], dtype)
    if info.min < 0:
        a[1, 2], b[2] = -1, -(2**40) if info.bits == 64 else -2
    roundtrip(m, 13, target, {"a": a, "b": b})
    want = np.less(a, b) if op == "Less" else np.greater(a, b)
    np.testing.assert_array_equal(evaluate(m, {"a": a, "b": b})["y"], want)
    assert (op not in [n.op_type for n in m.graph.node][-1:]) == (info.bits == 64)


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int16, np.uint32])
@pytest.mark.parametrize("target", [10, 9, 6, 5])
def test_integer_topk_below_11(largest, dtype, target):
    """TopK takes integers (and largest=0) from 11: below, X ranked as float64 (exact for
    32-bit and narrower), negated for the k smallest; ties keep the lower index first.
    Refused below 6 (Cast-1's type is a string)."""
    info = np.iinfo(dtype)
    x = np.array([[3, info.min, info.max, 3, 0, info.max], [1, 1, info.min, 5, 5, 2]], dtype)
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    k = numpy_helper.from_array(np.array([4], np.int64), "k")
    m = make_model([one("TopK", ["x", "k"], ["v", "i"], largest=largest)],
                   [vi("x", t, [2, 6])], [vi("v", t, [2, 4]), vi("i", I64, [2, 4])],
                   opset=11, initializers=[k])
    if target < 6:
        with pytest.raises(ConversionError, match=r"below opset 6 Cast names its type"):
            convert_other_ops(m, 11, target)
        return
    roundtrip(m, 11, target, {"x": x})
    order = np.argsort(-x.astype(np.float64) if largest else x, axis=1, kind="stable")[:, :4]
    got = evaluate(m, {"x": x})
    np.testing.assert_array_equal(got["i"], order)
    np.testing.assert_array_equal(got["v"], np.take_along_axis(x, order, 1))


def test_topk_of_int64_positions_below_11_and_other_int64_refused():
    """64-bit X goes through float64 only when it holds positions (here TopK's indices,
    sorted again: PyTorch's sort of a sort); other int64 X is refused."""
    k = numpy_helper.from_array(np.array([3], np.int64), "k")
    m = make_model([one("TopK", ["x", "k"], ["v", "i"], largest=0),
                    helper.make_node("TopK", ["i", "k"], ["v2", "i2"], largest=0, name="again")],
                   [vi("x", F, [3])], [vi("v2", I64, [3]), vi("i2", I64, [3])], opset=11,
                   initializers=[k])
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    with pytest.raises(ConversionError, match=r"largest=0 does not exist at TopK-10"):
        convert_other_ops(m2, 11, 10)  # (float X, k smallest: refused)
    m.graph.node[0].attribute[0].i = 1  # float X, k largest: no change
    roundtrip(m, 11, 10, {"x": np.array([0.5, -2.0, 7.0], np.float32)})
    assert [n.op_type for n in m.graph.node].count("Neg") == 2
    m = make_model([one("TopK", ["x", "k"], ["v", "i"], largest=0)], [vi("x", I64, [3])],
                   [vi("v", I64, [3]), vi("i", I64, [3])], opset=11, initializers=[k])
    with pytest.raises(ConversionError, match=r"INT64 X: TopK takes integers from 11"):
        convert_other_ops(m, 11, 10)
