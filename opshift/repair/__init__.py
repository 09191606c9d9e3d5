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

:func:`opshift.repair.fixer.fix_proto` runs them on a ``ModelProto`` in place; one module per
repair. ``opshift.fix``, ``FixPass`` and the command are in :mod:`opshift.passes.fix`.
"""
