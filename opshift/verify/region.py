"""A small model around the nodes of one rewrite, for checking that rewrite locally."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import onnx
from onnx import helper

from opshift.errors import OpshiftError
from opshift.opsets import ir_version_for_opset, normalize_domain


def region_model(nodes: Iterable[onnx.NodeProto], inputs: Sequence[onnx.ValueInfoProto],
                 outputs: Sequence[onnx.ValueInfoProto],
                 initializers: Iterable[onnx.TensorProto] = (),
                 opset_imports: Iterable[onnx.OperatorSetIdProto] | Mapping[str, int] = (),
                 functions: Iterable[onnx.FunctionProto] = ()) -> onnx.ModelProto:
    """A small model around ``nodes`` (copied), e.g. the nodes of one rewrite.

    ``opset_imports`` are OperatorSetIdProtos or a ``{domain: version}`` mapping and must
    include the default domain. Domains of ``functions`` that are not imported get version 1.
    The IR version is the one the default opset was released with, or the one the
    initializers (IR 4) or functions (IR 8) need.
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
    # built in place: extending a repeated field copies each message once (make_graph and
    # make_model would copy every node and constant twice more)
    model = onnx.ModelProto(producer_name="opshift.verify")
    model.opset_import.extend(helper.make_opsetid(d, v) for d, v in imports.items())
    g = model.graph
    g.name = "region"
    g.node.extend(nodes)
    g.input.extend(inputs)
    g.output.extend(outputs)
    g.initializer.extend(initializers)
    model.functions.extend(functions)
    # what a region can hold of graph.ir_versions' rule (asking it costs 5% of --verify):
    # initializers that are not inputs need IR 4, model-local functions IR 8
    model.ir_version = max(ir_version_for_opset(imports[""]), 4 if len(g.initializer) else 3,
                           8 if functions else 3)
    return model


def value_info(name: str, elem_type: int, shape: Sequence[int | str | None] | None
               ) -> onnx.ValueInfoProto:
    """A tensor's ValueInfoProto, as ``helper.make_tensor_value_info`` makes it: ``shape``
    None for an unknown rank, else per dim an int (its size), a str (its symbol) or None
    (unknown). Built in place: a region check makes one per value of every rewrite."""
    v = onnx.ValueInfoProto(name=name)
    tt = v.type.tensor_type
    tt.elem_type = elem_type
    if shape is not None:
        tt.shape.SetInParent()  # present even for a scalar: rank 0 is known
        dims = tt.shape.dim
        for d in shape:
            if isinstance(d, str):
                dims.add(dim_param=d)
            elif d is None:
                dims.add()
            else:
                dims.add(dim_value=d)
    return v


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


def same_computation(before: onnx.ModelProto, after: onnx.ModelProto) -> bool:
    """Whether the regions of a rewrite compute the same by the schemas alone, so that there
    is nothing to check: one node on each side, of the same op, inputs, outputs, types and
    constants, whose attributes agree once each is read as its version reads it (an absent
    one as its default; one that only one version defines, set to that version's default:
    ``allowzero=0`` dropped below Reshape-14)."""
    gb, ga = before.graph, after.graph
    if len(gb.node) != 1 or len(ga.node) != 1 or before.functions or after.functions:
        return False
    nb, na = gb.node[0], ga.node[0]
    if (nb.op_type, normalize_domain(nb.domain), list(nb.input), list(nb.output)) != \
            (na.op_type, normalize_domain(na.domain), list(na.input), list(na.output)):
        return False
    for part in ("input", "output", "initializer"):
        if [x.SerializeToString(deterministic=True) for x in getattr(gb, part)] != \
                [x.SerializeToString(deterministic=True) for x in getattr(ga, part)]:
            return False
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
           or a.ref_attr_name for a in [*nb.attribute, *na.attribute]):
        return False
    try:
        sb, sa = (onnx.defs.get_schema(nb.op_type, _opset(m, nb.domain), nb.domain)
                  for m in (before, after))
    except onnx.defs.SchemaError:
        return False
    have_b = {a.name: a for a in nb.attribute}
    have_a = {a.name: a for a in na.attribute}
    for name in have_b.keys() | have_a.keys():
        vb, va = _read_as(have_b.get(name), sb, name), _read_as(have_a.get(name), sa, name)
        if name in sb.attributes and name in sa.attributes:
            if vb != va:
                return False
        elif (vb if name in sb.attributes else va) != \
                _read_as(None, sb if name in sb.attributes else sa, name):
            return False  # set, where only one version defines it, to other than its default
    return True


def _opset(model: onnx.ModelProto, domain: str) -> int:
    d = normalize_domain(domain)
    return next(i.version for i in model.opset_import if normalize_domain(i.domain) == d)


def _read_as(a: onnx.AttributeProto | None, schema, name: str) -> tuple | None:
    """Attribute ``name`` as ``schema`` reads it (absent: its default), as its type and
    value; None where it has neither."""
    if a is None:
        spec = schema.attributes.get(name)
        if spec is None or not spec.default_value.type:
            return None
        a = spec.default_value
    return a.type, helper.get_attribute_value(a)
