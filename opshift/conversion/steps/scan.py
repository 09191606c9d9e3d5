"""Scan **9**: Scan-8 runs its body once per item of a batch (axis 0 of every state and scan
input, sequences along axis 1, ``sequence_lens`` optional first), Scan-9 has no batch axis and
scans any axis either way. The body sees the same values in both (one item, one step), so
going down every input gains a batch axis of 1 (Unsqueeze) and every output loses it
(Squeeze); going up a Scan-8 whose batch is known to be 1 and that sets no
``sequence_lens`` does the reverse. What Scan-8 cannot say (another scan axis, outputs
gathered in reverse) is refused.
"""

from __future__ import annotations

from ...graph.edit import axes_nodes
from ..registry import at
from ..step import Refuse, Step


@at(9, "Scan")
def scan_batch_axis(st: Step) -> None:
    if st.up:
        _up(st)
    else:
        _down(st)


def _down(st: Step) -> None:
    for name in ("scan_input_axes", "scan_output_axes", "scan_output_directions"):
        if any(st.attr(name, [])):
            raise Refuse(f"{name}={st.attr(name)}: Scan-8 scans axis 1 of its batched "
                         "inputs and gathers its outputs in order only")
    directions = st.attr("scan_input_directions")
    inputs = list(st.w.input)
    for name in ("scan_input_axes", "scan_output_axes", "scan_output_directions",
                 "scan_input_directions"):
        if st.has_attr(name):
            st.del_attr(name)
    if directions:
        st.set_attr("directions", directions)
    _around(st, inputs, "Unsqueeze", "Squeeze", "batched", [""])
    st.note("a batch axis of 1 added to every input and dropped from every output")


def _up(st: Step) -> None:
    if st.input(0):
        raise Refuse("sequence_lens is set: Scan-9 scans every sequence whole")
    inputs = list(st.w.input[1:])
    for x in inputs:
        shape = st.shape(x)
        if not shape or shape[0] != 1:
            raise Refuse(f"the batch of {x!r} (shape {shape}) is not known to be 1: Scan-9 "
                         "has no batch axis")
    directions = st.attr("directions")
    if st.has_attr("directions"):
        st.del_attr("directions")
    if directions:
        st.set_attr("scan_input_directions", directions)
    _around(st, inputs, "Squeeze", "Unsqueeze", "item", [])
    st.note("the batch axis of 1 dropped from every input and added back to every output")


def _around(st: Step, inputs: list[str], into: str, out_of: str, what: str,
            first: list[str]) -> None:
    """The node reads ``inputs`` through ``into`` of axis 0 (after ``first``) and its
    outputs come back through ``out_of`` of axis 0."""
    edits = st.ctx.edits
    w = st.edit()
    read = []
    for x in inputs:
        y = st.fresh_value(f"{x}_{what}", like=x)
        st.state.pre.extend(axes_nodes(into, x, y, [0], st.target, edits.names,
                                       edits.new_node))
        read.append(y)
    del w.input[:]
    w.input.extend(first + read)
    for k, o in enumerate(list(w.output)):
        if o:
            y = st.fresh_value(f"{o}_{what}", like=o)
            w.output[k] = y
            st.state.post.extend(axes_nodes(out_of, y, o, [0], st.target, edits.names,
                                            edits.new_node))
