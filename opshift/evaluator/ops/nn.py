"""Network ops, inference only: Gemm, MatMul, BatchNormalization and the other
normalizations, Softmax/LogSoftmax, Hardmax, Dropout, LRN.

Gemm, MatMul, InstanceNormalization and LRN sum in float64 and round once to the input type
(:func:`.common.sum_dtype`); the others compute step by step as the operator states.
"""

from __future__ import annotations

import math

import numpy as np

from opshift.evaluator.ops.common import is_float, normalize_axes, requantized, sum_dtype
from opshift.evaluator.parallel import block_size, in_parallel, one_blas_thread
from opshift.evaluator.registry import op

# -- dense ------------------------------------------------------------------------------------


@op("MatMul", 1, 9, 13)
def matmul(ctx, a, b):
    return _matmul(ctx, a, b, sum_dtype(a.dtype)).astype(a.dtype, copy=False)


def _per_row(t, a):
    """A per-row quantization parameter of a 2-D A (``[M]``) as ``[M, 1]``, in its own type;
    any other shape broadcasts as it is (a scalar, ``[..., M, 1]``, B's ``[N]`` per
    column)."""
    t = np.asarray(t)
    return t.reshape(-1, 1) if t.ndim == 1 and t.size > 1 and a.ndim == 2 else t


def _integers(ctx, v, zp, rows: bool):
    """``v - zp`` as float64 (exact), the zero point per tensor, per row of A or per column
    of B."""
    out = v.astype(np.float64)
    if zp is None:
        return out
    try:
        return out - (_per_row(zp, v) if rows else zp).astype(np.float64)
    except ValueError:
        raise ctx.error(f"zero point of shape {list(zp.shape)} does not fit "
                        f"{list(v.shape)}") from None


@op("MatMulInteger", 10)
def matmul_integer(ctx, a, b, a_zero_point=None, b_zero_point=None):
    """The product of the zero-point-free integers, exact in float64 (a uint8/int8 product
    sum stays far below 2**53), wrapped to int32 as an int32 sum would."""
    y = _matmul(ctx, _integers(ctx, a, a_zero_point, True),
                _integers(ctx, b, b_zero_point, False), np.dtype(np.float64))
    return y.astype(np.int64).astype(np.int32)


@op("QLinearMatMul", 10, 21)
def qlinear_matmul(ctx, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp=None):
    """The exact integer product scaled by a_scale * b_scale / y_scale (in their type),
    shifted by y's zero point, rounded half to even and clipped to y's type, in float64 as
    onnx.reference computes it."""
    y = _matmul(ctx, _integers(ctx, a, a_zp, True), _integers(ctx, b, b_zp, False),
                np.dtype(np.float64))
    # the scales in their own type, a's and y's per row of a 2-D A, b's per column
    a_s, y_s = _per_row(a_scale, a), _per_row(y_scale, a)
    y *= np.asarray((a_s * b_scale) / y_s).astype(np.float64)
    return requantized(y, None if y_zp is None else _per_row(y_zp, a).astype(np.float64),
                       a.dtype if y_zp is None else y_zp.dtype)


def _matmul(ctx, a, b, ct):
    """``a @ b`` summed in ``ct``."""
    if a.ndim == 0 or b.ndim == 0:
        raise ctx.error("MatMul inputs must have rank >= 1")
    if a.ndim < 2 or b.ndim < 2:
        return np.asarray(np.matmul(a.astype(ct, copy=False), b.astype(ct, copy=False)))
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ctx.error(f"A {list(a.shape)} and B {list(b.shape)} do not broadcast") from None
    if a.shape[-1] != b.shape[-2]:
        raise ctx.error(f"A {list(a.shape)} and B {list(b.shape)} do not multiply")
    rows, cols = a.shape[-2], b.shape[-1]
    y = np.empty((*batch, rows, cols), ct)
    work = math.prod(batch) * rows * a.shape[-1] * cols
    # Blocks of B's columns (or of A's rows, when A is the larger), each widened to float64
    # by the thread that multiplies it: the other factor is read whole by every block.
    by_cols = rows <= cols
    n = cols if by_cols else rows
    step = block_size(n, work, n)
    whole = (a if by_cols else b).astype(ct, copy=False)

    def run(todo):
        for i in todo:
            part = np.s_[..., i:i + step]
            if by_cols:
                np.matmul(whole, b[part].astype(ct, copy=False), out=y[part])
            else:
                rows_ = np.s_[..., i:i + step, :]
                np.matmul(a[rows_].astype(ct, copy=False), whole, out=y[rows_])

    in_parallel(range(0, n, step), run, work)
    return y


@op("Gemm", 1, 6, 7, 9, 11, 13)
def gemm(ctx, a, b, c=None):
    if a.ndim != 2 or b.ndim != 2:
        raise ctx.error(f"A {list(a.shape)} and B {list(b.shape)} must be 2-D")
    ct = sum_dtype(a.dtype)
    aa = a.astype(ct, copy=False)
    bb = b.astype(ct, copy=False)
    if ctx.attrs.get("transA", 0):
        aa = aa.T
    if ctx.attrs.get("transB", 0):
        bb = bb.T
    alpha, beta = ctx.attrs.get("alpha", 1.0), ctx.attrs.get("beta", 1.0)
    with one_blas_thread(aa.shape[0] * aa.shape[1] * bb.shape[1]):
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
    # a negative variance gives NaN, as in ONNX
    # (x - mean) / sqrt(var + eps) * scale + B, each step in place
    y = np.subtract(x.astype(ct, copy=False), m)
    np.divide(y, np.sqrt(v + eps), out=y)
    np.multiply(y, s, out=y)
    np.add(y, b, out=y)
    return y.astype(x.dtype, copy=False)


def _softmax(ctx, x, log: bool):
    axis = ctx.attrs.get("axis", 1 if ctx.version < 13 else -1)
    r = x.ndim
    axis = normalize_axes([axis], max(r, 1), ctx)[0]
    # Computed in x's own dtype step by step, as onnx's reference does (float16 results
    # then agree with the onnx test data to the last bit), over a last axis in memory: the
    # sums are then added in one order whichever axis holds the values (a Softmax-13 on
    # axis 1 and its conversion, a Transpose and a Softmax on the last axis, agree).
    # (below 13 coerced to 2-D [prod(shape[:axis]), prod(shape[axis:])])
    xc = np.ascontiguousarray(x.reshape(math.prod(x.shape[:axis]), -1) if ctx.version < 13
                              else np.moveaxis(x, axis, -1))
    z = xc - xc.max(axis=-1, keepdims=True)
    e = np.exp(z)
    ssum = e.sum(axis=-1, keepdims=True)
    y = z - np.log(ssum) if log else e / ssum
    y = y.reshape(x.shape) if ctx.version < 13 else np.moveaxis(y, -1, axis)
    return y.astype(x.dtype, order="C")


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
    ct = sum_dtype(x.dtype)
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
    ct = sum_dtype(x.dtype)
    sq = np.square(x.astype(ct))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    pad = [(0, 0)] * x.ndim
    pad[1] = (lo, hi)
    c = np.cumsum(np.pad(sq, pad), axis=1)
    c = np.concatenate([np.zeros_like(c[:, :1]), c], axis=1)
    s = c[:, size:size + x.shape[1]] - c[:, :x.shape[1]]
    y = x.astype(ct) / np.power(ct.type(bias) + ct.type(alpha / size) * s, ct.type(beta))
    return y.astype(x.dtype)


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
