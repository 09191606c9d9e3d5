"""Integer Clip (Clip-12/13, e.g. a dynamo export's ``clamp`` of an int64 tensor) below 12,
where Clip takes floats only: written as picks by Less, ``Where(x < min, min, x)`` then
``Where(max < y, max, y)``, at 9 and 11; at 7 and 8 by the integer comparison and pick written
there (64-bit values past 2**53 compared by 32-bit halves); below 7 refused. Bit for bit
against the original on the evaluator (numpy's clip as the meaning) and on onnxruntime, which
runs the original too."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import (
    assert_conversion_exact,
    assert_exact,
    converted,
    make_model,
    onnxruntime_outputs,
    vi,
)
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.errors import ConversionError

DTYPES = [np.int64, np.int32]


def _elem(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _x(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    base = [info.min, info.min + 1, -7, -3, -1, 0, 1, 3, 5, 9, info.max - 1, info.max]
    if dtype == np.int64:  # past 2**53: not exact in a double
        base += [2**53 + 1, -(2**53) - 1, 2**62 + 3, -(2**62) - 3]
    return np.array(base, dtype)


def _clip_model(dtype, lo, hi, *, computed: bool, n="n") -> onnx.ModelProto:
    """Clip-13 of an ``n``-long vector x by ``lo``/``hi`` (None: omitted): initializers, or
    graph inputs (``computed``)."""
    elem = _elem(dtype)
    inputs, inits, names = [vi("x", elem, [n])], [], ["x"]
    for name, v in (("lo", lo), ("hi", hi)):
        if v is None:
            names.append("")
        elif computed:
            inputs.append(vi(name, elem, list(np.shape(v))))
            names.append(name)
        else:
            inits.append(numpy_helper.from_array(np.asarray(v, dtype), name))
            names.append(name)
    while names[-1] == "":
        names.pop()
    return make_model([helper.make_node("Clip", names, ["y"])], inputs, [vi("y", elem, [n])],
                      opset=13, initializers=inits)


def _feeds(dtype, lo, hi, computed: bool) -> dict[str, np.ndarray]:
    feeds = {"x": _x(dtype)}
    if computed:
        feeds.update({k: np.asarray(v, dtype) for k, v in (("lo", lo), ("hi", hi))
                      if v is not None})
    return feeds


def _meaning(dtype, lo, hi) -> np.ndarray:
    y = _x(dtype)
    if lo is not None:
        y = np.maximum(y, np.asarray(lo, dtype).reshape(()))
    if hi is not None:
        y = np.minimum(y, np.asarray(hi, dtype).reshape(()))
    return y.astype(dtype)


def _check(dtype, lo, hi, computed: bool, target: int) -> onnx.ModelProto:
    m = _clip_model(dtype, lo, hi, computed=computed)
    c = converted(m, target)
    assert "Clip" not in {n.op_type for n in c.graph.node}
    feeds = _feeds(dtype, lo, hi, computed)
    meaning = _meaning(dtype, lo, hi)
    assert_conversion_exact(m, c, feeds, meaning)
    theirs = onnxruntime_outputs(m, feeds)  # the original on onnxruntime, where it runs it
    if not isinstance(theirs, str):
        assert_exact(meaning, theirs[0], "onnxruntime on the original")
    return c


BIG = 2**62 + 1  # (int64 only)
BOUNDS = [(-3, 5), (5, 5), (9, -3), (None, 5), (-3, None), (None, None)]


@pytest.mark.parametrize("computed", [False, True], ids=["constant", "computed"])
@pytest.mark.parametrize("bounds", BOUNDS, ids=lambda b: f"{b[0]}_{b[1]}")
@pytest.mark.parametrize("target", [11, 9, 8, 7])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
def test_integer_clip_below_12(dtype, target, bounds, computed):
    lo, hi = bounds
    c = _check(dtype, lo, hi, computed, target)
    ops = {n.op_type for n in c.graph.node}
    if target >= 9 and (lo, hi) != (None, None):
        assert {"Less", "Where"} <= ops


@pytest.mark.parametrize("computed", [False, True], ids=["constant", "computed"])
@pytest.mark.parametrize("target", [11, 9, 8, 7])
def test_int64_clip_bounds_past_2_53(target, computed):
    """Bounds a double does not hold, around values a double does not hold either: at 7 and
    8 the comparison by 32-bit halves."""
    _check(np.int64, -(2**53) - 1, BIG, computed, target)
    _check(np.int64, 2**53 + 1, 2**53 + 1, computed, target)
    _check(np.int64, BIG + 4, BIG, computed, target)  # min > max: every output is max


@pytest.mark.parametrize("target", [11, 9, 7])
def test_one_element_bound_of_rank_1_is_read_whole(target):
    """A bound of shape [1] (Clip reads it as its one value) does not widen a scalar x."""
    m = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                   [vi("x", T.INT64, []), vi("hi", T.INT64, [1])], [vi("y", T.INT64, [])],
                   opset=13, initializers=[numpy_helper.from_array(np.array([-2], np.int64),
                                                                   "lo")])
    c = converted(m, target)
    for x in (-9, 0, 9):
        feeds = {"x": np.array(x, np.int64), "hi": np.array([4], np.int64)}
        assert_conversion_exact(m, c, feeds, np.array(min(max(x, -2), 4), np.int64))


def test_dynamo_clamp_of_a_size():
    """A dynamo export's ``clamp`` of an int64 value computed from a shape, by bounds that
    are Constant nodes, at opset 11."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Constant", [], ["lo"], value=numpy_helper.from_array(
                 np.array(2, np.int64))),
             helper.make_node("Constant", [], ["hi"], value=numpy_helper.from_array(
                 np.array(6, np.int64))),
             helper.make_node("Clip", ["s", "lo", "hi"], ["y"])]
    m = make_model(nodes, [vi("x", T.FLOAT, ["a", "b", "c"])], [vi("y", T.INT64, [3])],
                   opset=18)
    c = converted(m, 11)
    x = np.zeros((1, 4, 9), np.float32)
    assert_conversion_exact(m, c, {"x": x}, np.array([2, 4, 6], np.int64))


@pytest.mark.parametrize("target", [6, 5, 1])
def test_integer_clip_below_7_is_refused(target):
    m = _clip_model(np.int32, -3, 5, computed=False)
    with pytest.raises(ConversionError, match="below opset 7 Less broadcasts by attribute"):
        converted(m, target)


def test_float_clip_is_left_to_the_float_steps():
    m = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                   [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])], opset=13,
                   initializers=[numpy_helper.from_array(np.array(-1, np.float32), "lo"),
                                 numpy_helper.from_array(np.array(1, np.float32), "hi")])
    c = converted(m, 11)
    assert [n.op_type for n in c.graph.node] == ["Clip"]
