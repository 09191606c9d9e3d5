"""Negative axes and indices **11**: many ops accept them only from opset 11.

Going down they are normalized with the known rank (or dimension), else refused: ArgMax,
ArgMin, Compress, Concat, Flatten, Gather (also negative indices), Hardmax, LogSoftmax,
Softmax, Split, Squeeze, Unsqueeze, TopK, OneHot (which from 11 counts negative indices from
the back), the Reduce ops, Slice and Scan. Squeeze's and Unsqueeze's axes are written sorted
on the way (a set either way; onnx's shape inference of Squeeze-1 reads them in order).
"""

from __future__ import annotations

import numpy as np

from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step, norm_axis, np_dtype
from opshift.opsets import normalize_domain

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
    if st.op == "Scan":  # each axis counts in its own scan input's or scan output's rank
        states = len(st.w.input) - st.attr("num_scan_inputs")
        for name, values in (("scan_input_axes", st.w.input), ("scan_output_axes", st.w.output)):
            axes = st.attr(name, [])
            if any(v < 0 for v in axes):
                new = [v if v >= 0 else v + st.need_rank(
                    values[states + k], f"negative {name} exist only from Scan-11")
                    for k, v in enumerate(axes)]
                st.set_attr(name, new)
                st.note(f"{name}={axes} normalized to {new}")
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
        if st.op in ("Squeeze", "Unsqueeze") and vals != sorted(vals):
            st.set_attr(name, sorted(vals))
            st.note(f"{name}={value} written sorted",
                    "onnx's shape inference of Squeeze-1 reads them in order")
        return
    ref = st.input(0) if which == "in" else st.w.output[0]
    r = st.rank(ref)
    if r is None and st.op == "OneHot":
        ri = st.rank(st.input(0))
        r = None if ri is None else ri + 1
    if r is None:
        raise Refuse(f"negative {name}={value} needs the rank of {ref!r}, which is unknown")
    new = [v + r if v < 0 else v for v in vals]
    if st.op in ("Squeeze", "Unsqueeze"):
        new.sort()  # (a set of axes: onnx's inference of Squeeze-1 reads them in order)
    st.set_attr(name, new if isinstance(value, list) else new[0])
    st.note(f"{name}={value} normalized to {new if isinstance(value, list) else new[0]}")


@at(11, "Gather")
def gather_negative_indices(st: Step) -> None:
    """Gather-11 counts negative indices from the back. Constant ones are normalized (from 7,
    into a dimension of unknown size, that size read at run time is added to them); from
    opset 7 computed ones are read through ``Where(indices < 0, indices + n, indices)``
    (n: the gathered dimension, from the data's shape when not known; embedding lookups of
    token ids, items of a loop's sequence; at 7 and 8 :meth:`~..step.Step.where_less`'s
    arithmetic form), but for those an op computes that are never negative (an ArgMax, a
    Shape, TopK's indices)."""
    if st.up:
        return
    idx_name = st.input(1)
    idx = st.const(idx_name)
    if (idx >= 0).all() if idx is not None else is_position(st, idx_name):
        return
    data = st.input(0)
    s = st.shape(data)
    axis = st.attr("axis", 0)
    dim = None if s is None else s[norm_axis(axis, len(s))]
    if idx is not None and isinstance(dim, int):
        new = st.add_const("indices", np.where(idx < 0, idx + dim, idx).astype(idx.dtype))
        st.set_inputs([data, new])
        st.note("negative indices normalized")
        return
    t = st.elem_type(idx_name)
    if st.target < 7 or t is None:
        what = "constant, of a dimension of unknown size" if idx is not None else "computed"
        raise Refuse(f"Gather below opset 11 needs non-negative indices; the indices are {what}"
                     + (" (below opset 7 Add and Mul broadcast by attribute)"
                        if t is not None else " and of unknown type"))
    dtype = np_dtype(t)
    if s is None and axis < 0:
        raise Refuse(f"axis={axis} needs the rank of {data!r}, which is unknown")
    size = st.axis_size(data, norm_axis(axis, len(s)) if s is not None else axis, t, "size")
    if idx is not None:  # constant, the dimension's size known at run time only
        negative = idx < 0
        shift = size if negative.all() else st.add_node(
            "Mul", [st.add_const("negative", negative.astype(dtype)), size], "shift")
        st.set_inputs([data, st.add_node("Add", [idx_name, shift], "indices")])
        st.note("negative indices counted from the size read at run time",
                "Gather counts negative indices from the back from opset 11 only")
        return
    wrapped = st.add_node("Add", [idx_name, size], "from_the_back")
    read = st.where_less(idx_name, st.add_const("zero", np.zeros((), dtype)), wrapped, "indices")
    st.set_inputs([st.input(0), read])
    st.note(f"computed indices read as Where(indices < 0, indices + {dim or 'n'}, indices)",
            "Gather counts negative indices from the back from opset 11 only")


@at(11, "OneHot")
def onehot_negative_indices(st: Step) -> None:
    idx = st.const(st.input(0))
    if idx is None or (idx < 0).any():
        raise Refuse("OneHot-11 counts negative indices from the back, OneHot-9 maps them "
                     "to off_value; the indices are not constant and non-negative")


#: op -> its output that holds positions or sizes
_POSITIONS = {"ArgMax": 0, "ArgMin": 0, "Shape": 0, "Size": 0, "NonZero": 0, "TopK": 1}


def is_position(st: Step, name: str) -> bool:
    """Whether ``name`` is an output of a default-domain op that computes positions or
    sizes (ArgMax, ArgMin, Shape, Size, NonZero, TopK's indices): never negative, and
    below 2**53 (exact in a double)."""
    found = st.facts.producer(name, st.scope.root.function)
    if found is None or normalize_domain(found[0].domain):
        return False
    n = found[0]
    k = _POSITIONS.get(n.op_type)
    return k is not None and k < len(n.output) and n.output[k] == name
