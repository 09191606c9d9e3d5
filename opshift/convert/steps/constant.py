"""Constant: **9** (only float types before 9: others become an initializer going down),
**11** (sparse_value), **12** (value_* attributes written as a value tensor going down).
"""

from __future__ import annotations

import numpy as np
import onnx

from opshift.convert.registry import at
from opshift.convert.step import OPSET_1_FLOATS, Refuse, Step


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
    if t is None or t.data_type in OPSET_1_FLOATS:
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
