"""fuse: broadcasting, opsets and element types; subgraphs and functions."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from conftest import make_model, vi
from fuse_helpers import (
    XS,
    attrs,
    const,
    feeds_for,
    fuses_to,
    init,
    model,
    ops,
    refused,
    same_numbers,
    specials,
)
from onnx import TensorProto as TP
from onnx import helper

from opshift.fuse.driver import fuse_with_result
from opshift.fuse.report import USED_OUTSIDE

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


# -- broadcasting, opsets, types ------------------------------------------------------------


def test_slope_that_would_broadcast_x_to_another_shape_is_refused():
    nodes = [const("z", 0.0), helper.make_node("Less", ["x", "z"], ["c"]),
             helper.make_node("Mul", ["s", "x"], ["sx"]),
             helper.make_node("Where", ["c", "sx", "x"], ["y"])]
    m = make_model(nodes, [vi("x", shape=(1, 3))], [vi("y", shape=(2, 3))], opset=17,
                   initializers=[init("s", np.full((2, 3), 0.5))])
    refused(m, "does not broadcast")


def test_legacy_prelu_placement_must_match_the_pattern():
    """Opset 6: a 1-D slope the pattern's Mul puts on the last axis, whose length is also
    X's channel count: PRelu-6 would apply it per channel (axis 1), so the slope is given to
    it as a new constant reshaped to [1, 1, 1, 3]."""
    def m(axis):
        kw = {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}
        return model([helper.make_node("Mul", ["x", "s"], ["sx"], **kw),
                      helper.make_node("Max", ["x", "sx"], ["y"])], opset=6, shape=(2, 3, 4, 3),
                     inits=[init("s", [0.5, 0.25, 1.0])])
    fused, _ = fuse_with_result(m(None))
    assert ops(fused) == ["PRelu"]
    (slope,) = [n for n in fused.graph.node if n.op_type == "Constant"]
    assert list(slope.attribute[0].t.dims) == [1, 1, 1, 3]
    same_numbers(m(None), fused, feeds_for(m(None)))
    fused, _ = fuse_with_result(m(1))  # Mul puts it on axis 1, as PRelu-6 does
    assert ops(fused) == ["PRelu"] and fused.graph.node[-1].input[1] == "s"
    same_numbers(m(1), fused, feeds_for(m(1)))


def test_value_used_outside_the_pattern_blocks_fusion():
    nodes = [const("z", 0.0), helper.make_node("Less", ["x", "z"], ["c"]),
             const("s", 0.5), helper.make_node("Mul", ["s", "x"], ["sx"]),
             helper.make_node("Where", ["c", "sx", "x"], ["y"])]
    m = model(nodes, outputs=("y", "sx"))
    refused(m, USED_OUTSIDE)
    # the comparison also feeds another node
    m = model([*nodes, helper.make_node("Cast", ["c"], ["y2"], to=TP.FLOAT)],
              outputs=("y", "y2"))
    refused(m, USED_OUTSIDE)


def test_element_type_the_target_op_does_not_accept_is_refused():
    # bfloat16 at opset 15: PRelu-9 and LeakyRelu-6 do not accept it (they do from 16)
    nodes = [const("z", 0.0, ml_dtypes.bfloat16), helper.make_node("Less", ["x", "z"], ["c"]),
             const("s", 0.5, ml_dtypes.bfloat16), helper.make_node("Mul", ["s", "x"], ["sx"]),
             helper.make_node("Where", ["c", "sx", "x"], ["y"])]
    refused(model(nodes, opset=15, elem=TP.BFLOAT16), "does not accept element type bfloat16")
    fused, _ = fuse_with_result(model(nodes, opset=16, elem=TP.BFLOAT16))
    assert ops(fused) == ["LeakyRelu"]


def test_integer_pattern_fuses_to_prelu():
    nodes = [const("z", 0, np.int32), helper.make_node("Less", ["x", "z"], ["c"]),
             const("s", 3, np.int32), helper.make_node("Mul", ["s", "x"], ["sx"]),
             helper.make_node("Where", ["c", "sx", "x"], ["y"])]
    # onnxruntime has no int32 PRelu kernel: the evaluator checks the numbers
    fuses_to(model(nodes, opset=13, elem=TP.INT32), "PRelu")


def test_integer_min_and_relu_sub_forms_are_refused():
    x = np.array([np.iinfo(np.int32).max], np.int32)
    with np.errstate(over="ignore"):
        assert np.minimum(x, x * np.int32(2))[0] != x[0]  # 2*x wraps, Min picks it
    m = model([const("a", 2, np.int32), helper.make_node("Mul", ["x", "a"], ["ax"]),
               helper.make_node("Min", ["x", "ax"], ["y"])], opset=14, elem=TP.INT32)
    refused(m, "wraps around")
    sub = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["x"], ["nx"]),
                 helper.make_node("Relu", ["nx"], ["rn"]),
                 helper.make_node("Mul", ["s", "rn"], ["srn"]),
                 helper.make_node("Sub", ["r", "srn"], ["y"])], opset=14, elem=TP.INT32,
                inits=[init("s", [[2], [3], [1]], np.int32)])
    refused(sub, "most negative")


def test_selu_body_with_different_alphas_is_refused():
    nodes = [const("z", 0.0), const("a1", 1.5), const("a2", 1.25), const("g", 1.05),
             helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Mul", ["a1", "e"], ["ae"]),
             helper.make_node("Sub", ["ae", "a2"], ["aea"]),
             helper.make_node("Mul", ["g", "aea"], ["neg"]),
             helper.make_node("Mul", ["g", "x"], ["pos"]),
             helper.make_node("Less", ["x", "z"], ["c"]),
             helper.make_node("Where", ["c", "neg", "pos"], ["y"])]
    refused(model(nodes, opset=13), "differ")
    nodes[2] = const("a2", 1.5)
    fused, _ = fuses_to(model(nodes, opset=13), "Selu", signed_zeros=False)
    assert attrs(fused, "Selu") == {"alpha": 1.5, "gamma": pytest.approx(1.05)}


def test_subgraph_patterns_are_fused():
    body = [const("s", 0.25), helper.make_node("Mul", ["x", "s"], ["sx"]),
            helper.make_node("Max", ["x", "sx"], ["then_y"])]
    then = helper.make_graph(body, "then", [], [vi("then_y", shape=XS)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["else_y"])], "else", [],
                              [vi("else_y", shape=XS)])
    m = make_model([helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)],
                   [vi("x", shape=XS), helper.make_tensor_value_info("cond", TP.BOOL, [])],
                   [vi("y", shape=XS)], opset=17)
    fused, result = fuse_with_result(m)
    (g,) = [a.g for a in fused.graph.node[0].attribute if a.name == "then_branch"]
    assert [n.op_type for n in g.node] == ["LeakyRelu"], result.lines()
    feeds = {"x": specials(np.float32, (2, 3, 4)), "cond": np.array(True)}
    same_numbers(m, fused, feeds)


def _max_form(x: str, y: str, tag: str, a: float = 0.25) -> list:
    return [const(f"{tag}_a", a), helper.make_node("Mul", [x, f"{tag}_a"], [f"{tag}_ax"]),
            helper.make_node("Max", [x, f"{tag}_ax"], [y], name=f"{tag}_max")]


def test_fusions_in_main_graph_nested_subgraphs_and_functions_are_written_back():
    """Each scope's node list is edited where it fused -- main graph, an If inside an If,
    a function body -- and nowhere else."""
    inner_then = helper.make_graph(_max_form("x", "it_y", "it"), "inner_then", [],
                                   [vi("it_y", shape=XS)])
    inner_else = helper.make_graph([helper.make_node("Neg", ["x"], ["ie_y"])], "inner_else",
                                   [], [vi("ie_y", shape=XS)])
    outer_then = helper.make_graph(
        [helper.make_node("If", ["cond"], ["inner"], then_branch=inner_then,
                          else_branch=inner_else, name="inner_if"),
         *_max_form("inner", "ot_y", "ot", 0.5)], "outer_then", [], [vi("ot_y", shape=XS)])
    outer_else = helper.make_graph([helper.make_node("Identity", ["x"], ["oe_y"])],
                                   "outer_else", [], [vi("oe_y", shape=XS)])
    f = helper.make_function("local", "F", ["fx"], ["fy"], _max_form("fx", "fy", "f", 0.125),
                             [helper.make_opsetid("", 17)])
    nodes = [*_max_form("x", "m", "main"),
             helper.make_node("If", ["cond"], ["i"], then_branch=outer_then,
                              else_branch=outer_else, name="outer_if"),
             helper.make_node("F", ["i"], ["fo"], domain="local", name="call"),
             helper.make_node("Add", ["m", "fo"], ["y"], name="add")]
    m = make_model(nodes, [vi("x", shape=XS), helper.make_tensor_value_info("cond", TP.BOOL, [])],
                   [vi("y", shape=XS)], opset=17, functions=[f],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    before = m.SerializeToString()
    fused, result = fuse_with_result(m)
    assert m.SerializeToString() == before
    assert sorted(e.node for e in result.fused) == ["f_max", "it_max", "main_max", "ot_max"]
    onnx.checker.check_model(fused, full_check=True)

    def listing(nodes):
        return [(n.op_type, n.name) for n in nodes if n.op_type != "Constant"]

    assert listing(fused.graph.node) == [("LeakyRelu", "main_max"), ("If", "outer_if"),
                                         ("F", "call"), ("Add", "add")]
    outer = {a.name: a.g for a in fused.graph.node[1].attribute}
    assert listing(outer["then_branch"].node) == [
        ("If", "inner_if"), ("LeakyRelu", "ot_max")]
    assert outer["else_branch"].SerializeToString() == outer_else.SerializeToString()
    inner = {a.name: a.g for a in outer["then_branch"].node[0].attribute}
    assert listing(inner["then_branch"].node) == [("LeakyRelu", "it_max")]
    assert inner["else_branch"].SerializeToString() == inner_else.SerializeToString()
    assert listing(fused.functions[0].node) == [("LeakyRelu", "f_max")]
    for cond in (True, False):
        same_numbers(m, fused, {"x": specials(np.float32, (2, 3, 4)), "cond": np.array(cond)})
