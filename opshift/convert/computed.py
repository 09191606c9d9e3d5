"""Values a rewrite computes at run time, each valid at the target opset: a size or an element
read from a shape, the positions 0..n-1, a NaN test where IsNaN is missing, integer
comparisons where Less takes floats only, integer picks where Where is missing, and any node
written as it is at another opset and converted on to the target.
:class:`~.step.Step` has these as methods."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from opshift.graph.edit import iteration_numbers


class Computed:
    """The builders of run-time values; mixed into :class:`~.step.Step`, whose
    ``add_node``, ``add_const``, ``add_cast`` and state they use."""

    __slots__ = ()

    def size_at_run_time(self, x: str, axis: int, what: str, *, rank1: bool = False) -> str:
        """The size of ``x``'s axis ``axis`` read from its shape at run time: an int64 scalar
        (``[1]`` with ``rank1``); a negative axis counts from the back (Gather from 11)."""
        return self.element(self.add_node("Shape", [x], "shape"), axis, what, rank1=rank1)

    def axis_size(self, data: str, axis: int, elem: int, what: str) -> str:
        """The size of ``data``'s axis ``axis`` (counted from the front) as a scalar of
        integer type ``elem``: a constant where ``data``'s shape gives it, else read at run
        time."""
        s = self.shape(data)
        if s is not None and isinstance(s[axis], int):
            return self.add_const(what, np.array(s[axis], helper.tensor_dtype_to_np_dtype(elem)))
        n = self.size_at_run_time(data, axis, what)
        return n if elem == onnx.TensorProto.INT64 else self.add_cast(n, elem, f"{what}_cast")

    def element(self, v: str, i: int, what: str, *, rank1: bool = False) -> str:
        """Element ``i`` of the 1-D ``v`` as a scalar (``[1]`` with ``rank1``): a Gather."""
        return self.elements(v, [i] if rank1 else i, what)

    def elements(self, v: str, at, what: str) -> str:
        """The elements of the 1-D ``v`` at ``at`` (constant positions: an int gives a
        scalar, a sequence a 1-D value): a Gather."""
        index = self.add_const("at", np.array(at if isinstance(at, int) else list(at), np.int64))
        return self.add_node("Gather", [v, index], what, axis=0)

    def where_less(self, v: str, than: str, then: str, what: str,
                   otherwise: str | None = None) -> str:
        """``then`` where ``v < than``, else ``otherwise`` (``v``), of an integer type (integer
        Max and Min, which would clamp, exist only from 12): :meth:`pick` of
        :meth:`compare`'s Less."""
        less = self.compare("Less", v, than, f"{what}_less")
        return self.pick(less, then, v if otherwise is None else otherwise, what)

    def not_nan(self, x: str, what: str) -> str | None:
        """A bool test that float ``x`` is not NaN (None when ``x`` is a constant holding
        none): IsNaN from opset 9, below it ``x < inf or x > -inf`` (every value but +inf is
        below +inf, +inf is above -inf, NaN compares false)."""
        value = self.const(x)
        if value is not None and not np.isnan(value).any():
            return None
        if self.target >= 9:
            return self.add_node("Not", [self.add_node("IsNaN", [x], f"{what}_nan")],
                                 f"{what}_number")
        dtype = helper.tensor_dtype_to_np_dtype(self.elem_type(x))
        below = self.add_node("Less", [x, self.add_const("inf", np.array(np.inf, dtype))],
                              f"{what}_below_inf")
        above = self.add_node("Greater", [x, self.add_const("minus_inf",
                                                             np.array(-np.inf, dtype))],
                              f"{what}_above_minus_inf")
        return self.add_node("Or", [below, above], f"{what}_number")

    def compare(self, op: str, a: str, b: str, what: str) -> str:
        """``a < b`` (``op`` "Less") or ``a > b`` ("Greater") of integers: the op from 9;
        below, the op at 9 converted on to the target, as any such node is (in float64 where
        that is exact, else by 32-bit halves)."""
        if self.target >= 9:
            return self.add_node(op, [a, b], what)
        return self.written_at(9, op, [a, b], what, onnx.TensorProto.BOOL)

    def written_at(self, opset: int, op: str, inputs: list[str], what: str, elem: int, *,
                   output: str | None = None, **attrs) -> str:
        """A node of ``op`` as it is at ``opset``, converted on to the target as any node is
        (its own replacement where it does not exist there); its output (``output`` when
        given), of type ``elem``."""
        from opshift.convert.walk import walk_on

        out = output or self.fresh_value(what)
        self.ctx.facts.extra_types[out] = elem
        node = helper.make_node(op, inputs, [out], name=self.fresh(f"{self.label}/{what}"),
                                **attrs)
        self.state.pre.extend(walk_on(self, [node], opset, f"its {op} ({op}-{opset})"))
        return out

    def pick(self, cond: str, then: str, otherwise: str, what: str, *,
             output: str | None = None) -> str:
        """``then`` where bool ``cond``, else ``otherwise``: a Where from opset 9; at 7 and 8
        (32- and 64-bit integers) ``then * m + otherwise * (1 - m)`` for ``m = Cast(cond)``,
        each product the value or 0, so none overflows."""
        if self.target >= 9:
            return self.add_node("Where", [cond, then, otherwise], what, output=output)
        t = self.elem_type(otherwise) or onnx.TensorProto.INT64
        m = self.add_cast(cond, t, f"{what}_mask")
        one = self.add_const("one", np.array(1, helper.tensor_dtype_to_np_dtype(t)))
        keep = self.add_node("Sub", [one, m], f"{what}_keep")
        return self.add_node("Add", [self.add_node("Mul", [then, m], f"{what}_then"),
                                     self.add_node("Mul", [otherwise, keep], f"{what}_else")],
                             what, output=output)

    def positions(self, count: str, what: str) -> str:
        """0, 1, .., count - 1 (``count`` an int64 scalar) as an int64 ``[count]``: a Range
        from opset 11; at 9 and 10 the NonZero of count ones (a ConstantOfShape); below 9 the
        iteration numbers a Loop of count trips hands out (its scan output)."""
        if self.target >= 11:
            return self.add_node("Range", [self.add_const("zero", np.array(0, np.int64)), count,
                                           self.add_const("one", np.array(1, np.int64))], what)
        if self.target < 9:
            y = self.fresh(f"{self.label}/{what}")
            self.state.pre.append(iteration_numbers(count, y, self.ctx.edits.names, y))
            self.ctx.facts.extra_types[y] = onnx.TensorProto.INT64
            return y
        ones = self.add_node("ConstantOfShape", [self.add_node("Reshape", [count, self.add_const(
            "one", np.array([1], np.int64))], f"{what}_count")], f"{what}_ones",
            value=helper.make_tensor("one", onnx.TensorProto.INT64, [1], [1]))
        return self.add_node("Squeeze", [self.add_node("NonZero", [ones], f"{what}_2d")], what,
                             axes=[0])
