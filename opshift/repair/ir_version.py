"""The IR version: raised when older than the opsets and features need, lowered when newer
than the opset's (never below what imports and features need, and never when the model uses
a feature whose IR version opshift cannot date)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx
from onnx import helper

from .. import opsets
from ..graph.scopes import may_hold_subgraphs, subgraphs

if TYPE_CHECKING:
    from .fixer import Fixer

_A = onnx.AttributeProto


def fix_ir_version(fx: Fixer) -> None:
    """Raise or lower the declared IR version to what the opsets and features need."""
    m = fx.model
    declared = m.ir_version
    seen = _Features(m)
    need = seen.need
    opset = opsets.opset_of(m)
    if declared < need:
        m.ir_version = need
        fx.change("ir_version", "model", "", f"IR version {declared} -> {need}",
                    f"IR {declared} is too old for {_imports_str(m)}"
                    + (" and the features the model uses" if need > _ir_for_imports(m)
                       else ""))
    elif declared > need:
        undatable = seen.undatable()
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


_NODE_FIELDS = onnx.NodeProto.DESCRIPTOR.fields_by_name
_ODD = (_A.SPARSE_TENSOR, _A.SPARSE_TENSORS, _A.TYPE_PROTO, _A.TYPE_PROTOS)
_TYPE_ATTRIBUTES = ("to", "dtype", "output_dtype")
#: the installed onnx has the node fields of IR 10 (overload, metadata_props)
_IR10_NODES = "overload" in _NODE_FIELDS and "metadata_props" in _NODE_FIELDS


class _Features:
    """What the IR version depends on. :attr:`need`, the minimum IR version the imports and
    datable features need, comes from one walk of every graph (subgraphs included) and
    function body that reads each node's fields and only the attributes of nodes that can
    hold graphs; :meth:`undatable`, read only when the declared version is above that,
    looks at every element type and attribute."""

    def __init__(self, m: onnx.ModelProto):
        self.model = m
        need = _ir_for_imports(m)
        if len(m.functions):
            need = max(need, 8)  # model-local functions (IR 8)
        self._initializers = need < 4  # (else no need to look for IR 4's feature)
        #: look for node overloads and metadata (IR 10) unless the imports need IR 10
        self._ir10 = need < 10
        self.initializer_not_input = self.node_ir10 = False
        self._graph(m.graph)
        for f in m.functions:
            self._nodes(f.node)
        if self.initializer_not_input:
            need = max(need, 4)  # initializers that are not graph inputs (IR 4)
        if self.node_ir10 or any(
                getattr(f, "overload", "") or len(getattr(f, "value_info", []))
                or len(getattr(f, "metadata_props", [])) for f in m.functions):
            need = max(need, 10)  # overloads, node metadata, function value_info (IR 10)
        self.need = need

    def _graph(self, g: onnx.GraphProto) -> None:
        if self._initializers and not self.initializer_not_input and len(g.initializer):
            self.initializer_not_input = not {t.name for t in g.initializer} <= {
                v.name for v in g.input}
        self._nodes(g.node)

    def _nodes(self, nodes) -> None:
        if self._ir10 and not self.node_ir10 and _IR10_NODES:
            self.node_ir10 = any(n.overload or n.metadata_props for n in nodes)
        kinds = {(n.domain, n.op_type) for n in nodes}
        holders = {op for d, op in kinds if may_hold_subgraphs(d, op)}
        for n in nodes if holders else ():
            if n.op_type in holders:
                for _, g in subgraphs(n):
                    self._graph(g)

    def undatable(self) -> str:
        """The name of a feature whose IR version opshift cannot date, or ''."""
        m = self.model
        if len(m.training_info) or m.graph.sparse_initializer:
            return "training info or sparse initializers"
        self.types: dict[int, None] = {}  # in the order met
        self.non_tensor = self.odd_attribute = self.device_configurations = False
        self._graph_types(m.graph)
        for f in m.functions:
            self._node_types(f.node)
        for t in self.types:
            if t not in _IR3_TYPES:
                return f"element type {onnx.TensorProto.DataType.Name(t)}"
        if self.odd_attribute:
            return "sparse tensor or type attributes"
        if self.non_tensor:
            return "sequence, map or optional types"
        if len(getattr(m, "configuration", [])) or self.device_configurations:
            return "device configurations"
        return ""

    def _graph_types(self, g: onnx.GraphProto) -> None:
        """Element types of initializers, declared values and tensor or type attributes."""
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
        self._node_types(g.node)

    def _node_types(self, nodes) -> None:
        devices = "device_configurations" in _NODE_FIELDS
        for n in nodes:
            if devices and len(n.device_configurations):
                self.device_configurations = True
            for a in n.attribute:
                t = a.type
                if t == _A.TENSOR:
                    self.types[a.t.data_type] = None
                elif t == _A.INT:
                    if a.i and a.name in _TYPE_ATTRIBUTES:
                        self.types[a.i] = None
                elif t == _A.GRAPH:
                    self._graph_types(a.g)
                elif t == _A.GRAPHS:
                    for g in a.graphs:
                        self._graph_types(g)
                elif t in _ODD:
                    self.odd_attribute = True
