"""ScatterND (from 11) below 11: a Gather of constant positions, or from opset 9 a Scatter of
rows.

Constant indices into data of a static shape (from 5): every output element is read from
``Concat(flat data, flat updates)`` at a constant position (its own, or that of the update
written to it, the later of two), one Gather and a Reshape.

Data is flattened to ``[N, S]`` at axis k (Flatten: N the product of data's first k dims, S
of the rest), so that each k-tuple of indices names one row: ``sum_j i_j * stride_j`` (the
row-major strides of data's first k dims, read from its shape; a negative index counts from
the back, as ScatterND's). The updates, flattened to ``[M, S]``, are written to their rows by
Scatter-9 along axis 0, its indices the row numbers widened by Expand to the updates' shape;
a Reshape to data's shape ends it. Data movement only, so exact for every type; where two
tuples name one place the later update stays, as both ops write them in order.
Otherwise indices whose last dim (k) is unknown or 0, or a target below 9 (no Scatter, Expand
or Where), are refused.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from opshift.convert.registry import replaces
from opshift.convert.step import Refuse, Step


@replaces("ScatterND")
def scatter_nd_below_11(st: Step) -> None:
    if st.attr("reduction", "none") not in ("none", b"none"):
        raise Refuse(f"reduction={st.attr('reduction')!r} (ScatterND combines updates only "
                     "from 16)")
    data, indices, updates, y = st.input(0), st.input(1), st.input(2), st.w.output[0]
    if _from_constant_positions(st, data, indices, updates, y):
        return
    if st.target < 9:
        raise Refuse("below opset 9 there is no Scatter, Expand or Where to write it with "
                     "(its indices or data's shape not constant)")
    ishape = st.shape(indices)
    k = ishape[-1] if ishape else None
    if not isinstance(k, int) or k < 1:
        raise Refuse("the last dim of its indices (how many of data's axes each tuple names) "
                     + ("is 0" if k == 0 else "is unknown"))
    if st.rank(data) is None:
        raise Refuse(f"the rank of data {data!r} is unknown")
    shape = st.add_node("Shape", [data], "shape")
    dims = st.elements(shape, range(k), "indexed_dims")
    i = indices
    if st.elem_type(i) != TensorProto.INT64:
        i = st.add_cast(i, TensorProto.INT64, "indices_int64")
    zero = st.add_const("zero", np.array(0, np.int64))
    i = st.where_less(i, zero, st.add_node("Add", [i, dims], "from_the_back"), "indices")
    if k > 1:
        i = st.add_node("ReduceSum", [st.add_node("Mul", [i, _strides(st, shape, k)],
                                                  "scaled")], "rows", axes=[len(ishape) - 1],
                        keepdims=1)
    rows = st.add_node("Reshape", [i, st.add_const("column", np.array([-1, 1], np.int64))],
                       "row_column")
    flat_updates = st.add_node("Flatten", [updates], "updates_rows", axis=len(ishape) - 1)
    wide = st.add_node("Expand", [rows, st.add_node("Shape", [flat_updates], "updates_shape")],
                       "row_of_each")
    written = st.add_node("Scatter", [st.add_node("Flatten", [data], "data_rows", axis=k),
                                      wide, flat_updates], "written", axis=0)
    st.add_node("Reshape", [written, shape], "scattered", output=y)
    st.remove("ScatterND written as a Scatter of the rows of data flattened at its indexed "
              "axes", "ScatterND exists from opset 11")


def _strides(st: Step, shape: str, k: int) -> str:
    """The row-major strides ``[d1 * .. * d(k-1), .., d(k-1), 1]`` of data's first ``k``
    dims (``shape``: data's shape), as an int64 ``[k]``."""
    stride = st.add_const("one", np.array([1], np.int64))
    strides = [stride]
    for j in range(k - 1, 0, -1):
        dim = st.element(shape, j, f"dim{j}", rank1=True)
        stride = st.add_node("Mul", [stride, dim], f"stride{j - 1}")
        strides.append(stride)
    return st.add_node("Concat", strides[::-1], "strides", axis=0)


def _from_constant_positions(st: Step, data: str, indices: str, updates: str, y: str) -> bool:
    """Write the node as a Gather of constant positions in ``Concat(flat data, flat
    updates)`` where the indices are a constant and data's shape is static; False where not
    (or below 5, where Reshape takes its shape as an attribute)."""
    value, shape = st.const(indices), st.shape(data)
    if (value is None or shape is None or st.target < 5
            or not all(isinstance(d, int) for d in shape) or value.ndim < 1
            or not 1 <= value.shape[-1] <= len(shape)):
        return False
    k, n = value.shape[-1], int(np.prod(shape, dtype=np.int64))
    tuples = value.reshape(-1, k).astype(np.int64)
    bounds = np.array(shape[:k], np.int64)
    if ((tuples < -bounds) | (tuples >= bounds)).any():
        raise Refuse(f"an index of {value.reshape(-1)[:8].tolist()} is outside data "
                     f"{list(shape)}")
    tuples = np.where(tuples < 0, tuples + bounds, tuples)
    given = st.shape(updates)
    if given is not None and tuple(given) != (*value.shape[:-1], *shape[k:]):
        raise Refuse(f"updates of shape {list(given)} do not fit indices "
                     f"{list(value.shape)} into data {list(shape)}")
    block = int(np.prod(shape[k:], dtype=np.int64))  # elements each tuple writes
    at = np.arange(n, dtype=np.int64)
    starts = np.ravel_multi_index(tuple(tuples.T), shape[:k]) * block
    for j, first in enumerate(starts):  # in order: the later of two updates stays
        at[first:first + block] = n + j * block + np.arange(block)
    minus_one = st.add_const("flat", np.array([-1], np.int64))
    both = st.add_node("Concat", [st.add_node("Reshape", [v, minus_one], f"{what}_flat")
                                  for v, what in ((data, "data"), (updates, "updates"))],
                       "both", axis=0)
    picked = st.add_node("Gather", [both, st.add_const("positions", at)], "picked", axis=0)
    st.add_node("Reshape", [picked, st.add_const("shape", np.array(shape, np.int64))],
                "scattered", output=y)
    st.remove("ScatterND with constant indices written as a Gather of data and updates, "
              "flattened and joined, at constant positions", "ScatterND exists from opset 11")
    return True
