"""The IR version: raised when older than the opsets and features need, lowered when newer
than the opset's (never below what imports and features need, and never when the model uses
a feature whose IR version opshift cannot date)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx
from onnx import helper

from .. import opsets

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
    seen = _Features(m, initializers=need < 4)
    if seen.initializer_not_input:
        need = max(need, 4)  # initializers that are not graph inputs (IR 4)
    if seen.node_overload or any(getattr(f, "overload", "") for f in m.functions):
        need = max(need, 10)
    if len(m.training_info) or m.graph.sparse_initializer:
        undatable = "training info or sparse initializers"
    for t in seen.types:
        if t not in _IR3_TYPES:
            undatable = undatable or f"element type {onnx.TensorProto.DataType.Name(t)}"
    if seen.odd_attribute:
        undatable = undatable or "sparse tensor or type attributes"
    if seen.non_tensor:
        undatable = undatable or "sequence, map or optional types"
    if seen.node_metadata or any(
            len(getattr(f, "value_info", [])) or len(getattr(f, "metadata_props", []))
            for f in m.functions):
        need = max(need, 10)  # node metadata, function value_info/metadata (IR 10)
    if len(getattr(m, "configuration", [])) or seen.device_configurations:
        undatable = undatable or "device configurations"
    return need, undatable


_NODE_FIELDS = onnx.NodeProto.DESCRIPTOR.fields_by_name
_ODD = (_A.SPARSE_TENSOR, _A.SPARSE_TENSORS, _A.TYPE_PROTO, _A.TYPE_PROTOS)
_TYPE_ATTRIBUTES = ("to", "dtype", "output_dtype")


class _Features:
    """What the IR version depends on, found in one walk of every graph (subgraphs
    included) and function body: element types (initializers, declared values, tensor
    attributes, type attributes), and the features later IR versions introduced."""

    def __init__(self, m: onnx.ModelProto, *, initializers: bool):
        """``initializers``: look for an initializer that is not a graph input (IR 4);
        not needed when the imports already need IR 4."""
        self._initializers = initializers
        self.types: dict[int, None] = {}  # in the order met
        self.initializer_not_input = self.non_tensor = self.odd_attribute = False
        self.node_overload = self.node_metadata = self.device_configurations = False
        self._graph(m.graph)
        for f in m.functions:
            self._nodes(f.node)

    def _graph(self, g: onnx.GraphProto) -> None:
        if self._initializers and not self.initializer_not_input and len(g.initializer):
            self.initializer_not_input = not {t.name for t in g.initializer} <= {
                v.name for v in g.input}
        self.types.update(dict.fromkeys(t.data_type for t in g.initializer))
        for infos in (g.input, g.output, g.value_info):
            for data in {vi.type.SerializeToString() for vi in infos}:  # each type once
                tp = onnx.TypeProto.FromString(data)
                kind = tp.WhichOneof("value")
                if kind == "tensor_type":
                    if tp.tensor_type.elem_type:
                        self.types[tp.tensor_type.elem_type] = None
                elif kind is not None:
                    self.non_tensor = True
        self._nodes(g.node)

    def _nodes(self, nodes) -> None:
        overload = "overload" in _NODE_FIELDS
        metadata = "metadata_props" in _NODE_FIELDS
        devices = "device_configurations" in _NODE_FIELDS
        for n in nodes:
            for a in n.attribute:
                t = a.type
                if t == _A.TENSOR:
                    self.types[a.t.data_type] = None
                elif t == _A.INT:
                    if a.i and a.name in _TYPE_ATTRIBUTES:
                        self.types[a.i] = None
                elif t == _A.GRAPH:
                    self._graph(a.g)
                elif t == _A.GRAPHS:
                    for g in a.graphs:
                        self._graph(g)
                elif t in _ODD:
                    self.odd_attribute = True
            if overload and n.overload:
                self.node_overload = True
            if metadata and len(n.metadata_props):
                self.node_metadata = True
            if devices and len(n.device_configurations):
                self.device_configurations = True
