"""Tensor plumbing: Constant, Cast, CastLike, shape ops, Concat, Gather, Slice, Pad."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import numpy_helper

from opshift.evaluator.ops.common import BFLOAT16, ints, made, normalize_axes, sum_dtype
from opshift.evaluator.registry import op
from opshift.graph.layout_rules import slice_range

#: TensorProto element types Cast converts between by numpy alone (see _cast_other for the
#: rest: strings, float8/float4/int4/int2).
_CASTABLE = {
    onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
    onnx.TensorProto.BFLOAT16, onnx.TensorProto.BOOL,
    onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
    onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32,
    onnx.TensorProto.UINT64,
}
_CASTABLE_DTYPES = {np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t)) for t in _CASTABLE}


_T = onnx.TensorProto
_FLOAT8 = {_T.FLOAT8E4M3FN, _T.FLOAT8E4M3FNUZ, _T.FLOAT8E5M2, _T.FLOAT8E5M2FNUZ}


def _cast(ctx, x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if x.dtype not in _CASTABLE_DTYPES or dtype not in _CASTABLE_DTYPES:
        return _cast_other(ctx, x, onnx.helper.np_dtype_to_tensor_dtype(dtype), dtype)
    if x.dtype == BFLOAT16 and dtype.kind in "iub":  # (dtype.name is slow: per node)
        x = x.astype(np.float32)
    return x.astype(dtype)


def _cast_other(ctx, x: np.ndarray, to: int, dtype: np.dtype) -> np.ndarray:
    """A cast from or to strings or the narrow types, as the spec's rules (and onnx's
    reference) have it: strings read and written by numpy's str; a float8 of the four
    saturating types clamped to its largest finite value unless ``saturate`` is 0 (then out
    of range is NaN or inf); float8e8m0 by ``round_mode``; the rest rounded to nearest even
    and wrapped as ml_dtypes converts."""
    saturate = bool(ctx.attrs.get("saturate", 1))
    if to == _T.STRING:
        return x.astype(np.str_).astype(object)
    if to in _FLOAT8 and saturate:
        return numpy_helper.saturate_cast(x, dtype)
    if to == _T.FLOAT8E8M0:
        return numpy_helper.to_float8e8m0(x, saturate, ctx.attrs.get("round_mode", "up")
                                          ).astype(dtype)
    return x.astype(dtype)


@op("Cast", 1, 6, 9, 13, 19, 21, 23, 24, 25, 28)
def cast(ctx, x):
    to = ctx.attrs["to"]
    if isinstance(to, str):  # Cast-1 names the type: to="FLOAT"
        try:
            to = onnx.TensorProto.DataType.Value(to.upper())
        except ValueError:
            raise ctx.error(f"unknown type name to={to!r}") from None
    return _cast(ctx, x, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(to)))


@op("CastLike", 15, 19, 21, 23, 24, 25)
def cast_like(ctx, x, target):
    return _cast(ctx, x, target.dtype)


_CONSTANT_FORMS = ("value", "value_float", "value_floats", "value_int", "value_ints",
                   "value_string", "value_strings", "sparse_value")


@op("Constant", 1, 9, 11, 12, 13, 19, 21, 23, 24, 25)
def constant(ctx):
    given = [k for k in _CONSTANT_FORMS if k in ctx.attrs]
    if len(given) != 1:
        raise ctx.error(f"needs exactly one of the value attributes, got {given or 'none'}")
    k = given[0]
    v = ctx.attrs[k]
    if k == "value":
        return np.array(v)
    if k in ("value_float", "value_floats"):
        return np.array(v, dtype=np.float32)
    if k in ("value_int", "value_ints"):
        return np.array(v, dtype=np.int64)
    return np.array(v, dtype=object)  # value_string(s)


@op("ConstantOfShape", 9, 20, 21, 23, 24, 25)
def constant_of_shape(ctx, shape):
    value = ctx.attrs.get("value")
    v = np.zeros((), np.float32) if value is None else np.asarray(value).reshape(())
    return np.full(made(ctx, ints(shape)), v, dtype=v.dtype)


@op("Identity", 1, 13, 14, 16, 19, 21, 23, 24, 25)
def identity(ctx, x):
    return (x,)  # (x may be a sequence: a list returned alone would be read as outputs)


def _reshape(ctx, x, shape, allowzero: int):
    shape = ints(shape)
    if not allowzero:
        shape = [x.shape[i] if d == 0 and i < x.ndim else d for i, d in enumerate(shape)]
    if shape.count(-1) > 1:
        raise ctx.error(f"shape {shape} has more than one -1")
    if allowzero and 0 in shape and -1 in shape:
        raise ctx.error(f"shape {shape} has both 0 and -1 with allowzero=1")
    try:
        return x.reshape(shape)
    except ValueError:
        raise ctx.error(f"cannot reshape {list(x.shape)} to {shape}") from None


@op("Reshape", 1)
def reshape_1(ctx, x):
    return _reshape(ctx, x, ctx.attrs["shape"], 0)


@op("Reshape", 5, 13, 14, 19, 21, 23, 24, 25)
def reshape(ctx, x, shape):
    return _reshape(ctx, x, shape, ctx.attrs.get("allowzero", 0))


def _axes(ctx, axes_input):
    if ctx.version < 13:
        return ctx.attrs.get("axes")
    return None if axes_input is None else ints(axes_input)


@op("Unsqueeze", 1, 11, 13, 21, 23, 24, 25)
def unsqueeze(ctx, x, axes_input=None):
    axes = _axes(ctx, axes_input)
    if axes is None:
        raise ctx.error("axes are required")
    rank = x.ndim + len(axes)
    if ctx.version == 1 and any(a < 0 for a in axes):
        raise ctx.error(f"negative axes {axes} are not allowed at version 1")
    axes = normalize_axes(axes, rank, ctx)
    if len(set(axes)) != len(axes):
        raise ctx.error(f"axes {axes} repeat")
    return np.expand_dims(x, tuple(axes))


@op("Squeeze", 1, 11, 13, 21, 23, 24, 25)
def squeeze(ctx, x, axes_input=None):
    axes = _axes(ctx, axes_input)
    if axes is None:
        return np.squeeze(x)
    axes = normalize_axes(axes, x.ndim, ctx)
    bad = [a for a in axes if x.shape[a] != 1]
    if bad:
        raise ctx.error(f"cannot squeeze axis {bad[0]} of size {x.shape[bad[0]]}")
    return np.squeeze(x, tuple(axes))


@op("Shape", 1, 13, 15, 19, 21, 23, 24, 25)
def shape(ctx, x):
    dims = list(x.shape)
    r = len(dims)
    start = ctx.attrs.get("start", 0)
    end = ctx.attrs.get("end", r)
    start = min(max(start + r if start < 0 else start, 0), r)
    end = min(max(end + r if end < 0 else end, 0), r)
    return np.array(dims[start:end], dtype=np.int64)


@op("Size", 1, 13, 19, 21, 23, 24, 25)
def size(ctx, x):
    return np.array(x.size, dtype=np.int64)


@op("Expand", 8, 13)
def expand(ctx, x, shape):
    try:
        out = np.broadcast_shapes(x.shape, tuple(ints(shape)))
    except ValueError:
        raise ctx.error(f"shape {ints(shape)} does not broadcast with {list(x.shape)}") from None
    return np.array(np.broadcast_to(x, made(ctx, out)))


@op("Flatten", 1, 9, 11, 13, 21, 23, 24, 25)
def flatten(ctx, x):
    axis = ctx.attrs["axis"]
    r = x.ndim
    if not (-r if ctx.version >= 11 else 0) <= axis <= r:
        raise ctx.error(f"axis {axis} is out of range for rank {r}")
    if axis < 0:
        axis += r
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


@op("Transpose", 1, 13, 21, 23, 24, 25)
def transpose(ctx, x):
    perm = ctx.attrs.get("perm")
    if perm is not None and sorted(perm) != list(range(x.ndim)):
        raise ctx.error(f"perm {perm} is not a permutation of {x.ndim} axes")
    return np.transpose(x, perm)


@op("Concat", 1, 4, 11, 13)
def concat(ctx, *xs):
    axis = ctx.attrs.get("axis", 1)  # Concat-1 documents 1 as its default
    if not xs:
        raise ctx.error("needs at least one input")
    axis = normalize_axes([axis], xs[0].ndim, ctx)[0]
    return np.concatenate(xs, axis=axis)


@op("Gather", 1, 11, 13)
def gather(ctx, x, indices):
    axis = normalize_axes([ctx.attrs["axis"]], x.ndim, ctx)[0]
    n = x.shape[axis]
    idx = indices.astype(np.int64)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise ctx.error(f"indices out of range [-{n}, {n - 1}] for axis {axis}")
    idx = np.where(idx < 0, idx + n, idx)
    return np.take(x, idx, axis=axis)


def _slice(ctx, x, starts, ends, axes, steps):
    if axes is None:
        axes = list(range(len(starts)))
    axes = normalize_axes(axes, x.ndim, ctx)
    if steps is None:
        steps = [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.error("starts, ends, axes and steps differ in length")
    index = [slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st == 0:
            raise ctx.error("step 0")
        r = slice_range(x.shape[a], s, e, st)
        index[a] = slice(r.start, r.stop if r.stop >= 0 else None, st)
    return np.array(x[tuple(index)])


@op("Slice", 1)
def slice_1(ctx, x):
    return _slice(ctx, x, ctx.attrs["starts"], ctx.attrs["ends"], ctx.attrs.get("axes"), None)


@op("Slice", 10, 11, 13)
def slice_(ctx, x, starts, ends, axes=None, steps=None):
    return _slice(ctx, x, ints(starts), ints(ends), None if axes is None else ints(axes),
                  None if steps is None else ints(steps))


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def _pad(ctx, x, pads, value, axes=None):
    mode = ctx.attrs.get("mode", "constant")
    if mode not in _PAD_MODES or (mode == "wrap" and ctx.version < 19):
        raise ctx.unsupported(f"mode {mode!r} is not defined at this version")
    r = x.ndim
    axes = list(range(r)) if axes is None else normalize_axes(axes, r, ctx)
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads has {len(pads)} values, expected {2 * len(axes)}")
    width = [[0, 0] for _ in range(r)]
    for i, a in enumerate(axes):
        width[a] = [pads[i], pads[i + len(axes)]]
    # negative pads crop
    crop = tuple(slice(-b if b < 0 else 0, x.shape[a] + e if e < 0 else None)
                 for a, (b, e) in enumerate(width))
    x = x[crop]
    width = [(max(b, 0), max(e, 0)) for b, e in width]
    made(ctx, [d + b + e for d, (b, e) in zip(x.shape, width)])
    if mode == "constant":
        v = x.dtype.type(0) if value is None else np.asarray(value).astype(x.dtype).reshape(())
        return np.pad(x, width, mode="constant", constant_values=v)
    return np.pad(x, width, mode=_PAD_MODES[mode])


@op("Pad", 1, 2)
def pad_legacy(ctx, x):
    pads = ctx.attrs["paddings" if ctx.version == 1 else "pads"]
    return _pad(ctx, x, list(pads), ctx.attrs.get("value", 0.0))


@op("Pad", 11, 13, 18, 19, 21, 23, 24, 25)
def pad(ctx, x, pads, value=None, axes=None):
    if value is not None and np.size(value) == 0:
        value = None
    return _pad(ctx, x, ints(pads), value, None if axes is None else ints(axes))


@op("Range", 11, 27)
def range_(ctx, start, limit, delta):
    s, lim, d = (np.asarray(v).reshape(()) for v in (start, limit, delta))
    if d == 0:
        raise ctx.error("delta is 0")
    span = (float(lim) - float(s)) / float(d)  # NaN or infinite: none (as onnxruntime)
    n = int(math.ceil(span)) if math.isfinite(span) and span > 0 else 0
    # as Range-11's function body: each element is the previous one plus delta, in the type
    steps = np.full(made(ctx, (n,)), d, dtype=s.dtype)
    steps[:1] = s
    return np.add.accumulate(steps, dtype=s.dtype)


@op("Split", 1, 2, 11, 13, 18)
def split(ctx, x, split_input=None):
    axis = normalize_axes([ctx.attrs.get("axis", 0)], x.ndim, ctx)[0]
    n_out = len(ctx.node.output)
    sizes = ctx.attrs.get("split") if ctx.version < 13 else None
    if split_input is not None and ctx.version in (1, 13, 18):
        sizes = ints(split_input)
    d = x.shape[axis]
    if sizes is None:
        k = ctx.attrs.get("num_outputs", n_out) if ctx.version >= 18 else n_out
        if ctx.version >= 18 and "num_outputs" not in ctx.attrs:
            raise ctx.error("needs the split input or the num_outputs attribute")
        if ctx.version >= 18:
            step = -(-d // k)
            sizes = [min(step, d - i * step) for i in range(k)]
        else:
            if d % k:
                raise ctx.error(f"axis {axis} of size {d} does not split into {k} equal parts")
            sizes = [d // k] * k
    sizes = list(sizes)
    if sum(sizes) != d or len(sizes) != n_out or min(sizes, default=0) < 0:
        raise ctx.error(f"split {sizes} does not fit axis {axis} of size {d} into {n_out} "
                        "outputs")
    return [np.array(p) for p in np.split(x, np.cumsum(sizes)[:-1], axis=axis)]


@op("Tile", 1)
def tile_1(ctx, x, tiles, axis):
    reps = [1] * x.ndim
    reps[normalize_axes([int(np.asarray(axis).reshape(()))], x.ndim, ctx)[0]] = int(
        np.asarray(tiles).reshape(()))
    return tile(ctx, x, reps)


@op("Tile", 6, 13)
def tile(ctx, x, repeats):
    reps = ints(repeats)
    if len(reps) != x.ndim or min(reps, default=0) < 0:
        raise ctx.error(f"repeats {reps} do not fit rank {x.ndim}")
    made(ctx, [a * b for a, b in zip(x.shape, reps)])
    return np.tile(x, reps)


def _checked_indices(ctx, idx, n, axis):
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise ctx.error(f"indices out of range [-{n}, {n - 1}] for axis {axis}")
    return np.where(idx < 0, idx + n, idx)


@op("GatherElements", 11, 13)
def gather_elements(ctx, x, indices):
    axis = normalize_axes([ctx.attrs.get("axis", 0)], x.ndim, ctx)[0]
    return np.take_along_axis(x, _checked_indices(ctx, indices, x.shape[axis], axis), axis)


@op("CumSum", 11, 14)
def cumsum(ctx, x, axis):
    a = normalize_axes([int(np.asarray(axis).reshape(()))], x.ndim, ctx)[0]
    v = np.flip(x, a) if ctx.attrs.get("reverse", 0) else x
    y = np.cumsum(v, axis=a, dtype=x.dtype)
    if ctx.attrs.get("exclusive", 0):
        y = np.concatenate([np.zeros_like(np.take(y, [0], axis=a)),
                            np.take(y, np.arange(y.shape[a] - 1), axis=a)], axis=a)
    return np.ascontiguousarray(np.flip(y, a) if ctx.attrs.get("reverse", 0) else y)


@op("Trilu", 14)
def trilu(ctx, x, k=None):
    if x.ndim < 2:
        raise ctx.error(f"input must have rank >= 2, got {x.ndim}")
    kk = 0 if k is None else int(np.asarray(k).reshape(()))
    return np.triu(x, kk) if ctx.attrs.get("upper", 1) else np.tril(x, kk)


@op("NonZero", 9, 13)
def non_zero(ctx, x):
    if x.ndim == 0:
        raise ctx.unsupported("0-d input is not supported")
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


@op("Einsum", 12, 28)  # 28 adds bfloat16
def einsum(ctx, *xs):
    ct = sum_dtype(xs[0].dtype)
    y = np.einsum(ctx.attrs["equation"], *(x.astype(ct, copy=False) for x in xs))
    return np.asarray(y).astype(xs[0].dtype, copy=False)
