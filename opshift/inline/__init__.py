"""``inline``: PRelu, LeakyRelu and Selu to primitive ops, and model-local functions inlined.

:func:`opshift.inline.inliner.inline_proto` edits an ``onnx.ModelProto`` in place, in every
scope (main graph, If/Loop/Scan subgraphs, model-local functions): each node to inline is
replaced by the nodes of its template (:mod:`.templates`), chosen per node by
:mod:`.decompose` from the opset in force in its scope; every other node stays as it is.
Model-local functions are inlined first when asked (:mod:`.functions`). The model's
:class:`~opshift.graph.facts.Facts` give the element types, shapes and constants a node's
decomposition needs; :mod:`.verify` checks the replacements (``inline --verify``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["inline"]


def inline(model: Any, ops: Iterable[str] | str | None = None,
           functions: Iterable[str] | str | None = None, *,
           allow_nonfinite_slope: bool = False) -> Any:
    """Inline PRelu/LeakyRelu/Selu (``ops``) and model-local ``functions`` ("all" or names).

    At opsets 1..8 a PRelu whose slope is not a constant is refused (ConversionError): its
    form there gives NaN for an infinite or NaN slope where x >= 0. ``allow_nonfinite_slope``
    inlines it anyway (see :func:`~opshift.inline.inliner.inline_proto`).

    Accepts an ``onnx.ModelProto``, an ``onnx_ir.Model`` or a path; returns the same kind
    (a ModelProto for a path). The input is not modified.
    """
    from opshift.inline.inliner import inline_proto
    from opshift.io.models import from_proto, working_copy

    proto, kind, base_dir = working_copy(model)
    inline_proto(proto, ops, functions, base_dir=base_dir,
                 allow_nonfinite_slope=allow_nonfinite_slope)
    return from_proto(proto, kind)
