"""Broadcasting before opset 7/8: binary ops, variadic ops and Gemm.

* Add/Sub/Mul/Div/Pow/And/Or/Xor/Equal/Greater/Less **7**: legacy ``broadcast``/``axis``
  (<= 6) vs numpy broadcasting. Down: equal shapes stay; else B is placed by ``broadcast=1``
  and ``axis`` when its dims other than 1 form one run equal to A's
  (:func:`opshift.broadcast.legacy_placement`; B read without its outer 1s: a constant
  reshaped once per tensor, copied when shared, anything else through Squeeze). When only A
  broadcasts to B the operands trade places: Add/Mul/And/Or/Xor/Equal as they are,
  Greater/Less as Less/Greater, Sub as ``Add(Neg(B), A)`` (signed types). Otherwise
  (Div, Pow, unsigned Sub, both operands broadcast) a static output shape lets A be widened to
  it: a constant written broadcast, a computed A as ``Mul(ones, A, broadcast=1)`` (exact:
  ``x * 1`` is ``x``); B is then placed, or widened too. With a symbolic output shape, A's
  dims of 1 that meet B's known sizes are tiled by constant repeats (Tile from 6, a Tile-1
  per axis below; A's symbolic dims kept; for ops that trade places, B's likewise as A), and
  B is then placed: ``(n, 1) + (5,)`` as ``Tile(A, [1, 5]) + B``. Up reshapes B for ``axis``.
* Sum/Max/Min/Mean **8**: all inputs had to share one shape before 8. Down, with a static
  output shape, each input of another shape is widened to it as above (a constant written
  broadcast, anything else multiplied by ones); with a symbolic one, from 6, the input every
  other broadcasts into gives it at run time: the others are tiled by its Shape where their
  dims are 1; with none known to, the broadcast of all their Shapes is.
* Gemm **7**: ``broadcast`` of C (<= 6; C read without its outer 1s when that makes it a
  trailing shape of Y); Gemm **11**: C optional (made an explicit zero down).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from opshift import opsets
from opshift.broadcast import Placement, legacy_placement
from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step, is_suffix, known_shape, norm_axis, np_dtype
from opshift.convert.steps.broadcast_to import dims_of_one, tile_repeats
from opshift.graph.shape_rules import fits_into

BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less")
COMMUTATIVE = frozenset({"Add", "Mul", "And", "Or", "Xor", "Equal"})


@at(7, *BINARY)
def legacy_broadcast(st: Step) -> None:
    a, b = st.input(0), st.input(1)
    if st.up:
        bc, axis = 0, None
        if st.w.attribute:
            bc = st.attr("broadcast", 0)
            axis = st.attr("axis")
            for name in ("broadcast", "axis"):
                if st.has_attr(name):
                    st.del_attr(name)
        if not bc:
            st.note("dropped broadcast=0: the inputs had equal shapes")
            return
        if axis is None:
            st.note("legacy broadcast of a trailing B equals numpy broadcasting")
            return
        ra = st.need_rank(a, "legacy broadcast with axis")
        rb = st.need_rank(b, "legacy broadcast with axis")
        trailing = ra - norm_axis(axis, ra) - rb
        if trailing < 0:
            raise Refuse(f"axis={axis} does not fit ranks {ra} and {rb}")
        if trailing == 0 or rb == 0:
            st.note(f"axis={axis} aligns B with A's last dims: numpy broadcasting is the same")
            return
        cb = st.const(b)
        if cb is not None:
            nb = st.add_const("B_aligned", cb.reshape(cb.shape + (1,) * trailing))
        else:
            shape = st.add_const("B_shape", np.array([0] * rb + [1] * trailing, np.int64))
            nb = st.add_node("Reshape", [b, shape], "B_aligned")
        st.set_inputs([a, nb])
        st.note(f"B reshaped with {trailing} trailing 1s for legacy axis={axis}")
        return
    _to_legacy(st)


#: ops whose operands can trade places: the op written with them swapped (IEEE addition and
#: multiplication are commutative bit for bit; a > b is b < a, NaN included)
SWAPPED = {"Add": "Add", "Mul": "Mul", "And": "And", "Or": "Or", "Xor": "Xor",
           "Equal": "Equal", "Greater": "Less", "Less": "Greater"}
_UNSIGNED = (TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64)


def _to_legacy(st: Step) -> None:
    a, b = st.input(0), st.input(1)
    sa, sb = st.shape(a), st.shape(b)
    if a == b or (sa is not None and sa == sb and all(d is not None for d in sa)):
        return
    if sb is None or (sa is None and sb != ()):
        raise Refuse(f"the shape of {a if sa is None else b!r} is unknown: legacy "
                     "broadcasting (opset < 7) needs both shapes")
    if sa is None:
        _place(st, 1, Placement((), None))  # a scalar B: legacy reads it whole
        return
    why = legacy_placement(sa, sb)
    if isinstance(why, Placement):
        _place(st, 1, why)
        return
    swapped = legacy_placement(sb, sa)
    if isinstance(swapped, Placement):
        if st.op in SWAPPED:
            st.set_inputs([b, a])
            if SWAPPED[st.op] != st.op:
                st.edit().op_type = SWAPPED[st.op]
            st.note(f"inputs swapped{'' if SWAPPED[st.op] == st.op else ' as ' + SWAPPED[st.op]}",
                    f"legacy broadcasting places only B; A {sa} broadcasts to B {sb}")
            _place(st, 1, swapped)
            return
        if st.op == "Sub" and st.elem_type(b) not in (None, *_UNSIGNED):
            _sub_as_negated_add(st, swapped)
            return
        why = f"{why}, and {st.op} cannot swap its operands"
    out = _static_broadcast(sa, sb)
    if out is None:
        tiled = _tile_widened(st, 0, sa, sb)
        if tiled is not None and st.op in SWAPPED and _tile_widened(st, 1, sb, sa) is None:
            return
        if tiled is None:
            return
        raise Refuse(f"shapes {sa} and {sb}: legacy broadcasting (opset < 7) cannot express "
                     f"this numpy broadcast (B {why}), the output shape is not static, and "
                     f"A cannot be tiled to it ({tiled})")
    if sa != out:
        _widen(st, 0, out)
    placed = legacy_placement(out, sb)
    if isinstance(placed, Placement) and sb != out:
        _place(st, 1, placed)
    elif sb != out:
        _widen(st, 1, out)


def _tile_widened(st: Step, i: int, sw: tuple, sp: tuple) -> str | None:
    """Input ``i`` (of shape ``sw``) tiled where its dims are 1 against the other operand's
    known dims, its own symbolic dims kept, so that the other (of shape ``sp``) is then placed
    by legacy broadcasting: a Tile by constant repeats from opset 6, below it a Tile-1 per
    axis (copies: exact for every value). Input ``i`` becomes A (the operands trade places
    when ``i`` is 1: called only for ops in :data:`SWAPPED`). None when done, else why not
    (nothing changed then)."""
    r = max(len(sw), len(sp))
    pw = (1,) * (r - len(sw)) + tuple(sw)
    pp = (1,) * (r - len(sp)) + tuple(sp)
    out, reps = [], []
    for k, (dw, dp) in enumerate(zip(pw, pp)):
        if dp == 1 or (dw is not None and dw == dp):
            out.append(dw)
            reps.append(1)
        elif dw == 1 and isinstance(dp, int):
            out.append(dp)
            reps.append(dp)
        else:
            return f"dim {k}: {dw} against {dp}, not a 1 against a known size"
    if all(n == 1 for n in reps):
        return "it has no dim of 1 against a larger known one"
    placed = legacy_placement(tuple(out), tuple(sp))
    if not isinstance(placed, Placement):
        return f"the other operand then: {placed}"
    name, t = st.input(i), st.elem_type(st.input(i))
    if st.target < 6 and t not in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16):
        return "below opset 6 Tile takes float types only"
    other = st.input(1 - i)
    if i == 1:
        st.set_inputs([name, other])
        if SWAPPED[st.op] != st.op:
            st.edit().op_type = SWAPPED[st.op]
    wide = _ranked(st, name, tuple(sw), r)
    if st.target >= 6:
        wide = st.add_node("Tile", [wide, st.add_const("repeats", np.array(reps, np.int64))],
                           f"{name}_tiled")
    else:  # Tile-1: one axis, the count and the axis as scalars of the input's type
        dtype = np_dtype(t)
        for k, n in enumerate(reps):
            if n != 1:
                wide = st.add_node("Tile", [wide, st.add_const("tiles", np.array(n, dtype)),
                                            st.add_const("axis", np.array(k, dtype))],
                                   f"{name}_tiled{k}")
    st.state.shapes[wide] = tuple(out)
    st.edit().input[0] = wide
    swapped = "" if i == 0 else (" (inputs swapped" + (
        "" if SWAPPED[st.op] == st.op else f" as {SWAPPED[st.op]}") + ")")
    st.note(f"{name!r} tiled by {reps} to {out}{swapped}", "legacy broadcasting widens only "
            "B, and the output shape is not static (no constant of ones to multiply by); "
            "a Tile copies values")
    if tuple(sp) != tuple(out):
        _place(st, 1, placed)
    return None


def _static_broadcast(sa: tuple, sb: tuple) -> tuple[int, ...] | None:
    """The numpy broadcast of two shapes of integer dims, None when either has a symbolic or
    unknown dim (or they do not broadcast)."""
    if not all(isinstance(d, int) for d in (*sa, *sb)):
        return None
    try:
        return tuple(int(d) for d in np.broadcast_shapes(sa, sb))
    except ValueError:
        return None


def _widen(st: Step, i: int, out: tuple[int, ...]) -> None:
    """Input ``i`` read in the output's shape ``out``: a constant written broadcast, anything
    else multiplied by ones of ``out`` (``x * 1`` is ``x`` bit for bit: NaN, infinities and -0
    included; integers too). Legacy broadcasting places x when its dims other than 1 are one
    run of ``out``; otherwise the ones come first and a Transpose (data movement, exact)
    puts the dims back in order."""
    name = st.input(i)
    how = st.broadcast_constant_input(i, out)
    if how is not None:
        st.note(f"{name!r} {how}", "legacy broadcasting widens only B: a constant operand "
                "is given the output's shape")
        return
    t = st.elem_type(name)
    if t is None or opsets.tensor_type(t) not in opsets.allowed_types(
            "Mul", st.target):
        raise Refuse(f"{name!r} broadcasts to {list(out)}: widening it as Mul by ones needs a "
                     f"type Mul-{opsets.since_version('Mul', st.target)} accepts, not "
                     f"{'unknown' if t is None else opsets.tensor_type_name(t)}")
    if st.target >= 7:  # numpy broadcasting: the ones give the shape
        ones = st.add_const("ones", np.ones(out, np_dtype(t)))
        wide = st.add_node("Mul", [ones, name], f"{name}_widened")
        st.state.shapes[wide] = out
        st.edit().input[i] = wide
        st.note(f"{name!r} widened to {list(out)} as Mul(ones, {name!r})", "all inputs "
                "share one shape before opset 8; x * 1 is x bit for bit")
        return
    shape = st.shape(name)
    p = legacy_placement(out, shape)
    if isinstance(p, Placement):
        order = list(range(len(out)))
    else:  # the dims x spreads over first, then x's own dims, in order
        lead = len(out) - len(shape)
        own = [d for d in range(len(out)) if d >= lead and shape[d - lead] != 1]
        order = [d for d in range(len(out)) if d not in own] + own
        p = Placement(tuple(out[d] for d in own), None,
                      tuple(j for j in range(len(shape)) if j + lead not in own))
    if p.drop:
        st.read_input_as(i, p.shape, "Squeeze", list(p.drop), "legacy")
    ones = st.add_const("ones", np.ones([out[d] for d in order], np_dtype(t)))
    attrs = {"broadcast": 1} if p.axis is None else {"broadcast": 1, "axis": p.axis}
    wide = st.add_node("Mul", [ones, st.input(i)], f"{name}_widened", **attrs)
    st.state.shapes[wide] = tuple(out[d] for d in order)
    how = f"Mul(ones, {name!r})"
    if order != sorted(order):
        wide = st.add_node("Transpose", [wide], f"{name}_widened_t",
                           perm=[order.index(d) for d in range(len(out))])
        st.state.shapes[wide] = out
        how = f"Transpose(Mul(ones, {name!r}))"
    st.edit().input[i] = wide
    st.note(f"{name!r} widened to {list(out)} as {how}", "legacy broadcasting widens only "
            "B; x * 1 is x bit for bit")


def _place(st: Step, i: int, p: Placement) -> None:
    """Input ``i`` read in ``p.shape`` with ``broadcast=1`` and ``p.axis``."""
    if p.drop:
        name = st.input(i)
        how = st.read_input_as(i, p.shape, "Squeeze", list(p.drop), "legacy")
        st.note(f"{name!r} {how}", "legacy broadcasting reads the run of dims that "
                "meets the other operand, without outer 1s")
    st.set_attr("broadcast", 1)
    if p.axis is not None:
        st.set_attr("axis", p.axis)
    st.note(f"broadcast=1{'' if p.axis is None else f', axis={p.axis}'}",
            f"legacy broadcasting of {list(p.shape)} equals numpy broadcasting here")


def _sub_as_negated_add(st: Step, p: Placement) -> None:
    """``c - x`` with ``c`` broadcast to ``x``: ``Neg(x) + c`` (IEEE subtraction is the
    addition of the negation, signed zeros included; integers wrap the same)."""
    a, b = st.input(0), st.input(1)
    neg = st.add_node("Neg", [b], "negated")
    st.set_inputs([neg, a])
    st.edit().op_type = "Add"
    st.note("written as Add(Neg(B), A)", "legacy broadcasting places only B; A - B is "
            "-B + A exactly")
    _place(st, 1, p)


@at(8, "Sum", "Max", "Min", "Mean")
def variadic_same_shape(st: Step) -> None:
    if st.up:
        return
    names = [n for n in st.w.input if n]
    if len(names) < 2:
        return
    shapes = [st.shape(n) for n in names]
    if all(known_shape(s) for s in shapes) and len(set(shapes)) == 1:
        return
    out = None
    if all(s is not None for s in shapes):
        out = shapes[0]
        for s in shapes[1:]:
            out = None if out is None else _static_broadcast(out, s)
    if out is None:
        if st.target < 6 or any(s is None for s in shapes):
            raise Refuse(f"input shapes {shapes}: before opset 8 all inputs must have one "
                         "shape, and the output's is neither static nor of a known rank")
        widest = next((k for k, s in enumerate(shapes) if all(fits_into(o, s)
                                                              for o in shapes)), None)
        if widest is None:
            _tile_to_broadcast(st, shapes)
        else:
            _tile_to(st, names[widest], shapes[widest])
        return
    for i, name in enumerate(st.w.input):
        if name and st.shape(name) != out:
            _widen(st, i, out)


def _tile_to(st: Step, x: str, xs: tuple) -> None:
    """Widen every input but ``x`` (of shape ``xs``, into which each broadcasts) to ``x``'s
    shape read at run time: a Tile (copies, exact for every type) by ``Shape(x)`` on the
    axes where the input's dim is 1, given ``x``'s rank first."""
    r = len(xs)
    shape = None
    for i, name in enumerate(st.w.input):
        s = st.shape(name) if name and name != x else None
        if s is None or s == xs:
            continue
        if shape is None:
            shape = st.add_node("Shape", [x], "shape")
        ranked = _ranked(st, name, s, r)
        s = (1,) * (r - len(s)) + tuple(s)
        repeats = tile_repeats(st, shape, np.array([d == 1 for d in s], np.int64))
        st.edit().input[i] = st.add_node("Tile", [ranked, repeats], f"{name}_widened")
        st.note(f"{name!r} widened to the shape of {x!r} by a Tile of it by that shape",
                "all inputs share one shape before opset 8")


def _ranked(st: Step, name: str, s: tuple, r: int) -> str:
    """``name`` (of shape ``s``) given rank ``r`` by leading 1s."""
    if len(s) == r:
        return name
    value = st.const(name)
    lead = (1,) * (r - len(s))
    return (st.add_const("ranked", value.reshape(lead + tuple(s))) if value is not None
            else st.add_node("Unsqueeze", [name], "ranked", axes=list(range(r - len(s)))))


def _tile_to_broadcast(st: Step, shapes: list[tuple]) -> None:
    """Widen every input to the broadcast of all, read at run time where no input is known
    to hold it: given the largest rank, each input's dims that are 1 (``m``, read from its
    Shape) take the others' (``out * m + dim * (1 - m)``, so a 0 wins over a 1 as numpy
    broadcasting says), and each input is tiled by the result where its dims are 1 (copies,
    exact for every type)."""
    r = max(len(s) for s in shapes)
    inputs = [(i, name) for i, name in enumerate(st.w.input) if name]
    ranked, masks, out = {}, {}, None
    for i, name in inputs:
        ranked[i] = _ranked(st, name, st.shape(name), r)
        dims = st.add_node("Shape", [ranked[i]], f"{name}_shape")
        masks[i] = m, others = dims_of_one(st, dims, r, name)
        out = dims if out is None else st.add_node("Add", [
            st.add_node("Mul", [out, m], "kept"), st.add_node("Mul", [dims, others], "taken")],
            "shape")
    for i, name in inputs:
        m, others = masks[i]
        repeats = st.add_node("Add", [st.add_node("Mul", [out, m], f"{name}_tiled"), others],
                              f"{name}_repeats")
        st.edit().input[i] = st.add_node("Tile", [ranked[i], repeats], f"{name}_widened")
    st.note("every input widened to the broadcast of their shapes, read at run time, by a "
            "Tile where its dims are 1", "all inputs share one shape before opset 8")


# ------------------------------------------------------------------ Gemm


@at(7, "Gemm")
def gemm_broadcast(st: Step) -> None:
    if st.up:
        if st.has_attr("broadcast"):
            st.del_attr("broadcast")
            st.note("dropped broadcast: unidirectional broadcasting of C covers it")
        return
    c, y = st.input(2), st.w.output[0]
    sc, sy = st.shape(c), st.shape(y)
    if sc is not None and sy is not None and sc == sy and known_shape(sc):
        return
    if known_shape(sc) and sy is not None and is_suffix(sc, sy):
        st.set_attr("broadcast", 1)
        st.note(f"broadcast=1 for C of shape {sc}")
        return
    lead = next((k for k, d in enumerate(sc or ()) if d != 1), len(sc or ()))
    if known_shape(sc) and sy is not None and lead and is_suffix(sc[lead:], sy):
        # C without its outer 1s ([1, N] -> [N]) is a trailing shape of Y: the same values
        how = st.read_input_as(2, sc[lead:], "Squeeze", list(range(lead)), "trailing")
        st.set_attr("broadcast", 1)
        st.note(f"broadcast=1 for C of shape {sc}, {how}")
        return
    raise Refuse(f"C of shape {sc} vs Y of shape {sy}: Gemm-6 broadcasts only trailing shapes")


@at(11, "Gemm")
def gemm_optional_c(st: Step) -> None:
    if st.up or st.input(2):
        return
    t = st.elem_type(st.input(0))
    if t is None:
        raise Refuse("C is absent and the element type of A is unknown")
    c = st.add_const("C_zero", np.zeros((), np_dtype(t)))
    st.set_inputs([st.input(0), st.input(1), c])
    st.note("C made explicit as a scalar zero")

