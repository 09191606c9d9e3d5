"""convert: a constant reshaped in place gets its new shape in every entry declaring it."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from opshift.convert.engine import convert_proto


def _legacy_prelus(n: int) -> onnx.ModelProto:
    """Opset 6, IR 3: ``n`` PRelus in a chain, each with its own per-channel [3] slope, a
    graph input (as IR 3 requires) that a value_info entry declares too."""
    nodes, inits, inputs, infos = [], [], [helper.make_tensor_value_info(
        "x", TP.FLOAT, [1, 3, 2, 2])], []
    prev = "x"
    for k in range(n):
        slope = f"slope{k}"
        inits.append(numpy_helper.from_array(np.full(3, 0.25 * (k + 1), np.float32), slope))
        inputs.append(helper.make_tensor_value_info(slope, TP.FLOAT, [3]))
        infos.append(helper.make_tensor_value_info(slope, TP.FLOAT, [3]))
        nodes.append(helper.make_node("PRelu", [prev, slope], [f"y{k}"], name=f"p{k}"))
        infos.append(helper.make_tensor_value_info(f"y{k}", TP.FLOAT, [1, 3, 2, 2]))
        prev = f"y{k}"
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(
        prev, TP.FLOAT, [1, 3, 2, 2])], inits, value_info=infos[:-1])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 6)], ir_version=3)


def _dims(vi: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in vi.type.tensor_type.shape.dim]


def test_every_declaration_of_a_reshaped_slope_gets_its_new_shape():
    m = _legacy_prelus(3)
    res = convert_proto(m, 17)
    assert [c.what for c in res.changes] == [
        f"PRelu-6->7: slope 'slope{k}' reshaped in place to [3, 1, 1]" for k in range(3)]
    g = m.graph
    assert [list(t.dims) for t in g.initializer] == [[3, 1, 1]] * 3
    declared = [vi for vi in (*g.input, *g.value_info) if vi.name.startswith("slope")]
    assert len(declared) == 6
    assert all(_dims(vi) == [3, 1, 1] for vi in declared)
    assert _dims(g.input[0]) == [1, 3, 2, 2]  # X and the outputs keep theirs
    assert all(_dims(vi) == [1, 3, 2, 2] for vi in g.value_info if vi.name.startswith("y"))
