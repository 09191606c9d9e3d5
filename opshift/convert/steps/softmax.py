"""Softmax/LogSoftmax/Hardmax **13**: coerced 2-D (<= 11) vs one axis (>= 13).

Exact as it is when the axis is the last (or only size-1 dims follow it); otherwise the
input is flattened to 2-D around the op and reshaped back (up), or the axis is moved last
with Transpose (down).
"""

from __future__ import annotations

from opshift.convert.registry import at
from opshift.convert.step import Step, norm_axis


def _trailing_ones(shape: tuple | None, axis: int) -> bool:
    return shape is not None and all(d == 1 for d in shape[axis + 1:])


@at(13, "Softmax", "LogSoftmax", "Hardmax")
def softmax_axis(st: Step) -> None:
    x, y = st.input(0), st.w.output[0]
    r = st.need_rank(x, "coerced 2-D vs single-axis semantics")
    if st.up:
        axis = norm_axis(st.attr("axis", 1), r)
        if axis == r - 1 or _trailing_ones(st.shape(x), axis):
            st.set_attr("axis", axis)
            st.note(f"axis={axis}: the coerced 2-D and single-axis forms agree here")
            return
        flat = st.add_node("Flatten", [x], "flat", axis=axis)
        inner = st.fresh_value("2d", like=x)
        shape = st.add_node("Shape", [x], "shape")
        w = st.edit()
        w.input[0] = flat
        w.output[0] = inner
        st.set_attr("axis", 1)
        st.add_node("Reshape", [inner, shape], "unflatten", after=True, output=y)
        st.note(f"coerced axis={axis} kept exact with Flatten + Reshape")
        return
    axis = norm_axis(st.attr("axis", -1), r)
    if axis == r - 1 or _trailing_ones(st.shape(x), axis):
        st.set_attr("axis", axis)
        st.note(f"axis={axis}: the single-axis and coerced 2-D forms agree here")
        return
    perm = [i for i in range(r) if i != axis] + [axis]
    inv = [perm.index(i) for i in range(r)]
    xt = st.add_node("Transpose", [x], "to_last", perm=perm)
    inner = st.fresh_value("last", like=x)
    w = st.edit()
    w.input[0] = xt
    w.output[0] = inner
    st.set_attr("axis", r - 1)
    st.add_node("Transpose", [inner, ], "from_last", after=True, output=y, perm=inv)
    st.note(f"axis={axis} moved last with Transpose for the coerced 2-D form")

