"""Softmax, LogSoftmax and Hardmax across 13 (conversion/steps/softmax.py): the axis's
meaning changed from a coerced 2-D input to one axis, both ways, exactly."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import make_model, vi
from convert_helpers import X234, F, convert, convert_other_ops, one, roundtrip, run_ort

from opshift.errors import ConversionError


def softmax_model(op, axis, opset, shape=(2, 3, 4)):
    kw = {} if axis is None else {"axis": axis}
    return make_model([one(op, ["x"], ["y"], **kw)], [vi("x", F, list(shape))],
                      [vi("y", F, list(shape))], opset=opset)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_softmax_family_down_across_13(op, axis):
    m = softmax_model(op, axis, 13)
    roundtrip(m, 13, 11, {"x": X234})
    roundtrip(m, 11, 13, {"x": X234})  # and back up: the coerced form is kept exact too


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_on_a_long_axis_down_across_13(op):
    """Softmax-13 on axis 1 of 37 values goes to 11 as a Transpose and a Softmax on the last
    axis: the evaluator adds the same values in the same order both ways (bit for bit)."""
    m = softmax_model(op, 1, 13, shape=(2, 37, 5))
    x = np.random.default_rng(2).standard_normal((2, 37, 5)).astype(np.float32) * 30
    roundtrip(m, 13, 11, {"x": x})
    assert "Transpose" in {n.op_type for n in m.graph.node}


@pytest.mark.parametrize("axis", [None, 0, 2])
def test_softmax_coerced_upgrade(axis):
    m = softmax_model("Softmax", axis, 11)
    before = onnx.ModelProto()
    before.CopyFrom(m)
    convert(m, 11, 13)
    y = run_ort(m, {"x": X234})[0]
    a = 1 if axis is None else axis  # the coerced 2-D reference, computed by hand
    flat = X234.reshape(int(np.prod(X234.shape[:a])), -1)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, (e / e.sum(axis=1, keepdims=True)).reshape(X234.shape),
                               rtol=1e-5)


def test_softmax_unknown_rank_refused():
    m = make_model([one("Softmax", ["x"], ["y"])], [vi("x", F, None)], [vi("y", F, None)],
                   opset=13)
    with pytest.raises(ConversionError, match=r"Softmax-13 -> Softmax-11.*rank"):
        convert_other_ops(m, 13, 11)
