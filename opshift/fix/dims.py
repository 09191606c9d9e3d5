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

from opshift.graph.declared import dims_text, negative_dim, tensor_shapes

if TYPE_CHECKING:
    from opshift.fix.fixer import Fixer

WHY = "a negative dim is not ONNX (dims are >= 0); runtimes read it as unknown, which it now says"


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


def cleared(tp: onnx.TypeProto) -> str | None:
    """Clear the negative dims of ``tp``; what changed (``[-1, 3] -> [?, 3]``), or None when
    it has none."""
    if negative_dim(tp) is None:
        return None
    shapes = tensor_shapes(tp)
    before = ", ".join(map(dims_text, shapes))
    for shape in shapes:
        for d in shape.dim:
            if d.dim_value < 0:
                d.ClearField("dim_value")
    return f"{before} -> {', '.join(map(dims_text, shapes))}"
