"""What onnx's shape inference says about a model's values: element types and shapes, from
one run on a copy of the model (or from a model the caller already ran it on)."""

from __future__ import annotations

import onnx

from opshift import opsets
from opshift.graph.declared import dims
from opshift.graph.scopes import constant_tensor, subgraphs


def _dims(tt) -> tuple:
    return dims(tt.shape)


class Inferred:
    """Element types and shapes (ints, symbolic names, or None) from one run of onnx shape
    inference on a copy, for the main graph, subgraphs and function value_info; what
    inference cannot say is absent. Indexed once; each answer is read from the protobuf
    when first asked for (a big model has a value_info per node)."""

    def __init__(self, model: onnx.ModelProto, annotated: onnx.ModelProto | None = None):
        m = annotated
        if m is None:
            m = onnx.ModelProto()
            m.CopyFrom(model)
            try:
                m = onnx.shape_inference.infer_shapes(m, strict_mode=False, data_prop=False)
            except Exception:  # best effort: what inference cannot say stays unknown
                m = model
        self._model = m  # the index points into it
        #: name -> the ValueInfoProto or TensorProto that says it (the last one wins)
        self._src: dict[str, object] = {}
        self._graph(m.graph)
        for f in m.functions:
            self._src.update((vi.name, vi) for vi in getattr(f, "value_info", ()))

    def _graph(self, g: onnx.GraphProto) -> None:
        for vis in (g.input, g.output, g.value_info):
            self._src.update((vi.name, vi) for vi in vis)
        self._src.update((t.name, t) for t in g.initializer)
        for n in g.node:
            for _, sg in subgraphs(n):
                self._graph(sg)
            if n.op_type == "Constant":
                c = constant_tensor(n)
                if c is not None:
                    self._src[n.output[0]] = c

    def elem_type(self, name: str) -> int | None:
        src = self._src.get(name)
        if isinstance(src, onnx.TensorProto):
            return src.data_type or None
        if src is None or not src.type.HasField("tensor_type"):
            return None
        return src.type.tensor_type.elem_type or None

    def type_str(self, name: str) -> str | None:
        """The declared or inferred type of ``name`` as schemas spell it
        (``seq(tensor(float))``, ``optional(...)``), when known in full. (A constant's is
        its element type: :meth:`elem_type`.)"""
        src = self._src.get(name)
        return opsets.type_string(src.type) if isinstance(src, onnx.ValueInfoProto) else None

    def shape(self, name: str) -> tuple | None:
        src = self._src.get(name)
        if isinstance(src, onnx.TensorProto):
            return tuple(src.dims)
        if src is None or not src.type.HasField("tensor_type"):
            return None
        tt = src.type.tensor_type
        return _dims(tt) if tt.HasField("shape") else None

    def elem_types(self) -> dict[str, int]:
        """Value name -> element type, for every value inference typed."""
        out = {}
        for name in self._src:
            t = self.elem_type(name)
            if t:
                out[name] = t
        return out
