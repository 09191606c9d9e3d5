"""Below opset 9 a converted model declares IR 3, which lists every initializer among its
graph's inputs. A subgraph takes no other inputs than its own (a Loop body's iteration
number, condition and loop-carried values), so its initializers -- its own, or the Constant
nodes of integer types that become initializers below 9 -- move to the main graph, renamed
where a name is taken; the Loop keeps running."""

from __future__ import annotations

import numpy as np
import onnx
from conftest import assert_exact, make_model, onnxruntime_outputs, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.convert.engine import convert_proto
from opshift.evaluator import evaluate


def _loop() -> onnx.ModelProto:
    k = numpy_helper.from_array(np.array([1, 2, 3], np.int64))
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond"),
         helper.make_node("Constant", [], ["k"], name="k", value=k),
         helper.make_node("Add", ["v_in", "k"], ["v_out"], name="add")], "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("v_in", T.INT64, [3])],
        [vi("cond_out", T.BOOL, []), vi("v_out", T.INT64, [3])])
    return make_model([helper.make_node("Loop", ["n", "", "x"], ["y"], name="loop",
                                        body=body)],
                      [vi("n", T.INT64, []), vi("x", T.INT64, [3])], [vi("y", T.INT64, [3])],
                      opset=11)


def _copy(m: onnx.ModelProto) -> onnx.ModelProto:
    c = onnx.ModelProto()
    c.CopyFrom(m)
    return c


def test_a_loop_bodys_integer_constant_moves_to_the_main_graph_below_9():
    m = _loop()
    c = _copy(m)
    convert_proto(c, 8)
    assert c.ir_version == 3
    onnx.checker.check_model(c, full_check=True)
    body = c.graph.node[0].attribute[0].g
    assert [v.name for v in body.input] == ["i", "cond_in", "v_in"]
    assert len(body.initializer) == 0 and "Constant" not in {n.op_type for n in body.node}
    assert [t.name for t in c.graph.initializer] == ["k"]
    assert "k" in {v.name for v in c.graph.input}
    feeds = {"n": np.array(3), "x": np.array([0, -1, 5], np.int64)}
    want = evaluate(m, feeds)["y"]
    assert_exact(np.array([3, 5, 14]), want, "original")
    assert_exact(want, evaluate(c, feeds)["y"], "converted")
    ort = onnxruntime_outputs(c, feeds)
    if not isinstance(ort, str):
        assert_exact(want, ort[0], "onnxruntime")


def test_branch_initializers_of_one_name_are_renamed_as_they_move():
    def branch(name: str, value: float) -> onnx.GraphProto:
        k = numpy_helper.from_array(np.array([value], np.float32), "k")
        return helper.make_graph([helper.make_node("Add", ["x", "k"], [name], name=name)],
                                 name, [], [vi(name, T.FLOAT, [1])], initializer=[k])

    m = make_model([helper.make_node("If", ["c"], ["y"], name="if",
                                     then_branch=branch("t", 1.0),
                                     else_branch=branch("e", 2.0))],
                   [vi("c", T.BOOL, []), vi("x", T.FLOAT, [1]), vi("k", T.FLOAT, [1])],
                   [vi("y", T.FLOAT, [1])], opset=11)  # 'k' is also the graph's input
    c = _copy(m)
    convert_proto(c, 7)
    onnx.checker.check_model(c, full_check=True)
    assert sorted(t.name for t in c.graph.initializer) == ["k_1", "k_2"]
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": np.array([0.5], np.float32),
                 "k": np.array([100], np.float32)}
        assert_exact(evaluate(m, feeds)["y"], evaluate(c, feeds)["y"], str(cond))


def test_from_9_subgraph_initializers_stay():
    m = _loop()
    c = _copy(m)
    convert_proto(c, 9)
    assert c.ir_version == 4 and len(c.graph.initializer) == 0
