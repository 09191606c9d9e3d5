"""GatherND, ScatterND and ScatterElements against onnx.reference's kernels (the operators'
loops, written out) on random data: GatherND with batch_dims and negative indices; the
scatters' element and slice updates, negative indices, repeated places (with and without a
reduction), several element types and versions; max and min with NaN and signed zeros, bit for
bit; Scatter-9/11; onnx's node tests; errors named."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_onnx_node_tests, make_model, vi_of
from onnx import helper
from onnx.reference import ReferenceEvaluator

from opshift.errors import EvaluationError
from opshift.evaluator import evaluate


def _model(data, indices, updates, opset, op="ScatterND", **attrs):
    node = helper.make_node(op, ["d", "i", "u"], ["y"], name="s", **attrs)
    return make_model([node], [vi_of("d", data), vi_of("i", indices), vi_of("u", updates)],
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
    assert_onnx_node_tests("test_scatternd", at_least=4)


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


# -- ScatterElements and Scatter --------------------------------------------------------------


@pytest.mark.parametrize("reduction,opset", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
@pytest.mark.parametrize("seed", range(3))
def test_scatter_elements_matches_onnx_reference(reduction, opset, dtype, seed):
    rng = np.random.default_rng([20, CASES.index((reduction, opset)), seed,
                                 np.dtype(dtype).num])
    rank = int(rng.integers(1, 4))
    shape = [int(rng.integers(1, 5)) for _ in range(rank)]
    axis = int(rng.integers(-rank, rank))
    ishape = [int(rng.integers(1, d + 1)) for d in shape]
    ishape[axis] = int(rng.integers(1, 7))  # along axis: more updates than places too
    dim = shape[axis]
    indices = rng.integers(-dim, dim, ishape).astype(np.int64)
    if reduction == "none":  # the operator leaves repeated places' order open: none here
        indices = np.moveaxis(np.argsort(rng.random(np.moveaxis(indices, axis, -1).shape[:-1]
                                                    + (dim,)), -1), -1, axis)
        indices = np.take(indices, range(min(ishape[axis], dim)), axis=axis).astype(np.int64)
    data = (rng.standard_normal(shape) * 4).astype(dtype)
    updates = (rng.standard_normal(indices.shape) * 4).astype(dtype)
    attrs = {"axis": axis} | ({} if reduction == "none" and opset < 16 else
                              {"reduction": reduction})
    m = _model(data, indices, updates, opset, op="ScatterElements", **attrs)
    feeds = {"d": data, "i": indices, "u": updates}
    got = evaluate(m, feeds)["y"]
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("reduction", ["max", "min", "add", "none"])
@pytest.mark.parametrize("seed", range(8))
def test_scatter_elements_nan_and_signed_zeros_as_onnx_reference(reduction, seed):
    """Places updated many times, values among NaN, +0 and -0: bit for bit."""
    rng = np.random.default_rng([21, seed])
    data = rng.choice(np.float32([0.0, -0.0, 1.5, -2.0, np.nan, 3.0]), (3, 4, 5))
    updates = rng.choice(np.float32([0.0, -0.0, 1.5, -2.0, np.nan, 4.0, -7.0]), (3, 6, 5))
    indices = rng.integers(-4, 4, (3, 6, 5)).astype(np.int64)
    m = _model(data, indices, updates, 18, op="ScatterElements", axis=1, reduction=reduction)
    feeds = {"d": data, "i": indices, "u": updates}
    got = evaluate(m, feeds)["y"]
    with np.errstate(invalid="ignore"):
        want = ReferenceEvaluator(m).run(None, feeds)[0]
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


@pytest.mark.parametrize("opset,negative_ok", [(9, False), (11, True)])
def test_scatter_is_scatter_elements(opset, negative_ok):
    data = np.zeros((2, 3), np.float32)
    indices = np.array([[2, 0]], np.int64)
    updates = np.float32([[5, 6]])
    m = _model(data, indices, updates, opset, op="Scatter", axis=1)
    got = evaluate(m, {"d": data, "i": indices, "u": updates})["y"]
    np.testing.assert_array_equal(got, [[6, 0, 5], [0, 0, 0]])
    feeds = {"d": data, "i": -indices - 1, "u": updates}
    if negative_ok:
        np.testing.assert_array_equal(evaluate(m, feeds)["y"], [[5, 0, 6], [0, 0, 0]])
    else:
        with pytest.raises(EvaluationError, match=r"Scatter-9.*index -3 is out of range "
                                                  r"\[0, 2\]"):
            evaluate(m, feeds)


def test_scatter_elements_node_tests():
    assert_onnx_node_tests("test_scatter_elements", "test_scatter_", at_least=8)


@pytest.mark.parametrize("indices,updates,match", [
    (np.array([[3]], np.int64), np.zeros((1, 1), np.float32),
     r"index 3 is out of range \[-3, 2\] for axis 0 of data \[3, 2\]"),
    (np.array([[0, 0, 0]], np.int64), np.zeros((1, 3), np.float32), r"within data \[3, 2\]"),
    (np.array([[0]], np.int64), np.zeros((1, 2), np.float32), r"must have one shape"),
])
def test_scatter_elements_bad_input_is_named(indices, updates, match):
    data = np.zeros((3, 2), np.float32)
    m = _model(data, indices, updates, 13, op="ScatterElements")
    with pytest.raises(EvaluationError, match=r"node 's' \(ScatterElements-13.*" + match):
        evaluate(m, {"d": data, "i": indices, "u": updates})


# -- GatherND ---------------------------------------------------------------------------------


def _gather_model(data, indices, opset=13, **attrs):
    node = helper.make_node("GatherND", ["d", "i"], ["y"], name="g", **attrs)
    return make_model([node], [vi_of("d", data), vi_of("i", indices)],
                      [helper.make_tensor_value_info("y", 0, None)], opset=opset)


@pytest.mark.parametrize("seed", range(40))
def test_gather_nd_matches_onnx_reference(seed):
    rng = np.random.default_rng([40, seed])
    rank = int(rng.integers(1, 5))
    shape = [int(rng.integers(1, 5)) for _ in range(rank)]
    b = int(rng.integers(0, rank))
    k = int(rng.integers(1, rank - b + 1))
    lead = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3)))]
    indices = np.stack([rng.integers(-shape[b + a], shape[b + a], shape[:b] + lead)
                        for a in range(k)], -1).astype(np.int64)
    data = rng.standard_normal(shape).astype(np.float32)
    opset = 11 if b == 0 and seed % 3 == 0 else int(rng.choice([12, 13]))
    m = _gather_model(data, indices, opset, **({"batch_dims": b} if opset >= 12 else {}))
    if opset == 11 and b:
        pytest.skip("batch_dims came with GatherND-12")
    feeds = {"d": data, "i": indices}
    np.testing.assert_array_equal(evaluate(m, feeds)["y"],
                                  ReferenceEvaluator(m).run(None, feeds)[0])


def test_gather_nd_tuples_of_no_index_take_all_of_each_batch():
    """onnx.reference's kernel cannot reshape them; the operator: each names data[batch]."""
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    indices = np.zeros((2, 5, 0), np.int64)
    y = evaluate(_gather_model(data, indices, batch_dims=1), {"d": data, "i": indices})["y"]
    np.testing.assert_array_equal(y, np.broadcast_to(data[:, None], (2, 5, 3, 4)))


def test_gather_nd_node_tests_and_errors():
    assert_onnx_node_tests("test_gathernd", at_least=3)
    data = np.zeros((2, 3), np.float32)
    for indices, match in ((np.array([[2, 0]], np.int64), r"index \[2, 0\] is out of range"),
                           (np.array([[0, 0, 0]], np.int64), r"do not index data")):
        with pytest.raises(EvaluationError, match=r"node 'g' \(GatherND-13.*" + match):
            evaluate(_gather_model(data, indices), {"d": data, "i": indices})
