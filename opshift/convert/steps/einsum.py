"""Einsum (from 12) below 12: a Transpose, a Mul of two inputs, or a MatMul.

An equation whose output keeps every index of its inputs (an outer product ``i,j->ij``, a
broadcast product ``bi,i->bi``, a transpose ``ij->ji``) multiplies one element of each input
per output element, with no sum: each input is transposed to the output's order of its
indices and given the output's rank by Unsqueeze, and two are multiplied (numpy
broadcasting, from 7). One product rounds once, as Einsum's does, so the result is exact;
Einsum adds its products to +0.0 (numpy's einsum, the reference's, does), so floats have
+0.0 added, which turns a product of -0.0 into +0.0 and leaves every other value.

Two inputs summed over the indices they share (a contraction: ``abcd,cde->abe``,
``bhqd,bhkd->bhqk``) are one MatMul of the inputs transposed to (batch, own, summed) indices and
reshaped to three axes (their dims read from their shapes at run time), reshaped back and
transposed to the output's order: MatMul sums the same products of float32 and float16
values in float64, rounded once, on the evaluator as Einsum does (+0.0 added as above), in
its own order on a runtime as any MatMul; integers wrap alike. float64 sums are refused:
the order of the additions shows in their last bits. An index summed in one input alone, a
diagonal, an ellipsis, three or more inputs (their product rounds at each step), integers
in a MatMul below 9 and 8- and 16-bit integers in a Mul (from 14) are refused.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as T

from opshift.convert.registry import replaces
from opshift.convert.step import Refuse, Step, np_dtype

_NARROW = frozenset({T.INT8, T.INT16, T.UINT8, T.UINT16})


def parse(equation: str, n: int) -> tuple[list[str], str]:
    """(each input's indices, the output's) of an Einsum equation for ``n`` inputs; an
    implicit output is the indices that appear once, in alphabetical order."""
    eq = equation.replace(" ", "")
    if "." in eq:
        raise Refuse(f"equation {equation!r} uses an ellipsis")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != n or not all(t.isalpha() for t in terms) or not (out.isalpha() or
                                                                      not out):
        raise Refuse(f"equation {equation!r} does not name {n} input(s) by letters")
    if not arrow:
        letters = "".join(terms)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return terms, out


@replaces("Einsum")
def einsum_below_12(st: Step) -> None:
    equation = st.attr("equation", "")
    equation = equation.decode() if isinstance(equation, bytes) else equation
    inputs = list(st.w.input)
    terms, out = parse(equation, len(inputs))
    if len(inputs) > 2:
        raise Refuse(f"{len(inputs)} inputs: their product rounds at each of its steps")
    if any(len(set(t)) != len(t) for t in terms) or len(set(out)) != len(out):
        raise Refuse(f"equation {equation!r} takes an index twice in one term (a diagonal)")
    summed = set("".join(terms)) - set(out)
    t = st.elem_type(inputs[0])
    if summed:
        if len(terms) != 2 or not all(c in terms[0] and c in terms[1] for c in summed):
            raise Refuse(f"equation {equation!r} sums over an index of one input alone")
        _contraction(st, inputs, terms, out, t, equation)
        return
    if len(inputs) == 2 and (st.target < 7 or t in _NARROW or t is None):
        raise Refuse("its product needs Mul with numpy broadcasting (from 7)" if st.target < 7
                     else f"its product of {'unknown type' if t is None else T.DataType.Name(t)}"
                     " needs Mul, which takes 8- and 16-bit integers from 14")
    y = st.w.output[0]
    placed = []
    for k, (name, term) in enumerate(zip(inputs, terms)):
        order = [c for c in out if c in term]
        last = len(inputs) == 1
        if order != list(term):
            name = st.add_node("Transpose", [name], f"ordered{k}", output=y if last else None,
                               perm=[term.index(c) for c in order])
        elif last:
            name = st.add_node("Identity", [name], "same", output=y)
        missing = [i for i, c in enumerate(out) if c not in term]
        if missing:
            name = st.add_node("Unsqueeze", [name], f"ranked{k}", axes=missing)
        placed.append(name)
    if len(placed) == 2:
        _plus_zero(st, st.add_node("Mul", placed, "product"), t, y)
    st.remove(f"Einsum {equation!r} written as " +
              ("a Transpose" if len(placed) == 1 else "a Mul of its inputs placed by Transpose "
               "and Unsqueeze"), "Einsum exists from opset 12; it sums nothing here")


def _plus_zero(st: Step, v: str, t: int | None, y: str) -> None:
    """``y`` = ``v`` + 0.0 for floats (Einsum sums into +0.0, so a -0.0 comes out +0.0;
    every other value stays), else ``v``."""
    if t is not None and np.dtype(np_dtype(t)).kind == "f":
        st.add_node("Add", [v, st.add_const("zero", np.zeros((), np_dtype(t)))], "summed",
                    output=y)
    else:
        st.add_node("Identity", [v], "summed", output=y)


def _contraction(st: Step, inputs: list[str], terms: list[str], out: str, t: int | None,
                 equation: str) -> None:
    """Two inputs summed over the indices they share and the output lacks: each transposed
    to (batch, own, summed) and reshaped to [batch..., own, summed] (the dims read from
    their shapes at run time), one MatMul, reshaped back and transposed to the output's
    order."""
    if t is None or t == T.DOUBLE:
        raise Refuse("its type is unknown" if t is None else "its sums are DOUBLE: MatMul "
                     "adds them in an order of its own, which no wider sum rounds away")
    if st.target < 9 and t not in (T.FLOAT, T.FLOAT16):
        raise Refuse("MatMul takes integers from 9")
    if st.target < 5:
        raise Refuse("Reshape takes a computed shape from 5")
    (a, b), (ta, tb) = inputs, terms
    batch = [c for c in out if c in ta and c in tb]
    left = [c for c in out if c in ta and c not in tb]
    right = [c for c in out if c in tb and c not in ta]
    summed = [c for c in ta if c not in out]
    nb = len(batch)
    pa, pb = batch + left + summed, batch + summed + right
    a = _transposed(st, a, ta, pa, "a")
    b = _transposed(st, b, tb, pb, "b")
    sa = st.add_node("Shape", [a], "a_shape")
    sb = st.add_node("Shape", [b], "b_shape")

    lead = [st.elements(sa, range(nb), "batch")] if nb else []
    # the dims of each group, each read once: the three-axis shapes take their products
    left_dims = st.elements(sa, range(nb, nb + len(left)), "left_dims") if left else None
    right_dims = st.elements(sb, range(nb + len(summed), len(pb)), "right_dims") if right \
        else None

    def size(dims: str | None, what: str) -> str:  # the product of those dims, as [1]
        if dims is None:
            return st.add_const(f"{what}_one", np.array([1], np.int64))
        return st.add_node("ReduceProd", [dims], what, keepdims=1)

    k = size(st.elements(sa, range(nb + len(left), len(pa)), "summed_dims"), "summed")
    a3 = st.add_node("Reshape", [a, st.add_node("Concat", lead + [size(left_dims, "left"), k],
                                                "a3_shape", axis=0)], "a3")
    b3 = st.add_node("Reshape", [b, st.add_node("Concat", lead + [k, size(right_dims, "right")],
                                                "b3_shape", axis=0)], "b3")
    product = st.add_node("MatMul", [a3, b3], "product")
    unfolded = lead + [d for d in (left_dims, right_dims) if d is not None]
    full = st.add_node("Reshape", [product, st.add_node("Concat", unfolded, "out_shape", axis=0)
                                   if unfolded else st.add_const("scalar", np.zeros(0, np.int64))],
                       "unfolded")
    order = batch + left + right
    if order != list(out):
        full = st.add_node("Transpose", [full], "ordered", perm=[order.index(c) for c in out])
    _plus_zero(st, full, t, st.w.output[0])
    st.remove(f"Einsum {equation!r} written as a MatMul of its inputs transposed and "
              "reshaped", "Einsum exists from opset 12; MatMul sums the same products (on "
              "the evaluator both in float64, rounded once)")


def _transposed(st: Step, x: str, term: str, order: list[str], what: str) -> str:
    if list(term) == order:
        return x
    return st.add_node("Transpose", [x], f"{what}_ordered", perm=[term.index(c) for c in order])
