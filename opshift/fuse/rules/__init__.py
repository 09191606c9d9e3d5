"""The fusion rules: onnxscript pattern rules, one module per family (:mod:`.activations`,
:mod:`.exporters`, :mod:`.casts`) on one base (:mod:`.base`), with the exactness checks
(:mod:`.checks`) and what a slope or Selu pattern fuses to (:mod:`.slope`, :mod:`.selu`).
"""

from __future__ import annotations

from onnxscript.rewriter import RewriteRuleSet

__all__ = ["rules"]


def rules(*, allow_rounding: bool = False) -> RewriteRuleSet:
    """The PRelu / LeakyRelu / Selu fusion rules, commuted over Add/Mul/Max/Min operands.

    A float32 op between Casts from and back to float16/bfloat16 becomes the 16-bit op
    (:mod:`opshift.fuse.rules.casts`): on 16-bit types the ops compute in float32 and round
    once. ``allow_rounding`` also fuses the forms that round differently from the op (e.g.
    ``Elu(x) * gamma`` into Selu, see :class:`opshift.fuse.rules.activations.EluSelu`, or a
    Selu body computed step by step in float16) or
    give a zero of the other sign somewhere (e.g. ``Where(x > 0, x, s*x)`` with a negative
    slope element, at x = +-0); off by default.
    """
    from opshift.fuse.report import AnchoredRule
    from opshift.fuse.rules.activations import RULE_CLASSES, EluSelu
    from opshift.fuse.rules.casts import CAST_RULES
    from opshift.fuse.rules.exporters import EXPORTER_RULES, EluSeluScaledInput

    classes = (*RULE_CLASSES, *EXPORTER_RULES, EluSeluScaledInput, EluSelu, *CAST_RULES)
    out = [AnchoredRule(r.pattern, r.rewrite, r.check, name=r.name)
           for r in [cls(allow_rounding) for cls in classes]]
    return RewriteRuleSet(out)
