"""convert reading the types of values: a sequence's or optional's whole type (from
declarations and shape inference), an output typed only by another domain's schema
(ai.onnx.ml); OptionalGetElement / OptionalHasElement of a plain value go below version 18 as
what they compute. A step that only adds types is a relabel; a value's type, found through
other nodes (a Cast's ``to`` included), missing at the target is refused."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from conftest import make_model, vi
from convert_helpers import F, convert, convert_other_ops, one
from onnx import TensorProto, helper
from onnx import TensorProto as T

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.verify import compare


def _node_tests():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return [c for c in cases if not all(
        v.type.HasField("tensor_type") for v in [*c.model.graph.input, *c.model.graph.output])
        or any(n.op_type.startswith(("Sequence", "Optional", "SplitToSequence",
                                     "ConcatFromSequence")) for n in c.model.graph.node)]


def _same_values(c, model) -> None:
    inputs, expected = c.data_sets[0]
    g = model.graph
    got = evaluate(model, {v.name: t for v, t in zip(g.input, inputs)})
    for v, want in zip(g.output, expected):
        r = compare(want, got[v.name], ulp=0)
        assert r.ok, (c.name, v.name, r.reason)


def test_onnx_node_tests_of_sequences_and_optionals_convert_exactly():
    """Every onnx node test taking, giving or making sequences and optionals converts to
    opsets 18 and 24 (all their types exist there), and wherever it converts to 15 and 11
    computes the expected values; below, only what has no exact form is refused."""
    converted = {18: 0, 24: 0, 15: 0, 11: 0}
    cases = _node_tests()
    for c in cases:
        for target in converted:
            m = onnx.ModelProto()
            m.CopyFrom(c.model)
            try:
                convert_proto(m, target)
            except ConversionError as e:
                assert target in (15, 11), (c.name, target, str(e))
                assert "unknown" not in str(e), (c.name, target, str(e))
                continue
            converted[target] += 1
            onnx.checker.check_model(m, full_check=True)
            _same_values(c, m)
    assert converted[18] == converted[24] == len(cases) >= 30
    # (SequenceMap's body holds a Loop, which convert does not inline below 17; Identity
    # takes sequences from 14 and optionals from 16: refused below, issue 38 item 15)
    assert converted[15] >= 25 and converted[11] >= 10, converted


def _opt_model(op: str, given: str, opset: int = 18) -> onnx.ModelProto:
    """``op`` of a tensor (``given='tensor'``), of an optional holding it (``'optional'``) or
    of nothing (``''``)."""
    nodes, inputs = [], []
    if given:
        inputs.append(vi("x", T.FLOAT, [2]))
    if given == "optional":
        nodes.append(helper.make_node("Optional", ["x"], ["o"]))
    arg = {"tensor": "x", "optional": "o", "": ""}[given]
    out = vi("y", T.BOOL if op == "OptionalHasElement" else T.FLOAT, [] if op ==
             "OptionalHasElement" else [2])
    nodes.append(helper.make_node(op, [arg] if arg else [], ["y"], name="n"))
    return make_model(nodes, inputs, [out], opset=opset)


@pytest.mark.parametrize("op,given,target,ops_after", [
    ("OptionalGetElement", "tensor", 15, ["Identity"]),
    ("OptionalGetElement", "tensor", 9, ["Identity"]),
    ("OptionalGetElement", "optional", 15, ["Optional", "OptionalGetElement"]),
    ("OptionalHasElement", "tensor", 15, ["Identity"]),
    ("OptionalHasElement", "tensor", 9, ["Identity"]),
    ("OptionalHasElement", "", 15, ["Identity"]),
    ("OptionalHasElement", "optional", 15, ["Optional", "OptionalHasElement"]),
])
def test_optional_ops_of_plain_values_below_18(op, given, target, ops_after):
    m = _opt_model(op, given)
    feeds = {"x": np.array([1.5, -0.0], np.float32)} if given else {}
    want = evaluate(m, feeds)["y"]
    res = convert_proto(m, target)
    assert [n.op_type for n in m.graph.node] == ops_after
    assert m.opset_import[0].version == target
    onnx.checker.check_model(m, full_check=True)
    assert compare(want, evaluate(m, feeds)["y"], ulp=0).ok
    if ops_after == ["Identity"]:
        assert any(op in ch.what and "written as" in ch.what for ch in res.changes)


def test_optional_ops_refused_where_no_exact_form_exists():
    m = _opt_model("OptionalHasElement", "optional")
    with pytest.raises(ConversionError, match="Optional does not exist at opset 11"):
        convert_proto(m, 11)
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(T.FLOAT, None))
    get = make_model([helper.make_node("SequenceEmpty", [], ["s"]),
                      helper.make_node("OptionalGetElement", ["s"], ["y"], name="get")], [],
                     [helper.make_value_info("y", seq)], opset=18)
    with pytest.raises(ConversionError, match=r"OptionalGetElement of a seq\(tensor\(float\)\) "
                                              "is that value, which Identity-1 does not take"):
        convert_proto(get, 11)


def test_a_sequence_type_refused_where_the_op_does_not_take_it():
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(T.FLOAT, None))
    branch = helper.make_graph([helper.make_node("SequenceEmpty", [], ["s"])], "b", [],
                               [helper.make_value_info("s", seq)])
    m = make_model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch,
                                     else_branch=branch)],
                   [vi("c", T.BOOL, [])], [helper.make_value_info("y", seq)], opset=13)
    with pytest.raises(ConversionError, match=r"output 0 \('y'\) is seq\(tensor\(float\)\), "
                                              "not allowed at If-11"):
        convert_proto(m, 11)
    split = make_model([helper.make_node("SplitToSequence", ["x"], ["s"])],
                       [vi("x", T.BFLOAT16, [4])], [helper.make_value_info("s", seq)],
                       opset=24)
    with pytest.raises(ConversionError, match=r"input 0 \('x'\) is tensor\(bfloat16\), not "
                                              "allowed at SplitToSequence-11"):
        convert_proto(split, 18)


def test_an_output_typed_by_an_ai_onnx_ml_schema():
    """SVMClassifier's scores are tensor(float) by its schema, which onnx's shape inference
    does not apply: the Cast reading them goes below Cast-9 (whose types Cast-6 narrows)
    knowing that, as skl2onnx's SVC exports need."""
    svm = helper.make_node("SVMClassifier", ["X"], ["label", "scores"], domain="ai.onnx.ml",
                           classlabels_ints=[0, 1], kernel_type="LINEAR",
                           support_vectors=[1., 0., 0., 1.], vectors_per_class=[1, 1],
                           coefficients=[1.0, -1.0], rho=[0.25])
    m = make_model([svm, helper.make_node("Cast", ["scores"], ["y"], to=T.DOUBLE)],
                   [vi("X", T.FLOAT, [3, 2])], [vi("y", T.DOUBLE, [3, 2]),
                                                vi("label", T.INT64, [3])],
                   opset=9, extra_opsets=[helper.make_opsetid("ai.onnx.ml", 1)])
    x = np.array([[1, 2], [-1, 0.5], [0, 0]], np.float32)
    want = evaluate(m, {"X": x})
    convert_proto(m, 6)
    assert [n.op_type for n in m.graph.node] == ["SVMClassifier", "Cast"]
    got = evaluate(m, {"X": x})
    assert all(compare(want[k], got[k], ulp=0).ok for k in want)


def test_step_that_only_adds_types_is_a_relabel():
    m = make_model([one("Relu", ["x"], ["y"])], [vi("x", F, [2, 3])], [vi("y", F, [2, 3])],
                   opset=14)
    changes = convert(m, 14, 6)
    assert [(c.action, c.from_version, c.to_version) for c in changes] == [("relabel", 14, 6)]
    assert m.graph.node[0].SerializeToString() == one("Relu", ["x"], ["y"]).SerializeToString()


def test_type_missing_at_the_target_is_refused():
    m = make_model([one("Relu", ["x"], ["y"])], [vi("x", TensorProto.INT8, [2])],
                   [vi("y", TensorProto.INT8, [2])], opset=14)
    before = m.SerializeToString()
    with pytest.raises(ConversionError, match=r"node 'n_relu' \(Relu-14 -> 13.*tensor\(int8\)"):
        convert_other_ops(m, 14, 13)
    assert m.SerializeToString() == before  # a refusal writes nothing


def test_type_found_by_propagation_through_other_nodes():
    # Abs keeps the type of its input; the Relu's input type is only known through it.
    m = make_model([one("Abs", ["x"], ["a"]), one("Relu", ["a"], ["y"])],
                   [vi("x", TensorProto.INT32, [2])], [vi("y", TensorProto.INT32, [2])],
                   opset=14)
    with pytest.raises(ConversionError, match=r"tensor\(int32\), not allowed at Relu-13"):
        convert_other_ops(m, 14, 13)


def test_type_propagated_through_cast():
    m = make_model([one("Cast", ["x"], ["c"], to=TensorProto.INT8), one("Relu", ["c"], ["y"])],
                   [vi("x", F, [2])], [vi("y", TensorProto.INT8, [2])], opset=14)
    with pytest.raises(ConversionError, match=r"'c'\) is tensor\(int8\), not allowed"):
        convert_other_ops(m, 14, 13)
    m = make_model([one("Cast", ["x"], ["c"], to=TensorProto.FLOAT), one("Relu", ["c"], ["y"])],
                   [vi("x", TensorProto.INT8, [2])], [vi("y", F, [2])], opset=14)
    assert [(c.op, c.action) for c in convert_other_ops(m, 14, 13)] == [("Relu", "relabel")]
