"""Reshape-14 allowzero=1 of a computed shape, below 14 (a dynamo export's ``view``): written as
a Reshape to the shape with its 0s made safe, expanded to the shape with its 0s put back."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import make_model, onnxruntime_outputs, vi
from onnx import TensorProto as T
from onnx import helper

import opshift
from opshift.errors import ConversionError


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
