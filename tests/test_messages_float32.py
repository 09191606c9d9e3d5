"""Messages print a float32 attribute value as the shortest decimal that reads back as it
(``0.2``, not ``0.20000000298023224``): convert, fuse and fix."""

from __future__ import annotations

import numpy as np
import onnx
from conftest import make_model, vi
from fuse_helpers import const, fuses_to, model, refused
from onnx import TensorProto as T
from onnx import helper
from onnx import numpy_helper as nh

from opshift import opsets
from opshift.convert.engine import convert_proto
from opshift.fix.fixer import fix_proto
from opshift.tables import attribute_value, number


def _activation(op, opset, elem=T.FLOAT, **attrs):
    return make_model([helper.make_node(op, ["x"], ["y"], name="n", **attrs)],
                      [vi("x", elem, [2, 3])], [vi("y", elem, [2, 3])], opset=opset)


def _messages(m, target) -> str:
    r = convert_proto(m, target, record=False)
    return " ".join(f"{c.what} -- {c.why}" for c in _changes(r))


def _changes(result):
    from opshift.convert.result import all_changes

    return all_changes(result.entries)


def test_attribute_value_is_the_shortest_float32_decimal():
    assert attribute_value(float(np.float32(0.2))) == "0.2"
    assert attribute_value([float(np.float32(0.1)), 2.5]) == "[0.1, 2.5]"
    assert attribute_value(b"constant") == "b'constant'" and attribute_value(3) == "3"


def test_convert_writes_changed_defaults_in_float32_digits():
    d1, d6 = opsets.attribute_defaults("Selu", 1), opsets.attribute_defaults("Selu", 6)
    assert repr(d1["alpha"]) == "1.673200011253357"  # as onnx.defs holds it: float32
    text = _messages(_activation("Selu", 1), 6)
    assert "alpha=1.6732 written explicitly" in text
    assert f"the default of gamma is 1.0507 in Selu-1 but {number(d6['gamma'])} in Selu-6" \
        in text and number(d6["gamma"]) == "1.050701"
    assert repr(d1["alpha"]) not in text and repr(d6["gamma"]) not in text


def test_fuse_describes_the_fused_attribute_in_float32_digits():
    m = model([const("a", 0.2), helper.make_node("Mul", ["x", "a"], ["ax"]),
               helper.make_node("Max", ["x", "ax"], ["y"])])
    _, result = fuses_to(m, "LeakyRelu")
    assert [e.detail for e in result.fused] == ["LeakyRelu(alpha=0.2)"]


def test_fuse_refusal_names_the_slope_in_its_own_digits():
    just_above_1 = float(np.nextafter(np.float32(1), np.float32(2)))
    m = model([const("a", just_above_1), helper.make_node("Mul", ["x", "a"], ["ax"]),
               helper.make_node("Max", ["x", "ax"], ["y"])])
    refused(m, "slope 1.0000001 > 1")


def test_fix_reports_a_converted_attribute_in_float32_digits():
    n = helper.make_node("LeakyRelu", ["x"], ["y"], name="lr")
    n.attribute.append(helper.make_attribute("alpha", nh.from_array(np.array([0.2],
                                                                            np.float32))))
    m = make_model([n], [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])], opset=16)
    (c,) = fix_proto(m).changes
    assert "value 0.2" in f"{c.what} {c.why}" and "0.2000000" not in f"{c.what} {c.why}"
    assert m.graph.node[0].attribute[0].type == onnx.AttributeProto.FLOAT
