"""Negative axes and indices **11**: many ops accept them only from opset 11.

Going down they are normalized with the known rank (or dimension), else refused: ArgMax,
ArgMin, Compress, Concat, Flatten, Gather (also negative indices), Hardmax, LogSoftmax,
Softmax, Split, Squeeze, Unsqueeze, TopK, OneHot (which from 11 counts negative indices from
the back), the Reduce ops, Slice and Scan.
"""

from __future__ import annotations

import numpy as np

from ..registry import at
from ..step import Refuse, Step, norm_axis

#: op -> (attribute, which value's rank the axes refer to: 'in' input 0, 'out' output 0).
NEG_AXES = {
    "ArgMax": ("axis", "in"), "ArgMin": ("axis", "in"), "Compress": ("axis", "in"),
    "Concat": ("axis", "in"), "Flatten": ("axis", "in"), "Gather": ("axis", "in"),
    "Hardmax": ("axis", "in"), "LogSoftmax": ("axis", "in"), "Softmax": ("axis", "in"),
    "Split": ("axis", "in"), "Squeeze": ("axes", "in"), "Unsqueeze": ("axes", "out"),
    "TopK": ("axis", "in"), "OneHot": ("axis", "out"),
    **{op: ("axes", "in") for op in (
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
        "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare")},
}


@at(11, *NEG_AXES, "Slice", "Scan")
def negative_axes(st: Step) -> None:
    if st.up:
        return
    if st.op == "Scan":
        for name in ("scan_input_axes", "scan_output_axes"):
            if any(v < 0 for v in st.attr(name, [])):
                raise Refuse(f"negative {name} exist only from Scan-11")
        return
    if st.op == "Slice":
        if not st.input(3):
            return
        axes = st.need_const(3, "axes")
        if (axes >= 0).all():
            return
        r = st.need_rank(st.input(0), "negative axes before opset 11")
        new = st.add_const("axes", np.where(axes < 0, axes + r, axes).astype(axes.dtype))
        st.set_inputs([*st.w.input[:3], new, *st.w.input[4:]])
        st.note("negative axes normalized")
        return
    name, which = NEG_AXES[st.op]
    value = st.attr(name)
    if value is None:
        return
    vals = value if isinstance(value, list) else [value]
    if all(v >= 0 for v in vals):
        return
    ref = st.input(0) if which == "in" else st.w.output[0]
    r = st.rank(ref)
    if r is None and st.op == "OneHot":
        ri = st.rank(st.input(0))
        r = None if ri is None else ri + 1
    if r is None:
        raise Refuse(f"negative {name}={value} needs the rank of {ref!r}, which is unknown")
    new = [v + r if v < 0 else v for v in vals]
    st.set_attr(name, new if isinstance(value, list) else new[0])
    st.note(f"{name}={value} normalized to {new if isinstance(value, list) else new[0]}")


@at(11, "Gather")
def gather_negative_indices(st: Step) -> None:
    if st.up:
        return
    idx = st.const(st.input(1))
    if idx is None:
        raise Refuse("Gather below opset 11 needs non-negative indices; the indices are "
                     "not constant")
    if (idx >= 0).all():
        return
    s = st.shape(st.input(0))
    axis = st.attr("axis", 0)
    if s is None or s[norm_axis(axis, len(s))] is None or isinstance(
            s[norm_axis(axis, len(s))], str):
        raise Refuse("negative indices need the size of the gathered dimension")
    dim = s[norm_axis(axis, len(s))]
    new = st.add_const("indices", np.where(idx < 0, idx + dim, idx).astype(idx.dtype))
    st.set_inputs([st.input(0), new])
    st.note("negative indices normalized")


@at(11, "OneHot")
def onehot_negative_indices(st: Step) -> None:
    idx = st.const(st.input(0))
    if idx is None or (idx < 0).any():
        raise Refuse("OneHot-11 counts negative indices from the back, OneHot-9 maps them "
                     "to off_value; the indices are not constant and non-negative")

