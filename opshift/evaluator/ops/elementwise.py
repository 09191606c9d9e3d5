"""Elementwise ops: unary math, binary arithmetic (with the opset <= 6 ``broadcast``/``axis``
attributes), comparisons, logic, variadic Max/Min/Sum/Mean, Where and Clip.

Results keep ONNX's dtypes: integer arithmetic wraps in the input type, Div of integers
truncates toward zero, float16/bfloat16 stay float16/bfloat16.
"""

from __future__ import annotations

import math

import numpy as np

from opshift.evaluator.ops.common import NARROW_FLOATS, is_float, legacy_rhs
from opshift.evaluator.registry import op

# -- unary ------------------------------------------------------------------------------------


def _unary(name: str, fn, *versions: int) -> None:
    def impl(ctx, x):
        return fn(x)

    impl.__name__ = impl.__qualname__ = name.lower()
    op(name, *versions)(impl)


def _zero(x):
    return x.dtype.type(0)


_unary("Abs", np.abs, 1, 6, 13)
_unary("Neg", np.negative, 1, 6, 13)
_unary("Exp", np.exp, 1, 6, 13)
_unary("Log", np.log, 1, 6, 13)
_unary("Sqrt", np.sqrt, 1, 6, 13)
_unary("Tanh", np.tanh, 1, 6, 13)
_unary("Floor", np.floor, 1, 6, 13)
_unary("Ceil", np.ceil, 1, 6, 13)
_unary("Reciprocal", lambda x: np.divide(x.dtype.type(1), x), 1, 6, 13)
_unary("Not", np.logical_not, 1)
_unary("Relu", lambda x: np.maximum(x, _zero(x)), 1, 6, 13, 14)


@op("Sigmoid", 1, 6, 13)
def sigmoid(ctx, x):
    # exp of -|x| never overflows: 1/(1+e) for x >= 0, e/(1+e) for x < 0.
    e = np.exp(-np.abs(x))
    d = np.add(e, x.dtype.type(1))
    num = np.where(x < 0, e, x.dtype.type(1))
    return np.divide(num, d, out=num)


@op("Elu", 1, 6, 22)
def elu(ctx, x):
    a = x.dtype.type(ctx.attrs["alpha"])
    neg = np.exp(np.minimum(x, _zero(x)))
    neg -= x.dtype.type(1)
    neg *= a
    return np.where(x > 0, x, neg)


@op("Erf", 9, 13)
def erf(ctx, x):
    """libm's erf (``math.erf``) of each element as a double, rounded once: to X's type,
    through float32 for float16/bfloat16 (their computing type); integers truncate toward
    zero. (onnx.reference's kernel rounds every result to float32 first, which leaves a
    double Erf only float32-accurate.)"""
    flat = x.astype(np.float64).ravel().tolist()
    y = np.fromiter(map(math.erf, flat), np.float64, len(flat)).reshape(x.shape)
    if x.dtype in NARROW_FLOATS:
        y = y.astype(np.float32)
    return y.astype(x.dtype, copy=False)


# -- binary -----------------------------------------------------------------------------------


def _rhs(ctx, a, b):
    return legacy_rhs(ctx, a, b) if ctx.version < 7 else b


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C semantics, as ONNX runtimes compute it)."""
    if a.dtype.kind == "u":
        return np.floor_divide(a, b)
    q = np.floor_divide(a, b)
    r = np.subtract(a, np.multiply(q, b))
    fix = (r != 0) & ((a < 0) != (b < 0))
    return np.add(q, fix.astype(q.dtype), out=q) if q.ndim else q + fix.astype(q.dtype)


def _binary(name: str, fn, *versions: int) -> None:
    def impl(ctx, a, b):
        b = _rhs(ctx, a, b)
        r = fn(a, b)
        return np.asarray(r)

    impl.__name__ = impl.__qualname__ = name.lower()
    op(name, *versions)(impl)


_binary("Add", np.add, 1, 6, 7, 13, 14)
_binary("Sub", np.subtract, 1, 6, 7, 13, 14)
_binary("Mul", np.multiply, 1, 6, 7, 13, 14)
_binary("Less", np.less, 1, 7, 9, 13)
_binary("Greater", np.greater, 1, 7, 9, 13)
_binary("LessOrEqual", np.less_equal, 12, 16)
_binary("GreaterOrEqual", np.greater_equal, 12, 16)
_binary("Equal", np.equal, 1, 7, 11, 13, 19)
_binary("And", np.logical_and, 1, 7)
_binary("Or", np.logical_or, 1, 7)
_binary("Xor", np.logical_xor, 1, 7)


@op("Div", 1, 6, 7, 13, 14)
def div(ctx, a, b):
    b = _rhs(ctx, a, b)
    if is_float(a):
        return np.asarray(np.divide(a, b))
    if np.any(b == 0):
        raise ctx.error("integer division by zero")
    return np.asarray(_int_div(a, b))


# -- variadic ---------------------------------------------------------------------------------


def _variadic(ctx, xs, fn):
    if not xs:
        raise ctx.error("needs at least one input")
    if ctx.version < 8:
        shapes = {x.shape for x in xs}
        if len(shapes) > 1:
            raise ctx.error(f"inputs have different shapes {sorted(map(list, shapes))}; "
                            "this version does not broadcast (opset >= 8 does)")
    acc = np.array(xs[0], copy=True)
    for x in xs[1:]:
        acc = fn(acc, x)
    return np.asarray(acc)


@op("Max", 1, 6, 8, 12, 13)
def max_(ctx, *xs):
    return _variadic(ctx, xs, np.maximum)


@op("Min", 1, 6, 8, 12, 13)
def min_(ctx, *xs):
    return _variadic(ctx, xs, np.minimum)


@op("Sum", 1, 6, 8, 13)
def sum_(ctx, *xs):
    return _variadic(ctx, xs, np.add)


@op("Mean", 1, 6, 8, 13)
def mean(ctx, *xs):
    s = _variadic(ctx, xs, np.add)
    return np.asarray(np.divide(s, s.dtype.type(len(xs))))


# -- selection --------------------------------------------------------------------------------


@op("Where", 9, 16)
def where_(ctx, cond, x, y):
    return np.asarray(np.where(cond, x, y))


@op("Clip", 1, 6, 11, 12, 13)
def clip(ctx, x, lo=None, hi=None):
    if ctx.version < 11:
        lo, hi = ctx.attrs.get("min"), ctx.attrs.get("max")
    for name, b in (("min", lo), ("max", hi)):
        if b is not None and np.ndim(b) != 0 and np.size(b) != 1:
            raise ctx.error(f"{name} must be a scalar, got shape {list(np.shape(b))}")
    y = x
    t = x.dtype.type
    if ctx.version >= 11 and is_float(x):
        # an omitted bound is numeric_limits<T>::lowest() / max(): infinities become finite
        import ml_dtypes

        info = ml_dtypes.finfo(x.dtype)
        lo = info.min if lo is None else lo
        hi = info.max if hi is None else hi
    # x stays where it equals a bound (-0.0 at a bound of +0.0 too), as numpy's clip (the
    # reference's) and onnxruntime keep it; a NaN bound makes every value NaN, as np.clip
    if lo is not None:
        b = t(np.asarray(lo).reshape(()))
        y = np.where((y < b) | (b != b), b, y)
    if hi is not None:
        b = t(np.asarray(hi).reshape(()))
        y = np.where((y > b) | (b != b), b, y)
    return np.array(y) if y is x else np.asarray(y)  # 0-d inputs give numpy scalars


# -- more math --------------------------------------------------------------------------------


@op("Pow", 1, 7, 12, 13, 15)
def pow_(ctx, x, y):
    y = _rhs(ctx, x, y)
    if x.dtype.kind in "iu" and y.dtype.kind in "iu" and not np.any(y < 0):
        return np.asarray(np.power(x.astype(np.int64), y.astype(np.int64))).astype(x.dtype)
    wide = np.float64 if x.dtype == np.float64 or x.dtype.kind in "iu" else np.float32
    r = np.power(x.astype(wide), y.astype(wide))
    if x.dtype.kind in "iu":
        r = np.trunc(r)
    return np.asarray(r).astype(x.dtype)


@op("Mod", 10, 13, 28)
def mod(ctx, a, b):
    fmod = ctx.attrs.get("fmod", 0)
    if is_float(a):
        if not fmod and ctx.version < 28:
            raise ctx.error("fmod=0 is defined for integers only at this version")
        return np.asarray(np.fmod(a, b) if fmod else np.mod(a, b))
    if np.any(b == 0):
        raise ctx.error("integer modulo by zero")
    return np.asarray(np.fmod(a, b) if fmod else np.mod(a, b))


_unary("Sign", np.sign, 9, 13)


def _float_unary(name: str, fn, *versions: int) -> None:
    """A float op written as a formula of numpy ufuncs, with the attributes as x's dtype."""
    def impl(ctx, x):
        t = x.dtype.type
        return np.asarray(fn(x, t, ctx.attrs)).astype(x.dtype, copy=False)

    impl.__name__ = impl.__qualname__ = name.lower()
    op(name, *versions)(impl)


_float_unary("HardSigmoid", lambda x, t, a: np.clip(x * t(a["alpha"]) + t(a["beta"]), t(0), t(1)),
             1, 6, 22)
_float_unary("Softsign", lambda x, t, a: x / (t(1) + np.abs(x)), 1, 22)
_float_unary("HardSwish", lambda x, t, a: x * np.clip(x * t(1 / 6) + t(0.5), t(0), t(1)), 14, 22)
_float_unary("ThresholdedRelu", lambda x, t, a: np.where(x > t(a["alpha"]), x, t(0)), 10, 22)
_float_unary("Celu", lambda x, t, a: np.maximum(x, t(0)) + np.minimum(
    t(0), t(a["alpha"]) * (np.exp(x / t(a["alpha"])) - t(1))), 12, 28)
_unary("Sin", np.sin, 7, 22)
_unary("Cos", np.cos, 7, 22)
_unary("Round", np.round, 11, 22)  # half to even, as ONNX
_unary("IsNaN", np.isnan, 9, 13, 20)


@op("IsInf", 10, 20)
def is_inf(ctx, x):
    neg, pos = ctx.attrs.get("detect_negative", 1), ctx.attrs.get("detect_positive", 1)
    return np.isinf(x) & (((x < 0) & bool(neg)) | ((x > 0) & bool(pos)))
