"""ScatterND: a copy of ``data`` with each k-tuple of ``indices`` naming an element (k = the
rank of data) or a slice, set to its ``updates`` entry, or combined with it by ``reduction``.

All tuples are applied at once by numpy's indexing, as the operator's loop over ``indices``
(row-major) would: where two tuples name the same place, the later one's value stays (without
reduction; the operator leaves that order open, numpy's assignment too, so only the last of
them is assigned) or both are combined in that order (``np.add.at`` and its kin apply
repeated places one by one).
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import op

_COMBINE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


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
        flat = np.ravel_multi_index(where, shape)
        last = len(flat) - 1 - np.unique(flat[::-1], return_index=True)[1]
        target[tuple(idx[last].T)] = values[last]
    elif reduction in _COMBINE:
        _COMBINE[reduction].at(target, where, values)
    else:
        raise ctx.error(f"unknown reduction {reduction!r}")
    return out
