"""What the schema in force says of a PRelu, LeakyRelu or Selu node, for the structural check
(:mod:`opshift.check.structure`): read once per (op, opset), and a constant slope judged against X's
declared type once per distinct pair."""

from __future__ import annotations

import functools

import onnx

from opshift.broadcast import SlopeRule, legacy_is_per_channel, rule_for_version, slope_shape_for
from opshift.errors import EvaluationError
from opshift.graph import element_types
from opshift.io import readable
from opshift.opsets import activation_attribute_types, schema, tensor_type, x_types_of_any_version


@functools.cache
def activation_spec(op: str, opset: int
                    ) -> tuple[int, dict[str, int], SlopeRule | None, int, frozenset[int]]:
    """(version in force, attribute name -> AttributeProto type, PRelu slope rule or None,
    number of inputs, the element types any version of the op takes for X).

    ``consumed_inputs`` maps to its type even where the version no longer defines it, so a
    stale one is left for ``fix`` (it is not bad input for the rewrites)."""
    version, types = activation_attribute_types(op, opset)
    types = dict(types)
    types.setdefault("consumed_inputs", onnx.AttributeProto.INTS)
    rule = rule_for_version(version) if op == "PRelu" else None
    takes = x_types_of_any_version(op)
    numeric = frozenset(e for e in readable.KNOWN_ELEM_TYPES
                        if e and tensor_type(e) in takes)
    return version, types, rule, schema(op, version).max_input, numeric


def judge_slope(declared: bytes, slope: onnx.TensorProto | None, rule: SlopeRule | None
                ) -> tuple[int, str | None, bool]:
    """(the element type of X's ``declared`` type (a serialized TypeProto), why a constant
    slope cannot broadcast to X's declared shape or None, and whether ``fix`` may repair it:
    numpy broadcasting fails on a slope a per-channel reading fits, or unknown dims leave
    open; not when no reading fits)."""
    types: dict[str, int] = {}
    shapes: dict[str, tuple] = {}
    element_types.take_value_infos(
        [onnx.ValueInfoProto(type=onnx.TypeProto.FromString(declared))], types, shapes)
    x_shape = shapes.get("") if slope is not None and rule is not None else None
    try:
        if x_shape is not None:
            slope_shape_for(x_shape, tuple(slope.dims), rule)
    except EvaluationError as e:
        s_shape = tuple(slope.dims)
        if rule is SlopeRule.NUMPY and (legacy_is_per_channel(x_shape, s_shape) or not all(
                isinstance(d, int) for d in (*x_shape, *s_shape))):
            return types.get("", 0), str(e), True
        return types.get("", 0), f"{e}; no reading fits it", False
    return types.get("", 0), None, False
