"""Element types that follow from a node alone: the rules inline's type propagation and the
structural check's census share (no shape inference; ops whose output type needs more are
left untyped, and callers fall back to onnx's inference)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import onnx
from onnx import TensorProto

#: Default-domain ops whose first output has the element type of their first input.
SAME_TYPE_OPS = frozenset((
    "Abs", "Add", "AveragePool", "BatchNormalization", "Ceil", "Clip", "Concat", "Conv",
    "ConvTranspose", "Div", "Dropout", "Elu", "Exp", "Expand", "Flatten", "Floor", "Gather",
    "Gemm", "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid", "Identity",
    "InstanceNormalization", "LRN", "LeakyRelu", "Log", "LogSoftmax", "MatMul", "Max",
    "MaxPool", "Mean", "Min", "Mul", "Neg", "Pad", "PRelu", "Reciprocal", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceSum", "Relu", "Reshape", "Resize", "Selu", "Sigmoid",
    "Slice", "Softmax", "Softplus", "Softsign", "Split", "Sqrt", "Squeeze", "Sub", "Sum",
    "Tanh", "Tile", "Transpose", "Unsqueeze", "Upsample", "LayerNormalization",
    "Sin", "Cos", "Erf", "Gelu", "HardSwish", "Mish", "ThresholdedRelu", "Celu",
))


def fixed_type(n: onnx.NodeProto) -> int:
    """The element type a Constant or Cast node gives its output whatever its inputs (0 for
    other nodes or when unknown)."""
    op = n.op_type
    t = 0
    if op == "Constant" and n.attribute:
        a = n.attribute[0]
        if a.type == onnx.AttributeProto.TENSOR:
            t = a.t.data_type
        elif a.type == onnx.AttributeProto.FLOAT:
            t = TensorProto.FLOAT
        elif a.type == onnx.AttributeProto.INT:
            t = TensorProto.INT64
    elif op == "Cast":
        for a in n.attribute:
            if a.name == "to" and a.type == onnx.AttributeProto.STRING:
                t = TensorProto.DataType.Value(a.s.decode())
            elif a.name == "to":
                t = a.i
    return t


#: How a default-domain node's first output type follows (see :func:`rule`).
FIXED, FIRST, SECOND = 1, 2, 3


def rule(op: str) -> int:
    """How default-domain ``op``'s first output gets its element type: FIXED (Constant,
    Cast: :func:`fixed_type`), FIRST / SECOND (that of its first / second input: the
    same-type ops; Where), or 0 (not without inference)."""
    if op in ("Constant", "Cast"):
        return FIXED
    if op == "Where":
        return SECOND
    return FIRST if op in SAME_TYPE_OPS else 0


def propagate(how: int, n: onnx.NodeProto, ins: Sequence[str], out: str,
              types: dict[str, int]) -> None:
    """Record in ``types`` the type :func:`rule` ``how`` gives ``out``, ``n``'s first output
    (``ins`` its inputs): a fixed type overrides, a followed one keeps a declared type."""
    if how == FIXED:
        t = fixed_type(n)
        if t:
            types[out] = t
    elif how == FIRST:
        if ins and ins[0] in types:
            types.setdefault(out, types[ins[0]])
    elif how == SECOND and len(ins) == 3 and ins[1] in types:
        types.setdefault(out, types[ins[1]])


def value_info_types(types: dict[str, int], infos: Iterable[onnx.ValueInfoProto]) -> None:
    """Record the tensor element types ``infos`` declare."""
    for v in infos:
        if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type:
            types[v.name] = v.type.tensor_type.elem_type


def declared_types(types: dict[str, int], g: onnx.GraphProto) -> None:
    """Record the element types ``g`` declares: inputs, value_info, outputs, then
    initializers."""
    for infos in (g.input, g.value_info, g.output):
        value_info_types(types, infos)
    for t in g.initializer:
        types[t.name] = t.data_type
