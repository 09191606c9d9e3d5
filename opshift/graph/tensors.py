"""Tensor values: every read of a tensor's data goes through :func:`tensor_array`."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..opsets import normalize_domain

#: TensorProto data_type -> (little-endian numpy dtype, typed field), for the plain types whose
#: decoding is a straight copy.
_PLAIN_TENSOR_TYPES = {
    onnx.TensorProto.FLOAT: (np.dtype("<f4"), "float_data"),
    onnx.TensorProto.DOUBLE: (np.dtype("<f8"), "double_data"),
    onnx.TensorProto.INT64: (np.dtype("<i8"), "int64_data"),
    onnx.TensorProto.INT32: (np.dtype("<i4"), "int32_data"),
}


def plain_array(t: onnx.TensorProto) -> np.ndarray | None:
    """The value of an in-memory tensor of a plain type (float, double, int64, int32),
    decoded directly; None for other tensors. The constants the passes and fusion checks
    read are mostly such small tensors, and numpy_helper's general decoding (and its set-up
    on first use, ~0.2 ms a process) costs more than the rest of reading them."""
    if t.data_location != onnx.TensorProto.DEFAULT:
        return None
    plain = _PLAIN_TENSOR_TYPES.get(t.data_type)
    if plain is None:
        return None
    dtype, field_name = plain
    if t.HasField("raw_data"):
        arr = np.frombuffer(t.raw_data, dtype=dtype)
    else:
        arr = np.array(list(getattr(t, field_name)), dtype=dtype)
    dims = tuple(t.dims) if len(t.dims) else ()  # (tuple() of an empty field costs ~2 us)
    return arr.reshape(dims) if arr.size == math.prod(dims) else None


def tensor_array(t: onnx.TensorProto, base_dir: str | None = None) -> np.ndarray:
    """The value of ``t`` (external data read from ``base_dir``)."""
    arr = plain_array(t)
    return arr if arr is not None else numpy_helper.to_array(t, base_dir or "")


_CONSTANT_VALUE_ATTRS = ("value_float", "value_floats", "value_int", "value_ints")


def constant_tensor(node: onnx.NodeProto) -> onnx.TensorProto | None:
    """The tensor a default-domain Constant node makes (``value``, or a new tensor for
    ``value_float(s)``/``value_int(s)``); None for other nodes and other Constants."""
    if node.op_type != "Constant" or normalize_domain(node.domain) != "":
        return None
    for a in node.attribute:
        if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
            return a.t
        if a.name in _CONSTANT_VALUE_ATTRS:
            v = helper.get_attribute_value(a)
            dtype = np.float32 if "float" in a.name else np.int64
            return numpy_helper.from_array(np.array(v, dtype=dtype))
    return None


def held_tensor(node: onnx.NodeProto) -> onnx.TensorProto | None:
    """The tensor a Constant node holds as its one ``value`` attribute (which an edit may
    change in place); None otherwise."""
    if (node.op_type == "Constant" and normalize_domain(node.domain) == ""
            and len(node.output) == 1 and len(node.attribute) == 1
            and node.attribute[0].name == "value"
            and node.attribute[0].type == onnx.AttributeProto.TENSOR):
        return node.attribute[0].t
    return None
