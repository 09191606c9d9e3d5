"""Convolutions: Conv, ConvTranspose, ConvInteger and QLinearConv, in 1-D, 2-D and 3-D (their
window geometry, shared with the pools and DeformConv, is :mod:`.geometry`).

Conv is one matrix product per group over the input's windows laid out as columns (im2col),
ConvTranspose the transposed product scattered back into the windows (col2im); both are
accumulated in float64 and rounded once to the input's type: the result is then within an
ulp of the exact sum whatever order BLAS adds the products in. The BLAS build, its kernels
and its thread count change the float64 sum in its last bits only, which the rounding hides
but for the rare sum that lies that close to a rounding boundary.
"""

from __future__ import annotations

import math

import numpy as np

from opshift.evaluator.ops.common import requantized
from opshift.evaluator.ops.geometry import conv_kernel, pad_spatial, window_geometry, windows
from opshift.evaluator.parallel import block_size, in_parallel
from opshift.evaluator.registry import op

#: float64 elements of one block of Conv's columns (8 MiB): a large input never needs all
#: its columns at once, and each thread reuses its block's memory.
_COLS_CHUNK = 1 << 20


@op("Conv", 1, 11, 22)
def conv(ctx, x, w, b=None):
    return _conv(ctx, x, w, b, x.dtype)


def _zero_point_removed(ctx, v, zp, per_channel: bool):
    """``v - zp`` in int32 (a uint8/int8 tensor and its zero point: a scalar, or for W one
    per output channel)."""
    out = v.astype(np.int32)
    if zp is None:
        return out
    if zp.size > 1 or (per_channel and zp.ndim == 1):
        if not per_channel or zp.ndim != 1 or zp.size != v.shape[0]:
            raise ctx.error(f"zero point of shape {list(zp.shape)} does not fit "
                            f"{list(v.shape)}")
        return out - zp.astype(np.int32).reshape((-1,) + (1,) * (v.ndim - 1))
    return out - zp.astype(np.int32).reshape(())


@op("ConvInteger", 10)
def conv_integer(ctx, x, w, x_zero_point=None, w_zero_point=None):
    """Conv of the zero-point-free integers, summed exactly (in float64: a uint8/int8
    product sum stays far below 2**53) and wrapped to int32 as an int32 sum would."""
    acc = _conv(ctx, _zero_point_removed(ctx, x, x_zero_point, False),
                _zero_point_removed(ctx, w, w_zero_point, True), None, np.float64)
    return acc.astype(np.int64).astype(np.int32)


@op("QLinearConv", 10)
def qlinear_conv(ctx, x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp=None, b=None):
    """The exact integer Conv (with B) scaled by x_scale * w_scale / y_scale (in float32, per
    output channel when w_scale is), shifted by y's zero point, clipped to y's type and
    rounded half to even, in float64 as onnx.reference computes it."""
    acc = _conv(ctx, _zero_point_removed(ctx, x, x_zp, False),
                _zero_point_removed(ctx, w, w_zp, True), b, np.float64)
    scale = (x_scale * w_scale) / y_scale
    if scale.size > 1:
        if scale.ndim != 1 or scale.size != w.shape[0]:
            raise ctx.error(f"w_scale of shape {list(w_scale.shape)} does not fit "
                            f"{w.shape[0]} output channels")
        scale = scale.reshape((1, -1) + (1,) * (x.ndim - 2))
    return requantized(acc * scale.astype(np.float64),
                       None if y_zp is None else y_zp.astype(np.float64),
                       x.dtype if y_zp is None else y_zp.dtype)


def _conv(ctx, x, w, b, dtype):
    """Conv's sums in float64, rounded once to ``dtype``."""
    kernel = conv_kernel(ctx, x, w)
    g = ctx.attrs.get("group", 1)
    n_, c = x.shape[:2]
    m = w.shape[0]
    if c % g or m % g or w.shape[1] != c // g:
        raise ctx.error(f"channels do not fit group={g}: X {list(x.shape)}, W {list(w.shape)}")
    strides, dil, pb, pe, _, out = window_geometry(ctx, x.shape[2:], kernel)
    nk, cg, mg, kk = len(kernel), c // g, m // g, math.prod(kernel)
    # padded in x's own type, widened to float64 as the windows are copied into columns
    v = windows(pad_spatial(x, pb, pe, 0), kernel, strides, dil, out)
    # windows as columns (im2col): [C, *kernel, rows of the first output axis, *out[1:]]
    v = v.transpose(0, 1, *range(2 + nk, 2 + 2 * nk), *range(2, 2 + nk))
    inner = math.prod(out[1:])
    work = n_ * m * cg * kk * out[0] * inner
    rows = block_size(out[0] * n_, work, min(out[0], _COLS_CHUNK // max(1, c * kk * inner)))
    blocks = [(i, r0, min(rows, out[0] - r0)) for i in range(n_) for r0 in range(0, out[0], rows)]
    wm = w.astype(np.float64).reshape(g, mg, cg * kk)
    bias = None if b is None else b.astype(np.float64).reshape(m, 1)
    y = np.empty((n_, m, *out), dtype)

    def run(todo):
        buf = np.empty(c * kk * rows * inner)
        acc = np.empty(m * rows * inner)
        # (inf/NaN inputs give inf/NaN, as the formula says)
        for i, r0, r in todo:
            cols = buf[:c * kk * r * inner].reshape(c, *kernel, r, *out[1:])
            np.copyto(cols, v[(i, slice(None)) + (slice(None),) * nk + (slice(r0, r0 + r),)])
            part = acc[:m * r * inner].reshape(g, mg, r * inner)
            np.matmul(wm, cols.reshape(g, cg * kk, r * inner), out=part)
            part = part.reshape(m, r * inner)
            if bias is not None:
                part += bias
            np.copyto(y[i].reshape(m, -1)[:, r0 * inner:(r0 + r) * inner], part,
                      casting="unsafe")

    in_parallel(blocks, run, work)
    return y


def _add_windows(dst, cols, kernel, dil, counts, strides, start) -> None:
    """col2im: each kernel position's values ``cols[..., *pos, *counts]`` added into ``dst``
    (``[..., *spatial]``, the same leading axes) at ``start + pos * dil + i * stride``, one
    strided slice per kernel position."""
    lead = (slice(None),) * (dst.ndim - len(kernel))
    for pos in np.ndindex(*kernel):
        at = tuple(slice(e + p * d, e + p * d + (n - 1) * s + 1, s)
                   for p, d, n, s, e in zip(pos, dil, counts, strides, start))
        dst[lead + at] += cols[lead + pos]


def _transpose_geometry(ctx, spatial, kernel):
    """(strides, dilations, full, begin, out) for ConvTranspose: ``full`` is every position
    the input's windows reach (output_padding included), of which the output is ``out``
    positions from ``begin`` on.

    Pads come from ``output_shape`` when it is set, else from ``auto_pad`` SAME_* (for an
    output of input x stride), else from ``pads``. The total is split with the extra position
    at the end for SAME_UPPER and at the start otherwise, as version 11 states and version 1
    means (its formula said the opposite of its own auto_pad text, a slip onnx corrected in
    the text only: onnx/onnx#1609). An output larger than ``full`` (a negative total) reaches
    past it with zeros (and B), the total halved toward -inf, as onnx's own tests expect."""
    n = len(spatial)
    strides = list(ctx.attrs.get("strides") or [1] * n)
    dil = list(ctx.attrs.get("dilations") or [1] * n)
    extra = list(ctx.attrs.get("output_padding") or [0] * n)
    if len(strides) != n or len(dil) != n or len(kernel) != n or len(extra) != n:
        raise ctx.error(f"kernel/strides/dilations/output_padding do not match {n} spatial "
                        "dims")
    if min(strides + dil) < 1 or min(extra) < 0:
        raise ctx.error(f"strides {strides}, dilations {dil} and output_padding {extra} must "
                        "be positive (output_padding >= 0)")
    full = [s * (i - 1) + (k - 1) * d + 1 + e
            for i, s, k, d, e in zip(spatial, strides, kernel, dil, extra)]
    auto = ctx.attrs.get("auto_pad", "NOTSET")
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"unknown auto_pad {auto!r}")
    shape = ctx.attrs.get("output_shape")
    if shape is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        shape = [i * s for i, s in zip(spatial, strides)]
    if shape is not None:
        shape = list(shape)[-n:]  # version 1 allowed N and C in front
        if len(shape) != n:
            raise ctx.error(f"output_shape {list(shape)} does not match {n} spatial dims")
        if min(shape) < 1:
            raise ctx.error(f"output_shape {shape} must be positive")
        totals = [f - o for f, o in zip(full, shape)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in totals]
        return strides, dil, full, begin, shape
    pads = [0] * (2 * n) if auto == "VALID" else list(ctx.attrs.get("pads") or [0] * (2 * n))
    if len(pads) != 2 * n or min(pads) < 0:
        raise ctx.error(f"pads {pads} must be {2 * n} values >= 0")
    out = [f - b - e for f, b, e in zip(full, pads[:n], pads[n:])]
    if min(out) < 1:
        raise ctx.error(f"pads {pads} leave no output of the {full} positions")
    return strides, dil, full, pads[:n], out


@op("ConvTranspose", 1, 11, 22)
def conv_transpose(ctx, x, w, b=None):
    """Each input position adds its value times the kernel into the output windows it
    reaches: per group, W^T times the input's columns (one matrix product per block of
    output channels), scattered into place kernel position by kernel position, all in
    float64 and rounded once to X's type (as Conv)."""
    kernel = conv_kernel(ctx, x, w)
    g = ctx.attrs.get("group", 1)
    n_, c = x.shape[:2]
    if g < 1 or c % g or w.shape[0] != c:
        raise ctx.error(f"channels do not fit group={g}: X {list(x.shape)}, W {list(w.shape)}")
    cg, mg, kk, nk = c // g, w.shape[1], math.prod(kernel), len(kernel)
    m = mg * g
    if b is not None and b.shape != (m,):
        raise ctx.error(f"B of shape {list(b.shape)} does not fit {m} output channels")
    strides, dil, full, begin, out = _transpose_geometry(ctx, x.shape[2:], kernel)
    inner = math.prod(x.shape[2:])
    xs = x.reshape(n_, g, cg, inner)
    # per group: [M/group * kernel, C/group], the products' left factor
    wt = w.astype(np.float64).reshape(g, cg, mg * kk).transpose(0, 2, 1)
    # room for an output that reaches before or past the positions the input reaches
    lo = [max(0, -bg) for bg in begin]
    acc = np.zeros((n_, m, *(max(f, bg + o) + e for f, bg, o, e in zip(full, begin, out, lo))))
    work = n_ * m * kk * cg * inner
    step = block_size(mg * n_ * g, work, min(mg, _COLS_CHUNK // max(1, kk * inner)))
    blocks = [(i, gi, m0) for i in range(n_) for gi in range(g) for m0 in range(0, mg, step)]

    def run(todo):
        for i, gi, m0 in todo:
            r = min(step, mg - m0)
            cols = np.matmul(wt[gi, m0 * kk:(m0 + r) * kk], xs[i, gi].astype(np.float64))
            cols = cols.reshape(r, *kernel, *x.shape[2:])
            _add_windows(acc[i, gi * mg + m0:gi * mg + m0 + r], cols, kernel, dil,
                         x.shape[2:], strides, lo)

    in_parallel(blocks, run, work)
    y = acc[(slice(None), slice(None)) + tuple(slice(bg + e, bg + e + o)
                                               for bg, o, e in zip(begin, out, lo))]
    if b is not None:
        y = y + b.astype(np.float64).reshape((m,) + (1,) * nk)
    return y.astype(x.dtype)


@op("Col2Im", 18)
def col2im(ctx, x, image_shape, block_shape):
    """Each column's block added back into the image at its window (col2im): one strided
    slice per block position, summed in float64 and rounded once."""
    image, block = [int(v) for v in image_shape.reshape(-1)], [int(v) for v in
                                                              block_shape.reshape(-1)]
    k, kk = len(image), math.prod(block)
    if x.ndim != 3 or len(block) != k or k < 1 or min(block + image) < 1 or x.shape[1] % kk:
        raise ctx.error(f"input {list(x.shape)}, image_shape {image} and block_shape {block} "
                        "must be [N, C x prod(block_shape), L] and two shapes of one rank")
    strides, dil, pb, pe, _, out = window_geometry(ctx, image, block)
    if math.prod(out) != x.shape[2]:
        raise ctx.error(f"input {list(x.shape)} has {x.shape[2]} blocks; image_shape {image} "
                        f"and the window geometry give {out} = {math.prod(out)}")
    n, c = x.shape[0], x.shape[1] // kk
    full = [i + b + e for i, b, e in zip(image, pb, pe)]
    y = np.zeros((n, c, *full))
    _add_windows(y, x.reshape(n, c, *block, *out), block, dil, out, strides, [0] * k)
    crop = tuple(slice(b, b + i) for b, i in zip(pb, image))
    return y[(slice(None), slice(None), *crop)].astype(x.dtype)
