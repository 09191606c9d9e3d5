"""Pooling across versions (conversion/steps/pooling.py): count_include_pad, LpPool's p,
dilations of ones, ceil_mode across 22."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import attrs, make_model, vi
from convert_helpers import F, convert, convert_other_ops, one, roundtrip, run_ort

from opshift.errors import ConversionError


def test_attribute_that_changed_meaning_is_refused():
    def pool(**kw):
        return make_model([one("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], **kw)],
                          [vi("x", F, [1, 1, 4, 4])], [vi("y", F, 4)], opset=11)
    with pytest.raises(ConversionError, match=r"AveragePool-11 -> 1.*count_include_pad"):
        convert_other_ops(pool(count_include_pad=1, pads=[1, 1, 1, 1]), 11, 6)
    m = pool(count_include_pad=1)  # no padding: the attribute has no effect
    roundtrip(m, 11, 6, {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)})
    assert "count_include_pad" not in attrs(m.graph.node[0])
    # ceil_mode needs an extra end pad here, which count_include_pad=1 would count.
    m = pool(ceil_mode=1, strides=[2, 2], pads=[1, 1, 0, 0], count_include_pad=1)
    with pytest.raises(ConversionError, match=r"AveragePool-10 -> AveragePool-7.*ceil_mode=1 "
                                              r"with count_include_pad=1"):
        convert_other_ops(m, 11, 9)


def test_lp_pool_p_float_and_int():
    x = np.random.default_rng(4).standard_normal((1, 2, 3, 3)).astype(np.float32)
    m = make_model([one("GlobalLpPool", ["x"], ["y"], p=2)], [vi("x", F, [1, 2, 3, 3])],
                   [vi("y", F, [1, 2, 1, 1])], opset=7)
    before = onnx.ModelProto()
    before.CopyFrom(m)
    convert(m, 7, 1)
    a = m.graph.node[0].attribute[0]
    assert a.type == onnx.AttributeProto.FLOAT and a.f == 2.0
    convert(m, 1, 7)
    np.testing.assert_allclose(run_ort(m, {"x": x})[0], run_ort(before, {"x": x})[0])
    m = make_model([one("GlobalLpPool", ["x"], ["y"], p=2.5)], [vi("x", F, [1, 2, 3, 3])],
                   [vi("y", F, [1, 2, 1, 1])], opset=1)
    with pytest.raises(ConversionError, match=r"GlobalLpPool-1 -> GlobalLpPool-2.*p=2.5"):
        convert_other_ops(m, 1, 7)


def test_pool_dilations_of_ones_dropped_others_refused():
    x = np.random.default_rng(5).standard_normal((1, 1, 5, 5)).astype(np.float32)

    def pool(d):
        return make_model([one("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=d)],
                          [vi("x", F, [1, 1, 5, 5])], [vi("y", F, 4)], opset=12)
    m = pool([1, 1])
    roundtrip(m, 12, 8, {"x": x})
    assert "dilations" not in attrs(m.graph.node[0])
    with pytest.raises(ConversionError, match=r"MaxPool-10 -> MaxPool-8.*dilations=\[2, 2\]"):
        convert_other_ops(pool([2, 2]), 12, 8)


def test_pool_ceil_mode_across_22():
    def pool(op, size, **kw):
        return make_model([one(op, ["x"], ["y"], kernel_shape=[1], ceil_mode=1, **kw)],
                          [vi("x", F, [1, 1, size])], [vi("y", F, 3)], opset=22)
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 5)
    # Windows start at 0, 3 and 6: the last starts past the input (kept before 22 only).
    with pytest.raises(ConversionError, match=r"MaxPool-22 -> MaxPool-12.*starts in the "
                                              r"padding"):
        convert_other_ops(pool("MaxPool", 5, strides=[3]), 22, 18)
    m = pool("AveragePool", 5, strides=[2])  # windows at 0, 2, 4: all start inside
    roundtrip(m, 22, 18, {"x": x})
    roundtrip(m, 18, 22, {"x": x})
    m = make_model([one("MaxPool", ["x"], ["y"], kernel_shape=[1], ceil_mode=1, strides=[3])],
                   [vi("x", F, [1, 1, None])], [vi("y", F, 3)], opset=22)
    with pytest.raises(ConversionError, match=r"stride 3 \+ end pad 0 > window 1.*not static"):
        convert_other_ops(m, 22, 18)
