"""Model-local function bodies typed by their calls: each call site (in the main graph, a
subgraph or another function) gives the body's element types; a body whose conversion
depends on the call type, or never called where types are needed, is refused clearly."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import MODELS, attrs, make_model, vi
from convert_helpers import F, convert_other_ops, finish, one
from onnx import TensorProto, helper, numpy_helper

from opshift.errors import ConversionError
from opshift.evaluator import evaluate


def test_local_function_model_every_opset():
    """models/local_function.onnx: Add inside the function is typed from the call sites, so
    every opset the activations allow converts with the model's own expected numbers."""
    import opshift

    z = np.load(MODELS / "local_function.npz")
    ins = {"x": z["input:x"]}
    want = z["output:y"]
    done, refused = [], {}
    for target in range(1, onnx.defs.onnx_opset_version() + 1):
        m = onnx.load(MODELS / "local_function.onnx")
        try:
            out = opshift.convert(m, target)
        except ConversionError as e:
            msg = str(e)
            assert "\n" not in msg and "node '" in msg and "-> " in msg, msg
            assert "element type" not in msg, msg  # the call sites give every type
            refused[target] = msg
            continue
        onnx.checker.check_model(out, full_check=True)
        got = evaluate(out, ins)["y"]
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        done.append(target)
    assert done == list(range(7, onnx.defs.onnx_opset_version() + 1)), refused
    # Below 7 legacy broadcasting needs shapes a function body does not carry.
    assert all("shape" in msg for msg in refused.values()), refused


def _twice_called(types, body=None, opset=14):
    """F(x) = Add(x, x), called once per element type in ``types`` from the main graph (the
    second call inside an If branch, to check calls in subgraphs count too)."""
    body = body or [helper.make_node("Add", ["x", "x"], ["y"], name="fadd")]
    fn = helper.make_function("local", "F", ["x"], ["y"], body,
                              [helper.make_opsetid("", opset)])
    calls = [helper.make_node("F", ["a"], ["ya"], name="call_a", domain="local")]
    inputs = [vi("a", types[0], [3]), vi("c", TensorProto.BOOL, [])]
    outputs = [vi("ya", types[0], [3])]
    if len(types) > 1:
        inputs.append(vi("b", types[1], [3]))
        outputs.append(vi("yb", types[1], [3]))
        branch = helper.make_graph(
            [helper.make_node("F", ["b"], ["yb_in"], name="call_b", domain="local")],
            "then", [], [vi("yb_in", types[1], [3])])
        other = helper.make_graph([helper.make_node("Identity", ["b"], ["yb_else"])],
                                  "else", [], [vi("yb_else", types[1], [3])])
        calls.append(helper.make_node("If", ["c"], ["yb"], name="if",
                                      then_branch=branch, else_branch=other))
    return make_model(calls, inputs, outputs, opset=opset, functions=[fn],
                      extra_opsets=[helper.make_opsetid("local", 1)])


def _finish_functions(m, target):
    finish(m, target)
    for f in m.functions:
        for imp in f.opset_import:
            if imp.domain in ("", "ai.onnx"):
                imp.version = target


def test_function_called_with_two_element_types_accepted_for_both():
    m = _twice_called([F, TensorProto.DOUBLE])
    changes = convert_other_ops(m, 14, 13)
    assert ("fadd", "relabel", "function local::F") in [
        (c.node, c.action, c.scope) for c in changes]
    _finish_functions(m, 13)
    onnx.checker.check_model(m, full_check=True)
    a = np.array([1.5, -2, 3e-8], np.float32)
    b = np.array([0.1, -7, 1e300], np.float64)
    got = evaluate(m, {"a": a, "b": b, "c": np.array(True)})
    np.testing.assert_array_equal(got["ya"], a + a)
    assert got["yb"].dtype == np.float64
    np.testing.assert_array_equal(got["yb"], b + b)


def test_function_called_with_a_type_the_target_lacks_is_refused_with_both_types():
    m = _twice_called([F, TensorProto.INT8])
    before = m.SerializeToString()
    with pytest.raises(ConversionError) as e:
        convert_other_ops(m, 14, 13)
    msg = str(e.value)
    assert "\n" not in msg and "node 'fadd'" in msg and "Add-14 -> 13" in msg
    assert "function local::F" in msg and "x: int8" in msg and "tensor(int8)" in msg
    assert m.SerializeToString() == before  # refused: nothing written


def test_function_whose_conversion_depends_on_the_call_type_is_refused():
    # CastLike below 15 becomes Cast(to=<like's type>): one body cannot serve both calls.
    like = helper.make_node("Constant", [], ["like"], name="k",
                            value=numpy_helper.from_array(np.zeros(1, np.float64)))
    body = [like, helper.make_node("CastLike", ["x", "like"], ["y0"], name="cl"),
            helper.make_node("CastLike", ["y0", "x"], ["y"], name="back")]
    m = _twice_called([F, TensorProto.FLOAT16], body, opset=19)
    with pytest.raises(ConversionError) as e:
        convert_other_ops(m, 19, 13)
    msg = str(e.value)
    assert "\n" not in msg and "node 'back'" in msg and "function local::F" in msg
    assert "x: float" in msg and "x: float16" in msg and "different conversions" in msg
    # Called with one type only, the same body converts, with the call's numbers.
    m = _twice_called([TensorProto.FLOAT16], body, opset=19)
    before = onnx.ModelProto()
    before.CopyFrom(m)
    convert_other_ops(m, 19, 13)
    _finish_functions(m, 13)
    onnx.checker.check_model(m, full_check=True)
    f = m.functions[0]
    assert [(n.op_type, attrs(n).get("to")) for n in f.node[1:]] == [
        ("Cast", TensorProto.DOUBLE), ("Cast", TensorProto.FLOAT16)]
    a = np.array([1.5, -2, 65504], np.float16)
    np.testing.assert_array_equal(evaluate(m, {"a": a, "c": np.array(True)})["ya"], a)


def test_calls_from_other_functions_type_the_callee():
    inner = helper.make_function("local", "G", ["x"], ["y"],
                                 [helper.make_node("Add", ["x", "x"], ["y"], name="gadd")],
                                 [helper.make_opsetid("", 14)])
    outer = helper.make_function("local", "F", ["x"], ["y"],
                                 [helper.make_node("G", ["x"], ["y"], name="callg",
                                                   domain="local")],
                                 [helper.make_opsetid("", 14), helper.make_opsetid("local", 1)])
    m = make_model([helper.make_node("F", ["a"], ["y"], name="callf", domain="local")],
                   [vi("a", TensorProto.DOUBLE, [2])], [vi("y", TensorProto.DOUBLE, [2])],
                   opset=14, functions=[inner, outer],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    changes = convert_other_ops(m, 14, 7)
    assert [(c.node, c.scope) for c in changes] == [("gadd", "function local::G")]
    _finish_functions(m, 7)
    onnx.checker.check_model(m, full_check=True)
    a = np.array([0.25, -3], np.float64)
    np.testing.assert_array_equal(evaluate(m, {"a": a})["y"], a + a)


def test_function_never_called():
    fn = helper.make_function("local", "F", ["x"], ["y"],
                              [helper.make_node("Add", ["x", "x"], ["y"], name="fadd")],
                              [helper.make_opsetid("", 14)])
    m = make_model([one("Relu", ["a"], ["y"])], [vi("a", F, [2])], [vi("y", F, [2])],
                   opset=14, functions=[fn], extra_opsets=[helper.make_opsetid("local", 1)])
    before = m.SerializeToString()
    # Add-14 -> 13 needs x's type: nothing gives it, so a clear refusal.
    with pytest.raises(ConversionError) as e:
        convert_other_ops(m, 14, 13)
    msg = str(e.value)
    assert "\n" not in msg and "node 'fadd'" in msg and "Add-14 -> 13" in msg
    assert "function local::F is never called" in msg
    assert m.SerializeToString() == before
    # A walk that needs no types (Reshape-14 -> 13, allowzero unset) relabels it untouched.
    fn = helper.make_function("local", "F", ["x", "s"], ["y"],
                              [helper.make_node("Reshape", ["x", "s"], ["y"], name="fr")],
                              [helper.make_opsetid("", 14)])
    del m.functions[:]
    m.functions.append(fn)
    before = m.SerializeToString()
    changes = convert_other_ops(m, 14, 13)
    assert [(c.node, c.action) for c in changes] == [("n_relu", "relabel"), ("fr", "relabel")]
    assert m.SerializeToString() == before


def test_function_names_are_typed_apart_from_the_graphs():
    # The graph's 'x' is int8 (not at Add-13); the function's own 'x' is the float it is
    # called with, so its Add converts.
    fn = helper.make_function("local", "F", ["x"], ["y"],
                              [helper.make_node("Add", ["x", "x"], ["y"], name="fadd")],
                              [helper.make_opsetid("", 14)])
    m = make_model([helper.make_node("Cast", ["x"], ["xf"], name="cast", to=F),
                    helper.make_node("F", ["xf"], ["y"], name="call", domain="local")],
                   [vi("x", TensorProto.INT8, [3])], [vi("y", F, [3])], opset=14,
                   functions=[fn], extra_opsets=[helper.make_opsetid("local", 1)])
    changes = convert_other_ops(m, 14, 13)
    assert [(c.node, c.action) for c in changes] == [("fadd", "relabel")]
    _finish_functions(m, 13)
    onnx.checker.check_model(m, full_check=True)
    x = np.array([-128, 5, 127], np.int8)
    np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], 2 * x.astype(np.float32))
