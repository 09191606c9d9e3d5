"""``fix``: repairs of the defects that break runtimes, without changing the model's opset.

Each repair is exact (the numbers the model computes do not change) and is listed with the
node, what changed and why:

* ``consumed_inputs`` (or any other attribute named so) left on a node whose schema version in
  force does not define it (opset >= 6): removed; it only ever was an in-place hint.
* PRelu (version >= 7) with a 1-D slope ``[C]`` that only makes sense per channel (X's axis 1
  is C, its last axis is a known size other than C): the slope becomes ``[C, 1, ..., 1]`` (the
  constant is reshaped, copied first if shared, or an Unsqueeze is inserted when it is
  dynamic). When both readings are possible (axis 1 and last axis are both C) the node is
  reported and left alone unless ``prelu_slope='channel'`` or ``'numpy'`` says which.
* Attributes of the wrong type (``alpha`` given as INT, as a one-element TENSOR or FLOATS):
  converted to the schema's type when the value is exactly representable, else refused.
* Missing opset imports for a used domain: refused for the default domain (its version is
  unknown); a model-local function's domain gets version 1; a function body missing an import
  the model has gets the model's version.
* Duplicate node names (renamed) and values produced twice (the later producer and its uses
  after it are renamed; refused when the name is a graph or function output).
* A model-local function defined twice (same domain, name and overload): a later definition
  identical to the first is removed (a call means the same either way); definitions that
  differ are refused, since a call could mean either body.
* A declared IR version older than the opsets and features need (raised), or newer than the
  opset's (lowered, never below what imports and features need, and never when the model uses
  a feature whose IR version opshift cannot date).

:func:`opshift.fix.fixer.fix_proto` runs them on a ``ModelProto`` in place; one module per
repair.
"""

from __future__ import annotations

from typing import Any

__all__ = ["fix"]


def fix(model: Any, *, prelu_slope: str | None = None) -> Any:
    """Return a repaired copy of ``model`` (ModelProto, onnx_ir.Model, or path -> ModelProto).

    The input is not mutated. Raises :class:`~opshift.errors.ConversionError` if a defect
    cannot be repaired exactly. :func:`opshift.fix.fixer.fix_with_result` also returns the
    list of changes.
    """
    from opshift.fix.fixer import fix_proto
    from opshift.io.models import from_proto, working_copy

    work, kind, base_dir = working_copy(model)
    fix_proto(work, prelu_slope=prelu_slope, base_dir=base_dir)
    return from_proto(work, kind)
