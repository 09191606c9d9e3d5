"""The activation version table and the Cast helpers, against onnx.defs."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper

from opshift import opsets
from opshift.passes._graph import Names
from opshift.passes.activation_table import TABLES, Adapter, default_changes, plan, table
from opshift.passes.casts import exact_compute_type, wrap_in_casts


def test_table_versions_come_from_onnx_defs():
    for op, steps in TABLES.items():
        schemas = sorted({s.since_version for s in onnx.defs.get_all_schemas_with_history()
                          if s.name == op and s.domain in ("", "ai.onnx")})
        assert [steps[0].lower] + [s.upper for s in steps] == schemas


def test_table_finds_each_known_difference():
    prelu = {(s.lower, s.upper): s for s in table("PRelu")}
    assert prelu[(1, 6)].attrs_only_lower == {"consumed_inputs"}
    assert prelu[(6, 7)].slope_rules is not None
    assert prelu[(7, 9)].types_only_upper == {"tensor(int32)", "tensor(int64)",
                                              "tensor(uint32)", "tensor(uint64)"}
    assert prelu[(9, 16)].types_only_upper == {"tensor(bfloat16)"}
    selu = {(s.lower, s.upper): s for s in table("Selu")}
    assert {n for n, _, _ in selu[(1, 6)].default_changes} == {"alpha", "gamma"}
    assert selu[(6, 22)].default_changes == ()
    assert default_changes("LeakyRelu", 1, 16) == ()  # 0.01 everywhere


@pytest.mark.parametrize("op,src,dst,expected", [
    ("PRelu", 1, 16, {Adapter.DROP_ATTRIBUTES, Adapter.SLOPE_TO_NUMPY}),
    ("PRelu", 16, 1, {Adapter.SLOPE_TO_LEGACY, Adapter.CAST_TYPES}),
    ("PRelu", 9, 16, set()),
    ("Selu", 22, 1, {Adapter.MATERIALIZE_DEFAULTS, Adapter.CAST_TYPES}),
    ("Selu", 1, 22, {Adapter.DROP_ATTRIBUTES, Adapter.MATERIALIZE_DEFAULTS}),
    ("LeakyRelu", 16, 6, {Adapter.CAST_TYPES}),
])
def test_plan_is_the_union_of_crossed_steps(op, src, dst, expected):
    assert set(plan(op, src, dst)) == expected


def test_exact_compute_type():
    prelu9 = opsets.allowed_types("PRelu", 9)
    assert exact_compute_type(TP.BFLOAT16, prelu9, 12) is None  # no bfloat16 Cast yet
    assert exact_compute_type(TP.BFLOAT16, prelu9, 13) == TP.FLOAT
    assert exact_compute_type(TP.INT32, opsets.allowed_types("PRelu", 7), 7) == TP.DOUBLE
    assert exact_compute_type(TP.FLOAT, prelu9, 9) == TP.FLOAT
    assert exact_compute_type(TP.STRING, prelu9, 9) is None


def test_wrap_in_casts_uses_cast1_strings_before_opset_6():
    node = helper.make_node("PRelu", ["x", "s"], ["y"], name="p")
    m = helper.make_model(helper.make_graph([node], "g", [], []))
    nodes = wrap_in_casts(m.graph.node[0], TP.DOUBLE, Names(m), "p", elem_type=TP.INT32,
                          opset=5)
    casts = [n for n in nodes if n.op_type == "Cast"]
    assert [n.attribute[0].s for n in casts] == [b"DOUBLE", b"DOUBLE", b"INT32"]
    assert nodes[-1].output[0] == "y" and nodes[2].op_type == "PRelu"
    nodes = wrap_in_casts(helper.make_node("LeakyRelu", ["x"], ["y"]), TP.FLOAT, Names(m),
                          "l", elem_type=TP.BFLOAT16, opset=13)
    assert [n.attribute[0].i for n in nodes if n.op_type == "Cast"] == [TP.FLOAT, TP.BFLOAT16]
