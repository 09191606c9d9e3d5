"""Rules for the forms exporters write for PRelu / LeakyRelu / Selu that ``inline`` never does.

Where each form comes from (the test models in ``tests/exporter_models.py`` mimic them):

* ``Relu(x) + c * Relu(-x)`` with ``c = -alpha``: Keras ``PReLU`` (``pos + neg`` with
  ``neg = -alpha * relu(-x)``) through tf2onnx, whose constant folding pre-negates alpha, or
  through keras2onnx's op-by-op path, which keeps ``Neg(alpha)``.
* ``P(x) + s * N(x)`` with P a positive part (``Relu``, ``Max(x, 0)``, ``Clip(x, 0, .)``) and
  N a negative part (``Min(x, 0)``, ``Clip(x, ., 0)``): hand-written PReLUs such as
  ``clamp(x, min=0) + w * clamp(x, max=0)`` through PyTorch's TorchScript and dynamo
  exporters (Clip with one bound omitted).
* ``Where(x > 0, x, s * x + 0)`` and ``Max(x, s * x + 0)``: ``paddle.where`` /
  ``paddle.maximum`` with ``alpha * x`` through paddle2onnx, whose ``scale`` op adds its
  bias even when it is 0 (``+ 0`` turns -0 into +0, so these need ``allow_rounding``).
* ``gamma * Where(x > 0, Elu(x), alpha * Elu(x))``: the standalone Keras 2.0-2.2 ``selu``
  (``scale * K.elu(x, alpha)``) through tf2onnx; ``Elu(x * 1) * gamma``: PyTorch's dynamo
  exporter, which sees ``F.selu`` as ``aten.elu(x, alpha, scale)``.

Exactness. The Relu/Clip/Max/Min forms give +0 at x = -0 in the evaluator and the ONNX
reference (``max(-0, 0)`` is +0 there; onnxruntime's Relu keeps -0), and +0 where ``s*x``
underflows to -0; PRelu gives -0: they are fused only with ``allow_rounding``. A Clip whose
other bound is omitted clamps the infinities to the largest finite values (the schema's
``numeric_limits`` defaults, which onnxruntime applies), so it is never PRelu. The Selu forms
round differently from Selu (``alpha*(exp(x)-1)`` vs ``alpha*exp(x)-alpha``): fused only
with ``allow_rounding``, like :class:`opshift.fuse.rules.activations.EluSelu`.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from opshift.fuse.rules import checks as ck
from opshift.fuse.rules.activations import EluSelu, between_0_and_1, relu_zero_sign
from opshift.fuse.rules.base import Rule, cmp_alternatives
from opshift.fuse.rules.selu import selu_plan
from opshift.fuse.rules.slope import slope_plan
from opshift.fuse.values import Match, resolve
from opshift.opsets import since_version
from opshift.tables import number

_WRAPS = "Relu(-x) is 0 at the most negative value (-x wraps)"


class ReluAddNegSlope(Rule):
    """``Relu(x) + c * Relu(-x)`` -> PRelu / LeakyRelu with slope ``-c`` (c a finite
    constant: for x > 0 the pattern adds c*0)."""

    def pattern(self, op, x, s):
        return op.Add(op.Relu(x), op.Mul(s, op.Relu(op.Neg(x)), _outputs=["sx"]))

    def plan(self, match, x, s, sx, **_):
        return slope_plan(match, x, s, sx.producer(), match.opset, zero_to_slope=True,
                          zero_sign=relu_zero_sign, integers=_WRAPS, negate=True)


# -- positive part + slope * negative part -------------------------------------------------


def _clip_bounds(node: ir.Node, opset: int) -> dict[str, ir.Value | float | None]:
    """Clip's bounds: values (inputs, from Clip-11) or floats (attributes, before); None
    where omitted."""
    if (since_version("Clip", opset) or 1) >= 11:
        ins = list(node.inputs) + [None, None]
        return {"min": ins[1], "max": ins[2]}
    out: dict[str, ir.Value | float | None] = {}
    for name in ("min", "max"):
        attr = node.attributes.get(name)
        out[name] = None if attr is None or attr.is_ref() else attr.as_float()
    return out


def _bound_value(match: Match, bound, x: ir.Value, what: str) -> tuple[float, tuple[ir.Node, ...]]:
    if isinstance(bound, float):
        return bound, ()
    c = resolve(match, bound)
    if c is None or c.array is None:
        raise ck.Refuse(f"the Clip's {what} is not a constant")
    if c.array.size != 1:
        raise ck.Refuse(f"the Clip's {what} has {c.array.size} elements, not one")
    return float(c.array.astype(np.float64).reshape(())), c.producers


def _part(match: Match, node: ir.Node, x: ir.Value, positive: bool, opset: int
          ) -> tuple[ir.Node, ...]:
    """Check that ``node`` is ``max(x, 0)`` (``positive``) or ``min(x, 0)`` for every x,
    infinities included; returns the constant producers it reads."""
    if node.op_type == "Relu":
        return ()
    if node.op_type in ("Max", "Min"):
        if len(node.inputs) != 2:
            raise ck.Refuse(f"{node.op_type} has {len(node.inputs)} operands, not 2")
        other = node.inputs[1] if node.inputs[0] is x else node.inputs[0]
        return ck.zero(match, other, x, f"{node.op_type} operand").producers
    zero_at, far = ("min", "max") if positive else ("max", "min")
    bounds = _clip_bounds(node, opset)
    if bounds[far] is None:
        extreme = "largest" if positive else "lowest"
        sign = "+" if positive else "-"
        raise ck.Refuse(f"Clip without a {far} clamps {sign}inf to the {extreme} finite value "
                        "(the schema's numeric_limits default, as onnxruntime computes it) "
                        f"where PRelu gives {'+inf' if positive else 'slope*(-inf)'}")
    if bounds[zero_at] is None:
        part = "positive" if positive else "negative"
        raise ck.Refuse(f"Clip without a {zero_at} is not the {part} part of x")
    zero, nodes = _bound_value(match, bounds[zero_at], x, zero_at)
    if zero != 0:
        raise ck.Refuse(f"the Clip's {zero_at} is {zero:g}, not 0")
    inf, more = _bound_value(match, bounds[far], x, far)
    if inf != (math.inf if positive else -math.inf):
        raise ck.Refuse(f"the Clip's {far} is {inf:g}, not {'+' if positive else '-'}inf")
    return nodes + more


class _PartsSlope(Rule):
    """``P(x) + s * N(x)`` -> PRelu / LeakyRelu, P and N the parts the subclass names."""

    def pattern(self, op, x, s, zp, zn):
        return op.Add(self.positive(op, x, zp), op.Mul(s, self.negative(op, x, zn),
                                                      _outputs=["sx"]))

    def plan(self, match, x, s, sx, pos, neg, **_):
        opset = match.opset
        extra = (_part(match, pos.producer(), x, True, opset)
                 + _part(match, neg.producer(), x, False, opset))
        return slope_plan(match, x, s, sx.producer(), opset, zero_to_slope=True, extra=extra,
                          zero_sign=relu_zero_sign)


def _relu(op, x, _z):
    return op.Relu(x, _outputs=["pos"])


def _max(op, x, z):
    return op.Max(x, z, _outputs=["pos"])


def _clip_pos(op, x, _z):
    return op.Clip(x, _allow_other_inputs=True, _outputs=["pos"])


def _min(op, x, z):
    return op.Min(x, z, _outputs=["neg"])


def _clip_neg(op, x, _z):
    return op.Clip(x, _allow_other_inputs=True, _outputs=["neg"])


def _parts_rule(name: str, positive, negative, doc: str) -> type[Rule]:
    return type(name, (_PartsSlope,), {"positive": staticmethod(positive),
                                       "negative": staticmethod(negative), "__doc__": doc})


ReluAddSlope = _parts_rule("ReluAddSlope", _relu, _min, "``Relu(x) + s * Min(x, 0)``.")
ReluClipSlope = _parts_rule("ReluClipSlope", _relu, _clip_neg,
                            "``Relu(x) + s * Clip(x, -inf, 0)``.")
MaxMinSlope = _parts_rule("MaxMinSlope", _max, _min, "``Max(x, 0) + s * Min(x, 0)``.")
MaxClipSlope = _parts_rule("MaxClipSlope", _max, _clip_neg,
                           "``Max(x, 0) + s * Clip(x, -inf, 0)``.")
ClipMinSlope = _parts_rule("ClipMinSlope", _clip_pos, _min,
                           "``Clip(x, 0, inf) + s * Min(x, 0)``.")
ClipClipSlope = _parts_rule("ClipClipSlope", _clip_pos, _clip_neg,
                            "``Clip(x, 0, inf) + s * Clip(x, -inf, 0)`` (PyTorch's clamps).")


# -- s * x + 0: Paddle's scale op ---------------------------------------------------------


def _bias_plan(match: Match, x, s, sx, b, z=None, zero_to_slope: bool = False, value_check=None):
    """The slope plan for a product ``s*x + b``, b a zero: ``+ (-0)`` changes nothing, so the
    pattern is the product's; ``+ (+0)`` turns a -0 product into +0."""
    bc = ck.zero(match, b, x, "added constant")
    extra = bc.producers + (ck.zero(match, z, x).producers if z is not None else ())
    plus_zero = not bool(np.all(np.signbit(bc.source.astype(np.float64))))
    return slope_plan(match, x, s, sx.producer(), match.opset, zero_to_slope=zero_to_slope,
                      extra=extra, value_check=value_check,
                      zero_sign=_adds_plus_zero if plus_zero else None)


def _adds_plus_zero(_arr) -> str:
    return ("the pattern adds +0 to s*x, which turns -0 into +0 (at x = -0, and where s*x "
            "is -0) where PRelu keeps -0")


class WhereScaleSlope(Rule):
    """``Where(x < 0, s * x + 0, x)`` (any comparison form) -> PRelu / LeakyRelu."""

    def pattern(self, op, x, s, z, b):
        cond = cmp_alternatives(op, x, z, negative=True)
        return op.Where(cond, op.Add(op.Mul(s, x, _outputs=["sx"]), b), x)

    def plan(self, match, x, s, z, b, sx, zero_to_slope, **_):
        return _bias_plan(match, x, s, sx, b, z, zero_to_slope)


class WhereScaleSlopeMirrored(Rule):
    """``Where(x > 0, x, s * x + 0)`` (any comparison form; ``paddle.where(x > 0, x,
    alpha * x)`` through paddle2onnx) -> PRelu / LeakyRelu."""

    def pattern(self, op, x, s, z, b):
        cond = cmp_alternatives(op, x, z, negative=False)
        return op.Where(cond, x, op.Add(op.Mul(s, x, _outputs=["sx"]), b))

    def plan(self, match, x, s, z, b, sx, zero_to_slope, **_):
        return _bias_plan(match, x, s, sx, b, z, zero_to_slope)


class MaxScaleSlope(Rule):
    """``Max(x, x * a + 0)`` with constant 0 < a <= 1 (``paddle.maximum(x, alpha * x)``
    through paddle2onnx) -> LeakyRelu / PRelu."""

    def pattern(self, op, x, s, b):
        return op.Max(x, op.Add(op.Mul(x, s, _outputs=["sx"]), b))

    def plan(self, match, x, s, b, sx, **_):
        return _bias_plan(match, x, s, sx, b, value_check=between_0_and_1)


# -- Selu through Elu ------------------------------------------------------------------------


_ROUNDS = ("rounds differently from Selu for x < 0 (alpha*(exp(x)-1) vs alpha*exp(x)-alpha); "
           "not exact (allow_rounding=True fuses it anyway)")


class WhereEluSelu(Rule):
    """``gamma * Where(x > 0, Elu(x), alpha * Elu(x))`` (Elu's alpha 1; any comparison form)
    -> Selu(alpha, gamma), only with ``allow_rounding``."""

    def pattern(self, op, x, z, a, g):
        e = op.Elu(x, _outputs=["elu"])
        cond = cmp_alternatives(op, x, z, negative=False)
        return op.Mul(g, op.Where(cond, e, op.Mul(a, e)))

    def plan(self, match, x, z, a, g, elu, **_):
        zc = ck.zero(match, z, x)
        elu_alpha = elu.producer().attributes.get_float("alpha", 1.0)
        if elu_alpha != 1.0:
            raise ck.Refuse(f"Elu's alpha is {number(elu_alpha)}, not 1")
        plan = selu_plan(match, x, match.opset, [a], [g], extra=zc.producers)
        if not self.allow_rounding:
            raise ck.Refuse(f"gamma*Where(x > 0, Elu(x), alpha*Elu(x)) {_ROUNDS}")
        plan.signed_zero_exact = False
        plan.zero_sign = "at x = -0 the pattern gives gamma*alpha*Elu(-0) = -0, Selu +0"
        return plan


class EluSeluScaledInput(EluSelu):
    """``Elu(x * 1, alpha) * gamma`` (the input scale PyTorch's ``aten.elu`` multiplies by)
    -> Selu, as :class:`EluSelu`; ``x * 1`` is x for every x."""

    def pattern(self, op, x, one, g):
        return op.Mul(op.Elu(op.Mul(x, one), _outputs=["elu"]), g)

    def plan(self, match, x, one, g, elu, **_):
        oc = resolve(match, one)
        if oc is None or oc.array is None:
            raise ck.Refuse("the input scale is not a constant")
        if not bool(np.all(oc.array.astype(np.float64) == 1)):
            raise ck.Refuse("the input scale is not 1")
        ck.no_expand(match, oc.shape, x, "input scale")
        plan = super().plan(match, x, g, elu)
        plan.cleanup = plan.cleanup + oc.producers
        return plan


EXPORTER_RULES = (ReluAddNegSlope, ReluAddSlope, ReluClipSlope, MaxMinSlope, MaxClipSlope,
                  ClipMinSlope, ClipClipSlope, WhereScaleSlope, WhereScaleSlopeMirrored,
                  MaxScaleSlope, WhereEluSelu)
