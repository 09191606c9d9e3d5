"""ReverseSequence (from 10) below 10, from opset 7: a Gather of the positions it reads.

Each batch entry ``b`` reads time step ``L_b - 1 - t`` where ``t < L_b``, else ``t``. X is
reshaped to ``[T * B, rest]``, so that every (time, batch) pair is one row, and one Gather of
the row numbers (``t * B + b`` time-major, ``b * T + t`` batch-major) picks them; a Reshape to
X's shape ends it. The positions and picks are :meth:`~..step.Step.positions` and
:meth:`~..step.Step.where_less` (from 7). Data movement only, so exact for every type. Lengths
are read as the reference reads them (a negative one counts from T, a length outside 0..T is
clamped to it); runtimes refuse lengths outside 0..T.
"""

from __future__ import annotations

import numpy as np

from opshift.convert.registry import replaces
from opshift.convert.step import Refuse, Step


@replaces("ReverseSequence")
def reverse_sequence_below_10(st: Step) -> None:
    if st.target < 7:
        raise Refuse("below opset 7 the arithmetic of its positions broadcasts by attribute")
    x, lens, y = st.input(0), st.input(1), st.w.output[0]
    batch_axis, time_axis = st.attr("batch_axis", 1), st.attr("time_axis", 0)
    if sorted((batch_axis, time_axis)) != [0, 1]:
        raise Refuse(f"batch_axis={batch_axis} and time_axis={time_axis} (one must be 0, the "
                     "other 1)")
    shape = st.add_node("Shape", [x], "shape")
    steps = st.element(shape, time_axis, "steps")
    batch = st.element(shape, batch_axis, "batch")
    zero = st.add_const("zero", np.array(0, np.int64))
    one = st.add_const("one", np.array(1, np.int64))
    # the reference's reading of a length: negative counts from T, then clamped to 0..T
    n = st.where_less(lens, zero, st.add_node("Add", [lens, steps], "from_the_back"),
                      "counted")
    n = st.where_less(n, zero, zero, "at_least_0")
    n = st.where_less(steps, n, steps, "lengths", otherwise=n)
    time_major = time_axis == 0
    t = st.add_node("Unsqueeze", [st.positions(steps, "t")], "t_ranked",
                    axes=[1 if time_major else 0])
    b = st.add_node("Unsqueeze", [st.positions(batch, "b")], "b_ranked",
                    axes=[0 if time_major else 1])
    n = st.add_node("Unsqueeze", [n], "lengths_ranked", axes=[0 if time_major else 1])
    reversed_t = st.add_node("Sub", [st.add_node("Sub", [n, one], "last"), t], "reversed")
    source = st.where_less(t, n, reversed_t, "source_step", otherwise=t)
    rows = (st.add_node("Add", [st.add_node("Mul", [source, batch], "time_rows"), b], "rows")
            if time_major else
            st.add_node("Add", [st.add_node("Mul", [b, steps], "batch_rows"), source], "rows"))
    pairs = st.add_node("Reshape", [st.add_node("Mul", [steps, batch], "pairs"), st.add_const(
        "one_1d", np.array([1], np.int64))], "pairs_1d")
    flat = st.add_node("Reshape", [x, st.add_node("Concat", [pairs, st.add_const(
        "rest", np.array([-1], np.int64))], "rows_shape", axis=0)], "rows_of_x")
    picked = st.add_node("Gather", [flat, rows], "picked", axis=0)
    st.add_node("Reshape", [picked, shape], "reversed_x", output=y)
    st.remove("ReverseSequence written as a Gather of the rows it reads",
              "ReverseSequence exists from opset 10")
