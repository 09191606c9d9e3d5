"""Where (from 9) below 9, from opset 7: every type, as data movement or integer arithmetic.

* Both values constants each holding one value (a mask filled with one of two numbers, as
  exporters write attention masks): a Gather of the two values, ``[y, x]``, at
  ``Cast(condition, int64)``; the output takes the condition's shape, so the constants must
  broadcast into it.
* Integers: :meth:`~..step.Step.pick`, ``x * Cast(c) + y * (1 - Cast(c))``, each product
  the value or 0 (no product or sum can overflow); below 14 Mul and Add take 32- and 64-bit
  integers only, so 8- and 16-bit ones go through int32 and back (the result is x or y,
  which fits).
* bool: ``(c and x) or (not c and y)``.
* Anything else (floats: arithmetic would turn an infinity times 0 into NaN and -0 + 0 into
  +0): a Gather from ``Concat(flat x, flat y)`` at the flat position each output element
  reads, ``i_x`` where c holds, else ``size(x) + i_y``, computed in int64 from the positions
  along each output axis times the strides of x and y (0 on their broadcast axes), so no
  input is widened. Data movement: exact for every value, NaN payloads and signed zeros
  included.

Below 7 the binary ops broadcast by attribute only: refused.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as T

from opshift.convert.registry import replaces
from opshift.convert.step import Refuse, Step
from opshift.graph.shape_rules import fits_into
from opshift.opsets import INTEGER_TYPES

_NATIVE = frozenset({T.INT32, T.INT64, T.UINT32, T.UINT64})


@replaces("Where")
def where_below_9(st: Step) -> None:
    if st.target < 7:
        raise Refuse("below opset 7 the ops it is written with broadcast by attribute")
    c, x, y = st.input(0), st.input(1), st.input(2)
    out = st.w.output[0]
    if _pick_from_two(st, c, x, y, out):
        return
    t = st.elem_type(x)
    if t == T.BOOL:
        st.add_node("Or", [st.add_node("And", [c, x], "then"), st.add_node(
            "And", [st.add_node("Not", [c], "otherwise"), y], "else")], "where", output=out)
        st.remove("bool Where written as (c and x) or (not c and y)", "Where exists from opset 9")
        return
    if t not in INTEGER_TYPES:
        _gather_of_both(st, c, x, y, out, t)
        return
    wide = t if t in _NATIVE else T.INT32
    if wide != t:
        x, y = st.add_cast(x, wide, "x_int32"), st.add_cast(y, wide, "y_int32")
    r = st.pick(c, x, y, "where", output=out if wide == t else None)
    if wide != t:
        st.add_cast(r, t, "back", output=out)
    st.remove(f"{T.DataType.Name(t)} Where written as x * c + y * (1 - c)",
              "Where exists from opset 9")


def _pick_from_two(st: Step, c: str, x: str, y: str, out: str) -> bool:
    """Write the node as a Gather of ``[y, x]`` at ``Cast(c, int64)`` where ``x`` and ``y``
    are constants each holding one value (any number of copies of the same bits) and shaped
    to broadcast into the condition's shape (so the output has it); False when that does
    not apply."""
    vx, vy = st.const(x), st.const(y)
    if vx is None or vy is None or vx.dtype != vy.dtype:
        return False
    cs = st.shape(c)
    if not all(_one_value(v) and fits_into(v.shape, cs) for v in (vx, vy)):
        return False
    table = st.add_const("values", np.concatenate([vy.reshape(-1)[:1], vx.reshape(-1)[:1]]))
    st.add_node("Gather", [table, st.add_cast(c, T.INT64, "position")], "pick", output=out,
                axis=0)
    st.remove("Where of two constant values written as a Gather of them at the condition",
              "Where exists from opset 9")
    return True


def _one_value(v: np.ndarray) -> bool:
    """Whether every element of ``v`` (at least one) has the same bits."""
    if v.size == 0:
        return False
    bits = np.ascontiguousarray(v).reshape(-1).view(np.uint8).reshape(v.size, -1)
    return bool((bits == bits[:1]).all())


#: element types a Less can compare at 7 and 8 (to read the broadcast shape at run time)
_LESS_7 = frozenset({T.FLOAT16, T.FLOAT, T.DOUBLE})


def _gather_of_both(st: Step, c: str, x: str, y: str, out: str, t: int | None) -> None:
    """Write the node as a Gather from ``Concat(flat x, flat y)`` at the flat position each
    output element reads (see the module's docstring); the ranks must be known."""
    shapes = [st.shape(v) for v in (c, x, y)]
    for v, s in zip((c, x, y), shapes):
        if s is None:
            raise Refuse(f"the rank of {v!r} is unknown (the positions it reads are computed "
                         "per output axis)")
    grid = _Positions(st, shapes, st.shape(out), (c, x, y), t)
    ix, n_x = grid.flat_index(x, shapes[1])
    iy, _ = grid.flat_index(y, shapes[2])
    if ix is None:  # (rank r: the positions come out in the output's shape)
        ix = st.add_const("zero", np.zeros((1,) * grid.rank, np.int64))
    at_y = _value(st, n_x)
    at = st.pick(c, ix, at_y if iy is None else st.add_node("Add", [iy, at_y], "in_y"),
                 "position")
    minus_one = st.add_const("flat", np.array([-1], np.int64))
    both = st.add_node("Concat", [st.add_node("Reshape", [v, minus_one], f"{v}_flat")
                                  for v in (x, y)], "both", axis=0)
    st.add_node("Gather", [both, at], "pick", output=out, axis=0)
    counted = grid.counted
    st.remove(f"{'Where' if t is None else T.DataType.Name(t) + ' Where'} written as a "
              "Gather of x and y, flattened and joined, at the position each output element "
              "reads" + (f"; the positions along {counted} axis(es) of a size known at run "
                         "time only are counted by a Loop, one trip each (--input-shape "
                         "makes them constants)" if counted else ""),
              "Where exists from opset 9")


class _Positions:
    """The int64 positions of the output's elements, per axis and flat in an input, each node
    made once. An output size the shapes do not give is read at run time from the Shape of
    a broadcast of the inputs, each compared with itself (False everywhere: no value is
    read, and a Less of floats exists at 7)."""

    def __init__(self, st: Step, shapes: list[tuple], declared: tuple | None,
                 names: tuple[str, str, str], t: int | None):
        self.st, self.names, self.t = st, names, t
        self.rank = r = max(len(s) for s in shapes)
        self.shapes = shapes
        aligned = [(1,) * (r - len(s)) + tuple(s) for s in shapes]
        self.sizes: list[int | None] = []
        for k in range(r):
            col = [s[k] for s in aligned]
            known = [d for d in col if isinstance(d, int) and d != 1]
            if declared is not None and len(declared) == r and isinstance(declared[k], int):
                self.sizes.append(declared[k])
            else:
                self.sizes.append(known[0] if known else 1 if all(d == 1 for d in col)
                                  else None)
        self._run_shape: str | None = None
        self._along: dict[int, str] = {}
        self._one: str | None = None
        #: axes whose positions are computed at run time (below 9: a Loop's trips)
        self.counted = 0

    def size(self, k: int) -> int | str:
        """Output axis ``k``'s size: an int, or an int64 scalar read at run time."""
        if self.sizes[k] is not None:
            return self.sizes[k]
        st = self.st
        if self._run_shape is None:
            if self.t not in _LESS_7:
                kind = "of unknown type" if self.t is None else T.DataType.Name(self.t)
                raise Refuse(f"its values are {kind} and output axis {k}'s size is unknown: "
                             "it would be read from a comparison, which takes floats only "
                             "below 9")
            c, x, y = self.names
            zero = [st.add_cast(c, T.INT32, "c_zero_or_one")]
            for v, s in ((x, self.shapes[1]), (y, self.shapes[2])):
                if s:
                    zero.append(st.add_cast(st.add_node("Less", [v, v], "no"), T.INT32, "zero"))
            while len(zero) > 1:
                zero[:2] = [st.add_node("Add", zero[:2], "broadcast")]
            self._run_shape = st.add_node("Shape", zero, "output_shape")
        return st.element(self._run_shape, k, f"size_{k}")

    def along(self, k: int) -> str:
        """0..size(k) - 1 along output axis ``k`` (1 on every other axis)."""
        if k not in self._along:
            st, r, n = self.st, self.rank, self.size(k)
            if isinstance(n, int):
                shape = [1] * r
                shape[k] = n
                self._along[k] = st.add_const(f"positions_{k}", np.arange(
                    n, dtype=np.int64).reshape(shape))
            else:
                self.counted += 1
                self._along[k] = st.add_axes_node("Unsqueeze", st.positions(
                    n, f"positions_{k}"), [a for a in range(r) if a != k], f"axis_{k}")
        return self._along[k]

    def flat_index(self, v: str, shape: tuple) -> tuple[str | None, int | str]:
        """The flat position in ``v`` (of ``shape``) each output element reads (None when
        every element reads position 0), and ``v``'s size: the positions along each axis
        times ``v``'s stride there, 0 where its dim is 1 (known then, or read at run time)."""
        st, lead = self.st, self.rank - len(shape)
        terms: list[str] = []
        dims = None
        stride: int | str = 1
        for k in range(len(shape) - 1, -1, -1):
            d = shape[k]
            if d == 1:
                continue
            if isinstance(d, int):
                size_k: int | str = d
                step: int | str = stride
            else:  # 1 or not, known at run time: its stride is 0 where it is 1
                dims = dims or st.add_node("Shape", [v], f"{v}_shape")
                size_k = st.element(dims, k, f"{v}_dim_{k}")
                self._one = self._one or st.add_const("one", np.array(1, np.int64))
                read = st.add_cast(st.add_node("Not", [st.add_node(
                    "Equal", [size_k, self._one], "dim_is_1")], "dim_is_not_1"), T.INT64,
                    "read")
                step = read if stride == 1 else st.add_node("Mul", [_value(st, stride), read],
                                                           "stride")
            at = self.along(lead + k)
            terms.append(at if step == 1 else st.add_node("Mul", [at, _value(st, step)],
                                                          f"term_{k}"))
            stride = stride * size_k if isinstance(stride, int) and isinstance(size_k, int) \
                else st.add_node("Mul", [_value(st, stride), _value(st, size_k)], "stride")
        while len(terms) > 1:
            terms[:2] = [st.add_node("Add", terms[:2], "position")]
        return (terms[0] if terms else None), stride


def _value(st: Step, v: int | str) -> str:
    """``v`` as a value: an int64 scalar constant for an int."""
    return st.add_const("n", np.array(v, np.int64)) if isinstance(v, int) else v
