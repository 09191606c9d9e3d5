"""Network ops for small CNNs and MLPs, inference only: Conv, pooling, BatchNormalization,
Gemm, MatMul, Softmax/LogSoftmax, Dropout.

float16/bfloat16 accumulate in float32 and round once to the input type.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..registry import op
from ._common import compute_dtype, is_float, normalize_axes

# -- windows (Conv and pooling) ---------------------------------------------------------------


def _window_geometry(ctx, spatial, kernel, ceil_mode=False):
    """(strides, dilations, pads_begin, pads_end, extra_end, out) for a sliding window op.

    ``extra_end`` is the padding beyond ``pads_end`` that ceil_mode needs (never counted as
    padding by AveragePool).
    """
    n = len(spatial)
    strides = list(ctx.attrs.get("strides") or [1] * n)
    dil = list(ctx.attrs.get("dilations") or [1] * n)
    if len(strides) != n or len(dil) != n or len(kernel) != n:
        raise ctx.error(f"kernel/strides/dilations do not match {n} spatial dims")
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    auto = ctx.attrs.get("auto_pad", "NOTSET")
    if auto == "NOTSET":
        pads = list(ctx.attrs.get("pads") or [0] * (2 * n))
        if len(pads) != 2 * n:
            raise ctx.error(f"pads has {len(pads)} values, expected {2 * n}")
        pb, pe = pads[:n], pads[n:]
    elif auto == "VALID":
        pb, pe = [0] * n, [0] * n
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pb, pe = [], []
        for i, s, e in zip(spatial, strides, eff):
            total = max((math.ceil(i / s) - 1) * s + e - i, 0)
            small = total // 2
            pb.append(small if auto == "SAME_UPPER" else total - small)
            pe.append(total - pb[-1])
    else:
        raise ctx.error(f"unknown auto_pad {auto!r}")
    out, extra = [], []
    for i, s, e, b, en in zip(spatial, strides, eff, pb, pe):
        span = i + b + en - e
        if span < 0:
            raise ctx.error(f"window {e} is larger than the padded input {i + b + en}")
        o = (math.ceil(span / s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= i + b:
            o -= 1  # the last window would start in the end padding only
        out.append(o)
        extra.append(max((o - 1) * s + e - (i + b + en), 0))
    return strides, dil, pb, pe, extra, out


def _windows(xp, kernel, strides, dil, out):
    """View (N, C, *out, *kernel) of the padded input ``xp``."""
    n = len(kernel)
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    v = sliding_window_view(xp, eff, axis=tuple(range(2, 2 + n)))
    idx = ((slice(None), slice(None))
           + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out, strides))
           + tuple(slice(None, None, d) for d in dil))
    return v[idx]


def _pad_spatial(x, pb, pe, value):
    width = [(0, 0), (0, 0)] + list(zip(pb, pe))
    return np.pad(x, width, mode="constant", constant_values=value)


@op("Conv", 1, 11, 22)
def conv(ctx, x, w, b=None):
    if x.ndim < 3 or w.ndim != x.ndim:
        raise ctx.error(f"X {list(x.shape)} and W {list(w.shape)} need equal rank >= 3")
    g = ctx.attrs.get("group", 1)
    kernel = list(w.shape[2:])
    ks = ctx.attrs.get("kernel_shape")
    if ks and list(ks) != kernel:
        raise ctx.error(f"kernel_shape {ks} does not match W {list(w.shape)}")
    n_, c = x.shape[:2]
    m = w.shape[0]
    if c % g or m % g or w.shape[1] != c // g:
        raise ctx.error(f"channels do not fit group={g}: X {list(x.shape)}, W {list(w.shape)}")
    strides, dil, pb, pe, _, out = _window_geometry(ctx, x.shape[2:], kernel)
    ct = compute_dtype(x.dtype)
    xp = _pad_spatial(x.astype(ct, copy=False), pb, pe, 0)
    v = _windows(xp, kernel, strides, dil, out)  # N, C, *out, *k
    nk = len(kernel)
    kaxes = list(range(2 + nk, 2 + 2 * nk))
    wc = w.astype(ct, copy=False)
    parts = []
    cg, mg = c // g, m // g
    for gi in range(g):
        vg = v[:, gi * cg:(gi + 1) * cg]
        wg = wc[gi * mg:(gi + 1) * mg]
        with np.errstate(all="ignore"):  # inf/NaN inputs give inf/NaN, as the formula says
            y = np.tensordot(vg, wg, axes=([1, *kaxes], [1, *range(2, 2 + nk)]))  # N,*out,Mg
        parts.append(np.moveaxis(y, -1, 1))
    y = parts[0] if g == 1 else np.concatenate(parts, axis=1)
    if b is not None:
        y = y + b.astype(ct).reshape((1, m) + (1,) * nk)
    return np.ascontiguousarray(y.astype(x.dtype, copy=False))


def _pool_kernel(ctx, x):
    kernel = ctx.attrs.get("kernel_shape")
    if not kernel:
        raise ctx.error("kernel_shape is required")
    if len(kernel) != x.ndim - 2:
        raise ctx.error(f"kernel_shape {kernel} does not fit X {list(x.shape)}")
    return list(kernel)


def _lowest(dtype):
    return dtype.type(-np.inf) if is_float(np.empty(0, dtype)) else np.iinfo(dtype).min


@op("MaxPool", 1, 8, 10, 11, 12, 22)
def max_pool(ctx, x):
    kernel = _pool_kernel(ctx, x)
    strides, dil, pb, pe, extra, out = _window_geometry(ctx, x.shape[2:], kernel,
                                                        bool(ctx.attrs.get("ceil_mode", 0)))
    pe2 = [a + b for a, b in zip(pe, extra)]
    xp = _pad_spatial(x, pb, pe2, _lowest(x.dtype))
    v = _windows(xp, kernel, strides, dil, out)
    nk = len(kernel)
    flat = v.reshape(v.shape[:2 + nk] + (-1,))
    y = flat.max(axis=-1)
    if len(ctx.node.output) < 2 or not ctx.node.output[1]:
        return y
    # Indices: position of the max in the unpadded input, flattened per storage_order.
    arg = np.argmax(flat, axis=-1)
    offs = np.unravel_index(arg, kernel)
    spatial = x.shape[2:]
    coords = []
    for i in range(nk):
        shape = [1] * (2 + nk)
        shape[2 + i] = out[i]
        start = (np.arange(out[i]) * strides[i] - pb[i]).reshape(shape)
        coords.append(start + offs[i] * dil[i])
    inner = math.prod(spatial)
    if ctx.attrs.get("storage_order", 0):  # column-major: the first spatial dim is fastest
        lin = coords[0]
        for i in range(1, nk):
            lin = lin + coords[i] * math.prod(spatial[:i])
    else:
        lin = coords[0]
        for i in range(1, nk):
            lin = lin * spatial[i] + coords[i]
    nc = (np.arange(x.shape[0]).reshape((-1, 1) + (1,) * nk) * x.shape[1]
          + np.arange(x.shape[1]).reshape((1, -1) + (1,) * nk))
    return y, (nc * inner + lin).astype(np.int64)


@op("AveragePool", 1, 7, 10, 11, 19, 22)
def average_pool(ctx, x):
    kernel = _pool_kernel(ctx, x)
    strides, dil, pb, pe, extra, out = _window_geometry(ctx, x.shape[2:], kernel,
                                                        bool(ctx.attrs.get("ceil_mode", 0)))
    ct = compute_dtype(x.dtype)
    pe2 = [a + b for a, b in zip(pe, extra)]
    xp = _pad_spatial(x.astype(ct, copy=False), pb, pe2, 0)
    nk = len(kernel)
    axes = tuple(range(2 + nk, 2 + 2 * nk))
    s = _windows(xp, kernel, strides, dil, out).sum(axis=axes)
    # Counted positions: the input, plus the explicit pads when count_include_pad=1; the
    # ceil_mode overhang is never counted.
    ones = np.ones((1, 1) + x.shape[2:], dtype=ct)
    if ctx.attrs.get("count_include_pad", 0):
        ones = _pad_spatial(ones, pb, pe, 1)
        ones = _pad_spatial(ones, [0] * nk, extra, 0)
    else:
        ones = _pad_spatial(ones, pb, pe2, 0)
    cnt = _windows(ones, kernel, strides, dil, out).sum(axis=axes)
    return (s / cnt).astype(x.dtype)


@op("GlobalAveragePool", 1, 22)
def global_average_pool(ctx, x):
    axes = tuple(range(2, x.ndim))
    return x.astype(compute_dtype(x.dtype)).mean(axis=axes, keepdims=True).astype(x.dtype)


@op("GlobalMaxPool", 1, 22)
def global_max_pool(ctx, x):
    return x.max(axis=tuple(range(2, x.ndim)), keepdims=True)


# -- dense ------------------------------------------------------------------------------------


@op("MatMul", 1, 9, 13)
def matmul(ctx, a, b):
    if a.ndim == 0 or b.ndim == 0:
        raise ctx.error("MatMul inputs must have rank >= 1")
    ct = compute_dtype(a.dtype)
    with np.errstate(all="ignore"):
        y = np.matmul(a.astype(ct, copy=False), b.astype(ct, copy=False))
    return np.asarray(y).astype(a.dtype, copy=False)


@op("Gemm", 1, 6, 7, 9, 11, 13)
def gemm(ctx, a, b, c=None):
    if a.ndim != 2 or b.ndim != 2:
        raise ctx.error(f"A {list(a.shape)} and B {list(b.shape)} must be 2-D")
    ct = compute_dtype(a.dtype)
    aa = a.astype(ct, copy=False)
    bb = b.astype(ct, copy=False)
    if ctx.attrs.get("transA", 0):
        aa = aa.T
    if ctx.attrs.get("transB", 0):
        bb = bb.T
    alpha, beta = ctx.attrs.get("alpha", 1.0), ctx.attrs.get("beta", 1.0)
    with np.errstate(all="ignore"):
        y = aa @ bb
    if alpha != 1.0:
        y = y * (ct.type(alpha) if is_float(aa) else alpha)
    if c is not None:
        if ctx.version < 7 and not ctx.attrs.get("broadcast", 0) and c.shape != y.shape:
            raise ctx.error(f"C of shape {list(c.shape)} needs broadcast=1 to meet "
                            f"{list(y.shape)}")
        try:
            np.broadcast_to(c, y.shape)
        except ValueError:
            raise ctx.error(f"C of shape {list(c.shape)} does not broadcast to "
                            f"{list(y.shape)}") from None
        cc = c.astype(ct, copy=False)
        y = y + (cc * (ct.type(beta) if is_float(cc) else beta) if beta != 1.0 else cc)
    return np.asarray(y).astype(a.dtype, copy=False)


# -- normalization and activations over axes --------------------------------------------------


@op("BatchNormalization", 1, 6, 7, 9, 14, 15)
def batch_norm(ctx, x, scale, bias, mean, var):
    extra_outputs = any(o for o in ctx.node.output[1:])
    if ctx.version < 7 and not ctx.attrs.get("is_test", 0):
        raise ctx.unsupported("is_test=0 (training mode) is not supported; the evaluator "
                              "runs inference only (set is_test=1)")
    if ctx.attrs.get("training_mode", 0):
        raise ctx.unsupported("training_mode=1 is not supported; the evaluator runs "
                              "inference only")
    if extra_outputs:
        raise ctx.unsupported("the mean/var outputs exist only in training mode, which the "
                              "evaluator does not support")
    ct = np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)
    if ctx.version < 9 and not ctx.attrs.get("spatial", 1):
        shape = (1,) + x.shape[1:]
    else:
        shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    try:
        s, b, m, v = (t.astype(ct).reshape(shape) for t in (scale, bias, mean, var))
    except ValueError:
        raise ctx.error(f"scale/B/mean/var of shape {list(scale.shape)} do not fit X "
                        f"{list(x.shape)}") from None
    eps = ct.type(ctx.attrs.get("epsilon", 1e-5))
    with np.errstate(invalid="ignore"):  # a negative variance gives NaN, as in ONNX
        y = (x.astype(ct) - m) / np.sqrt(v + eps) * s + b
    return y.astype(x.dtype)


def _softmax(ctx, x, log: bool):
    axis = ctx.attrs.get("axis", 1 if ctx.version < 13 else -1)
    r = x.ndim
    axis = normalize_axes([axis], max(r, 1), ctx)[0]
    # Computed in x's own dtype step by step, as onnx's reference does (float16 results
    # then agree with the onnx test data to the last bit).
    xc = x
    if ctx.version < 13:  # coerce to 2-D [prod(shape[:axis]), prod(shape[axis:])]
        xc = xc.reshape(math.prod(x.shape[:axis]), -1)
        ax = 1
    else:
        ax = axis
    with np.errstate(all="ignore"):
        z = xc - xc.max(axis=ax, keepdims=True)
        e = np.exp(z)
        ssum = e.sum(axis=ax, keepdims=True)
        y = z - np.log(ssum) if log else e / ssum
    return y.reshape(x.shape).astype(x.dtype)


@op("Softmax", 1, 11, 13)
def softmax(ctx, x):
    return _softmax(ctx, x, log=False)


@op("LogSoftmax", 1, 11, 13)
def log_softmax(ctx, x):
    return _softmax(ctx, x, log=True)


@op("Dropout", 1, 6, 7, 10, 12, 13, 22)
def dropout(ctx, x, ratio=None, training_mode=None):
    if ctx.version < 7 and not ctx.attrs.get("is_test", 0) and ctx.attrs.get("ratio", 0.5):
        raise ctx.unsupported("is_test=0 (training mode, random) is not supported; the "
                              "evaluator runs inference only (set is_test=1)")
    if training_mode is not None and bool(np.asarray(training_mode).reshape(())):
        r = 0.0 if ratio is None else float(np.asarray(ratio).reshape(()))
        if r != 0.0:
            raise ctx.unsupported("training_mode=true with a non-zero ratio is random; the "
                                  "evaluator runs inference only")
    y = x.copy()
    if len(ctx.node.output) < 2 or not ctx.node.output[1]:
        return y
    mask_dtype = x.dtype if ctx.version < 10 else np.dtype(bool)
    return y, np.ones(x.shape, dtype=mask_dtype)


@op("InstanceNormalization", 1, 6, 22)
def instance_norm(ctx, x, scale, bias):
    ct = compute_dtype(x.dtype)
    xc = x.astype(ct)
    axes = tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    mean = xc.mean(axis=axes, keepdims=True)
    var = np.square(xc - mean).mean(axis=axes, keepdims=True)
    eps = ct.type(ctx.attrs.get("epsilon", 1e-5))
    y = (xc - mean) / np.sqrt(var + eps) * scale.astype(ct).reshape(shape) \
        + bias.astype(ct).reshape(shape)
    return y.astype(x.dtype)


@op("LRN", 1, 13)
def lrn(ctx, x):
    size = ctx.attrs["size"]
    alpha, beta, bias = (ctx.attrs.get(k, d) for k, d in
                         (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    ct = compute_dtype(x.dtype)
    sq = np.square(x.astype(ct))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    pad = [(0, 0)] * x.ndim
    pad[1] = (lo, hi)
    c = np.cumsum(np.pad(sq, pad), axis=1)
    c = np.concatenate([np.zeros_like(c[:, :1]), c], axis=1)
    s = c[:, size:size + x.shape[1]] - c[:, :x.shape[1]]
    y = x.astype(ct) / np.power(ct.type(bias) + ct.type(alpha / size) * s, ct.type(beta))
    return y.astype(x.dtype)


@op("LayerNormalization", 17)
def layer_norm(ctx, x, scale, bias=None):
    if ctx.attrs.get("stash_type", 1) != 1:
        raise ctx.unsupported(f"stash_type={ctx.attrs['stash_type']} (only 1, float)")
    axis = normalize_axes([ctx.attrs.get("axis", -1)], x.ndim, ctx)[0]
    ct = compute_dtype(x.dtype)
    axes = tuple(range(axis, x.ndim))
    xc = x.astype(ct)
    mean = xc.mean(axis=axes, keepdims=True)
    d = xc - mean
    inv = np.reciprocal(np.sqrt(np.square(d).mean(axis=axes, keepdims=True)
                                + ct.type(ctx.attrs.get("epsilon", 1e-5))))
    y = d * inv * scale.astype(ct)
    if bias is not None:
        y = y + bias.astype(ct)
    return y.astype(x.dtype), mean.astype(x.dtype), inv.astype(x.dtype)


@op("Hardmax", 1, 11, 13)
def hardmax(ctx, x):
    axis = normalize_axes([ctx.attrs.get("axis", 1 if ctx.version < 13 else -1)],
                          max(x.ndim, 1), ctx)[0]
    v = x.reshape(math.prod(x.shape[:axis]), -1) if ctx.version < 13 else x
    ax = 1 if ctx.version < 13 else axis
    idx = np.expand_dims(np.argmax(v, axis=ax), ax)
    y = np.zeros_like(v)
    np.put_along_axis(y, idx, v.dtype.type(1), axis=ax)
    return y.reshape(x.shape)
