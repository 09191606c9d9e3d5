"""opshift's fusion rules for onnxscript's rewriter (see :func:`rules`).

``rules()`` is an ``onnxscript.rewriter.RewriteRuleSet``; use it on its own::

    from onnxscript import rewriter
    model = rewriter.rewrite(model, pattern_rewrite_rules=opshift.plugins.onnxscript.rules())

or together with onnxscript's default rules (``[*rewriter._DEFAULT_REWRITE_RULES,
*opshift.plugins.onnxscript.rules()]``). ``opshift.fuse`` runs the same rules and also reports
what was fused and what was refused, and why.

The checks prove exactness from static shapes and element types: on a model whose
intermediate values carry no type information, run onnx shape inference first
(``opshift.fuse`` does, without writing the inferred types into the result); matches whose
shapes cannot be proved are left alone.
"""

from opshift.fuse.rules import rules

__all__ = ["rules"]
