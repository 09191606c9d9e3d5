"""Reads and writes at computed indices: GatherND, ScatterND, ScatterElements and Scatter.

GatherND: the elements or slices of ``data`` that the k-tuples of ``indices`` name, per batch
(``batch_dims`` leading axes shared by both), all at once through numpy's indexing.

The scatters: a copy of ``data`` with the places ``indices`` name set to their ``updates``
entries, or combined with them by ``reduction``. ScatterND's k-tuples of indices name an
element (k = the rank of data) or a slice; ScatterElements' (and Scatter's, its first name)
each name one element: its own position with the index put in along ``axis``.

All places are updated at once by numpy's indexing, as the operators' loops over ``indices``
(row-major) would: where two name the same place, the later one's value stays (without
reduction; the operators leave that order open, numpy's assignment too, so only the last of
them is assigned) or both are combined in that order (``np.add.at`` and its kin apply
repeated places one by one). ScatterElements' max and min keep a place's value unless an
update is greater (smaller), as onnx.reference's Python ``max``/``min`` do: a NaN update never
replaces it, a NaN in data is never replaced, and of equal zeros the earlier stays.
"""

from __future__ import annotations

import math

import numpy as np

from opshift.evaluator.ops.common import is_float, normalize_axes
from opshift.evaluator.registry import op

_COMBINE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _last_of_each(flat: np.ndarray, size: int) -> np.ndarray:
    """Positions in ``flat`` (places among ``size``) of each place's last occurrence."""
    last = np.full(size, -1, np.int64)
    np.maximum.at(last, flat, np.arange(len(flat)))
    return np.flatnonzero(last[flat] == np.arange(len(flat)))


@op("ScatterND", 11, 13, 16, 18)
def scatter_nd(ctx, data, indices, updates):
    if indices.ndim < 1 or data.ndim < 1 or indices.shape[-1] > data.ndim:
        raise ctx.error(f"indices {list(indices.shape)} do not index data "
                        f"{list(data.shape)}")
    k = indices.shape[-1]
    want = indices.shape[:-1] + data.shape[k:]
    if updates.shape != want:
        raise ctx.error(f"updates {list(updates.shape)} must have shape {list(want)} for "
                        f"indices {list(indices.shape)} and data {list(data.shape)}")
    n = math.prod(indices.shape[:-1])
    idx = indices.reshape(n, k).astype(np.int64)
    dims = np.array(data.shape[:k], np.int64)
    idx = np.where(idx < 0, idx + dims, idx)
    bad = (idx < 0) | (idx >= dims)
    if bad.any():
        row = int(np.argmax(bad.any(axis=1)))
        raise ctx.error(f"index {indices.reshape(n, k)[row].tolist()} is out of range for "
                        f"data {list(data.shape)}")
    out = data.copy()
    values = updates.reshape((n,) + data.shape[k:])
    # k = 0: every tuple names all of data, read as index 0 of an axis put in front
    target, shape = (out, data.shape[:k]) if k else (out[np.newaxis], (1,))
    if not k:
        idx = np.zeros((n, 1), np.int64)
    where = tuple(idx.T)
    reduction = ctx.attrs.get("reduction", "none")
    if reduction == "none":
        last = _last_of_each(np.ravel_multi_index(where, shape), math.prod(shape))
        target[tuple(idx[last].T)] = values[last]
    elif reduction in _COMBINE:
        _COMBINE[reduction].at(target, where, values)
    else:
        raise ctx.error(f"unknown reduction {reduction!r}")
    return out


def _keep_unless(out, flat, values, greater: bool) -> None:
    """``out.flat[flat]`` replaced by each of ``values`` in turn that is greater (smaller)
    than the value kept, as Python's max (min) keeps its first argument unless the second
    wins."""
    ref = out.reshape(-1)
    if not is_float(out):
        (np.maximum if greater else np.minimum).at(ref, flat, values)
        return
    start = ref.copy()
    (np.fmax if greater else np.fmin).at(ref, flat, values)  # NaN updates never win
    nan = np.isnan(start)
    ref[nan] = start[nan]  # a NaN in data is never replaced
    # of equal zeros (+0, -0) the earliest stays: data's own, else the first zero update's
    at_zero = (ref == 0) & ~nan
    kept = at_zero & (start == 0)
    ref[kept] = start[kept]
    reached = np.flatnonzero(at_zero & (start != 0))
    if reached.size:
        hits = np.flatnonzero((values == 0) & np.isin(flat, reached))
        first = np.full(ref.size, len(flat), np.int64)
        np.minimum.at(first, flat[hits], hits)
        ref[reached] = values[first[reached]]


@op("ScatterElements", 11, 13, 16, 18)
@op("Scatter", 9, 11)
def scatter_elements(ctx, data, indices, updates):
    axis = normalize_axes([ctx.attrs.get("axis", 0)], max(data.ndim, 1), ctx)[0]
    if indices.shape != updates.shape or indices.ndim != data.ndim or data.ndim < 1 or \
            any(i > d for a, (i, d) in enumerate(zip(indices.shape, data.shape)) if a != axis):
        raise ctx.error(f"indices {list(indices.shape)} and updates {list(updates.shape)} "
                        f"must have one shape, of data's rank, within data "
                        f"{list(data.shape)} but along axis {axis}")
    dim = data.shape[axis]
    idx = indices.astype(np.int64)
    low = 0 if ctx.op == "Scatter" and ctx.version < 11 else -dim
    bad = (idx < low) | (idx >= dim)
    if bad.any():
        raise ctx.error(f"index {int(idx[bad][0])} is out of range [{low}, {dim - 1}] for "
                        f"axis {axis} of data {list(data.shape)}")
    idx = np.where(idx < 0, idx + dim, idx)
    where = list(np.indices(indices.shape, sparse=True))
    where[axis] = idx
    flat = np.ravel_multi_index(tuple(np.broadcast_arrays(*where)), data.shape).reshape(-1)
    values = updates.reshape(-1)
    out = data.copy()
    reduction = ctx.attrs.get("reduction", "none")
    if reduction == "none":
        last = _last_of_each(flat, out.size)
        out.reshape(-1)[flat[last]] = values[last]
    elif reduction in ("add", "mul"):
        _COMBINE[reduction].at(out.reshape(-1), flat, values)
    elif reduction in ("max", "min"):
        if data.dtype.kind == "c":
            raise ctx.unsupported(f"reduction {reduction!r} of complex values (unordered)")
        _keep_unless(out, flat, values, reduction == "max")
    else:
        raise ctx.error(f"unknown reduction {reduction!r}")
    return out


@op("GatherND", 11, 12, 13)
def gather_nd(ctx, data, indices):
    b = ctx.attrs.get("batch_dims", 0)
    if indices.ndim < 1 or not 0 <= b < min(data.ndim, indices.ndim) or \
            indices.shape[-1] > data.ndim - b or data.shape[:b] != indices.shape[:b]:
        raise ctx.error(f"indices {list(indices.shape)} do not index data "
                        f"{list(data.shape)} with batch_dims={b}")
    k, batches = indices.shape[-1], math.prod(data.shape[:b])
    idx = indices.reshape(batches, math.prod(indices.shape[b:-1]), k).astype(np.int64)
    dims = np.array(data.shape[b:b + k], np.int64)
    bad = (idx < -dims) | (idx >= dims)
    if bad.any():
        at = np.argwhere(bad.any(axis=-1))[0]
        raise ctx.error(f"index {idx[tuple(at)].tolist()} is out of range for data "
                        f"{list(data.shape)} (batch_dims={b})")
    idx = np.where(idx < 0, idx + dims, idx)
    rows = data.reshape(batches, *data.shape[b:])
    if k:
        out = rows[(np.arange(batches)[:, None], *np.moveaxis(idx, -1, 0))]
    else:  # tuples of no index: each names all of its batch's data
        out = np.repeat(rows[:, None], idx.shape[1], axis=1)
    return out.reshape(indices.shape[:-1] + data.shape[b + k:])
