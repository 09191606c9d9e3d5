"""opshift.opsets answers every schema question as onnx.defs.get_schema does, op by op and
opset by opset."""

from __future__ import annotations

import onnx
import onnx.defs
import pytest

from opshift import opsets

ALL_OPS = sorted({s.name for s in onnx.defs.get_all_schemas_with_history()
                  if s.domain in ("", "ai.onnx")})
GRAPH = {onnx.defs.OpSchema.AttrType.GRAPH, onnx.defs.OpSchema.AttrType.GRAPHS}
TENSOR = GRAPH | {onnx.defs.OpSchema.AttrType.TENSOR, onnx.defs.OpSchema.AttrType.TENSORS,
                  onnx.defs.OpSchema.AttrType.SPARSE_TENSOR}


def _get(op: str, opset: int, domain: str = ""):
    try:
        return onnx.defs.get_schema(op, opset, domain)
    except onnx.defs.SchemaError:
        return None


def _defaults(s) -> dict:
    return {n: onnx.helper.get_attribute_value(a.default_value)
            for n, a in s.attributes.items()
            if a.default_value is not None and a.default_value.name}


@pytest.mark.parametrize("op", ALL_OPS)
def test_versions_attributes_and_attribute_kinds_match_get_schema(op):
    seen = set()
    kinds = set()
    for opset in range(1, opsets.MAX_OPSET + 2):
        s = _get(op, opset)
        assert opsets.since_version(op, opset) == (None if s is None else s.since_version)
        if s is None:
            assert opsets.attribute_defaults(op, opset) == {}
            assert opsets.attribute_names(op, opset) == frozenset()
            continue
        seen.add(s.since_version)
        kinds |= {a.type for a in s.attributes.values()}
        assert opsets.attribute_names(op, opset) == frozenset(s.attributes)
        assert opsets.attribute_defaults(op, opset) == _defaults(s)
    assert opsets.versions(op) == tuple(sorted(seen))
    assert opsets.has_graph_attribute(op) == bool(kinds & GRAPH)
    assert opsets.may_hold_tensors(op) == bool(kinds & TENSOR)


def test_versions_in_other_domains():
    assert opsets.versions("TreeEnsembleClassifier", "ai.onnx.ml")[0] == 1
    assert opsets.versions("Relu", "ai.onnx") == opsets.versions("Relu")
    assert opsets.versions("NoSuchOp") == () and opsets.since_version("NoSuchOp", 5) is None


@pytest.mark.parametrize("op", opsets.ACTIVATIONS)
def test_activation_attribute_types_match_get_schema(op):
    for opset in range(1, opsets.MAX_OPSET + 1):
        s = _get(op, opset)
        if s is None:
            assert opsets.activation_attribute_types(op, opset) is None
            continue
        version, types = opsets.activation_attribute_types(op, opset)
        assert version == s.since_version
        assert types == {n: a.type.value for n, a in s.attributes.items()}
    # Selu-1's defaults differ from Selu-6's
    assert opsets.attribute_defaults("Selu", 1) != opsets.attribute_defaults("Selu", 6)


def test_function_body_is_the_one_closest_to_near():
    """One fetch for every caller: plain bodies picked by ``near`` (newest not above, else
    the oldest), parsed afresh each call; context-dependent ones built for the node, their
    input types asked only then; None where the op has no body."""
    s = onnx.defs.get_schema("LayerNormalization", 17)
    assert opsets.function_body_version("LayerNormalization", 17, near=17) == 17
    assert opsets.function_body_version("LayerNormalization", 17, near=30) == 18
    assert opsets.function_body_version("Conv", 11) is None
    assert opsets.has_function_body("LayerNormalization", 17)
    assert not opsets.has_function_body("Conv", 11) and not opsets.has_function_body("No", 1)
    assert opsets.function_body("Conv", 11) is None
    a, b = opsets.function_body("LeakyRelu", 16), opsets.function_body("LeakyRelu", 16)
    assert a is not b and a.SerializeToString() == onnx.defs.get_schema(
        "LeakyRelu", 16).get_function_with_opset_version(16)
    node = onnx.helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1)
    x = onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, [2, 3])
    asked = []
    body = opsets.function_body("LayerNormalization", 17, "", node,
                                lambda: asked.append(1) or [x, x, x], near=18)
    assert asked == [1]
    assert body.SerializeToString() == s.get_context_dependent_function_with_opset_version(
        18, node.SerializeToString(), [x.SerializeToString()] * 3)
    with pytest.raises(ValueError):
        opsets.function_body("LayerNormalization", 17)
