"""PRelu, LeakyRelu and Selu in every version.

float16 and bfloat16 are computed in float32 and rounded once to their type, as onnxruntime,
PyTorch and oneDNN compute them; float attributes (alpha, gamma) are used as the float32 values
they are. (The ops' function bodies round every step, and their attributes, to the 16-bit type
instead, which near 0 loses most of Selu's digits: opshift's meaning is the runtimes'.) For
PRelu the two agree: a product of two 16-bit values is exact in float32.

Formulations are vectorized and keep ONNX's exact semantics: NaN propagates, -0.0 stays
-0.0 where ``x < 0`` is false (PRelu/LeakyRelu), infinities map as the formula says.
``np.maximum``/``np.minimum`` replace ``np.where`` only where that is exact.

Large inputs are processed in cache-sized blocks: each block's few ufunc passes stay in L2,
so a multi-step formula costs about one read and one write of memory (``x.copy()``) plus its
arithmetic. The Python loop runs once per block (tens of thousands of elements), never per
element.
"""

from __future__ import annotations

import numpy as np

from opshift.broadcast import SlopeRule, rule_for_version, slope_shape_for
from opshift.errors import EvaluationError
from opshift.evaluator.ops.common import NARROW_FLOATS, is_float
from opshift.evaluator.registry import op

#: Elements per block: 32 Ki float32 = 128 KiB per buffer, so x, y and a temporary fit in L2.
BLOCK = 1 << 15


def _narrow(x: np.ndarray) -> bool:
    """float16 or bfloat16: computed in float32, rounded once (see the module docstring)."""
    return x.dtype in NARROW_FLOATS


def _round_once(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The float32 result ``y`` rounded to the 16-bit ``dtype``: beyond its range, +-inf."""
    return y.astype(dtype)


def _execute(tasks: list[tuple], kernel, dtype: np.dtype) -> None:
    """Run ``kernel(x, s, y, buf)`` on every (x block, slope, y block) task. ``buf`` holds a
    block of scratch and a block of zeros (ufuncs against a zeros array are ~3x faster than
    against a scalar 0), allocated once: a fresh 128 KiB temporary per block would be
    mmap'ed and page-faulted anew."""
    buf = np.zeros((2, BLOCK), dtype)  # [0]: scratch, [1]: zeros (read only)
    for x, s, y in tasks:
        kernel(x, s, y, buf)


def _rows(x: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(x as [rows, inner], slope per row [rows, 1]) when the slope is constant over the
    trailing axes after its last non-1 axis (a per-channel or shared slope); else None."""
    non1 = [i for i, d in enumerate(s.shape) if d != 1]
    last = non1[-1] + 1 if non1 else 0
    if not x.flags.c_contiguous:
        return None
    rows = int(np.prod(x.shape[:last], dtype=np.int64))
    if rows and x.size // rows < 64:
        return None  # a slope varying along the innermost axes: one unblocked pass
    x2 = x.reshape(rows, -1)
    srow = np.broadcast_to(s.reshape(s.shape[:last]), x.shape[:last]).reshape(rows, 1)
    return x2, srow


def _row_tasks(x2: np.ndarray, srow: np.ndarray, out2: np.ndarray) -> list[tuple]:
    """Cache-sized (x block, slope, out block) views over [rows, inner] arrays."""
    rows, inner = x2.shape
    if inner >= BLOCK:
        return [(x2[r, c:c + BLOCK], srow[r, 0], out2[r, c:c + BLOCK])
                for r in range(rows) for c in range(0, inner, BLOCK)]
    step = max(1, BLOCK // max(inner, 1))
    return [(x2[r:r + step], srow[r:r + step], out2[r:r + step])
            for r in range(0, rows, step)]


def _leaky_kernel(mode: str):
    """y = s*x where x < 0 else x, by the exact formulation for the slope's range."""
    if mode == "max":  # 0 < s <= 1: max(x, s*x); -0.0 -> s*-0.0 == -0.0, NaN propagates
        def k(x, s, y, buf=None):
            np.multiply(x, s, out=y)
            np.maximum(x, y, out=y)
    elif mode == "min":  # s > 1: min(x, s*x)
        def k(x, s, y, buf=None):
            np.multiply(x, s, out=y)
            np.minimum(x, y, out=y)
    else:  # any slope (0, negative, NaN): s*x, then x back wherever x < 0 is false
        def k(x, s, y, buf=None):
            np.multiply(x, s, out=y)
            np.copyto(y, x, where=~(x < 0))
    return k


def _mode(x: np.ndarray, s: np.ndarray) -> str:
    if is_float(x) and s.size:
        # min and max of s, NaN if any is: a NaN slope fails every test below
        lo, hi = (s.item(), s.item()) if s.size == 1 else (s.min(), s.max())
        if lo > 0 and hi <= 1:
            return "max"
        if lo > 1 and hi < np.inf:  # inf * 0 would be NaN
            return "min"
    return "where"


def prelu_apply(x: np.ndarray, slope: np.ndarray, rule: SlopeRule) -> np.ndarray:
    """PRelu of ``x`` with ``slope`` placed by ``rule``: slope * x where x < 0, else x."""
    if _narrow(x):
        y = prelu_apply(x.astype(np.float32), slope.astype(np.float32), rule)
        return _round_once(y, x.dtype)
    shape = slope_shape_for(x.shape, slope.shape, rule)
    s = slope.reshape(shape)
    if x.dtype.kind == "u":
        return x.copy()  # never negative
    kernel = _leaky_kernel(_mode(x, s))
    rows = _rows(x, s) if x.size > BLOCK else None
    if rows is None:
        y = np.empty(x.shape, x.dtype)  # s fits x's shape (slope_shape_for)
        # 0 * inf is NaN, as the formula says
        kernel(x, s, y)
        return y
    x2, srow = rows
    y = np.empty_like(x)
    _execute(_row_tasks(x2, srow, y.reshape(x2.shape)), kernel, x.dtype)
    return y


@op("PRelu", 1, 6, 7, 9, 16)
def prelu(ctx, x, slope):
    try:
        return prelu_apply(x, slope, rule_for_version(ctx.version))
    except EvaluationError as e:
        raise ctx.error(str(e)) from None


def leaky_relu_apply(x: np.ndarray, alpha: float) -> np.ndarray:
    """LeakyRelu: alpha * x where x < 0, else x (alpha rounded to x's dtype first, to float32
    for a 16-bit x)."""
    if _narrow(x):
        y = leaky_relu_apply(x.astype(np.float32), alpha)
        return _round_once(y, x.dtype)
    a = np.asarray(x.dtype.type(alpha)).reshape((1,) * x.ndim)
    return prelu_apply(x, a, SlopeRule.NUMPY)


@op("LeakyRelu", 1, 6, 16)
def leaky_relu(ctx, x):
    return leaky_relu_apply(x, ctx.attrs["alpha"])


def _selu_kernel(a, g, zero):
    def k(x, _s, y, buf):
        # negative branch as onnx's reference computes it: exp(x) * alpha - alpha, on
        # min(x, 0) so that it is exactly 0 for x > 0 and exp never overflows.
        # Signed zeros do not matter here: exp(+-0) == 1 and +-0 + (+0) == +0.
        if buf is None:
            t = np.minimum(x, zero)
            z = zero
        else:
            t = np.minimum(x, buf[1, :x.size], out=buf[0, :x.size])
            z = buf[1, :x.size]
        np.exp(t, out=t)
        np.multiply(t, a, out=t)
        np.subtract(t, a, out=t)
        np.maximum(x, z, out=y)  # positive branch (0 for x <= 0, NaN kept)
        np.add(y, t, out=y)
        np.multiply(y, g, out=y)
    return k


def selu_apply(x: np.ndarray, alpha: float, gamma: float) -> np.ndarray:
    """gamma * (alpha * exp(x) - alpha) for x <= 0, gamma * x for x > 0 (ONNX Selu).

    Both branches are summed, each exact where the other is 0: for x > 0 the negative
    branch is exp(0) * alpha - alpha == 0; for x <= 0 the positive branch max(x, 0) is +0.
    -0.0 maps to +0.0 and NaN propagates, as in onnx's reference implementation.
    A 16-bit x is computed in float32 and rounded once.
    """
    if _narrow(x):
        y = selu_apply(x.astype(np.float32), alpha, gamma)
        return _round_once(y, x.dtype)
    t = x.dtype.type
    kernel = _selu_kernel(t(alpha), t(gamma), t(0))
    y = np.empty_like(x)
    if x.size <= BLOCK or not x.flags.c_contiguous:
        kernel(x, None, y, None)
        return y
    xf, yf = x.reshape(-1), y.reshape(-1)
    _execute([(xf[c:c + BLOCK], None, yf[c:c + BLOCK]) for c in range(0, xf.size, BLOCK)],
             kernel, x.dtype)
    return y


@op("Selu", 1, 6, 22)
def selu(ctx, x):
    return selu_apply(x, ctx.attrs["alpha"], ctx.attrs["gamma"])
