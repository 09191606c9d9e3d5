"""TopK against onnx.reference's kernel (which sorts every row) on random data: ties (the
lower index first), NaN (larger than every number), infinities and signed zeros, integers,
every axis, largest and smallest, k from 0 to the axis' length; TopK-1's k attribute; onnx's
node tests; errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_onnx_node_tests, init, make_model
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from opshift.errors import EvaluationError
from opshift.evaluator import evaluate


def _model(x, k, opset=11, **attrs):
    ins, inits = ["x"], []
    if opset >= 10:
        ins.append("k")
        inits.append(init("k", np.int64([k])))
    else:
        attrs["k"] = k
    node = helper.make_node("TopK", ins, ["v", "i"], name="topk", **attrs)
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    return make_model([node], [helper.make_tensor_value_info("x", elem, list(x.shape))],
                      [helper.make_tensor_value_info("v", elem, None),
                       helper.make_tensor_value_info("i", TensorProto.INT64, None)],
                      opset=opset, initializers=inits)


@pytest.mark.parametrize("seed", range(80))
def test_matches_onnx_reference(seed):
    rng = np.random.default_rng([60, seed])
    dtype = [np.float32, np.int32, np.float64, np.float16, np.uint8][seed % 5]
    shape = [int(rng.integers(1, 7)) for _ in range(int(rng.integers(1, 4)))]
    if seed % 2:  # many ties
        x = rng.choice([0, 1, 2, 3], shape).astype(dtype)
    else:
        x = (np.abs(rng.standard_normal(shape)) if dtype == np.uint8 else
             rng.standard_normal(shape) * 3).astype(dtype)
    if x.dtype.kind == "f":
        x.flat[rng.integers(0, x.size, 3)] = rng.choice([np.nan, np.inf, -np.inf, -0.0], 3)
    axis = int(rng.integers(-x.ndim, x.ndim))
    k = int(rng.integers(0, x.shape[axis] + 1))
    opset = 11 if x.dtype.kind != "f" or seed % 3 else int(rng.choice([1, 10, 11]))
    attrs = {"axis": axis} | ({"largest": seed // 2 % 2} if opset >= 11 else {})
    m = _model(x, k, opset, **attrs)
    got = evaluate(m, {"x": x})
    want = ReferenceEvaluator(m).run(None, {"x": x})
    assert got["v"].dtype == x.dtype and got["i"].dtype == np.int64
    np.testing.assert_array_equal(got["v"], want[0])
    np.testing.assert_array_equal(got["i"], want[1])


def test_ties_nan_and_the_kth_value():
    x = np.float32([[3, np.nan, 3, 1, np.nan, 3, -0.0, 0.0]])
    got = evaluate(_model(x, 4), {"x": x})
    np.testing.assert_array_equal(got["i"], [[1, 4, 0, 2]])  # NaN first, then the first 3s
    got = evaluate(_model(x, 3, largest=0), {"x": x})
    np.testing.assert_array_equal(got["i"], [[6, 7, 3]])  # -0.0 and 0.0 tie: index order


def test_onnx_node_tests_and_errors():
    assert_onnx_node_tests("test_top_k", at_least=6)
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(EvaluationError, match=r"node 'topk' \(TopK-11, graph 'g'\): k=4 is "
                                              r"outside \[0, 3\] for axis 1"):
        evaluate(_model(x, 4), {"x": x})
