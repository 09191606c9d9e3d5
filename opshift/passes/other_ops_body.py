"""An op missing at the target opset, replaced by its own onnx function body.

Many newer ops are defined in ``onnx.defs`` by a function body of older ops (HardSwish =
HardSigmoid * x, GreaterOrEqual = Greater or Equal, Mish, Gelu, LayerNormalization, ...).
That body *is* the op's meaning, so writing it in place of the node is exact as far as the
spec goes. The body's nodes come at the body's own opset; the caller converts each of them
on to the target like any other node.
"""

from __future__ import annotations

import onnx
from onnx import helper

from .. import opsets
from .other_ops_step import Refuse, Step


def _input_types(st: Step) -> list[bytes]:
    types = []
    for name in st.w.input:
        tp = onnx.TypeProto()
        if name:
            t = st.elem_type(name)
            if t is None:
                raise Refuse(f"the element type of {name!r} is unknown (the function body "
                             "depends on it)")
            tp.tensor_type.elem_type = t
        types.append(tp.SerializeToString())
    return types


def _pick(versions, target: int) -> int | None:
    """The body opset closest to the target: the newest not above it, else the oldest."""
    vs = sorted(versions)
    if not vs:
        return None
    below = [v for v in vs if v <= target]
    return below[-1] if below else vs[0]


def function_body(st: Step) -> tuple[onnx.FunctionProto, int]:
    """The body of ``st.op`` at schema version ``st.lo`` for this node, and its opset."""
    s = opsets.schema(st.op, st.lo)
    if s is None:
        raise Refuse(f"no schema {st.op}-{st.lo}")
    target = st.conv.target
    v = _pick(s.function_opset_versions, target)
    if v is not None:
        raw = s.get_function_with_opset_version(v)
    else:
        v = _pick(s.context_dependent_function_opset_versions, target)
        if v is None:
            raise Refuse(f"{st.op}-{st.lo} has no function body in onnx.defs")
        raw = s.get_context_dependent_function_with_opset_version(
            v, st.w.SerializeToString(), _input_types(st))
    if not raw:
        raise Refuse(f"onnx builds no function body for this {st.op} node")
    body = onnx.FunctionProto()
    body.ParseFromString(raw)
    opset = next((i.version for i in body.opset_import if i.domain in ("", "ai.onnx")), v)
    return body, opset


def inline_body(st: Step, body: onnx.FunctionProto) -> list[onnx.NodeProto]:
    """The body's nodes, wired to the node's inputs and outputs, with fresh inner names and
    attribute references resolved (node attribute, else the schema's default)."""
    if any(opsets.normalize_domain(n.domain) != "" for n in body.node):
        raise Refuse("the function body uses ops outside the default domain")
    rename = {"": ""}
    for i, formal in enumerate(body.input):
        rename[formal] = st.input(i)
    outs = list(st.w.output)
    for i, formal in enumerate(body.output):
        rename[formal] = outs[i] if i < len(outs) and outs[i] else st.fresh_value(formal)
    given = {a.name: a for a in st.w.attribute}
    defaults = opsets.attribute_defaults(st.op, st.lo)
    schema_attrs = opsets.schema(st.op, st.lo).attributes
    base = st.node.name or st.op.lower()
    nodes = []
    for k, n in enumerate(body.node):
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for a in n.attribute):
            raise Refuse("the function body holds subgraphs")
        new = onnx.NodeProto()
        new.CopyFrom(n)
        for j, v in enumerate(new.input):
            new.input[j] = rename.get(v) if v in rename else rename.setdefault(
                v, st.fresh_value(v))
        for j, v in enumerate(new.output):
            if v not in rename:
                rename[v] = st.fresh_value(v)
            new.output[j] = rename[v]
        new.name = st.conv.names.fresh(f"{base}/{n.op_type.lower()}_{k}")
        attrs = []
        for a in new.attribute:
            if not a.ref_attr_name:
                attrs.append(a)
                continue
            ref = a.ref_attr_name
            if ref in given:
                v = onnx.AttributeProto()
                v.CopyFrom(given[ref])
            elif ref in defaults:
                v = helper.make_attribute(a.name, defaults[ref],
                                          attr_type=schema_attrs[ref].type)
            else:
                continue  # unset and no default: the body node's own default applies
            v.name = a.name
            attrs.append(v)
        del new.attribute[:]
        new.attribute.extend(attrs)
        nodes.append(new)
    return nodes
