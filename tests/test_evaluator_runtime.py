"""The runtime's per-node caches (prepared nodes, initializers, onnx.reference kernels) across
loop iterations: every node, branch and kernel keeps its own entry."""

from __future__ import annotations

import math

import numpy as np
from conftest import make_model
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.evaluator import evaluate


def vi(name, elem=T.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _branch(name: str, op: str, value: float):
    return helper.make_graph([helper.make_node(op, ["acc", "c"], ["o"])], name, [], [vi("o")],
                             [numpy_helper.from_array(np.float32(value), "c")])


def test_loop_alternating_branches_with_same_named_initializers():
    """Each iteration runs the other If branch; both hold an initializer 'c' and one node
    of the same kind, so a cache keyed by a reused object id would mix them up."""
    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two"], ["r"]),
         helper.make_node("Equal", ["r", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["t"], then_branch=_branch("then", "Add", 1),
                          else_branch=_branch("else", "Add", 100)),
         helper.make_node("Atan", ["t"], ["e"]),  # onnx.reference's kernel, every iteration
         helper.make_node("Add", ["t", "e"], ["acc_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [vi("i", T.INT64, []), vi("cond", T.BOOL, []), vi("acc", T.FLOAT, [])],
        [vi("cond_out", T.BOOL, []), vi("acc_out", T.FLOAT, [])],
        [numpy_helper.from_array(np.int64(2), "two"),
         numpy_helper.from_array(np.int64(0), "zero")])
    m = make_model([helper.make_node("Loop", ["n", "", "a0"], ["a"], body=body)],
                   [vi("n", T.INT64, []), vi("a0", T.FLOAT, [])], [vi("a")], opset=16)
    want = np.float32(-0.5)
    for i in range(7):
        t = want + np.float32(1 if i % 2 == 0 else 100)
        want = t + np.float32(math.atan(float(t)))
    got = evaluate(m, {"n": np.array(7, np.int64), "a0": np.float32(-0.5)})["a"]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_type_check_once_per_op_and_dtypes_still_refuses_each_bad_node():
    """The schema's type check is made once per (op, input dtypes): a later node of the same
    op with other dtypes is checked on its own and refused by name; nodes without attributes
    share the schema's defaults, a node that sets one gets its own."""
    import pytest

    from opshift.errors import EvaluationError

    nodes = [helper.make_node("Add", ["x", "x"], ["a"], name="ok1"),
             helper.make_node("Add", ["a", "x"], ["b"], name="ok2"),
             helper.make_node("LeakyRelu", ["b"], ["c"], name="lr_default"),
             helper.make_node("LeakyRelu", ["c"], ["d"], name="lr_half", alpha=0.5),
             helper.make_node("LeakyRelu", ["d"], ["e"], name="lr_default2"),
             helper.make_node("Add", ["e", "w"], ["y"], name="bad")]
    m = make_model(nodes, [vi("x", shape=[2]), vi("w", T.DOUBLE, [2])], [vi("y", shape=[2])],
                   opset=16)
    x, w = np.array([-4.0, 2.0], np.float32), np.zeros(2)
    with pytest.raises(EvaluationError, match=r"node 'bad'.*inputs bound to T have different"):
        evaluate(m, {"x": x, "w": w})
    m.graph.node[-1].input[1] = "e"
    y = evaluate(m, {"x": x, "w": w})["y"]
    # x + x + x = [-12, 6]; LeakyRelu 0.01, 0.5, 0.01 on -12: -12 * 0.00005; then doubled
    assert y.dtype == np.float32
    assert y.tolist() == [np.float32(np.float32(np.float32(-12 * np.float32(0.01)) * 0.5)
                                     * np.float32(0.01)) * 2, 12.0]
