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

