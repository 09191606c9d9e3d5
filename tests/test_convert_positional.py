"""Trilu below 14 (from 9) and GatherElements below 11 (from 7): Where of the positions' offset
against k, and one Gather of X flattened at each element's position (negative indices from the
back); every type, static and symbolic dims; bit for bit against the ops on the evaluator, with
numpy's triu/tril and take_along_axis as the meaning, and on onnxruntime where it runs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_conversion_exact, converted, make_model, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError


def _trilu(elem: int, upper: int, k: int | None, shape: list) -> object:
    ins = ["x"] + (["k"] if k is not None else [])
    inits = [numpy_helper.from_array(np.array(k, np.int64), "k")] if k is not None else []
    return make_model([helper.make_node("Trilu", ins, ["y"], upper=upper)], [vi("x", elem, shape)],
                      [vi("y", elem, shape)], opset=14, initializers=inits)


@pytest.mark.parametrize("target", [13, 11, 9])
@pytest.mark.parametrize("upper", [1, 0])
@pytest.mark.parametrize("k", [None, 0, 2, -1, -5])
@pytest.mark.parametrize("dtype, shape", [(np.float32, [2, 3, 4]), (np.int64, ["n", 5]),
                                          (np.bool_, [4, 4])])
def test_trilu_below_14(dtype, shape, k, upper, target):
    m = _trilu(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), upper, k, shape)
    c = converted(m, target)
    assert "Trilu" not in {n.op_type for n in c.graph.node}
    real = [3 if d == "n" else d for d in shape]
    x = (np.arange(1, np.prod(real) + 1).reshape(real) % 7).astype(dtype)
    if dtype == np.float32:
        x.flat[:3] = [-0.0, np.nan, -np.inf]
    kk = 0 if k is None else k
    meaning = np.triu(x, kk) if upper else np.tril(x, kk)
    assert_conversion_exact(m, c, {"x": x}, meaning)


@pytest.mark.parametrize("target", [10, 9, 8, 7])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_gather_elements_below_11(dtype, axis, target):
    data = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    a = axis % 3
    ishape = [2, 3, 4]
    ishape[a] = 5
    rng = np.random.default_rng(7)
    idx = rng.integers(-data.shape[a], data.shape[a], ishape).astype(np.int64)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)],
                   [vi("x", elem, ["b", 3, 4]), vi("i", T.INT64, ["b2", *ishape[1:]])],
                   [vi("y", elem, ["b2", *ishape[1:]])], opset=13)
    c = converted(m, target)
    assert "GatherElements" not in {n.op_type for n in c.graph.node}
    meaning = np.take_along_axis(data, np.where(idx < 0, idx + data.shape[a], idx), axis=a)
    assert_conversion_exact(m, c, {"x": data, "i": idx}, meaning)


def test_positional_ops_below_their_floor_are_refused():
    with pytest.raises(ConversionError, match=r"below opset 9 there is no Where"):
        convert_proto(_trilu(T.FLOAT, 1, None, [3, 3]), 8)
    m = make_model([helper.make_node("GatherElements", ["x", "i"], ["y"])],
                   [vi("x", T.FLOAT, [2, 3]), vi("i", T.INT64, [2, 3])],
                   [vi("y", T.FLOAT, [2, 3])], opset=13)
    with pytest.raises(ConversionError, match=r"below opset 7 the arithmetic"):
        convert_proto(m, 6)
