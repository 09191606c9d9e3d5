"""opshift.convert: every non-activation op converted between opsets, exactly.

The real model is a small CNN exported by PyTorch (tests/data/export_cnn.py) at opsets 17
and 20 with torch's reference outputs. The engine's node conversion is called alone (the
activations skipped, as tests/test_convert.py covers them), so the tests set the opset
import themselves.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import (
    assert_exact,
    make_model,
    onnxruntime_outputs,
    run_onnxruntime,
    vi,
)
from onnx import TensorProto, helper, numpy_helper

from opshift.convert.engine import convert_nodes
from opshift.errors import ConversionError, UnsupportedError
from opshift.evaluator import evaluate
from opshift.opsets import ACTIVATIONS, ir_version_for_opset
from opshift.verify import compare


def convert_other_ops(model, source, target, *, skip=ACTIVATIONS):
    """The engine's node conversion alone, the activations skipped by default."""
    return convert_nodes(model, source, target, skip=skip)


def other_ops_change(model, source, target) -> bool:
    """Some node other than the activations changes version (on a copy: the model stays)."""
    work = onnx.ModelProto()
    work.CopyFrom(model)
    return bool(convert_other_ops(work, source, target))


DATA = Path(__file__).resolve().parent / "data"
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def load_cnn(opset: int) -> onnx.ModelProto:
    return onnx.load(DATA / f"cnn_opset{opset}.onnx")


def finish(model: onnx.ModelProto, target: int) -> onnx.ModelProto:
    """What the orchestrator does after this pass: the opset import and the IR version."""
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            imp.version = target
    # IR >= 4 so initializers need not be listed as graph inputs (the orchestrator's job).
    model.ir_version = max(ir_version_for_opset(target), 4)
    return model


def convert(model: onnx.ModelProto, source: int, target: int, **kw) -> list:
    changes = convert_other_ops(model, source, target, **kw)
    finish(model, target)
    onnx.checker.check_model(model, full_check=True)
    return changes


def run_ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return run_onnxruntime(model, feeds)


def evaluator_outputs(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray] | None:
    """The evaluator's outputs, or None where it does not implement one of the model's ops."""
    try:
        return list(evaluate(model, feeds).values())
    except UnsupportedError as e:
        if "not supported by the opshift evaluator" not in str(e):
            raise
        return None


def outputs_everywhere(model: onnx.ModelProto, feeds: dict) -> list[list]:
    """The model's outputs by the evaluator and by onnxruntime, each where it can run the
    model; the test is skipped where neither can."""
    res = [evaluator_outputs(model, feeds), onnxruntime_outputs(model, feeds)]
    if res[0] is None and isinstance(res[1], str):
        pytest.skip(f"the evaluator does not implement the model; {res[1]}")
    return [r for r in res if r is not None and not isinstance(r, str)]


# ------------------------------------------------------------------------- the real CNN

REF = np.load(DATA / "cnn_ref.npz")
TARGETS = [7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 21, 22, 28]


@pytest.mark.parametrize("source", [17, 20])
@pytest.mark.parametrize("target", TARGETS)
def test_cnn_converts_and_keeps_numbers(source, target):
    model = load_cnn(source)
    names_before = [n.name for n in model.graph.node]
    convert(model, source, target, skip=ACTIVATIONS)
    for ys in outputs_everywhere(model, {"x": REF["x"]}):
        np.testing.assert_allclose(ys[0], REF["y"], rtol=1e-5, atol=1e-6)
    # The model's interface and the converted nodes' names survive.
    assert [i.name for i in model.graph.input] == ["x"]
    assert [o.name for o in model.graph.output] == ["y"]
    kept = {n.name for n in model.graph.node}
    assert {n for n in names_before if "Constant" not in n} <= kept


@pytest.mark.parametrize("source", [17, 20])
def test_cnn_down_to_9_then_back_up(source):
    model = load_cnn(source)
    convert(model, source, 9, skip=ACTIVATIONS)
    ops = {n.op_type for n in model.graph.node}
    assert {"BatchNormalization", "Gemm", "Reshape", "Flatten", "ReduceMean", "Concat",
            "MatMul", "GlobalAveragePool", "Add", "Conv"} <= ops
    # Unsqueeze and ReduceMean carry their axes as attributes below 13 / 18.
    for n in model.graph.node:
        if n.op_type in ("Unsqueeze", "ReduceMean"):
            assert len(n.input) == 1 and any(a.name == "axes" for a in n.attribute)
        if n.op_type == "BatchNormalization":
            assert not any(a.name == "training_mode" for a in n.attribute)
    convert(model, 9, source, skip=ACTIVATIONS)
    for ys in outputs_everywhere(model, {"x": REF["x"]}):
        np.testing.assert_allclose(ys[0], REF["y"], rtol=1e-5, atol=1e-6)


def test_cnn_below_7_is_valid_and_refused_where_inexact():
    model = load_cnn(17)
    changes = convert(model, 17, 6, skip=ACTIVATIONS)
    bn = [n for n in model.graph.node if n.op_type == "BatchNormalization"]
    assert all(helper.get_node_attr_value(n, "is_test") == 1 for n in bn)
    assert any(c.op == "Mul" and "broadcast=1" in c.what for c in changes)
    mul = next(n for n in model.graph.node if n.op_type == "Mul")
    assert helper.get_node_attr_value(mul, "broadcast") == 1
    convert(model, 6, 17, skip=ACTIVATIONS)  # and back up: the legacy forms are undone
    assert all(not n.attribute for n in model.graph.node if n.op_type in ("Mul", "Add"))
    for ys in outputs_everywhere(model, {"x": REF["x"]}):
        np.testing.assert_allclose(ys[0], REF["y"], rtol=1e-5, atol=1e-6)
    # Below 5 the Reshape's shape is computed at run time: no attribute can hold it.
    with pytest.raises(ConversionError, match=r"node '/Reshape' \(Reshape-14 -> 1.*not a "
                                              r"constant"):
        convert_other_ops(load_cnn(17), 17, 4)


def test_nothing_to_do_is_cheap_and_untouched():
    model = load_cnn(17)
    before = model.SerializeToString()
    assert not other_ops_change(model, 17, 16)
    assert convert_other_ops(model, 17, 16) == []
    assert model.SerializeToString() == before
    assert other_ops_change(model, 17, 9)
    assert other_ops_change(model, 17, 18)  # ReduceMean-18


def test_activations_are_left_alone():
    model = load_cnn(17)
    acts = [(n.name, n.SerializeToString()) for n in model.graph.node
            if n.op_type in ACTIVATIONS]
    changes = convert_other_ops(model, 17, 9)
    assert not any(c.op in ACTIVATIONS for c in changes)
    assert [(n.name, n.SerializeToString()) for n in model.graph.node
            if n.op_type in ACTIVATIONS] == acts


# ------------------------------------------------------------------------- helpers for units


def one(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name=f"n_{op.lower()}", **attrs)


def check_same(m_before, m_after, feeds, rtol=1e-6):
    """Same outputs before and after: bit for bit by the evaluator (opshift's exact policy)
    where it implements both; onnxruntime's outputs of the converted model (its own kernels, a
    second opinion) within ``rtol`` of the original's, where it runs them."""
    ev = [evaluator_outputs(m, feeds) for m in (m_before, m_after)]
    rt = [onnxruntime_outputs(m, feeds) for m in (m_before, m_after)]
    checked = False
    if ev[0] is not None and ev[1] is not None:
        assert len(ev[0]) == len(ev[1])
        for i, (a, b) in enumerate(zip(*ev)):
            assert_exact(a, b, f"evaluator, output {i}")
        checked = True
    ref = ev[0] if ev[0] is not None else rt[0]
    if not isinstance(ref, str) and not isinstance(rt[1], str):
        for a, b in zip(ref, rt[1]):
            np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-6)
        checked = True
    if not checked:
        reason = next(r for r in (*rt, ref) if isinstance(r, str))
        pytest.skip(f"the evaluator does not implement the model; {reason}")


def roundtrip(model, source, target, feeds, rtol=1e-6):
    before = onnx.ModelProto()
    before.CopyFrom(model)
    changes = convert(model, source, target)
    check_same(before, model, feeds, rtol)
    return changes


def node(model, op):
    return next(n for n in model.graph.node if n.op_type == op)


def attrs(n):
    return {a.name: helper.get_attribute_value(a) for a in n.attribute}


# ------------------------------------------------------------------------- relabelling rule


def test_step_that_only_adds_types_is_a_relabel():
    m = make_model([one("Relu", ["x"], ["y"])], [vi("x", F, [2, 3])], [vi("y", F, [2, 3])],
                   opset=14)
    changes = convert(m, 14, 6)
    assert [(c.action, c.from_version, c.to_version) for c in changes] == [("relabel", 14, 6)]
    assert m.graph.node[0].SerializeToString() == one("Relu", ["x"], ["y"]).SerializeToString()


def test_type_missing_at_the_target_is_refused():
    m = make_model([one("Relu", ["x"], ["y"])], [vi("x", TensorProto.INT8, [2])],
                   [vi("y", TensorProto.INT8, [2])], opset=14)
    before = m.SerializeToString()
    with pytest.raises(ConversionError, match=r"node 'n_relu' \(Relu-14 -> 13.*tensor\(int8\)"):
        convert_other_ops(m, 14, 13)
    assert m.SerializeToString() == before  # a refusal writes nothing


def test_type_found_by_propagation_through_other_nodes():
    # Abs keeps the type of its input; the Relu's input type is only known through it.
    m = make_model([one("Abs", ["x"], ["a"]), one("Relu", ["a"], ["y"])],
                   [vi("x", TensorProto.INT32, [2])], [vi("y", TensorProto.INT32, [2])],
                   opset=14)
    with pytest.raises(ConversionError, match=r"tensor\(int32\), not allowed at Relu-13"):
        convert_other_ops(m, 14, 13)


def test_attribute_that_changed_meaning_is_refused():
    def pool(**kw):
        return make_model([one("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], **kw)],
                          [vi("x", F, [1, 1, 4, 4])], [vi("y", F, 4)], opset=11)
    with pytest.raises(ConversionError, match=r"AveragePool-11 -> 1.*count_include_pad"):
        convert_other_ops(pool(count_include_pad=1, pads=[1, 1, 1, 1]), 11, 6)
    m = pool(count_include_pad=1)  # no padding: the attribute has no effect
    roundtrip(m, 11, 6, {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)})
    assert "count_include_pad" not in attrs(m.graph.node[0])
    # ceil_mode needs an extra end pad here, which count_include_pad=1 would count.
    m = pool(ceil_mode=1, strides=[2, 2], pads=[1, 1, 0, 0], count_include_pad=1)
    with pytest.raises(ConversionError, match=r"AveragePool-10 -> AveragePool-7.*ceil_mode=1 "
                                              r"with count_include_pad=1"):
        convert_other_ops(m, 11, 9)


def test_mod_28_floored_remainder_of_floats_is_refused_below_28():
    """Mod-28 takes fmod=0 on floats (the floored remainder); before, fmod=0 is for integers:
    refused going down (a model that computes it cannot be written), integers cross."""
    def mod(elem, **kw):
        return make_model([one("Mod", ["a", "b"], ["y"], **kw)],
                          [vi("a", elem, [3]), vi("b", elem, [3])], [vi("y", elem, [3])],
                          opset=28)
    with pytest.raises(ConversionError, match=r"Mod-28 -> 13.*fmod=0 on floating-point "
                                              r"values"):
        convert_other_ops(mod(F), 28, 13)
    roundtrip(mod(F, fmod=1), 28, 13, {"a": np.float32([7.5, -7, 5]),
                                       "b": np.float32([3, 2.5, -2])})
    m = mod(TensorProto.INT32)
    roundtrip(m, 28, 13, {"a": np.int32([7, -7, 5]), "b": np.int32([3, 3, -2])})


def test_unset_attribute_whose_default_changes_is_written():
    # Clip-6's unset bounds are -FLT_MAX/FLT_MAX; Clip-1 has no default: written explicitly.
    m = make_model([one("Clip", ["x"], ["y"], max=2.0)], [vi("x", F, [3])], [vi("y", F, [3])],
                   opset=6)
    convert(m, 6, 1)
    a = attrs(m.graph.node[0])
    assert a["max"] == 2.0 and a["min"] == pytest.approx(-np.finfo(np.float32).max)
    convert(m, 1, 6)  # back up: an explicit value survives
    assert attrs(m.graph.node[0])["min"] == pytest.approx(-np.finfo(np.float32).max)


# ------------------------------------------------------------------------- explicit adapters


X234 = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)


def test_binary_broadcast_down_to_6_and_up_again():
    b = numpy_helper.from_array(np.arange(4, dtype=np.float32), "b")
    m = make_model([one("Sub", ["x", "b"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 4])], opset=14, initializers=[b])
    roundtrip(m, 14, 6, {"x": X234})
    assert attrs(m.graph.node[0]) == {"broadcast": 1}
    roundtrip(m, 6, 7, {"x": X234})
    assert attrs(m.graph.node[0]) == {}


def test_binary_broadcast_commutative_swap_and_refusal():
    a = numpy_helper.from_array(np.arange(4, dtype=np.float32), "a")
    m = make_model([one("Add", ["a", "x"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 4])], opset=13, initializers=[a])
    roundtrip(m, 13, 6, {"x": X234})
    assert list(m.graph.node[0].input) == ["x", "a"]
    # Div cannot swap: its constant dividend is written broadcast to the static output shape
    m = make_model([one("Div", ["a", "x"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 4])], opset=13, initializers=[a])
    roundtrip(m, 13, 6, {"x": X234})
    assert [i.dims for i in m.graph.initializer] == [[2, 3, 4]]
    m = make_model([one("Div", ["a", "x"], ["y"])], [vi("x", F, ["N", 3, 4])],
                   [vi("y", F, ["N", 3, 4])], opset=13, initializers=[a])
    with pytest.raises(ConversionError, match=r"node 'n_div' \(Div-13 -> 6.*Div-7 -> Div-6.*"
                                              r"legacy broadcasting.*cannot swap"):
        convert_other_ops(m, 13, 6)
    # (z of [1, 4]: x is tiled to [N, 4], tests/test_convert_legacy_broadcast_tile.py)
    m = make_model([one("Mul", ["x", "z"], ["y"])], [vi("x", F, ["N", 1]), vi("z", F, ["K", 4])],
                   [vi("y", F, ["N", 4])], opset=13)
    with pytest.raises(ConversionError, match="cannot express"):
        convert_other_ops(m, 13, 5)


def test_binary_legacy_axis_upgrade_reshapes_b():
    b = numpy_helper.from_array(np.arange(3, dtype=np.float32) + 1, "b")
    m = make_model([one("Div", ["x", "b"], ["y"], broadcast=1, axis=1)],
                   [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])], opset=6, initializers=[b])
    convert(m, 6, 7)
    assert attrs(m.graph.node[0]) == {}
    (y,) = run_ort(m, {"x": X234})
    np.testing.assert_allclose(y, X234 / (np.arange(3, dtype=np.float32) + 1)[:, None],
                               rtol=1e-6)
    # The evaluator's legacy broadcasting agrees with that reading of axis=1.
    m6 = make_model([one("Div", ["x", "b"], ["y"], broadcast=1, axis=1)],
                    [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])], opset=6, initializers=[b])
    np.testing.assert_allclose(evaluate(m6, {"x": X234})["y"], y, rtol=1e-6)


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
@pytest.mark.parametrize("target", [7, 6])
def test_variadic_inputs_widened_below_8(op, target):
    """Before 8 every input has the output's shape: a computed input of another shape is
    multiplied by ones of it (at 6 through legacy broadcast, a Transpose when its dims are
    not one run), a constant one written broadcast."""
    rng = np.random.default_rng(8)
    k = numpy_helper.from_array(rng.standard_normal((1, 3)).astype(np.float32), "k")
    m = make_model([one(op, ["x", "z", "w", "k"], ["y"])],
                   [vi("x", F, [2, 3]), vi("z", F, [3]), vi("w", F, [2, 1])],
                   [vi("y", F, [2, 3])], opset=13, initializers=[k])
    feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32),
             "z": np.array([-0.0, np.inf, np.nan], np.float32),
             "w": rng.standard_normal((2, 1)).astype(np.float32)}
    roundtrip(m, 13, target, feeds)
    (n,) = [n for n in m.graph.node if n.op_type == op]
    assert n.input[0] == "x" and all(i != name for i, name in zip(n.input[1:], "zwk"))


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
@pytest.mark.parametrize("target", [7, 6])
def test_variadic_inputs_tiled_to_a_symbolic_shape_below_8(op, target):
    """With a symbolic output shape, the input every other broadcasts into gives it at run
    time: the others (a scalar, a constant [1, 1, 1], a computed [3] and [n, 1, 3]) are
    given its rank and tiled by its shape where their dims are 1."""
    rng = np.random.default_rng(8)
    k = numpy_helper.from_array(np.array([[[0.25]]], np.float32), "k")
    s = numpy_helper.from_array(np.array(-0.0, np.float32), "s")
    m = make_model([one(op, ["x", "z", "s", "k", "w"], ["y"])],
                   [vi("x", F, ["n", 2, 3]), vi("z", F, [3]), vi("w", F, ["n", 1, 3])],
                   [vi("y", F, ["n", 2, 3])], opset=13, initializers=[k, s])
    for n in (1, 4):
        feeds = {"x": rng.standard_normal((n, 2, 3)).astype(np.float32),
                 "z": np.array([-0.0, np.inf, np.nan], np.float32),
                 "w": rng.standard_normal((n, 1, 3)).astype(np.float32)}
        c = onnx.ModelProto()
        c.CopyFrom(m)
        roundtrip(c, 13, target, feeds)
        assert [n.op_type for n in c.graph.node].count("Tile") == 4
        (node_,) = [n for n in c.graph.node if n.op_type == op]
        assert node_.input[0] == "x" and all(i != name for i, name in
                                             zip(node_.input[1:], "zskw"))


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
@pytest.mark.parametrize("target", [7, 6])
def test_variadic_inputs_tiled_to_their_broadcast_below_8(op, target):
    """With no input known to hold the output's shape ([n, 1] and [3]; [m, 21, 5] and [k, 21,
    5], as a TensorFlow maximum of two batches), the broadcast of their shapes is read at run
    time: a dim of 1 takes the others' (a 0 wins over a 1), and each input is tiled by it
    where its dims are 1."""
    rng = np.random.default_rng(9)
    special = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 1.5, -2.5], np.float32)
    for (a, b, y), runs in ((["n", 1], ["j"], ["n", "i"]),
                            [((2, 1), (3,)), ((0, 1), (3,)), ((1, 1), (1,)), ((2, 1), (0,))]), \
            ((["m", 21, 5], ["k", 21, 5], ["j", 21, 5]),
             [((2, 21, 5), (2, 21, 5)), ((1, 21, 5), (3, 21, 5)), ((3, 21, 5), (1, 21, 5)),
              ((0, 21, 5), (1, 21, 5))]):
        m = make_model([one(op, ["x", "z"], ["y"])], [vi("x", F, a), vi("z", F, b)],
                       [vi("y", F, y)], opset=13)
        for sx, sz in runs:
            c = onnx.ModelProto()
            c.CopyFrom(m)
            roundtrip(c, 13, target, {"x": rng.choice(special, sx), "z": rng.choice(special, sz)})
            assert [n.op_type for n in c.graph.node].count("Tile") == 2


def test_variadic_inputs_of_unknown_rank_are_refused_below_8():
    m = make_model([one("Sum", ["x", "z"], ["y"])], [vi("x", F, ["n", 1]), vi("z", F, None)],
                   [vi("y", F, ["n", "j"])], opset=13)
    with pytest.raises(ConversionError, match=r"Sum-8 -> Sum-6.*one shape.*neither static nor "
                                              r"of a known rank"):
        convert_other_ops(m, 13, 7)


def softmax_model(op, axis, opset, shape=(2, 3, 4)):
    kw = {} if axis is None else {"axis": axis}
    return make_model([one(op, ["x"], ["y"], **kw)], [vi("x", F, list(shape))],
                      [vi("y", F, list(shape))], opset=opset)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_softmax_family_down_across_13(op, axis):
    m = softmax_model(op, axis, 13)
    roundtrip(m, 13, 11, {"x": X234})
    roundtrip(m, 11, 13, {"x": X234})  # and back up: the coerced form is kept exact too


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_on_a_long_axis_down_across_13(op):
    """Softmax-13 on axis 1 of 37 values goes to 11 as a Transpose and a Softmax on the last
    axis: the evaluator adds the same values in the same order both ways (bit for bit)."""
    m = softmax_model(op, 1, 13, shape=(2, 37, 5))
    x = np.random.default_rng(2).standard_normal((2, 37, 5)).astype(np.float32) * 30
    roundtrip(m, 13, 11, {"x": x})
    assert "Transpose" in {n.op_type for n in m.graph.node}


@pytest.mark.parametrize("axis", [None, 0, 2])
def test_softmax_coerced_upgrade(axis):
    m = softmax_model("Softmax", axis, 11)
    before = onnx.ModelProto()
    before.CopyFrom(m)
    convert(m, 11, 13)
    y = run_ort(m, {"x": X234})[0]
    a = 1 if axis is None else axis  # the coerced 2-D reference, computed by hand
    flat = X234.reshape(int(np.prod(X234.shape[:a])), -1)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, (e / e.sum(axis=1, keepdims=True)).reshape(X234.shape),
                               rtol=1e-5)


def test_softmax_unknown_rank_refused():
    m = make_model([one("Softmax", ["x"], ["y"])], [vi("x", F, None)], [vi("y", F, None)],
                   opset=13)
    with pytest.raises(ConversionError, match=r"Softmax-13 -> Softmax-11.*rank"):
        convert_other_ops(m, 13, 11)


def bn_model(opset, n_out=1, **kw):
    c = 3
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in (
        ("s", rng.uniform(0.5, 1.5, c)), ("b", rng.uniform(-1, 1, c)),
        ("m", rng.uniform(-1, 1, c)), ("v", rng.uniform(0.5, 2, c)))]
    outs = ["y", "rm", "rv"][:n_out]
    return make_model([one("BatchNormalization", ["x", "s", "b", "m", "v"], outs, **kw)],
                      [vi("x", F, [2, 3, 4])], [vi(o, F, 3) for o in outs],
                      opset=opset, initializers=inits)


def test_batchnorm_down_to_every_version_and_up():
    for target in (14, 9, 7, 6, 1):
        m = bn_model(15, training_mode=0)
        roundtrip(m, 15, target, {"x": X234})
        a = attrs(m.graph.node[0])
        assert ("training_mode" in a) == (target >= 14)
        assert (a.get("is_test") == 1) == (target < 7)
        assert ("consumed_inputs" in a) == (target < 6)
        roundtrip(m, target, 15, {"x": X234})
        assert set(attrs(m.graph.node[0])) <= {"training_mode"}


def test_batchnorm_training_refused():
    with pytest.raises(ConversionError, match=r"BatchNormalization-15 -> 9.*training_mode=1"):
        convert_other_ops(bn_model(15, n_out=3, training_mode=1), 15, 9)
    with pytest.raises(ConversionError, match=r"BatchNormalization-6 -> 9.*is_test=0"):
        convert_other_ops(bn_model(6), 6, 9)


def test_reshape_shape_attribute_and_input():
    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
    m = make_model([one("Reshape", ["x", "shape"], ["y"], allowzero=0)],
                   [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 12])], opset=14,
                   initializers=[shape])
    roundtrip(m, 14, 4, {"x": X234})
    assert attrs(m.graph.node[0]) == {"shape": [0, -1]} and len(m.graph.node[0].input) == 1
    assert not m.graph.initializer  # the folded shape is not left behind
    roundtrip(m, 4, 14, {"x": X234})
    assert len(m.graph.node[0].input) == 2
    m = make_model([one("Reshape", ["x", "s"], ["y"])], [vi("x", F, [2, 3, 4]),
                                                          vi("s", I64, [2])],
                   [vi("y", F, None)], opset=13)
    with pytest.raises(ConversionError, match=r"node 'n_reshape' \(Reshape-13 -> 1.*"
                                              r"Reshape-5 -> Reshape-1.*'s'.*not a constant"):
        convert_other_ops(m, 13, 4)


def test_reshape_allowzero():
    shape = numpy_helper.from_array(np.array([4, 6], np.int64), "shape")
    m = make_model([one("Reshape", ["x", "shape"], ["y"], allowzero=1)],
                   [vi("x", F, [2, 3, 4])], [vi("y", F, [4, 6])], opset=14,
                   initializers=[shape])
    roundtrip(m, 14, 13, {"x": X234})
    shape = numpy_helper.from_array(np.array([0, 24], np.int64), "shape")
    m = make_model([one("Reshape", ["x", "shape"], ["y"], allowzero=1)],
                   [vi("x", F, [0, 3])], [vi("y", F, None)], opset=14, initializers=[shape])
    with pytest.raises(ConversionError, match="allowzero=1"):
        convert_other_ops(m, 14, 13)


@pytest.mark.parametrize("target", [13, 6, 5])
@pytest.mark.parametrize("minus_one", [True, False])
def test_reshape_allowzero_with_a_computed_shape_holding_minus_one(minus_one, target):
    """A computed shape [batch, -1, 4] (an exporter's): allowzero=1 forbids a 0 beside the
    -1, so wherever the original is defined the shape holds no 0, and allowzero is dropped;
    [batch, 2, 4] (one computed element) reads the batch's 0 as -1, which infers 0 for an
    empty X, as allowzero=1 gives (compared with zeros of the shape's length: below 7 no op
    broadcasts a scalar; below 6 no Sub takes integers, and the computed shape is refused)."""
    rest = numpy_helper.from_array(np.array([-1, 4] if minus_one else [2, 4], np.int64),
                                   "rest")
    m = make_model([one("Shape", ["x"], ["b"], end=1),
                    helper.make_node("Concat", ["b", "rest"], ["shape"], name="cat", axis=0),
                    one("Reshape", ["x", "shape"], ["y"], allowzero=1)],
                   [vi("x", F, ["n", 2, 4])], [vi("y", F, ["n", 2, 4])], opset=15,
                   initializers=[rest])
    if target == 5 and not minus_one:
        with pytest.raises(ConversionError, match=r"shape \(allowzero=1\).*not a constant"):
            convert_other_ops(m, 15, target)
        return
    for n in (1, 3) if minus_one else (0, 1, 3):  # (0 beside -1: the original fails)
        c = onnx.ModelProto()
        c.CopyFrom(m)
        roundtrip(c, 15, target, {"x": np.arange(n * 8, dtype=np.float32).reshape(n, 2, 4)})
        assert attrs(node(c, "Reshape")) == {}
        assert ("Equal" in [x.op_type for x in c.graph.node]) != minus_one


def test_reshape_allowzero_with_two_computed_elements_is_exact():
    """[batch, rows, 4]: two elements may be 0, and Reshape-13 infers one dim at most: the
    Reshape goes to the shape with its first 0 as -1, then expands to the shape (see
    tests/test_convert_reshape_allowzero.py); below 9 (no Where) still refused."""
    four = numpy_helper.from_array(np.array([4], np.int64), "four")
    m = make_model([one("Shape", ["x"], ["b"], end=2),
                    helper.make_node("Concat", ["b", "four"], ["shape"], name="cat", axis=0),
                    one("Reshape", ["x", "shape"], ["y"], allowzero=1)],
                   [vi("x", F, ["n", "m", 4])], [vi("y", F, ["n", "m", 4])], opset=15,
                   initializers=[four])
    import opshift

    c = opshift.convert(m, 13)
    for shape in ((2, 3, 4), (0, 3, 4), (0, 0, 4)):
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        want, got = evaluate(m, {"x": x})["y"], evaluate(c, {"x": x})["y"]
        assert got.shape == want.shape == shape
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ConversionError, match=r"shape \(allowzero=1\).*not a constant"):
        convert_other_ops(m, 15, 8)


@pytest.mark.parametrize("op,version", [("Unsqueeze", 13), ("Squeeze", 13),
                                        ("ReduceSum", 13), ("ReduceMean", 18),
                                        ("ReduceMax", 18)])
def test_axes_attribute_and_input(op, version):
    x = np.random.default_rng(2).standard_normal((2, 1, 4)).astype(np.float32)
    axes = numpy_helper.from_array(np.array([-2], np.int64), "axes")
    m = make_model([one(op, ["x", "axes"], ["y"])], [vi("x", F, [2, 1, 4])],
                   [vi("y", F, {"Unsqueeze": 4, "Squeeze": 2}.get(op, 3))], opset=version,
                   initializers=[axes])
    roundtrip(m, version, 9, {"x": x})
    n = m.graph.node[0]
    # The negative axis is normalized below 11 (Unsqueeze's axes count in the output's rank).
    assert len(n.input) == 1 and attrs(n)["axes"] == ([2] if op == "Unsqueeze" else [1])
    roundtrip(m, 9, version, {"x": x})
    assert len(m.graph.node[0].input) == 2


def test_reduce_without_axes_and_noop():
    m = make_model([one("ReduceMean", ["x"], ["y"], keepdims=0)], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [])], opset=18)
    roundtrip(m, 18, 13, {"x": X234})
    assert attrs(m.graph.node[0]) == {"keepdims": 0}
    m = make_model([one("ReduceMean", ["x"], ["y"], noop_with_empty_axes=1)],
                   [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])], opset=18)
    roundtrip(m, 18, 13, {"x": X234})  # (it reduces nothing: an Identity)
    assert [n.op_type for n in m.graph.node] == ["Identity"]


def test_negative_axis_needs_rank_below_11():
    m = make_model([one("Concat", ["x", "z"], ["y"], axis=-1)],
                   [vi("x", F, [2, 3]), vi("z", F, [2, 3])], [vi("y", F, [2, 6])], opset=13)
    x = np.ones((2, 3), np.float32)
    roundtrip(m, 13, 9, {"x": x, "z": 2 * x})
    assert attrs(m.graph.node[0]) == {"axis": 1}
    m = make_model([one("Flatten", ["x"], ["y"], axis=-1)], [vi("x", F, None)],
                   [vi("y", F, None)], opset=13)
    with pytest.raises(ConversionError, match=r"Flatten-11 -> Flatten-9.*axis=-1.*rank"):
        convert_other_ops(m, 13, 9)


@pytest.mark.parametrize("indices", [[-1, 0], [-3, -1]])
@pytest.mark.parametrize("dim", [3, "n"])
def test_gather_constant_negative_indices_below_11(indices, dim):
    """Constant negative indices are normalized with the dimension's size, or (from 7)
    offset by that size read at run time where it is unknown; refused below 7 then."""
    idx = numpy_helper.from_array(np.array(indices, np.int64), "i")
    m = make_model([one("Gather", ["x", "i"], ["y"], axis=1)], [vi("x", F, [2, dim, 4])],
                   [vi("y", F, [2, 2, 4])], opset=13, initializers=[idx])
    c = onnx.ModelProto()
    c.CopyFrom(m)
    roundtrip(c, 13, 7, {"x": X234})
    np.testing.assert_array_equal(evaluate(c, {"x": X234})["y"], X234[:, indices])
    assert ("Shape" in {n.op_type for n in c.graph.node}) == (dim == "n")
    if dim == "n":
        with pytest.raises(ConversionError, match=r"indices are constant, of a dimension of "
                                                  r"unknown size \(below opset 7"):
            convert_other_ops(m, 13, 6)


def test_gather_indices_below_11():
    m = make_model([one("Gather", ["x", "i"], ["y"])], [vi("x", F, [2, 3]),
                                                        vi("i", I64, [2])],
                   [vi("y", F, None)], opset=13)
    with pytest.raises(ConversionError, match=r"Gather-11 -> Gather-1.*indices are computed"):
        convert_other_ops(m, 13, 6)  # (from 7 they are read with their sign: below)


def test_clip_bounds_between_attributes_and_inputs():
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    m = make_model([one("Clip", ["x"], ["y"], min=-1.0)], [vi("x", F, [7])],
                   [vi("y", F, [7])], opset=6)
    roundtrip(m, 6, 13, {"x": x})
    assert len(m.graph.node[0].input) == 3
    roundtrip(m, 13, 6, {"x": x})
    assert attrs(m.graph.node[0])["min"] == -1.0
    lo = numpy_helper.from_array(np.array(0.5, np.float32), "lo")
    m = make_model([one("Clip", ["x", "lo"], ["y"])], [vi("x", F, [7])], [vi("y", F, [7])],
                   opset=13, initializers=[lo])
    roundtrip(m, 13, 1, {"x": x})
    m = make_model([one("Clip", ["x", "lo"], ["y"])], [vi("x", F, [7]), vi("lo", F, [])],
                   [vi("y", F, [7])], opset=13)
    with pytest.raises(ConversionError, match=r"Clip-11 -> Clip-6.*min.*not a constant"):
        convert_other_ops(m, 13, 6)  # (from 7 Where: below)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("bounds", [("lo", ""), ("", "hi"), ("lo", "hi")])
@pytest.mark.parametrize("target", [10, 9, 8, 7])
def test_clip_with_a_computed_bound_below_11(dtype, bounds, target):
    """A bound computed at run time has no attribute to go to: from 9 Clip is Where(x < min
    or IsNaN(min), min, x) then the same for max, an omitted bound the type's own limit
    (which clamps infinities), for bounds that are themselves infinite or NaN too; at 7 and 8
    each Where and IsNaN as written below 9. x is kept where it equals a bound (-0.0 at
    +0.0), on onnxruntime too (Max and Min would give either of two equal zeros)."""
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([one("Clip", ["x", *bounds], ["y"])],
                   [vi("x", t, [7]), *(vi(b, t, []) for b in bounds if b)],
                   [vi("y", t, [7])], opset=13)
    x = np.array([-np.inf, -2.5, -0.0, 0.0, 1.5, np.inf, np.nan], dtype)
    c = onnx.ModelProto()
    c.CopyFrom(m)
    convert(c, 13, target)
    ops = {n.op_type for n in c.graph.node}
    if target >= 9:
        assert ops <= {"Where", "Less", "Greater", "Or", "IsNaN"}
    else:
        assert not ops & {"Clip", "Where", "IsNaN", "Max", "Min"} and "Gather" in ops
    for lo, hi in [(-1.0, 1.0), (0.0, 0.0), (-0.0, -0.0), (-np.inf, np.inf), (np.nan, 2.0),
                   (3.0, -3.0)]:
        feeds = {"x": x} | {b: np.array(v, dtype) for b, v in (("lo", lo), ("hi", hi))
                            if b in bounds}
        want = evaluate(m, feeds)["y"]
        assert_exact(want, evaluate(c, feeds)["y"], f"{lo}, {hi}")
        theirs = [onnxruntime_outputs(x, feeds) for x in (m, c)]
        if not np.isnan([lo, hi]).any() and np.signbit([lo, hi]).sum() < 2 and \
                not any(isinstance(r, str) for r in theirs):  # a second opinion (NaN bounds:
            # onnxruntime's own Clip ignores one; its Where writes a -0.0 it broadcasts as +0.0)
            assert_exact(theirs[0][0], theirs[1][0], f"onnxruntime, {lo}, {hi}")


def test_dropout_versions():
    x = X234
    m = make_model([one("Dropout", ["x"], ["y"], ratio=0.3)], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 4])], opset=10)
    roundtrip(m, 10, 13, {"x": x})
    roundtrip(m, 13, 6, {"x": x})
    assert attrs(m.graph.node[0]) == {"ratio": pytest.approx(0.3), "is_test": 1}
    m = make_model([one("Dropout", ["x"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 4])], opset=6)
    with pytest.raises(ConversionError, match=r"Dropout-6 -> 13.*is_test=0.*training"):
        convert_other_ops(m, 6, 13)


def test_gemm_optional_c_and_legacy_broadcast():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 4))
    w = numpy_helper.from_array(b.astype(np.float32), "w")
    m = make_model([one("Gemm", ["a", "w"], ["y"])], [vi("a", F, [2, 3])], [vi("y", F, [2, 4])],
                   opset=13, initializers=[w])
    roundtrip(m, 13, 6, {"a": a})
    assert attrs(m.graph.node[0]) == {"broadcast": 1} and len(m.graph.node[0].input) == 3
    c = numpy_helper.from_array(np.arange(4, dtype=np.float32), "c")
    m = make_model([one("Gemm", ["a", "w", "c"], ["y"], broadcast=1)], [vi("a", F, [2, 3])],
                   [vi("y", F, [2, 4])], opset=6, initializers=[w, c])
    convert(m, 6, 13)
    np.testing.assert_allclose(run_ort(m, {"a": a})[0], a @ b.astype(np.float32) + np.arange(4),
                               rtol=1e-5)


@pytest.mark.parametrize("const", [True, False])
def test_gemm_c_with_outer_ones_below_7(const):
    """C of shape [1, 4] on Y [2, 4] is not a trailing shape of Y, but C without its outer
    1s is: Gemm-6 gets C as [4] (a constant reshaped in place, a computed one through
    Squeeze) with broadcast=1, the same values."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    w = numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "w")
    c = rng.standard_normal((1, 4)).astype(np.float32)
    inits = [w, numpy_helper.from_array(c, "c")] if const else [w]
    inputs = [vi("a", F, [2, 3])] + ([] if const else [vi("c", F, [1, 4])])
    m = make_model([one("Gemm", ["a", "w", "c"], ["y"], beta=0.5)], inputs,
                   [vi("y", F, [2, 4])], opset=13, initializers=inits)
    feeds = {"a": a} if const else {"a": a, "c": c}
    roundtrip(m, 13, 6, feeds)
    gemm = node(m, "Gemm")
    assert attrs(gemm)["broadcast"] == 1
    if const:
        assert [n.op_type for n in m.graph.node] == ["Gemm"]
        assert list(next(t for t in m.graph.initializer if t.name == gemm.input[2]).dims) == [4]
    else:
        assert [n.op_type for n in m.graph.node] == ["Squeeze", "Gemm"]


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dims", [[3, 4], ["n", 4]])
def test_arg_select_last_index_below_12(op, dims):
    """select_last_index=1 written as n - 1 - the first index of the input reversed (a
    Slice of step -1; below 10 a Gather of the positions backwards, where n is known): ties,
    infinities and NaN give the same indices; n from the static dim or read from the shape;
    below 10 with n unknown, and below 7 (n - 1 - index broadcasts), refused."""
    x = np.array([[1, 3, 3, -1], [np.nan, 2, np.nan, 2], [np.inf, -np.inf, np.inf, 0]],
                 np.float32)
    for axis, keep in ((1, 0), (-2, 1)):
        m = make_model([one(op, ["x"], ["y"], axis=axis, keepdims=keep, select_last_index=1)],
                       [vi("x", F, dims)], [vi("y", TensorProto.INT64, 1 + keep)],
                       opset=13)
        want = evaluate(m, {"x": x})["y"]
        for target in (11, 10):
            c = onnx.ModelProto()
            c.CopyFrom(m)
            convert(c, 13, target)
            assert "Slice" in [n.op_type for n in c.graph.node]
            assert_exact(want, evaluate(c, {"x": x})["y"])
        c = onnx.ModelProto()
        c.CopyFrom(m)
        convert(c, 13, 11)
        # (onnxruntime's NaN ranks differ between its two modes: its opinion on the rest)
        finite = {"x": np.nan_to_num(x, nan=2.0)}
        before, after = onnxruntime_outputs(m, finite), onnxruntime_outputs(c, finite)
        if not isinstance(before, str) and not isinstance(after, str):
            np.testing.assert_array_equal(after[0], before[0])
        for target in (9, 7):
            c = onnx.ModelProto()
            c.CopyFrom(m)
            if not isinstance(dims[axis], int):  # the reversed axis's size is unknown
                with pytest.raises(ConversionError, match="by a Gather, which needs the axis"):
                    convert(c, 13, target)
                continue
            convert(c, 13, target)
            assert "Gather" in [n.op_type for n in c.graph.node]
            assert_exact(want, evaluate(c, {"x": x})["y"])
        with pytest.raises(ConversionError, match="needs numpy broadcasting"):
            convert(m, 13, 6)


@pytest.mark.parametrize("n,width", [(2, 6), (2, 5), (3, 5)])
def test_split_num_outputs(n, width):
    x = np.arange(2 * width, dtype=np.float32).reshape(2, width)
    outs = [f"y{i}" for i in range(n)]
    m = make_model([one("Split", ["x"], outs, axis=1, num_outputs=n)],
                   [vi("x", F, [2, width])],
                   [vi(o, F, 2) for o in outs], opset=18)
    roundtrip(m, 18, 11, {"x": x})
    roundtrip(m, 11, 18, {"x": x})
    assert attrs(m.graph.node[0]).get("num_outputs") == n or len(m.graph.node[0].input) == 2


@pytest.mark.parametrize("n,width", [(2, 6), (2, 5), (3, 7), (4, 8)])
@pytest.mark.parametrize("target", [17, 13])
def test_split_num_outputs_of_an_unknown_size(n, width, target):
    """num_outputs on a dimension of unknown size becomes Split-13's split computed from X's
    shape (ceil(d / n) for all but the last part): exact for any size, even or not; below
    13 split is an attribute, a constant, and the conversion is refused."""
    x = np.arange(2 * width, dtype=np.float32).reshape(2, width)
    outs = [f"y{i}" for i in range(n)]
    m = make_model([one("Split", ["x"], outs, axis=-1, num_outputs=n)],
                   [vi("x", F, [2, "w"])], [vi(o, F, 2) for o in outs], opset=18)
    refused = onnx.ModelProto()
    refused.CopyFrom(m)
    roundtrip(m, 18, target, {"x": x})
    split = node(m, "Split")
    assert "num_outputs" not in attrs(split) and len(split.input) == 2
    assert node(m, "Shape").input[0] == "x"
    with pytest.raises(ConversionError, match=r"num_outputs needs the size of the split "
                                              r"dimension \(below opset 13 split is an"):
        convert_other_ops(refused, 18, 11)


def test_pad_slice_topk_between_attributes_and_inputs():
    x = X234
    pads = numpy_helper.from_array(np.array([0, 1, 0, 0, 2, 1], np.int64), "p")
    cv = numpy_helper.from_array(np.array(1.5, np.float32), "cv")
    m = make_model([one("Pad", ["x", "p", "cv"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, 3)], opset=13, initializers=[pads, cv])
    roundtrip(m, 13, 1, {"x": x})
    assert attrs(m.graph.node[0]) == {"paddings": [0, 1, 0, 0, 2, 1], "value": 1.5}
    roundtrip(m, 1, 13, {"x": x})
    m = make_model([one("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, -1], axes=[1, 2])],
                   [vi("x", F, [2, 3, 4])], [vi("y", F, 3)], opset=9)
    roundtrip(m, 9, 13, {"x": x})
    roundtrip(m, 13, 1, {"x": x})
    m = make_model([one("TopK", ["x"], ["v", "i"], k=2)], [vi("x", F, [2, 3, 4])],
                   [vi("v", F, 3), vi("i", I64, 3)], opset=7)  # TopK-1 is in force at 7
    roundtrip(m, 7, 13, {"x": x})
    roundtrip(m, 13, 9, {"x": x})
    steps = numpy_helper.from_array(np.array([2], np.int64), "st")
    sl = [numpy_helper.from_array(np.array([v], np.int64), k) for k, v in (("s", 0), ("e", 4))]
    m = make_model([one("Slice", ["x", "s", "e", "", "st"], ["y"])], [vi("x", F, ["N", 3, 4])],
                   [vi("y", F, ["N", 3, 4])], opset=13, initializers=[*sl, steps])
    below7 = onnx.ModelProto()
    below7.CopyFrom(m)
    with pytest.raises(ConversionError, match=r"Slice-10 -> Slice-1.*step 2 on axis 0, whose "
                                              r"size is unknown: .* from opset 7"):
        convert_other_ops(below7, 13, 6)
    roundtrip(m, 13, 9, {"x": x})  # from 7 the positions are computed from the size
    assert "Slice" not in [n.op_type for n in m.graph.node]
    # steps of 1, given (paddle2onnx writes them): dropped
    ones = numpy_helper.from_array(np.array([1], np.int64), "st")
    ax = numpy_helper.from_array(np.array([2], np.int64), "ax")
    m = make_model([one("Slice", ["x", "s", "e", "ax", "st"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 4])], opset=13, initializers=[*sl, ax, ones])
    roundtrip(m, 13, 9, {"x": x})
    assert list(m.graph.node[0].input) == ["x"]
    assert attrs(m.graph.node[0]) == {"starts": [0], "ends": [4], "axes": [2]}


@pytest.mark.parametrize("starts,ends,axes,steps,ops", [
    ([-1], [-2**63], [1], [-1], ["Gather"]),  # reversed
    ([0, 5], [9, 0], [0, 2], [1, -2], ["Gather", "Slice"]),  # step 1 stays in the Slice
    ([1, 0, -1], [3, 5, -8], [0, 1, 2], [1, 2, -3], ["Gather", "Gather", "Slice"]),
    ([3], [0], [2], [-1], ["Gather"]),
    ([0], [9], [2], [5], ["Gather"]),
    ([2], [2], [1], [-1], ["Gather"]),  # empty
])
def test_slice_steps_below_10_are_gathers_of_known_axes(starts, ends, axes, steps, ops):
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    consts = [numpy_helper.from_array(np.array(v, np.int64), k)
              for k, v in (("s", starts), ("e", ends), ("a", axes), ("p", steps))]
    want = evaluate(make_model([one("Slice", ["x", "s", "e", "a", "p"], ["y"])],
                               [vi("x", F, [2, 3, 4])], [vi("y", F, None)], opset=13,
                               initializers=consts), {"x": x})["y"]
    m = make_model([one("Slice", ["x", "s", "e", "a", "p"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, list(want.shape))], opset=13, initializers=consts)
    for target in (9, 1):
        c = onnx.ModelProto()
        c.CopyFrom(m)
        convert(c, 13, target)
        assert [n.op_type for n in c.graph.node] == ops
        np.testing.assert_array_equal(evaluate(c, {"x": x})["y"], want)


def test_concat_and_cast_old_forms():
    x = np.ones((2, 3), np.float32)
    m = make_model([one("Concat", ["x", "x"], ["y"])], [vi("x", F, [2, 3])],
                   [vi("y", F, [2, 6])], opset=1)
    convert(m, 1, 13)
    assert attrs(m.graph.node[0]) == {"axis": 1}
    assert run_ort(m, {"x": x})[0].shape == (2, 6)
    m = make_model([one("Cast", ["x"], ["y"], to=TensorProto.DOUBLE)], [vi("x", F, [2, 3])],
                   [vi("y", TensorProto.DOUBLE, [2, 3])], opset=13)
    convert(m, 13, 1)
    assert attrs(m.graph.node[0]) == {"to": b"DOUBLE"}
    convert(m, 1, 13)
    assert attrs(m.graph.node[0]) == {"to": TensorProto.DOUBLE}


def test_int_constant_becomes_initializer_below_9():
    c = helper.make_node("Constant", [], ["s"], name="c",
                         value=numpy_helper.from_array(np.array([6, 4], np.int64)))
    m = make_model([c, one("Reshape", ["x", "s"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [6, 4])], opset=13)
    roundtrip(m, 13, 7, {"x": X234})
    assert [n.op_type for n in m.graph.node] == ["Reshape"]


# ------------------------------------------------------------------------- scopes


def unsqueeze_graph(name, x, y):
    axes = helper.make_node("Constant", [], [f"{name}_axes"], name=f"{name}_c",
                            value=numpy_helper.from_array(np.array([0], np.int64)))
    return [axes, helper.make_node("Unsqueeze", [x, f"{name}_axes"], [y], name=f"{name}_u")]


def test_subgraphs_converted():
    then_g = helper.make_graph(unsqueeze_graph("t", "x", "ty"), "then", [],
                               [vi("ty", F, [1, 3])])
    neg = helper.make_node("Neg", ["x"], ["nx"], name="neg")
    else_g = helper.make_graph([neg, *unsqueeze_graph("e", "nx", "ey")], "else", [],
                               [vi("ey", F, [1, 3])])
    m = make_model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g,
                                     else_branch=else_g)],
                   [vi("c", TensorProto.BOOL, []), vi("x", F, [3])], [vi("y", F, [1, 3])],
                   opset=13)
    feeds = [{"c": np.array(v), "x": np.arange(3, dtype=np.float32)} for v in (True, False)]
    before = onnx.ModelProto()
    before.CopyFrom(m)
    changes = convert(m, 13, 11)
    assert {c.scope for c in changes if c.op == "Unsqueeze"} == {
        "graph 'g'/node 'if'/then_branch", "graph 'g'/node 'if'/else_branch"}
    for g in (m.graph.node[0].attribute[0].g, m.graph.node[0].attribute[1].g):
        u = next(n for n in g.node if n.op_type == "Unsqueeze")
        assert len(u.input) == 1 and attrs(u) == {"axes": [0]}
        assert not any(n.op_type == "Constant" for n in g.node)
    for f in feeds:
        check_same(before, m, f)


def test_functions_converted_and_kept():
    fn = helper.make_function("local", "F", ["x"], ["y"], unsqueeze_graph("f", "x", "y"),
                              [helper.make_opsetid("", 13)])
    m = make_model([helper.make_node("F", ["x"], ["y"], name="call", domain="local")],
                   [vi("x", F, [3])], [vi("y", F, [1, 3])], opset=13, functions=[fn],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    before = onnx.ModelProto()
    before.CopyFrom(m)
    changes = convert_other_ops(m, 13, 11)
    assert [(c.op, c.scope) for c in changes if c.action == "rewrite"] == [
        ("Unsqueeze", "function local::F")]
    finish(m, 11)
    m.functions[0].opset_import[0].version = 11
    onnx.checker.check_model(m, full_check=True)
    assert [f.name for f in m.functions] == ["F"]
    u = next(n for n in m.functions[0].node if n.op_type == "Unsqueeze")
    assert attrs(u) == {"axes": [0]}
    check_same(before, m, {"x": np.arange(3, dtype=np.float32)})


def test_function_with_its_own_source_opset():
    # The function imports opset 11 while the model imports 13: its nodes start from 11.
    body = [helper.make_node("Unsqueeze", ["x"], ["y"], name="fu", axes=[0])]
    fn = helper.make_function("local", "F", ["x"], ["y"], body, [helper.make_opsetid("", 11)])
    m = make_model([helper.make_node("F", ["x"], ["y"], name="call", domain="local")],
                   [vi("x", F, [3])], [vi("y", F, [1, 3])], opset=13, functions=[fn],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    changes = convert_other_ops(m, 13, 13)
    assert [(c.node, c.from_version, c.to_version) for c in changes] == [("fu", 11, 13)]
    assert len(m.functions[0].node[1].input) == 2  # axes moved to an input (Constant node)
    assert m.functions[0].node[0].op_type == "Constant"


def test_error_names_op_node_scope_and_versions():
    m = make_model([one("Scan", ["s", "x"], ["y"], num_scan_inputs=1,
                        body=helper.make_graph([], "b", [], []))],
                   [vi("s", I64, [1]), vi("x", F, [1, 2])], [vi("y", F, None)], opset=8)
    with pytest.raises(ConversionError) as e:
        convert_other_ops(m, 8, 9)
    msg = str(e.value)
    assert "node 'n_scan'" in msg and "Scan-8 -> 9" in msg and "graph 'g'" in msg
    assert "\n" not in msg


# ------------------------------------------------------------------------- more listed steps


def test_constant_value_attributes_below_12():
    c = helper.make_node("Constant", [], ["c"], name="c", value_ints=[4, 6])
    m = make_model([c, one("Reshape", ["x", "c"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [4, 6])], opset=13)
    roundtrip(m, 13, 11, {"x": X234})
    t = m.graph.node[0].attribute[0]
    assert t.name == "value" and numpy_helper.to_array(t.t).tolist() == [4, 6]
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0], np.float32)),
                                       numpy_helper.from_array(np.array([0], np.int64)), [2])
    m = make_model([helper.make_node("Constant", [], ["y"], name="sp", sparse_value=sparse)],
                   [], [vi("y", F, [2])], opset=13)
    with pytest.raises(ConversionError, match=r"node 'sp' \(Constant-13 -> 9.*sparse_value"):
        convert_other_ops(m, 13, 10)


def test_lp_pool_p_float_and_int():
    x = np.random.default_rng(4).standard_normal((1, 2, 3, 3)).astype(np.float32)
    m = make_model([one("GlobalLpPool", ["x"], ["y"], p=2)], [vi("x", F, [1, 2, 3, 3])],
                   [vi("y", F, [1, 2, 1, 1])], opset=7)
    before = onnx.ModelProto()
    before.CopyFrom(m)
    convert(m, 7, 1)
    a = m.graph.node[0].attribute[0]
    assert a.type == onnx.AttributeProto.FLOAT and a.f == 2.0
    convert(m, 1, 7)
    np.testing.assert_allclose(run_ort(m, {"x": x})[0], run_ort(before, {"x": x})[0])
    m = make_model([one("GlobalLpPool", ["x"], ["y"], p=2.5)], [vi("x", F, [1, 2, 3, 3])],
                   [vi("y", F, [1, 2, 1, 1])], opset=1)
    with pytest.raises(ConversionError, match=r"GlobalLpPool-1 -> GlobalLpPool-2.*p=2.5"):
        convert_other_ops(m, 1, 7)


def test_pool_dilations_of_ones_dropped_others_refused():
    x = np.random.default_rng(5).standard_normal((1, 1, 5, 5)).astype(np.float32)

    def pool(d):
        return make_model([one("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=d)],
                          [vi("x", F, [1, 1, 5, 5])], [vi("y", F, 4)], opset=12)
    m = pool([1, 1])
    roundtrip(m, 12, 8, {"x": x})
    assert "dilations" not in attrs(m.graph.node[0])
    with pytest.raises(ConversionError, match=r"MaxPool-10 -> MaxPool-8.*dilations=\[2, 2\]"):
        convert_other_ops(pool([2, 2]), 12, 8)


@pytest.mark.parametrize("old,new", [(None, "linear"), ("bicubic", "cubic"),
                                     ("nearest", "nearest")])
def test_gridsample_mode_names(old, new):
    rng = np.random.default_rng(6)
    feeds = {"x": rng.standard_normal((1, 1, 4, 4)).astype(np.float32),
             "g": rng.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)}
    kw = {} if old is None else {"mode": old}
    m = make_model([one("GridSample", ["x", "g"], ["y"], **kw)],
                   [vi("x", F, [1, 1, 4, 4]), vi("g", F, [1, 3, 3, 2])],
                   [vi("y", F, [1, 1, 3, 3])], opset=16)
    roundtrip(m, 16, 20, feeds)
    assert attrs(m.graph.node[0])["mode"] == new.encode()
    roundtrip(m, 20, 16, feeds)
    assert attrs(m.graph.node[0])["mode"] == (old or "bilinear").encode()


def test_gru_default_direction_typo():
    w = numpy_helper.from_array(np.zeros((1, 6, 2), np.float32), "w")
    r = numpy_helper.from_array(np.zeros((1, 6, 2), np.float32), "r")
    m = make_model([one("GRU", ["x", "w", "r"], ["y", "h"], hidden_size=2)],
                   [vi("x", F, [1, 1, 2])], [vi("y", F, 4), vi("h", F, 3)], opset=1,
                   initializers=[w, r])
    convert(m, 1, 7)
    assert attrs(m.graph.node[0])["direction"] == b"forward"


def test_roialign_coordinate_mode():
    m = make_model([one("RoiAlign", ["x", "rois", "bi"], ["y"])],
                   [vi("x", F, [1, 1, 4, 4]), vi("rois", F, [1, 4]),
                    vi("bi", I64, [1])], [vi("y", F, 4)], opset=10)
    feeds = {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4),
             "rois": np.array([[0.3, 0.2, 2.9, 3.1]], np.float32), "bi": np.array([0])}
    roundtrip(m, 10, 16, feeds)
    assert attrs(m.graph.node[0])["coordinate_transformation_mode"] == b"output_half_pixel"
    roundtrip(m, 16, 10, feeds)
    m = make_model([one("RoiAlign", ["x", "rois", "bi"], ["y"])],
                   [vi("x", F, [1, 1, 4, 4]), vi("rois", F, [1, 4]),
                    vi("bi", I64, [1])], [vi("y", F, 4)], opset=16)
    with pytest.raises(ConversionError, match=r"RoiAlign-16 -> RoiAlign-10.*half_pixel"):
        convert_other_ops(m, 16, 10)


def test_dft_axis_attribute_and_input():
    x = np.random.default_rng(7).standard_normal((1, 4, 3, 1)).astype(np.float32)
    m = make_model([one("DFT", ["x"], ["y"])], [vi("x", F, [1, 4, 3, 1])],
                   [vi("y", F, [1, 4, 3, 2])], opset=17)
    roundtrip(m, 17, 20, {"x": x})  # DFT-17's default axis 1 written as DFT-20's input
    roundtrip(m, 20, 17, {"x": x})
    assert attrs(m.graph.node[0]) == {"axis": 1}
    m = make_model([one("DFT", ["x"], ["y"])], [vi("x", F, 4)], [vi("y", F, 4)], opset=20)
    convert(m, 20, 17)  # DFT-20's default axis -2 is the second last
    assert attrs(m.graph.node[0]) == {"axis": 2}
    m = make_model([one("DFT", ["x"], ["y"])], [vi("x", F, None)], [vi("y", F, None)],
                   opset=20)
    with pytest.raises(ConversionError, match=r"DFT-20 -> DFT-17.*rank"):
        convert_other_ops(m, 20, 17)


def test_resize_steps():
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    m = make_model([one("Resize", ["x", "", "sc"], ["y"], mode="nearest")],
                   [vi("x", F, [1, 1, 2, 2])], [vi("y", F, [1, 1, 4, 4])], opset=13,
                   initializers=[scales])
    roundtrip(m, 13, 11, {"x": x})
    assert m.graph.node[0].input[1]  # Resize-11 requires roi
    with pytest.raises(ConversionError, match=r"Resize-11 -> Resize-10.*asymmetric"):
        convert_other_ops(m, 11, 10)  # half_pixel sampling with round_prefer_floor
    m = make_model([one("Resize", ["x", "", "sc"], ["y"],
                        coordinate_transformation_mode="half_pixel_symmetric")],
                   [vi("x", F, [1, 1, 2, 2])], [vi("y", F, [1, 1, 4, 4])], opset=19,
                   initializers=[scales])
    with pytest.raises(ConversionError, match="half_pixel_symmetric"):
        convert_other_ops(m, 19, 18)


def test_quantize_per_axis_below_13_is_its_formula():
    def q(scale):
        s = numpy_helper.from_array(np.asarray(scale, np.float32), "s")
        return make_model([one("QuantizeLinear", ["x", "s"], ["y"], axis=1)],
                          [vi("x", F, [2, 3])], [vi("y", TensorProto.UINT8, [2, 3])],
                          opset=13, initializers=[s])
    x = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) * 100}
    m = q(0.5)
    roundtrip(m, 13, 10, x)
    assert [n.op_type for n in m.graph.node] == ["QuantizeLinear"]
    m = q([0.5, 1.0, 2.0])
    roundtrip(m, 13, 10, x)
    assert "QuantizeLinear" not in [n.op_type for n in m.graph.node]


def test_more_refusals():
    cases = [
        (one("OneHot", ["i", "d", "v"], ["y"]),
         [vi("i", I64, [2]), vi("d", I64, [1]), vi("v", F, [2])], 11, 9,
         r"OneHot-11 -> OneHot-9.*negative indices"),
        (one("ScatterElements", ["x", "i", "u"], ["y"], reduction="max"),
         [vi("x", F, [3]), vi("i", I64, [1]), vi("u", F, [1])], 18, 16,
         r"ScatterElements-18 -> ScatterElements-16.*reduction"),
        (one("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=1),
         [vi("x", F, [1, 2, 3]), vi("s", F, [2]), vi("b", F, [2])], 21, 18,
         r"GroupNormalization-21 -> GroupNormalization-18.*per channel"),
        (one("Pad", ["x", "p"], ["y"], mode="wrap"), [vi("x", F, [3]), vi("p", I64, [2])],
         19, 18, r"Pad-19 -> Pad-18.*wrap"),
        (one("Dropout", ["x", "r", "t"], ["y"]),
         [vi("x", F, [3]), vi("r", F, []), vi("t", TensorProto.BOOL, [])], 13, 10,
         r"Dropout-12 -> Dropout-10.*training_mode.*not a constant"),
        (one("Gemm", ["a", "b", "c"], ["y"]),
         [vi("a", F, [2, 3]), vi("b", F, [3, 4]), vi("c", F, [2, 1])], 13, 6,
         r"Gemm-7 -> Gemm-6.*C of shape \(2, 1\)"),
        (one("Upsample", ["x", "s"], ["y"]), [vi("x", F, [1, 4]), vi("s", F, [2])], 9, 7,
         r"Upsample-9 -> Upsample-7.*scales \(input 1, 's'\) is not a constant"),
        (one("Tile", ["x", "t", "a"], ["y"]),
         [vi("x", F, [3]), vi("t", F, [1]), vi("a", F, [1])], 1, 6,
         r"Tile-1 -> Tile-6.*3 inputs"),
    ]
    for n, inputs, src, tgt, pattern in cases:
        m = make_model([n], inputs, [vi("y", F, None)], opset=src)
        before = m.SerializeToString()
        with pytest.raises(ConversionError, match=pattern):
            convert_other_ops(m, src, tgt)
        assert m.SerializeToString() == before


def test_clip_1_unset_bounds_upgrade():
    m = make_model([one("Clip", ["x"], ["y"], min=0.0)], [vi("x", F, [3])], [vi("y", F, [3])],
                   opset=1)
    convert(m, 1, 6)
    assert attrs(m.graph.node[0]) == {"min": 0.0, "max": float("inf")}
    x = np.array([-1, 0.5, np.inf], np.float32)  # +inf stays +inf: no upper bound
    (y,) = evaluate(m, {"x": x}).values()
    np.testing.assert_array_equal(y, [0, 0.5, np.inf])


def test_slice_negative_axes_below_11():
    consts = [numpy_helper.from_array(np.array(v, np.int64), k)
              for k, v in (("s", [1]), ("e", [3]), ("a", [-1]))]
    m = make_model([one("Slice", ["x", "s", "e", "a"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 2])], opset=13, initializers=consts)
    roundtrip(m, 13, 10, {"x": X234})
    roundtrip(m, 10, 9, {"x": X234})
    assert attrs(m.graph.node[0])["axes"] == [2]


def test_split_1_input_to_attribute():
    sp = numpy_helper.from_array(np.array([1, 3], np.int64), "sp")
    m = make_model([one("Split", ["x", "sp"], ["a", "b"])], [vi("x", F, [4])],
                   [vi("a", F, [1]), vi("b", F, [3])], opset=1, initializers=[sp])
    convert(m, 1, 2)
    assert attrs(m.graph.node[0]) == {"split": [1, 3], "axis": 0}
    assert list(m.graph.node[0].input) == ["x"]


def test_upsample_scales_forms():
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    sc = numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "sc")
    m = make_model([one("Upsample", ["x", "sc"], ["y"])], [vi("x", F, [1, 1, 2, 2])],
                   [vi("y", F, [1, 1, 4, 6])], opset=9, initializers=[sc])
    roundtrip(m, 9, 7, {"x": x})
    assert attrs(m.graph.node[0])["scales"] == [1.0, 1.0, 2.0, 3.0]
    convert(m, 7, 1)
    assert attrs(m.graph.node[0]) == {"height_scale": 2.0, "width_scale": 3.0}
    convert(m, 1, 9)
    np.testing.assert_array_equal(run_ort(m, {"x": x})[0],
                                  np.repeat(np.repeat(x, 2, axis=2), 3, axis=3))
    convert_other_ops(m, 9, 10)  # deprecated at 10: Resize-10, the same op renamed
    assert [n.op_type for n in m.graph.node] == ["Resize"]


def test_upsample_1_bilinear_is_7s_linear():
    """Upsample-1 names linear sampling 'bilinear', which Upsample-7 does not accept."""
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    m = make_model([one("Upsample", ["x"], ["y"], mode="bilinear", height_scale=2.0,
                        width_scale=1.5)], [vi("x", F, [1, 1, 2, 3])], [vi("y", F, [1, 1, 4, 4])],
                   opset=5)
    roundtrip(m, 1, 7, {"x": x})
    assert attrs(m.graph.node[0]) == {"mode": b"linear", "scales": [1.0, 1.0, 2.0, 1.5]}
    convert(m, 7, 1)
    assert attrs(m.graph.node[0]) == {"mode": b"bilinear", "height_scale": 2.0,
                                      "width_scale": 1.5}


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scale", [2.0, 1.5, 0.6])
def test_resize_10_and_11(mode, scale):
    x = np.random.default_rng(8).standard_normal((1, 2, 5, 4)).astype(np.float32)
    sc = numpy_helper.from_array(np.array([1, 1, scale, scale], np.float32), "sc")
    m = make_model([one("Resize", ["x", "sc"], ["y"], mode=mode)], [vi("x", F, [1, 2, 5, 4])],
                   [vi("y", F, 4)], opset=10, initializers=[sc])
    if mode == "nearest" and scale < 1:
        with pytest.raises(ConversionError, match=r"Resize-10 -> 13.*nearest downsampling"):
            convert_other_ops(m, 10, 13)
        return
    roundtrip(m, 10, 13, {"x": x})
    a = attrs(m.graph.node[0])
    assert a["coordinate_transformation_mode"] == b"asymmetric"
    roundtrip(m, 13, 10, {"x": x})
    assert list(m.graph.node[0].input) == ["x", "sc"]


# ------------------------------------------------------------------------- cost


def chain(n: int, opset: int) -> onnx.ModelProto:
    """Conv -> Add -> PRelu repeated: the bench's shape of model."""
    w = numpy_helper.from_array(np.full((2, 2, 1, 1), 0.5, np.float32), "w")
    s = numpy_helper.from_array(np.full((2, 1, 1), 0.1, np.float32), "s")
    nodes, x = [], "x"
    for i in range(n):
        nodes += [helper.make_node("Conv", [x, "w"], [f"c{i}"], name=f"conv{i}"),
                  helper.make_node("Add", [f"c{i}", x], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("PRelu", [f"a{i}", "s"], [f"p{i}"], name=f"prelu{i}")]
        x = f"p{i}"
    return make_model(nodes, [vi("x", F, [1, 2, 3, 3])], [vi(x, F, [1, 2, 3, 3])],
                      opset=opset, initializers=[w, s])


def test_chain_needs_no_shape_inference_and_no_rewrite(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("shape inference was run")
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", boom)
    for src, tgt in ((9, 16), (16, 9)):
        m = chain(200, src)
        before = m.SerializeToString()
        changes = convert_other_ops(m, src, tgt)
        assert len(changes) == 400 and {c.action for c in changes} == {"relabel"}
        assert m.SerializeToString() == before


def test_external_weights_are_never_read(tmp_path):
    w = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="missing.bin")
    m = make_model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                    helper.make_node("Unsqueeze", ["c", "ax"], ["y"], name="u")],
                   [vi("x", F, [1, 2, 3, 3])], [vi("y", F, [1, 1, 2, 3, 3])], opset=13,
                   initializers=[w, numpy_helper.from_array(np.array([0], np.int64), "ax")])
    convert_other_ops(m, 13, 9)
    assert attrs(m.graph.node[1]) == {"axes": [0]}
    assert m.graph.initializer[0].data_location == TensorProto.EXTERNAL


def test_type_propagated_through_cast():
    m = make_model([one("Cast", ["x"], ["c"], to=TensorProto.INT8), one("Relu", ["c"], ["y"])],
                   [vi("x", F, [2])], [vi("y", TensorProto.INT8, [2])], opset=14)
    with pytest.raises(ConversionError, match=r"'c'\) is tensor\(int8\), not allowed"):
        convert_other_ops(m, 14, 13)
    m = make_model([one("Cast", ["x"], ["c"], to=TensorProto.FLOAT), one("Relu", ["c"], ["y"])],
                   [vi("x", TensorProto.INT8, [2])], [vi("y", F, [2])], opset=14)
    assert [(c.op, c.action) for c in convert_other_ops(m, 14, 13)] == [("Relu", "relabel")]


def test_pool_ceil_mode_across_22():
    def pool(op, size, **kw):
        return make_model([one(op, ["x"], ["y"], kernel_shape=[1], ceil_mode=1, **kw)],
                          [vi("x", F, [1, 1, size])], [vi("y", F, 3)], opset=22)
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 5)
    # Windows start at 0, 3 and 6: the last starts past the input (kept before 22 only).
    with pytest.raises(ConversionError, match=r"MaxPool-22 -> MaxPool-12.*starts in the "
                                              r"padding"):
        convert_other_ops(pool("MaxPool", 5, strides=[3]), 22, 18)
    m = pool("AveragePool", 5, strides=[2])  # windows at 0, 2, 4: all start inside
    roundtrip(m, 22, 18, {"x": x})
    roundtrip(m, 18, 22, {"x": x})
    m = make_model([one("MaxPool", ["x"], ["y"], kernel_shape=[1], ceil_mode=1, strides=[3])],
                   [vi("x", F, [1, 1, None])], [vi("y", F, 3)], opset=22)
    with pytest.raises(ConversionError, match=r"stride 3 \+ end pad 0 > window 1.*not static"):
        convert_other_ops(m, 22, 18)


@pytest.mark.parametrize("target", [13, 9])
@pytest.mark.parametrize("start,end", [(1, None), (-2, None), (0, -1), (1, 2)])
def test_shape_start_end_as_slice(target, start, end):
    kw = {"start": start} if end is None else {"start": start, "end": end}
    m = make_model([one("Shape", ["x"], ["y"], **kw)], [vi("x", F, [2, 3, 4])],
                   [vi("y", I64, 1)], opset=15)
    roundtrip(m, 15, target, {"x": X234})
    assert [n.op_type for n in m.graph.node] == ["Shape", "Slice"]


# ------------------------------------------------------------------------- onnx's node tests

BACKEND_TARGETS = (7, 9, 10, 11, 12, 13, 15, 16, 18, 20, 22, 24)


def _array(v):
    return numpy_helper.to_array(v) if isinstance(v, TensorProto) else v


def _same(a, b) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        tol = 1e-3 if a.dtype == np.float16 else 1e-5  # one float16 ulp near 1 is 1e-3
        return np.allclose(a, b, rtol=tol, atol=tol / 10, equal_nan=True)
    return bool(np.array_equal(a, b))


@functools.cache
def _node_tests() -> dict:
    """onnx's backend node test models of one opset import: a fixed third, to keep this fast."""
    import warnings
    import zlib

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return {c.name: c for c in cases
            if not zlib.crc32(c.name.encode()) % 3 and len(c.model.opset_import) == 1}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_node_tests()))
def test_onnx_node_test_converts_exactly_or_is_refused(name):
    """An onnx backend node test model, converted to one other opset (rotating through
    BACKEND_TARGETS), is either refused or passes the checker and gives onnxruntime's outputs
    of the original (or onnx's reference outputs). onnxruntime runs both models: where it
    cannot, or onnx's checker rejects the original, the case is skipped with their reason."""
    import zlib

    c = _node_tests()[name]
    try:
        onnx.checker.check_model(c.model, full_check=True)
    except Exception as e:
        pytest.skip(f"onnx's checker rejects the original: {str(e).strip().splitlines()[0]}")
    h = zlib.crc32(name.encode())
    src = c.model.opset_import[0].version
    targets = [t for t in BACKEND_TARGETS if t != src]
    target = targets[(h // 3) % len(targets)]
    inputs, expected = c.data_sets[0]
    feeds = {v.name: _array(x) for v, x in zip(c.model.graph.input, inputs)}
    ref = run_onnxruntime(c.model, feeds)
    m = onnx.ModelProto()
    m.CopyFrom(c.model)
    try:
        convert_other_ops(m, src, target, skip=())
    except ConversionError as e:
        msg = str(e)
        assert "\n" not in msg and "node '" in msg, msg
        return
    finish(m, target)
    onnx.checker.check_model(m, full_check=True)
    got = run_onnxruntime(m, feeds)
    # onnxruntime's original run, or onnx's reference outputs where onnxruntime's kernel
    # itself differs from them (seen for some Attention-23 cases).
    assert all(_same(a, b) for a, b in zip(ref, got)) or all(
        _same(_array(e), b) for e, b in zip(expected, got)), f"{name} {src} -> {target}"


def test_castlike_below_15_becomes_cast():
    like = numpy_helper.from_array(np.zeros((1,), np.float64), "like")
    m = make_model([one("CastLike", ["x", "like"], ["y"])], [vi("x", F, [3])],
                   [vi("y", TensorProto.DOUBLE, [3])], opset=19, initializers=[like])
    changes = roundtrip(m, 19, 13, {"x": np.array([1.5, -2, 3e-8], np.float32)})
    assert [(c.op, c.to_version) for c in changes] == [("CastLike", None)]
    assert [(n.op_type, attrs(n)) for n in m.graph.node] == [("Cast",
                                                             {"to": TensorProto.DOUBLE})]
    m = make_model([one("CastLike", ["x", "like"], ["y"])],
                   [vi("x", F, [3]), vi("like", TensorProto.BFLOAT16, [1])],
                   [vi("y", TensorProto.BFLOAT16, [3])], opset=19)
    with pytest.raises(ConversionError, match=r"CastLike does not exist at opset 9.*"
                                              r"Cast-9 does not take tensor\(bfloat16\)"):
        convert_other_ops(m, 19, 9)


def test_table_lists_real_steps_and_documents_them():
    import sys

    from opshift.convert import registry
    from opshift.convert.steps import broadcast_legacy, negative_axes
    from opshift.opsets import versions

    registry.steps_for("Relu", 1)  # loads the step modules
    for (op, v), fns in registry.STEPS.items():
        vs = versions(op)
        assert v in vs and v != vs[0], (op, v, vs)
        for r in fns:
            doc = sys.modules[r.fn.__module__].__doc__
            assert (op in doc or op in negative_axes.NEG_AXES
                    or op in broadcast_legacy.BINARY), op
    for op, fn in registry.REPLACEMENTS.items():
        assert op in sys.modules[fn.__module__].__doc__


def test_folded_constants_removed_only_when_unused():
    ax = helper.make_node("Constant", [], ["ax"], name="ax",
                          value=numpy_helper.from_array(np.array([0], np.int64)))
    nodes = [ax, one("Unsqueeze", ["x", "ax"], ["u1"]),
             helper.make_node("Unsqueeze", ["x", "ax"], ["u2"], name="u2")]
    m = make_model(nodes, [vi("x", F, [3])], [vi("u1", F, [1, 3]), vi("u2", F, [1, 3])],
                   opset=13)
    convert(m, 13, 11)
    assert [n.op_type for n in m.graph.node] == ["Unsqueeze", "Unsqueeze"]
    nodes.append(helper.make_node("Identity", ["ax"], ["z"], name="keep"))
    m = make_model(nodes, [vi("x", F, [3])], [vi("u1", F, [1, 3]), vi("z", I64, [1])],
                   opset=13)
    convert(m, 13, 11)
    assert [n.op_type for n in m.graph.node] == ["Constant", "Unsqueeze", "Unsqueeze",
                                                 "Identity"]


@pytest.mark.parametrize("op,src,target,kw", [
    ("HardSwish", 14, 13, {}), ("HardSwish", 14, 7, {}), ("Mish", 18, 13, {}),
    ("GreaterOrEqual", 16, 11, {}), ("LessOrEqual", 12, 11, {}),
    ("Gelu", 20, 17, {}), ("Gelu", 20, 13, {"approximate": "tanh"}),
    ("LayerNormalization", 17, 13, {"axis": -1}),
    ("Swish", 24, 13, {"alpha": 0.5}),
])
def test_missing_op_written_as_its_function_body(op, src, target, kw):
    x = np.linspace(-4, 4, 24, dtype=np.float32).reshape(2, 3, 4)
    two = op in ("GreaterOrEqual", "LessOrEqual")
    inputs = [vi("x", F, [2, 3, 4])] + ([vi("z", F, [2, 3, 4])] if two else [])
    inits = []
    names = ["x", "z"] if two else ["x"]
    if op == "LayerNormalization":
        inits = [numpy_helper.from_array(np.linspace(0.5, 2, 4, dtype=np.float32), "g"),
                 numpy_helper.from_array(np.linspace(-1, 1, 4, dtype=np.float32), "b")]
        names = ["x", "g", "b"]
    out = TensorProto.BOOL if two else F
    m = make_model([one(op, names, ["y"], **kw)], inputs, [vi("y", out, [2, 3, 4])],
                   opset=src, initializers=inits)
    feeds = {"x": x, "z": np.round(x)} if two else {"x": x}
    # (LayerNormalization's body is written with its variance in two passes, not bit for bit
    # the body: tests/test_convert_stable_variance.py)
    changes = roundtrip(m, src, target, feeds)
    assert [(c.op, c.to_version, c.action) for c in changes] == [(op, None, "rewrite")]
    assert op not in {n.op_type for n in m.graph.node}
    assert all(n.name.startswith("n_") for n in m.graph.node)  # readable, derived names


def test_function_body_that_cannot_reach_the_target_is_refused():
    m = make_model([one("GreaterOrEqual", ["x", "z"], ["y"])],
                   [vi("x", F, [3]), vi("z", F, [3])], [vi("y", TensorProto.BOOL, [3])],
                   opset=12)
    # Its body's Equal takes floats only from opset 11, and is written out from 7 only.
    with pytest.raises(ConversionError, match=r"GreaterOrEqual does not exist at opset 6.*"
                                              r"function body.*Equal.*below opset 7 Less"):
        convert_other_ops(m, 12, 6)


def test_float16_attention_body_below_23():
    """onnx builds float16 Attention's body with a float32 ConstantOfShape bias cast back, and
    CastLikes whose element types only shape inference of the body tells: written out at
    opset 13 it type-checks and computes the same bits."""
    q = [vi(n, TensorProto.FLOAT16, [1, 2, 3, 4]) for n in ("q", "k", "v")]
    m = make_model([one("Attention", ["q", "k", "v"], ["y"], is_causal=1)], q,
                   [vi("y", TensorProto.FLOAT16, [1, 2, 3, 4])], opset=23)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((1, 2, 3, 4)).astype(np.float16) for n in "qkv"}
    want = evaluate(m, feeds)["y"]
    convert_other_ops(m, 23, 13)
    m.opset_import[0].version = 13
    m.ir_version = ir_version_for_opset(13)
    onnx.checker.check_model(m, full_check=True)
    assert "Attention" not in {n.op_type for n in m.graph.node}
    assert_exact(want, evaluate(m, feeds)["y"])


def test_function_body_that_does_not_type_check_is_refused(monkeypatch):
    """A written body is type-checked on its own at the target: one that mixes element
    types (here a body adding a float to an int64) is refused, never written."""
    from opshift.convert.steps import missing_ops

    body = helper.make_function("", "Mish", ["X"], ["Y"], [
        helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k", TensorProto.INT64,
                                                                         [], [1])),
        helper.make_node("Add", ["X", "k"], ["Y"])], [helper.make_opsetid("", 18)])
    monkeypatch.setattr(missing_ops, "_function_body", lambda st: (body, 18))
    m = make_model([one("Mish", ["x"], ["y"])], [vi("x", TensorProto.FLOAT, [2])],
                   [vi("y", TensorProto.FLOAT, [2])], opset=18)
    with pytest.raises(ConversionError, match=r"Mish does not exist at opset 13.*"
                                              r"does not type-check"):
        convert_other_ops(m, 18, 13)


# ------------------------------------------------------------ function bodies typed by calls

MODELS = Path(__file__).resolve().parents[1] / "models"


def test_local_function_model_every_opset():
    """models/local_function.onnx: Add inside the function is typed from the call sites, so
    every opset the activations allow converts with the model's own expected numbers."""
    import opshift

    z = np.load(MODELS / "local_function.npz")
    ins = {"x": z["input:x"]}
    want = z["output:y"]
    done, refused = [], {}
    for target in range(1, onnx.defs.onnx_opset_version() + 1):
        m = onnx.load(MODELS / "local_function.onnx")
        try:
            out = opshift.convert(m, target)
        except ConversionError as e:
            msg = str(e)
            assert "\n" not in msg and "node '" in msg and "-> " in msg, msg
            assert "element type" not in msg, msg  # the call sites give every type
            refused[target] = msg
            continue
        onnx.checker.check_model(out, full_check=True)
        got = evaluate(out, ins)["y"]
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        done.append(target)
    assert done == list(range(7, onnx.defs.onnx_opset_version() + 1)), refused
    # Below 7 legacy broadcasting needs shapes a function body does not carry.
    assert all("shape" in msg for msg in refused.values()), refused


def _twice_called(types, body=None, opset=14):
    """F(x) = Add(x, x), called once per element type in ``types`` from the main graph (the
    second call inside an If branch, to check calls in subgraphs count too)."""
    body = body or [helper.make_node("Add", ["x", "x"], ["y"], name="fadd")]
    fn = helper.make_function("local", "F", ["x"], ["y"], body,
                              [helper.make_opsetid("", opset)])
    calls = [helper.make_node("F", ["a"], ["ya"], name="call_a", domain="local")]
    inputs = [vi("a", types[0], [3]), vi("c", TensorProto.BOOL, [])]
    outputs = [vi("ya", types[0], [3])]
    if len(types) > 1:
        inputs.append(vi("b", types[1], [3]))
        outputs.append(vi("yb", types[1], [3]))
        branch = helper.make_graph(
            [helper.make_node("F", ["b"], ["yb_in"], name="call_b", domain="local")],
            "then", [], [vi("yb_in", types[1], [3])])
        other = helper.make_graph([helper.make_node("Identity", ["b"], ["yb_else"])],
                                  "else", [], [vi("yb_else", types[1], [3])])
        calls.append(helper.make_node("If", ["c"], ["yb"], name="if",
                                      then_branch=branch, else_branch=other))
    return make_model(calls, inputs, outputs, opset=opset, functions=[fn],
                      extra_opsets=[helper.make_opsetid("local", 1)])


def _finish_functions(m, target):
    finish(m, target)
    for f in m.functions:
        for imp in f.opset_import:
            if imp.domain in ("", "ai.onnx"):
                imp.version = target


def test_function_called_with_two_element_types_accepted_for_both():
    m = _twice_called([F, TensorProto.DOUBLE])
    changes = convert_other_ops(m, 14, 13)
    assert ("fadd", "relabel", "function local::F") in [
        (c.node, c.action, c.scope) for c in changes]
    _finish_functions(m, 13)
    onnx.checker.check_model(m, full_check=True)
    a = np.array([1.5, -2, 3e-8], np.float32)
    b = np.array([0.1, -7, 1e300], np.float64)
    got = evaluate(m, {"a": a, "b": b, "c": np.array(True)})
    np.testing.assert_array_equal(got["ya"], a + a)
    assert got["yb"].dtype == np.float64
    np.testing.assert_array_equal(got["yb"], b + b)


def test_function_called_with_a_type_the_target_lacks_is_refused_with_both_types():
    m = _twice_called([F, TensorProto.INT8])
    before = m.SerializeToString()
    with pytest.raises(ConversionError) as e:
        convert_other_ops(m, 14, 13)
    msg = str(e.value)
    assert "\n" not in msg and "node 'fadd'" in msg and "Add-14 -> 13" in msg
    assert "function local::F" in msg and "x: int8" in msg and "tensor(int8)" in msg
    assert m.SerializeToString() == before  # refused: nothing written


def test_function_whose_conversion_depends_on_the_call_type_is_refused():
    # CastLike below 15 becomes Cast(to=<like's type>): one body cannot serve both calls.
    like = helper.make_node("Constant", [], ["like"], name="k",
                            value=numpy_helper.from_array(np.zeros(1, np.float64)))
    body = [like, helper.make_node("CastLike", ["x", "like"], ["y0"], name="cl"),
            helper.make_node("CastLike", ["y0", "x"], ["y"], name="back")]
    m = _twice_called([F, TensorProto.FLOAT16], body, opset=19)
    with pytest.raises(ConversionError) as e:
        convert_other_ops(m, 19, 13)
    msg = str(e.value)
    assert "\n" not in msg and "node 'back'" in msg and "function local::F" in msg
    assert "x: float" in msg and "x: float16" in msg and "different conversions" in msg
    # Called with one type only, the same body converts, with the call's numbers.
    m = _twice_called([TensorProto.FLOAT16], body, opset=19)
    before = onnx.ModelProto()
    before.CopyFrom(m)
    convert_other_ops(m, 19, 13)
    _finish_functions(m, 13)
    onnx.checker.check_model(m, full_check=True)
    f = m.functions[0]
    assert [(n.op_type, attrs(n).get("to")) for n in f.node[1:]] == [
        ("Cast", TensorProto.DOUBLE), ("Cast", TensorProto.FLOAT16)]
    a = np.array([1.5, -2, 65504], np.float16)
    np.testing.assert_array_equal(evaluate(m, {"a": a, "c": np.array(True)})["ya"], a)


def test_calls_from_other_functions_type_the_callee():
    inner = helper.make_function("local", "G", ["x"], ["y"],
                                 [helper.make_node("Add", ["x", "x"], ["y"], name="gadd")],
                                 [helper.make_opsetid("", 14)])
    outer = helper.make_function("local", "F", ["x"], ["y"],
                                 [helper.make_node("G", ["x"], ["y"], name="callg",
                                                   domain="local")],
                                 [helper.make_opsetid("", 14), helper.make_opsetid("local", 1)])
    m = make_model([helper.make_node("F", ["a"], ["y"], name="callf", domain="local")],
                   [vi("a", TensorProto.DOUBLE, [2])], [vi("y", TensorProto.DOUBLE, [2])],
                   opset=14, functions=[inner, outer],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    changes = convert_other_ops(m, 14, 7)
    assert [(c.node, c.scope) for c in changes] == [("gadd", "function local::G")]
    _finish_functions(m, 7)
    onnx.checker.check_model(m, full_check=True)
    a = np.array([0.25, -3], np.float64)
    np.testing.assert_array_equal(evaluate(m, {"a": a})["y"], a + a)


def test_function_never_called():
    fn = helper.make_function("local", "F", ["x"], ["y"],
                              [helper.make_node("Add", ["x", "x"], ["y"], name="fadd")],
                              [helper.make_opsetid("", 14)])
    m = make_model([one("Relu", ["a"], ["y"])], [vi("a", F, [2])], [vi("y", F, [2])],
                   opset=14, functions=[fn], extra_opsets=[helper.make_opsetid("local", 1)])
    before = m.SerializeToString()
    # Add-14 -> 13 needs x's type: nothing gives it, so a clear refusal.
    with pytest.raises(ConversionError) as e:
        convert_other_ops(m, 14, 13)
    msg = str(e.value)
    assert "\n" not in msg and "node 'fadd'" in msg and "Add-14 -> 13" in msg
    assert "function local::F is never called" in msg
    assert m.SerializeToString() == before
    # A walk that needs no types (Reshape-14 -> 13, allowzero unset) relabels it untouched.
    fn = helper.make_function("local", "F", ["x", "s"], ["y"],
                              [helper.make_node("Reshape", ["x", "s"], ["y"], name="fr")],
                              [helper.make_opsetid("", 14)])
    del m.functions[:]
    m.functions.append(fn)
    before = m.SerializeToString()
    changes = convert_other_ops(m, 14, 13)
    assert [(c.node, c.action) for c in changes] == [("n_relu", "relabel"), ("fr", "relabel")]
    assert m.SerializeToString() == before


def test_function_names_are_typed_apart_from_the_graphs():
    # The graph's 'x' is int8 (not at Add-13); the function's own 'x' is the float it is
    # called with, so its Add converts.
    fn = helper.make_function("local", "F", ["x"], ["y"],
                              [helper.make_node("Add", ["x", "x"], ["y"], name="fadd")],
                              [helper.make_opsetid("", 14)])
    m = make_model([helper.make_node("Cast", ["x"], ["xf"], name="cast", to=F),
                    helper.make_node("F", ["xf"], ["y"], name="call", domain="local")],
                   [vi("x", TensorProto.INT8, [3])], [vi("y", F, [3])], opset=14,
                   functions=[fn], extra_opsets=[helper.make_opsetid("local", 1)])
    changes = convert_other_ops(m, 14, 13)
    assert [(c.node, c.action) for c in changes] == [("fadd", "relabel")]
    _finish_functions(m, 13)
    onnx.checker.check_model(m, full_check=True)
    x = np.array([-128, 5, 127], np.int8)
    np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], 2 * x.astype(np.float32))


@pytest.mark.parametrize("ir", [3, 8])
def test_an_initializer_that_can_be_fed_is_not_a_constant(ir):
    """From IR 4 an initializer listed among the graph inputs is a default a caller may
    replace: its value cannot be folded into an attribute. Before IR 4 every initializer
    is listed there and is a constant."""
    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
    m = make_model([one("Reshape", ["x", "shape"], ["y"])],
                   [vi("x", F, [2, 3]), vi("shape", I64, [2])], [vi("y", F, [2, 3])],
                   opset=13, initializers=[shape])
    m.ir_version = ir
    if ir >= 4:
        with pytest.raises(ConversionError, match=r"n_reshape.*shape.*not a constant"):
            convert_other_ops(m, 13, 4)
    else:
        convert_other_ops(m, 13, 4)
        assert attrs(m.graph.node[0]) == {"shape": [0, -1]}


def test_other_domain_body_that_needs_newer_ai_onnx_is_refused_going_down():
    """ai.onnx.preview::FlexAttention is defined by a function body in ai.onnx ops that does
    not import ai.onnx: it runs at the model's ai.onnx opset, where (below 15) its Shape has
    no 'start'. convert keeps the node but refuses an opset its body does not fit."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    from opshift.convert import convert as convert_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = next((c for c in collect_testcases(None) if c.name == "test_flexattention"),
                    None)
    if case is None:
        pytest.skip("this onnx has no FlexAttention node test")
    with pytest.raises(ConversionError, match=r"ai.onnx.preview::FlexAttention-1.*its function "
                                              r"body uses Shape's 'start', which Shape-13"):
        convert_model(case.model, 13)
    m = convert_model(case.model, 20)
    assert [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] == [20]
    inputs, expected = case.data_sets[0]
    got = evaluate(m, {v.name: np.asarray(t) for v, t in zip(m.graph.input, inputs)})
    np.testing.assert_allclose(got[m.graph.output[0].name], np.asarray(expected[0]),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["scales", "scales_reversed", "sizes", "negative", "crop"])
def test_resize_axes_below_18_nearest(case):
    """Resize-18's axes written out for nearest mode: scale 1 (or the dim itself) and roi
    [0, 1] on the other axes select every element where it is: the same values, inf and NaN
    included; linear is refused."""
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    x[0, 0, 0, :2] = [np.inf, np.nan]
    kw = {"mode": "nearest"}
    roi, scales, sizes = "", "", ""
    inits = []
    if case in ("scales", "scales_reversed", "negative", "crop"):
        axes = {"scales": [2, 3], "scales_reversed": [3, 2], "negative": [-1],
                "crop": [2, 3]}[case]
        vals = {2: 2.0, 3: 1.5, -1: 3.0}
        inits.append(numpy_helper.from_array(np.array([vals[a] for a in axes], np.float32),
                                             "scales"))
        scales = "scales"
    else:
        axes = [3, 2]
        inits.append(numpy_helper.from_array(np.array([7, 6], np.int64), "sizes"))
        sizes = "sizes"
    if case == "crop":
        kw["coordinate_transformation_mode"] = "tf_crop_and_resize"
        inits.append(numpy_helper.from_array(np.array([0.2, 0.1, 0.9, 0.8], np.float32),
                                             "roi"))
        roi = "roi"
    m = make_model([one("Resize", ["x", roi, scales, sizes], ["y"], axes=axes, **kw)],
                   [vi("x", F, [2, 3, 4, 5])], [vi("y", F, 4)], opset=18, initializers=inits)
    want = evaluate(m, {"x": x})["y"]
    for target in (13, 11):
        c = onnx.ModelProto()
        c.CopyFrom(m)
        convert(c, 18, target)
        assert "axes" not in attrs(node(c, "Resize"))
        assert_exact(want, evaluate(c, {"x": x})["y"])
    before, after = onnxruntime_outputs(m, {"x": x}), onnxruntime_outputs(c, {"x": x})
    if not isinstance(before, str) and not isinstance(after, str):
        np.testing.assert_array_equal(after[0], before[0])
    linear = make_model([one("Resize", ["x", "", "scales"], ["y"], axes=[2, 3], mode="linear")],
                        [vi("x", F, [2, 3, 4, 5])], [vi("y", F, 4)], opset=18,
                        initializers=[numpy_helper.from_array(np.array([2.0, 2.0], np.float32),
                                                              "scales")])
    with pytest.raises(ConversionError, match="axes=.* mode='linear'"):
        convert(linear, 18, 13)



@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("source, target", [(6, 13), (13, 6), (13, 1), (6, 1), (1, 13)])
def test_clip_unset_bounds_across_versions(dtype, source, target):
    """Unset bounds mean no bound at 1, +-FLT_MAX at 6 (compared in X's type: +-inf in
    float16), the type's own finite limits from 11 (+-65504 in float16): infinities and
    values beyond FLT_MAX tell them apart. Double's limits do not fit Clip-6's attributes."""
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([one("Clip", ["x"], ["y"])], [vi("x", t, [6])], [vi("y", t, [6])],
                   opset=source)
    big = 1e300 if dtype == np.float64 else 1e4
    x = np.array([-np.inf, -big, -1.5, -0.0, big, np.inf], dtype)
    if dtype == np.float64 and source == 13 and target < 11:
        with pytest.raises(ConversionError, match=r"Clip-11 -> Clip-6.*omitted min is "
                                                  r"double's .*float attribute"):
            convert_other_ops(m, source, target)
        return
    before = onnx.ModelProto()
    before.CopyFrom(m)
    convert(m, source, target)
    want, got = evaluate(before, {"x": x})["y"], evaluate(m, {"x": x})["y"]
    c = compare(want, got)
    assert c.ok, c.reason
    assert got.dtype == dtype
    if target >= 7:  # a second opinion where onnxruntime runs the opset
        theirs = onnxruntime_outputs(m, {"x": x})
        if not isinstance(theirs, str):
            np.testing.assert_array_equal(theirs[0], want)


def test_reduce_log_sum_exp_means_its_function_body_at_every_version():
    """ReduceLogSumExp-18's body (Exp, ReduceSum, Log in float64) defines every version: the
    conversion across 18 keeps the values, infinities and overflow included."""
    x = np.array([[100, 100], [3.4e38, 0], [-np.inf, 1], [800, 0]], np.float32)
    m = make_model([one("ReduceLogSumExp", ["x"], ["y"], axes=[1])], [vi("x", F, [4, 2])],
                   [vi("y", F, [4, 1])], opset=13)
    before = onnx.ModelProto()
    before.CopyFrom(m)
    convert(m, 13, 18)
    want = np.log(np.sum(np.exp(x.astype(np.float64)), axis=1, keepdims=True)).astype(
        np.float32)
    for model in (before, m):
        got = evaluate(model, {"x": x})["y"]
        assert compare(want, got, ulp=0).ok, got
    assert np.isinf(want[1, 0]) and want[0, 0] == np.float32(100 + np.log(2))


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64,
                                   np.uint64])
@pytest.mark.parametrize("target", [11, 9, 8, 7, 6])
def test_integer_max_min_below_12(op, dtype, target):
    """Max/Min take integers from 12: below, Where(Less) input by input (from 9), or float64
    and back for 8-, 16- and 32-bit types (6..8); 64-bit ones picked by a 64-bit Less at 7
    and 8, refused at 6. The full range of each type is fed, with broadcasting of three
    inputs."""
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([one(op, ["a", "b", "c"], ["y"])],
                   [vi("a", t, [2, 3]), vi("b", t, [3]), vi("c", t, [2, 1])],
                   [vi("y", t, [2, 3])], opset=13)
    info, rng = np.iinfo(dtype), np.random.default_rng(10)
    feeds = {k: rng.integers(info.min, info.max, s, dtype=dtype, endpoint=True)
             for k, s in (("a", (2, 3)), ("b", (3,)), ("c", (2, 1)))}
    feeds["a"][0, :2] = [info.min, info.max]
    if target < 7 and np.dtype(dtype).itemsize == 8:
        with pytest.raises(ConversionError, match=r"U?INT64 inputs.*rounds values past 2\*\*53"):
            convert_other_ops(m, 13, target)
        return
    roundtrip(m, 13, target, feeds)
    assert op not in [n.op_type for n in m.graph.node] or target < 9


@pytest.mark.parametrize("target", [8, 6])
def test_int64_max_of_positions_and_a_small_constant_below_9(target):
    """64-bit Max goes through float64 at 6..8 when its inputs are positions or sizes an op
    computes (here Shape's) and constants within 2**53; one past 2**53 is refused at 6 (at
    7 and 8 a 64-bit Less picks)."""
    for bound, ok in ((2**53, True), (2**53 + 1, target > 6)):
        m = make_model([one("Shape", ["x"], ["s"]), one("Max", ["s", "lim"], ["y"])],
                       [vi("x", F, ["n", 3])], [vi("y", I64, [2])], opset=13,
                       initializers=[numpy_helper.from_array(np.array([2, bound], np.int64),
                                                             "lim")])
        if not ok:
            with pytest.raises(ConversionError, match=r"INT64 inputs.*past 2\*\*53"):
                convert_other_ops(m, 13, target)
            continue
        feeds = {"x": np.zeros((5, 3), np.float32)}
        roundtrip(m, 13, target, feeds)
        assert evaluate(m, feeds)["y"].tolist() == [5, bound]


@pytest.mark.parametrize("op", ["Equal", "GreaterOrEqual", "LessOrEqual"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("target", [10, 9, 8, 7, 6])
@pytest.mark.parametrize("const_b", [False, True])
def test_float_equal_below_11(op, dtype, target, const_b):
    """Equal takes floats from 11: below, Not(Less or Greater) and neither a NaN (IsNaN from
    9, below ``x < inf or x > -inf``); so GreaterOrEqual/LessOrEqual's bodies go there too.
    +0 equals -0, infinities themselves, NaN nothing; a constant B without NaN needs no
    test; below 7 refused."""
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    a = np.array([[0, -0.0, np.inf, np.nan, -np.inf], [-0.0, 2, -np.inf, 3, np.nan]], dtype)
    b = np.array([-0.0, np.inf if const_b else np.nan, np.inf, 3, -np.inf], dtype)
    inits = [numpy_helper.from_array(b, "b")] if const_b else []
    m = make_model([one(op, ["a", "b"], ["y"])],
                   [vi("a", t, [2, 5])] + ([] if const_b else [vi("b", t, [5])]),
                   [vi("y", TensorProto.BOOL, [2, 5])], opset=13, initializers=inits)
    feeds = {"a": a} if const_b else {"a": a, "b": b}
    if target < 7:
        with pytest.raises(ConversionError, match=r"below opset 7 Less and Greater"):
            convert_other_ops(m, 13, target)
        return
    roundtrip(m, 13, target, feeds)
    assert op not in [n.op_type for n in m.graph.node]
    want = {"Equal": np.equal, "GreaterOrEqual": np.greater_equal,
            "LessOrEqual": np.less_equal}[op](a, b)
    np.testing.assert_array_equal(evaluate(m, feeds)["y"], want)
    if op == "Equal":  # one NaN test per input that may hold one
        ops = [n.op_type for n in m.graph.node]
        tests = 1 if const_b else 2
        assert (ops.count("IsNaN"), ops.count("Less")) == \
            ((tests, 1) if target >= 9 else (0, 1 + tests))


@pytest.mark.parametrize("const_pads", [True, False])
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("target", [13, 11, 2])
def test_pad_axes_spread_over_every_axis_below_18(const_pads, mode, target):
    """Pad-18's constant axes [-1, 0]: below 18 pads covers every axis, axis 1 padded by 0;
    a computed pads read through a Gather (so not below 11, where pads is an attribute)."""
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array(np.array([-1, 0], np.int64), "ax")]
    inputs = [vi("x", F, [2, 3, 4])]
    if const_pads:
        inits.append(numpy_helper.from_array(np.array([1, 2, 0, 1], np.int64), "p"))
    else:
        inputs.append(vi("p", I64, [4]))
    m = make_model([one("Pad", ["x", "p", "", "ax"], ["y"], mode=mode)], inputs,
                   [vi("y", F, [5, 3, 5])], opset=18, initializers=inits)
    feeds = {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}
    if not const_pads:
        feeds["p"] = np.array([1, 2, 0, 1], np.int64)
        if target < 11:
            with pytest.raises(ConversionError, match=r"Pad-11 -> Pad-2.*not a constant"):
                convert_other_ops(m, 18, target)
            return
    roundtrip(m, 18, target, feeds)
    assert [n.op_type for n in m.graph.node][-1] == "Pad"


@pytest.mark.parametrize("exponent, etype, ok", [
    ([2], np.int64, True), ([-3, 0, 1], np.int32, True), ([0.5], np.float64, True),
    ([2**25 + 1], np.int64, False), ([0.1], np.float64, False)])
@pytest.mark.parametrize("target", [11, 7])
def test_pow_exponent_of_another_type_below_12(exponent, etype, ok, target):
    """Pow-12 takes an exponent of another type; before, X's: a constant exponent exact in
    X's type is written in it (the same power), else refused."""
    e = numpy_helper.from_array(np.array(exponent, etype), "e")
    shape = [len(exponent)]
    m = make_model([one("Pow", ["x", "e"], ["y"])], [vi("x", F, shape)], [vi("y", F, shape)],
                   opset=13, initializers=[e])
    if not ok:
        with pytest.raises(ConversionError, match=r"Pow-12 -> Pow-7.*not exact in FLOAT"):
            convert_other_ops(m, 13, target)
        return
    roundtrip(m, 13, target, {"x": np.array([-1.5, 0.0, np.inf][:len(exponent)], np.float32)})


def test_pow_computed_integer_exponent_is_refused_below_12():
    m = make_model([one("Pow", ["x", "e"], ["y"])], [vi("x", F, [2]), vi("e", I64, [2])],
                   [vi("y", F, [2])], opset=13)
    with pytest.raises(ConversionError, match=r"exponent 'e' is INT64 and computed"):
        convert_other_ops(m, 13, 11)


@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("itype", [TensorProto.INT64, TensorProto.INT32])
@pytest.mark.parametrize("target", [10, 9, 8, 7, 6])
def test_gather_computed_negative_indices_below_11(static, itype, target):
    """Gather-11 counts negative indices from the back; below, computed indices are read
    through Where(i < 0, i + n, i) from 9 (n known, or the data's shape at run time), at 7
    and 8 as i + n * (i < 0) (the sign read through float); refused below 7."""
    data_shape = [5, 3] if static else ["n", 3]
    m = make_model([one("Gather", ["d", "i"], ["y"], axis=0)],
                   [vi("d", F, data_shape), vi("i", itype, [4])], [vi("y", F, [4, 3])],
                   opset=13)
    feeds = {"d": np.arange(15, dtype=np.float32).reshape(5, 3),
             "i": np.array([-5, -1, 0, 4], helper.tensor_dtype_to_np_dtype(itype))}
    if target < 7:
        with pytest.raises(ConversionError, match=r"indices are computed \(below opset 7"):
            convert_other_ops(m, 13, target)
        return
    roundtrip(m, 13, target, feeds)
    ops = [n.op_type for n in m.graph.node]
    assert ("Where" in ops) == (target >= 9) and ("Mul" in ops) == (target < 9)
    np.testing.assert_array_equal(evaluate(m, feeds)["y"], feeds["d"][feeds["i"]])


def _gather_of(producer: str) -> tuple[onnx.ModelProto, dict]:
    """Gather(d, i) at opset 13, i computed by ``producer``: ArgMax's positions, TopK's
    indices, a Shape, or positions negated (Neg: negative indices)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    first, inits, n = [one("ArgMax", ["x"], ["i"], axis=1, keepdims=0)], [], 4
    if producer == "Shape":
        first, n = [one("Shape", ["x"], ["i"])], 2
    elif producer == "TopK":
        inits = [numpy_helper.from_array(np.array([2], np.int64), "k")]
        first, n = [one("TopK", ["x", "k"], ["v", "i"], axis=0)], 2
    elif producer == "Neg":
        first = [one("ArgMax", ["x"], ["a"], axis=1, keepdims=0), one("Neg", ["a"], ["i"])]
    m = make_model(first + [one("Gather", ["d", "i"], ["y"], axis=0)],
                   [vi("d", F, [6, 3]), vi("x", F, [4, 5])],
                   [vi("y", F, [n, 3] if producer != "TopK" else [2, 5, 3])], opset=13,
                   initializers=inits)
    return m, {"d": np.arange(-9, 9, dtype=np.float32).reshape(6, 3), "x": x}


@pytest.mark.parametrize("producer", ["ArgMax", "TopK", "Shape"])
@pytest.mark.parametrize("target", [10, 9, 7])
def test_gather_of_never_negative_indices_below_11(producer, target):
    """Indices an op computes that are never negative (positions, sizes) mean the same at
    every Gather version: no Where is written, and below 9, where none could be, the
    conversion still goes through."""
    m, feeds = _gather_of(producer)
    roundtrip(m, 13, target, feeds)
    assert [n.op_type for n in m.graph.node][-1:] == ["Gather"]
    assert not {"Where", "Less", "Add"} & {n.op_type for n in m.graph.node}
    assert node(m, "Gather").input[1] == "i"


def test_gather_of_other_computed_indices_below_11_still_reads_negatives():
    """Indices of any other op (here negated positions) are read through the Where from 9,
    through a sign mask at 7 and 8, refused below."""
    m, feeds = _gather_of("Neg")
    roundtrip(m, 13, 9, feeds)
    assert "Where" in {n.op_type for n in m.graph.node}
    m, feeds = _gather_of("Neg")
    roundtrip(m, 13, 7, feeds)
    assert {"Less", "Mul", "Add"} <= {n.op_type for n in m.graph.node}
    m, _ = _gather_of("Neg")
    with pytest.raises(ConversionError, match=r"indices are computed \(below opset 7"):
        convert_other_ops(m, 13, 6)


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int16, np.uint32])
@pytest.mark.parametrize("target", [10, 9, 6, 5])
def test_integer_topk_below_11(largest, dtype, target):
    """TopK takes integers (and largest=0) from 11: below, X ranked as float64 (exact for
    32-bit and narrower), negated for the k smallest; ties keep the lower index first.
    Refused below 6 (Cast-1's type is a string)."""
    info = np.iinfo(dtype)
    x = np.array([[3, info.min, info.max, 3, 0, info.max], [1, 1, info.min, 5, 5, 2]], dtype)
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    k = numpy_helper.from_array(np.array([4], np.int64), "k")
    m = make_model([one("TopK", ["x", "k"], ["v", "i"], largest=largest)],
                   [vi("x", t, [2, 6])], [vi("v", t, [2, 4]), vi("i", I64, [2, 4])],
                   opset=11, initializers=[k])
    if target < 6:
        with pytest.raises(ConversionError, match=r"below opset 6 Cast names its type"):
            convert_other_ops(m, 11, target)
        return
    roundtrip(m, 11, target, {"x": x})
    order = np.argsort(-x.astype(np.float64) if largest else x, axis=1, kind="stable")[:, :4]
    got = evaluate(m, {"x": x})
    np.testing.assert_array_equal(got["i"], order)
    np.testing.assert_array_equal(got["v"], np.take_along_axis(x, order, 1))


def test_topk_of_int64_positions_below_11_and_other_int64_refused():
    """64-bit X goes through float64 only when it holds positions (here TopK's indices,
    sorted again: PyTorch's sort of a sort); other int64 X is refused."""
    k = numpy_helper.from_array(np.array([3], np.int64), "k")
    m = make_model([one("TopK", ["x", "k"], ["v", "i"], largest=0),
                    helper.make_node("TopK", ["i", "k"], ["v2", "i2"], largest=0, name="again")],
                   [vi("x", F, [3])], [vi("v2", I64, [3]), vi("i2", I64, [3])], opset=11,
                   initializers=[k])
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    with pytest.raises(ConversionError, match=r"largest=0 does not exist at TopK-10"):
        convert_other_ops(m2, 11, 10)  # (float X, k smallest: refused)
    m.graph.node[0].attribute[0].i = 1  # float X, k largest: no change
    roundtrip(m, 11, 10, {"x": np.array([0.5, -2.0, 7.0], np.float32)})
    assert [n.op_type for n in m.graph.node].count("Neg") == 2
    m = make_model([one("TopK", ["x", "k"], ["v", "i"], largest=0)], [vi("x", I64, [3])],
                   [vi("v", I64, [3]), vi("i", I64, [3])], opset=11, initializers=[k])
    with pytest.raises(ConversionError, match=r"INT64 X: TopK takes integers from 11"):
        convert_other_ops(m, 11, 10)


@pytest.mark.parametrize("op", ["Less", "Greater"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.uint32, np.int64,
                                   np.uint64])
@pytest.mark.parametrize("target", [8, 7])
def test_integer_less_greater_below_9(op, dtype, target):
    """Less/Greater take integers from 9: below (from 7), 32-bit and narrower as float64;
    64-bit as (high, low) halves of their floor division by 2**32, so that neighbours past
    2**53 (which a double rounds together) still compare, negatives and extremes too."""
    info = np.iinfo(dtype)
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([one(op, ["a", "b"], ["y"])], [vi("a", t, [2, 6]), vi("b", t, [6])],
                   [vi("y", TensorProto.BOOL, [2, 6])], opset=13)
    big = 2**53 if info.bits == 64 else info.max // 2
    a = np.array([[info.min, info.max, 0, big + 1, big, 5],
                  [info.max - 1, info.min + 1, 1, big, big + 1, 5]], dtype)
    b = np.array([info.min + 1, info.max - 1, 0, big, big + 1, 5], dtype)
    if info.min < 0:
        a[1, 2], b[2] = -1, -(2**40) if info.bits == 64 else -2
    roundtrip(m, 13, target, {"a": a, "b": b})
    want = np.less(a, b) if op == "Less" else np.greater(a, b)
    np.testing.assert_array_equal(evaluate(m, {"a": a, "b": b})["y"], want)
    assert (op not in [n.op_type for n in m.graph.node][-1:]) == (info.bits == 64)
