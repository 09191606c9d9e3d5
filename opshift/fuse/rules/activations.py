"""Rules fusing decomposed PRelu / LeakyRelu / Selu back into the single op.

Every rule is an ``onnxscript.rewriter.pattern`` rule (pattern / check / rewrite, see
:class:`opshift.fuse.rules.base.Rule`). The patterns here cover the ONNX function bodies (with
CastLike, with typed constants, with Cast), the decompositions
:mod:`opshift.inline.templates` emits in every opset band, and the comparison, Max and
Min forms exporters share with them; :mod:`opshift.fuse.rules.exporters` has the forms only
exporters write. Each check proves exactness from the constants and shapes and refuses with a
reason otherwise.

Comparison forms. ``Where(c, s*x, x)`` is PRelu when ``c`` is ``x < 0`` or a form equal to it
wherever it matters: at NaN both branches are NaN, so ``Not(x >= 0)`` (true at NaN) is as good
as ``x < 0`` (false at NaN); at x == +-0 the forms true at 0 (``x <= 0``, ``Not(x > 0)``)
give ``s*(+-0)``, which is PRelu's x for a finite slope only, and with its sign only when no
slope element is negative (else they need ``allow_rounding``). The mirrored forms
(``Where(x > 0, x, s*x)`` ...) are treated alike. ``Max(x, a*x)`` (0 < a <= 1) and
``Min(x, a*x)`` (a >= 1) are LeakyRelu bit for bit, zeros included.

Which op. A one-element constant slope -- a ``Constant`` node or an initializer, possibly
through Cast/CastLike or reshapes -- becomes LeakyRelu (an attribute every backend supports)
when a float32 ``alpha`` reproduces it exactly in X's type and LeakyRelu accepts that type at
the model's opset; any other slope -- a graph value a caller may feed, a tensor, or a value no
float32 reproduces -- becomes PRelu, whose slope placement at the model's opset (numpy from 7,
legacy per-channel before) must equal the pattern's. So ``fuse(inline(m))`` gives back the op
``m`` had, except a PRelu whose slope is a one-element constant, which comes back as the
LeakyRelu computing the same; a PRelu reads the slope value the inlined node read (an
initializer inline reshaped into a Constant at opsets 1..6, a Cast of a constant), see
:func:`opshift.fuse.rules.slope.prelu_slope`.

Integers. Where forms are exact for integer X (PRelu accepts int32/int64 from 9). The Min
form and ``Relu(x) - s*Relu(-x)`` are not (``a*x`` and ``-x`` wrap around) and refuse them.

Signs of zero. ``Relu(x) - s*Relu(-x)`` gives +0 at x = -0 where PRelu gives -0, and Selu's
body -0 where Selu gives +0; both are forms ``inline`` writes, and they are fused as the op
(``Rule.inline_form``), which is the op ``inline`` started from.
"""

from __future__ import annotations

from opshift.fuse.rules import checks as ck
from opshift.fuse.rules.base import Rule, cmp_alternatives
from opshift.fuse.rules.selu import selu_plan
from opshift.fuse.rules.slope import slope_plan
from opshift.fuse.values import resolve, type_allowed
from opshift.tables import number

# -- Where forms: function bodies (bands function/static) and exporter patterns ------------------


class WhereSlope(Rule):
    """``Where(x < 0, s * x, x)`` (any comparison form) -> PRelu / LeakyRelu."""

    def pattern(self, op, x, s, z):
        cond = cmp_alternatives(op, x, z, negative=True)
        return op.Where(cond, op.Mul(s, x, _outputs=["sx"]), x)

    def plan(self, match, x, s, z, sx, zero_to_slope, **_):
        zc = ck.zero(match, z, x)
        return slope_plan(match, x, s, sx.producer(), match.opset,
                          zero_to_slope=zero_to_slope, extra=zc.producers)


class WhereSlopeMirrored(Rule):
    """``Where(x > 0, x, s * x)`` (any comparison form) -> PRelu / LeakyRelu."""

    def pattern(self, op, x, s, z):
        cond = cmp_alternatives(op, x, z, negative=False)
        return op.Where(cond, x, op.Mul(s, x, _outputs=["sx"]))

    def plan(self, match, x, s, z, sx, zero_to_slope, **_):
        zc = ck.zero(match, z, x)
        return slope_plan(match, x, s, sx.producer(), match.opset,
                          zero_to_slope=zero_to_slope, extra=zc.producers)


def _selu_zero_sign(plan, zero_to_slope: bool):
    """At x == +-0 the op gives ``g*(a*1 - a)`` = +0: the pattern too when zero takes its
    exp branch, ``g*x`` (-0 at x = -0) when it takes the other."""
    if not zero_to_slope:
        plan.signed_zero_exact = False
        plan.zero_sign = "at x = -0 the pattern gives gamma*(-0) = -0 where Selu gives +0"
    return plan


class WhereSelu(Rule):
    """Selu's function body: ``Where(x < 0, g * (a * exp(x) - a), g * x)`` (any comparison
    form; at x == 0 both branches are 0, at NaN both NaN)."""

    inline_form = True  # the body maps -0 to -0, the op to +0

    def pattern(self, op, x, z, a1, a2, g1, g2):
        cond = cmp_alternatives(op, x, z, negative=True)
        neg = op.Mul(g1, op.Sub(op.Mul(a1, op.Exp(x)), a2))
        return op.Where(cond, neg, op.Mul(g2, x))

    def plan(self, match, x, z, a1, a2, g1, g2, zero_to_slope, **_):
        zc = ck.zero(match, z, x)
        plan = selu_plan(match, x, match.opset, [a1, a2], [g1, g2], extra=zc.producers)
        return _selu_zero_sign(plan, zero_to_slope)


class WhereSeluMirrored(Rule):
    """``Where(x > 0, g * x, g * (a * exp(x) - a))`` -> Selu."""

    def pattern(self, op, x, z, a1, a2, g1, g2):
        cond = cmp_alternatives(op, x, z, negative=False)
        neg = op.Mul(g1, op.Sub(op.Mul(a1, op.Exp(x)), a2))
        return op.Where(cond, op.Mul(g2, x), neg)

    def plan(self, match, x, z, a1, a2, g1, g2, zero_to_slope, **_):
        zc = ck.zero(match, z, x)
        plan = selu_plan(match, x, match.opset, [a1, a2], [g1, g2], extra=zc.producers)
        return _selu_zero_sign(plan, zero_to_slope)


# -- Max / Min forms (legacy band, exporters) ------------------------------------------------


def between_0_and_1(arr) -> None:
    import numpy as np

    v = arr.astype(np.float64)
    if bool(np.any(np.isnan(v))):
        raise ck.Refuse("the slope contains NaN")
    if bool(np.any(v > 1)):
        raise ck.Refuse(f"slope {number(arr.ravel()[v.ravel() > 1][0])} > 1: Max(x, a*x) is "
                        "a*x for x > 0, a different function from LeakyRelu")
    if bool(np.any(v < 0)):
        raise ck.Refuse(f"slope {number(arr.ravel()[v.ravel() < 0][0])} < 0: Max(x, a*x) is "
                        "a*x for x < 0 only when 0 <= a <= 1")
    if bool(np.any(v == 0)):
        raise ck.Refuse("slope 0: Max(x, 0*x) is NaN at x = +inf (0*inf), LeakyRelu(alpha=0) "
                        "is +inf")


def _at_least_1(arr) -> None:
    import numpy as np

    v = arr.astype(np.float64)
    if not bool(np.all(np.isfinite(v))):
        raise ck.Refuse("the slope is not finite: Min(x, a*x) at x = 0 is NaN for a = inf")
    if bool(np.any(v < 1)):
        raise ck.Refuse(f"slope {number(arr.ravel()[v.ravel() < 1][0])} < 1: Min(x, a*x) is "
                        "LeakyRelu only for a >= 1")


class MaxSlope(Rule):
    """``Max(x, x * a)`` with constant 0 < a <= 1 -> LeakyRelu (PRelu for a tensor a)."""

    def pattern(self, op, x, s):
        return op.Max(x, op.Mul(x, s, _outputs=["sx"]))

    def plan(self, match, x, s, sx, **_):
        return slope_plan(match, x, s, sx.producer(), match.opset, zero_to_slope=False,
                          value_check=between_0_and_1)


class MinSlope(Rule):
    """``Min(x, x * a)`` with constant finite a >= 1 -> LeakyRelu (PRelu for a tensor a)."""

    def pattern(self, op, x, s):
        return op.Min(x, op.Mul(x, s, _outputs=["sx"]))

    def plan(self, match, x, s, sx, **_):
        return slope_plan(match, x, s, sx.producer(), match.opset, zero_to_slope=False,
                          value_check=_at_least_1,
                          integers="a*x wraps around for large x >= 0, so Min picks it")


# -- Relu forms ---------------------------------------------------------------------------


def relu_zero_sign(_arr) -> str:
    """The zeros of the forms adding a positive part (Relu, Max(x, 0), Clip(x, 0, inf)) and a
    slope times a negative part: ``max(-0, 0)`` is +0 (the evaluator, the ONNX reference;
    onnxruntime's Relu keeps -0), so their result at x = -0 is +0 or depends on the backend;
    PRelu gives -0."""
    return ("at x = -0 the pattern gives +0 (its positive part max(-0, 0) is +0, and +0 +- s*0 "
            "is +0) where PRelu gives -0, and +0 where s*x is -0")


class ReluSubSlope(Rule):
    """``Relu(x) - s * Relu(-x)`` -> PRelu / LeakyRelu (s a finite constant: for x > 0 the
    pattern adds s*0)."""

    inline_form = True  # inline's legacy form for PRelu and LeakyRelu a <= 0

    def pattern(self, op, x, s):
        return op.Sub(op.Relu(x), op.Mul(s, op.Relu(op.Neg(x)), _outputs=["sx"]))

    def plan(self, match, x, s, sx, **_):
        return slope_plan(match, x, s, sx.producer(), match.opset, zero_to_slope=True,
                          zero_sign=relu_zero_sign,
                          integers="Relu(-x) is 0 at the most negative value (-x wraps)")


class ReluSelu(Rule):
    """The legacy-band Selu: ``(Relu(x) + (exp(-Relu(-x)) * a - a)) * g`` -> Selu.

    Same float operations as the op: exp sees min(x, 0), the positive branch adds
    ``a*1 - a == 0``; at -inf both give ``-a*g``; NaN propagates through Relu.
    """

    def pattern(self, op, x, a1, a2, g):
        exp = op.Exp(op.Neg(op.Relu(op.Neg(x))))
        return op.Mul(op.Add(op.Relu(x), op.Sub(op.Mul(exp, a1), a2)), g)

    def plan(self, match, x, a1, a2, g, **_):
        return selu_plan(match, x, match.opset, [a1, a2], [g])


class EluSelu(Rule):
    """``Elu(x, alpha) * gamma`` -> Selu, only with ``allow_rounding``: Elu computes
    ``alpha*(exp(x)-1)``, Selu ``alpha*exp(x)-alpha``; they round differently for x < 0 (up to
    tens of percent relative error near 0-), so by default this rule refuses."""

    def pattern(self, op, x, g):
        return op.Mul(op.Elu(x, _outputs=["elu"]), g)

    def plan(self, match, x, g, elu, **_):
        gc = resolve(match, g)
        if gc is None:
            raise ck.Refuse("gamma is not a constant")
        if gc.source.size != 1:
            raise ck.Refuse(f"gamma has shape {list(gc.shape)}, not a scalar")
        if not self.allow_rounding:
            raise ck.Refuse("Elu(x)*gamma rounds differently from Selu for x < 0 "
                            "(alpha*(exp(x)-1) vs alpha*exp(x)-alpha); not exact "
                            "(allow_rounding=True fuses it anyway)")
        alpha = elu.producer().attributes.get_float("alpha", 1.0)
        dtype = ck.x_dtype(match, x, gc)
        gamma = ck.scalar_attr(gc, dtype, "gamma")
        ck.no_expand(match, gc.shape, x, "gamma")
        version, ok = type_allowed("Selu", match.opset, dtype)
        if not ok:
            raise ck.Refuse(f"Selu-{version} does not accept element type {dtype.name.lower()}")
        return ck.Plan("Selu", x, attrs={"alpha": float(alpha), "gamma": gamma},
                       cleanup=gc.producers)


# Selu first: its Where has Mul on both branches, which the slope rules would try in vain
RULE_CLASSES = (WhereSelu, WhereSeluMirrored, WhereSlope, WhereSlopeMirrored, MaxSlope,
                MinSlope, ReluSubSlope, ReluSelu)
