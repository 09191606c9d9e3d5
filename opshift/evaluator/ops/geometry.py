"""The window geometry of the sliding-window ops, shared by the convolutions
(:mod:`.windows`), the pools (:mod:`.pools`) and DeformConv (:mod:`.sampling`): the kernel a
Conv-like op reads from W, the strides, dilations, pads and output dims of each spatial axis,
the padded input and the view of its windows.
"""

from __future__ import annotations

import numpy as np

from opshift.graph.window_rules import window_axis


def conv_kernel(ctx, x, w) -> list[int]:
    """The kernel of a Conv-like op (Conv, ConvTranspose, DeformConv): W's spatial dims, once
    X and W are of one rank >= 3 and kernel_shape (if set) agrees."""
    if x.ndim < 3 or w.ndim != x.ndim:
        raise ctx.error(f"X {list(x.shape)} and W {list(w.shape)} need equal rank >= 3")
    kernel = list(w.shape[2:])
    ks = ctx.attrs.get("kernel_shape")
    if ks and list(ks) != kernel:
        raise ctx.error(f"kernel_shape {ks} does not match W {list(w.shape)}")
    return kernel


def window_geometry(ctx, spatial, kernel, ceil_mode=False):
    """(strides, dilations, pads_begin, pads_end, extra_end, out) for a sliding window op, each
    axis by :func:`~opshift.graph.window_rules.window_axis` (``extra_end``: the padding beyond
    ``pads_end`` that ceil_mode needs, never counted as padding by AveragePool)."""
    n = len(spatial)
    strides = list(ctx.attrs.get("strides") or [1] * n)
    dil = list(ctx.attrs.get("dilations") or [1] * n)
    if len(strides) != n or len(dil) != n or len(kernel) != n:
        raise ctx.error(f"kernel/strides/dilations do not match {n} spatial dims")
    auto = ctx.attrs.get("auto_pad", "NOTSET")
    pads = [0] * (2 * n)
    if auto == "NOTSET":
        pads = list(ctx.attrs.get("pads") or pads)
        if len(pads) != 2 * n:
            raise ctx.error(f"pads has {len(pads)} values, expected {2 * n}")
        if min(pads, default=0) < 0:
            raise ctx.error(f"pads {pads} are negative")
    elif auto not in ("VALID", "SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"unknown auto_pad {auto!r}")
    try:
        axes = [window_axis(i, k, s, d, pads[a], pads[n + a], auto, ceil_mode)
                for a, (i, k, s, d) in enumerate(zip(spatial, kernel, strides, dil))]
    except ValueError as e:
        raise ctx.error(str(e)) from None
    pb, pe, extra, out = (list(v) for v in zip(*axes)) if axes else ([], [], [], [])
    return strides, dil, pb, pe, extra, out


def windows(xp, kernel, strides, dil, out):
    """Read-only view (N, C, *out, *kernel) of the padded input ``xp`` (C-contiguous)."""
    n = len(kernel)
    st = xp.strides
    # np.ndarray over xp's buffer: the view as_strided makes, without its per-call overhead
    # (tens of microseconds, which models of many small Convs pay once per node)
    v = np.ndarray(xp.shape[:2] + tuple(out) + tuple(kernel), xp.dtype, xp, 0,
                   st[:2] + tuple(st[2 + i] * strides[i] for i in range(n))
                   + tuple(st[2 + i] * dil[i] for i in range(n)))
    v.flags.writeable = False
    return v


def pad_spatial(x, pb, pe, value, dtype=None):
    """``x`` with ``value`` added before/after its spatial axes, as ``dtype`` (x's own by
    default)."""
    dtype = x.dtype if dtype is None else dtype
    if not any(pb) and not any(pe):
        return np.ascontiguousarray(x, dtype)
    shape = x.shape[:2] + tuple(d + b + e for d, b, e in zip(x.shape[2:], pb, pe))
    out = np.full(shape, value, dtype)
    out[(slice(None), slice(None)) + tuple(slice(b, b + d) for b, d in zip(pb, x.shape[2:]))] = x
    return out
