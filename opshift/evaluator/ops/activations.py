"""PRelu, LeakyRelu and Selu in every version.

Formulations are vectorized, use ``out=`` to avoid temporaries, and keep ONNX's exact
semantics: NaN propagates, -0.0 stays -0.0 where the op's function body keeps it, infinities
map as the formula says. ``np.maximum`` replaces ``np.where`` only where that is exact.
"""

from __future__ import annotations

import numpy as np

from ...broadcast import SlopeRule, rule_for_version, slope_shape_for
from ...errors import EvaluationError
from ..registry import op


def _float_kind(x: np.ndarray) -> bool:
    return x.dtype.kind == "f" or x.dtype.name == "bfloat16"


def prelu_apply(x: np.ndarray, slope: np.ndarray, rule: SlopeRule) -> np.ndarray:
    """PRelu of ``x`` with ``slope`` placed by ``rule``: slope * x where x < 0, else x."""
    shape = slope_shape_for(x.shape, slope.shape, rule)
    s = slope.reshape(shape)
    if x.dtype.kind == "u":
        return x.copy()  # never negative
    y = np.multiply(x, s)
    if _float_kind(x) and s.size and bool(np.all(s > 0)) and bool(np.all(s <= 1)):
        # For 0 < s <= 1, max(x, s*x) is x for x >= 0 and s*x for x < 0, NaN propagates,
        # and -0.0 stays -0.0 (s*-0.0 == -0.0). s == 0 is excluded: 0*inf is NaN.
        np.maximum(x, y, out=y)
        return y
    if _float_kind(x) and s.size and bool(np.all(s > 1)):
        np.minimum(x, y, out=y)
        return y
    # General case: y = s*x already; put x back wherever x < 0 is false (NaN and -0 included).
    np.copyto(y, x, where=~(x < 0))
    return y


@op("PRelu", 1, 6, 7, 9, 16)
def prelu(ctx, x, slope):
    try:
        return prelu_apply(x, slope, rule_for_version(ctx.version))
    except EvaluationError as e:
        raise ctx.error(str(e)) from None


def leaky_relu_apply(x: np.ndarray, alpha: float) -> np.ndarray:
    a = x.dtype.type(alpha)
    y = np.multiply(x, a)
    if 0 < float(a) <= 1:
        np.maximum(x, y, out=y)
    elif float(a) > 1:
        np.minimum(x, y, out=y)
    else:
        np.copyto(y, x, where=~(x < 0))
    return y


@op("LeakyRelu", 1, 6, 16)
def leaky_relu(ctx, x):
    return leaky_relu_apply(x, ctx.attrs["alpha"])


def selu_apply(x: np.ndarray, alpha: float, gamma: float) -> np.ndarray:
    """gamma * (alpha * exp(x) - alpha) for x <= 0, gamma * x for x > 0 (ONNX Selu).

    exp is evaluated on min(x, 0) only, so large positive x never overflows and the positive
    branch contributes exactly alpha * 1 - alpha == 0. -0.0 maps to +0.0, as in onnx's
    reference implementation.
    """
    t = x.dtype.type
    a, g = t(alpha), t(gamma)
    neg = np.minimum(x, t(0))
    np.exp(neg, out=neg)
    np.multiply(neg, a, out=neg)
    np.subtract(neg, a, out=neg)
    pos = np.maximum(x, t(0))
    np.add(pos, neg, out=pos)
    np.multiply(pos, g, out=pos)
    return pos


@op("Selu", 1, 6, 22)
def selu(ctx, x):
    return selu_apply(x, ctx.attrs["alpha"], ctx.attrs["gamma"])
