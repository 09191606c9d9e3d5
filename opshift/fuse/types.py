"""The types ``fuse`` reads from onnx shape inference: value types of the main graph and its
subgraphs, and of model-local function bodies from their call sites. Nothing inferred is
written into the model."""

from __future__ import annotations

import contextlib

import onnx
import onnx_ir as ir

_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})


def graph_types(g: onnx.GraphProto, out: dict[str, onnx.TypeProto]) -> None:
    """Value name -> TypeProto for the typed values of ``g`` and its subgraphs."""
    for vis in (g.value_info, g.input, g.output):
        for vi in vis:
            out.setdefault(vi.name, vi.type)
    for n in g.node:
        if n.op_type in _CONTROL_FLOW or n.domain not in ("", "ai.onnx"):
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    graph_types(a.g, out)
                for sg in a.graphs:
                    graph_types(sg, out)


def _calls(g: onnx.GraphProto, key: tuple[str, str], out: list[onnx.NodeProto]) -> None:
    for n in g.node:
        if (n.domain, n.op_type) == key:
            out.append(n)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _calls(a.g, key, out)
            for sg in a.graphs:
                _calls(sg, key, out)


def function_types(model: onnx.ModelProto) -> dict[tuple[str, str], dict[str, onnx.TypeProto]]:
    """Types of the values inside each model-local function, inferred from its call sites
    in the (shape-inferred) ``model`` when they all agree on an input's type (else that
    input stays untyped), then propagated through the body by onnx shape inference."""
    known: dict[str, onnx.TypeProto] = {}
    graph_types(model.graph, known)
    for t in model.graph.initializer:
        known.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    known = {k: v for k, v in known.items()
             if v.HasField("tensor_type") and v.tensor_type.elem_type}
    out: dict[tuple[str, str], dict[str, onnx.TypeProto]] = {}
    for f in model.functions:
        calls: list[onnx.NodeProto] = []
        _calls(model.graph, (f.domain, f.name), calls)
        if not calls:
            continue
        inputs = []
        for i, name in enumerate(f.input):
            ts = {known[c.input[i]].SerializeToString() for c in calls
                  if i < len(c.input) and c.input[i] in known}
            if len(ts) == 1 and all(i < len(c.input) and c.input[i] in known for c in calls):
                t = onnx.TypeProto()
                t.ParseFromString(ts.pop())
                inputs.append(onnx.helper.make_value_info(name, t))
            else:
                inputs.append(onnx.helper.make_value_info(name, onnx.TypeProto()))
        graph = onnx.helper.make_graph(list(f.node), "body", inputs,
                                       [onnx.helper.make_value_info(o, onnx.TypeProto())
                                        for o in f.output])
        imports = {i.domain: i.version for i in model.opset_import}
        imports.update({i.domain: i.version for i in f.opset_import})
        body = onnx.helper.make_model(
            graph, opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in imports.items()],
            functions=list(model.functions))
        body.ir_version = model.ir_version
        types: dict[str, onnx.TypeProto] = {}
        with contextlib.suppress(Exception):
            inferred = onnx.shape_inference.infer_shapes(body, strict_mode=False)
            graph_types(inferred.graph, types)
        out[(f.domain, f.name)] = types
    return out


def _function_values(f: ir.Function) -> list[ir.Value]:
    return list(f.inputs) + [v for n in f for v in n.outputs]


def annotate_functions(ir_model: ir.Model, types) -> set[int]:
    """Give function values the inferred types; returns the ids of the values that had a
    type before, so that :func:`clear_function_types` can take the others away again."""
    typed: set[int] = set()
    for f in ir_model.functions.values():
        table = types.get((f.domain, f.name)) or {}
        for v in _function_values(f):
            if v.type is not None:
                typed.add(id(v))
                continue
            t = table.get(v.name or "")
            if t is not None:
                v.type = ir.serde.deserialize_type_proto_for_type(t)
                v.shape = ir.serde.deserialize_type_proto_for_shape(t)
    return typed


def clear_function_types(ir_model: ir.Model, typed: set[int]) -> None:
    """Function bodies keep only the types they had (fused ops' outputs included)."""
    for f in ir_model.functions.values():
        for v in _function_values(f):
            if id(v) not in typed:
                v.type = None
                v.shape = None


def function_graphs(ir_model: ir.Model) -> set[int]:
    """ids of the graphs of model-local functions (and of subgraphs inside them)."""
    out: set[int] = set()
    for f in ir_model.functions.values():
        out.add(id(f.graph))
        out.update(id(g) for g in f.graph.subgraphs())
    return out
