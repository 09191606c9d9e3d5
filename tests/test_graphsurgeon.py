"""onnx-graphsurgeon plugin: methods registered via gs.Graph.register(), round trip through
the exported model, graph still usable by graphsurgeon afterwards."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import make_model, run_onnxruntime
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

gs = pytest.importorskip("onnx_graphsurgeon")
import opshift.plugins.graphsurgeon  # noqa: E402,F401  (registers the methods)
from opshift.errors import ConversionError  # noqa: E402
from opshift.evaluator import evaluate  # noqa: E402

vi = h.make_tensor_value_info
SLOPE = np.array([0.5, -0.25, 2.0], np.float32)


def _defect_model():
    """PRelu-9 with a legacy per-channel slope and a stale consumed_inputs, then Selu."""
    p = h.make_node("PRelu", ["x", "slope"], ["t"], name="p")
    p.attribute.append(h.make_attribute("consumed_inputs", [0, 0]))
    s = h.make_node("Selu", ["t"], ["y"], name="s", alpha=2, gamma=1.5)  # alpha as INT
    return make_model([p, s], [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 3, 4])],
                      opset=9, initializers=[nh.from_array(SLOPE, "slope")], ir_version=4)


def _want(x):
    t = np.where(x < 0, x * SLOPE.reshape(3, 1), x)
    e = np.float32(2.0) * (np.exp(t.astype(np.float64)) - 1)
    return (np.float32(1.5) * np.where(t > 0, t, e)).astype(np.float32)


def test_methods_registered():
    for name in ("opshift_convert", "opshift_inline", "opshift_fuse", "opshift_fix"):
        assert name in gs.Graph.GLOBAL_FUNC_MAP
        assert callable(getattr(gs.Graph(), name))


def test_fix_round_trip_and_graph_stays_usable(rng):
    graph = gs.import_onnx(_defect_model())
    out = graph.opshift_fix()
    assert out is graph  # in place, chainable like cleanup()/toposort()
    kinds = sorted(c.kind for c in graph.opshift_result.changes)
    assert kinds == ["attribute_type", "consumed_inputs", "prelu_slope"]
    # graphsurgeon still works on the result: look up, edit, clean up, sort, export
    tensors = graph.tensors()
    assert tensors["slope"].values.shape == (3, 1)
    dead = gs.Variable("dead", dtype=np.float32)
    graph.nodes.append(gs.Node("Relu", inputs=[tensors["x"]], outputs=[dead]))
    graph.cleanup().toposort()
    assert [n.op for n in graph.nodes] == ["PRelu", "Selu"]
    model = gs.export_onnx(graph)
    onnx.checker.check_model(model, full_check=True)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(evaluate(model, {"x": x})["y"], _want(x), rtol=1e-6)
    assert not graph.opshift_fix().opshift_result.modified  # nothing left to fix


def test_fix_refusal_leaves_graph_unchanged():
    n = h.make_node("LeakyRelu", ["x"], ["y"], name="lr")
    n.attribute.append(h.make_attribute("alpha", nh.from_array(np.array(0.1, np.float64))))
    graph = gs.import_onnx(make_model([n], [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])],
                                      opset=13))
    before = gs.export_onnx(graph).SerializeToString()
    with pytest.raises(ConversionError, match="node 'lr'"):
        graph.opshift_fix()
    assert gs.export_onnx(graph).SerializeToString() == before


def test_convert_round_trip(rng):
    graph = gs.import_onnx(opshift_fixed_model())
    assert graph.opshift_convert(16) is graph and graph.opset == 16
    graph.cleanup().toposort()
    model = gs.export_onnx(graph)
    onnx.checker.check_model(model, full_check=True)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(evaluate(model, {"x": x})["y"], _want(x), rtol=1e-6)


def test_inline_round_trip(rng):
    graph = gs.import_onnx(opshift_fixed_model())
    graph.opshift_inline().cleanup().toposort()
    assert not {"PRelu", "Selu"} & {n.op for n in graph.nodes}
    model = gs.export_onnx(graph)
    onnx.checker.check_model(model, full_check=True)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(evaluate(model, {"x": x})["y"], _want(x), rtol=1e-6)
    np.testing.assert_allclose(run_onnxruntime(model, {"x": x})[0], _want(x), rtol=1e-5)


def test_inline_then_fuse_round_trip(rng):
    graph = gs.import_onnx(opshift_fixed_model())
    graph.opshift_inline().opshift_fuse().cleanup().toposort()
    assert {n.op for n in graph.nodes} >= {"PRelu"}
    model = gs.export_onnx(graph)
    onnx.checker.check_model(model, full_check=True)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(evaluate(model, {"x": x})["y"], _want(x), rtol=1e-6)


def opshift_fixed_model():
    from opshift.fix import fix

    return fix(_defect_model())


def test_module_docstring_example_runs(tmp_path, monkeypatch):
    """The usage example in opshift.plugins.graphsurgeon's docstring runs as written."""
    doc = opshift.plugins.graphsurgeon.__doc__
    block = doc.split("::\n", 1)[1].split("\n\n", 2)
    code = "\n".join(line[4:] for line in "\n\n".join(block[:2]).splitlines())
    assert "opshift_fix().opshift_convert(13)" in code
    onnx.save(_defect_model(), tmp_path / "model.onnx")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "opshift.plugins.graphsurgeon docstring", "exec"), {})
    out = onnx.load(tmp_path / "model13.onnx")
    onnx.checker.check_model(out, full_check=True)
    assert [(i.domain, i.version) for i in out.opset_import] == [("", 13)]
