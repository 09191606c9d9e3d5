"""Structural checks: each problem is found and named in one line."""

from __future__ import annotations

import pytest
from conftest import make_model, vi
from onnx import TensorProto, helper

from opshift.check import structure
from opshift.errors import ModelLoadError

F = TensorProto.FLOAT


def _chain(*nodes, outputs=("y",), opset=13, **kw):
    return make_model(list(nodes), [vi("x", shape=[2])], [vi(o, shape=[2]) for o in outputs],
                      opset=opset, **kw)


def test_clean_model_has_no_problems():
    m = _chain(helper.make_node("Relu", ["x"], ["t"], name="a"),
               helper.make_node("Neg", ["t"], ["y"], name="b"))
    assert structure.problems(m) == []


def test_cycle_is_named():
    m = _chain(helper.make_node("Relu", ["y"], ["t"], name="a"),
               helper.make_node("Neg", ["t"], ["y"], name="b"))
    with pytest.raises(ModelLoadError, match=r"node 'a' \(Relu\) uses 'y' before it is defined"):
        structure.check(m, "m.onnx")


def test_duplicate_value_and_output():
    m = _chain(helper.make_node("Relu", ["x"], ["y"], name="a"),
               helper.make_node("Neg", ["x"], ["y"], name="b"), outputs=("y", "y"))
    kinds = [k for k, _ in structure.problems(m)]
    assert kinds == [structure.DUPLICATE_VALUE, structure.DUPLICATE_OUTPUT]
    structure.check(m, allow=[structure.DUPLICATE_VALUE, structure.DUPLICATE_OUTPUT])


def test_function_defined_twice_is_named():
    """onnx's checker refuses it too; a call could mean either body (onnx_ir keeps one)."""
    def f(op):
        return helper.make_function("local", "F", ["a"], ["b"],
                                    [helper.make_node(op, ["a"], ["b"])],
                                    [helper.make_opsetid("", 13)])

    m = _chain(helper.make_node("F", ["x"], ["y"], domain="local", name="call"),
               functions=[f("Relu"), f("Neg")], extra_opsets=[helper.make_opsetid("local", 1)])
    (kind, msg), = structure.problems(m)
    assert kind == structure.DUPLICATE_FUNCTION
    with pytest.raises(ModelLoadError, match=r"^m.onnx: function local::F: defined twice"):
        structure.check(m, "m.onnx")
    del m.functions[1]
    assert structure.problems(m) == []


def test_missing_opset_and_unknown_op():
    m = _chain(helper.make_node("Foo", ["x"], ["y"], domain="com.example", name="f"))
    assert structure.problems(m)[0][0] == structure.MISSING_OPSET
    m = _chain(helper.make_node("Gelu", ["x"], ["y"], name="g"), opset=13)  # Gelu is opset 20
    (kind, msg), = structure.problems(m)
    assert kind == structure.UNKNOWN_OP and "'Gelu'" in msg and "opset 13" in msg


def test_subgraph_sees_outer_scope_and_its_errors_are_found():
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="inner")], "then",
                             [], [vi("t", shape=[2])])
    bad = helper.make_graph([helper.make_node("Relu", ["nope"], ["e"], name="inner2")], "else",
                            [], [vi("e", shape=[2])])
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    m = make_model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=bad,
                                     name="if")], [vi("x", shape=[2]), cond],
                   [vi("y", shape=[2])], opset=13)
    (kind, msg), = structure.problems(m)
    assert kind == structure.CYCLE and "'inner2'" in msg and "'nope'" in msg


def test_activation_attribute_types_and_unknown_attributes():
    m = _chain(helper.make_node("LeakyRelu", ["x"], ["y"], name="l", alpha=1))  # INT
    (kind, msg), = structure.problems(m)
    assert kind == structure.ATTRIBUTE and "'alpha' is INT" in msg and "FLOAT" in msg
    m = _chain(helper.make_node("Selu", ["x"], ["y"], name="s", beta=1.0))
    (kind, msg), = structure.problems(m)
    assert kind == structure.ATTRIBUTE and "'beta'" in msg and "Selu-6" in msg


def test_prelu_slope_checked_against_declared_shape_by_version():
    import numpy as np
    from onnx import numpy_helper

    def model(opset, slope_shape):
        x = helper.make_tensor_value_info("x", F, [1, 3, 4, 5])
        s = numpy_helper.from_array(np.ones(slope_shape, np.float32), "s")
        return make_model([helper.make_node("PRelu", ["x", "s"], ["y"], name="p")], [x],
                          [helper.make_tensor_value_info("y", F, [1, 3, 4, 5])], opset=opset,
                          initializers=[s])

    assert structure.problems(model(6, (3,))) == []  # legacy per channel
    assert structure.problems(model(9, (3, 1, 1))) == []
    (kind, msg), = structure.problems(model(9, (3,)))  # numpy: [3] meets the last axis, 5
    assert kind == structure.SLOPE and "'p'" in msg and "PRelu-9" in msg


def test_slope_problems_skipped_only_when_asked():
    """check() builds no message for slope problems its caller allows; problems() reports
    them unless told to skip them, and other problems either way."""
    import numpy as np
    from onnx import numpy_helper

    x = helper.make_tensor_value_info("x", F, [1, 3, 4, 5])
    s = numpy_helper.from_array(np.ones((3,), np.float32), "s")
    m = make_model([helper.make_node("PRelu", ["x", "s"], ["y"], name="p"),
                    helper.make_node("PRelu", ["y", "s"], ["y"], name="q")], [x],
                   [helper.make_tensor_value_info("y", F, [1, 3, 4, 5])], opset=9,
                   initializers=[s])
    assert [k for k, _ in structure.problems(m)] == [structure.SLOPE, structure.SLOPE,
                                                    structure.DUPLICATE_VALUE]
    assert [k for k, _ in structure.problems(m, skip=[structure.SLOPE])] == [
        structure.DUPLICATE_VALUE]
    structure.check(m, allow=[structure.SLOPE, structure.DUPLICATE_VALUE])
    with pytest.raises(ModelLoadError, match="'q'.*defines 'y'"):
        structure.check(m, allow=[structure.SLOPE])
