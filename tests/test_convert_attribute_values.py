"""Attribute values whose spelling or default changed (conversion/steps/attribute_values.py):
GRU's direction, Concat's axis, Cast's ``to``, Shape's start/end as a Slice."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import attrs, make_model, vi
from convert_helpers import I64, X234, F, convert, one, roundtrip, run_ort
from onnx import TensorProto, numpy_helper


def test_concat_and_cast_old_forms():
    x = np.ones((2, 3), np.float32)
    m = make_model([one("Concat", ["x", "x"], ["y"])], [vi("x", F, [2, 3])],
                   [vi("y", F, [2, 6])], opset=1)
    convert(m, 1, 13)
    assert attrs(m.graph.node[0]) == {"axis": 1}
    assert run_ort(m, {"x": x})[0].shape == (2, 6)
    m = make_model([one("Cast", ["x"], ["y"], to=TensorProto.DOUBLE)], [vi("x", F, [2, 3])],
                   [vi("y", TensorProto.DOUBLE, [2, 3])], opset=13)
    convert(m, 13, 1)
    assert attrs(m.graph.node[0]) == {"to": b"DOUBLE"}
    convert(m, 1, 13)
    assert attrs(m.graph.node[0]) == {"to": TensorProto.DOUBLE}


def test_gru_default_direction_typo():
    w = numpy_helper.from_array(np.zeros((1, 6, 2), np.float32), "w")
    r = numpy_helper.from_array(np.zeros((1, 6, 2), np.float32), "r")
    m = make_model([one("GRU", ["x", "w", "r"], ["y", "h"], hidden_size=2)],
                   [vi("x", F, [1, 1, 2])], [vi("y", F, 4), vi("h", F, 3)], opset=1,
                   initializers=[w, r])
    convert(m, 1, 7)
    assert attrs(m.graph.node[0])["direction"] == b"forward"


@pytest.mark.parametrize("target", [13, 9])
@pytest.mark.parametrize("start,end", [(1, None), (-2, None), (0, -1), (1, 2)])
def test_shape_start_end_as_slice(target, start, end):
    kw = {"start": start} if end is None else {"start": start, "end": end}
    m = make_model([one("Shape", ["x"], ["y"], **kw)], [vi("x", F, [2, 3, 4])],
                   [vi("y", I64, 1)], opset=15)
    roundtrip(m, 15, target, {"x": X234})
    assert [n.op_type for n in m.graph.node] == ["Shape", "Slice"]
