"""Exact opset conversion: one engine for every default-domain op.

* :mod:`.engine` plans every node of every scope (main graph, If/Loop/Scan bodies,
  model-local functions) before anything is written, then sets the opsets and the IR version;
* :mod:`.walk` walks one node from its schema version to the target's, one step at a time;
* :mod:`.generic` judges a step from the two ``onnx.defs`` schemas (attributes, defaults,
  input/output counts, element types) for every op;
* :mod:`.registry` holds ``@at(version, *ops)`` step functions for what the schemas do not
  say, one module per concern in :mod:`.steps` (PRelu's slope rule, the bfloat16 Cast
  fallback, legacy broadcasting, Softmax's axis, ...);
* :mod:`.step` is the API those functions plan their edits through, and :mod:`.result` what
  a conversion reports.

It reads the model through :class:`opshift.graph.facts.Facts` and writes through
:class:`opshift.graph.edit.Edits`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["convert"]


def convert(model: Any, opset: int, *, verbose_log=None, keep_node_metadata: bool = False) -> Any:
    """Convert ``model`` (ModelProto, onnx_ir.Model or path) to default-domain ``opset``.

    Returns the converted model of the same kind (a ModelProto for a path); the object
    passed in is not modified. A node whose op does not exist at ``opset`` (Where below 7)
    in a region ``fuse`` fuses exactly into PRelu/LeakyRelu/Selu is fused into that op first
    (``verbose_log`` says so). Where the IR version goes below 10, which defines node
    metadata, it is dropped; ``keep_node_metadata=True`` moves it into the model's
    ``metadata_props`` instead, each entry as ``node:<node name>:<key>``
    (:func:`opshift.graph.ir_versions.node_metadata_to_model`). Raises
    :class:`~opshift.errors.ConversionError` naming the node when some rewrite cannot be
    exact. :func:`opshift.convert.engine.convert_proto` converts a ModelProto in place and
    returns what it did.
    """
    from opshift.convert.engine import convert_proto
    from opshift.io.models import from_proto, working_copy

    work, kind, base_dir = working_copy(model)
    convert_proto(work, opset, verbose_log=verbose_log, base_dir=base_dir,
                  keep_node_metadata=keep_node_metadata)
    return from_proto(work, kind)
