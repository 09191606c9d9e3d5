"""The fusion rules: onnxscript pattern rules, one module per family (:mod:`.activations`,
:mod:`.exporters`, :mod:`.casts`) on one base (:mod:`.base`), with the exactness checks
(:mod:`.checks`) and what a slope or Selu pattern fuses to (:mod:`.slope`, :mod:`.selu`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from onnxscript.rewriter import RewriteRuleSet

if TYPE_CHECKING:
    from opshift.fuse.report import Recorder
    from opshift.fuse.rules.base import Rule
    from opshift.fuse.values import InferredTypes

__all__ = ["rules"]


def rules(*, allow_rounding: bool = False, recorder: Recorder | None = None,
          inferred: InferredTypes | None = None) -> RewriteRuleSet:
    """The PRelu / LeakyRelu / Selu fusion rules, commuted over Add/Mul/Max/Min operands.

    A float32 op between Casts from and back to float16/bfloat16 becomes the 16-bit op
    (:mod:`opshift.fuse.rules.casts`): on 16-bit types the ops compute in float32 and round
    once. ``allow_rounding`` also fuses the forms that round differently from the op (e.g.
    ``Elu(x) * gamma`` into Selu, see :class:`opshift.fuse.rules.activations.EluSelu`, or a
    Selu body computed step by step in float16) or
    give a zero of the other sign somewhere (e.g. ``Where(x > 0, x, s*x)`` with a negative
    slope element, at x = +-0); off by default.

    ``opshift.fuse`` makes the rules of each run with the run's ``recorder`` (what they
    fuse and refuse, and why) and the types onnx shape inference found (``inferred``);
    without them (``onnxscript.rewriter.rewrite``) nothing is recorded and the checks read
    the types the IR carries.
    """
    from opshift.fuse.report import AnchoredRule

    out = [AnchoredRule(_pattern(cls), r.rewrite, r.check, name=r.name, recorder=recorder)
           for cls in _classes()
           for r in [cls(allow_rounding, recorder, inferred)]]
    return RewriteRuleSet(out)


def _classes() -> tuple[type[Rule], ...]:
    from opshift.fuse.rules.activations import RULE_CLASSES, EluSelu
    from opshift.fuse.rules.casts import CAST_RULES
    from opshift.fuse.rules.exporters import EXPORTER_RULES, EluSeluScaledInput

    return (*RULE_CLASSES, *EXPORTER_RULES, EluSeluScaledInput, EluSelu, *CAST_RULES)


@functools.cache
def _pattern(cls: type[Rule]):
    """The onnxscript pattern of rule class ``cls``, traced once per process (the rules of
    every run share it: matching reads a pattern, never changes it)."""
    from onnxscript.rewriter._pattern_ir import _to_graph_pattern

    return _to_graph_pattern(cls().pattern)
