"""Fusion rules as onnxscript rewriter patterns (see :func:`rules`)."""
