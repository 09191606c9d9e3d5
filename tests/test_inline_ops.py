"""inline: every op version at every opset inlines to primitives that compute the op exactly.

The oracle is the bundled evaluator running the original op. Results must be bit-identical
(NaN as NaN) except the sign-of-zero cases documented in opshift/passes/inline/templates.py.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from conftest import make_model, run_onnxruntime
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from opshift import evaluate, opsets
from opshift.errors import ConversionError
from opshift.inline import inline
from opshift.inline import templates as dec
from opshift.inline.inliner import inline_proto

ACTS = set(dec.OPS)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
FLOATS = {TP.FLOAT: np.float32, TP.FLOAT16: np.float16, TP.DOUBLE: np.float64,
          TP.BFLOAT16: ml_dtypes.bfloat16}
INTS = {TP.INT32: np.int32, TP.INT64: np.int64, TP.UINT32: np.uint32, TP.UINT64: np.uint64}
ELEM = {**FLOATS, **INTS}


def special_values(dtype) -> np.ndarray:
    """+-0, +-inf, NaN, subnormals, the extremes, values where exp overflows, randoms."""
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        vals = [0, 1, 2, 7, info.max, info.max // 3, 100]
        if info.min < 0:
            vals += [-1, -2, -7, info.min, info.min // 3, -100]
        return np.array(vals, dtype=np.float64).astype(dtype)
    info = ml_dtypes.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    vals = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, tiny, -tiny, 3 * tiny, -3 * tiny,
            float(info.tiny), -float(info.tiny), float(info.max), -float(info.max), 0.5, -0.5,
            88.8, 89.0, 709.8, 710.0, 11.1, -11.1, -100.0, 1e-3, -1e-3, 1e30, -1e30]
    rng = np.random.default_rng(1)
    vals += list(rng.standard_normal(36) * 4)
    with np.errstate(over="ignore"):
        return np.array(vals, dtype=np.float64).astype(dtype)


def bits_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: same bits, or both NaN."""
    if a.dtype.kind in "iu":
        return a == b
    u = np.dtype(f"u{a.dtype.itemsize}")
    same = a.view(u) == b.view(u)
    return same | (np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64)))


def allowed_zero_sign(op: str, band: str, form: str, x: np.ndarray, ref: np.ndarray,
                      got: np.ndarray) -> np.ndarray:
    """Where the templates.py table allows a different sign of zero, and in which direction."""
    if ref.dtype.kind in "iu":
        return np.zeros(ref.shape, bool)
    x64, r64, g64 = (v.astype(np.float64) for v in (x, ref, got))
    both_zero = (r64 == 0) & (g64 == 0)
    if op == "Selu" and band != dec.LEGACY:
        return both_zero & (x64 == 0) & np.signbit(x64) & ~np.signbit(r64) & np.signbit(g64)
    if band == dec.LEGACY and form == "sub" and op in ("PRelu", "LeakyRelu"):
        return both_zero & np.signbit(r64) & ~np.signbit(g64)
    return np.zeros(ref.shape, bool)


def check_exact(op, opset, form, x, ref, got):
    assert ref.dtype == got.dtype and ref.shape == got.shape
    eq = bits_equal(ref, got)
    ok = eq | allowed_zero_sign(op, dec.band(opset), form, np.broadcast_to(x, ref.shape),
                                ref, got)
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, (f"{op} at opset {opset}: {bad.size} mismatches, e.g. x="
                           f"{np.broadcast_to(x, ref.shape).flat[bad[0]]!r} ref="
                           f"{ref.flat[bad[0]]!r} got={got.flat[bad[0]]!r}")


def build(op, opset, elem, shape, attrs=None, slope=None, slope_input=False,
          slope_node=False):
    """A one-node model; ``slope`` is an initializer (or a graph input if slope_input, or a
    Constant node if slope_node)."""
    ins = [helper.make_tensor_value_info("x", elem, shape)]
    inits = []
    inputs = ["x"]
    pre = []
    if op == "PRelu":
        inputs.append("s")
        if slope_node:
            pre.append(helper.make_node("Constant", [], ["s"],
                                        value=numpy_helper.from_array(slope)))
        elif slope_input:
            ins.append(helper.make_tensor_value_info("s", elem, list(slope.shape)))
        else:
            inits.append(numpy_helper.from_array(slope, "s"))
            if opset <= 8:  # IR < 4: initializers must be graph inputs
                ins.append(helper.make_tensor_value_info("s", elem, list(slope.shape)))
    node = helper.make_node(op, inputs, ["y"], name="act", **(attrs or {}))
    return make_model(pre + [node], ins, [helper.make_tensor_value_info("y", elem, shape)],
                      opset=opset, initializers=inits)


def run_case(op, opset, elem, x, attrs=None, slope=None, slope_input=False, form=None,
             slope_node=False):
    m = build(op, opset, elem, list(x.shape), attrs, slope, slope_input, slope_node)
    before = m.SerializeToString()
    # a slope a caller may change (a graph input) at opsets 1..8: refused unless asked for,
    # as its form is exact only for finite slopes (all are here); an IR < 4 initializer
    # listed as an input is the model's weight, a constant
    runtime = op == "PRelu" and dec.band(opset) == dec.LEGACY and slope_input
    if runtime:
        with pytest.raises(ConversionError, match="slope is not a constant"):
            inline(m)
    out = inline(m, allow_nonfinite_slope=runtime)
    assert m.SerializeToString() == before, "inline() must not modify its input"
    assert not any(n.op_type in ACTS for n in out.graph.node)
    assert len(out.graph.node) > 1 + slope_node
    onnx.checker.check_model(out, full_check=True)
    feeds = {"x": x}
    if slope_input:
        feeds["s"] = slope
    ref = evaluate(m, feeds)["y"]
    got = evaluate(out, feeds)["y"]
    if form is None:
        form = "sub" if any(n.op_type == "Sub" for n in out.graph.node) else "other"
    check_exact(op, opset, form, x, ref, got)
    return m, out, feeds, ref


def op_cases():
    for op in dec.OPS:
        for opset in range(1, opsets.MAX_OPSET + 1):
            v = opsets.since_version(op, opset)
            if v is None:
                continue
            for ts in sorted(opsets.allowed_types(op, v)):
                elem = getattr(TP, ts[len("tensor("):-1].upper())
                if elem in ELEM:
                    yield op, opset, elem


@pytest.mark.parametrize("op,opset,elem", list(op_cases()))
def test_every_version_opset_and_type(op, opset, elem):
    dtype = ELEM[elem]
    x = special_values(dtype)
    if op == "PRelu":
        # a per-element slope of mixed sign and size; at opset <= 6 the same shape as x
        s = np.resize(np.array([0.25, 2.0, -0.5, 0.0, 1.0, 3e-39], np.float64), x.shape)
        if np.dtype(dtype).kind == "u":
            s = np.abs(s)
        run_case(op, opset, elem, x, slope=s.astype(dtype))
    else:
        run_case(op, opset, elem, x)


@pytest.mark.parametrize("opset", [1, 6, 7, 8, 9, 14, 15, 16])
@pytest.mark.parametrize("alpha", [0.01, 0.5, 1.0, 2.0, 0.0, -0.5, 1e-30, 1e-45])
@pytest.mark.parametrize("elem", [TP.FLOAT, TP.FLOAT16, TP.DOUBLE])
def test_leaky_relu_alphas(opset, alpha, elem):
    x = special_values(FLOATS[elem])
    _, out, _, _ = run_case("LeakyRelu", opset, elem, x, attrs={"alpha": alpha})
    # float16 computes in float32 between Casts, with the float32 alpha
    assert (out.graph.node[-1].op_type == "Cast") == (elem == TP.FLOAT16)
    if dec.band(opset) == dec.LEGACY:
        a = float(np.float32(alpha).astype(np.float32 if elem == TP.FLOAT16 else FLOATS[elem]))
        want = "Max" if 0 < a <= 1 else "Min" if a > 1 else "Sub"
        assert [n for n in out.graph.node if n.op_type != "Cast"][-1].op_type == want


@pytest.mark.parametrize("opset", [1, 5, 6, 8, 9, 15, 22])
@pytest.mark.parametrize("attrs", [{}, {"alpha": 2.0, "gamma": 3.0}, {"alpha": 0.5}])
@pytest.mark.parametrize("elem", [TP.FLOAT, TP.FLOAT16, TP.DOUBLE])
def test_selu_attributes(opset, attrs, elem):
    x = special_values(FLOATS[elem])
    run_case("Selu", opset, elem, x, attrs=attrs)


def test_selu_defaults_follow_the_node_version():
    """Selu-1 (opsets 1..5) and Selu-6 have different default alpha/gamma."""
    x = special_values(np.float32)
    for opset, version in ((5, 1), (6, 6)):
        _, out, _, _ = run_case("Selu", opset, TP.FLOAT, x)
        d = opsets.attribute_defaults("Selu", version)
        consts = [float(numpy_helper.to_array(n.attribute[0].t)) for n in out.graph.node
                  if n.op_type == "Constant"]
        assert consts == [float(np.float32(d["alpha"])), float(np.float32(d["gamma"]))]
    assert opsets.attribute_defaults("Selu", 1)["alpha"] != \
        opsets.attribute_defaults("Selu", 6)["alpha"]


def test_selu_large_inputs_do_not_overflow_in_legacy_form():
    x = np.array([1e38, 3e38, np.inf, 100.0, 89.0, -1e38, -np.inf], np.float32)
    _, out, feeds, ref = run_case("Selu", 7, TP.FLOAT, x)
    got = evaluate(out, feeds)["y"]
    assert np.all(np.isfinite(got[:2])) and got[2] == np.inf
    assert np.array_equal(ref, got)


def test_documented_zero_sign_cases_happen_as_documented():
    """The table's rows are real: each shows exactly the documented sign."""
    x = np.array([-0.0, 0.0, -1.0, 1.0], np.float32)
    # Selu via the schema body: -0 -> -0 where the op gives +0
    m = build("Selu", 18, TP.FLOAT, [4])
    ref, got = evaluate(m, {"x": x})["y"], evaluate(inline(m), {"x": x})["y"]
    assert not np.signbit(ref[0]) and np.signbit(got[0])
    # LeakyRelu alpha == 0 at opset <= 8: x < 0 gives -0, inlined +0
    m = build("LeakyRelu", 8, TP.FLOAT, [4], attrs={"alpha": 0.0})
    ref, got = evaluate(m, {"x": x})["y"], evaluate(inline(m), {"x": x})["y"]
    assert np.signbit(ref[2]) and not np.signbit(got[2]) and ref[2] == got[2] == 0
    assert np.signbit(ref[0]) and not np.signbit(got[0])


# -- PRelu slope placement ----------------------------------------------------------------------

def _x4(dtype=np.float32):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 3, 4, 5)) * 3).astype(dtype)
    x.flat[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, -1e-45]
    return x


@pytest.mark.parametrize("opset", [1, 4, 5, 6])
@pytest.mark.parametrize("slope_node", [False, True])
@pytest.mark.parametrize("slope", [
    np.array([0.1, 0.2, 0.3], np.float32),  # per channel (axis 1): legacy semantics
    np.array([0.1, 2.0, -0.3], np.float32),  # per channel, mixed: Sub form
    np.array([0.25], np.float32),
    np.full((4, 5), 0.5, np.float32),  # suffix
    np.linspace(-1, 2, 120, dtype=np.float32).reshape(2, 3, 4, 5),  # same shape
    np.array([[[0.1]], [[0.5]], [[0.9]]], np.float32),  # (3,1,1): numpy-like, span = axis 1
])
def test_legacy_prelu_slope_placement(opset, slope, slope_node):
    x = _x4()
    m, out, feeds, ref = run_case("PRelu", opset, TP.FLOAT, x, slope=slope,
                                  slope_node=slope_node)
    if slope.shape == (3, 1, 1):  # reshaped to the span (3,): a Constant
        want = "Constant"  # a Constant node, or an IR 3 initializer: both weights
        assert want in [n.op_type for n in out.graph.node if n.name.startswith("act/Slope")]
    if slope.shape == (3,):
        muls = [n for n in out.graph.node if n.op_type == "Mul"]
        axes = {a.name: a.i for a in muls[0].attribute}
        assert axes == {"broadcast": 1, "axis": 1}
        # per channel really means axis 1, not numpy's last axis
        want = np.where(x < 0, x * slope.reshape(1, 3, 1, 1), x)
        assert np.array_equal(np.nan_to_num(ref), np.nan_to_num(want))


def test_legacy_prelu_dynamic_slope_per_channel():
    x = _x4()
    s = np.array([0.1, -2.0, 0.5], np.float32)
    run_case("PRelu", 6, TP.FLOAT, x, slope=s, slope_input=True)


def test_legacy_prelu_unknown_shapes_fail_loudly():
    from opshift.errors import ConversionError

    ins = [helper.make_tensor_value_info("x", TP.FLOAT, None),
           helper.make_tensor_value_info("s", TP.FLOAT, None)]
    node = helper.make_node("PRelu", ["x", "s"], ["y"], name="p")
    m = make_model([node], ins, [helper.make_tensor_value_info("y", TP.FLOAT, None)], opset=6)
    with pytest.raises(ConversionError, match=r"node 'p' \(PRelu-6"):
        inline(m)


@pytest.mark.parametrize("opset", [7, 8, 9, 13, 16, 20])
@pytest.mark.parametrize("slope_shape", [(5,), (3, 1, 1), (1,), (2, 3, 4, 5), (1, 4, 1)])
@pytest.mark.parametrize("dynamic", [False, True])
def test_numpy_prelu_slopes(opset, slope_shape, dynamic):
    x = _x4()
    s = np.random.default_rng(5).uniform(-1.5, 1.5, slope_shape).astype(np.float32)
    run_case("PRelu", opset, TP.FLOAT, x, slope=s, slope_input=dynamic)


@pytest.mark.parametrize("opset", [7, 8])
@pytest.mark.parametrize("lo,hi,form", [(0.05, 1.0, "Max"), (1.5, 4.0, "Min"),
                                        (-1.0, 1.0, "Sub")])
def test_legacy_prelu_forms(opset, lo, hi, form):
    x = _x4()
    s = np.random.default_rng(6).uniform(lo, hi, (3, 1, 1)).astype(np.float32)
    _, out, _, _ = run_case("PRelu", opset, TP.FLOAT, x, slope=s, slope_node=True)
    assert out.graph.node[-1].op_type == form
    # an IR 3 initializer must be listed as an input too, and is the model's weight
    _, out, _, _ = run_case("PRelu", opset, TP.FLOAT, x, slope=s)
    assert out.graph.node[-1].op_type == form
    # from IR 4 an initializer listed as an input may be fed: no Max/Min, refused unless asked
    m = build("PRelu", opset, TP.FLOAT, list(x.shape), None, s, False, False)
    m.ir_version = 4
    with pytest.raises(ConversionError, match="slope is not a constant"):
        inline(m)
    assert inline(m, allow_nonfinite_slope=True).graph.node[-1].op_type == "Sub"


# -- onnxruntime agrees --------------------------------------------------------------------------

ORT_CASES = [(op, opset, elem) for op, opset, elem in op_cases()
             if elem in (TP.FLOAT, TP.DOUBLE, TP.INT32, TP.INT64)
             and opset in (7, 8, 9, 13, 14, 15, 16, 18, 22, 23, 24)]


@pytest.mark.parametrize("op,opset,elem", ORT_CASES)
def test_onnxruntime_agrees(op, opset, elem):
    dtype = ELEM[elem]
    x = special_values(dtype)
    slope = None
    if op == "PRelu":
        slope = np.resize(np.array([0.25, 2.0, -0.5, 1.0]), x.shape).astype(dtype)
    m, out, feeds, ref = run_case(op, opset, elem, x, slope=slope)
    got = run_onnxruntime(out, feeds)[0]
    if op == "Selu":  # ORT's exp may differ from NumPy's in the last bit
        np.testing.assert_allclose(got, ref, rtol=4 * np.finfo(dtype).eps, atol=0)
    else:
        eq = bits_equal(ref, got) | ((ref == 0) & (got == 0))
        assert eq.all(), (x[~eq], ref[~eq], got[~eq])


# -- scopes, names, selection ---------------------------------------------------------------------

def test_names_are_unique_and_say_where_they_came_from():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [4])
    nodes = [helper.make_node("LeakyRelu", ["x"], ["a"], name="lr"),
             helper.make_node("Selu", ["a"], ["b"]),
             helper.make_node("Identity", ["b"], ["lr/AlphaMulX"], name="clash"),
             helper.make_node("LeakyRelu", ["lr/AlphaMulX"], ["y"], name="lr2")]
    m = make_model(nodes, [x], [helper.make_tensor_value_info("y", TP.FLOAT, [4])], opset=7)
    out = inline(m)
    onnx.checker.check_model(out, full_check=True)
    names = [n.name for n in out.graph.node]
    assert len(names) == len(set(names))
    outs = [o for n in out.graph.node for o in n.output]
    assert len(outs) == len(set(outs))
    assert "lr/AlphaMulX_1" in outs  # the existing 'lr/AlphaMulX' was not reused
    assert any(o.startswith("selu_1/") for o in outs)
    assert any(n.startswith("lr2/") for n in names)
    xv = special_values(np.float32)
    assert bits_equal(evaluate(m, {"x": xv[:4]})["y"], evaluate(out, {"x": xv[:4]})["y"]).all()


@pytest.mark.parametrize("opset", [6, 7, 13, 18])  # each band; 6: legacy PRelu slopes too
def test_names_stay_unique_when_bases_repeat_or_clash(opset):
    """A base met twice, a base equal to an unnamed node's ``<op>_<index>``, and bases nested
    in one another ("p", "p/q") must still give every value and node its own name."""
    x = helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])
    slope = helper.make_tensor("s", TP.FLOAT, [3] if opset <= 6 else [1, 3], [0.1, -0.2, 3.0])
    nodes = [helper.make_node("Constant", [], ["s"], value=slope),
             helper.make_node("Selu", ["x"], ["a"], name="act"),
             helper.make_node("LeakyRelu", ["a"], ["b"], name="act"),  # the same base
             helper.make_node("PRelu", ["b", "s"], ["c"]),  # base prelu_3
             helper.make_node("Selu", ["c"], ["d"], name="prelu_3"),  # ... clashes with it
             helper.make_node("LeakyRelu", ["d"], ["e"], name="p"),
             helper.make_node("Selu", ["e"], ["f"], name="p/X"),  # nested under "p"
             helper.make_node("PRelu", ["f", "s"], ["y"], name="p/X/Y")]
    m = make_model(nodes, [x], [helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])],
                   opset=opset)
    out = inline(m)
    onnx.checker.check_model(out, full_check=True)
    names = [n.name for n in out.graph.node]
    outs = [o for n in out.graph.node for o in n.output]
    assert len(names) == len(set(names)) and len(outs) == len(set(outs))
    # the second "act" and "prelu_3" take _1 for the names already taken; the PRelu named
    # "p/X/Y" still holds that name while "p/X" is replaced
    assert {"act/Y", "act/Y_1", "prelu_3/Y", "prelu_3/Y_1", "p/Y", "p/X/Y_1",
            "p/X/Y/Y"} <= set(names)
    xv = special_values(np.float32)[:6].reshape(2, 3)
    ref, got = evaluate(m, {"x": xv})["y"], evaluate(out, {"x": xv})["y"]
    assert (bits_equal(ref, got) | ((ref == 0) & (got == 0))).all()  # (the sign of a zero
    # may differ in some bands: README)


def test_ops_selection_and_result():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [4])
    nodes = [helper.make_node("LeakyRelu", ["x"], ["a"], name="lr"),
             helper.make_node("Selu", ["a"], ["y"], name="se")]
    m = make_model(nodes, [x], [helper.make_tensor_value_info("y", TP.FLOAT, [4])], opset=18)
    r = inline_proto(m, ops="Selu")
    assert [n.op for n in r.nodes] == ["Selu"] and r.modified
    assert [n.op_type for n in m.graph.node][0] == "LeakyRelu"
    assert not inline_proto(m, ops="Selu").modified
    with pytest.raises(Exception, match="unknown op"):
        inline_proto(m, ops="Relu")


def test_subgraphs_are_inlined():
    xi = helper.make_tensor_value_info("x", TP.FLOAT, [4])
    cond = helper.make_tensor_value_info("c", TP.BOOL, [])
    then = helper.make_graph([helper.make_node("LeakyRelu", ["x"], ["t"], alpha=0.2)], "then",
                             [], [helper.make_tensor_value_info("t", TP.FLOAT, [4])])
    els = helper.make_graph([helper.make_node("Selu", ["x"], ["e"])], "else", [],
                            [helper.make_tensor_value_info("e", TP.FLOAT, [4])])
    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=els)
    for opset in (11, 16):
        m = make_model([node], [xi, cond], [helper.make_tensor_value_info("y", TP.FLOAT, [4])],
                       opset=opset)
        out = inline(m)
        onnx.checker.check_model(out, full_check=True)
        text = out.SerializeToString()
        assert b"LeakyRelu" not in text and b"Selu" not in text
        xv = special_values(np.float32)[:4]
        for c in (True, False):
            feeds = {"x": xv, "c": np.array(c)}
            check_exact("LeakyRelu" if c else "Selu", opset, "other", xv,
                        evaluate(m, feeds)["y"], evaluate(out, feeds)["y"])
        # the result's replacements are the nodes now in the model, also in subgraphs whose
        # holder was copied into a new node list of the main graph
        edited = make_model([node, helper.make_node("Selu", ["y"], ["z"], name="top")],
                            [xi, cond], [helper.make_tensor_value_info("z", TP.FLOAT, [4])],
                            opset=opset)
        r = inline_proto(edited)
        lists = {a.name: list(a.g.node) for a in edited.graph.node[0].attribute}
        lists["graph 'g'"] = list(edited.graph.node[1:])
        assert sorted((n.op, n.scope.rsplit("/", 1)[-1]) for n in r.nodes) == [
            ("LeakyRelu", "then_branch"), ("Selu", "else_branch"), ("Selu", "graph 'g'")]
        for n in r.nodes:
            assert n.after == lists[n.scope.rsplit("/", 1)[-1]]


def test_inline_pass_adapter():
    ir = pytest.importorskip("onnx_ir")
    from opshift.plugins.onnx_ir import InlinePass

    x = helper.make_tensor_value_info("x", TP.FLOAT, [4])
    m = make_model([helper.make_node("Selu", ["x"], ["y"])], [x],
                   [helper.make_tensor_value_info("y", TP.FLOAT, [4])], opset=18)
    model = ir.serde.deserialize_model(m)
    res = InlinePass()(model)
    assert res.modified and res.model is model
    assert "Where" in [n.op_type for n in model.graph]
    assert not InlinePass()(model).modified
    out = ir.serde.serialize_model(model)
    onnx.checker.check_model(out, full_check=True)


def test_non_finite_constants_refused_at_legacy_opsets():
    from opshift.errors import ConversionError

    x = special_values(np.float32)
    for attrs, op, elem in (({"alpha": float("inf")}, "LeakyRelu", TP.FLOAT),
                            ({"alpha": float("inf")}, "LeakyRelu", TP.FLOAT16),
                            ({"alpha": float("nan")}, "Selu", TP.FLOAT)):
        m = build(op, 8, elem, list(x.shape), attrs)
        with pytest.raises(ConversionError, match=r"node 'act' .*infinite or NaN"):
            inline(m)
    # 1e5 is inf in float16, but float16 LeakyRelu computes in float32, where it is finite
    run_case("LeakyRelu", 8, TP.FLOAT16, special_values(np.float16), attrs={"alpha": 1e5})
    s = np.resize(np.array([0.5, np.inf], np.float32), x.shape)
    with pytest.raises(ConversionError, match="slope element is infinite"):
        inline(build("PRelu", 7, TP.FLOAT, list(x.shape), slope=s, slope_node=True))
    # from opset 9 on, Where selects, so any constant is exact
    run_case("LeakyRelu", 9, TP.FLOAT, x, attrs={"alpha": float("inf")})


def test_documented_non_constant_slope_limit_at_legacy_opsets():
    """The table's one non-zero row: a run-time inf slope at opset <= 8, x >= 0 -> NaN."""
    x = np.array([2.0, -2.0, 0.0], np.float32)
    s = np.array([np.inf, 0.5, 0.25], np.float32)
    m = build("PRelu", 8, TP.FLOAT, [3], slope=s, slope_input=True)
    with pytest.raises(ConversionError, match="gives NaN where the slope is"):
        inline(m)
    got = evaluate(inline(m, allow_nonfinite_slope=True), {"x": x, "s": s})["y"]
    ref = evaluate(m, {"x": x, "s": s})["y"]
    assert ref[0] == 2.0 and np.isnan(got[0])
    assert np.array_equal(ref[1:], got[1:])
