"""Before If-11 both branches must give each output in one shape: an If whose branches give
different ranks (PyTorch's ``if x.dim() == 3: x = x.squeeze(0)``) is refused below 11, where
onnx's checker and onnxruntime reject it; branches that agree convert."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_exact, make_model, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.conversion.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate


def _if(squeeze: bool) -> onnx.ModelProto:
    axes = numpy_helper.from_array(np.array([0], np.int64))
    then = helper.make_graph(
        [helper.make_node("Constant", [], ["axes"], value=axes, name="axes"),
         helper.make_node("Squeeze" if squeeze else "Identity",
                          ["x", "axes"] if squeeze else ["x"], ["t"], name="t")],
        "then", [], [vi("t", T.FLOAT, [3] if squeeze else [1, 3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="e")], "else", [],
                              [vi("e", T.FLOAT, [1, 3])])
    return make_model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then,
                                        else_branch=other)],
                      [vi("c", T.BOOL, []), vi("x", T.FLOAT, [1, 3])],
                      [vi("y", T.FLOAT, None if squeeze else [1, 3])],
                      opset=13)


def test_branches_of_different_ranks_are_refused_below_11():
    m = _if(squeeze=True)
    before = m.SerializeToString()
    with pytest.raises(ConversionError, match=r"node 'if' \(If-13 -> 1.*its branches give "
                                              r"output 0 in shapes \[3\] and \[1, 3\]"):
        convert_proto(m, 10)
    assert m.SerializeToString() == before
    convert_proto(m, 11)  # from 11 the shapes may differ
    assert m.opset_import[0].version == 11


def test_branches_that_agree_convert():
    m = _if(squeeze=False)
    c = onnx.ModelProto()
    c.CopyFrom(m)
    convert_proto(c, 9)
    onnx.checker.check_model(c, full_check=True)
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": np.array([[1, -2, 3]], np.float32)}
        assert_exact(evaluate(m, feeds)["y"], evaluate(c, feeds)["y"], str(cond))
