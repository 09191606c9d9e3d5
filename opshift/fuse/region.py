"""The nodes of one fusion, before and after, as small models for ``--verify``."""

from __future__ import annotations

import onnx
import onnx_ir as ir
from onnx import helper

from opshift.fuse.values import Match, dtype_of, shape_of
from opshift.graph.edit import constant_node
from opshift.verify.region import region_model


def _value_info(match: Match, v: ir.Value) -> onnx.ValueInfoProto:
    """The value's type (from the IR, else from the inferred types the match has)."""
    if v.type is not None:
        return ir.serde.serialize_value(v)
    dtype = dtype_of(match, v)
    if dtype is None:
        raise ValueError(f"value {v.name!r} has no type")
    shape = shape_of(match, v)
    return helper.make_tensor_value_info(v.name, int(dtype),
                                         None if shape is None else list(shape))


def _toposort(nodes: list[ir.Node]) -> list[ir.Node]:
    inside = {id(n) for n in nodes}
    done: set[int] = set()
    out: list[ir.Node] = []

    def visit(n: ir.Node) -> None:
        if id(n) in done:
            return
        done.add(id(n))
        for v in n.inputs:
            p = v.producer() if v is not None else None
            if p is not None and id(p) in inside:
                visit(p)
        out.append(n)

    for n in nodes:
        visit(n)
    return out


def _producers(value: ir.Value, among) -> list[ir.Node]:
    """The nodes of ``among`` that ``value`` is computed by, in order."""
    inside = {id(n) for n in among}
    found: dict[int, ir.Node] = {}
    todo = [value.producer()]
    while todo:
        n = todo.pop()
        if n is None or id(n) not in inside or id(n) in found:
            continue
        found[id(n)] = n
        todo.extend(v.producer() for v in n.inputs if v is not None)
    return _toposort(list(found.values()))


def _boundary(match: Match, nodes: list[ir.Node]
              ) -> tuple[list[onnx.ValueInfoProto], list[onnx.TensorProto]]:
    """The region's inputs and initializers. An initializer is fed as its value, except one
    a caller may override (listed as a graph input from IR 4 on), which is a region input --
    the same notion of "constant" the checks use (:func:`opshift.fuse.values.resolve`)."""
    produced = {id(v) for n in nodes for v in n.outputs}
    inputs: list[onnx.ValueInfoProto] = []
    inits: list[onnx.TensorProto] = []
    seen: set[int] = set()
    for n in nodes:
        for v in n.inputs:
            if v is None or id(v) in produced or id(v) in seen:
                continue
            seen.add(id(v))
            _feed(match, v, inputs, inits)
    return inputs, inits


def _feed(match: Match, v: ir.Value, inputs: list[onnx.ValueInfoProto],
          inits: list[onnx.TensorProto]) -> None:
    """Add ``v``, read from outside a region, to its initializers or its inputs."""
    fixed = not v.is_graph_input() or match.legacy_inputs
    if v.is_initializer() and fixed and v.const_value is not None:
        t = ir.serde.serialize_tensor(v.const_value)
        t.name = v.name
        inits.append(t)
    else:
        inputs.append(_value_info(match, v))


def capture(label: str, match: Match, plan
            ) -> tuple[str, onnx.ModelProto, onnx.ModelProto, bool] | None:
    """(label, before, after, signed_zero_exact) for a fusion about to happen, or None when
    the region cannot be expressed standalone (values without types, e.g. in functions)."""
    if any(not isinstance(v, float) for v in plan.attrs.values()):
        return None  # function attribute references: no standalone region
    context, opset = match.context, match.opset
    try:
        before_nodes = _toposort([*reversed(plan.cleanup), *context.nodes])
        inputs, inits = _boundary(match, before_nodes)
        outs = list(context.output_values)
        outputs = [_value_info(match, v) for v in outs]
        before = region_model([ir.serde.serialize_node(n) for n in before_nodes], inputs,
                              outputs, inits, {"": opset})
        after_nodes: list[onnx.NodeProto] = []
        y = outs[0].name
        if plan.op == "PRelu":
            if plan.slope is not None:
                slope = plan.slope.name
                after_nodes += [ir.serde.serialize_node(n)  # the constant's nodes, kept
                                for n in _producers(plan.slope, plan.cleanup)]
            else:
                slope = f"{y}/fused_slope"
                after_nodes.append(constant_node(slope, plan.slope_array))
            after_nodes.append(helper.make_node("PRelu", [plan.x.name, slope], [y]))
        else:
            after_nodes.append(helper.make_node(plan.op, [plan.x.name], [y], **plan.attrs))
        used = {i for n in after_nodes for i in n.input}
        produced = {o for n in after_nodes for o in n.output}
        a_inputs = [v for v in inputs if v.name in used - produced]
        a_inits = [t for t in inits if t.name in used - produced]
        if plan.slope is not None and plan.slope.producer() is None and plan.slope.name \
                not in {v.name for v in (*a_inputs, *a_inits)}:
            # a slope the pattern did not read: the initializer inline reshaped (see _slope)
            _feed(match, plan.slope, a_inputs, a_inits)
        after = region_model(after_nodes, a_inputs, outputs, a_inits, {"": opset})
        return label, before, after, plan.signed_zero_exact
    except (ValueError, TypeError, AttributeError):
        return None


def compose(inner: tuple, outer: tuple) -> tuple:
    """The region of a fusion that swallowed the node an earlier fusion made: ``outer``'s
    "before" with that node (the one computing ``inner``'s outputs) replaced by ``inner``'s
    "before" nodes, its inputs and constants; ``outer``'s "after"."""
    label, before, after, signed = outer
    ib = inner[1].graph
    made = {v.name for v in ib.output}
    g = before.graph
    nodes = []
    for n in g.node:
        nodes.extend(ib.node if made & set(n.output) else [n])
    produced = {o for n in nodes for o in n.output}
    have = {v.name for v in g.input} | {t.name for t in g.initializer}
    inputs = [*g.input, *(v for v in ib.input if v.name not in produced | have)]
    inits = [*g.initializer, *(t for t in ib.initializer if t.name not in have)]
    opsets = {i.domain: i.version for i in before.opset_import}
    merged = region_model(nodes, inputs, list(g.output), inits, opsets)
    return label, merged, after, signed and inner[3]
