"""convert across Scan 8 <-> 9 (a batch axis, or none), and the rewrite of a node holding a
subgraph: the edits planned inside its body are kept."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from conftest import assert_exact, onnxruntime_outputs
from onnx import TensorProto as T
from onnx import helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.verify import compare

F = T.FLOAT


def _converted(m: onnx.ModelProto, target: int):
    c = onnx.ModelProto()
    c.CopyFrom(m)
    res = convert_proto(c, target)
    onnx.checker.check_model(c, full_check=True)
    return c, res


def test_onnx_scan_node_tests_both_ways():
    """Scan-8's test (batch 1) up to 9..21, Scan-9's three tests down to 8: the same bits,
    models onnx's checker accepts; onnxruntime agrees where it runs them."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in collect_testcases(None) if c.name.startswith("test_scan")]
    assert len(cases) >= 4
    for c in cases:
        inputs, _ = c.data_sets[0]
        feeds = {v.name: x for v, x in zip(c.model.graph.input, inputs)}
        want = evaluate(c.model, feeds)
        for target in (8, 9, 11, 16, 21):
            m, _ = _converted(c.model, target)
            ops = [n.op_type for n in m.graph.node]
            assert ops.count("Scan") == 1, (c.name, target, ops)
            got = evaluate(m, feeds)
            assert all(compare(want[k], got[k], ulp=0).ok for k in want), (c.name, target)
            if target >= 9:
                theirs = onnxruntime_outputs(m, feeds)
                if not isinstance(theirs, str):
                    for v, t in zip(m.graph.output, theirs):
                        np.testing.assert_allclose(t, want[v.name], rtol=1e-6, atol=1e-6)


def _scan8(batch: int = 1, **extra) -> onnx.ModelProto:
    """Scan-8 over x [batch, 4, 2, 3] whose body applies Softmax(axis=0) to state + item:
    Softmax-1's coerced 2-D axis 0 (the whole [2, 3] item) needs a rewrite at 13."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["t"]),
         helper.make_node("Softmax", ["t"], ["s_out"], axis=0),
         helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body", [helper.make_tensor_value_info("s_in", F, [2, 3]),
                 helper.make_tensor_value_info("x_t", F, [2, 3])],
        [helper.make_tensor_value_info("s_out", F, [2, 3]),
         helper.make_tensor_value_info("y_t", F, [2, 3])])
    scan = helper.make_node("Scan", ["", "s0", "x"], ["s_final", "ys"], num_scan_inputs=1,
                            body=body, **extra)
    g = helper.make_graph([scan], "g", [helper.make_tensor_value_info("s0", F, [batch, 2, 3]),
                                        helper.make_tensor_value_info("x", F, [batch, 4, 2, 3])],
                          [helper.make_tensor_value_info("s_final", F, [batch, 2, 3]),
                           helper.make_tensor_value_info("ys", F, [batch, 4, 2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)])
    m.ir_version = 3
    return m


@pytest.mark.parametrize("directions", [None, [1]])
def test_scan_rewritten_keeps_the_rewrites_inside_its_body(directions):
    """Up to 13 the Scan loses its batch axis (Squeeze in, Unsqueeze out) and, inside its
    body, Softmax-1's axis 0 becomes Flatten + Softmax + Reshape: both in the written model."""
    m = _scan8(**({"directions": directions} if directions else {}))
    rng = np.random.default_rng(0)
    feeds = {"s0": rng.standard_normal((1, 2, 3)).astype(np.float32),
             "x": rng.standard_normal((1, 4, 2, 3)).astype(np.float32)}
    want = evaluate(m, feeds)
    c, res = _converted(m, 13)
    scan = next(n for n in c.graph.node if n.op_type == "Scan")
    body = next(a.g for a in scan.attribute if a.name == "body")
    assert [n.op_type for n in body.node] == ["Add", "Flatten", "Shape", "Softmax", "Reshape",
                                              "Identity"]
    attrs = {a.name: helper.get_attribute_value(a) for a in scan.attribute}
    assert attrs.get("scan_input_directions") == directions and "directions" not in attrs
    assert any(ch.what.startswith("Scan-8->9: the batch axis") for ch in res.changes)
    got = evaluate(c, feeds)
    for k in want:
        assert_exact(want[k], got[k])


def test_scan_refusals():
    with pytest.raises(ConversionError, match=r"Scan-8 -> Scan-9.*batch of 's0' \(shape "
                                              r"\(2, 2, 3\)\) is not known to be 1"):
        convert_proto(_scan8(batch=2), 9)
    m = _scan8()
    m.graph.node[0].input[0] = "lens"
    m.graph.input.append(helper.make_tensor_value_info("lens", T.INT32, [1]))
    with pytest.raises(ConversionError, match="sequence_lens is set"):
        convert_proto(m, 9)
    up, _ = _converted(_scan8(), 9)
    scan = next(n for n in up.graph.node if n.op_type == "Scan")
    scan.attribute.append(helper.make_attribute("scan_output_directions", [1]))
    with pytest.raises(ConversionError, match=r"Scan-9 -> Scan-8.*scan_output_directions="
                                              r"\[1\]: Scan-8 gathers its outputs in order"):
        convert_proto(up, 8)


@pytest.mark.parametrize("in_axis,out_axis", [(1, 1), (-2, 2), (2, -2), (0, 1)])
def test_scan_along_another_axis_goes_down_through_transposes(in_axis, out_axis):
    """Scan-9 reading x [3, 4, 2] along ``in_axis`` and gathering along ``out_axis``: at 8
    the scan input is transposed to put that axis first and the output transposed back;
    the body's running sum gives numpy's cumulative sum, bit for bit."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body", [helper.make_tensor_value_info("s_in", F, None),
                 helper.make_tensor_value_info("x_t", F, None)],
        [helper.make_tensor_value_info("s_out", F, None),
         helper.make_tensor_value_info("y_t", F, None)])
    x_shape = [3, 4, 2]
    a = in_axis % 3
    item = [d for i, d in enumerate(x_shape) if i != a]
    out_shape = list(item)
    out_shape.insert(out_axis % 3, x_shape[a])
    scan = helper.make_node("Scan", ["s0", "x"], ["s_final", "ys"], num_scan_inputs=1,
                            body=body, scan_input_axes=[in_axis], scan_output_axes=[out_axis])
    g = helper.make_graph([scan], "g", [helper.make_tensor_value_info("s0", F, item),
                                        helper.make_tensor_value_info("x", F, x_shape)],
                          [helper.make_tensor_value_info("s_final", F, item),
                           helper.make_tensor_value_info("ys", F, out_shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    rng = np.random.default_rng(0)
    feeds = {"s0": rng.standard_normal(item).astype(np.float32),
             "x": rng.standard_normal(x_shape).astype(np.float32)}
    steps = np.moveaxis(feeds["x"], a, 0)
    sums = np.cumsum(np.concatenate([feeds["s0"][None], steps]), axis=0, dtype=np.float32)[1:]
    want = {"s_final": sums[-1], "ys": np.moveaxis(sums, 0, out_axis % 3)}
    c, _ = _converted(m, 8)
    assert [n.op_type for n in c.graph.node].count("Transpose") == (a != 0) + (out_axis % 3 != 0)
    for model in (m, c):
        got = evaluate(model, feeds)
        for k in want:
            assert_exact(want[k], got[k], k)


def test_convert_verify_checks_a_rewritten_scan_with_the_whole_model(tmp_path, capsys):
    """The Scan's body is converted on its own, after the Scan's plan: its rewrite is
    checked with the whole model (a region of the planned copy would hold the old body)."""
    from opshift import cli

    src, out = tmp_path / "scan8.onnx", tmp_path / "scan13.onnx"
    onnx.save(_scan8(), src)
    assert cli.main(["convert", str(src), "--opset", "13", "-o", str(out), "--verify"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("note: 1 rewrite checked only within the whole model (<Scan #0> (Scan-8->11)): "
            "on their own, it holds subgraphs, converted on their own") in text
    assert "verify: ok:" in text and "the whole model (2 outputs) match" in text
