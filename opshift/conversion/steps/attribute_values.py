"""Attribute values whose spelling or default changed: GRU **3** (default direction spelled
'foward' at 1), Concat **4** (axis defaulted to 1 before 4, required from 4), Cast **6** (``to``
a type name before 6), Shape **15** (start/end written as a Slice of the whole shape below).
"""

from __future__ import annotations

import numpy as np
import onnx

from ..registry import at
from ..step import Refuse, Step


@at(3, "GRU")
def gru_direction(st: Step) -> None:
    if st.up and st.attr("direction", b"foward") in (b"foward", "foward"):
        st.set_attr("direction", "forward")


@at(4, "Concat")
def concat_axis(st: Step) -> None:
    if st.up and not st.has_attr("axis"):
        st.set_attr("axis", 1)
        st.note("axis=1 (Concat-1's documented default) written; required from 4")


@at(6, "Cast")
def cast_to(st: Step) -> None:
    to = st.attr("to")
    if st.up and isinstance(to, bytes | str):
        name = to.decode() if isinstance(to, bytes) else to
        try:
            st.set_attr("to", onnx.TensorProto.DataType.Value(name.upper()))
        except ValueError:
            raise Refuse(f"unknown Cast-1 type {name!r}") from None
    elif not st.up and isinstance(to, int):
        st.set_attr("to", onnx.TensorProto.DataType.Name(to))
    st.note("to converted between type name and enum")


@at(15, "Shape")
def shape_start_end(st: Step) -> None:
    if st.up:
        return
    start, end = st.attr("start", 0), st.attr("end")
    if start == 0 and end is None:
        return
    for name in ("start", "end"):
        if st.has_attr(name):
            st.del_attr(name)
    full = st.fresh_value("full")
    y = st.w.output[0]
    st.edit().output[0] = full
    st.facts.extra_types[full] = onnx.TensorProto.INT64
    ends = [2**63 - 1 if end is None else end]
    if st.target >= 10:
        starts_c = st.add_const("starts", np.array([start], np.int64))
        ends_c = st.add_const("ends", np.array(ends, np.int64))
        st.add_node("Slice", [full, starts_c, ends_c], "slice", after=True, output=y)
    else:
        st.add_node("Slice", [full], "slice", after=True, output=y, starts=[start], ends=ends)
    st.note(f"start={start}, end={end} written as a Slice of the whole shape")

