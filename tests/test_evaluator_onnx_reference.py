"""Ops opshift has no kernel of its own for run node by node through onnx.reference's kernel:
in graphs, subgraphs and model-local functions; ``verify`` and ``convert --verify`` then work
on such models and say which kernels came from where. A node neither has is a one-line
exit-2 error naming node, op and version."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import pytest
from conftest import init, make_model, run_onnxruntime, table_cells, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.cli import main
from opshift.errors import EvaluationError, UnsupportedError
from opshift.evaluator import evaluate
from opshift.evaluator.kernels import kernels, source


def run_cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def transformer_block(rng, opset=20) -> onnx.ModelProto:
    """LayerNormalization, MatMul, an Erf-based Gelu, Gelu-20 itself, Softmax, and Atan
    (standing for the ops onnx.reference's kernels run)."""
    d = 8
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ln_s", "ln_b"], ["ln"]),
        helper.make_node("MatMul", ["ln", "w"], ["h"]),
        helper.make_node("Div", ["h", "sqrt2"], ["hs"]),
        helper.make_node("Erf", ["hs"], ["e"], name="erf"),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["h", "e1"], ["he"]),
        helper.make_node("Mul", ["he", "half"], ["g1"]),
        helper.make_node("Gelu", ["g1"], ["g2"], name="gelu"),
        helper.make_node("Softmax", ["g2"], ["sm"], axis=-1),
        helper.make_node("Atan", ["sm"], ["y"], name="atan"),
    ]
    inits = [init("ln_s", 1 + 0.1 * rng.standard_normal(d).astype(np.float32)),
             init("ln_b", 0.1 * rng.standard_normal(d).astype(np.float32)),
             init("w", rng.standard_normal((d, d)).astype(np.float32)),
             init("sqrt2", np.float32(math.sqrt(2))), init("one", np.float32(1)),
             init("half", np.float32(0.5))]
    return make_model(nodes, [vi("x", shape=[2, 3, d])], [vi("y", shape=[2, 3, d])], opset=opset,
                      initializers=inits)


def _erf(a):
    return np.vectorize(math.erf)(a.astype(np.float64))


def test_transformer_block_runs_with_kernels_from_both(rng):
    m = transformer_block(rng)
    assert kernels(m).sources == {
        "LayerNormalization-17": "function body", "MatMul-13": "opshift", "Div-14": "opshift",
        "Erf-13": "opshift", "Add-14": "opshift", "Mul-14": "opshift",
        "Gelu-20": "function body", "Softmax-13": "opshift", "Atan-7": "onnx.reference"}
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    got = evaluate(m, {"x": x})["y"]
    # the same block written out in float64
    w = numpy_helper.to_array(m.graph.initializer[2]).astype(np.float64)
    s, b = (numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer[:2])
    x64 = x.astype(np.float64)
    ln = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * s + b
    h = ln @ w
    g = h * (1 + _erf(h / math.sqrt(2))) * 0.5
    g = g * (1 + _erf(g / math.sqrt(2))) * 0.5
    e = np.exp(g - g.max(-1, keepdims=True))
    np.testing.assert_allclose(got, np.arctan(e / e.sum(-1, keepdims=True)), rtol=1e-4,
                               atol=1e-6)


def test_verify_and_convert_verify_work_end_to_end(rng, tmp_path, capsys):
    a = tmp_path / "block.onnx"
    onnx.save(transformer_block(rng), a)
    rc, out, _ = run_cli(capsys, "verify", a, a)
    assert rc == 0, out
    assert "run through their function body: Gelu-20, LayerNormalization-17" in out
    assert "kernels from onnx.reference: Atan-7 (the others: opshift's)" in out
    rc, out, _ = run_cli(capsys, "verify", a, a, "--json")
    report = json.loads(out)["verify"]
    assert report["ok"] and report["kernels"]["Atan-7"] == "onnx.reference"
    assert report["kernels"]["LayerNormalization-17"] == "function body"
    b = tmp_path / "block21.onnx"
    rc, out, err = run_cli(capsys, "convert", a, "--opset", "21", "-o", b, "--verify")
    assert rc == 0, out + err
    assert "whole model: not verified" not in out
    assert "Atan-7" in out


def resize_and_conv_transpose(rng) -> onnx.ModelProto:
    """Resize and ConvTranspose (opshift's kernels), then Atan (onnx.reference's)."""
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["r"], mode="linear"),
             helper.make_node("ConvTranspose", ["r", "w", "b"], ["d"], strides=[2, 2],
                              pads=[1, 1, 0, 0], name="deconv"),
             helper.make_node("Atan", ["d"], ["y"])]
    inits = [init("scales", np.float32([1, 1, 2, 2])),
             init("w", rng.standard_normal((2, 3, 3, 3)).astype(np.float32)),
             init("b", rng.standard_normal(3).astype(np.float32))]
    return make_model(nodes, [vi("x", shape=[1, 2, 4, 5])], [vi("y")], opset=19, initializers=inits)


def test_resize_and_conv_transpose_verify(rng, tmp_path, capsys):
    m = resize_and_conv_transpose(rng)
    p = tmp_path / "up.onnx"
    onnx.save(m, p)
    rc, out, _ = run_cli(capsys, "verify", p, p)
    assert rc == 0, out
    assert "kernels from onnx.reference: Atan-7 (the others: opshift's)" in out
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    got = evaluate(m, {"x": x})["y"]
    assert got.shape == (1, 3, 16, 20) and got.dtype == np.float32
    ort = pytest.importorskip("onnxruntime")  # a second opinion on the numbers
    try:
        want = ort.InferenceSession(m.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    except Exception as e:
        pytest.skip(f"onnxruntime cannot run it: {str(e)[:100]}")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_no_kernel_anywhere_is_one_line_exit_2(tmp_path, capsys):
    op, domain = "Gradient", "ai.onnx.preview.training"
    m = make_model([helper.make_node(op, ["x"], ["y"], name="pool", domain=domain, xs=["x"],
                                     y="x")], [vi("x", T.FLOAT, [2])], [vi("y")],
                   opset=17, extra_opsets=[helper.make_opsetid(domain, 1)])
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    rc, out, err = run_cli(capsys, "verify", p, p)
    assert rc == 2 and out == ""
    version = 1
    assert err.count("\n") == 1 and f"node 'pool' ({domain}::{op}-{version}" in err, err
    assert "neither the opshift evaluator nor onnx.reference" in err
    assert "Traceback" not in err
    assert source(domain, op, version) is None


def test_a_missing_kernel_is_named_by_the_first_such_node_in_graph_order():
    # kernels are looked up once per kind of node; the node named is still the first
    ops = ["Zeta", "Alpha", "Mu", "Beta", "Omega", "Chi", "Psi", "Rho"]
    nodes = [helper.make_node("Relu", ["x"], ["v0"], name="ok")]
    nodes += [helper.make_node(op, [f"v{i}"], [f"v{i + 1}"], name=f"n{i}", domain="com.x")
              for i, op in enumerate(ops)]
    nodes.append(helper.make_node("Neg", [f"v{len(ops)}"], ["y"], name="neg"))
    m = make_model(nodes, [vi("x", shape=[2])], [vi("y")], opset=18,
                   extra_opsets=[helper.make_opsetid("com.x", 1)])
    table = kernels(m)
    assert table.missing == "node 'n0' (com.x::Zeta) in graph 'g': no such op at opset 1"
    assert table.sources == {"Relu-14": "opshift", "Neg-13": "opshift"}


def test_random_ops_are_refused(rng):
    m = make_model([helper.make_node("RandomNormalLike", ["x"], ["y"], name="r")],
                   [vi("x", shape=[2])], [vi("y")], opset=22)
    with pytest.raises(UnsupportedError, match=r"node 'r' \(RandomNormalLike-22.*random"):
        evaluate(m, {"x": np.zeros(2, np.float32)})


def test_subgraph_and_function_nodes_run_through_onnx_reference(rng):
    """Atan inside an If branch (reading an outer value) on onnx.reference's kernel, and
    Shrink (run through its function body) inside a model-local function whose lambd
    refers to the function's attribute."""
    then = helper.make_graph([helper.make_node("Atan", ["x"], ["t"])], "then", [], [vi("t")])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "else", [], [vi("t")])
    shrink = helper.make_node("Shrink", ["a"], ["b"])
    shrink.attribute.append(helper.make_attribute_ref("lambd", onnx.AttributeProto.FLOAT))
    body = helper.make_function("local", "Shrunk", ["a"], ["b"], [shrink],
                                [helper.make_opsetid("", 18)], attributes=["lambd"])
    m = make_model([helper.make_node("If", ["c"], ["t"], then_branch=then, else_branch=other),
                    helper.make_node("Shrunk", ["t"], ["y"], domain="local", lambd=0.5)],
                   [vi("c", T.BOOL, []), vi("x", shape=[5])], [vi("y")], opset=18,
                   functions=[body], extra_opsets=[helper.make_opsetid("local", 1)])
    assert kernels(m).sources == {"If-16": "opshift", "Atan-7": "onnx.reference",
                                  "Neg-13": "opshift", "Shrink-9": "function body"}
    x = np.float32([-2, -0.3, 0.0, 0.4, 3])
    got = evaluate(m, {"c": np.array(True), "x": x})["y"]
    e = np.arctan(x.astype(np.float64))
    want = np.where(np.abs(e) > 0.5, e, 0)  # bias 0: Shrink's default
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6)
    got = evaluate(m, {"c": np.array(False), "x": x})["y"]
    np.testing.assert_array_equal(got, np.float32([2, 0, 0, 0, -3]))


@pytest.mark.parametrize("mode16,mode20", [(None, None), ("bilinear", "linear"),
                                           ("bicubic", "cubic"), ("nearest", "nearest")])
def test_attributes_follow_the_node_version(mode16, mode20, rng):
    """GridSample-16 names its modes bilinear (its default) and bicubic, GridSample-20
    linear (its default) and cubic; onnx.reference's kernel knows only the newer names."""
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (1, 3, 3, 2)).astype(np.float32)
    outs = []
    for opset, mode in ((16, mode16), (20, mode20)):
        attrs = {"mode": mode} if mode else {}
        m = make_model([helper.make_node("GridSample", ["x", "grid"], ["y"], **attrs)],
                       [vi("x", shape=[1, 2, 4, 5]), vi("grid", shape=[1, 3, 3, 2])], [vi("y")],
                       opset=opset)
        outs.append(evaluate(m, {"x": x, "grid": grid})["y"])
    assert outs[0].shape == (1, 2, 3, 3)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("opset,axis", [(10, None), (13, 1)])
def test_qdq_at_opsets_10_and_13(opset, axis, rng):
    """DequantizeLinear-10/13 run on onnx.reference's DequantizeLinear-19 kernel (which only
    adds types): a quantize-dequantize pair, per tensor or per channel."""
    scale = np.float32([0.05, 0.1, 0.2]) if axis else np.float32(0.1)
    zp = np.uint8([128, 100, 90]) if axis else np.uint8(128)
    kw = {"axis": axis} if axis else {}
    m = make_model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], **kw),
                    helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], **kw)],
                   [vi("x", shape=[2, 3, 4])], [vi("y")], opset=opset,
                   initializers=[init("s", scale), init("z", zp)])
    assert kernels(m).sources[f"DequantizeLinear-{opset}"] == "onnx.reference"
    x = (rng.standard_normal((2, 3, 4)) * 8).astype(np.float32)
    b = (slice(None), None) if axis else ()
    s64, z64 = np.float64(scale)[b], np.float64(zp)[b]
    q = np.clip(np.rint(x / s64) + z64, 0, 255)
    want = ((q - z64) * s64).astype(np.float32)
    np.testing.assert_allclose(evaluate(m, {"x": x})["y"], want, rtol=1e-6)


def test_kernel_failure_is_one_line_naming_the_node():
    m = make_model([helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=2)],
                   [vi("x", shape=[1, 3, 2, 2])], [vi("y")], opset=13)
    with pytest.raises(EvaluationError, match=r"node 'd2s' \(DepthToSpace-13, graph 'g'\): "
                                              r"onnx.reference's kernel failed: \w+"):
        evaluate(m, {"x": np.zeros((1, 3, 2, 2), np.float32)})


def test_ops_lists_every_version_with_its_source(capsys):
    rc, out, _ = run_cli(capsys, "ops", "PRelu", "Atan", "ai.onnx.ml::CategoryMapper",
                         "ai.onnx.preview.training::Gradient", "Upsample")
    assert rc == 0
    rows = table_cells(out.splitlines())
    assert rows["PRelu"][1:3] == ["1, 6, 7, 9, 16", "opshift"]
    assert rows["Atan"][2] == "onnx.reference"
    lines = [line.split() for line in out.splitlines()]  # (outside the default domain:
    assert ["ai.onnx.ml::CategoryMapper", "1", "opshift"] in lines  # its own table)
    assert ["ai.onnx.preview.training::Gradient", "1", "no", "kernel"] in lines
    assert rows["Upsample"][2] == "opshift"
    rc, out, _ = run_cli(capsys, "ops", "--json")
    table = {(e["domain"], e["op"]): e for e in json.loads(out)["details"]["ops"]}
    assert table[("ai.onnx", "Selu")]["sources"] == {"1": "opshift", "6": "opshift",
                                                     "22": "opshift"}
    assert table[("ai.onnx", "Atan")]["sources"]["22"] == "onnx.reference"
    assert table[("ai.onnx", "Erf")]["sources"] == {"9": "opshift", "13": "opshift"}
    assert table[("ai.onnx", "RandomNormal")]["no_kernel"] == [1, 22]


def test_clip_of_0d_values():
    """Found by running onnx's node tests through the evaluator: Clip-11 on 0-d inputs."""
    m = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                   [vi("x", shape=[]), vi("lo", shape=[]), vi("hi", shape=[])], [vi("y")], opset=11)
    y = evaluate(m, {"x": np.float32(3), "lo": np.float32(0), "hi": np.float32(2)})["y"]
    assert isinstance(y, np.ndarray) and y.shape == () and y == 2


@pytest.mark.parametrize("op,gates,opset", [("RNN", 1, 1), ("GRU", 3, 1), ("GRU", 3, 3),
                                            ("LSTM", 4, 1)])
def test_recurrent_ops_before_7_compute_what_7_does(op, gates, opset, rng):
    """Their output_sequence only made Y optional, which onnx.reference's kernels do not take,
    and GRU-1's schema spells its default direction 'foward': the node is read as version 7."""
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(rng.standard_normal((1, gates * 4, n)).astype(np.float32),
                                     name) for name, n in (("w", 3), ("r", 4))]
    outs = []
    for at, attrs in ((opset, {"output_sequence": 1}), (opset, {}), (7, {})):
        m = make_model([helper.make_node(op, ["x", "w", "r"], ["y", "yh"], hidden_size=4,
                                         **attrs)],
                       [vi("x", shape=[5, 2, 3])], [vi("y"), vi("yh")], opset=at,
                       initializers=inits)
        outs.append(evaluate(m, {"x": x}))
    assert kernels(m).sources[f"{op}-7"] == "onnx.reference"
    for out in outs[:2]:
        for name in ("y", "yh"):
            np.testing.assert_array_equal(out[name], outs[2][name])


@pytest.mark.parametrize("direction", ["to ints", "to strings"])
def test_label_encoder_1(direction):
    """LabelEncoder-1 (onnx.reference's kernel takes version 2's key/value lists only):
    a string's index in classes_strings (the first, for a string listed twice: the operator
    looks it up in the list; onnxruntime's map keeps the last), or default_int64; an index's
    string, or default_string. onnxruntime as a second opinion, on classes listed once."""
    if direction == "to ints":
        x, out, extra = np.array(["b", "a", "z", "b"], dtype=object), T.INT64, {
            "default_int64": 7}
        want = np.int64([1, 0, 7, 1])
    else:
        x, out, extra = np.int64([1, 0, 5, -1]), T.STRING, {"default_string": "none"}
        want = np.array(["b", "a", "none", "none"], dtype=object)

    def model(classes):
        return make_model([helper.make_node("LabelEncoder", ["a"], ["y"], domain="ai.onnx.ml",
                                            classes_strings=classes, **extra)],
                          [vi("a", T.STRING if x.dtype == object else T.INT64, [4])],
                          [vi("y", out)], opset=11,
                          extra_opsets=[helper.make_opsetid("ai.onnx.ml", 1)])

    np.testing.assert_array_equal(evaluate(model(["a", "b", "a"]), {"a": x})["y"], want)
    once = model(["a", "b"])
    got = evaluate(once, {"a": x})["y"]
    np.testing.assert_array_equal(got, want)
    (theirs,) = run_onnxruntime(once, {"a": x})
    np.testing.assert_array_equal(got, theirs)


def test_string_ops_give_onnx_strings():
    """onnx.reference's StringNormalizer (and StringConcat of 0-d strings) give numpy's
    fixed-width strings: the evaluator hands them on as ONNX strings (object arrays), with
    the values of onnx's node tests."""
    from conftest import assert_onnx_node_tests

    assert_onnx_node_tests("test_strnormalizer", "test_string_concat", "test_string_split",
                           at_least=20)
