"""opshift convert: PRelu slopes across 6/7, Selu defaults, consumed_inputs, IR versions,
subgraphs and functions, the API kinds, and the safety guarantees."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conftest import (
    assert_exact,
    assert_outputs_exact,
    legacy_model,
    make_model,
    run_onnxruntime,
    vi,
)
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from opshift import opsets
from opshift.convert import convert
from opshift.convert.engine import convert_proto
from opshift.convert.result import all_changes
from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.plugins.onnx_ir import ConvertOpsetPass

RNG = np.random.default_rng(0)


@functools.cache
def pytorch_style_prelu6(width: int = 5) -> onnx.ModelProto:
    """What PyTorch's opset-6 export of Conv -> PReLU(num_parameters=C) looks like: a [C]
    slope applied per channel (axis 1)."""
    w = numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")
    s = numpy_helper.from_array(np.array([0.1, -0.2, 0.3, 2.5], np.float32), "slope")
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("PRelu", ["c", "slope"], ["y"], name="prelu")]
    return legacy_model(make_model(nodes, [vi("x", shape=[1, 3, 4, width])],
                                   [vi("y", shape=[1, 4, 4, width])], opset=6,
                                   initializers=[w, s]))


def xin(shape, seed=1):
    v = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    v.flat[:3] = [0.0, -0.0, -2.0]
    return v


def per_channel_reference(x_conv: np.ndarray, slope: np.ndarray) -> np.ndarray:
    s = slope.reshape(1, -1, 1, 1)
    return np.where(x_conv < 0, x_conv * s, x_conv)


@pytest.mark.parametrize("width", [5, 4])
def test_legacy_pytorch_prelu_keeps_numbers_at_every_newer_opset(width):
    m = pytorch_style_prelu6(width)
    x = xin([1, 3, 4, width])
    ref = evaluate(m, {"x": x})["y"]
    conv = evaluate(make_model([m.graph.node[0]], [vi("x", shape=[1, 3, 4, width])],
                               [vi("c", shape=[1, 4, 4, width])], opset=11,
                               initializers=[m.graph.initializer[0]]), {"x": x})["c"]
    # the reference is independent of the evaluator's PRelu: per channel on axis 1
    np.testing.assert_allclose(ref, per_channel_reference(
        conv, numpy_helper.to_array(m.graph.initializer[1])), rtol=1e-6)
    for target in range(7, opsets.MAX_OPSET + 1):
        out = convert(m, target)
        onnx.checker.check_model(out, full_check=True)
        assert_exact(ref, evaluate(out, {"x": x})["y"], f"target {target}")
        # the slope is per channel at the target too (numpy broadcasting from 7 on)
        (s,) = [t for t in out.graph.initializer if t.name.startswith("slope")]
        assert list(s.dims) == [4, 1, 1], target


@pytest.mark.parametrize("width", [5, 4])
@pytest.mark.parametrize("target", range(7, opsets.MAX_OPSET + 1))
def test_legacy_pytorch_prelu_converted_runs_the_same_in_onnxruntime(width, target):
    m = pytorch_style_prelu6(width)
    x = xin([1, 3, 4, width])
    got = run_onnxruntime(convert(m, target), {"x": x})[0]
    np.testing.assert_allclose(got, evaluate(m, {"x": x})["y"], rtol=1e-5, atol=1e-6)


def test_dynamic_legacy_slope_gets_unsqueeze_valid_at_target():
    nodes = [helper.make_node("PRelu", ["x", "s"], ["y"], name="p")]
    m = legacy_model(make_model(nodes, [vi("x", shape=[2, 3, 2, 2]), vi("s", shape=[3])],
                                [vi("y", shape=[2, 3, 2, 2])], opset=6))
    feeds = {"x": xin([2, 3, 2, 2]), "s": np.array([0.5, -1.0, 3.0], np.float32)}
    ref = evaluate(m, feeds)["y"]
    for target in (7, 12, 13, 20):
        out = convert(m, target)
        onnx.checker.check_model(out, full_check=True)
        uns = [n for n in out.graph.node if n.op_type == "Unsqueeze"]
        assert len(uns) == 1
        assert (len(uns[0].input) == 2) == (target >= 13)  # axes became an input at 13
        assert_exact(ref, evaluate(out, feeds)["y"])
        back = convert(out, 6)
        onnx.checker.check_model(back, full_check=True)
        assert_exact(ref, evaluate(back, feeds)["y"])


def test_shared_slope_initializer_is_copied_not_edited():
    s = numpy_helper.from_array(np.array([0.5, -1.0, 3.0], np.float32), "s")
    nodes = [helper.make_node("PRelu", ["x", "s"], ["y"], name="p"),
             helper.make_node("Add", ["s", "s"], ["z"], name="add")]
    m = legacy_model(make_model(nodes, [vi("x", shape=[2, 3, 2, 2])],
                                [vi("y", shape=[2, 3, 2, 2]), vi("z", shape=[3])], opset=6,
                                initializers=[s]))
    ref = evaluate(m, {"x": xin([2, 3, 2, 2])})
    out = convert(m, 7)
    onnx.checker.check_model(out, full_check=True)
    dims = {t.name: list(t.dims) for t in out.graph.initializer}
    assert dims["s"] == [3] and [3, 1, 1] in dims.values()
    got = evaluate(out, {"x": xin([2, 3, 2, 2])})
    assert_outputs_exact(ref, got)


def test_rank_of_x_unknown_is_a_clear_error():
    nodes = [helper.make_node("PRelu", ["x", "s"], ["y"], name="mystery")]
    s = numpy_helper.from_array(np.array([0.5, -1.0, 3.0], np.float32), "s")
    m = legacy_model(make_model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, None)],
                                [helper.make_tensor_value_info("y", TP.FLOAT, None)], opset=6,
                                initializers=[s]))
    with pytest.raises(ConversionError, match=r"'mystery'.*PRelu-6.*rank of X"):
        convert(m, 7)


@pytest.mark.parametrize("slope_shape,x_shape", [([3], [2, 4, 2, 3]), ([3], [2, 3, 2, 3]),
                                                 ([3, 1, 1], [2, 3, 2, 2]),
                                                 ([1], [2, 3, 2, 2]), ([2, 1], [2, 3, 2, 1]),
                                                 ([4], [2, 4])])
def test_downgrade_numpy_slopes_to_legacy(slope_shape, x_shape):
    """[C] on the last axis -> [1, C] (legacy would read it per channel when C == X dim 1);
    [C,1,..,1] (per channel under both readings), size-1, multi-dim and rank-2 slopes keep
    their form."""
    vals = np.linspace(-2, 2, int(np.prod(slope_shape))).astype(np.float32)
    s = numpy_helper.from_array(vals.reshape(slope_shape), "s")
    nodes = [helper.make_node("PRelu", ["x", "s"], ["y"], name="p")]
    m = make_model(nodes, [vi("x", shape=x_shape)], [vi("y", shape=x_shape)], opset=16,
                   initializers=[s])
    x = xin(x_shape)
    ref = evaluate(m, {"x": x})["y"]
    for target in (1, 6):
        out = convert(m, target)
        onnx.checker.check_model(out, full_check=True)
        assert_exact(ref, evaluate(out, {"x": x})["y"])
        (t,) = [t for t in out.graph.initializer if t.name.startswith("s")]
        if slope_shape == [3] and x_shape[1] == 3:
            assert list(t.dims) == [1, 3]
        else:
            assert list(t.dims) == slope_shape


def selu_model(opset: int, **attrs) -> onnx.ModelProto:
    node = helper.make_node("Selu", ["x"], ["y"], name="selu", **attrs)
    return make_model([node], [vi("x", shape=[64])], [vi("y", shape=[64])], opset=opset)


def test_selu1_defaults_preserved_both_directions():
    x = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    m1 = selu_model(1)
    ref1 = evaluate(m1, {"x": x})["y"]
    for target in range(2, opsets.MAX_OPSET + 1):
        out = convert(m1, target)
        onnx.checker.check_model(out, full_check=True)
        assert_exact(ref1, evaluate(out, {"x": x})["y"], f"target {target}")
        attrs = {a.name: a.f for a in out.graph.node[0].attribute}
        if target >= 6:
            assert attrs == pytest.approx({"alpha": 1.6732, "gamma": 1.0507})
    # and down: a default Selu-6 gets the 6+ defaults written when going to opset 1
    m6 = selu_model(6)
    ref6 = evaluate(m6, {"x": x})["y"]
    out = convert(m6, 1)
    assert_exact(ref6, evaluate(out, {"x": x})["y"])
    assert {a.name for a in out.graph.node[0].attribute} == {"alpha", "gamma"}
    # explicit attributes are left alone
    out = convert(selu_model(1, alpha=2.0, gamma=3.0), 22)
    assert {a.name: a.f for a in out.graph.node[0].attribute} == {"alpha": 2.0, "gamma": 3.0}


def test_consumed_inputs_dropped_going_to_6_and_up():
    node = helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", consumed_inputs=[0])
    m = make_model([node], [vi("x", shape=[4])], [vi("y", shape=[4])], opset=1)
    for target in (5, 6, 16):
        out = convert(m, target)
        onnx.checker.check_model(out, full_check=True)
        names = {a.name for a in out.graph.node[0].attribute}
        assert ("consumed_inputs" in names) == (target < 6)


@pytest.mark.parametrize("source,target", [(28, 21), (28, 9), (9, 16), (16, 9), (21, 6),
                                           (6, 28), (13, 14)])
def test_ir_version_follows_target(source, target):
    m = selu_model(source)
    out = convert(m, target)
    if target < source:
        assert out.ir_version == opsets.ir_version_for_opset(target)
    else:
        assert out.ir_version == max(m.ir_version, opsets.ir_version_for_opset(target))
    onnx.checker.check_model(out, full_check=True)


def test_ir_downgrade_keeps_numbers_and_runs_in_onnxruntime():
    """28 -> 21 lowers the IR version to 21's (10), not only the opset."""
    m = selu_model(28)
    out = convert(m, 21)
    assert out.ir_version == 10
    onnx.checker.check_model(out, full_check=True)
    x = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    ref = evaluate(m, {"x": x})["y"]
    assert_exact(ref, evaluate(out, {"x": x})["y"])
    got = run_onnxruntime(out, {"x": x})[0]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)


def _if_loop_function_model(opset: int) -> onnx.ModelProto:
    slope = np.array([0.5, -1.0, 3.0], np.float32).reshape([3] if opset < 7 else [3, 1, 1])
    then_g = helper.make_graph(
        [helper.make_node("Constant", [], ["ts"], name="tconst",
                          value=numpy_helper.from_array(slope, "ts")),
         helper.make_node("PRelu", ["x", "ts"], ["t_out"], name="then_prelu")],
        "then", [], [vi("t_out", shape=[2, 3, 2, 2])])
    else_g = helper.make_graph([helper.make_node("Selu", ["x"], ["e_out"], name="else_selu")],
                               "else", [], [vi("e_out", shape=[2, 3, 2, 2])])
    body = helper.make_graph(
        [helper.make_node("LeakyRelu", ["acc"], ["acc_out"], name="body_lrelu", alpha=0.5),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_id")],
        "body", [vi("i", TP.INT64, []), vi("cond_in", TP.BOOL, []), vi("acc", shape=[2, 3, 2, 2])],
        [vi("cond_out", TP.BOOL, []), vi("acc_out", shape=[2, 3, 2, 2])])
    fn = helper.make_function("local", "Act", ["fx"], ["fy"],
                              [helper.make_node("Selu", ["fx"], ["fy"], name="fn_selu")],
                              [helper.make_opsetid("", opset)])
    nodes = [
        helper.make_node("If", ["c"], ["branch"], name="if", then_branch=then_g,
                         else_branch=else_g),
        helper.make_node("Loop", ["n", "c"], ["looped"], name="loop", body=body),
        helper.make_node("Act", ["looped"], ["y"], name="call", domain="local"),
    ]
    inputs = [vi("x", shape=[2, 3, 2, 2]), vi("c", TP.BOOL, []), vi("n", TP.INT64, [])]
    m = make_model(nodes, inputs, [vi("branch", shape=[2, 3, 2, 2]), vi("y", shape=[2, 3, 2, 2])],
                   opset=opset, functions=[fn],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    m.ir_version = max(m.ir_version, 8)
    # Loop's body reads the loop-carried acc from x: seed it
    m.graph.node[1].input.append("x")
    return m


@pytest.mark.parametrize("source,target", [(11, 6), (6, 11), (16, 13), (13, 22), (22, 11)])
def test_if_loop_and_functions_are_converted(source, target):
    m = _if_loop_function_model(source)
    onnx.checker.check_model(m, full_check=True)
    out = convert(m, target)
    onnx.checker.check_model(out, full_check=True)
    assert [f.name for f in out.functions] == ["Act"]
    assert opsets.opset_of(out.functions[0]) == target
    for c in (True, False):
        feeds = {"x": xin([2, 3, 2, 2]), "c": np.array(c), "n": np.array(2, np.int64)}
        ref = evaluate(m, feeds)
        got = evaluate(out, feeds)
        for k in ref:
            assert_exact(ref[k], got[k], f"{k} c={c}")


def test_api_kinds_and_input_not_mutated():
    m = pytorch_style_prelu6()
    before = m.SerializeToString()
    out = convert(m, 13)
    assert isinstance(out, onnx.ModelProto) and m.SerializeToString() == before
    irm = ir.serde.deserialize_model(m)
    out_ir = convert(irm, 13)
    assert isinstance(out_ir, ir.Model)
    assert irm.opset_imports[""] == 6
    assert out_ir.opset_imports[""] == 13


def test_convert_opset_pass_in_pass_manager():
    m = ir.serde.deserialize_model(pytorch_style_prelu6())
    x = xin([1, 3, 4, 5])
    ref = evaluate(pytorch_style_prelu6(), {"x": x})["y"]
    pm = ir.passes.PassManager([ConvertOpsetPass(16)])
    res = pm(m)
    assert res.modified and res.model is m
    assert m.opset_imports[""] == 16
    proto = ir.serde.serialize_model(m)
    onnx.checker.check_model(proto, full_check=True)
    assert_exact(ref, evaluate(proto, {"x": x})["y"])
    assert not ConvertOpsetPass(16)(m).modified


def test_noop_idempotent_and_up_then_down():
    m = pytorch_style_prelu6()
    same = onnx.ModelProto()
    same.CopyFrom(m)
    res = convert_proto(same, 6)
    assert not res.modified and same.SerializeToString() == m.SerializeToString()
    once = convert(m, 13)
    twice = convert(once, 13)
    assert once.SerializeToString() == twice.SerializeToString()
    x = xin([1, 3, 4, 5])
    ref = evaluate(m, {"x": x})["y"]
    for mid in (7, 9, 16, 28):
        back = convert(convert(m, mid), 6)
        onnx.checker.check_model(back, full_check=True)
        assert_exact(ref, evaluate(back, {"x": x})["y"])


def test_relabel_count_is_the_default_domain_nodes_listed():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node("Relu", ["a"], ["b"], name="mine", domain="my"),
             helper.make_node("Sigmoid", ["b"], ["c"], name="s"),
             helper.make_node("Relu", ["c"], ["y"])]
    m = make_model(nodes, [vi("x", shape=[2, 3])], [vi("y", shape=[2, 3])], opset=9,
                   extra_opsets=[helper.make_opsetid("my", 1)])
    res = convert_proto(m, 16)
    listed = [(c.node, c.label, c.action) for c in all_changes(res.entries)]
    assert listed == [("r1", "Relu-6->14", "relabel"), ("s", "Sigmoid-6->13", "relabel"),
                      ("<Relu #3>", "Relu-6->14", "relabel")]
    assert res.relabelled == 3 and res.changes == []


def test_bad_target_is_one_line_error():
    with pytest.raises(Exception, match=r"outside 1\.\.28") as e:
        convert(selu_model(9), 99)
    assert "\n" not in str(e.value)


def test_slope_shared_by_many_prelus_is_copied_once():
    s = numpy_helper.from_array(np.array([0.5, -1.0, 3.0], np.float32), "s")
    nodes = [helper.make_node("PRelu", ["x", "s"], ["a"], name="p0"),
             helper.make_node("PRelu", ["a", "s"], ["b"], name="p1"),
             helper.make_node("PRelu", ["b", "s"], ["y"], name="p2"),
             helper.make_node("Identity", ["s"], ["s_out"], name="keep")]
    m = legacy_model(make_model(nodes, [vi("x", shape=[2, 3, 2, 2])],
                                [vi("y", shape=[2, 3, 2, 2]), vi("s_out", shape=[3])], opset=6,
                                initializers=[s]))
    x = xin([2, 3, 2, 2])
    ref = evaluate(m, {"x": x})
    out = convert(m, 9)
    onnx.checker.check_model(out, full_check=True)
    assert sorted(list(t.dims) for t in out.graph.initializer) == [[3], [3, 1, 1]]
    got = evaluate(out, {"x": x})
    assert_outputs_exact(ref, got)


def test_dynamic_last_axis_slope_downgrade_and_symbolic_dims():
    """A dynamic [C] slope on the last axis (C == X's dim 1 too) becomes [1, C] through an
    Unsqueeze valid at opset 6, so legacy PRelu does not read it per channel."""
    nodes = [helper.make_node("PRelu", ["x", "s"], ["y"], name="p")]
    m = make_model(nodes, [vi("x", shape=["N", 3, 2, 3]), vi("s", shape=[3])],
                   [vi("y", shape=["N", 3, 2, 3])], opset=16)
    feeds = {"x": xin([4, 3, 2, 3]), "s": np.array([0.5, -1.0, 3.0], np.float32)}
    ref = evaluate(m, feeds)["y"]
    out = convert(m, 6)
    onnx.checker.check_model(out, full_check=True)
    (u,) = [n for n in out.graph.node if n.op_type == "Unsqueeze"]
    assert list(u.attribute[0].ints) == [0]
    assert_exact(ref, evaluate(out, feeds)["y"])
    # and the legacy per-channel form with a symbolic batch goes up again
    legacy = legacy_model(make_model(nodes, [vi("x", shape=["N", 3, 2, 4]), vi("s", shape=[3])],
                                     [vi("y", shape=["N", 3, 2, 4])], opset=6))
    feeds = {"x": xin([4, 3, 2, 4]), "s": np.array([0.5, -1.0, 3.0], np.float32)}
    ref = evaluate(legacy, feeds)["y"]
    up = convert(legacy, 14)
    onnx.checker.check_model(up, full_check=True)
    assert_exact(ref, evaluate(up, feeds)["y"])


def test_bfloat16_downgrade_below_16_keeps_numbers():
    """LeakyRelu-16 bfloat16 to opset 15 (where LeakyRelu does not take bfloat16): valid and
    bit for bit the same outputs."""
    import ml_dtypes

    node = helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha=0.5)
    bf = make_model([node], [vi("x", TP.BFLOAT16, [4])], [vi("y", TP.BFLOAT16, [4])],
                    opset=16)
    out = convert(bf, 15)
    onnx.checker.check_model(out, full_check=True)
    x = np.array([-3.0, -0.0, 1.5, np.inf], np.float32).astype(ml_dtypes.bfloat16)
    assert_exact(evaluate(bf, {"x": x})["y"], evaluate(out, {"x": x})["y"])


def test_types_created_inside_the_graph_are_found():
    """bfloat16 that appears only through a Cast, and int64 that appears only through Shape,
    still get the type adapters."""
    nodes = [helper.make_node("Cast", ["x"], ["xb"], name="to_bf16", to=TP.BFLOAT16),
             helper.make_node("LeakyRelu", ["xb"], ["lb"], name="lr", alpha=0.3),
             helper.make_node("Cast", ["lb"], ["y"], name="to_float", to=TP.FLOAT),
             helper.make_node("Shape", ["x"], ["shp"], name="shape"),
             helper.make_node("Neg", ["shp"], ["neg"], name="neg"),
             helper.make_node("PRelu", ["neg", "s"], ["z"], name="int_prelu")]
    s = numpy_helper.from_array(np.array([3], np.int64), "s")
    m = make_model(nodes, [vi("x", shape=[2, 5])], [vi("y", shape=[2, 5]), vi("z", TP.INT64, [2])],
                   opset=16, initializers=[s])
    x = xin([2, 5])
    ref = evaluate(m, {"x": x})
    out = convert(m, 13)
    onnx.checker.check_model(out, full_check=True)
    ops = [n.op_type for n in out.graph.node]
    assert ops.count("Cast") >= 4  # LeakyRelu wrapped
    got = evaluate(out, {"x": x})
    assert_outputs_exact(ref, got)
    int_only = make_model(nodes[3:], [vi("x", shape=[2, 5])], [vi("z", TP.INT64, [2])], opset=16,
                          initializers=[s])
    out8 = convert(int_only, 8)  # PRelu int64 below 9: integer decomposition
    onnx.checker.check_model(out8, full_check=True)
    assert "Less" in [n.op_type for n in out8.graph.node]
    assert_exact(ref["z"], evaluate(out8, {"x": x})["z"])


def test_function_with_its_own_older_opset():
    """A function importing ai.onnx 1 inside a model at opset 16: its Selu-1 (defaults of
    version 1) is converted from opset 1, the model's nodes from 16; both end at the target."""
    fn = helper.make_function("local", "Act", ["fx"], ["fy"],
                              [helper.make_node("Selu", ["fx"], ["fy"], name="fn_selu")],
                              [helper.make_opsetid("", 1)])
    nodes = [helper.make_node("Act", ["x"], ["h"], name="call", domain="local"),
             helper.make_node("Selu", ["h"], ["y"], name="main_selu")]
    m = make_model(nodes, [vi("x", shape=[8])], [vi("y", shape=[8])], opset=16, functions=[fn],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    m.ir_version = 8
    x = np.linspace(-3, 3, 8).astype(np.float32)
    ref = evaluate(m, {"x": x})["y"]
    for target in (6, 13, 22):
        out = convert(m, target)
        onnx.checker.check_model(out, full_check=True)
        assert opsets.opset_of(out.functions[0]) == target
        attrs = {a.name for a in out.functions[0].node[0].attribute}
        assert attrs == {"alpha", "gamma"}  # Selu-1's defaults made explicit
        assert_exact(ref, evaluate(out, {"x": x})["y"])


def test_a_refusal_leaves_the_model_untouched():
    """convert_proto plans every node of every scope before writing: a node refused after
    others were planned (a constant slope reshaped in place, a Reshape's shape moved to an
    attribute) leaves the ModelProto byte for byte as it was."""
    s = numpy_helper.from_array(np.array([0.5, -1.0, 3.0], np.float32).reshape(3, 1, 1), "s")
    shape = numpy_helper.from_array(np.array([2, 12], np.int64), "shape")
    nodes = [helper.make_node("PRelu", ["x", "s"], ["p"], name="p"),
             helper.make_node("Reshape", ["p", "shape"], ["r"], name="r"),
             helper.make_node("LeakyRelu", ["xb"], ["yb"], name="bf16")]
    m = make_model(nodes, [vi("x", shape=[2, 3, 2, 2]), vi("xb", TP.BFLOAT16, [4])],
                   [vi("r", shape=[2, 12]), vi("yb", TP.BFLOAT16, [4])], opset=16,
                   initializers=[s, shape])
    before = m.SerializeToString()
    with pytest.raises(ConversionError, match=r"node 'bf16'.*LeakyRelu-16.*opset 6"):
        convert_proto(m, 6)
    assert m.SerializeToString() == before
