"""ScatterND (from 11) below 11, from opset 9: a Scatter of rows.

Data is flattened to ``[N, S]`` at axis k (Flatten: N the product of data's first k dims, S
of the rest), so that each k-tuple of indices names one row: ``sum_j i_j * stride_j`` (the
row-major strides of data's first k dims, read from its shape; a negative index counts from
the back, as ScatterND's). The updates, flattened to ``[M, S]``, are written to their rows by
Scatter-9 along axis 0, its indices the row numbers widened by Expand to the updates' shape;
a Reshape to data's shape ends it. Data movement only, so exact for every type; where two
tuples name one place the later update stays, as both ops write them in order.
Indices whose last dim (k) is unknown or 0, or a target below 9 (no Scatter, Expand or
Where), are refused.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ..registry import replaces
from ..step import Refuse, Step


@replaces("ScatterND")
def scatter_nd_below_11(st: Step) -> None:
    if st.target < 9:
        raise Refuse("below opset 9 there is no Scatter, Expand or Where to write it with")
    if st.attr("reduction", "none") not in ("none", b"none"):
        raise Refuse(f"reduction={st.attr('reduction')!r} (ScatterND combines updates only "
                     "from 16)")
    data, indices, updates, y = st.input(0), st.input(1), st.input(2), st.w.output[0]
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
