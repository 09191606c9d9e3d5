"""ReverseSequence below 10 (from 7): a Gather of the rows of X reshaped to [T * B, rest]
that each (time, batch) pair reads, time-major and batch-major, every element type, lengths
0..T (and outside, read as the reference reads them); bit for bit against
ReverseSequence-10 on the evaluator, with numpy's reversal as the meaning, and on
onnxruntime where it runs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_conversion_exact, assert_exact, converted, make_model, vi
from onnx import TensorProto as T
from onnx import helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate


def _model(elem: int, time_axis: int, shape: list) -> onnx.ModelProto:
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=time_axis,
                            batch_axis=1 - time_axis)
    return make_model([node], [vi("x", elem, shape), vi("lens", T.INT64, [shape[1 - time_axis]])],
                      [vi("y", elem, shape)], opset=10)


def _meaning(x: np.ndarray, lens: np.ndarray, time_axis: int) -> np.ndarray:
    y = x.copy()
    for b, n in enumerate(lens):
        n = min(int(n), x.shape[time_axis])
        if time_axis == 0:
            y[:n, b] = x[:n, b][::-1]
        else:
            y[b, :n] = x[b, :n][::-1]
    return y


@pytest.mark.parametrize("target", [9, 7])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.float16])
@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("rest", [(), (3,), (2, 2)])
def test_reverse_sequence_below_10(dtype, time_axis, rest, target):
    t_steps, batch = 5, 4
    shape = [t_steps, batch] if time_axis == 0 else [batch, t_steps]
    shape += list(rest)
    m = _model(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), time_axis,
               ["T", "B", *rest] if time_axis == 0 else ["B", "T", *rest])
    c = converted(m, target)
    assert "ReverseSequence" not in {n.op_type for n in c.graph.node}
    x = (np.arange(np.prod(shape)) % 7 - 3).reshape(shape).astype(dtype)
    lens = np.array([5, 0, 1, 3], np.int64)
    feeds = {"x": x, "lens": lens}
    assert_conversion_exact(m, c, feeds, _meaning(x, lens, time_axis))


@pytest.mark.parametrize("target", [9, 7])
def test_reverse_sequence_lengths_outside_0_to_t_read_as_the_reference_reads_them(target):
    m = _model(T.FLOAT, 0, ["T", "B"])
    c = onnx.ModelProto()
    c.CopyFrom(m)
    convert_proto(c, target)
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    feeds = {"x": x, "lens": np.array([7, -2, -9, 2], np.int64)}
    assert_exact(evaluate(m, feeds)["y"], evaluate(c, feeds)["y"])


def test_reverse_sequence_below_7_is_refused():
    with pytest.raises(ConversionError, match=r"below opset 7 the arithmetic"):
        convert_proto(_model(T.FLOAT, 0, [5, 4]), 6)
