"""Einsum (from 12) below 12 where it sums nothing: a Transpose, or a Mul of two inputs.

An equation whose output keeps every index of its inputs (an outer product ``i,j->ij``, a
broadcast product ``bi,i->bi``, a transpose ``ij->ji``) multiplies one element of each input
per output element, with no sum: each input is transposed to the output's order of its
indices and given the output's rank by Unsqueeze, and two are multiplied (numpy
broadcasting, from 7). One product rounds once, as Einsum's does, so the result is exact;
Einsum adds its products to +0.0 (numpy's einsum, the reference's, does), so floats have
+0.0 added, which turns a product of -0.0 into +0.0 and leaves every other value.
Equations that sum (a contraction: its order of additions is the runtime's), take an index
twice in one input (a diagonal), use an ellipsis, or have three or more inputs (their
product rounds at each step) are refused, as are 8- and 16-bit integers (Mul takes them from
14).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as T

from ..registry import replaces
from ..step import Refuse, Step, np_dtype

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
def einsum_without_sums(st: Step) -> None:
    equation = st.attr("equation", "")
    equation = equation.decode() if isinstance(equation, bytes) else equation
    inputs = list(st.w.input)
    terms, out = parse(equation, len(inputs))
    if len(inputs) > 2:
        raise Refuse(f"{len(inputs)} inputs: their product rounds at each of its steps")
    if any(len(set(t)) != len(t) for t in terms) or len(set(out)) != len(out):
        raise Refuse(f"equation {equation!r} takes an index twice in one term (a diagonal)")
    if set("".join(terms)) != set(out):
        raise Refuse(f"equation {equation!r} sums over "
                     f"{''.join(sorted(set(''.join(terms)) - set(out)))!r}: a contraction's "
                     "order of additions is the runtime's")
    t = st.elem_type(inputs[0])
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
        floats = np.dtype(np_dtype(t)).kind == "f"
        product = st.add_node("Mul", placed, "product", output=None if floats else y)
        if floats:  # Einsum sums into +0.0, so a product of -0.0 comes out +0.0
            st.add_node("Add", [product, st.add_const("zero", np.zeros((), np_dtype(t)))],
                        "summed", output=y)
    st.remove(f"Einsum {equation!r} written as " +
              ("a Transpose" if len(placed) == 1 else "a Mul of its inputs placed by Transpose "
               "and Unsqueeze"), "Einsum exists from opset 12; it sums nothing here")
