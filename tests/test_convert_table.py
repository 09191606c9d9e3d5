"""The version steps of the activations, against onnx.defs, and the Cast helpers; the steps
table lists real version steps, each documented in its module."""

from __future__ import annotations

import onnx
import pytest
from conftest import make_model
from onnx import TensorProto as TP
from onnx import helper

from opshift import opsets
from opshift.convert.generic import schema_step, versions_between
from opshift.convert.steps.bfloat16 import exact_compute_type, wrap_in_casts
from opshift.convert.walk import walk_for
from opshift.graph.facts import Facts
from opshift.graph.names import Names


@pytest.mark.parametrize("op", opsets.ACTIVATIONS)
def test_walks_cross_every_version_onnx_defs_has(op):
    schemas = sorted({s.since_version for s in onnx.defs.get_all_schemas_with_history()
                      if s.name == op and s.domain in ("", "ai.onnx")})
    steps = versions_between(op, schemas[0], schemas[-1])
    assert [steps[0][0]] + [hi for _, hi in steps] == schemas
    assert versions_between(op, schemas[-1], schemas[0]) == tuple(
        (lo, hi) for lo, hi in reversed(steps))


def test_schema_steps_find_each_known_difference():
    assert "consumed_inputs" not in schema_step("PRelu", 1, 6).dst_attrs
    assert not schema_step("PRelu", 1, 6).attrs_inert  # a node may set consumed_inputs
    assert schema_step("PRelu", 9, 7).narrowed == {"tensor(int32)", "tensor(int64)",
                                                   "tensor(uint32)", "tensor(uint64)"}
    assert schema_step("PRelu", 16, 9).narrowed == {"tensor(bfloat16)"}
    assert schema_step("PRelu", 9, 16).narrowed == frozenset()
    assert {w[0] for w in schema_step("Selu", 1, 6).writes} == {"alpha", "gamma"}
    assert {w[0] for w in schema_step("Selu", 6, 1).writes} == {"alpha", "gamma"}
    assert schema_step("Selu", 6, 22).writes == schema_step("Selu", 22, 6).writes == ()
    assert schema_step("LeakyRelu", 1, 16).writes == ()  # 0.01 everywhere


def _every_type_model() -> onnx.ModelProto:
    """A model some value of which can have any type (Cast-free: Constant of each type)."""
    nodes = [helper.make_node("Constant", [], [f"c{t}"], value=helper.make_tensor(
        f"t{t}", t, [], [1])) for t in (TP.BFLOAT16, TP.INT32, TP.UINT32)]
    return make_model(nodes, [], [helper.make_tensor_value_info(f"c{TP.INT32}", TP.INT32,
                                                                [])], opset=16)


def _kinds(op: str, src: int, dst: int) -> set[str]:
    """What a walk of ``op`` between versions does: registered functions by name, and
    'drop attributes' / 'write defaults' / 'drop types' from the schemas."""
    facts = Facts(_every_type_model())
    out: set[str] = set()
    for _, _, fns, schema in walk_for(facts, op, src, dst).steps:
        out |= {r.fn.__name__ for r in fns}
        src_attrs = opsets.attribute_names(op, schema.src)
        if src_attrs - set(schema.dst_attrs):
            out.add("drop attributes")
        if schema.writes:
            out.add("write defaults")
        if schema.narrowed:
            out.add("drop types")
    return out


@pytest.mark.parametrize("op,src,dst,expected", [
    ("PRelu", 1, 16, {"drop attributes", "slope_rule"}),
    ("PRelu", 16, 1, {"slope_rule", "compute_wider", "integer_types", "drop types"}),
    ("PRelu", 9, 16, set()),
    ("Selu", 22, 1, {"write defaults", "compute_wider", "drop types"}),
    ("Selu", 1, 22, {"drop attributes", "write defaults"}),
    ("LeakyRelu", 16, 6, {"compute_wider", "drop types"}),
])
def test_a_walk_takes_every_crossed_step(op, src, dst, expected):
    assert _kinds(op, src, dst) == expected


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


def test_table_lists_real_steps_and_documents_them():
    import sys

    from opshift.convert import registry
    from opshift.convert.steps import broadcast_legacy, negative_axes
    from opshift.opsets import versions

    registry.steps_for("Relu", 1)  # loads the step modules
    for (op, v), fns in registry.STEPS.items():
        vs = versions(op)
        assert v in vs and v != vs[0], (op, v, vs)
        for r in fns:
            doc = sys.modules[r.fn.__module__].__doc__
            assert (op in doc or op in negative_axes.NEG_AXES
                    or op in broadcast_legacy.BINARY), op
    for op, fn in registry.REPLACEMENTS.items():
        assert op in sys.modules[fn.__module__].__doc__
