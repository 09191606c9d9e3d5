"""Cast at any opset: whether it converts between two element types there, and the node."""

from __future__ import annotations

import onnx
from onnx import helper

from opshift import opsets


def cast_supports(elem_from: int, elem_to: int, opset: int) -> bool:
    """Cast at ``opset`` of the default domain converts ``elem_from`` to ``elem_to``."""
    v = opsets.since_version("Cast", opset)
    if v is None:
        return False
    return (opsets.tensor_type(elem_from) in opsets.allowed_types("Cast", v, param="T1")
            and opsets.tensor_type(elem_to) in opsets.allowed_types("Cast", v, param="T2"))


def make_cast(inp: str, out: str, to: int, opset: int, name: str) -> onnx.NodeProto:
    """A Cast valid at ``opset`` (Cast-1 takes the type name as a string)."""
    if opsets.since_version("Cast", opset) == 1:
        return helper.make_node("Cast", [inp], [out], name=name,
                                to=onnx.TensorProto.DataType.Name(to))
    return helper.make_node("Cast", [inp], [out], name=name, to=to)
