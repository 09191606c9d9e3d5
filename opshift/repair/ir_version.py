"""The IR version: raised when older than the opsets and features need, lowered when newer
than the opset's (never below what imports and features need, and never when the model uses
a feature whose IR version opshift cannot date)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import onnx
from onnx import helper

from .. import opsets
from ..graph.scopes import subgraphs, walk_nodes

if TYPE_CHECKING:
    from .fixer import Fixer

_A = onnx.AttributeProto


def fix_ir_version(fx: Fixer) -> None:
    """Raise or lower the declared IR version to what the opsets and features need."""
    m = fx.model
    declared = m.ir_version
    need, undatable = _ir_needed(m)
    opset = opsets.opset_of(m)
    if declared < need:
        m.ir_version = need
        fx.change("ir_version", "model", "", f"IR version {declared} -> {need}",
                    f"IR {declared} is too old for {_imports_str(m)}"
                    + (" and the features the model uses" if need > _ir_for_imports(m)
                       else ""))
    elif declared > need:
        if undatable:
            if declared > onnx.IR_VERSION:
                fx.refuse("ir_version", "model", "", f"IR version {declared} is newer "
                            f"than the installed onnx knows ({onnx.IR_VERSION})",
                            f"the model uses {undatable}, whose IR version opshift "
                            "cannot date")
            return
        m.ir_version = need
        fx.change("ir_version", "model", "", f"IR version {declared} -> {need}",
                    f"IR {declared} is newer than opset {opset} and the model's features "
                    f"need (IR {need}); runtimes of that opset's era reject it")



def _imports_str(m: onnx.ModelProto) -> str:
    return ", ".join(f"{i.domain or 'ai.onnx'} {i.version}" for i in m.opset_import)


def _ir_for_imports(m: onnx.ModelProto) -> int:
    ids = [helper.make_opsetid(opsets.normalize_domain(i.domain), i.version)
           for i in m.opset_import]
    return helper.find_min_ir_version_for(ids, ignore_unknown=True)


#: Tensor element types introduced after IR 3, with the IR version that introduced them.
#: Types not listed here and not in the IR 3 set make the IR version undatable (never lowered).
_IR3_TYPES = {getattr(onnx.TensorProto, n) for n in (
    "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING", "BOOL", "FLOAT16",
    "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128")}


def _ir_needed(m: onnx.ModelProto) -> tuple[int, str]:
    """(minimum IR version the imports and datable features need, name of an undatable
    feature or '')."""
    need = _ir_for_imports(m)
    undatable = ""
    if len(m.functions):
        need = max(need, 8)  # model-local functions (IR 8)
    for g in _all_graphs(m):
        inputs = {v.name for v in g.input}
        if any(t.name not in inputs for t in g.initializer):
            need = max(need, 4)  # initializers that are not graph inputs (IR 4)
            break
    if any(getattr(f, "overload", "") for f in m.functions) or any(
            getattr(n, "overload", "") for n in _all_nodes(m)):
        need = max(need, 10)
    if len(m.training_info) or m.graph.sparse_initializer:
        undatable = "training info or sparse initializers"
    for t in _all_types(m):
        if t not in _IR3_TYPES:
            undatable = undatable or f"element type {onnx.TensorProto.DataType.Name(t)}"
    odd = (_A.SPARSE_TENSOR, _A.SPARSE_TENSORS, _A.TYPE_PROTO, _A.TYPE_PROTOS)
    if any(a.type in odd for n in _all_nodes(m) for a in n.attribute):
        undatable = undatable or "sparse tensor or type attributes"
    if _has_non_tensor_types(m):
        undatable = undatable or "sequence, map or optional types"
    if any(len(getattr(n, "metadata_props", [])) for n in _all_nodes(m)) or any(
            len(getattr(f, "value_info", [])) or len(getattr(f, "metadata_props", []))
            for f in m.functions):
        need = max(need, 10)  # node metadata, function value_info/metadata (IR 10)
    if len(getattr(m, "configuration", [])) or any(
            len(getattr(n, "device_configurations", [])) for n in _all_nodes(m)):
        undatable = undatable or "device configurations"
    return need, undatable


def _all_nodes(m: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    yield from walk_nodes(m.graph.node)
    for f in m.functions:
        yield from walk_nodes(f.node)


def _all_graphs(m: onnx.ModelProto) -> Iterator[onnx.GraphProto]:
    yield m.graph
    for n in _all_nodes(m):
        for _, g in subgraphs(n):
            yield g


def _all_types(m: onnx.ModelProto) -> Iterator[int]:
    for g in _all_graphs(m):
        for t in g.initializer:
            yield t.data_type
        for vi in (*g.input, *g.output, *g.value_info):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                yield vi.type.tensor_type.elem_type
    for n in _all_nodes(m):
        for a in n.attribute:
            if a.type == _A.TENSOR:
                yield a.t.data_type
            elif a.type == _A.INT and a.name in ("to", "dtype", "output_dtype") and a.i:
                yield a.i


def _has_non_tensor_types(m: onnx.ModelProto) -> bool:
    for g in _all_graphs(m):
        for vi in (*g.input, *g.output, *g.value_info):
            if vi.type.WhichOneof("value") not in (None, "tensor_type"):
                return True
    return False

