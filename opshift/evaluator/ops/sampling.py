"""Sampling at computed positions: GridSample (16, 20, 22), AffineGrid (20) and DeformConv
(19, 22).

GridSample reads X at the positions ``grid`` gives (normalized to [-1, 1]; x, y[, z]: the
last spatial axis first), as PyTorch's grid_sample, onnxruntime's kernel and onnx.reference's
do: each coordinate is denormalized (``align_corners``), rounded half to even for
``nearest``, for nearest and linear moved inside the borders when outside them (``border``:
clamped, ``reflection``: reflected), and then each tap of the interpolation reads a pixel by
``padding_mode`` (``zeros``: 0 outside). A cubic point stays where it is and only its taps
are padded, as PyTorch and onnxruntime have it (onnx.reference moves it inside first, which
changes its value near the borders). The coordinates are computed in float32 (in float64 for
a float64 grid) operation by operation as those kernels do, so every point lands where
theirs does, and so are the interpolation weights; the weighted taps are summed in float64
and rounded once (theirs add in X's type, axis by axis). All output positions of an image at
once, every channel together.

DeformConv samples X for each kernel position at its window position plus ``offset`` (exact
in float64; onnx.reference rounds each to float32 through GridSample's normalized form),
bilinearly with zeros outside, times ``mask``: columns for each channel and kernel position,
then one product with W per group, all in float64 and rounded once, as Conv's.

AffineGrid's base grid is exact in float64 (-1 + (2i + 1) / n, or -1 + 2i / (n - 1) with
``align_corners``; a length-1 axis at -1 then, as the function body has it for depth) and each
position's dot product with theta is summed in float64 and rounded once. Its function body
cannot run a batch of one (its Squeeze drops the batch axis too).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from opshift.evaluator.ops.common import is_float
from opshift.evaluator.ops.geometry import conv_kernel, window_geometry
from opshift.evaluator.registry import op

_MODES = {16: {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"},
          20: {"linear": "linear", "nearest": "nearest", "cubic": "cubic"}}


def _reflect(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``v`` reflected off the borders lo and hi until inside them (float64)."""
    span = hi - lo
    if span == 0:
        return np.full_like(v, lo)
    below, above = v < lo, v > hi
    dx = np.where(below, lo - v, np.where(above, v - hi, 0.0))
    n = np.trunc(dx / span)
    r = dx - n * span
    even = n % 2 == 0
    inside = np.where(below, np.where(even, lo + r, hi - r), np.where(even, hi - r, lo + r))
    return np.where(below | above, inside, v)


def _coordinates(g: np.ndarray, length: int, align: bool, mode: str, padding: str, ct):
    """One spatial axis' sampling coordinates (in ``ct``) from its normalized grid values."""
    g = g.astype(ct, copy=False)
    x = (g + 1) / ct.type(2.0) * ct.type(length - 1) if align else \
        ((g + 1) * ct.type(length) - 1) / ct.type(2.0)
    if mode == "nearest":
        x = np.rint(x)
    lo, hi = (0.0, length - 1.0) if align else (-0.5, length - 0.5)
    outside = (x < lo) | (x > hi)
    if mode != "cubic" and padding == "border":  # (a cubic point stays: its taps are padded)
        x = np.where(outside, np.clip(x, 0, length - 1).astype(ct), x)
    elif mode != "cubic" and padding == "reflection":
        x = np.where(outside, _reflect(x.astype(np.float64), lo, hi).astype(ct), x)
    return x, (lo, hi)


def _taps(i: np.ndarray, length: int, padding: str, borders) -> np.ndarray:
    """Pixel indices read for integer positions ``i`` along one axis; -1 where the pixel is
    outside and padding is zeros."""
    if padding == "zeros":
        return np.where((i >= 0) & (i < length), i, -1)
    if padding == "border":
        return np.clip(i, 0, length - 1)
    return np.trunc(_reflect(i.astype(np.float64), *borders)).astype(np.int64)


def _keys(t: np.ndarray, ct) -> list[np.ndarray]:
    """Cubic convolution weights (a = -0.75) of the taps at -1, 0, 1, 2 for offset t, in
    ``ct`` as those kernels compute them."""
    a, one, two = ct.type(-0.75), ct.type(1), ct.type(2)
    t = np.abs(t)
    u, v, w = t + one, one - t, two - t
    return [((a * u - 5 * a) * u + 8 * a) * u - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + one,
            ((a + 2) * v - (a + 3)) * v * v + one,
            ((a * w - 5 * a) * w + 8 * a) * w - 4 * a]


def _axis_taps(x, length, mode, padding, borders, ct):
    """[(pixel indices, weight or None)] of one axis' taps for coordinates ``x``."""
    if mode == "nearest":
        return [(_taps(x.astype(np.int64), length, padding, borders), None)]
    base = np.floor(x)
    t = (x - base).astype(ct)
    base = base.astype(np.int64)
    if mode == "linear":
        return [(_taps(base, length, padding, borders), ct.type(1) - t),
                (_taps(base + 1, length, padding, borders), t)]
    return [(_taps(base + k - 1, length, padding, borders), w)
            for k, w in enumerate(_keys(t, ct))]


def _interpolated(flat: np.ndarray, axes, spatial) -> np.ndarray:
    """The sum over every combination of one tap per axis (``axes``: each axis' taps from
    :func:`_axis_taps`) of the taps' weights' product times the pixel they name, in float64
    (for nearest, the pixel itself, in its type). ``flat``: the image [C, pixels + 1], its last
    column the pixel read for taps outside."""
    points = len(axes[0][0][0])
    strides = [math.prod(spatial[a + 1:]) for a in range(len(spatial))]
    total = None
    for combo in itertools.product(*axes):
        outside = np.zeros(points, bool)
        index = np.zeros(points, np.int64)
        weight = None
        for (i, w), stride in zip(combo, strides):
            outside |= i < 0
            index += i * stride
            if w is not None:
                weight = w.astype(np.float64) if weight is None else weight * w
        index[outside] = flat.shape[1] - 1
        values = np.take(flat, index, axis=1)
        if weight is None:  # nearest
            return values
        term = values.astype(np.float64)  # (a ufunc given dtype= takes a slower, buffered path)
        term *= weight
        total = term if total is None else total.__iadd__(term)
    return total


@op("GridSample", 16, 20, 22)
def grid_sample(ctx, x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    versions = _MODES[16 if ctx.version < 20 else 20]
    name = ctx.attrs.get("mode", "bilinear" if ctx.version < 20 else "linear")
    if name not in versions:
        raise ctx.error(f"unknown mode {name!r} (GridSample-{ctx.version}: "
                        f"{', '.join(versions)})")
    mode = versions[name]
    padding = ctx.attrs.get("padding_mode", "zeros")
    if padding not in ("zeros", "border", "reflection"):
        raise ctx.error(f"unknown padding_mode {padding!r}")
    align = bool(ctx.attrs.get("align_corners", 0))
    k = x.ndim - 2
    if k < 1 or (ctx.version < 20 and k != 2) or grid.ndim != k + 2 or \
            grid.shape[0] != x.shape[0] or grid.shape[-1] != k:
        raise ctx.error(f"X {list(x.shape)} and grid {list(grid.shape)} must be [N, C, "
                        f"*spatial] and [N, *out, {max(k, 1)}]"
                        + (" with 2 spatial axes" if ctx.version < 20 else ""))
    if mode != "nearest" and not is_float(x):
        raise ctx.unsupported(f"{name} sampling of {x.dtype} values (the operator does not "
                              "say how it rounds)")
    ct = np.dtype(np.float64) if grid.dtype == np.float64 else np.dtype(np.float32)
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    out = grid.shape[1:-1]
    y = np.empty((n, c, *out), x.dtype)
    points = math.prod(out)
    if y.size == 0:
        return y
    for b in range(n):
        axes = []
        for a, length in enumerate(spatial):
            g = grid[b, ..., k - 1 - a].reshape(points)
            coord, borders = _coordinates(g, length, align, mode, padding, ct)
            axes.append(_axis_taps(coord, length, mode, padding, borders, ct))
        # the image flat, with a zero pixel after it for taps outside (zeros padding)
        zero = np.full((c, 1), "" if x.dtype == object else 0, x.dtype)  # (strings: "")
        total = _interpolated(np.concatenate([x[b].reshape(c, -1), zero], axis=1), axes,
                              spatial)
        y[b] = total.reshape(c, *out).astype(x.dtype, copy=False)
    return y


@op("AffineGrid", 20)
def affine_grid(ctx, theta, size):
    size = [int(s) for s in np.asarray(size).reshape(-1)]
    k = len(size) - 2
    if k not in (2, 3) or theta.ndim != 3 or theta.shape != (size[0], k, k + 1) or \
            min(size) < 0:
        raise ctx.error(f"theta {list(theta.shape)} and size {size} must be [N, 2, 3] and "
                        "[N, C, H, W], or [N, 3, 4] and [N, C, D, H, W]")
    align = bool(ctx.attrs.get("align_corners", 0))
    lines = []
    for length in size[2:]:
        i = np.arange(length, dtype=np.float64)
        if not align:
            lines.append((2 * i + 1) / length - 1)
        else:
            lines.append(2 * i / (length - 1) - 1 if length > 1 else np.full(length, -1.0))
    # homogeneous base positions [..., (x, y[, z], 1)], x along the last axis
    mesh = np.meshgrid(*lines, indexing="ij")
    base = np.stack([*mesh[::-1], np.ones_like(mesh[0])], axis=-1).reshape(-1, k + 1)
    grid = np.matmul(theta.astype(np.float64), base.T).transpose(0, 2, 1)
    return grid.reshape(size[0], *size[2:], k).astype(theta.dtype)


@op("DeformConv", 19, 22)
def deform_conv(ctx, x, w, offset, b=None, mask=None):
    kernel = conv_kernel(ctx, x, w)
    g, og = ctx.attrs.get("group", 1), ctx.attrs.get("offset_group", 1)
    n, c, m, k = x.shape[0], x.shape[1], w.shape[0], x.ndim - 2
    if g < 1 or og < 1 or c != w.shape[1] * g or m % g or c % og:
        raise ctx.error(f"channels do not fit group={g}, offset_group={og}: X "
                        f"{list(x.shape)}, W {list(w.shape)}")
    strides, dil, pb, _, _, out = window_geometry(ctx, x.shape[2:], kernel)
    kk, points = math.prod(kernel), math.prod(out)
    if list(offset.shape) != [n, og * kk * k, *out]:
        raise ctx.error(f"offset {list(offset.shape)} must be {[n, og * kk * k, *out]}")
    if mask is not None and list(mask.shape) != [n, og * kk, *out]:
        raise ctx.error(f"mask {list(mask.shape)} must be {[n, og * kk, *out]}")
    offset = offset.reshape(n, og, kk, k, points).astype(np.float64)
    # each kernel position's window position per output point, per axis
    at_out = np.meshgrid(*[np.arange(o) for o in out], indexing="ij")
    at_kernel = np.meshgrid(*[np.arange(q) for q in kernel], indexing="ij")
    base = [(-pb[a] + strides[a] * at_out[a].reshape(1, -1)
             + dil[a] * at_kernel[a].reshape(-1, 1)).astype(np.float64) for a in range(k)]
    per_group = c // og
    y = np.empty((n, m, points), x.dtype)
    weights = w.astype(np.float64).reshape(g, m // g, (c // g) * kk)
    for i in range(n):
        cols = np.empty((c, kk, points))
        for o in range(og):
            chans = slice(o * per_group, (o + 1) * per_group)
            flat = np.concatenate([x[i, chans].reshape(per_group, -1),
                                   np.zeros((per_group, 1), x.dtype)], axis=1)
            for q in range(kk):
                taps = [_axis_taps(base[a][q] + offset[i, o, q, a], x.shape[2 + a], "linear",
                                   "zeros", None, np.dtype(np.float64)) for a in range(k)]
                v = _interpolated(flat, taps, x.shape[2:])
                if mask is not None:
                    v *= mask[i, o * kk + q].reshape(-1).astype(np.float64)
                cols[chans, q] = v
        r = np.matmul(weights, cols.reshape(g, (c // g) * kk, points)).reshape(m, points)
        if b is not None:
            r += b.astype(np.float64).reshape(m, 1)
        y[i] = r
    return y.reshape(n, m, *out)
