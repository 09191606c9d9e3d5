"""inline: model-local functions (all / named, nested, attribute references, activations
inside functions) and the activations in function bodies that stay functions."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.printer
import pytest
from conftest import make_model
from onnx import TensorProto as TP
from onnx import helper
from test_inline_ops import check_exact, special_values

from opshift import evaluate
from opshift.errors import OpshiftError
from opshift.inline import inline
from opshift.inline.inliner import inline_proto

ACTS = {"PRelu", "LeakyRelu", "Selu"}
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _model(opset: int) -> onnx.ModelProto:
    """main -> Outer(alpha=2) -> [Inner (LeakyRelu 0.3), Selu(alpha=@alpha), Neg]; Unused."""
    d = [helper.make_opsetid("", opset)]
    inner = helper.make_function("local", "Inner", ["a"], ["b"],
                                 [helper.make_node("LeakyRelu", ["a"], ["b"], alpha=0.3)], d)
    selu = helper.make_node("Selu", ["t"], ["u"])
    selu.attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    outer = helper.make_function(
        "local", "Outer", ["x"], ["y"],
        [helper.make_node("Inner", ["x"], ["t"], domain="local"), selu,
         helper.make_node("Neg", ["u"], ["y"])],
        d + [helper.make_opsetid("local", 1)], attributes=["alpha"])
    unused = helper.make_function("local", "Unused", ["x"], ["y"],
                                  [helper.make_node("Neg", ["x"], ["y"])], d)
    call = helper.make_node("Outer", ["x"], ["y"], domain="local", name="call")
    call.attribute.append(helper.make_attribute("alpha", 2.0))
    return make_model([call], [helper.make_tensor_value_info("x", TP.FLOAT, [64])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [64])], opset=opset,
                      functions=[outer, inner, unused],
                      extra_opsets=[helper.make_opsetid("local", 1)],
                      ir_version=max(8, 3))


def _all_ops(m: onnx.ModelProto) -> list[str]:
    ops = [n.op_type for n in m.graph.node]
    for f in m.functions:
        ops += [n.op_type for n in f.node]
    return ops


def _x() -> np.ndarray:
    return special_values(np.float32)[:64]


@pytest.mark.parametrize("opset", [13, 15, 18, 22])
def test_inline_all_functions_nested_with_attribute_reference(opset):
    m = _model(opset)
    onnx.checker.check_model(m, full_check=True)
    out = inline(m, functions="all")
    onnx.checker.check_model(out, full_check=True)
    assert [f.name for f in out.functions] == ["Unused"]  # never called, not asked for
    assert not ACTS & set(_all_ops(out))
    assert not {"Outer", "Inner"} & set(_all_ops(out))
    ref, got = evaluate(m, {"x": _x()})["y"], evaluate(out, {"x": _x()})["y"]
    # y = -Selu(alpha=2)(LeakyRelu(x)); the documented Selu -0 case shows up negated
    assert np.array_equal(np.isnan(ref), np.isnan(got))
    nz = ~np.isnan(ref) & (ref != 0)
    assert np.array_equal(ref[nz].view(np.uint32), got[nz].view(np.uint32))
    # the attribute reference was bound to the call's alpha=2, not Selu's default
    x = np.array([-1.0], np.float32)
    lr = np.float32(0.3) * x
    want = -(np.float32(1.0507010221481323) * (np.float32(2.0) * np.exp(lr) - np.float32(2)))
    mx = inline(_model(opset), functions="all")
    mx.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    mx.graph.output[0].type.tensor_type.shape.dim[0].dim_value = 1
    assert np.allclose(evaluate(mx, {"x": x})["y"], want, rtol=1e-6)


def test_inline_named_function_only():
    m = _model(18)
    r = inline_proto(m, ops="none", functions="Inner")
    assert r.functions_inlined == ["local::Inner"] and r.functions_removed == ["local::Inner"]
    assert sorted(f.name for f in m.functions) == ["Outer", "Unused"]
    outer = next(f for f in m.functions if f.name == "Outer")
    assert [n.op_type for n in outer.node] == ["LeakyRelu", "Selu", "Neg"]
    onnx.checker.check_model(m, full_check=True)


def test_attribute_reference_needs_castlike_or_function_inlining():
    from opshift.errors import ConversionError

    with pytest.raises(ConversionError, match=r"Selu-6, graph 'function local::Outer'.*"
                                              r"alpha=@alpha"):
        inline(_model(13))
    out = inline(_model(13), functions="all")  # the inliner binds @alpha first
    assert not ACTS & set(_all_ops(out))


def test_activations_inside_kept_functions_are_inlined():
    m13 = _model(13)  # static band: types come from the call sites (Outer -> Inner -> b)
    outer = next(f for f in m13.functions if f.name == "Outer")
    outer.node[1].attribute[0].ClearField("ref_attr_name")
    outer.node[1].attribute[0].f = 2.0
    del outer.attribute[:]
    m13.graph.node[0].ClearField("attribute")
    for m in (m13, _model(18)):
        out = inline(m)
        text = onnx.printer.to_text(out)
        assert "@alpha" in text or m is m13
        assert not ACTS & set(_all_ops(out))
        assert {"Outer", "Inner"} <= {f.name for f in out.functions}
        onnx.checker.check_model(out, full_check=True)
        ref, got = evaluate(m, {"x": _x()})["y"], evaluate(out, {"x": _x()})["y"]
        nz = ~np.isnan(ref) & (ref != 0)
        assert np.array_equal(ref[nz], got[nz]) and np.array_equal(np.isnan(ref), np.isnan(got))


def test_unknown_function_name_is_one_line_error():
    with pytest.raises(OpshiftError, match=r"no model-local function 'Nope'.*Outer"):
        inline(_model(18), functions="Nope")


def test_function_with_other_opset_is_refused():
    m = _model(18)
    m.functions[1].opset_import[0].version = 17
    with pytest.raises(OpshiftError, match="imports opset 17"):
        inline(m, functions="all")


def test_functions_in_subgraph_calls():
    m = _model(18)
    call = onnx.NodeProto()
    call.CopyFrom(m.graph.node[0])
    call.output[0] = "t"
    then = helper.make_graph([call], "then", [], [helper.make_tensor_value_info("t", TP.FLOAT,
                                                                               [64])])
    els = helper.make_graph([helper.make_node("Selu", ["x"], ["e"])], "else", [],
                            [helper.make_tensor_value_info("e", TP.FLOAT, [64])])
    del m.graph.node[:]
    m.graph.node.append(helper.make_node("If", ["c"], ["y"], then_branch=then,
                                         else_branch=els))
    m.graph.input.append(helper.make_tensor_value_info("c", TP.BOOL, []))
    onnx.checker.check_model(m, full_check=True)
    out = inline(m, functions="all")
    onnx.checker.check_model(out, full_check=True)
    assert b"Outer" not in out.graph.SerializeToString()
    for c in (True, False):
        feeds = {"x": _x(), "c": np.array(c)}
        ref, got = evaluate(m, feeds)["y"], evaluate(out, feeds)["y"]
        if not c:
            check_exact("Selu", 18, "other", _x(), ref, got)
        else:
            nz = ~np.isnan(ref) & (ref != 0)
            assert np.array_equal(ref[nz], got[nz])


def test_subgraph_inside_function_static_band():
    """Types for a Selu in an If branch inside a function come from the function's calls."""
    d = [helper.make_opsetid("", 13)]
    then = helper.make_graph([helper.make_node("Selu", ["a"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TP.DOUBLE, [4])])
    els = helper.make_graph([helper.make_node("Neg", ["a"], ["e"])], "else", [],
                            [helper.make_tensor_value_info("e", TP.DOUBLE, [4])])
    f = helper.make_function("local", "F", ["a", "c"], ["b"],
                             [helper.make_node("If", ["c"], ["b"], then_branch=then,
                                               else_branch=els)], d)
    call = helper.make_node("F", ["x", "c"], ["y"], domain="local")
    m = make_model([call], [helper.make_tensor_value_info("x", TP.DOUBLE, [4]),
                            helper.make_tensor_value_info("c", TP.BOOL, [])],
                   [helper.make_tensor_value_info("y", TP.DOUBLE, [4])], opset=13,
                   functions=[f], extra_opsets=[helper.make_opsetid("local", 1)],
                   ir_version=8)
    out = inline(m)
    onnx.checker.check_model(out, full_check=True)
    branch = next(a.g for a in out.functions[0].node[0].attribute if a.name == "then_branch")
    consts = [n for n in branch.node if n.op_type == "Constant"]
    assert consts and all(n.attribute[0].t.data_type == TP.DOUBLE for n in consts)
    xv = special_values(np.float64)[:4]
    feeds = {"x": xv, "c": np.array(True)}
    check_exact("Selu", 13, "other", xv, evaluate(m, feeds)["y"], evaluate(out, feeds)["y"])
