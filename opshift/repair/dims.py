"""Negative dims in graph inputs, outputs and value_info: cleared (unknown).

ONNX dims are >= 0. Some exporters write -1 for a dynamic dim (paddle2onnx's PaddleOCR
models declare their input ``[-1, 3, ?, ?]``); onnxruntime reads it as unknown, and so does
every opshift command (:func:`opshift.graph.declared.dims`), but onnx's shape inference
carries -1 into other values as if it were a size. An unknown dim says what the exporter
meant: the model computes the same for every input it accepted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx

from ..wellformed import negative_dim

if TYPE_CHECKING:
    from .fixer import Fixer

def fix_negative_dims(fx: Fixer) -> None:
    """Clear every negative dim the main graph and its subgraphs declare (where the
    structural check looks for them)."""
    for scope in fx.scopes():
        g = scope.graph
        if g is None:
            continue
        for entries, kind in ((g.input, "input"), (g.output, "output"),
                              (g.value_info, "value_info")):
            for vi in entries:
                what = cleared(vi.type)
                if what is not None:
                    fx.change("negative_dim", scope.label, "", f"{kind} {vi.name!r}: {what}",
                              WHY)


WHY = "a negative dim is not ONNX (dims are >= 0); runtimes read it as unknown, which it now says"


def cleared(tp: onnx.TypeProto) -> str | None:
    """Clear the negative dims of ``tp``; what changed (``[-1, 3] -> [?, 3]``), or None when
    it has none."""
    if negative_dim(tp) is None:
        return None
    before = _text(tp)
    _clear(tp)
    return f"{before} -> {_text(tp)}"


def _clear(tp: onnx.TypeProto) -> None:
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        for d in getattr(tp, kind).shape.dim:
            if d.dim_value < 0:
                d.ClearField("dim_value")
    elif kind in ("sequence_type", "optional_type"):
        _clear(getattr(tp, kind).elem_type)
    elif kind == "map_type":
        _clear(tp.map_type.value_type)


def _text(tp: onnx.TypeProto) -> str:
    """A type's shapes as ``[-1, 3, ?, ?]`` (nested types: their element's)."""
    kind = tp.WhichOneof("value")
    if kind in ("sequence_type", "optional_type"):
        return _text(getattr(tp, kind).elem_type)
    if kind == "map_type":
        return _text(tp.map_type.value_type)
    if kind not in ("tensor_type", "sparse_tensor_type"):
        return "?"
    dims = getattr(tp, kind).shape.dim
    return "[" + ", ".join(str(d.dim_value) if d.HasField("dim_value") else d.dim_param or "?"
                           for d in dims) + "]"
