"""Attributes: ``consumed_inputs`` where the version in force does not define it (removed),
and attributes of the wrong type (converted when the value is exactly representable)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import helper

from opshift import opsets
from opshift.fix.report import node_id
from opshift.graph.scopes import Scope
from opshift.io.tensors import tensor_array
from opshift.tables import attribute_value

if TYPE_CHECKING:
    from opshift.fix.fixer import Fixer

_A = onnx.AttributeProto
_UNSET = object()


def fix_attributes(fx: Fixer, scope: Scope) -> None:
    """Drop ``consumed_inputs`` the version in force does not define; convert attributes of the
    wrong type to the schema's when the value is exactly representable."""
    # per (domain, op): its schema and attribute name -> type, or None (nothing to check)
    schemas: dict[tuple[str, str], tuple[onnx.defs.OpSchema, dict[str, int]] | None] = {}
    for i, node in enumerate(scope.nodes):
        attributes = node.attribute
        if not attributes:
            continue
        key = (node.domain, node.op_type)
        known = schemas.get(key, _UNSET)
        if known is _UNSET:
            d = opsets.normalize_domain(node.domain)
            opset = scope.opsets.get(d)
            s = None if opset is None or fx.is_function_call(node) else \
                opsets.schema(node.op_type, opset, d)
            known = schemas[key] = None if s is None else (
                s, {name: spec.type.value for name, spec in s.attributes.items()})
        if known is None:
            continue
        s, types = known
        for a in attributes:  # the common case: every attribute defined and typed right
            if types.get(a.name) != a.type:
                _fix_node(fx, scope, i, node, s)
                break


def _fix_node(fx: Fixer, scope: Scope, i: int, node: onnx.NodeProto,
              s: onnx.defs.OpSchema) -> None:
    """Drop or convert the attributes of ``node`` (``scope.nodes[i]``) that ``s`` does not
    define or types otherwise."""
    ver = s.since_version
    label = f"{node.op_type}-{ver}"
    keep = []
    dropped = False
    for a in node.attribute:
        if a.ref_attr_name:
            keep.append(a)
            continue
        spec = s.attributes.get(a.name)
        if spec is None:
            if a.name == "consumed_inputs":
                dropped = True
                fx.change("consumed_inputs", scope.label, node_id(node, i),
                            "removed attribute 'consumed_inputs'",
                            f"{label} does not define it (an in-place hint of opset "
                            "< 6 with no effect on the result)")
                continue
            fx.leave("unknown_attribute", scope.label, node_id(node, i),
                       f"attribute {a.name!r} is not defined for {label}",
                       "its meaning is unknown, so it is not removed")
            keep.append(a)
            continue
        want = spec.type.value
        if a.type != want:
            new, why = _convert_attribute(a, want, fx.base_dir)
            what = (f"attribute {a.name!r} of {label}: "
                    f"{_A.AttributeType.Name(a.type)} -> {_A.AttributeType.Name(want)}")
            if new is None:
                fx.refuse("attribute_type", scope.label, node_id(node, i), what,
                            why)
                keep.append(a)
            else:
                fx.change("attribute_type", scope.label, node_id(node, i),
                            f"{what} ({why})", "the schema declares "
                            f"{_A.AttributeType.Name(want)}; runtimes reject other "
                            "types")
                keep.append(new)
                dropped = True
        else:
            keep.append(a)
    if dropped:
        del node.attribute[:]
        node.attribute.extend(keep)


def _convert_attribute(a: onnx.AttributeProto, want: int, base_dir=None
                       ) -> tuple[onnx.AttributeProto | None, str]:
    """An attribute of type ``want`` holding exactly ``a``'s value, or (None, reason);
    a tensor in external data is read from ``base_dir``, the model's folder."""
    got = _A.AttributeType.Name(a.type)
    scalar: Any = None
    if a.type == _A.INT:
        scalar = int(a.i)
    elif a.type == _A.FLOAT:
        scalar = np.float32(a.f)
    elif a.type in (_A.INTS, _A.FLOATS):
        vals = list(a.ints) if a.type == _A.INTS else [np.float32(v) for v in a.floats]
        if len(vals) != 1 and want in (_A.INT, _A.FLOAT):
            return None, f"{got} with {len(vals)} values cannot become one scalar"
        scalar = vals[0] if len(vals) == 1 else None
    elif a.type == _A.TENSOR:
        arr = tensor_array(a.t, base_dir)
        if arr.size != 1:
            return None, f"a tensor of shape {list(arr.shape)} is not one value"
        v = arr.reshape(()).item()
        if arr.dtype == np.bool_ or not isinstance(v, (int, float)):
            return None, f"a {arr.dtype} tensor cannot become a number attribute"
        scalar = v if isinstance(v, int) else (
            np.float32(v) if arr.dtype == np.float32 else float(v))
    if scalar is None:
        return None, f"no exact conversion from {got}"
    if want in (_A.FLOAT, _A.FLOATS):
        f32 = np.float32(scalar)
        exact = (float(f32) == float(scalar)) if not isinstance(scalar, int) else (
            int(f32) == scalar if np.isfinite(f32) else False)
        if not exact:
            return None, f"the value {scalar!r} is not exactly representable as float32"
        if want == _A.FLOAT:
            new = helper.make_attribute(a.name, float(f32), attr_type=_A.FLOAT)
        else:
            new = helper.make_attribute(a.name, [float(f32)], attr_type=_A.FLOATS)
    elif want in (_A.INT, _A.INTS):
        if isinstance(scalar, (np.floating, float)) and not (
                np.isfinite(scalar) and float(scalar) == int(scalar)):
            return None, f"the value {float(scalar)!r} is not an integer"
        iv = int(scalar)
        if not -(2 ** 63) <= iv < 2 ** 63:
            return None, f"the value {iv} does not fit int64"
        new = (helper.make_attribute(a.name, iv, attr_type=_A.INT) if want == _A.INT else
               helper.make_attribute(a.name, [iv], attr_type=_A.INTS))
    else:
        return None, f"no exact conversion from {got} to {_A.AttributeType.Name(want)}"
    if a.doc_string:
        new.doc_string = a.doc_string
    shown = onnx.helper.get_attribute_value(new)
    return new, f"value {attribute_value(shown)}"

