"""Upsample-7/9 and Resize-10: scaling by ``scales`` with asymmetric coordinates.

onnx.reference cannot run these versions (its Upsample takes integer nearest scales only and
no scales attribute; its Resize expects Resize-11's roi input), so opshift has its own: each
output index ``i`` of an axis with scale ``s`` reads input position ``i / s`` (clamped to the
last element): ``floor`` of it for nearest, the two neighbours weighted by its fraction for
linear. Output sizes are ``floor(size * scale)``.
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import op
from ._common import compute_dtype, is_float


def _scale(ctx, x, scales, mode: str) -> np.ndarray:
    scales = [float(s) for s in np.asarray(scales).reshape(-1)]
    if len(scales) != x.ndim or not all(s > 0 and math.isfinite(s) for s in scales):
        raise ctx.error(f"scales {scales} do not fit X {list(x.shape)} (one positive scale "
                        "per axis)")
    if mode not in ("nearest", "linear"):
        raise ctx.unsupported(f"mode {mode!r} (nearest or linear)")
    linear = mode == "linear"
    if linear and not is_float(x):
        raise ctx.unsupported(f"linear mode on {x.dtype} (float types only)")
    y = x.astype(compute_dtype(x.dtype)) if linear else x
    for axis, (d, s) in enumerate(zip(x.shape, scales)):
        n = int(math.floor(d * s))
        if n == d and s == 1:
            continue
        pos = np.minimum(np.arange(n, dtype=np.float64) / s, max(d - 1, 0))
        lo = np.floor(pos).astype(np.int64)
        if not linear:
            y = np.take(y, lo, axis=axis)
            continue
        hi = np.minimum(lo + 1, d - 1)
        w = (pos - lo).astype(y.dtype).reshape((-1,) + (1,) * (x.ndim - axis - 1))
        y = np.take(y, lo, axis=axis) * (1 - w) + np.take(y, hi, axis=axis) * w
    return np.array(y, dtype=x.dtype)


@op("Upsample", 7)
def upsample_7(ctx, x):
    return _scale(ctx, x, ctx.attrs["scales"], ctx.attrs.get("mode", "nearest"))


@op("Upsample", 9)
def upsample_9(ctx, x, scales):
    return _scale(ctx, x, scales, ctx.attrs.get("mode", "nearest"))


@op("Resize", 10)
def resize_10(ctx, x, scales):
    return _scale(ctx, x, scales, ctx.attrs.get("mode", "nearest"))
