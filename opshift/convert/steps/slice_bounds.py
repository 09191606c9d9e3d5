"""Slice below 10: Slice-1 takes constant starts, ends and axes, and steps of 1 only.

An axis with a step other than 1, or whose start or end a node computes, becomes a Gather of
the positions Slice-10 picks on it. With its bounds constant and its size known they are a
constant; otherwise (from opset 7) they are computed as Slice-10 states them: a negative
bound plus the axis's size, both clamped to [0, size] (for a negative step the start to
[0, size - 1], the end to [-1, size - 1]), count ``max(ceil((end - start) / step), 0)``,
positions ``start + step * i`` for i in 0..count - 1 (:meth:`~..step.Step.positions`). All in
int64 with :meth:`~..step.Step.where_less` for the clamps (integer Max and Min exist only
from 12): exact, and the positions always in range, as Gather-1 needs. The axes of step 1
and constant bounds stay in a Slice-1. Computed axes or steps, steps of 2**31 or more, and
computed bounds below opset 7 are refused; bounds computed from constants alone are left to
the fold (:mod:`..fold_first`), which keeps the Slice.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from opshift.convert.rescue.fold_first import would_fold
from opshift.convert.step import Refuse, Step
from opshift.graph.layout_rules import slice_range

_INT64 = TensorProto.INT64


def slice_below_10(st: Step) -> bool:
    """Write the node's axes that Slice-1 cannot take as Gathers; True when the node is
    removed (every axis a Gather), else its inputs are what Slice-1's attributes take."""
    steps = st.need_const(4, "steps") if st.input(4) else None
    bounds = [st.const(st.input(i)) for i in (1, 2)]
    computed = [i for i, v in zip((1, 2), bounds) if v is None]
    if not computed and (steps is None or (steps == 1).all()):
        if steps is not None:
            st.set_inputs(list(st.w.input)[:4])
            st.note("steps of 1 dropped (Slice-1 steps by 1)")
        return False
    if computed and (st.target < 7 or any(would_fold(st.facts, st.scope, st.input(i))
                                           for i in computed)):
        for i in computed:  # refused: folded first where it can be
            st.need_const(i, ("starts", "ends")[i - 1])
    n = _count(st, bounds)
    axes = (st.need_const(3, "axes").reshape(-1).tolist() if st.input(3)
            else list(range(n)))
    steps_l = [1] * n if steps is None else steps.reshape(-1).tolist()
    if not len(axes) == n == len(steps_l):
        raise Refuse("starts, ends, axes and steps differ in length")
    if any(s == 0 or abs(s) >= 2**31 for s in steps_l):
        raise Refuse(f"steps {steps_l}: 0 is not a step, and steps of 2**31 or more are "
                     "not written below Slice-10")
    x, shape = st.input(0), st.shape(st.input(0))
    rank = len(shape) if shape is not None else None
    if any(a < 0 for a in axes):
        rank = st.need_rank(x, "negative axes")
    starts, ends = (_as_int64(st, st.input(i), v) for i, v in zip((1, 2), bounds))
    kept, gathers = [], []
    for k, (a, step) in enumerate(zip(axes, steps_l)):
        a = a % rank if a < 0 else a
        if step == 1 and not computed:
            kept.append((a, int(bounds[0].reshape(-1)[k]), int(bounds[1].reshape(-1)[k])))
        else:
            gathers.append((k, a, step))
    for j, (k, a, step) in enumerate(gathers):
        last = j == len(gathers) - 1 and not kept
        dim = shape[a] if shape is not None and a < len(shape) else None
        at = _positions(st, x, k, a, step, starts, ends, dim)
        x = st.add_node("Gather", [x, at], f"axis{a}_slice", axis=a,
                        output=st.w.output[0] if last else None)
    what = "axes with computed bounds or steps other than 1 written as Gather of the " \
           "positions they pick"
    why = "Slice takes constant bounds and steps only from opset 10"
    if not kept:
        st.remove(what, why)
        return True
    ka, kb, ke = (np.array(v, np.int64) for v in zip(*kept))
    st.set_inputs([x, st.add_const("starts", kb), st.add_const("ends", ke),
                   st.add_const("axes", ka)])
    st.note(what, why)
    return False


def _count(st: Step, bounds: list) -> int:
    """How many axes the node slices: the length of its constant starts or ends, else of
    their declared shape."""
    for v in bounds:
        if v is not None:
            return v.size
    for i in (1, 2):
        s = st.shape(st.input(i))
        if s is not None and len(s) == 1 and isinstance(s[0], int):
            return s[0]
    raise Refuse("starts and ends are computed and their length is unknown")


def _as_int64(st: Step, name: str, value: np.ndarray | None) -> np.ndarray | str:
    """Constant bounds as an array; computed ones as an int64 value (Slice takes int32)."""
    if value is not None:
        return value.reshape(-1).astype(np.int64)
    if st.elem_type(name) == _INT64:
        return name
    return st.add_cast(name, _INT64, "bounds_int64")


def _positions(st: Step, x: str, k: int, a: int, step: int, starts, ends, dim) -> str:
    """The positions Slice-10 picks on axis ``a`` (the ``k``-th it slices) of ``x``: a
    constant where the bounds are and the size is known, else computed at run time."""
    if not isinstance(starts, str) and not isinstance(ends, str) and isinstance(dim, int):
        return st.add_const(f"axis{a}_positions",
                            np.array(slice_range(dim, int(starts[k]), int(ends[k]), step),
                                     np.int64))
    if st.target < 7:
        raise Refuse(f"step {step} on axis {a}, whose size is unknown: a Gather of the "
                     "positions it picks is written from opset 7 (numpy broadcasting)")

    def scalar(v: int) -> str:
        return st.add_const("int", np.array(v, np.int64))

    def bound(b, what: str) -> str:
        if not isinstance(b, str):
            return scalar(int(b[k]))
        return st.element(b, k, f"axis{a}_{what}")

    def clamp(v: str, lo: str, hi: str, what: str) -> str:
        v = st.where_less(v, lo, lo, f"{what}_low")
        return st.where_less(hi, v, hi, what, otherwise=v)

    size = scalar(dim) if isinstance(dim, int) else st.size_at_run_time(x, a, f"axis{a}_size")
    zero = scalar(0)
    b, e = (st.where_less(v, zero, st.add_node("Add", [v, size], f"axis{a}_{w}_wrapped"),
                          f"axis{a}_{w}_from_end")
            for v, w in ((bound(starts, "start"), "start"), (bound(ends, "end"), "end")))
    if step > 0:
        b, e = clamp(b, zero, size, f"axis{a}_start"), clamp(e, zero, size, f"axis{a}_end")
        span = st.add_node("Sub", [e, b], f"axis{a}_span")
    else:
        last = st.add_node("Sub", [size, scalar(1)], f"axis{a}_last")
        b = clamp(b, zero, last, f"axis{a}_start")
        e = clamp(e, scalar(-1), last, f"axis{a}_end")
        span = st.add_node("Sub", [b, e], f"axis{a}_span")
    if abs(step) != 1:  # ceil(span / |step|): span + |step| - 1 stays far from int64's end
        span = st.add_node("Div", [st.add_node("Add", [span, scalar(abs(step) - 1)],
                                               f"axis{a}_span_up"), scalar(abs(step))],
                           f"axis{a}_steps")
    count = st.where_less(span, zero, zero, f"axis{a}_count")
    i = st.positions(count, f"axis{a}_i")
    if step != 1:
        i = st.add_node("Mul", [i, scalar(step)], f"axis{a}_offsets")
    return st.add_node("Add", [b, i], f"axis{a}_positions")
