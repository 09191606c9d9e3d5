"""Types are checked through optionals, sequences and type-giving attributes at every step
(issue 38, item 15): onnx's own version-converter cases that opshift wrote and that failed
onnx.checker's full check are refused, naming node, op and versions."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError

BF16 = h.make_tensor_type_proto(T.BFLOAT16, [2])
FLOAT = h.make_tensor_type_proto(T.FLOAT, [2])


def _has_element(tp: onnx.TypeProto) -> onnx.ModelProto:
    n = h.make_node("OptionalHasElement", ["x"], ["y"], name="ohe")
    g = h.make_graph([n], "g", [h.make_value_info("x", tp)],
                     [h.make_tensor_value_info("y", T.BOOL, [])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 28)], ir_version=14)
    onnx.checker.check_model(m, full_check=True)
    return m


@pytest.mark.parametrize("tp,spelled", [
    (BF16, "tensor(bfloat16)"),
    (h.make_optional_type_proto(BF16), "optional(tensor(bfloat16))"),
    (h.make_sequence_type_proto(BF16), "seq(tensor(bfloat16))"),
    (h.make_optional_type_proto(h.make_sequence_type_proto(BF16)),
     "optional(seq(tensor(bfloat16)))"),
])
def test_bfloat16_inside_optionals_and_sequences_refused_below_opset_19(tp, spelled):
    m = _has_element(tp)
    with pytest.raises(ConversionError) as e:
        convert_proto(m, 18)
    msg = str(e.value)
    assert "\n" not in msg and "'ohe'" in msg and "OptionalHasElement-28" in msg
    assert f"is {spelled}, not allowed at OptionalHasElement-18" in msg
    assert m.opset_import[0].version == 28  # unchanged


@pytest.mark.parametrize("tp", [h.make_optional_type_proto(FLOAT),
                                 h.make_sequence_type_proto(FLOAT),
                                 h.make_optional_type_proto(h.make_sequence_type_proto(FLOAT))])
def test_float_inside_optionals_and_sequences_still_converts(tp):
    m = _has_element(tp)
    convert_proto(m, 18)
    assert m.opset_import[0].version == 18
    onnx.checker.check_model(m, full_check=True)


def _quantize(dtype: int, declared: int | None) -> onnx.ModelProto:
    n = h.make_node("QuantizeLinear", ["x", "s"], ["y"], name="q", output_dtype=dtype)
    y = (onnx.ValueInfoProto(name="y", type=h.make_tensor_type_proto(0, [4]))
         if declared is None else h.make_tensor_value_info("y", declared, [4]))
    g = h.make_graph([n], "g", [h.make_tensor_value_info("x", T.FLOAT, [4])], [y],
                     [nh.from_array(np.float32(0.5), "s")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 28)], ir_version=14)


@pytest.mark.parametrize("dtype", [T.FLOAT6E2M3, T.FLOAT6E3M2])
@pytest.mark.parametrize("declared", [None, T.FLOAT, T.UINT8, "same"])
def test_quantize_output_dtype_a_lower_opset_lacks_is_refused(dtype, declared):
    """Whatever the graph declares for the output (as onnx's tests write it: float), the
    attribute gives its type; QuantizeLinear-25 has no float6 output."""
    m = _quantize(dtype, dtype if declared == "same" else declared)
    with pytest.raises(ConversionError) as e:
        convert_proto(m, 27)
    msg = str(e.value)
    name = T.DataType.Name(dtype).lower()
    assert "\n" not in msg and "'q'" in msg and "QuantizeLinear-28" in msg
    assert f"tensor({name}), not allowed at QuantizeLinear-25" in msg


def test_quantize_output_dtype_the_lower_opset_has_converts():
    m = _quantize(T.FLOAT8E4M3FN, T.FLOAT8E4M3FN)
    convert_proto(m, 27)
    assert m.opset_import[0].version == 27
    onnx.checker.check_model(m, full_check=True)
