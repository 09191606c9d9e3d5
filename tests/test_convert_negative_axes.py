"""Negative axes and indices below 11 (conversion/steps/negative_axes.py): normalized with the
known rank or dimension, Gather's indices read with their sign at run time (from 7) unless an
op computes them never negative; refused where neither is possible."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import attrs, make_model, vi
from convert_helpers import I64, X234, F, convert_other_ops, node, one, roundtrip
from onnx import TensorProto, helper, numpy_helper

from opshift.errors import ConversionError
from opshift.evaluator import evaluate


def test_negative_axis_needs_rank_below_11():
    m = make_model([one("Concat", ["x", "z"], ["y"], axis=-1)],
                   [vi("x", F, [2, 3]), vi("z", F, [2, 3])], [vi("y", F, [2, 6])], opset=13)
    x = np.ones((2, 3), np.float32)
    roundtrip(m, 13, 9, {"x": x, "z": 2 * x})
    assert attrs(m.graph.node[0]) == {"axis": 1}
    m = make_model([one("Flatten", ["x"], ["y"], axis=-1)], [vi("x", F, None)],
                   [vi("y", F, None)], opset=13)
    with pytest.raises(ConversionError, match=r"Flatten-11 -> Flatten-9.*axis=-1.*rank"):
        convert_other_ops(m, 13, 9)


@pytest.mark.parametrize("indices", [[-1, 0], [-3, -1]])
@pytest.mark.parametrize("dim", [3, "n"])
def test_gather_constant_negative_indices_below_11(indices, dim):
    """Constant negative indices are normalized with the dimension's size, or (from 7)
    offset by that size read at run time where it is unknown; refused below 7 then."""
    idx = numpy_helper.from_array(np.array(indices, np.int64), "i")
    m = make_model([one("Gather", ["x", "i"], ["y"], axis=1)], [vi("x", F, [2, dim, 4])],
                   [vi("y", F, [2, 2, 4])], opset=13, initializers=[idx])
    c = onnx.ModelProto()
    c.CopyFrom(m)
    roundtrip(c, 13, 7, {"x": X234})
    np.testing.assert_array_equal(evaluate(c, {"x": X234})["y"], X234[:, indices])
    assert ("Shape" in {n.op_type for n in c.graph.node}) == (dim == "n")
    if dim == "n":
        with pytest.raises(ConversionError, match=r"indices are constant, of a dimension of "
                                                  r"unknown size \(below opset 7"):
            convert_other_ops(m, 13, 6)


def test_gather_indices_below_11():
    m = make_model([one("Gather", ["x", "i"], ["y"])], [vi("x", F, [2, 3]),
                                                        vi("i", I64, [2])],
                   [vi("y", F, None)], opset=13)
    with pytest.raises(ConversionError, match=r"Gather-11 -> Gather-1.*indices are computed"):
        convert_other_ops(m, 13, 6)  # (from 7 they are read with their sign: below)


def test_slice_negative_axes_below_11():
    consts = [numpy_helper.from_array(np.array(v, np.int64), k)
              for k, v in (("s", [1]), ("e", [3]), ("a", [-1]))]
    m = make_model([one("Slice", ["x", "s", "e", "a"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 2])], opset=13, initializers=consts)
    roundtrip(m, 13, 10, {"x": X234})
    roundtrip(m, 10, 9, {"x": X234})
    assert attrs(m.graph.node[0])["axes"] == [2]


@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("itype", [TensorProto.INT64, TensorProto.INT32])
@pytest.mark.parametrize("target", [10, 9, 8, 7, 6])
def test_gather_computed_negative_indices_below_11(static, itype, target):
    """Gather-11 counts negative indices from the back; below, computed indices are read
    through Where(i < 0, i + n, i) from 9 (n known, or the data's shape at run time), at 7
    and 8 as i + n * (i < 0) (the sign read through float); refused below 7."""
    data_shape = [5, 3] if static else ["n", 3]
    m = make_model([one("Gather", ["d", "i"], ["y"], axis=0)],
                   [vi("d", F, data_shape), vi("i", itype, [4])], [vi("y", F, [4, 3])],
                   opset=13)
    feeds = {"d": np.arange(15, dtype=np.float32).reshape(5, 3),
             "i": np.array([-5, -1, 0, 4], helper.tensor_dtype_to_np_dtype(itype))}
    if target < 7:
        with pytest.raises(ConversionError, match=r"indices are computed \(below opset 7"):
            convert_other_ops(m, 13, target)
        return
    roundtrip(m, 13, target, feeds)
    ops = [n.op_type for n in m.graph.node]
    assert ("Where" in ops) == (target >= 9) and ("Mul" in ops) == (target < 9)
    np.testing.assert_array_equal(evaluate(m, feeds)["y"], feeds["d"][feeds["i"]])


def _gather_of(producer: str) -> tuple[onnx.ModelProto, dict]:
    """Gather(d, i) at opset 13, i computed by ``producer``: ArgMax's positions, TopK's
    indices, a Shape, or positions negated (Neg: negative indices)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    first, inits, n = [one("ArgMax", ["x"], ["i"], axis=1, keepdims=0)], [], 4
    if producer == "Shape":
        first, n = [one("Shape", ["x"], ["i"])], 2
    elif producer == "TopK":
        inits = [numpy_helper.from_array(np.array([2], np.int64), "k")]
        first, n = [one("TopK", ["x", "k"], ["v", "i"], axis=0)], 2
    elif producer == "Neg":
        first = [one("ArgMax", ["x"], ["a"], axis=1, keepdims=0), one("Neg", ["a"], ["i"])]
    m = make_model(first + [one("Gather", ["d", "i"], ["y"], axis=0)],
                   [vi("d", F, [6, 3]), vi("x", F, [4, 5])],
                   [vi("y", F, [n, 3] if producer != "TopK" else [2, 5, 3])], opset=13,
                   initializers=inits)
    return m, {"d": np.arange(-9, 9, dtype=np.float32).reshape(6, 3), "x": x}


@pytest.mark.parametrize("producer", ["ArgMax", "TopK", "Shape"])
@pytest.mark.parametrize("target", [10, 9, 7])
def test_gather_of_never_negative_indices_below_11(producer, target):
    """Indices an op computes that are never negative (positions, sizes) mean the same at
    every Gather version: no Where is written, and below 9, where none could be, the
    conversion still goes through."""
    m, feeds = _gather_of(producer)
    roundtrip(m, 13, target, feeds)
    assert [n.op_type for n in m.graph.node][-1:] == ["Gather"]
    assert not {"Where", "Less", "Add"} & {n.op_type for n in m.graph.node}
    assert node(m, "Gather").input[1] == "i"


def test_gather_of_other_computed_indices_below_11_still_reads_negatives():
    """Indices of any other op (here negated positions) are read through the Where from 9,
    through a sign mask at 7 and 8, refused below."""
    m, feeds = _gather_of("Neg")
    roundtrip(m, 13, 9, feeds)
    assert "Where" in {n.op_type for n in m.graph.node}
    m, feeds = _gather_of("Neg")
    roundtrip(m, 13, 7, feeds)
    assert {"Less", "Mul", "Add"} <= {n.op_type for n in m.graph.node}
    m, _ = _gather_of("Neg")
    with pytest.raises(ConversionError, match=r"indices are computed \(below opset 7"):
        convert_other_ops(m, 13, 6)
