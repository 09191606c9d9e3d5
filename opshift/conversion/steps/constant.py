"""Constant: **9** (only float types before 9: others become an initializer going down),
**11** (sparse_value), **12** (value_* attributes written as a value tensor going down).

ConstantOfShape exists from 9. Below, a node of it is written as what it means, its value
broadcast to the shape its input gives: an Expand of the value (from 8, any shape input), a
Tile of the value as ``[1] * rank`` by the shape (6 and 7: the shape's length must be
known), below 6 the tensor itself when the shape is a constant (at most
:data:`LARGEST_FOLD` bytes).
"""

from __future__ import annotations

import numpy as np
import onnx

from ...graph.edit import constant_node
from ..registry import at, replaces
from ..step import Refuse, Step


@at(12, "Constant")
def constant_value_attrs(st: Step) -> None:
    if st.up:
        return
    for a in st.w.attribute:
        if a.name.startswith("value_"):
            v = onnx.helper.get_attribute_value(a)
            if a.name in ("value_string", "value_strings"):
                arr = np.array(v, dtype=object)
            else:
                arr = np.array(v, np.float32 if "float" in a.name else np.int64)
            name = a.name
            st.del_attr(name)
            st.set_attr("value", onnx.numpy_helper.from_array(arr))
            st.note(f"{name} written as a value tensor")
            return


@at(9, "Constant")
def constant_as_initializer(st: Step) -> None:
    if st.up or st.scope.graph is None:
        return
    t = st.w.attribute[0].t if st.w.attribute and st.w.attribute[0].name == "value" else None
    if t is None or t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                                    onnx.TensorProto.FLOAT16):
        return
    tensor = onnx.TensorProto()
    tensor.CopyFrom(t)
    tensor.name = st.w.output[0]
    st.ctx.edits.add_initializer(st.state.pending, st.scope, tensor)
    st.remove(f"{onnx.TensorProto.DataType.Name(t.data_type)} Constant (float types only "
              "before 9) turned into an initializer")


@at(11, "Constant")
def constant_sparse(st: Step) -> None:
    if not st.up and st.has_attr("sparse_value"):
        raise Refuse("sparse_value exists only from Constant-11")



#: the most bytes a ConstantOfShape below opset 6 is written out as a tensor
LARGEST_FOLD = 256 << 20
_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16)


@replaces("ConstantOfShape")
def constant_of_shape_below_9(st: Step) -> None:
    t = st.attr("value")
    value = (np.zeros((), np.float32) if t is None
             else onnx.numpy_helper.to_array(t).reshape(()))
    elem = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
    if st.scope.graph is None and elem not in _FLOATS:
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
        length = st.shape(shape_in)
        rank = len(dims) if dims is not None else (
            length[0] if length and isinstance(length[0], int) else None)
        if rank is None:
            raise Refuse("the length of its shape input is unknown: Tile-6 needs the value "
                         "as a tensor of that rank")
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
