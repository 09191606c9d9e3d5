"""A small model around the nodes of one rewrite, for checking that rewrite locally."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import onnx
from onnx import helper

from ..errors import OpshiftError
from ..opsets import ir_version_for_opset, normalize_domain


def region_model(nodes: Iterable[onnx.NodeProto], inputs: Sequence[onnx.ValueInfoProto],
                 outputs: Sequence[onnx.ValueInfoProto],
                 initializers: Iterable[onnx.TensorProto] = (),
                 opset_imports: Iterable[onnx.OperatorSetIdProto] | Mapping[str, int] = (),
                 functions: Iterable[onnx.FunctionProto] = ()) -> onnx.ModelProto:
    """A small model around ``nodes`` (copied), e.g. the nodes of one rewrite.

    ``opset_imports`` are OperatorSetIdProtos or a ``{domain: version}`` mapping and must
    include the default domain; the IR version is the one that opset was released with.
    Domains of ``functions`` that are not imported get version 1.
    """
    if isinstance(opset_imports, Mapping):
        imports = {normalize_domain(d): int(v) for d, v in opset_imports.items()}
    else:
        imports = {normalize_domain(i.domain): int(i.version) for i in opset_imports}
    if "" not in imports:
        raise OpshiftError("region_model: opset_imports must include the default domain")
    functions = list(functions)
    for f in functions:
        imports.setdefault(normalize_domain(f.domain), 1)
    graph = helper.make_graph([_copy(n) for n in nodes], "region", [_copy(v) for v in inputs],
                              [_copy(v) for v in outputs],
                              initializer=[_copy(t) for t in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in
                                                    imports.items()],
                              functions=[_copy(f) for f in functions],
                              producer_name="opshift.verify")
    model.ir_version = max(ir_version_for_opset(imports[""]),
                           3 if not functions else 8)  # local functions need IR 8
    return model


def _copy(msg):
    out = type(msg)()
    out.CopyFrom(msg)
    return out



def region_key(model: onnx.ModelProto, names: dict[str, int]) -> tuple:
    """What ``model`` computes, with its value names replaced by their order of first use in
    ``names`` (shared by the models of one rewrite): equal keys, equal computations on
    inputs in the same positions. Node names and doc strings do not count. A model whose
    nodes hold subgraphs keeps its names (a subgraph may refer to an outer value by name)."""
    g = model.graph
    raw = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
              for n in g.node for a in n.attribute)

    def name(v: str):
        return v if raw or not v else names.setdefault(v, len(names))

    key: list = [model.ir_version,
                 tuple(sorted((normalize_domain(i.domain), i.version)
                              for i in model.opset_import)),
                 tuple(f.SerializeToString(deterministic=True) for f in model.functions)]
    key += [(name(vi.name), vi.type.SerializeToString(deterministic=True)) for vi in g.input]
    key += [(name(t.name), _tensor_bytes(t)) for t in g.initializer]
    key += [t.SerializeToString(deterministic=True) for t in g.sparse_initializer]
    for n in g.node:
        key.append((n.op_type, normalize_domain(n.domain), getattr(n, "overload", ""),
                    tuple(name(v) for v in n.input), tuple(name(v) for v in n.output),
                    tuple(_attribute_bytes(a) for a in n.attribute)))
    key += [(name(vi.name), vi.type.SerializeToString(deterministic=True)) for vi in g.output]
    return tuple(key)


def _tensor_bytes(t: onnx.TensorProto) -> bytes:
    """``t`` without its name."""
    anon = onnx.TensorProto()
    anon.CopyFrom(t)
    anon.name = ""
    return anon.SerializeToString(deterministic=True)


def _attribute_bytes(a: onnx.AttributeProto) -> bytes:
    """``a``, a tensor value without its name (a Constant's tensor keeps the name of the
    initializer it was made from)."""
    if a.type == onnx.AttributeProto.TENSOR and a.t.name:
        anon = onnx.AttributeProto()
        anon.CopyFrom(a)
        anon.t.name = ""
        a = anon
    return a.SerializeToString(deterministic=True)
