"""Element types that follow from a node alone: the rules inline's type propagation and the
structural check's census share (no shape inference; ops whose output type needs more are
left untyped, and callers fall back to onnx's inference)."""

from __future__ import annotations

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
