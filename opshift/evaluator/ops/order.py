"""Ordering: TopK (1, 10, 11, 24).

The k largest (or smallest) values along an axis and their indices, in order, the lower index
first among equal values; NaN counts as larger than every number (numpy's sort order, which
onnx.reference's kernel sorts by). Rather than sorting every row as onnx.reference does, each
row's k-th value is found by a partition; the values better than it, and then the first of
those equal to it in index order, make up the k, which alone are sorted. ``sorted=0`` leaves
the order open: the sorted order is one of them.
"""

from __future__ import annotations

import numpy as np

from opshift.evaluator.ops.common import is_float, normalize_axes
from opshift.evaluator.registry import op


def _top(ctx, x: np.ndarray, k: int, axis: int, largest: bool):
    if x.ndim == 0:
        raise ctx.error("X is a scalar: TopK needs an axis")
    axis = normalize_axes([axis], x.ndim, ctx)[0]
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise ctx.error(f"k={k} is outside [0, {n}] for axis {axis} of X {list(x.shape)}")
    rows = np.moveaxis(x, axis, -1).reshape(-1, n)
    picked = _pick(rows, k, largest)
    values = np.take_along_axis(rows, picked, axis=-1)
    shape = np.moveaxis(x, axis, -1).shape[:-1] + (k,)
    return (np.moveaxis(values.reshape(shape), -1, axis),
            np.moveaxis(picked.reshape(shape), -1, axis))


def _pick(rows: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """Per row, the indices of its k best values in order (best first, lower index first
    among equals)."""
    m, n = rows.shape
    if k == 0 or m == 0:
        return np.zeros((m, k), np.int64)
    # the k-th best value of each row, in numpy's order (NaN after +inf)
    kth = np.partition(rows, n - k if largest else k - 1, axis=-1)[:, n - k if largest else k - 1]
    kth = kth[:, None]
    floats = is_float(rows)
    nan_kth = np.isnan(kth) if floats else np.zeros(kth.shape, bool)
    nan = np.isnan(rows) if floats else np.zeros(rows.shape, bool)
    # NaN beats every number: better than kth is greater, or NaN where kth is not
    better = ((rows > kth) | (nan & ~nan_kth)) if largest else ((rows < kth) | (~nan & nan_kth))
    equal = (rows == kth) | (nan & nan_kth)
    wanted = k - better.sum(axis=-1, keepdims=True)
    take = better | (equal & (np.cumsum(equal, axis=-1) <= wanted))
    chosen = np.nonzero(take)[1].reshape(m, k)  # row-major: in index order per row
    vals = np.take_along_axis(rows, chosen, axis=-1)
    # best first, the lower index first among equals (lexsort's last key is its first), as
    # the reverse of ascending values with the higher index first when largest
    if largest:
        order = np.lexsort((-chosen, vals), axis=-1)[:, ::-1]
    else:
        order = np.lexsort((chosen, vals), axis=-1)
    return np.take_along_axis(chosen, order, axis=-1).astype(np.int64)


@op("TopK", 1)
def topk_1(ctx, x):
    return _top(ctx, x, int(ctx.attrs["k"]), ctx.attrs.get("axis", -1), True)


@op("TopK", 10)
def topk_10(ctx, x, k):
    return _top(ctx, x, int(np.asarray(k).reshape(-1)[0]), ctx.attrs.get("axis", -1), True)


@op("TopK", 11, 24)
def topk_11(ctx, x, k):
    return _top(ctx, x, int(np.asarray(k).reshape(-1)[0]), ctx.attrs.get("axis", -1),
                bool(ctx.attrs.get("largest", 1)))
