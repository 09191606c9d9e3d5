"""Fusion rules as onnxscript rewriter patterns (see :func:`rules`).

``rules()`` is an ``onnxscript.rewriter.RewriteRuleSet``; use it on its own::

    from onnxscript import rewriter
    model = rewriter.rewrite(model, pattern_rewrite_rules=opshift.rewriters.rules())

or together with onnxscript's default rules (``[*rewriter._DEFAULT_REWRITE_RULES,
*opshift.rewriters.rules()]``). ``opshift.fuse`` runs the same rules and also reports what
was fused and what was refused, and why.
"""

from __future__ import annotations

from onnxscript.rewriter import RewriteRule, RewriteRuleSet

__all__ = ["rules"]


def rules(*, allow_rounding: bool = False) -> RewriteRuleSet:
    """The PRelu / LeakyRelu / Selu fusion rules, commuted over Add/Mul/Max/Min operands.

    ``allow_rounding`` also fuses ``Elu(x) * gamma`` into Selu, which rounds differently
    (see :class:`opshift.rewriters.activations.EluSelu`); off by default.
    """
    from ._report import AnchoredMatcher, AnchoredRule
    from .activations import RULE_CLASSES, EluSelu

    out: list[RewriteRule] = []
    for r in [cls() for cls in RULE_CLASSES] + [EluSelu(allow_rounding)]:
        base = RewriteRule(r.pattern, r.rewrite, r.check, name=r.name)
        for pattern in base._target_pattern.commute():  # Add/Mul/Max/Min operand orders
            rule = AnchoredRule(pattern, r.rewrite, r.check, matcher=AnchoredMatcher,
                                name=r.name)
            rule._matcher.rule_name = r.name
            out.append(rule)
    return RewriteRuleSet(out)
