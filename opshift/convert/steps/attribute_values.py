"""Attribute values whose spelling or default changed: GRU **3** (default direction spelled
'foward' at 1), Concat **4** (axis defaulted to 1 before 4, required from 4), Cast **6** (``to``
a type name before 6), Shape **15** (start/end written as a Slice of the whole shape below),
ArgMax/ArgMin **12** (select_last_index=1 below: the first index of the input reversed; with
NaN in a row the answer is the spec's only where NaN's order is, see
:func:`arg_select_last_index`),
MeanVarianceNormalization **13** (default axes written out: MVN-13's function body reads
``@axes``, which onnx's checker cannot expand when it is unset).
"""

from __future__ import annotations

import numpy as np
import onnx

from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step


@at(3, "GRU")
def gru_direction(st: Step) -> None:
    if st.up and st.attr("direction", b"foward") in (b"foward", "foward"):
        st.set_attr("direction", "forward")


@at(4, "Concat")
def concat_axis(st: Step) -> None:
    if st.up and not st.has_attr("axis"):
        st.set_attr("axis", 1)
        st.note("axis=1 (Concat-1's documented default) written; required from 4")


@at(13, "MeanVarianceNormalization")
def mvn_axes(st: Step) -> None:
    if st.up and not st.has_attr("axes"):
        st.set_attr("axes", [0, 2, 3])
        st.note("axes=[0, 2, 3] (the default) written",
                "MVN-13's function body reads @axes, which onnx cannot expand when unset")


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


@at(12, "ArgMax", "ArgMin")
def arg_select_last_index(st: Step) -> None:
    """The last index of the extreme value is n - 1 - the first index in the input reversed
    along the axis (a Slice of step -1 from opset 10, a Gather of the positions backwards
    below, where the axis's size is known), ties alike: positions map one to one.

    NaN's order is unspecified in ONNX. Where a runtime takes NaN as the extreme (numpy's
    argmax: opshift's evaluator, onnx.reference; OpenVINO per issue 38), the reversed form
    picks the same NaN. onnxruntime's answer depends on where its scan starts (a NaN first
    wins, later ones are skipped), and reversing moves the start: rows holding NaN may differ
    there. No form keeps every runtime's answer (any other is built of ops whose NaN rules
    are each runtime's own, and the runtimes already disagree on the original), and refusing
    every input that may hold NaN would refuse real models: the form is kept and its note
    says so."""
    if st.up or not st.attr("select_last_index", 0):
        return
    if st.target < 7:
        raise Refuse("select_last_index=1 is written as n - 1 - an index, which needs numpy "
                     "broadcasting (opset 7)")
    x = st.input(0)
    rank = st.need_rank(x, "select_last_index=1 reverses one axis")
    axis = st.attr("axis", 0)
    axis = axis + rank if axis < 0 else axis
    dim = (st.shape(x) or [None] * rank)[axis]
    if st.target < 10 and not isinstance(dim, int):
        raise Refuse("select_last_index=1 needs the input reversed: below opset 10 (no Slice "
                     "of step -1) by a Gather, which needs the axis's size (unknown)")
    st.del_attr("select_last_index")
    st.set_attr("axis", axis)
    if st.target < 10:  # the positions read backwards
        back = st.add_const("reversed_positions", np.arange(dim - 1, -1, -1, dtype=np.int64))
        reversed_x = st.add_node("Gather", [x, back], "reversed", axis=axis)
    else:
        const = {k: st.add_const(k, np.array([v], np.int64)) for k, v in (
            ("starts", -1), ("ends", -2**63), ("axes", axis), ("steps", -1))}
        reversed_x = st.add_node("Slice", [x, const["starts"], const["ends"], const["axes"],
                                           const["steps"]], "reversed")
    if isinstance(dim, int):
        last = st.add_const("last", np.array(dim - 1, np.int64))
    else:
        n = st.size_at_run_time(x, axis, "n")
        last = st.add_node("Sub", [n, st.add_const("one", np.array(1, np.int64))], "last")
    y = st.w.output[0]
    first = st.fresh_value("first_index")
    st.facts.extra_types[first] = onnx.TensorProto.INT64
    w = st.edit()
    w.input[0] = reversed_x
    w.output[0] = first
    st.add_node("Sub", [last, first], "last_index", after=True, output=y)
    st.note("select_last_index=1 written as n - 1 - the first index of the input reversed",
            "NaN's order is unspecified in ONNX: in a row holding NaN, runtimes taking NaN "
            "as the extreme (numpy, onnx.reference, opshift) give the original's index; "
            "onnxruntime, whose answer depends on where its scan starts, may not")
