"""Ops that broadcast a tensor to a shape, below the opset they start at.

* **ConstantOfShape** (from 9) is its value broadcast to the shape its input gives: an
  Expand of the value (8, any shape input), a Tile of the value as ``[1] * rank`` by the
  shape (6 and 7: the shape's length must be known), below 6 the tensor itself when the
  shape is a constant (at most :data:`LARGEST_FOLD` bytes).
* **Expand** (from 8) is X tiled where its dims are 1 (6 and 7): X is given the output's
  rank by an Unsqueeze of leading axes, then tiled by the shape on the axes where X's dim is
  1 and by 1 elsewhere. Which of X's dims are 1 must be known; a computed shape gives the
  repeats through integer Mul and Add with constant masks.

Tile copies values, so both are exact for every element type (no arithmetic on X: an
``X + zeros`` broadcast would turn -0.0 into +0.0).
"""

from __future__ import annotations

import numpy as np
import onnx

from opshift.convert.registry import replaces
from opshift.convert.step import OPSET_1_FLOATS, Refuse, Step
from opshift.graph.edit import constant_node

#: the most bytes a ConstantOfShape below opset 6 is written out as a tensor
LARGEST_FOLD = 256 << 20


@replaces("ConstantOfShape")
def constant_of_shape(st: Step) -> None:
    t = st.attr("value")
    value = (np.zeros((), np.float32) if t is None
             else onnx.numpy_helper.to_array(t).reshape(()))
    elem = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
    if st.scope.graph is None and elem not in OPSET_1_FLOATS:
        raise Refuse(f"its value is {onnx.TensorProto.DataType.Name(elem)}: inside a function "
                     "it would be a Constant node, which takes float types only before 9")
    shape_in, y = st.input(0), st.w.output[0]
    if st.target >= 8:
        v = st.add_const("value", value)
        st.add_node("Expand", [v, shape_in], "expand", output=y)
        st.remove("written as an Expand of its value to the shape")
        return
    dims = st.const(shape_in)
    if st.target >= 6:
        rank = _length(st, shape_in, dims, "Tile-6 needs the value as a tensor of that rank")
        v = st.add_const("value", value.reshape((1,) * rank))
        if rank == 0:
            st.add_node("Identity", [v], "scalar", output=y)
        else:
            st.add_node("Tile", [v, shape_in], "tile", output=y)
        st.remove(f"written as a Tile of its value as {[1] * rank} by the shape")
        return
    if dims is None:
        raise Refuse("its shape input is not a constant: below opset 6 (no Tile-6 or Expand) "
                     "only a constant shape can be written out as the tensor")
    shape = tuple(int(d) for d in dims.reshape(-1))
    if min(shape, default=0) < 0:
        raise Refuse(f"its shape {list(shape)} has a negative dim")
    nbytes = int(np.prod(shape, dtype=object)) * value.itemsize
    if nbytes > LARGEST_FOLD:
        raise Refuse(f"its tensor {list(shape)} would be {nbytes >> 20} MiB written out "
                     f"(below opset 6; the limit is {LARGEST_FOLD >> 20} MiB; from 6 it is a "
                     "Tile)")
    tensor = onnx.numpy_helper.from_array(np.full(shape, value, value.dtype), y)
    if st.scope.graph is not None:
        st.ctx.edits.add_initializer(st.state.pending, st.scope, tensor)
    else:
        st.state.pre.append(constant_node(y, tensor, st.fresh(f"{st.label}/value")))
        st.facts.add_constant(st.scope, y, tensor)
    st.remove(f"written out as its tensor {list(shape)} (constant shape)")


@replaces("Expand")
def expand(st: Step) -> None:
    if st.target < 6:
        raise Refuse("Tile-6 (which writes it from 6) does not exist either")
    x, shape_in, y = st.input(0), st.input(1), st.w.output[0]
    xs = st.shape(x)
    if xs is None:
        raise Refuse(f"the shape of X ({x!r}) is unknown: which of its dims are 1 decides "
                     "what is tiled")
    dims = st.const(shape_in)
    length = _length(st, shape_in, dims, "it gives the output's rank")
    rank = max(len(xs), length)
    xd = (1,) * (rank - len(xs)) + tuple(xs)
    sd = (None,) * (rank - length) + (tuple(int(d) for d in dims.reshape(-1)) if dims is not
                                      None else (None,) * length)
    if rank > len(xs):
        x = st.add_node("Unsqueeze", [x], "ranked", axes=list(range(rank - len(xs))))
    if dims is not None:
        for i, (a, b) in enumerate(zip(xd, sd)):
            if isinstance(a, int) and a not in (1, b) and b not in (None, 1):
                raise Refuse(f"dim {i} of X is {a}, which the shape's {b} cannot broadcast")
        full = np.array([1 if b is None else b for b in sd], np.int64)
    else:
        repeats = shape_in
        if rank > length:
            lead = st.add_const("leading_ones", np.ones(rank - length, np.int64))
            repeats = st.add_node("Concat", [lead, repeats], "aligned", axis=0)
    if all(isinstance(a, int) for a in xd):
        ones = np.array([a == 1 for a in xd], np.int64)
        if dims is not None:
            repeats = st.add_const("repeats", np.where(ones == 1, full, 1))
        else:
            repeats = tile_repeats(st, repeats, ones)
    else:  # which dims of X are 1 is known at run time only: the mask is read then
        if dims is not None:
            repeats = st.add_const("shape", full)
        tiled, kept = dims_of_one(st, st.add_node("Shape", [x], "x_shape"), rank, "x")
        repeats = st.add_node("Add", [st.add_node("Mul", [repeats, tiled], "masked"), kept],
                              "repeats")
    st.add_node("Tile", [x, repeats], "tile", output=y)
    st.remove("written as a Tile of X (given the output's rank) where its dims are 1")


def tile_repeats(st: Step, shape: str, tiled: np.ndarray) -> str:
    """The repeats of a Tile by ``shape`` (int64 ``[r]``, read at run time) on the axes where
    ``tiled`` (a constant 0/1 mask) is 1 and by 1 on the others: ``shape * tiled + (1 -
    tiled)``, integer arithmetic of one shape (no broadcasting: valid from 6)."""
    if tiled.all():
        return shape
    masked = st.add_node("Mul", [shape, st.add_const("tiled", tiled)], "masked")
    return st.add_node("Add", [masked, st.add_const("kept", 1 - tiled)], "repeats")


def dims_of_one(st: Step, dims: str, rank: int, what: str) -> tuple[str, str]:
    """Which of ``dims`` (an int64 shape of ``rank`` values, read at run time) are 1, and
    which are not, as int64 0/1 masks ``(m, 1 - m)``: integer arithmetic of one shape (no
    broadcasting: valid from 6)."""
    one = st.add_const("ones", np.ones(rank, np.int64))
    m = st.add_cast(st.add_node("Equal", [dims, one], f"{what}_dim_is_1"),
                    onnx.TensorProto.INT64, f"{what}_ones")
    return m, st.add_node("Sub", [one, m], f"{what}_others")


def _length(st: Step, shape_in: str, dims: np.ndarray | None, why: str) -> int:
    """The length of the 1-D shape input ``shape_in`` (``dims``: its value, if constant)."""
    if dims is not None:
        return int(dims.size)
    s = st.shape(shape_in)
    if s and len(s) == 1 and isinstance(s[0], int):
        return s[0]
    raise Refuse(f"the length of its shape input is unknown ({why})")
