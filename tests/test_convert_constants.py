"""Constants across versions (conversion/steps/constant.py, folding): integer Constant nodes
become initializers below 9, value_* attributes a value tensor below 12, sparse_value refused;
constants folded into attributes are removed only when nothing else reads them."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_model, vi
from convert_helpers import I64, X234, F, convert, convert_other_ops, one, roundtrip
from onnx import helper, numpy_helper

from opshift.errors import ConversionError


def test_int_constant_becomes_initializer_below_9():
    c = helper.make_node("Constant", [], ["s"], name="c",
                         value=numpy_helper.from_array(np.array([6, 4], np.int64)))
    m = make_model([c, one("Reshape", ["x", "s"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [6, 4])], opset=13)
    roundtrip(m, 13, 7, {"x": X234})
    assert [n.op_type for n in m.graph.node] == ["Reshape"]


def test_constant_value_attributes_below_12():
    c = helper.make_node("Constant", [], ["c"], name="c", value_ints=[4, 6])
    m = make_model([c, one("Reshape", ["x", "c"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [4, 6])], opset=13)
    roundtrip(m, 13, 11, {"x": X234})
    t = m.graph.node[0].attribute[0]
    assert t.name == "value" and numpy_helper.to_array(t.t).tolist() == [4, 6]
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0], np.float32)),
                                       numpy_helper.from_array(np.array([0], np.int64)), [2])
    m = make_model([helper.make_node("Constant", [], ["y"], name="sp", sparse_value=sparse)],
                   [], [vi("y", F, [2])], opset=13)
    with pytest.raises(ConversionError, match=r"node 'sp' \(Constant-13 -> 9.*sparse_value"):
        convert_other_ops(m, 13, 10)


def test_folded_constants_removed_only_when_unused():
    ax = helper.make_node("Constant", [], ["ax"], name="ax",
                          value=numpy_helper.from_array(np.array([0], np.int64)))
    nodes = [ax, one("Unsqueeze", ["x", "ax"], ["u1"]),
             helper.make_node("Unsqueeze", ["x", "ax"], ["u2"], name="u2")]
    m = make_model(nodes, [vi("x", F, [3])], [vi("u1", F, [1, 3]), vi("u2", F, [1, 3])],
                   opset=13)
    convert(m, 13, 11)
    assert [n.op_type for n in m.graph.node] == ["Unsqueeze", "Unsqueeze"]
    nodes.append(helper.make_node("Identity", ["ax"], ["z"], name="keep"))
    m = make_model(nodes, [vi("x", F, [3])], [vi("u1", F, [1, 3]), vi("z", I64, [1])],
                   opset=13)
    convert(m, 13, 11)
    assert [n.op_type for n in m.graph.node] == ["Constant", "Unsqueeze", "Unsqueeze",
                                                 "Identity"]
