"""Helpers shared by op modules: legacy broadcasting, dtype kinds, attribute lists (threads and
BLAS are :mod:`opshift.evaluator.parallel`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_dtypes
import numpy as np

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
#: float16 and bfloat16: computed in float32, rounded once to their type.
NARROW_FLOATS = frozenset({np.dtype(np.float16), BFLOAT16})


def is_float(x: np.ndarray) -> bool:
    """float16/32/64 or bfloat16 (ml_dtypes' bfloat16 has kind 'V')."""
    return x.dtype.kind == "f" or x.dtype == BFLOAT16


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype to accumulate in: float32 for float16/bfloat16, else the dtype itself."""
    if dtype in NARROW_FLOATS:
        return np.dtype(np.float32)
    return dtype


def sum_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype sums of products or of many terms run in: float64 for every float type,
    rounded once to the type after (within an ulp of the exact sum but for the rare sum
    that lies that close to a rounding boundary, whatever order numpy or BLAS adds in);
    integers in their own type (they wrap, as ONNX's do)."""
    if dtype.kind == "f" or dtype == BFLOAT16:
        return np.dtype(np.float64)
    return dtype


def legacy_rhs(ctx, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """B placed for A by the opset 1..6 ``broadcast``/``axis`` attributes of binary ops.

    broadcast=0: shapes must be equal. broadcast=1: B is a scalar (size 1) or its shape is a
    contiguous run of A's shape starting at ``axis`` (suffix matching if ``axis`` is absent).
    """
    if not ctx.attrs.get("broadcast", 0):
        if a.shape != b.shape:
            raise ctx.error(f"shapes {list(a.shape)} and {list(b.shape)} differ and "
                            "broadcast=0 (opsets <= 6 need broadcast=1 to broadcast)")
        return b
    if b.size == 1:
        return b.reshape(())
    axis = ctx.attrs.get("axis")
    if axis is None:
        axis = a.ndim - b.ndim
    elif axis < 0:
        axis += a.ndim
    if axis < 0 or axis + b.ndim > a.ndim or a.shape[axis:axis + b.ndim] != b.shape:
        raise ctx.error(f"B of shape {list(b.shape)} is not a contiguous part of A's shape "
                        f"{list(a.shape)} at axis {ctx.attrs.get('axis', 'suffix')}")
    return b.reshape(b.shape + (1,) * (a.ndim - axis - b.ndim))


def normalize_axes(axes: Sequence[int], rank: int, ctx=None) -> list[int]:
    out = []
    for a in axes:
        a = int(a)
        if not -rank <= a < rank:
            msg = f"axis {a} is out of range for rank {rank}"
            raise ctx.error(msg) if ctx is not None else ValueError(msg)
        out.append(a + rank if a < 0 else a)
    return out


#: the most elements a node may make from its input values (a shape, a size, repeats,
#: pads): generated inputs hold 2**31 and the like, which would take the machine's memory
MAX_MADE_ELEMENTS = 1 << 28


def made(ctx, shape: Sequence[int]) -> tuple[int, ...]:
    """``shape``, the output shape a node computes from its input values; a
    :class:`~opshift.errors.LimitError` past :data:`MAX_MADE_ELEMENTS`."""
    from opshift.errors import LimitError

    shape = tuple(int(d) for d in shape)
    n = math.prod(max(d, 0) for d in shape)
    if n > MAX_MADE_ELEMENTS:
        raise LimitError(f"{ctx.where()}: an output of {n} elements ({list(shape)}), over the "
                         f"evaluator's limit of {MAX_MADE_ELEMENTS} for a shape made from "
                         "input values")
    return shape


def ints(v) -> list[int]:
    """An int64 tensor input (or attribute list) as a list of Python ints."""
    return [int(i) for i in np.asarray(v).reshape(-1)]


def requantized(r: np.ndarray, zero_point, dtype: np.dtype) -> np.ndarray:
    """``r`` (float64) shifted by ``zero_point`` (float64, shaped to broadcast; None: no
    shift), rounded half to even and clipped to the integer ``dtype``, as onnx.reference's
    Q-linear kernels compute it."""
    if zero_point is not None:
        r += zero_point
    info = np.iinfo(dtype)
    return np.clip(np.rint(r), info.min, info.max).astype(dtype)
