"""Pad (constant and edge modes) below 11 with pads computed at run time, from opset 9.

Pad-2 takes its pads as an attribute. A computed ``pads`` is applied one axis at a time as
Pad-11 states it: a negative amount removes that many values (a Gather of the positions
kept, :meth:`~..step.Step.positions`), a positive one adds that many values, concatenated
before or after: ``constant_value`` (a ConstantOfShape of X's shape with that axis's size
replaced), or in edge mode the first or last value (a Gather of that position repeated). A
data movement: exact, for every type (Pad-2 takes floats only). Reflect mode (whose pads of
the axis's size or more runtimes take differently), a computed ``constant_value``, an unknown
rank or type, and targets below 9 (no ConstantOfShape, NonZero or Where) stay refused; pads
computed from constants are left to the fold (:mod:`..fold_first`).
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ..fold_first import foldable
from ..step import Step, np_dtype


def pad_at_run_time(st: Step) -> bool:
    """Write the node (pads computed, going below 11) as crops and fills; False when this
    form does not apply and the node's pads must be a constant."""
    pads, x = st.input(1), st.input(0)
    mode = st.attr("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if st.target < 9 or mode not in ("constant", "edge") \
            or foldable(st.facts, st.scope, pads):
        return False
    if mode == "constant" and st.input(2) and st.const(st.input(2)) is None:
        return False
    rank, t = st.rank(x), st.elem_type(x)
    if not rank or not t:  # (unknown, or a scalar: nothing to pad)
        return False
    value = st.const(st.input(2)) if st.input(2) else None
    fill = numpy_helper.from_array(np.array([0 if value is None else value.reshape(-1)[0]],
                                            np_dtype(t)))
    zero = st.add_const("zero", np.array(0, np.int64))

    def pad(i: int) -> str:
        return st.element(pads, i, f"pads_{i}")

    def at_least_0(v: str, what: str) -> str:
        return st.where_less(v, zero, zero, what)

    for a in range(rank):
        begin, end = pad(a), pad(a + rank)
        size = st.size_at_run_time(x, a, f"axis{a}_size")
        # the values kept: from max(-begin, 0) to size - max(-end, 0)
        first = at_least_0(st.add_node("Neg", [begin], f"axis{a}_cut_begin"), f"axis{a}_first")
        stop = st.add_node("Sub", [size, at_least_0(st.add_node("Neg", [end], f"axis{a}_cut"),
                                                    f"axis{a}_cut_end")], f"axis{a}_stop")
        count = at_least_0(st.add_node("Sub", [stop, first], f"axis{a}_span"), f"axis{a}_kept")
        kept = st.add_node("Add", [first, st.positions(count, f"axis{a}_i")],
                           f"axis{a}_positions")
        x = st.add_node("Gather", [x, kept], f"axis{a}_cropped", axis=a)
        parts = []
        for amount, what in ((begin, "before"), (end, "after")):
            n = st.add_node("Reshape", [at_least_0(amount, f"axis{a}_{what}"), st.add_const(
                "one", np.array([1], np.int64))], f"axis{a}_{what}_1d")
            if mode == "edge":  # the first or last value, repeated
                at = st.add_node("ConstantOfShape", [n], f"axis{a}_{what}_zeros",
                                 value=numpy_helper.from_array(np.array([0], np.int64)))
                if what == "after":
                    at = st.add_node("Add", [at, st.add_node("Sub", [
                        st.size_at_run_time(x, a, f"axis{a}_kept_size"),
                        st.add_const("one", np.array(1, np.int64))], f"axis{a}_last")],
                        f"axis{a}_lasts")
                parts.append(st.add_node("Gather", [x, at], f"axis{a}_{what}_edge", axis=a))
                continue
            dims = st.add_node("Shape", [x], f"axis{a}_{what}_shape")
            pieces = [st.add_node("Gather", [dims, st.add_const("dims", np.array(
                list(rng), np.int64))], f"axis{a}_{what}_{k}", axis=0)
                for k, rng in (("lead", range(a)), ("rest", range(a + 1, rank))) if rng]
            shape = st.add_node("Concat", pieces[:1] + [n] + pieces[1:] if a else [n] + pieces,
                                f"axis{a}_{what}_fill_shape", axis=0)
            parts.append(st.add_node("ConstantOfShape", [shape], f"axis{a}_{what}_fill",
                                     value=fill))
        last = a == rank - 1
        x = st.add_node("Concat", [parts[0], x, parts[1]], f"axis{a}_padded", axis=a,
                        output=st.w.output[0] if last else None)
    st.set_inputs([st.input(0)])  # (a constant_value only this node read goes with it)
    st.remove("computed pads applied one axis at a time: a Gather of the values kept, then "
              + ("Gathers of the edge values" if mode == "edge" else "ConstantOfShape fills")
              + " concatenated before and after",
              "Pad takes computed pads only from opset 11")
    return True
