"""Pooling: LpPool/GlobalLpPool **2** (p float vs int), AveragePool **7**
(count_include_pad with padding), dilations of all ones (the default) at MaxPool **10**,
AveragePool **19**, LpPool **18**, and MaxPool/AveragePool/LpPool **22** (with ceil_mode a
window starting in the padding is dropped only from 22).
"""

from __future__ import annotations

from ..registry import at
from ..step import Refuse, Step, text


@at(2, "LpPool", "GlobalLpPool")
def lp_p(st: Step) -> None:
    p = st.attr("p")
    if p is None:
        return
    if st.up:
        if float(p) != int(p):
            raise Refuse(f"p={p} is not an integer")
        st.set_attr("p", int(p))
    else:
        st.set_attr("p", float(p))


@at(7, "AveragePool")
def avgpool_count_include_pad(st: Step) -> None:
    if st.up or not st.attr("count_include_pad", 0):
        return
    pads = st.attr("pads", [])
    auto_pad = st.attr("auto_pad", b"NOTSET")
    if any(pads) or auto_pad not in (b"NOTSET", b"VALID", "NOTSET", "VALID"):
        raise Refuse("count_include_pad=1 with padding exists only from AveragePool-7")
    st.del_attr("count_include_pad")
    st.note("dropped count_include_pad=1: there is no padding")


@at(10, "MaxPool")
@at(19, "AveragePool")
@at(18, "LpPool")
def pool_dilations(st: Step) -> None:
    if st.up or not st.has_attr("dilations"):
        return
    d = st.attr("dilations")
    if any(v != 1 for v in d):
        raise Refuse(f"dilations={d} exist only from {st.op}-{st.hi}")
    st.del_attr("dilations")
    st.note("dropped dilations of all ones (the default)")


@at(22, "MaxPool", "AveragePool", "LpPool")
def pool_ceil_windows(st: Step) -> None:
    # From 22, with ceil_mode a last window that would start in the right padding is dropped;
    # before 22 the output size formula kept it. Exact when no window starts there.
    if not st.attr("ceil_mode", 0):
        return
    if text(st.attr("auto_pad", b"NOTSET")) != "NOTSET":
        raise Refuse("ceil_mode=1 with auto_pad")
    shape = st.shape(st.input(0))
    k = st.attr("kernel_shape")
    if shape is None or k is None or not all(isinstance(d, int) for d in shape[2:]):
        raise Refuse("ceil_mode=1 needs static spatial dims to tell whether a window starts "
                     "in the padding (dropped only from 22)")
    n = len(k)
    strides = st.attr("strides", [1] * n)
    dil = st.attr("dilations", [1] * n)
    pads = st.attr("pads", [0] * (2 * n))
    for i, size in enumerate(shape[2:]):
        span = dil[i] * (k[i] - 1) + 1
        out = -(-(size + pads[i] + pads[i + n] - span) // strides[i]) + 1
        if (out - 1) * strides[i] >= size + pads[i]:
            raise Refuse(f"with ceil_mode=1 the last window along spatial axis {i} starts in "
                         "the padding: kept before 22, dropped from 22")

