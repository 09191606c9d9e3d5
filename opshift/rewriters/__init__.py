"""Fusion rules as onnxscript rewriter patterns (see :func:`rules`).

``rules()`` is an ``onnxscript.rewriter.RewriteRuleSet``; use it on its own::

    from onnxscript import rewriter
    model = rewriter.rewrite(model, pattern_rewrite_rules=opshift.rewriters.rules())

or together with onnxscript's default rules (``[*rewriter._DEFAULT_REWRITE_RULES,
*opshift.rewriters.rules()]``). ``opshift.fuse`` runs the same rules and also reports what
was fused and what was refused, and why.

The checks prove exactness from static shapes and element types: on a model whose
intermediate values carry no type information, run onnx shape inference first (``opshift.fuse``
does, without writing the inferred types into the result); matches whose shapes cannot be
proved are left alone.
"""

from __future__ import annotations

from onnxscript.rewriter import RewriteRuleSet

__all__ = ["rules"]


def rules(*, allow_rounding: bool = False) -> RewriteRuleSet:
    """The PRelu / LeakyRelu / Selu fusion rules, commuted over Add/Mul/Max/Min operands.

    A float32 op between Casts from and back to float16/bfloat16 becomes the 16-bit op
    (:mod:`opshift.rewriters.casts`): on 16-bit types the ops compute in float32 and round
    once. ``allow_rounding`` also fuses the forms that round differently from the op (e.g.
    ``Elu(x) * gamma`` into Selu, see :class:`opshift.rewriters.activations.EluSelu`, or a
    Selu body computed step by step in float16) or
    give a zero of the other sign somewhere (e.g. ``Where(x > 0, x, s*x)`` with a negative
    slope element, at x = +-0); off by default.
    """
    from opshift.rewriters._report import AnchoredRule
    from opshift.rewriters.activations import RULE_CLASSES, EluSelu
    from opshift.rewriters.casts import CAST_RULES
    from opshift.rewriters.exporters import EXPORTER_RULES, EluSeluScaledInput

    classes = (*RULE_CLASSES, *EXPORTER_RULES, EluSeluScaledInput, EluSelu, *CAST_RULES)
    out = [AnchoredRule(r.pattern, r.rewrite, r.check, name=r.name)
           for r in [cls(allow_rounding) for cls in classes]]
    return RewriteRuleSet(out)
