"""Conversion inside scopes: If branches and model-local functions (with their own source
opset) are converted with the graph; an error names op, node, scope and versions."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import attrs, make_model, vi
from convert_helpers import I64, F, check_same, convert, convert_other_ops, finish, one
from onnx import TensorProto, helper, numpy_helper

from opshift.errors import ConversionError


def unsqueeze_graph(name, x, y):
    axes = helper.make_node("Constant", [], [f"{name}_axes"], name=f"{name}_c",
                            value=numpy_helper.from_array(np.array([0], np.int64)))
    return [axes, helper.make_node("Unsqueeze", [x, f"{name}_axes"], [y], name=f"{name}_u")]


def test_subgraphs_converted():
    then_g = helper.make_graph(unsqueeze_graph("t", "x", "ty"), "then", [],
                               [vi("ty", F, [1, 3])])
    neg = helper.make_node("Neg", ["x"], ["nx"], name="neg")
    else_g = helper.make_graph([neg, *unsqueeze_graph("e", "nx", "ey")], "else", [],
                               [vi("ey", F, [1, 3])])
    m = make_model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g,
                                     else_branch=else_g)],
                   [vi("c", TensorProto.BOOL, []), vi("x", F, [3])], [vi("y", F, [1, 3])],
                   opset=13)
    feeds = [{"c": np.array(v), "x": np.arange(3, dtype=np.float32)} for v in (True, False)]
    before = onnx.ModelProto()
    before.CopyFrom(m)
    changes = convert(m, 13, 11)
    assert {c.scope for c in changes if c.op == "Unsqueeze"} == {
        "graph 'g'/node 'if'/then_branch", "graph 'g'/node 'if'/else_branch"}
    for g in (m.graph.node[0].attribute[0].g, m.graph.node[0].attribute[1].g):
        u = next(n for n in g.node if n.op_type == "Unsqueeze")
        assert len(u.input) == 1 and attrs(u) == {"axes": [0]}
        assert not any(n.op_type == "Constant" for n in g.node)
    for f in feeds:
        check_same(before, m, f)


def test_functions_converted_and_kept():
    fn = helper.make_function("local", "F", ["x"], ["y"], unsqueeze_graph("f", "x", "y"),
                              [helper.make_opsetid("", 13)])
    m = make_model([helper.make_node("F", ["x"], ["y"], name="call", domain="local")],
                   [vi("x", F, [3])], [vi("y", F, [1, 3])], opset=13, functions=[fn],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    before = onnx.ModelProto()
    before.CopyFrom(m)
    changes = convert_other_ops(m, 13, 11)
    assert [(c.op, c.scope) for c in changes if c.action == "rewrite"] == [
        ("Unsqueeze", "function local::F")]
    finish(m, 11)
    m.functions[0].opset_import[0].version = 11
    onnx.checker.check_model(m, full_check=True)
    assert [f.name for f in m.functions] == ["F"]
    u = next(n for n in m.functions[0].node if n.op_type == "Unsqueeze")
    assert attrs(u) == {"axes": [0]}
    check_same(before, m, {"x": np.arange(3, dtype=np.float32)})


def test_function_with_its_own_source_opset():
    # The function imports opset 11 while the model imports 13: its nodes start from 11.
    body = [helper.make_node("Unsqueeze", ["x"], ["y"], name="fu", axes=[0])]
    fn = helper.make_function("local", "F", ["x"], ["y"], body, [helper.make_opsetid("", 11)])
    m = make_model([helper.make_node("F", ["x"], ["y"], name="call", domain="local")],
                   [vi("x", F, [3])], [vi("y", F, [1, 3])], opset=13, functions=[fn],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    changes = convert_other_ops(m, 13, 13)
    assert [(c.node, c.from_version, c.to_version) for c in changes] == [("fu", 11, 13)]
    assert len(m.functions[0].node[1].input) == 2  # axes moved to an input (Constant node)
    assert m.functions[0].node[0].op_type == "Constant"


def test_error_names_op_node_scope_and_versions():
    m = make_model([one("Scan", ["s", "x"], ["y"], num_scan_inputs=1,
                        body=helper.make_graph([], "b", [], []))],
                   [vi("s", I64, [1]), vi("x", F, [1, 2])], [vi("y", F, None)], opset=8)
    with pytest.raises(ConversionError) as e:
        convert_other_ops(m, 8, 9)
    msg = str(e.value)
    assert "node 'n_scan'" in msg and "Scan-8 -> 9" in msg and "graph 'g'" in msg
    assert "\n" not in msg
