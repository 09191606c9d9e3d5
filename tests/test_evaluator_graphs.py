"""Evaluator beyond single activations: control flow with outer scope, model-local functions,
legacy attributes, dtype rules, errors, and small networks end to end (vs onnxruntime)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import init, make_model, run_onnxruntime, vi
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from opshift.errors import EvaluationError, UnsupportedError
from opshift.evaluator import evaluate

F = TP.FLOAT


# -- control flow -----------------------------------------------------------------------------

def _if_model(opset):
    then_g = helper.make_graph([helper.make_node("PRelu", ["x", "slope"], ["t"])], "then", [],
                               [vi("t")])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "k"], ["e"])], "else", [],
                               [vi("e")])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    return make_model(nodes, [vi("c", TP.BOOL, []), vi("x", F, [2, 3])], [vi("y")],
                      opset=opset, initializers=[init("slope", np.float32([0.5])),
                                                 init("k", np.float32(3.0))])


@pytest.mark.parametrize("opset", [7, 11, 13, 16, 22])
def test_if_branches_see_outer_scope(opset, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    m = _if_model(opset)
    y = evaluate(m, {"c": np.array(True), "x": x})["y"]
    np.testing.assert_array_equal(y, np.where(x < 0, np.float32(0.5) * x, x))
    y = evaluate(m, {"c": np.array(False), "x": x})["y"]
    np.testing.assert_array_equal(y, x * np.float32(3.0))


def _loop_model(opset):
    # carried s += LeakyRelu(x) * i ; scan output: s each iteration ; x is outer scope
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("LeakyRelu", ["x"], ["lx"], alpha=0.5),
         helper.make_node("Mul", ["lx", "fi"], ["d"]),
         helper.make_node("Add", ["s_in", "d"], ["s_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["s_out"], ["scan"])],
        "body", [vi("i", TP.INT64, []), vi("cond_in", TP.BOOL, []), vi("s_in", F, [3])],
        [vi("cond_out", TP.BOOL, []), vi("s_out", F, [3]), vi("scan", F, [3])])
    nodes = [helper.make_node("Loop", ["M", "", "s0"], ["s", "scans"], body=body)]
    return make_model(nodes, [vi("M", TP.INT64, []), vi("x", F, [3]), vi("s0", F, [3])],
                      [vi("s"), vi("scans")], opset=opset)


@pytest.mark.parametrize("opset", [11, 13, 16, 22])
def test_loop_outer_scope_carried_and_scan(opset):
    x = np.array([-2.0, 1.0, 4.0], np.float32)
    s0 = np.array([1.0, 1.0, 1.0], np.float32)
    out = evaluate(_loop_model(opset), {"M": np.array(4, np.int64), "x": x, "s0": s0})
    lx = np.where(x < 0, np.float32(0.5) * x, x)
    want, rows = s0.copy(), []
    for i in range(4):
        want = want + lx * np.float32(i)
        rows.append(want)
    np.testing.assert_array_equal(out["s"], want)
    np.testing.assert_array_equal(out["scans"], np.stack(rows))
    out = evaluate(_loop_model(opset), {"M": np.array(0, np.int64), "x": x, "s0": s0})
    np.testing.assert_array_equal(out["s"], s0)
    assert out["scans"].shape == (0, 3) and out["scans"].dtype == np.float32


def test_only_nodes_that_run_again_keep_their_lookups():
    # the main graph runs once: keeping each node's kernel, attributes and location would
    # hold a whole model's worth of them (and its Constant arrays) to the end; a Loop body
    # runs once per iteration and looks its nodes up once
    from opshift.evaluator import registry
    from opshift.evaluator.runtime import Runtime

    registry.load_all()
    m = _loop_model(16)
    feeds = {"M": np.array(5, np.int64), "x": np.float32([1, -2, 3]),
             "s0": np.zeros(3, np.float32)}
    rt = Runtime(m)
    with np.errstate(all="ignore"):
        rt.run_graph(m.graph, rt.opsets, feeds=feeds, once=True)
    body = m.graph.node[0].attribute[0].g
    assert len(rt._prepared) == len(body.node)  # the Loop node itself is not kept
    assert {node.op_type for node, _ in rt._prepared.values()} == {
        n.op_type for n in body.node}
    again = Runtime(m)
    again.run_graph(m.graph, again.opsets, feeds=feeds)
    assert len(again._prepared) == len(body.node) + 1


def test_loop_stops_on_condition():
    # while i < 3 (cond computed in body); trip count absent
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "one"], ["v_out"]),
         helper.make_node("Less", ["v_out", "three"], ["cond_out"])],
        "body", [vi("i", TP.INT64, []), vi("c", TP.BOOL, []), vi("v_in", TP.INT64, [])],
        [vi("cond_out", TP.BOOL, []), vi("v_out", TP.INT64, [])])
    m = make_model([helper.make_node("Loop", ["", "c0", "v0"], ["v"], body=body)],
                   [vi("c0", TP.BOOL, []), vi("v0", TP.INT64, [])], [vi("v", TP.INT64)],
                   opset=13, initializers=[init("one", np.int64(1)), init("three", np.int64(3))])
    assert evaluate(m, {"c0": np.array(True), "v0": np.array(0, np.int64)})["v"] == 3
    assert evaluate(m, {"c0": np.array(False), "v0": np.array(0, np.int64)})["v"] == 0


def test_scan_cumulative_with_outer_scale():
    body = helper.make_graph(
        [helper.make_node("Mul", ["xt", "scale"], ["st"]),
         helper.make_node("Add", ["acc_in", "st"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["y"])],
        "body", [vi("acc_in", F, [2]), vi("xt", F, [2])], [vi("acc_out", F, [2]), vi("y", F, [2])])
    m = make_model([helper.make_node("Scan", ["a0", "x"], ["acc", "ys"], body=body,
                                     num_scan_inputs=1, scan_input_directions=[1])],
                   [vi("a0", F, [2]), vi("x", F, [4, 2])], [vi("acc"), vi("ys")], opset=16,
                   initializers=[init("scale", np.float32(2.0))])
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    out = evaluate(m, {"a0": np.zeros(2, np.float32), "x": x})
    want = np.cumsum((x * 2)[::-1], axis=0)
    np.testing.assert_array_equal(out["ys"], want)
    np.testing.assert_array_equal(out["acc"], want[-1])


# -- model-local functions --------------------------------------------------------------------

def _functions():
    # inner(X) <alpha>: LeakyRelu(alpha=@alpha)
    inner = helper.make_function(
        "local", "Inner", ["X"], ["Y"],
        [_ref_node("LeakyRelu", ["X"], ["Y"], alpha="alpha")],
        [helper.make_opsetid("", 16)], attributes=["alpha"])
    # outer(X, S) <a2>: PRelu(X, S) then Inner(alpha=@a2), then Selu (defaults of Selu-6)
    outer = helper.make_function(
        "local", "Outer", ["X", "S"], ["Z"],
        [helper.make_node("PRelu", ["X", "S"], ["P"]),
         _ref_node("Inner", ["P"], ["Q"], domain="local", alpha="a2"),
         helper.make_node("Selu", ["Q"], ["Z"])],
        [helper.make_opsetid("", 16), helper.make_opsetid("local", 1)], attributes=["a2"])
    return [inner, outer]


def _ref_node(op, ins, outs, domain="", **refs):
    n = helper.make_node(op, ins, outs, domain=domain)
    for name, ref in refs.items():
        a = onnx.AttributeProto()
        a.name, a.ref_attr_name, a.type = name, ref, onnx.AttributeProto.FLOAT
        n.attribute.append(a)
    return n


@pytest.mark.parametrize("a2", [None, 0.2])
def test_nested_functions_with_attribute_references(a2, rng):
    attrs = {} if a2 is None else {"a2": a2}
    node = helper.make_node("Outer", ["x", "s"], ["z"], domain="local", **attrs)
    m = make_model([node], [vi("x", F, [2, 3, 4])], [vi("z")], opset=16,
                   initializers=[init("s", np.float32([[0.5], [0.25], [2.0]]))],
                   functions=_functions(), extra_opsets=[helper.make_opsetid("local", 1)])
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    s = np.float32([[0.5], [0.25], [2.0]])
    p = np.where(x < 0, s * x, x)
    # without a2 the reference is unset: LeakyRelu-16's schema default applies
    alpha = np.float32(a2) if a2 is not None else np.float32(helper.get_attribute_value(
        onnx.defs.get_schema("LeakyRelu", 16).attributes["alpha"].default_value))
    q = np.where(p < 0, alpha * p, p)
    sch = onnx.defs.get_schema("Selu", 16)
    a = np.float32(helper.get_attribute_value(sch.attributes["alpha"].default_value))
    g = np.float32(helper.get_attribute_value(sch.attributes["gamma"].default_value))
    want = np.where(q > 0, q, np.exp(q) * a - a) * g
    np.testing.assert_array_equal(evaluate(m, {"x": x})["z"], want.astype(np.float32))


def test_function_opset_governs_its_body():
    """A function importing opset 6 runs PRelu-6 (per-channel) inside an opset-16 model."""
    f = helper.make_function("local", "Old", ["X", "S"], ["Y"],
                             [helper.make_node("PRelu", ["X", "S"], ["Y"])],
                             [helper.make_opsetid("", 6)])
    m = make_model([helper.make_node("Old", ["x", "s"], ["y"], domain="local")],
                   [vi("x", F, [1, 3, 2])], [vi("y")], opset=16, functions=[f],
                   initializers=[init("s", np.float32([0.1, 0.2, 0.3]))],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    x = -np.ones((1, 3, 2), np.float32)
    want = np.float32([0.1, 0.2, 0.3]).reshape(1, 3, 1) * x
    np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], want)


# -- legacy attributes and dtype rules --------------------------------------------------------

@pytest.mark.parametrize("op,fn", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                                   ("Div", np.divide)])
@pytest.mark.parametrize("opset", [1, 6])
def test_legacy_broadcast_axis(op, fn, opset, rng):
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = (rng.random((3, 4)) + 0.5).astype(np.float32)
    extra = {"consumed_inputs": [0]} if opset == 1 else {}
    m = make_model([helper.make_node(op, ["a", "b"], ["y"], name="n", broadcast=1, axis=1,
                                     **extra)],
                   [vi("a", F, [2, 3, 4, 5]), vi("b", F, [3, 4])], [vi("y")], opset=opset)
    got = evaluate(m, {"a": a, "b": b})["y"]
    np.testing.assert_array_equal(got, fn(a, b.reshape(1, 3, 4, 1)))
    # suffix matching without axis, and broadcast=0 demands equal shapes
    m2 = make_model([helper.make_node(op, ["a", "b"], ["y"], name="n", broadcast=1)],
                    [vi("a", F, [2, 3, 4, 5]), vi("b", F, [4, 5])], [vi("y")], opset=opset)
    b2 = (rng.random((4, 5)) + 0.5).astype(np.float32)
    np.testing.assert_array_equal(evaluate(m2, {"a": a, "b": b2})["y"], fn(a, b2))
    m3 = make_model([helper.make_node(op, ["a", "b"], ["y"], name="n")],
                    [vi("a", F, [2, 3, 4, 5]), vi("b", F, [4, 5])], [vi("y")], opset=opset)
    with pytest.raises(EvaluationError, match=rf"node 'n' \({op}-{opset}\b.*broadcast=0"):
        evaluate(m3, {"a": a, "b": b2})


def test_legacy_comparison_broadcast():
    m = make_model([helper.make_node("Less", ["a", "b"], ["y"], broadcast=1, axis=0)],
                   [vi("a", F, [2, 3]), vi("b", F, [2])], [vi("y", TP.BOOL)], opset=6)
    a = np.float32([[1, 2, 3], [4, 5, 6]])
    y = evaluate(m, {"a": a, "b": np.float32([2, 5])})["y"]
    np.testing.assert_array_equal(y, a < np.float32([[2], [5]]))


def test_consumed_inputs_rejected_where_undefined():
    m = make_model([helper.make_node("Add", ["a", "a"], ["y"], name="n", consumed_inputs=[0])],
                   [vi("a", F, [2])], [vi("y")], opset=6)
    with pytest.raises(UnsupportedError, match=r"node 'n' \(Add-6\b.*'consumed_inputs'"):
        evaluate(m, {"a": np.ones(2, np.float32)})


@pytest.mark.parametrize("dtype,elem", [(np.int32, TP.INT32), (np.int64, TP.INT64),
                                        (np.int8, TP.INT8), (np.uint16, TP.UINT16)])
def test_integer_div_truncates_toward_zero(dtype, elem):
    a = np.array([7, -7, 7, -7, 0, 100], dtype=dtype if np.dtype(dtype).kind == "i" else np.int64)
    b = np.array([2, 2, -2, -2, 3, 7], dtype=a.dtype)
    if np.dtype(dtype).kind == "u":
        a, b = np.abs(a).astype(dtype), np.abs(b).astype(dtype)
    a, b = a.astype(dtype), b.astype(dtype)
    m = make_model([helper.make_node("Div", ["a", "b"], ["y"], name="d")],
                   [vi("a", elem, [6]), vi("b", elem, [6])], [vi("y", elem)], opset=14)
    y = evaluate(m, {"a": a, "b": b})["y"]
    assert y.dtype == dtype
    want = [int(float(p) / float(q)) for p, q in zip(a.tolist(), b.tolist())]  # C truncation
    assert y.tolist() == want
    with pytest.raises(EvaluationError, match=r"node 'd' \(Div-14\b.*division by zero"):
        evaluate(m, {"a": a, "b": np.zeros(6, dtype)})


def test_erf_rounds_libm_erf_once_for_each_type(rng):
    """Erf is math.erf of each element as a double, rounded once: a double Erf keeps every
    bit (onnx.reference's kernel rounds it to float32 on the way), float16 and bfloat16 go
    through float32 (their computing type), integers truncate toward zero."""
    import math

    import ml_dtypes

    x = np.concatenate([rng.standard_normal(500) * 3, [0.0, -0.0, np.inf, -np.inf, np.nan,
                                                       1e-310, 6.5, -27.0, 0.84375, 1.25]])
    cases = [(np.float64, TP.DOUBLE, 13), (np.float32, TP.FLOAT, 13),
             (np.float16, TP.FLOAT16, 13), (ml_dtypes.bfloat16, TP.BFLOAT16, 13),
             (np.int32, TP.INT32, 9), (np.uint8, TP.UINT8, 9)]
    for dt, elem, opset in cases:
        xs = x if np.dtype(dt).kind in "fV" else np.round(np.nan_to_num(x, posinf=7,
                                                                          neginf=-7))
        xs = np.abs(xs) if np.dtype(dt).kind == "u" else xs
        xt = xs.astype(dt)
        m = make_model([helper.make_node("Erf", ["x"], ["y"])], [vi("x", elem, [x.size])],
                       [vi("y", elem)], opset=opset)
        y = evaluate(m, {"x": xt})["y"]
        exact = [math.erf(v) for v in xt.astype(np.float64).tolist()]
        if np.dtype(dt) in (np.float16, ml_dtypes.bfloat16):
            want = np.array(exact, np.float32).astype(dt)
        else:
            want = np.array(exact).astype(dt)
        assert y.dtype == np.dtype(dt)
        assert y.tobytes() == want.tobytes(), np.dtype(dt)  # every bit, signed zeros, NaN
    ints = evaluate(make_model([helper.make_node("Erf", ["x"], ["y"])],
                               [vi("x", TP.INT64, [6])], [vi("y", TP.INT64)], opset=9),
                    {"x": np.array([-6, -5, 0, 3, 5, 6], np.int64)})["y"]
    assert ints.tolist() == [-1, 0, 0, 0, 0, 1]  # erf(5) = 1 - 1.5e-12 < 1


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sums_run_in_float64_and_round_once(dtype, rng):
    """MatMul, Einsum, Gemm, ReduceSum, ReduceMean and ReduceL2 on rows that nearly cancel:
    the exact result rounded once to the type (a sum in the type itself lands many ulps
    off)."""
    import math

    from opshift.verify import compare

    el = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    a = (rng.standard_normal((4, 300)) * 50).astype(dtype)
    a[:, -1] = -a[:, :-1].astype(np.float64).sum(axis=1)  # rows that nearly cancel
    b = rng.standard_normal((300, 3)).astype(dtype)
    b[:, 0] = 1
    c = rng.standard_normal((1, 3)).astype(dtype)
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["mm"]),
                    helper.make_node("Gemm", ["a", "b", "c"], ["gemm"], alpha=0.5, beta=2.0),
                    helper.make_node("ReduceSum", ["a", "ax"], ["rs"], keepdims=0),
                    helper.make_node("ReduceMean", ["a"], ["rm"], axes=[1], keepdims=0),
                    helper.make_node("ReduceL2", ["a"], ["l2"], axes=[1], keepdims=0),
                    helper.make_node("Einsum", ["a", "b"], ["es"], equation="ij,jk->ik")],
                   [vi("a", el, [4, 300]), vi("b", el, [300, 3]), vi("c", el, [1, 3])],
                   [vi(o, el) for o in ("mm", "gemm", "rs", "rm", "l2", "es")], opset=13,
                   initializers=[init("ax", np.int64([1]))])
    got = evaluate(m, {"a": a, "b": b, "c": c})
    a64, b64, c64 = (t.astype(np.float64) for t in (a, b, c))

    def dot(i, j):
        return math.fsum(a64[i] * b64[:, j])  # float32 products are exact in float64

    mm = np.array([[dot(i, j) for j in range(3)] for i in range(4)])
    rows = [math.fsum(a64[i]) for i in range(4)]
    want = {"mm": mm, "es": mm, "gemm": 0.5 * mm + 2.0 * c64, "rs": np.array(rows),
            "rm": np.array(rows) / 300,
            "l2": np.sqrt([math.fsum(a64[i] ** 2) for i in range(4)])}
    for name, w in want.items():
        r = compare(w.astype(dtype), got[name])
        assert r.ok, (name, r.reason)


@pytest.mark.parametrize("cores", [1, 3])
@pytest.mark.parametrize("a_shape,b_shape", [((2, 1, 5, 7), (3, 7, 40)),
                                             ((40, 7), (7, 5)), ((6, 9), (2, 9, 6)),
                                             ((7,), (3, 7, 2)), ((4, 7), (7,))])
def test_matmul_broadcasts_and_shares_blocks(monkeypatch, rng, cores, a_shape, b_shape):
    """Blocks of B's columns or of A's rows, in one thread or several: numpy's matmul of the
    float64 values, rounded once."""
    from opshift.evaluator import parallel
    from opshift.verify import compare

    monkeypatch.setattr(parallel, "cores", lambda: cores)
    monkeypatch.setattr(parallel, "PARALLEL_WORK", 0)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                   [vi("a", TP.FLOAT, list(a_shape)), vi("b", TP.FLOAT, list(b_shape))],
                   [vi("y", TP.FLOAT)], opset=13)
    got = evaluate(m, {"a": a, "b": b})["y"]
    want = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    assert got.shape == want.shape
    r = compare(want, got)
    assert r.ok, r.reason


@pytest.mark.parametrize("b_shape,match", [([5, 4, 2], "do not broadcast"),
                                           ([2, 3, 2], "do not multiply")])
def test_matmul_shapes_that_do_not_fit_are_named(b_shape, match):
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                   [vi("a", TP.FLOAT, [2, 3, 4]), vi("b", TP.FLOAT, b_shape)],
                   [vi("y", TP.FLOAT)], opset=13)
    with pytest.raises(EvaluationError, match=r"node 'mm' \(MatMul-13.*" + match):
        evaluate(m, {"a": np.zeros((2, 3, 4), np.float32), "b": np.zeros(b_shape,
                                                                         np.float32)})


def test_float16_and_bfloat16_stay():
    import ml_dtypes

    for dt in (np.float16, ml_dtypes.bfloat16):
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
        m = make_model([helper.make_node("Div", ["a", "b"], ["q"]),
                        helper.make_node("Relu", ["q"], ["y"])],
                       [vi("a", elem, [3]), vi("b", elem, [3])], [vi("y", elem)], opset=14)
        a = np.array([1, -2, 3], dt)
        b = np.array([3, 3, 3], dt)
        y = evaluate(m, {"a": a, "b": b})["y"]
        assert y.dtype == np.dtype(dt)
        np.testing.assert_array_equal(y, np.maximum(a / b, np.array(0, dt)))


def test_softmax_axis_semantics_changed_at_13(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)

    def sm(v, axis):
        e = np.exp(v - v.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    for opset, want in [(11, sm(x.reshape(2, 12), 1).reshape(2, 3, 4)), (13, sm(x, 1))]:
        m = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [vi("x", F, [2, 3, 4])],
                       [vi("y")], opset=opset)
        np.testing.assert_allclose(evaluate(m, {"x": x})["y"], want, rtol=1e-6)


def test_clip_attributes_then_inputs():
    x = np.float32([-5, -1, 0, 1, 5, np.nan])
    m6 = make_model([helper.make_node("Clip", ["x"], ["y"], min=-1.0, max=2.0)], [vi("x", F, [6])],
                    [vi("y")], opset=6)
    m13 = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], [vi("x", F, [6])],
                     [vi("y")], opset=13, initializers=[init("lo", np.float32(-1)),
                                                         init("hi", np.float32(2))])
    want = np.float32([-1, -1, 0, 1, 2, np.nan])
    for m in (m6, m13):
        np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], want)
    m6d = make_model([helper.make_node("Clip", ["x"], ["y"])], [vi("x", F, [6])], [vi("y")],
                     opset=6)  # defaults: +-FLT_MAX
    np.testing.assert_array_equal(evaluate(m6d, {"x": x})["y"], x)


# -- Constant, Cast, shape ops ----------------------------------------------------------------

@pytest.mark.parametrize("attr,value,want", [
    ("value", numpy_helper.from_array(np.float16([1.5, -2])), np.float16([1.5, -2])),
    ("value_float", 2.5, np.float32(2.5)),
    ("value_floats", [1.0, 2.0], np.float32([1, 2])),
    ("value_int", 7, np.int64(7)),
    ("value_ints", [3, -4], np.int64([3, -4])),
    ("value_string", "hi", np.array("hi", dtype=object)),
    ("value_strings", ["a", "b"], np.array(["a", "b"], dtype=object)),
])
def test_constant_forms(attr, value, want):
    elem = helper.np_dtype_to_tensor_dtype(want.dtype) if want.dtype != object else TP.STRING
    m = make_model([helper.make_node("Constant", [], ["y"], **{attr: value})], [],
                   [vi("y", elem)], opset=13)
    y = evaluate(m, {})["y"]
    assert y.dtype == want.dtype and y.shape == want.shape
    assert y.tolist() == want.tolist()


def test_constant_sparse_refused_clearly():
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.float32([1.0]), "v"),
                                   numpy_helper.from_array(np.int64([0]), "i"), [2])
    m = make_model([helper.make_node("Constant", [], ["y"], name="c", sparse_value=sp)], [],
                   [vi("y")], opset=13)
    with pytest.raises(UnsupportedError, match=r"node 'c' \(Constant-13\b.*sparse"):
        evaluate(m, {})


def test_cast_1_string_target_and_cast_rounding():
    import ml_dtypes

    m = make_model([helper.make_node("Cast", ["x"], ["y"], to="INT32")], [vi("x", F, [4])],
                   [vi("y", TP.INT32)], opset=1)
    y = evaluate(m, {"x": np.float32([1.9, -1.9, 0.0, 7.0])})["y"]
    assert y.dtype == np.int32 and y.tolist() == [1, -1, 0, 7]
    m = make_model([helper.make_node("Cast", ["x"], ["y"], to=TP.BFLOAT16)], [vi("x", F, [1])],
                   [vi("y", TP.BFLOAT16)], opset=13)
    y = evaluate(m, {"x": np.float32([1.00390625])})["y"]  # halfway: ties to even
    assert y.dtype == ml_dtypes.bfloat16 and float(y[0]) == 1.0
    # bfloat16 to integers and bool: truncated toward zero, as from float32
    x = np.array([-2.5, 1.5, 3.0, 255.0, -0.0], ml_dtypes.bfloat16)
    for to, want in ((TP.INT32, [-2, 1, 3, 255, 0]), (TP.INT64, [-2, 1, 3, 255, 0]),
                     (TP.BOOL, [True, True, True, True, False])):
        m = make_model([helper.make_node("Cast", ["x"], ["y"], to=to)],
                       [vi("x", TP.BFLOAT16, [5])], [vi("y", to)], opset=13)
        y = evaluate(m, {"x": x})["y"]
        assert y.dtype == helper.tensor_dtype_to_np_dtype(to) and y.tolist() == want, to


def test_shape_ops_legacy_and_new():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    m1 = make_model([helper.make_node("Reshape", ["x"], ["r"], shape=[3, -1],
                                      consumed_inputs=[0]),
                     helper.make_node("Unsqueeze", ["r"], ["u"], axes=[0]),
                     helper.make_node("Squeeze", ["u"], ["y"], axes=[0])],
                    [vi("x", F, [2, 3])], [vi("y")], opset=1)
    np.testing.assert_array_equal(evaluate(m1, {"x": x})["y"], x.reshape(3, 2))
    m13 = make_model([helper.make_node("Reshape", ["x", "shp"], ["r"]),
                      helper.make_node("Unsqueeze", ["r", "ax"], ["u"]),
                      helper.make_node("Shape", ["u"], ["s"], start=1),
                      helper.make_node("Expand", ["x", "es"], ["e"])],
                     [vi("x", F, [2, 3])], [vi("u"), vi("s", TP.INT64), vi("e")], opset=15,
                     initializers=[init("shp", np.int64([0, -1])), init("ax", np.int64([-1])),
                                   init("es", np.int64([4, 1, 1]))])
    out = evaluate(m13, {"x": x})
    assert out["u"].shape == (2, 3, 1) and out["s"].tolist() == [3, 1]
    np.testing.assert_array_equal(out["e"], np.broadcast_to(x, (4, 2, 3)))


# -- errors -----------------------------------------------------------------------------------

def test_unsupported_op_names_node_op_domain_version():
    m = make_model([helper.make_node("Gradient", ["a"], ["y"], name="m1",
                                     domain="ai.onnx.preview.training", xs=["a"], y="a")],
                   [vi("a", F, [2])], [vi("y")], opset=14,
                   extra_opsets=[helper.make_opsetid("ai.onnx.preview.training", 1)])
    with pytest.raises(UnsupportedError, match=r"node 'm1' \(ai.onnx.preview.training::"
                                               r"Gradient-1\b.*no kernel"):
        evaluate(m, {"a": np.ones(2, np.float32)})
    m = make_model([helper.make_node("Foo", ["a"], ["y"], name="f", domain="acme")],
                   [vi("a", F, [2])], [vi("y")], opset=13,
                   extra_opsets=[helper.make_opsetid("acme", 2)])
    with pytest.raises(UnsupportedError, match=r"node 'f'.*'Foo'.*'acme'.*opset 2"):
        evaluate(m, {"a": np.ones(2, np.float32)})


def test_training_modes_refused():
    x = np.ones((1, 2, 2), np.float32)
    c = [init(n, np.ones(2, np.float32)) for n in ("s", "b", "m", "v")]
    m = make_model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                                     name="bn", is_test=0)], [vi("x", F, [1, 2, 2])], [vi("y")],
                   opset=6, initializers=c)
    with pytest.raises(UnsupportedError, match=r"node 'bn' \(BatchNormalization-6\b.*is_test"):
        evaluate(m, {"x": x})
    m = make_model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                                     name="bn", training_mode=1)], [vi("x", F, [1, 2, 2])],
                   [vi("y")], opset=15, initializers=c)
    with pytest.raises(UnsupportedError, match=r"BatchNormalization-15\b.*training_mode"):
        evaluate(m, {"x": x})


# -- networks end to end ----------------------------------------------------------------------

def _cnn(opset, rng):
    w1 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(4).astype(np.float32)
    bn = [rng.random(4).astype(np.float32) + 0.5, rng.standard_normal(4).astype(np.float32),
          rng.standard_normal(4).astype(np.float32), rng.random(4).astype(np.float32) + 0.5]
    w2 = rng.standard_normal((4 * 4 * 4, 5)).astype(np.float32) * 0.2
    b2 = rng.standard_normal(5).astype(np.float32)
    slope = np.float32([0.1, 0.2, 0.3, 0.4])
    legacy = opset < 7
    bn_attrs = {"is_test": 1} if legacy else {}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "mu", "var"], ["n"],
                         epsilon=1e-3, **bn_attrs),
        helper.make_node("PRelu", ["n", "slope_l" if legacy else "slope"], ["p"]),
        helper.make_node("MaxPool", ["p"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["mp"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[1, 1]),
        helper.make_node("Flatten", ["ap"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "w2", "b2"], ["g"], **({"broadcast": 1} if legacy else {})),
        helper.make_node("Dropout", ["g"], ["d"], **bn_attrs),
        helper.make_node("Softmax", ["d"], ["y"]),
    ]
    inits = [init("w1", w1), init("b1", b1), init("s", bn[0]), init("bb", bn[1]),
             init("mu", bn[2]), init("var", bn[3]), init("w2", w2), init("b2", b2),
             init("slope_l", slope), init("slope", slope.reshape(4, 1, 1))]
    return make_model(nodes, [vi("x", F, [2, 3, 8, 8])], [vi("y")], opset=opset,
                      initializers=inits)


def _mlp(rng):
    w = [rng.standard_normal((6, 8)).astype(np.float32), rng.standard_normal((8, 3)).astype(
        np.float32)]
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"]),
             helper.make_node("Add", ["h", "b0"], ["h1"]),
             helper.make_node("Selu", ["h1"], ["h2"]),
             helper.make_node("MatMul", ["h2", "w1"], ["o"]),
             helper.make_node("Tanh", ["o"], ["t"]),
             helper.make_node("Sigmoid", ["t"], ["s"]),
             helper.make_node("ReduceMean", ["s"], ["y"], axes=[1], keepdims=0)]
    return make_model(nodes, [vi("x", F, [5, 6])], [vi("y")], opset=13,
                      initializers=[init("w0", w[0]), init("w1", w[1]),
                                    init("b0", rng.standard_normal(8).astype(np.float32))])


def test_legacy_cnn_means_what_the_modern_one_does(rng):
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    ref = evaluate(_cnn(13, np.random.default_rng(1)), {"x": x})["y"]
    for opset in (9, 6):
        got = evaluate(_cnn(opset, np.random.default_rng(1)), {"x": x})["y"]
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("opset", [13, 9, 6])
def test_small_cnn_matches_onnxruntime(opset, rng):
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    m = _cnn(opset, np.random.default_rng(1))
    got = evaluate(m, {"x": x})["y"]
    np.testing.assert_allclose(got, run_onnxruntime(m, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_small_mlp_matches_onnxruntime(rng):
    m = _mlp(rng)
    xm = rng.standard_normal((5, 6)).astype(np.float32)
    np.testing.assert_allclose(evaluate(m, {"x": xm})["y"], run_onnxruntime(m, {"x": xm})[0],
                               rtol=1e-5, atol=1e-6)


def test_required_attribute_missing_is_named():
    m = make_model([helper.make_node("Cast", ["x"], ["y"], name="c")], [vi("x", F, [1])],
                   [vi("y")], opset=13)
    with pytest.raises(EvaluationError, match=r"node 'c' \(Cast-13\b.*required attribute 'to'"):
        evaluate(m, {"x": np.ones(1, np.float32)})


@pytest.mark.parametrize("opset", [1, 6, 7])
def test_batchnorm_legacy_spatial_0(opset, rng):
    x = rng.standard_normal((2, 3, 2)).astype(np.float32)
    stats = [rng.random((3, 2)).astype(np.float32) + 0.5 for _ in range(4)]
    names = ["s", "b", "m", "v"]
    attrs = {"spatial": 0, "epsilon": 1e-3, **({"is_test": 1} if opset < 7 else {})}
    m = make_model([helper.make_node("BatchNormalization", ["x", *names], ["y"], **attrs)],
                   [vi("x", F, [2, 3, 2])], [vi("y")], opset=opset,
                   initializers=[init(n, a) for n, a in zip(names, stats)])
    s, b, mu, var = stats
    want = (x - mu) / np.sqrt(var + np.float32(1e-3)) * s + b
    np.testing.assert_allclose(evaluate(m, {"x": x})["y"], want, rtol=1e-6)


def test_zero_d_results_are_arrays():
    m = make_model([helper.make_node("Not", ["c"], ["n"]),
                    helper.make_node("Neg", ["x"], ["y"])],
                   [vi("c", TP.BOOL, []), vi("x", F, [])], [vi("n", TP.BOOL), vi("y")], opset=13)
    out = evaluate(m, {"c": np.array(True), "x": np.array(2.0, np.float32)})
    assert all(type(v) is np.ndarray and v.shape == () for v in out.values())
    assert out["n"] == np.False_ and out["y"] == np.float32(-2)


def test_scan_8_batched_with_outer_scale():
    body = helper.make_graph(
        [helper.make_node("Mul", ["xt", "scale"], ["st"]),
         helper.make_node("Add", ["acc_in", "st"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["y"])],
        "body", [vi("acc_in", F, [2]), vi("xt", F, [2])], [vi("acc_out", F, [2]), vi("y", F, [2])])
    m = make_model([helper.make_node("Scan", ["", "a0", "x"], ["acc", "ys"], body=body,
                                     num_scan_inputs=1, directions=[1])],
                   [vi("a0", F, [3, 2]), vi("x", F, [3, 4, 2])], [vi("acc"), vi("ys")], opset=8,
                   initializers=[init("scale", np.float32(2.0))])
    x = np.arange(24, dtype=np.float32).reshape(3, 4, 2)
    out = evaluate(m, {"a0": np.ones((3, 2), np.float32), "x": x})
    want = 1 + np.cumsum((x * 2)[:, ::-1], axis=1)
    np.testing.assert_array_equal(out["ys"], want)
    np.testing.assert_array_equal(out["acc"], want[:, -1])


def test_tile_1_tiles_one_axis():
    """Tile-1 types tiles and axis as T (the float input type), as its schema says."""
    m = make_model([helper.make_node("Tile", ["x", "t", "a"], ["y"])], [vi("x", F, [2, 3])],
                   [vi("y")], opset=1, initializers=[init("t", np.float32(2)),
                                                    init("a", np.float32(1))])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], np.concatenate([x, x], axis=1))
