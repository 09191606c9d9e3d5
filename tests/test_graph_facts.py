"""The one Facts object every command reads (opshift.graph.facts): element types of
model-local function bodies, the caller's propagated types, the model's folder."""

from __future__ import annotations

import numpy as np
import onnx
from conftest import make_model, vi
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from opshift.graph.facts import Facts

LOCAL = helper.make_opsetid("local", 1)


def _body(value_info=()):
    f = helper.make_function("local", "F", ["a"], ["b"],
                             [helper.make_node("Relu", ["a"], ["r"]),
                              helper.make_node("Neg", ["r"], ["b"])],
                             [helper.make_opsetid("", 14)])
    f.value_info.extend(value_info)
    return f


def _model(inputs, nodes, functions):
    """The outputs of the calls of F are the graph's outputs (untyped: rank and type left
    to the facts)."""
    outs = [helper.make_value_info(n.output[0], onnx.TypeProto()) for n in nodes
            if n.op_type == "F"]
    return make_model(nodes, inputs, outs, opset=14, functions=functions,
                      extra_opsets=[LOCAL])


def test_body_types_where_every_typed_call_agrees():
    calls = [helper.make_node("F", ["x"], ["y"], domain="local"),
             helper.make_node("F", ["u"], ["z"], domain="local")]
    m = _model([vi("x", TP.DOUBLE, [2]), vi("u", TP.DOUBLE, [3])], calls, [_body()])
    assert Facts(m).elem_type("r", m.functions[0]) == TP.DOUBLE


def test_body_types_of_calls_that_disagree_are_unknown():
    calls = [helper.make_node("F", ["x"], ["y"], domain="local"),
             helper.make_node("F", ["u"], ["z"], domain="local")]
    m = _model([vi("x", TP.DOUBLE, [2]), vi("u", TP.FLOAT, [3])], calls, [_body()])
    facts = Facts(m)
    assert facts.elem_type("r", m.functions[0]) is None
    assert facts.elem_type("y") == TP.DOUBLE and facts.elem_type("z") == TP.FLOAT


def test_body_of_a_function_never_called_is_typed_from_its_declarations():
    f = _body([helper.make_tensor_value_info("r", TP.FLOAT16, None)])
    m = _model([vi("x", TP.FLOAT, [2])], [helper.make_node("Relu", ["x"], ["y"])], [f])
    facts = Facts(m)
    assert facts.elem_type("b", m.functions[0]) == TP.FLOAT16  # Neg follows its input
    assert facts.elem_type("a", m.functions[0]) is None


def test_body_typed_from_a_call_site_only_inference_types():
    """ConstantOfShape's output type is its ``value``'s, which no schema rule says; onnx's
    inference does, and the call then types the body."""
    value = numpy_helper.from_array(np.array([1.5], np.float64))
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], value=value),
             helper.make_node("F", ["c"], ["y"], domain="local")]
    m = _model([vi("s", TP.INT64, [1])], nodes, [_body()])
    facts = Facts(m)
    assert facts.elem_type("c") == TP.DOUBLE
    assert facts.elem_type("r", m.functions[0]) == TP.DOUBLE


def test_the_callers_types_come_first_and_the_folder_is_kept():
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", TP.FLOAT, [2])],
                   [vi("y", TP.FLOAT, [2])], opset=14)
    facts = Facts(m, types={"y": TP.FLOAT}, base_dir="/models")
    assert facts.elem_type("y") == TP.FLOAT and facts.base_dir == "/models"
    assert Facts(m).elem_type("y") == TP.FLOAT
