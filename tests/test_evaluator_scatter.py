"""ScatterND against onnx.reference's kernel (the operator's loop, written out) on random
data: element and slice updates, negative indices, repeated index tuples (with and without a
reduction), several element types and versions; and errors named."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_model, onnx_node_outputs
from onnx import helper
from onnx.reference import ReferenceEvaluator

from opshift.errors import EvaluationError
from opshift.evaluator import evaluate


def _model(data, indices, updates, opset, **attrs):
    def vi(name, a):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype),
                                             list(a.shape))

    node = helper.make_node("ScatterND", ["d", "i", "u"], ["y"], name="s", **attrs)
    return make_model([node], [vi("d", data), vi("i", indices), vi("u", updates)],
                      [helper.make_tensor_value_info("y", 0, None)], opset=opset)


CASES = [(reduction, opset) for reduction, opset in
         (("none", 11), ("none", 13), ("none", 18), ("add", 16), ("mul", 16), ("max", 18),
          ("min", 18))]


@pytest.mark.parametrize("reduction,opset", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
@pytest.mark.parametrize("seed", range(4))
def test_matches_onnx_reference(reduction, opset, dtype, seed):
    rng = np.random.default_rng([CASES.index((reduction, opset)), seed, np.dtype(dtype).num])
    rank = int(rng.integers(1, 5))
    shape = [int(rng.integers(1, 5)) for _ in range(rank)]
    k = int(rng.integers(1, rank + 1))
    lead = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(1, 3)))]
    indices = np.stack([rng.integers(-d, d, lead) for d in shape[:k]], -1).astype(np.int64)
    if reduction == "none":  # the operator leaves repeated tuples' order open: none here
        flat = indices.reshape(-1, k) % np.array(shape[:k])
        _, first = np.unique(flat, axis=0, return_index=True)
        indices = indices.reshape(-1, k)[np.sort(first)]
        lead = [len(indices)]
        indices = indices.reshape(lead + [k])
    data = (rng.standard_normal(shape) * 4).astype(dtype)
    updates = (rng.standard_normal(lead + shape[k:]) * 4).astype(dtype)
    attrs = {} if reduction == "none" and opset < 16 else {"reduction": reduction}
    m = _model(data, indices, updates, opset, **attrs)
    feeds = {"d": data, "i": indices, "u": updates}
    got = evaluate(m, feeds)["y"]
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_repeated_tuples_combine_in_order_and_the_last_value_stays():
    data = np.zeros((3, 2), np.float32)
    indices = np.array([[1], [0], [1]], np.int64)
    updates = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    feeds = {"d": data, "i": indices, "u": updates}
    assert evaluate(_model(data, indices, updates, 18, reduction="add"),
                    feeds)["y"].tolist() == [[3, 4], [6, 8], [0, 0]]
    assert evaluate(_model(data, indices, updates, 13), feeds)["y"].tolist() == [
        [3, 4], [5, 6], [0, 0]]


def test_onnx_node_tests_give_their_expected_outputs():
    outputs = onnx_node_outputs("test_scatternd")
    assert len(outputs) >= 4
    for name, got, want in outputs:
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("indices,match", [
    (np.array([[3]], np.int64), r"index \[3\] is out of range for data \[3, 2\]"),
    (np.array([[-4]], np.int64), r"index \[-4\] is out of range"),
    (np.array([[0, 0, 0]], np.int64), r"do not index data"),
])
def test_bad_indices_are_named(indices, match):
    data = np.zeros((3, 2), np.float32)
    updates = np.zeros(indices.shape[:-1] + data.shape[indices.shape[-1]:], np.float32)
    with pytest.raises(EvaluationError, match=r"node 's' \(ScatterND-13.*" + match):
        evaluate(_model(data, indices, updates, 13), {"d": data, "i": indices, "u": updates})


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_tuples_of_no_index_and_no_tuples(reduction):
    """k = 0: each tuple names all of data; no tuples at all: data unchanged."""
    data = np.ones((2, 2), np.float32)
    for indices, updates in ((np.zeros((3, 0), np.int64),
                              np.arange(12, dtype=np.float32).reshape(3, 2, 2)),
                             (np.zeros((0, 1), np.int64), np.zeros((0, 2), np.float32))):
        m = _model(data, indices, updates, 16, reduction=reduction)
        feeds = {"d": data, "i": indices, "u": updates}
        np.testing.assert_array_equal(evaluate(m, feeds)["y"],
                                      ReferenceEvaluator(m).run(None, feeds)[0])
