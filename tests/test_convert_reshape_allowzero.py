"""Reshape-14 allowzero=1 of a computed shape, below 14 (a dynamo export's ``view``): written as
a Reshape to the shape with its 0s made safe, expanded to the shape with its 0s put back. A
constant shape converts where it holds no 0 (refused where it does); a computed one holding
-1 drops allowzero."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import attrs, make_model, onnxruntime_outputs, vi
from convert_helpers import X234, F, convert_other_ops, node, one, roundtrip
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import opshift
from opshift.errors import ConversionError
from opshift.evaluator import evaluate


def _model() -> onnx.ModelProto:
    return make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="view",
                                        allowzero=1)],
                      [vi("x", T.FLOAT, ["a", "b", "c"]), vi("s", T.INT64, [3])],
                      [vi("y", T.FLOAT, ["p", "q", "r"])], opset=14)


#: (X's shape, the shape): no 0 (a -1 among them), one 0, two and three 0s (X empty)
CASES = [((2, 3, 4), (4, 3, 2)), ((2, 3, 4), (-1, 4, 2)), ((0, 3, 4), (0, 5, 2)),
         ((0, 3, 4), (0, 0, 7)), ((2, 0, 4), (3, 0, 0)), ((0, 0, 0), (0, 0, 0)),
         ((1, 1, 1), (1, 1, 1))]


@pytest.mark.parametrize("target", [13, 11, 9])
def test_computed_shape_with_zeros_is_exact(target):
    m = _model()
    c = opshift.convert(m, target)
    onnx.checker.check_model(c, full_check=True)
    assert "allowzero" not in str(c.graph.node)
    rng = np.random.default_rng(target)
    for xs, s in CASES:
        feeds = {"x": rng.standard_normal(xs).astype(np.float32), "s": np.array(s, np.int64)}
        want = opshift.evaluate(m, feeds)["y"]
        got = opshift.evaluate(c, feeds)["y"]
        assert got.shape == want.shape == tuple(
            d if d != -1 else feeds["x"].size // 8 for d in s)
        np.testing.assert_array_equal(got, want)
        theirs = onnxruntime_outputs(c, feeds)
        if isinstance(theirs, str):
            pytest.skip(theirs)
        assert theirs[0].shape == want.shape
        np.testing.assert_array_equal(theirs[0], want)


def test_below_9_still_refused():
    with pytest.raises(ConversionError, match="allowzero=1"):
        opshift.convert(_model(), 8)


def test_reshape_allowzero():
    shape = numpy_helper.from_array(np.array([4, 6], np.int64), "shape")
    m = make_model([one("Reshape", ["x", "shape"], ["y"], allowzero=1)],
                   [vi("x", F, [2, 3, 4])], [vi("y", F, [4, 6])], opset=14,
                   initializers=[shape])
    roundtrip(m, 14, 13, {"x": X234})
    shape = numpy_helper.from_array(np.array([0, 24], np.int64), "shape")
    m = make_model([one("Reshape", ["x", "shape"], ["y"], allowzero=1)],
                   [vi("x", F, [0, 3])], [vi("y", F, None)], opset=14, initializers=[shape])
    with pytest.raises(ConversionError, match="allowzero=1"):
        convert_other_ops(m, 14, 13)


@pytest.mark.parametrize("target", [13, 6, 5])
@pytest.mark.parametrize("minus_one", [True, False])
def test_reshape_allowzero_with_a_computed_shape_holding_minus_one(minus_one, target):
    """A computed shape [batch, -1, 4] (an exporter's): allowzero=1 forbids a 0 beside the
    -1, so wherever the original is defined the shape holds no 0, and allowzero is dropped;
    [batch, 2, 4] (one computed element) reads the batch's 0 as -1, which infers 0 for an
    empty X, as allowzero=1 gives (compared with zeros of the shape's length: below 7 no op
    broadcasts a scalar; below 6 no Sub takes integers, and the computed shape is refused)."""
    rest = numpy_helper.from_array(np.array([-1, 4] if minus_one else [2, 4], np.int64),
                                   "rest")
    m = make_model([one("Shape", ["x"], ["b"], end=1),
                    helper.make_node("Concat", ["b", "rest"], ["shape"], name="cat", axis=0),
                    one("Reshape", ["x", "shape"], ["y"], allowzero=1)],
                   [vi("x", F, ["n", 2, 4])], [vi("y", F, ["n", 2, 4])], opset=15,
                   initializers=[rest])
    if target == 5 and not minus_one:
        with pytest.raises(ConversionError, match=r"shape \(allowzero=1\).*not a constant"):
            convert_other_ops(m, 15, target)
        return
    for n in (1, 3) if minus_one else (0, 1, 3):  # (0 beside -1: the original fails)
        c = onnx.ModelProto()
        c.CopyFrom(m)
        roundtrip(c, 15, target, {"x": np.arange(n * 8, dtype=np.float32).reshape(n, 2, 4)})
        assert attrs(node(c, "Reshape")) == {}
        assert ("Equal" in [x.op_type for x in c.graph.node]) != minus_one


def test_reshape_allowzero_with_two_computed_elements_is_exact():
    """[batch, rows, 4]: two elements may be 0, and Reshape-13 infers one dim at most: the
    Reshape goes to the shape with its first 0 as -1, then expands to the shape (see
    tests/test_convert_reshape_allowzero.py); below 9 (no Where) still refused."""
    four = numpy_helper.from_array(np.array([4], np.int64), "four")
    m = make_model([one("Shape", ["x"], ["b"], end=2),
                    helper.make_node("Concat", ["b", "four"], ["shape"], name="cat", axis=0),
                    one("Reshape", ["x", "shape"], ["y"], allowzero=1)],
                   [vi("x", F, ["n", "m", 4])], [vi("y", F, ["n", "m", 4])], opset=15,
                   initializers=[four])
    import opshift

    c = opshift.convert(m, 13)
    for shape in ((2, 3, 4), (0, 3, 4), (0, 0, 4)):
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        want, got = evaluate(m, {"x": x})["y"], evaluate(c, {"x": x})["y"]
        assert got.shape == want.shape == shape
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ConversionError, match=r"shape \(allowzero=1\).*not a constant"):
        convert_other_ops(m, 15, 8)
