"""ReduceMean/Sum/Max/Min: ``axes`` an attribute before ReduceSum-13 / ReduceMean,Max,Min-18,
an optional input from then on (with ``noop_with_empty_axes``)."""

from __future__ import annotations

import numpy as np

from opshift.evaluator.ops.common import compute_dtype, ints, is_float, normalize_axes, sum_dtype
from opshift.evaluator.registry import op

# The version from which ``axes`` is an input rather than an attribute.
_AXES_INPUT_FROM = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18}


def _axes(ctx, x, axes_input):
    if ctx.version < _AXES_INPUT_FROM[ctx.op]:
        axes = ctx.attrs.get("axes")
    else:
        axes = None if axes_input is None else ints(axes_input)
        if not axes:
            if ctx.attrs.get("noop_with_empty_axes", 0):
                return "noop"
            axes = None
    if not axes:
        return tuple(range(x.ndim))
    return tuple(normalize_axes(axes, x.ndim, ctx))


def _reduce(name: str, fn, *versions: int) -> None:
    def impl(ctx, x, axes_input=None):
        axes = _axes(ctx, x, axes_input)
        if axes == "noop":
            return x
        keep = bool(ctx.attrs.get("keepdims", 1))
        return np.asarray(fn(x, axes, keep)).astype(x.dtype, copy=False)

    impl.__name__ = impl.__qualname__ = name.lower()
    op(name, *versions)(impl)


def _lowest(x):
    if x.dtype == bool:
        return False
    return -np.inf if is_float(x) else np.iinfo(x.dtype).min


def _highest(x):
    if x.dtype == bool:
        return True
    return np.inf if is_float(x) else np.iinfo(x.dtype).max


def _sum(x, axes, keep):
    ct = sum_dtype(x.dtype)
    return np.sum(x, axis=axes, keepdims=keep, dtype=ct)


def _mean(x, axes, keep):
    ct = sum_dtype(x.dtype)
    return np.mean(x, axis=axes, keepdims=keep, dtype=ct)


def _max(x, axes, keep):
    return np.max(x, axis=axes, keepdims=keep, initial=_lowest(x))


def _min(x, axes, keep):
    return np.min(x, axis=axes, keepdims=keep, initial=_highest(x))


_reduce("ReduceSum", _sum, 1, 11, 13)
_reduce("ReduceMean", _mean, 1, 11, 13, 18)
_reduce("ReduceMax", _max, 1, 11, 12, 13, 18, 20)
_reduce("ReduceMin", _min, 1, 11, 12, 13, 18, 20)


_AXES_INPUT_FROM["ReduceProd"] = 18
_reduce("ReduceProd", lambda x, axes, keep: np.prod(x, axis=axes, keepdims=keep,
                                                    dtype=compute_dtype(x.dtype)), 1, 11, 13, 18)


def _arg(name: str, fn, *versions: int) -> None:
    def impl(ctx, x):
        axis = normalize_axes([ctx.attrs.get("axis", 0)], max(x.ndim, 1), ctx)[0]
        if x.shape[axis] == 0:
            raise ctx.error(f"axis {axis} is empty")
        if ctx.attrs.get("select_last_index", 0):
            idx = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis)
        else:
            idx = fn(x, axis=axis)
        idx = np.asarray(idx, dtype=np.int64)
        return np.expand_dims(idx, axis) if ctx.attrs.get("keepdims", 1) else idx

    impl.__name__ = impl.__qualname__ = name.lower()
    op(name, *versions)(impl)


_arg("ArgMax", np.argmax, 1, 11, 12, 13)
_arg("ArgMin", np.argmin, 1, 11, 12, 13)


def _logsumexp(x, axes, keep):
    """As ReduceLogSumExp-18's function body, the op's one written definition (every version
    means the same): Exp, ReduceSum and Log in float64, cast back to X's type."""
    return np.log(np.sum(np.exp(x.astype(np.float64)), axis=axes, keepdims=keep))


for _name, _fn in [
    ("ReduceL1", lambda x, axes, keep: np.sum(np.abs(x), axis=axes, keepdims=keep,
                                              dtype=sum_dtype(x.dtype))),
    ("ReduceL2", lambda x, axes, keep: np.sqrt(np.sum(np.square(x.astype(sum_dtype(
        x.dtype))), axis=axes, keepdims=keep))),
    ("ReduceSumSquare", lambda x, axes, keep: np.sum(np.square(x.astype(sum_dtype(
        x.dtype))), axis=axes, keepdims=keep)),
    ("ReduceLogSum", lambda x, axes, keep: np.log(np.sum(x, axis=axes, keepdims=keep,
                                                         dtype=sum_dtype(x.dtype)))),
    ("ReduceLogSumExp", _logsumexp),
]:
    _AXES_INPUT_FROM[_name] = 18
    # ReduceLogSum(Exp)-28 only narrows the types to floats
    _reduce(_name, _fn, 1, 11, 13, 18, *((28,) if _name in ("ReduceLogSum",
                                                             "ReduceLogSumExp") else ()))
