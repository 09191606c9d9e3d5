"""ScatterND: a copy of ``data`` with each k-tuple of ``indices`` naming an element (k = the
rank of data) or a slice, set to its ``updates`` entry, or combined with it by ``reduction``.

All tuples are applied at once by numpy's indexing, in the order of the operator's loop over
``indices`` (row-major): where two tuples name the same place, the later one's value stays
(without reduction; the operator leaves that order unspecified) or both are combined in that
order (``np.add.at`` and its kin apply repeated places one by one).
"""

from __future__ import annotations

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
    idx = indices.reshape(-1, k).astype(np.int64)
    dims = np.array(data.shape[:k], np.int64)
    idx = np.where(idx < 0, idx + dims, idx)
    bad = (idx < 0) | (idx >= dims)
    if bad.any():
        row = int(np.argmax(bad.any(axis=1)))
        raise ctx.error(f"index {indices.reshape(-1, k)[row].tolist()} is out of range for "
                        f"data {list(data.shape)}")
    out = data.copy()
    where = tuple(idx.T)
    values = updates.reshape((-1,) + data.shape[k:])
    reduction = ctx.attrs.get("reduction", "none")
    if reduction == "none":
        out[where] = values
    elif reduction in _COMBINE:
        _COMBINE[reduction].at(out, where, values)
    else:
        raise ctx.error(f"unknown reduction {reduction!r}")
    return out
