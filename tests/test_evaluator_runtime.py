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
         helper.make_node("Erf", ["t"], ["e"]),  # onnx.reference's kernel, every iteration
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
        want = t + np.float32(math.erf(float(t)))
    got = evaluate(m, {"n": np.array(7, np.int64), "a0": np.float32(-0.5)})["a"]
    np.testing.assert_allclose(got, want, rtol=1e-6)
