"""Scan **9**: Scan-8 runs its body once per item of a batch (axis 0 of every state and scan
input, sequences along axis 1, ``sequence_lens`` optional first), Scan-9 has no batch axis and
scans any axis either way. The body sees the same values in both (one item, one step), so
going down every input gains a batch axis of 1 (Unsqueeze) and every output loses it
(Squeeze); a scan input read along another axis is first transposed to put that axis first,
and a scan output gathered along another axis is transposed there from the first (a copy:
exact; the ranks must be known). Going up, a Scan-8 whose batch is known to be 1 and that
sets no ``sequence_lens`` does the reverse. Outputs gathered in reverse (which Scan-8 cannot
say) are refused.
"""

from __future__ import annotations

from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step
from opshift.graph.edit import axes_nodes


@at(9, "Scan")
def scan_batch_axis(st: Step) -> None:
    if st.up:
        _up(st)
    else:
        _down(st)


def _down(st: Step) -> None:
    if any(st.attr("scan_output_directions", [])):
        raise Refuse(f"scan_output_directions={st.attr('scan_output_directions')}: Scan-8 "
                     "gathers its outputs in order only")
    inputs, outputs = list(st.w.input), list(st.w.output)
    scans = st.attr("num_scan_inputs")
    states = len(inputs) - scans
    # (position, axis) of every scan input read and scan output gathered along another axis
    ins = [(states + k, _axis(st, inputs[states + k], a))
           for k, a in enumerate(st.attr("scan_input_axes") or []) if a]
    outs = [(states + k, _axis(st, outputs[states + k], b))
            for k, b in enumerate(st.attr("scan_output_axes") or [])
            if b and states + k < len(outputs) and outputs[states + k]]
    ranks = {v: st.need_rank(v, "its scan axis is not the first")
             for v in [inputs[i] for i, _ in ins] + [outputs[k] for k, _ in outs]}
    directions = st.attr("scan_input_directions")
    for name in ("scan_input_axes", "scan_output_axes", "scan_output_directions",
                 "scan_input_directions"):
        if st.has_attr(name):
            st.del_attr(name)
    if directions:
        st.set_attr("directions", directions)
    for i, a in ins:
        x = inputs[i]
        inputs[i] = st.add_node("Transpose", [x], f"{x}_scan_axis_first",
                                perm=[a, *(j for j in range(ranks[x]) if j != a)])
    moved = []
    for k, b in outs:
        o = outputs[k]
        moved.append((st.fresh_value(f"{o}_scan_axis_first", like=o), o, b))
        st.edit().output[k] = moved[-1][0]
    _around(st, inputs, "Unsqueeze", "Squeeze", "batched", [""])
    for first, o, b in moved:
        st.add_node("Transpose", [first], f"{o}_scan_axis", after=True, output=o,
                    perm=[*range(1, b + 1), 0, *range(b + 1, ranks[o])])
    st.note("a batch axis of 1 added to every input and dropped from every output"
            + (", scan axes other than the first reached by Transposes" if ins or outs
               else ""))


def _axis(st: Step, v: str, a: int) -> int:
    """Axis ``a`` of ``v`` counted from the front (its rank must be known when negative)."""
    return a if a >= 0 else a + st.need_rank(v, f"its scan axis {a} counts from the back")


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
