"""The evaluator as an ``onnx.backend.base.Backend``, so onnx's backend tests can run it.

``claims(model)`` says whether every node of a model (graph, subgraphs and model-local
functions) is an (op, version) the evaluator implements; the conformance test runs exactly
the onnx node test cases it claims.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from opshift import opsets
from opshift.evaluator import registry
from opshift.io.tensors import tensor_array


def _graphs(g: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    yield from _graphs(sub)


#: Element types the evaluator computes with (the narrow ones as ml_dtypes holds them).
#: Complex is refused (by input checks) rather than approximated. Of values other than
#: tensors, sequences and optionals are claimed (maps: only ai.onnx.ml makes them).
CLAIMED_TYPES = frozenset({
    onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
    onnx.TensorProto.BFLOAT16, onnx.TensorProto.BOOL,
    onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
    onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32,
    onnx.TensorProto.UINT64, onnx.TensorProto.STRING, onnx.TensorProto.FLOAT8E4M3FN,
    onnx.TensorProto.FLOAT8E4M3FNUZ, onnx.TensorProto.FLOAT8E5M2, onnx.TensorProto.FLOAT8E5M2FNUZ,
    onnx.TensorProto.FLOAT8E8M0, onnx.TensorProto.UINT4, onnx.TensorProto.INT4,
    onnx.TensorProto.FLOAT4E2M1, onnx.TensorProto.UINT2, onnx.TensorProto.INT2,
})


def _type_tags(g: onnx.GraphProto) -> Iterator[str]:
    """Unclaimed value types of a graph's inputs/outputs/initializers and Cast targets."""
    for vi in [*g.input, *g.output]:
        which = vi.type.WhichOneof("value")
        if which not in ("tensor_type", "sequence_type", "optional_type"):
            yield f"{which or 'untyped'} value {vi.name!r}"
        elif which != "tensor_type":
            continue
        elif vi.type.tensor_type.elem_type not in CLAIMED_TYPES:
            yield f"type {onnx.TensorProto.DataType.Name(vi.type.tensor_type.elem_type)}"
    for t in g.initializer:
        if t.data_type not in CLAIMED_TYPES:
            yield f"type {onnx.TensorProto.DataType.Name(t.data_type)}"
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.type == onnx.AttributeProto.INT \
                    and a.i not in CLAIMED_TYPES:
                yield f"type {onnx.TensorProto.DataType.Name(a.i)}"
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type not in CLAIMED_TYPES:
                yield f"type {onnx.TensorProto.DataType.Name(a.t.data_type)}"


def unclaimed(model: onnx.ModelProto) -> list[str]:
    """What ``model`` uses that the evaluator does not claim ([] = it claims everything):
    ``op-version`` strings for (op, schema version) pairs it does not implement, and
    ``type ...`` for element types (or non-tensor values) it does not compute with."""
    registry.load_all()
    model_opsets = {opsets.normalize_domain(i.domain): i.version for i in model.opset_import}
    funcs = {(opsets.normalize_domain(f.domain), f.name) for f in model.functions}
    scopes: list[tuple[list[onnx.NodeProto], dict[str, int]]] = []
    for g in _graphs(model.graph):
        scopes.append((list(g.node), model_opsets))
    for f in model.functions:
        fo = dict(model_opsets)
        fo.update({opsets.normalize_domain(i.domain): i.version for i in f.opset_import})
        for n in f.node:
            scopes.append(([n], fo))
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    scopes.extend((list(sg.node), fo) for sg in _graphs(a.g))
    missing: list[str] = []
    for g in _graphs(model.graph):
        missing.extend(t for t in _type_tags(g) if t not in missing)
    for nodes, ops in scopes:
        for n in nodes:
            d = opsets.normalize_domain(n.domain)
            if (d, n.op_type) in funcs:
                continue
            v = ops.get(d)
            s = None if v is None else opsets.schema(n.op_type, v, d)
            ver = None if s is None else s.since_version
            if ver is None or registry.lookup(d, n.op_type, ver) is None:
                tag = f"{(d + '::') if d else ''}{n.op_type}-{ver if ver else '?'}"
                if tag not in missing:
                    missing.append(tag)
    return missing


class EvaluatorRep(BackendRep):
    def __init__(self, model: onnx.ModelProto):
        self.model = model

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        from opshift.evaluator import evaluate

        names = [vi.name for vi in self.model.graph.input]
        init = {t.name for t in self.model.graph.initializer}
        names = [n for n in names if n not in init] or names
        if isinstance(inputs, Mapping):
            feeds = dict(inputs)
        else:
            feeds = dict(zip(names, inputs if isinstance(inputs, Sequence) else [inputs]))
        feeds = {k: tensor_array(v) if isinstance(v, onnx.TensorProto) else v
                 for k, v in feeds.items()}
        out = evaluate(self.model, feeds)
        return tuple(out[vi.name] for vi in self.model.graph.output)


class EvaluatorBackend(Backend):
    """onnx backend API over :func:`opshift.evaluate`."""

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return not unclaimed(model)

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> EvaluatorRep:
        return EvaluatorRep(model)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"
