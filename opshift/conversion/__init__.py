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
