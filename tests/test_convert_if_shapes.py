"""Before If-11 both branches must give each output in one shape: an If whose branches give
different ranks (PyTorch's ``if x.dim() == 3: x = x.squeeze(0)``) is refused below 11, where
onnx's checker and onnxruntime reject it, unless constants and the input shapes decide its
condition (the branch taken then replaces it); branches that agree convert."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_exact, make_model, run_onnxruntime, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.convert.engine import convert_proto
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


def _squeeze_if_last_is_1(x_shape, nested: bool = False) -> onnx.ModelProto:
    """PyTorch's ``if x.shape[-1] == 1: x = x.squeeze(-1)`` then a Relu: the condition reads
    x's shape; the then-branch holds a constant of its own (an initializer) and declares a
    value_info; ``nested``: it squeezes once more inside an If of its own when the result
    has rank 2."""
    r = len(x_shape)
    last = numpy_helper.from_array(np.array([-1], np.int64), "last")
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    inner = []
    if nested:
        zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
        sub = helper.make_graph([helper.make_node("Squeeze", ["s", "zero"], ["n"], name="sq0")],
                                "a", [], [vi("n", T.FLOAT, r - 2)], [zero])
        keep = helper.make_graph([helper.make_node("Identity", ["s"], ["k"], name="keep")],
                                 "b", [], [vi("k", T.FLOAT, r - 1)])
        inner = [helper.make_node("Shape", ["s"], ["rank_of"], name="rank_of"),
                 helper.make_node("Size", ["rank_of"], ["rank"], name="rank"),
                 helper.make_node("Equal", ["rank", "two"], ["is_2"], name="is_2"),
                 helper.make_node("If", ["is_2"], ["t"], name="inner", then_branch=sub,
                                  else_branch=keep)]
    then = helper.make_graph(
        [helper.make_node("Squeeze", ["x", "axes"], ["s"], name="squeeze"), *inner],
        "then", [], [vi("t", T.FLOAT, r - 2) if nested else vi("s", T.FLOAT, r - 1)],
        [numpy_helper.from_array(np.array([-1], np.int64), "axes"),
         numpy_helper.from_array(np.array(2, np.int64), "two")],
        value_info=[vi("s", T.FLOAT, r - 1)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="e")], "else",
                              [], [vi("e", T.FLOAT, r)])
    nodes = [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
             helper.make_node("Gather", ["shape", "last"], ["d"], axis=0, name="d"),
             helper.make_node("Equal", ["d", "one"], ["c"], name="c"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then,
                              else_branch=other),
             helper.make_node("Relu", ["y"], ["out"], name="relu")]
    rank = r - (x_shape[-1] == 1) - (nested and r == 3)
    return make_model(nodes, [vi("x", T.FLOAT, list(x_shape))], [vi("out", T.FLOAT, rank)],
                      opset=13, initializers=[last, one])


@pytest.mark.parametrize("x_shape,taken,nested", [((2, 1), "then", False),
                                                  ((2, 3), "else", False),
                                                  ((1, 4, 1), "then", False),
                                                  ((1, 4, 1), "then", True)])
@pytest.mark.parametrize("target", [10, 9, 7])
def test_branch_taken_where_input_shapes_decide_the_condition(x_shape, taken, nested, target):
    """Where the declared input shapes (or --input-shape's) decide the condition, the If is
    replaced by the branch it takes: its nodes renamed apart, its constants and value_info
    moved along, an If inside it taken in turn; the result is that of the input model, bit
    for bit, on the evaluator and onnxruntime."""
    m = _squeeze_if_last_is_1(x_shape, nested)
    c = onnx.ModelProto()
    c.CopyFrom(m)
    result = convert_proto(c, target)
    onnx.checker.check_model(c, full_check=True)
    assert "If" not in {n.op_type for n in c.graph.node}
    said = [ch.what for ch in result.changes if ch.action == "take_branch"]
    assert len(said) == 1 + nested and said[0].startswith(f"replaced by its {taken} branch")
    x = np.array([-1.5, 0.0, -0.0, 2.0, np.nan, np.inf, -np.inf, 3.0], np.float32)
    feeds = {"x": np.resize(x, x_shape)}
    want = evaluate(m, feeds)["out"]
    assert_exact(want, evaluate(c, feeds)["out"], "evaluator")
    theirs = [run_onnxruntime(k, feeds) for k in (m, c)]
    assert_exact(theirs[0][0], theirs[1][0], "onnxruntime")


def test_branch_taken_where_the_dim_read_is_known_only():
    """``x.shape[-1]`` decides when that dim is declared, whatever the others are; not when
    it is open."""
    m = _squeeze_if_last_is_1(("N", "T"))
    with pytest.raises(ConversionError, match=r"its branches give output 0 in shapes .*the "
                                              r"input shapes decide its condition"):
        convert_proto(m, 9)
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 1  # [N, 1]: decided
    convert_proto(m, 9)
    assert [n.op_type for n in m.graph.node][-2:] == ["Squeeze", "Relu"]


def test_a_condition_that_is_not_a_bool_is_not_taken():
    """If's condition is a bool: a constant of another type (a model onnx's checker rejects)
    decides nothing."""
    m = _if(squeeze=True)
    m.graph.input.pop(0)
    m.graph.initializer.append(numpy_helper.from_array(np.array(1, np.int64), "c"))
    with pytest.raises(ConversionError, match=r"its branches give output 0 in shapes"):
        convert_proto(m, 10)
    m.graph.initializer[-1].CopyFrom(numpy_helper.from_array(np.array(True), "c"))
    convert_proto(m, 10)
    assert [n.op_type for n in m.graph.node] == ["Squeeze"]  # (its axes an attribute at 10)
