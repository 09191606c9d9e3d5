"""Pad below 11 with pads computed at run time, from opset 7.

Pad-2 takes its pads as an attribute. A computed ``pads`` is applied one axis at a time as
Pad-11 states it: a negative amount removes that many values (a Gather of the positions
kept, :meth:`~..step.Step.positions`), a positive one adds that many values, concatenated
before or after: ``constant_value`` (a Tile of it by X's shape with that axis's size
replaced), or in edge mode the first or last value (a Gather of that position repeated). In
reflect mode one Gather reads every position ``j`` of the padded axis (``-before`` to
``n - 1 + after``) at its reflection, ``m`` or ``2(n - 1) - m`` for ``m = j mod 2(n - 1)``:
numpy's reflection, repeated for pads of the axis's size or more (which runtimes refuse). A
data movement: exact, for every type (Pad-2 takes floats only). A computed
``constant_value``, an unknown rank or type, and targets below 7 (where the integer
arithmetic broadcasts by attribute) stay refused; pads computed from constants are left to the fold
(:mod:`..fold_first`).
"""

from __future__ import annotations

import numpy as np

from opshift.convert.rescue.fold_first import would_fold
from opshift.convert.step import Step, np_dtype


def pad_at_run_time(st: Step) -> bool:
    """Write the node (pads computed, going below 11) as crops and fills; False when this
    form does not apply and the node's pads must be a constant."""
    pads, x = st.input(1), st.input(0)
    mode = st.attr("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if st.target < 7 or mode not in ("constant", "edge", "reflect") \
            or would_fold(st.facts, st.scope, pads):
        return False
    if mode == "constant" and st.input(2) and st.const(st.input(2)) is None:
        return False
    rank, t = st.rank(x), st.elem_type(x)
    if not rank or not t:  # (unknown, or a scalar: nothing to pad)
        return False
    value = st.const(st.input(2)) if st.input(2) else None
    fill = st.add_const("fill", np.full((1,) * rank, 0 if value is None else
                                        value.reshape(-1)[0], np_dtype(t)))
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
        last = a == rank - 1
        if mode == "reflect":
            x = _reflected(st, x, a, at_least_0(begin, f"axis{a}_before"),
                           at_least_0(end, f"axis{a}_after"), st.w.output[0] if last else None)
            continue
        parts = []
        for amount, what in ((begin, "before"), (end, "after")):
            n = st.add_node("Reshape", [at_least_0(amount, f"axis{a}_{what}"), st.add_const(
                "one", np.array([1], np.int64))], f"axis{a}_{what}_1d")
            if mode == "edge":  # the first or last value, repeated
                at = st.add_node("Tile", [st.add_const("zero", np.array([0], np.int64)), n],
                                 f"axis{a}_{what}_zeros")
                if what == "after":
                    at = st.add_node("Add", [at, st.add_node("Sub", [
                        st.size_at_run_time(x, a, f"axis{a}_kept_size"),
                        st.add_const("one", np.array(1, np.int64))], f"axis{a}_last")],
                        f"axis{a}_lasts")
                parts.append(st.add_node("Gather", [x, at], f"axis{a}_{what}_edge", axis=a))
                continue
            dims = st.add_node("Shape", [x], f"axis{a}_{what}_shape")
            pieces = [st.elements(dims, rng, f"axis{a}_{what}_{k}")
                      for k, rng in (("lead", range(a)), ("rest", range(a + 1, rank))) if rng]
            shape = st.add_node("Concat", pieces[:1] + [n] + pieces[1:] if a else [n] + pieces,
                                f"axis{a}_{what}_fill_shape", axis=0)
            parts.append(st.add_node("Tile", [fill, shape], f"axis{a}_{what}_fill"))
        x = st.add_node("Concat", [parts[0], x, parts[1]], f"axis{a}_padded", axis=a,
                        output=st.w.output[0] if last else None)
    st.set_inputs([st.input(0)])  # (a constant_value only this node read goes with it)
    st.remove("computed pads applied one axis at a time: a Gather of the values kept, then "
              + {"edge": "Gathers of the edge values concatenated before and after",
                 "reflect": "a Gather of the reflected positions"}.get(
                  mode, "fills (Tiles of constant_value) concatenated before and after"),
              "Pad takes computed pads only from opset 11")
    return True


def _reflected(st: Step, x: str, a: int, before: str, after: str, out: str | None) -> str:
    """``x`` padded on axis ``a`` by ``before`` and ``after`` (int64 scalars >= 0) values
    reflected off its ends, as numpy reflects (repeatedly, for pads of the axis's size or
    more): one Gather of each position's reflection."""
    def const(what: str, v: int) -> str:
        return st.add_const(what, np.array(v, np.int64))

    n = st.size_at_run_time(x, a, f"axis{a}_n")
    one = const("one", 1)
    # the period 2(n - 1), at least 1 (n = 1: every position reads the one value)
    period = st.add_node("Mul", [const("two", 2), st.add_node("Sub", [n, one], f"axis{a}_n1")],
                         f"axis{a}_period")
    period = st.where_less(period, one, one, f"axis{a}_period_1")
    total = st.add_node("Add", [st.add_node("Add", [before, n], f"axis{a}_n_before"), after],
                        f"axis{a}_total")
    # j + before + k * period for k periods covering ``before``: never negative, so that
    # integer Div (truncating) floors it
    k = st.add_node("Div", [st.add_node("Add", [before, st.add_node(
        "Sub", [period, one], f"axis{a}_period_less_1")], f"axis{a}_before_up"), period],
        f"axis{a}_periods")
    shift = st.add_node("Sub", [st.add_node("Mul", [k, period], f"axis{a}_k_periods"), before],
                        f"axis{a}_shift")
    j = st.add_node("Add", [st.positions(total, f"axis{a}_j"), shift], f"axis{a}_shifted")
    m = st.add_node("Sub", [j, st.add_node("Mul", [st.add_node("Div", [j, period],
                                                               f"axis{a}_turns"), period],
                                           f"axis{a}_whole")], f"axis{a}_m")
    at = st.where_less(m, n, m, f"axis{a}_reflected",
                       otherwise=st.add_node("Sub", [period, m], f"axis{a}_back"))
    return st.add_node("Gather", [x, at], f"axis{a}_reflect", axis=a, output=out)
