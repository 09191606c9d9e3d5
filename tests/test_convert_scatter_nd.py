"""ScatterND below 11: constant indices into data of a static shape as a Gather of constant
positions in data and updates flattened and joined (from 5); otherwise (from 9) a Scatter-9
of the rows of data flattened at its k indexed axes, each k-tuple's row number read from
data's shape (negative indices from the back);
elements (k = rank) and slices, every element type, repeated places (the later update
stays); bit for bit against ScatterND-13 on the evaluator, with numpy's assignment as the
meaning, and on onnxruntime where it runs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_conversion_exact, converted, make_model, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError

CASES = {  # data shape, indices, updates' shape
    "elements": ((2, 3, 4), [[0, 1, 2], [1, -1, 0], [-2, 0, -1]], (3,)),
    "rows": ((2, 3, 4), [[[1, 2]], [[0, -3]]], (2, 1, 4)),
    "planes": ((3, 2, 2), [[2], [0]], (2, 2, 2)),
    "one_tuple": ((4, 3), [1], (3,)),
    "repeated": ((5,), [[1], [3], [1]], (3,)),
}


def _model(elem: int, data_shape, indices: np.ndarray, updates_shape, dynamic: bool,
           constant: bool = False):
    node = helper.make_node("ScatterND", ["d", "i", "u"], ["y"])
    ds = ["n", *data_shape[1:]] if dynamic else list(data_shape)
    given = [vi("d", elem, ds), vi("u", elem, list(updates_shape))]
    if not constant:
        given.insert(1, vi("i", T.INT64, list(indices.shape)))
    return make_model([node], given, [vi("y", elem, ds)], opset=13,
                      initializers=[numpy_helper.from_array(indices, "i")] if constant else [])


@pytest.mark.parametrize("target", [10, 9, 7, 5])
@pytest.mark.parametrize("form", ["computed", "dynamic data", "constant"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.uint8])
@pytest.mark.parametrize("case", CASES)
def test_scatter_nd_below_11(case, dtype, form, target):
    data_shape, idx, updates_shape = CASES[case]
    indices = np.array(idx, np.int64)
    constant = form == "constant"
    m = _model(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), data_shape, indices,
               updates_shape, form == "dynamic data", constant)
    if target < 9 and not constant:
        with pytest.raises(ConversionError, match=r"below opset 9 there is no Scatter"):
            convert_proto(m, target)
        return
    c = converted(m, target)
    ops = {n.op_type for n in c.graph.node}
    assert "ScatterND" not in ops and ("Scatter" in ops) != constant
    data = (np.arange(np.prod(data_shape)) % 5).reshape(data_shape).astype(dtype)
    updates = (7 - np.arange(np.prod(updates_shape)) % 3).reshape(updates_shape).astype(dtype)
    feeds = {"d": data, "u": updates} if constant else {"d": data, "i": indices, "u": updates}
    meaning = data.copy()
    for tup, u in zip(indices.reshape(-1, indices.shape[-1]),
                      updates.reshape((-1,) + data_shape[indices.shape[-1]:])):
        meaning[tuple(tup)] = u
    assert_conversion_exact(m, c, feeds, meaning)


def test_scatter_nd_refusals():
    m = _model(T.FLOAT, (2, 3), np.zeros((2, 1), np.int64), (2, 3), False)
    with pytest.raises(ConversionError, match=r"below opset 9 there is no Scatter"):
        convert_proto(m, 8)
    m.graph.input[1].type.tensor_type.shape.dim[1].dim_param = "k"
    with pytest.raises(ConversionError, match=r"last dim of its indices .* is unknown"):
        convert_proto(m, 10)
