"""Pools: MaxPool, AveragePool, LpPool and the global pools, in 1-D, 2-D and 3-D.

Each folds one kernel position at a time over a strided view of the padded input's windows
(no copy of every window). Sums (AveragePool, LpPool) run in float64 and round once: a
float32 sum of values that nearly cancel lands many ulps from the mean. LpPool is the Lp norm
of each window's values inside the input, (sum |x|^p)^(1/p), pads counting as 0
(onnx.reference averages the values inside and multiplies by the kernel's size, which is not
the norm of a window that reaches past the input under ceil_mode).
"""

from __future__ import annotations

import math

import numpy as np

from opshift.evaluator.ops.common import is_float
from opshift.evaluator.ops.geometry import pad_spatial, window_geometry, windows
from opshift.evaluator.registry import op


def _pool_kernel(ctx, x):
    kernel = ctx.attrs.get("kernel_shape")
    if not kernel:
        raise ctx.error("kernel_shape is required")
    if len(kernel) != x.ndim - 2:
        raise ctx.error(f"kernel_shape {kernel} does not fit X {list(x.shape)}")
    return list(kernel)


def _fold(ufunc, v, kernel):
    """``ufunc`` folded over the kernel positions of the windows ``v``, in window order: one
    pass per position over a strided view, not a copy of every window."""
    y = None
    for pos in np.ndindex(*kernel):
        y = v[(Ellipsis, *pos)].copy() if y is None else ufunc(y, v[(Ellipsis, *pos)], out=y)
    return y


def _lowest(dtype):
    return dtype.type(-np.inf) if is_float(np.empty(0, dtype)) else np.iinfo(dtype).min


@op("MaxPool", 1, 8, 10, 11, 12, 22)
def max_pool(ctx, x):
    kernel = _pool_kernel(ctx, x)
    strides, dil, pb, pe, extra, out = window_geometry(ctx, x.shape[2:], kernel,
                                                        bool(ctx.attrs.get("ceil_mode", 0)))
    pe2 = [a + b for a, b in zip(pe, extra)]
    xp = pad_spatial(x, pb, pe2, _lowest(x.dtype))
    v = windows(xp, kernel, strides, dil, out)
    nk = len(kernel)
    y = _fold(np.maximum, v, kernel)
    if len(ctx.node.output) < 2 or not ctx.node.output[1]:
        return y
    # Indices: the first position in window order that holds the maximum and lies inside
    # the input (a padding position holds the lowest value, which the input may hold too),
    # flattened per storage_order (1: column-major, the first spatial dim fastest).
    spatial = x.shape[2:]
    if ctx.attrs.get("storage_order", 0):
        weights = [math.prod(spatial[:i]) for i in range(nk)]
    else:
        weights = [math.prod(spatial[i + 1:]) for i in range(nk)]
    nan = np.isnan(y) if is_float(y) else None
    index = np.full(y.shape, -1, np.int64)
    for pos in np.ndindex(*kernel):
        lin, inside = 0, True
        for i in range(nk):
            shape = [1] * (2 + nk)
            shape[2 + i] = out[i]
            c = (np.arange(out[i]) * strides[i] - pb[i] + pos[i] * dil[i]).reshape(shape)
            lin = lin + c * weights[i]
            inside = inside & (c >= 0) & (c < spatial[i])
        v_pos = v[(Ellipsis, *pos)]
        hit = v_pos == y
        if nan is not None:
            hit |= nan & np.isnan(v_pos)
        hit &= inside & (index < 0)
        index[hit] = np.broadcast_to(lin, y.shape)[hit]
    nc = (np.arange(x.shape[0]).reshape((-1, 1) + (1,) * nk) * x.shape[1]
          + np.arange(x.shape[1]).reshape((1, -1) + (1,) * nk))
    return y, nc * math.prod(spatial) + index


@op("AveragePool", 1, 7, 10, 11, 19, 22)
def average_pool(ctx, x):
    kernel = _pool_kernel(ctx, x)
    strides, dil, pb, pe, extra, out = window_geometry(ctx, x.shape[2:], kernel,
                                                        bool(ctx.attrs.get("ceil_mode", 0)))
    ct = np.dtype(np.float64)
    pe2 = [a + b for a, b in zip(pe, extra)]
    xp = pad_spatial(x.astype(ct, copy=False), pb, pe2, 0)
    nk = len(kernel)
    axes = tuple(range(2 + nk, 2 + 2 * nk))
    s = _fold(np.add, windows(xp, kernel, strides, dil, out), kernel)
    # Counted positions: the input, plus the explicit pads when count_include_pad=1; the
    # ceil_mode overhang is never counted.
    ones = np.ones((1, 1) + x.shape[2:], dtype=ct)
    if ctx.attrs.get("count_include_pad", 0):
        ones = pad_spatial(ones, pb, pe, 1)
        ones = pad_spatial(ones, [0] * nk, extra, 0)
    else:
        ones = pad_spatial(ones, pb, pe2, 0)
    cnt = windows(ones, kernel, strides, dil, out).sum(axis=axes)
    return (s / cnt).astype(x.dtype)


@op("GlobalAveragePool", 1, 22)
def global_average_pool(ctx, x):
    axes = tuple(range(2, x.ndim))
    return x.astype(np.float64).mean(axis=axes, keepdims=True).astype(x.dtype)  # as AveragePool


@op("GlobalMaxPool", 1, 22)
def global_max_pool(ctx, x):
    return x.max(axis=tuple(range(2, x.ndim)), keepdims=True)


def _lp(ctx, v: np.ndarray) -> np.ndarray:
    """|v|^p in float64 for the node's p (a float before version 2, an int after)."""
    p = ctx.attrs.get("p", 2)
    if not p > 0 or (ctx.version >= 2 and p != int(p)):
        raise ctx.error(f"p={p} must be a positive {'number' if ctx.version < 2 else 'integer'}")
    a = np.abs(v.astype(np.float64))
    return a * a if p == 2 else np.power(a, float(p))


def _root(ctx, s: np.ndarray, dtype) -> np.ndarray:
    p = ctx.attrs.get("p", 2)
    return (np.sqrt(s) if p == 2 else np.power(s, 1.0 / p)).astype(dtype)


@op("LpPool", 1, 2, 11, 18, 22)
def lp_pool(ctx, x):
    kernel = _pool_kernel(ctx, x)
    strides, dil, pb, pe, extra, out = window_geometry(ctx, x.shape[2:], kernel,
                                                        bool(ctx.attrs.get("ceil_mode", 0)))
    xp = pad_spatial(_lp(ctx, x), pb, [a + b for a, b in zip(pe, extra)], 0)
    return _root(ctx, _fold(np.add, windows(xp, kernel, strides, dil, out), kernel), x.dtype)


@op("GlobalLpPool", 1, 2, 22)
def global_lp_pool(ctx, x):
    return _root(ctx, _lp(ctx, x).sum(axis=tuple(range(2, x.ndim)), keepdims=True), x.dtype)
