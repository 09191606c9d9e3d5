"""The values a model computes, as the evaluator holds them, and the check of a fed value
against the type a graph declares for it.

A tensor is an ``np.ndarray``; a sequence a ``list`` of its elements; a map a ``dict`` from
int or str keys to its values (numpy scalars for tensor values, as ZipMap gives them). An
optional holds its element as that element is held, and an empty optional is ``None``, as an
absent optional input is: Optional(x) is x and OptionalHasElement(v) is ``v is not None``,
which is what ONNX says of both (an optional sequence holding an empty sequence is ``[]``,
not ``None``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from opshift.errors import EvaluationError
from opshift.graph.declared import dims as declared_dims

Value = Any  # np.ndarray, list, dict, or None (an empty optional, an absent input)


def checked(tp: onnx.TypeProto, v: Value, what: str) -> Value:
    """``v`` as a value of type ``tp``, each tensor in it an ndarray (anything
    ``np.asarray`` takes is one) of the declared element type, rank and fixed dims;
    EvaluationError naming ``what`` when it does not fit. An undeclared type takes any
    value."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":  # (a list is array-like: numpy's rules make it a tensor)
        if isinstance(v, dict) or v is None:
            raise EvaluationError(f"{what}: {describe(v)} given, the model declares a tensor")
        return _tensor(tp.tensor_type, v, what)
    if kind == "sequence_type":
        if not isinstance(v, (list, tuple)):
            raise EvaluationError(f"{what}: {describe(v)} given, the model declares a "
                                  "sequence")
        elem = tp.sequence_type.elem_type
        return [checked(elem, x, f"{what}, element {i}") for i, x in enumerate(v)]
    if kind == "map_type":
        if not isinstance(v, dict):
            raise EvaluationError(f"{what}: {describe(v)} given, the model declares a map")
        key = _MAP_KEYS.get(tp.map_type.key_type)
        if key is None:
            raise EvaluationError(f"{what}: the model declares map keys of type "
                                  f"{tp.map_type.key_type}, which ONNX does not allow")
        out = {}
        for k, x in v.items():
            if isinstance(k, np.generic):
                k = k.item()
            if not isinstance(k, key) or isinstance(k, bool):
                raise EvaluationError(f"{what}: key {k!r} is not {key.__name__}, the map's "
                                      "declared key type")
            vt = tp.map_type.value_type
            if isinstance(x, (int, float, str)) and vt.tensor_type.elem_type:
                # a Python value as the declared element type (a map's values are scalars)
                x = np.asarray(x, onnx.helper.tensor_dtype_to_np_dtype(
                    vt.tensor_type.elem_type))
            out[k] = _scalars(checked(vt, x, f"{what}[{k!r}]"))
        return out
    if kind == "optional_type":
        return None if v is None else checked(tp.optional_type.elem_type, v, what)
    return v if isinstance(v, (list, dict)) or v is None else np.asarray(v)


_MAP_KEYS = {onnx.TensorProto.STRING: str, **dict.fromkeys(
    (onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32,
     onnx.TensorProto.INT64, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
     onnx.TensorProto.UINT32, onnx.TensorProto.UINT64), int)}


def held(tp: onnx.TypeProto, v: Any) -> Value:
    """``v`` (another runtime's output: onnxruntime gives a map's values as Python floats) in
    the evaluator's form for declared type ``tp``: map values as numpy scalars of the
    declared element type; nothing is checked."""
    kind = tp.WhichOneof("value")
    if kind == "sequence_type" and isinstance(v, (list, tuple)):
        return [held(tp.sequence_type.elem_type, x) for x in v]
    if kind == "optional_type":
        return None if v is None else held(tp.optional_type.elem_type, v)
    if kind == "map_type" and isinstance(v, dict):
        elem = tp.map_type.value_type.tensor_type.elem_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem) if elem else None
        return {k: _scalars(np.asarray(x, dtype)) if isinstance(x, (int, float)) and dtype
                else x for k, x in v.items()}
    return v


def _scalars(v: Value) -> Value:
    """A map's 0-d tensor values as numpy scalars, as the evaluator's maps hold them."""
    return v[()] if isinstance(v, np.ndarray) and v.ndim == 0 else v


def _tensor(tt: onnx.TypeProto.Tensor, v: Any, what: str) -> np.ndarray:
    try:
        v = np.asarray(v)
    except (ValueError, TypeError) as e:  # a ragged list, say
        raise EvaluationError(f"{what}: not a tensor: {e}") from None
    if tt.elem_type:
        want = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if v.dtype != want:
            raise EvaluationError(f"{what}: dtype {v.dtype} given, the model declares "
                                  f"{np.dtype(want)}")
    if tt.HasField("shape"):
        dims = tt.shape.dim
        if len(dims) != v.ndim:
            raise EvaluationError(f"{what}: rank {v.ndim} given (shape {list(v.shape)}), the "
                                  f"model declares rank {len(dims)}")
        for i, d in enumerate(declared_dims(tt.shape)):
            if isinstance(d, int) and d != v.shape[i]:
                raise EvaluationError(f"{what}: dim {i} is {v.shape[i]}, the model declares "
                                      f"{d}")
    return v


def type_of(v: Value) -> onnx.TypeProto:
    """The type of value ``v`` as a TypeProto: a tensor's element type and shape; a
    sequence's element type (of its first element; shapes left out: they may differ); a map's
    key and value types; an empty TypeProto for None (an empty optional, an absent input)."""
    if isinstance(v, np.ndarray):
        return onnx.helper.make_tensor_type_proto(
            onnx.helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
    if isinstance(v, (list, tuple)):
        elem = type_of(v[0]) if v else onnx.TypeProto()
        if elem.HasField("tensor_type"):
            elem.tensor_type.ClearField("shape")
        return onnx.helper.make_sequence_type_proto(elem)
    if isinstance(v, dict) and v:
        k, x = next(iter(v.items()))
        key = onnx.TensorProto.STRING if isinstance(k, str) else onnx.TensorProto.INT64
        return onnx.helper.make_map_type_proto(key, type_of(np.asarray(x)))
    return onnx.TypeProto()


def dtype_and_shape(v: Value) -> tuple[str, list[int] | None]:
    """What reports list of a value: a tensor's dtype name and shape, another value's kind
    (:func:`describe`) and no shape."""
    if isinstance(v, (np.ndarray, np.generic)):
        return str(v.dtype), [int(d) for d in np.shape(v)]
    return describe(v), None


def describe(v: Value) -> str:
    """A short name of ``v``'s kind and type: ``float32 tensor``, ``sequence[3] of float32
    tensor``, ``map(int -> float32)``, ``empty optional``."""
    if v is None:
        return "empty optional"
    if isinstance(v, (list, tuple)):
        kinds = {describe(x) for x in v}
        inner = kinds.pop() if len(kinds) == 1 else "mixed values"
        return f"sequence[{len(v)}]" + (f" of {inner}" if v else "")
    if isinstance(v, dict):
        if not v:
            return "empty map"
        k, x = next(iter(v.items()))
        value = "string" if isinstance(x, str) else str(np.asarray(x).dtype)
        return f"map({'string' if isinstance(k, str) else 'int'} -> {value})"
    if isinstance(v, (np.ndarray, np.generic)):
        return f"{v.dtype} tensor"
    return type(v).__name__
