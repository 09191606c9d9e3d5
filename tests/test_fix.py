"""opshift fix: each defect repaired exactly and listed; refusals; CLI behaviour."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from clirun import opshift
from conftest import if_with_marked_branch, make_model, run_onnxruntime, vi
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from opshift.check import structure
from opshift.cli import main
from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.fix import fix
from opshift.fix.fixer import fix_proto
from opshift.fix.verification import verify_fix
from opshift.graph.facts import Facts
from opshift.opsets import ir_version_for_opset
from opshift.plugins.onnx_ir import FixPass


def _prelu_channel(x, slope):
    """PRelu with a per-channel (axis 1) slope, computed directly."""
    s = slope.reshape((-1,) + (1,) * (x.ndim - 2))
    return np.where(x < 0, x * s, x)


def _kinds(result):
    return [c.kind for c in result.changes]


# -- consumed_inputs ---------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [6, 7, 13])
def test_consumed_inputs_removed(opset, rng):
    n = h.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha=0.25)
    n.attribute.append(h.make_attribute("consumed_inputs", [0]))
    r = h.make_node("Relu", ["y"], ["z"], name="r")
    r.attribute.append(h.make_attribute("consumed_inputs", [0]))
    m = make_model([n, r], [vi("x", T.FLOAT, [2, 3])], [vi("z", T.FLOAT, [2, 3])],
                   opset=opset)
    res = fix_proto(m)
    assert _kinds(res) == ["consumed_inputs", "consumed_inputs"]
    assert [c.node for c in res.changes] == ["'lr'", "'r'"]
    assert all(not any(a.name == "consumed_inputs" for a in nd.attribute) for nd in m.graph.node)
    onnx.checker.check_model(m, full_check=True)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    want = np.maximum(np.where(x < 0, np.float32(0.25) * x, x), 0)
    if opset >= 7:
        np.testing.assert_array_equal(run_onnxruntime(m, {"x": x})[0], want)


def test_consumed_inputs_kept_where_defined():
    n = h.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha=0.25, consumed_inputs=[0])
    m = make_model([n], [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], opset=1)
    before = m.SerializeToString()
    res = fix_proto(m)
    assert not res.modified and m.SerializeToString() == before


# -- PRelu slope ---------------------------------------------------------------------------------

def _prelu_model(x_shape, slope, opset, *, share=False, as_input=False):
    nodes = [h.make_node("PRelu", ["x", "slope"], ["y"], name="p")]
    outputs = [vi("y", T.FLOAT, x_shape)]
    inputs = [vi("x", T.FLOAT, x_shape)]
    inits = []
    if as_input:
        inputs.append(vi("slope", T.FLOAT, list(slope.shape)))
    else:
        inits.append(nh.from_array(slope, "slope"))
    if share:
        nodes.append(h.make_node("Neg", ["slope"], ["s_out"], name="neg"))
        outputs.append(vi("s_out", T.FLOAT, list(slope.shape)))
    # IR 4 at least: these initializers are not graph inputs
    return make_model(nodes, inputs, outputs, opset=opset, initializers=inits,
                      ir_version=max(4, ir_version_for_opset(opset)))


def _slope_value(m):
    """The slope array PRelu 'p' reads (initializer, copy, or through an Unsqueeze)."""
    p = next(n for n in m.graph.node if n.op_type == "PRelu")
    for t in m.graph.initializer:
        if t.name == p.input[1]:
            return nh.to_array(t)
    return None


@pytest.mark.parametrize("opset", [7, 9, 16])
def test_prelu_per_channel_slope_folded(opset, rng):
    slope = np.array([0.1, -0.5, 2.0], np.float32)
    m = _prelu_model([2, 3, 4, 5], slope, opset)
    res = fix_proto(m)
    assert _kinds(res) == ["prelu_slope"]
    assert "constant reshaped in place" in res.changes[0].what
    np.testing.assert_array_equal(_slope_value(m), slope.reshape(3, 1, 1))
    onnx.checker.check_model(m, full_check=True)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = _prelu_channel(x, slope)
    np.testing.assert_array_equal(evaluate(m, {"x": x})["y"], want)
    np.testing.assert_array_equal(run_onnxruntime(m, {"x": x})[0], want)


def test_prelu_shared_slope_copied(rng):
    slope = np.array([0.1, -0.5, 2.0], np.float32)
    m = _prelu_model([2, 3, 4], slope, 13, share=True)
    res = fix_proto(m)
    assert _kinds(res) == ["prelu_slope"] and "copied" in res.changes[0].what
    inits = {t.name: nh.to_array(t) for t in m.graph.initializer}
    assert inits["slope"].shape == (3,)  # the other user still reads the 1-D slope
    np.testing.assert_array_equal(_slope_value(m), slope.reshape(3, 1))
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y, s_out = run_onnxruntime(m, {"x": x})
    np.testing.assert_array_equal(y, _prelu_channel(x, slope))
    np.testing.assert_array_equal(s_out, -slope)


def test_prelu_shared_constant_node_slope_copied(rng):
    slope = np.array([0.1, -0.5, 2.0], np.float32)
    nodes = [h.make_node("Constant", [], ["s"], value=nh.from_array(slope), name="c"),
             h.make_node("PRelu", ["x", "s"], ["y"], name="p"),
             h.make_node("PRelu", ["x", "s"], ["y2"], name="p2")]
    m = make_model(nodes, [vi("x", T.FLOAT, [2, 3, 4])],
                   [vi("y", T.FLOAT, [2, 3, 4]), vi("y2", T.FLOAT, [2, 3, 4])], opset=13)
    res = fix_proto(m)
    assert _kinds(res) == ["prelu_slope", "prelu_slope"]
    # the first PRelu gets a copy (the constant is still shared then), the second the original
    assert "copied" in res.changes[0].what and "in place" in res.changes[1].what
    onnx.checker.check_model(m, full_check=True)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    for got in run_onnxruntime(m, {"x": x}):
        np.testing.assert_array_equal(got, _prelu_channel(x, slope))


@pytest.mark.parametrize("opset", [9, 13])
def test_prelu_dynamic_slope_unsqueezed(opset, rng):
    slope = np.array([0.1, -0.5, 2.0], np.float32)
    m = _prelu_model([2, 3, 4, 5], slope, opset, as_input=True)
    res = fix_proto(m)
    assert _kinds(res) == ["prelu_slope"] and "Unsqueeze" in res.changes[0].what
    unsq = next(n for n in m.graph.node if n.op_type == "Unsqueeze")
    assert (len(unsq.input) == 2) == (opset >= 13)
    onnx.checker.check_model(m, full_check=True)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(run_onnxruntime(m, {"x": x, "slope": slope})[0],
                                  _prelu_channel(x, slope))


def test_prelu_ambiguous_slope_left_alone_unless_told(rng):
    slope = np.array([0.1, -0.5, 2.0], np.float32)
    m = _prelu_model([2, 3, 4, 3], slope, 13)
    before = m.SerializeToString()
    res = fix_proto(m)
    assert not res.modified and m.SerializeToString() == before
    assert [c.kind for c in res.left_alone] == ["prelu_slope"]
    assert "--prelu-slope" in res.left_alone[0].what
    m2 = onnx.ModelProto.FromString(before)
    res = fix_proto(m2, prelu_slope="numpy")
    assert not res.modified and m2.SerializeToString() == before
    res = fix_proto(m2, prelu_slope="channel")
    assert _kinds(res) == ["prelu_slope"]
    x = rng.standard_normal((2, 3, 4, 3)).astype(np.float32)
    np.testing.assert_array_equal(evaluate(m2, {"x": x})["y"], _prelu_channel(x, slope))


def test_prelu_slope_that_cannot_broadcast_refused():
    m = _prelu_model([2, 3, 4], np.ones(5, np.float32), 13)
    with pytest.raises(ConversionError, match=r"node 'p'.*\[5\] does not broadcast"):
        fix(m)


def test_prelu_numpy_slopes_untouched():
    for x_shape, s in (([2, 3, 4], [4]), ([2, 3], [3]), ([2, 3, 4], [1]), ([2, 3, 4], [3, 1])):
        m = _prelu_model(x_shape, np.ones(s, np.float32), 9)
        assert not fix_proto(m), (x_shape, s)


def test_prelu_slope_in_function_left_alone():
    slope = np.array([0.5, 0.25], np.float32)
    body = [h.make_node("Constant", [], ["s"], value=nh.from_array(slope)),
            h.make_node("PRelu", ["x", "s"], ["y"], name="fp")]
    f = h.make_function("local", "F", ["x"], ["y"], body, [h.make_opsetid("", 13)])
    m = make_model([h.make_node("F", ["x"], ["y"], domain="local")],
                   [vi("x", T.FLOAT, [1, 2, 3])], [vi("y", T.FLOAT, [1, 2, 3])], opset=13,
                   functions=[f], extra_opsets=[h.make_opsetid("local", 1)], ir_version=8)
    before = m.SerializeToString()
    res = fix_proto(m)
    # X's shape inside a function depends on the call site: reported, never guessed
    assert not res.modified and m.SerializeToString() == before
    assert [(c.kind, c.scope) for c in res.left_alone] == [("prelu_slope", "function local::F")]


def test_prelu_in_if_branch_with_outer_slope(rng):
    slope = np.array([0.5, -1, 2], np.float32)
    then = h.make_graph([h.make_node("PRelu", ["x", "slope"], ["t"], name="tp"),
                         h.make_node("Neg", ["t"], ["u"], name="dup"),
                         h.make_node("Abs", ["t"], ["u2"], name="dup")],
                        "then", [], [vi("u2", T.FLOAT, [2, 3, 4])])
    other = h.make_graph([h.make_node("Identity", ["x"], ["e"], name="dup")], "else", [],
                         [vi("e", T.FLOAT, [2, 3, 4])])
    m = make_model([h.make_node("If", ["c"], ["y"], name="if", then_branch=then,
                                else_branch=other)],
                   [vi("x", T.FLOAT, [2, 3, 4]), vi("c", T.BOOL, [])],
                   [vi("y", T.FLOAT, [2, 3, 4])], opset=13,
                   initializers=[nh.from_array(slope, "slope")], ir_version=7)
    res = fix_proto(m)
    assert sorted(_kinds(res)) == ["node_name", "node_name", "prelu_slope"]
    scope = "graph 'g'/node 'if'/then_branch"
    # one namespace for the graph tree: else_branch (visited first) keeps 'dup'
    assert {c.scope for c in res.changes} == {scope}
    assert "Unsqueeze" in next(c.what for c in res.changes if c.kind == "prelu_slope")
    onnx.checker.check_model(m, full_check=True)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y = run_onnxruntime(m, {"x": x, "c": np.array(True)})[0]
    np.testing.assert_array_equal(y, np.abs(_prelu_channel(x, slope)))


# -- attribute types ---------------------------------------------------------------------------

@pytest.mark.parametrize("attr,value", [
    (h.make_attribute("alpha", 2), 2.0),
    (h.make_attribute("alpha", nh.from_array(np.array([0.5], np.float32))), 0.5),
    (h.make_attribute("alpha", nh.from_array(np.array(0.25, np.float64))), 0.25),
    (h.make_attribute("alpha", [0.125]), 0.125),
])
def test_wrong_attribute_type_converted(attr, value, rng):
    n = h.make_node("LeakyRelu", ["x"], ["y"], name="lr")
    n.attribute.append(attr)
    m = make_model([n], [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])], opset=16)
    res = fix_proto(m)
    assert _kinds(res) == ["attribute_type"]
    a = m.graph.node[0].attribute[0]
    assert a.type == onnx.AttributeProto.FLOAT and a.f == np.float32(value)
    x = rng.standard_normal(4).astype(np.float32)
    np.testing.assert_array_equal(evaluate(m, {"x": x})["y"],
                                  np.where(x < 0, np.float32(value) * x, x))


@pytest.mark.parametrize("attr", [
    h.make_attribute("alpha", nh.from_array(np.array(0.1, np.float64))),
    h.make_attribute("alpha", 2 ** 25 + 1),
    h.make_attribute("alpha", nh.from_array(np.array([1.0, 2.0], np.float32))),
])
def test_wrong_attribute_type_refused_when_inexact(attr):
    n = h.make_node("Selu", ["x"], ["y"], name="s")
    n.attribute.append(attr)
    m = make_model([n], [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])], opset=13)
    with pytest.raises(ConversionError, match="node 's'.*alpha") as e:
        fix(m)
    assert "\n" not in str(e.value)
    assert m.graph.node[0].attribute[0] == attr  # fix() never mutates its input
    res = fix_proto(onnx.ModelProto.FromString(m.SerializeToString()), strict=False)
    assert [c.kind for c in res.refused] == ["attribute_type"]


# -- opset imports -----------------------------------------------------------------------------

def _function_model(add_domain_import: bool, fn_imports=True):
    body = [h.make_node("LeakyRelu", ["x"], ["y"], alpha=0.5)]
    f = h.make_function("local", "F", ["x"], ["y"], body,
                        [h.make_opsetid("", 13)] if fn_imports else [])
    extra = [h.make_opsetid("local", 1)] if add_domain_import else []
    return make_model([h.make_node("F", ["x"], ["y"], domain="local", name="call")],
                      [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])], opset=13,
                      functions=[f], extra_opsets=extra, ir_version=8)


def test_missing_function_domain_import_added(rng):
    m = _function_model(False)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(m)
    res = fix_proto(m)
    assert "opset_import" in _kinds(res)
    assert {(i.domain, i.version) for i in m.opset_import} >= {("local", 1)}
    onnx.checker.check_model(m, full_check=True)
    x = rng.standard_normal(3).astype(np.float32)
    np.testing.assert_array_equal(run_onnxruntime(m, {"x": x})[0],
                                  np.where(x < 0, np.float32(0.5) * x, x))


def test_missing_function_body_import_added():
    m = _function_model(True, fn_imports=False)
    res = fix_proto(m)
    assert _kinds(res)[0] == "opset_import"
    assert [(i.domain, i.version) for i in m.functions[0].opset_import] == [("", 13)]
    onnx.checker.check_model(m, full_check=True)


def test_missing_default_domain_refused():
    n = h.make_node("Relu", ["x"], ["y"])
    g = h.make_graph([n], "g", [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("custom", 1)])
    with pytest.raises(ConversionError, match="default domain"):
        fix(m)


# -- names ---------------------------------------------------------------------------------------

def test_duplicate_node_names_renamed():
    nodes = [h.make_node("Relu", ["x"], ["a"], name="n"),
             h.make_node("Neg", ["a"], ["b"], name="n"),
             h.make_node("Abs", ["b"], ["y"], name="n")]
    m = make_model(nodes, [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])], opset=13)
    res = fix_proto(m)
    assert _kinds(res) == ["node_name", "node_name"]
    names = [n.name for n in m.graph.node]
    assert names[0] == "n" and len(set(names)) == 3
    x = np.array([-1, 0.5, 2], np.float32)
    np.testing.assert_array_equal(run_onnxruntime(m, {"x": x})[0], -np.maximum(x, 0) * -1)


def test_duplicate_value_names_renamed_downstream(rng):
    nodes = [h.make_node("LeakyRelu", ["x"], ["t"], name="a", alpha=0.5),
             h.make_node("Selu", ["t"], ["u"], name="b"),
             h.make_node("LeakyRelu", ["u"], ["t"], name="c", alpha=0.25),  # redefines t
             h.make_node("PRelu", ["t", "u"], ["y"], name="d")]
    m = make_model(nodes, [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])], opset=16)
    original = onnx.ModelProto.FromString(m.SerializeToString())
    res = fix_proto(m)
    assert _kinds(res) == ["value_name"]
    out = [list(n.output) for n in m.graph.node]
    assert out[0] == ["t"] and out[2][0] != "t" and m.graph.node[3].input[0] == out[2][0]
    assert m.graph.node[1].input[0] == "t"
    onnx.checker.check_model(m, full_check=True)
    # the evaluator reads the original in node order (latest definition wins): same numbers
    report, notes = verify_fix(original, m)
    assert report.ok and report.rows and report.policy.backend == "opshift", notes
    x = rng.standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(run_onnxruntime(m, {"x": x})[0], evaluate(original, {"x": x})["y"],
                               rtol=1e-5)  # onnxruntime's exp is not bit-identical


def test_value_names_read_again_only_where_the_check_found_a_value_defined_twice(
        tmp_path, capsys, monkeypatch):
    # fix and inspect pass the check's findings on: no second look at every output name of
    # a model the check found no value produced twice in, but every repair where it did
    from opshift.fix import fixer

    looked: list[str] = []
    real = fixer.fix_value_names

    def counted(fx, scope):
        looked.append(scope.label)
        real(fx, scope)

    monkeypatch.setattr(fixer, "fix_value_names", counted)
    clean = make_model([h.make_node("Relu", ["x"], ["y"], name="r")],
                       [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], opset=13)
    twice = make_model([h.make_node("Relu", ["x"], ["t"], name="a"),
                        h.make_node("Neg", ["t"], ["t"], name="b"),
                        h.make_node("Abs", ["t"], ["y"], name="c")],
                       [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], opset=13)
    for name, m in (("clean", clean), ("twice", twice)):
        onnx.save(m, tmp_path / f"{name}.onnx")
    for command in (["fix", str(tmp_path / "clean.onnx"), "--dry-run"],
                    ["inspect", str(tmp_path / "clean.onnx")]):
        assert main(command) == 0
    assert looked == []
    assert main(["fix", str(tmp_path / "twice.onnx"), "-o", str(tmp_path / "out.onnx")]) == 0
    assert main(["inspect", str(tmp_path / "twice.onnx")]) == 0
    assert looked == ["graph 'g'", "graph 'g'"]
    assert "renamed output 't'" in capsys.readouterr().out
    assert fix_proto(clean).changes == [] and looked[2:] == ["graph 'g'"]  # not checked: looked
    index = structure.ModelIndex(full=False)
    assert [k for k, _ in structure.problems(twice, index)] == [structure.DUPLICATE_VALUE]
    assert _kinds(fix_proto(twice, facts=Facts(twice, index=index))) == ["value_name"]


def test_fresh_names_from_the_checks_index_avoid_every_name_of_the_model(tmp_path):
    # the CLI takes the names in use from the structural check's walk, the library reads
    # them from the model: the same model comes out, avoiding names met only in subgraphs
    then = h.make_graph([h.make_node("Identity", ["x"], ["s_per_channel"], name="a"),
                         h.make_node("Neg", ["s_per_channel"], ["t"],
                                     name="s_per_channel_2/unsqueeze")],
                        "then", [], [vi("t", T.FLOAT, [1, 3, 4, 4])])
    other = h.make_graph([h.make_node("Identity", ["x"], ["e"], name="s_per_channel_1")],
                         "else", [], [vi("e", T.FLOAT, [1, 3, 4, 4])])
    m = make_model([h.make_node("If", ["c"], ["z"], name="if", then_branch=then,
                                else_branch=other),
                    h.make_node("PRelu", ["z", "s"], ["y"], name="p")],
                   [vi("x", T.FLOAT, [1, 3, 4, 4]), vi("c", T.BOOL, []), vi("s", T.FLOAT, [3])],
                   [vi("y", T.FLOAT, [1, 3, 4, 4])], opset=9)
    m.graph.value_info.append(vi("z", T.FLOAT, [1, 3, 4, 4]))
    onnx.save(m, tmp_path / "in.onnx")
    assert main(["fix", str(tmp_path / "in.onnx"), "-o", str(tmp_path / "out.onnx"), "-q"]) == 0
    by_cli = onnx.load(tmp_path / "out.onnx")
    fix_proto(m)
    assert by_cli.SerializeToString() == m.SerializeToString()
    unsq = next(n for n in m.graph.node if n.op_type == "Unsqueeze")
    assert (unsq.name, list(unsq.output)) == ("s_per_channel_2/unsqueeze_1",
                                              ["s_per_channel_2"])


def test_duplicate_graph_output_producer_refused():
    nodes = [h.make_node("Relu", ["x"], ["y"], name="a"),
             h.make_node("Neg", ["x"], ["y"], name="b")]
    m = make_model(nodes, [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])], opset=13)
    with pytest.raises(ConversionError, match="'y' is produced twice"):
        fix(m)


# -- functions defined twice --------------------------------------------------------------------

def _twice(op1: str, op2: str, with_selu: bool = False) -> onnx.ModelProto:
    def f(op):
        body = [h.make_node(op, ["a"], ["t"]), h.make_node("Selu" if with_selu else "Identity",
                                                           ["t"], ["b"])]
        return h.make_function("local", "F", ["a"], ["b"], body, [h.make_opsetid("", 13)])

    nodes = [h.make_node("F", ["x"], ["y"], domain="local", name="call")]
    return make_model(nodes, [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])], opset=13,
                      extra_opsets=[h.make_opsetid("local", 1)], functions=[f(op1), f(op2)],
                      ir_version=8)  # (functions need IR 8)


def test_identical_second_function_definition_removed(tmp_path, capsys):
    m = _twice("Relu", "Relu", with_selu=True)
    original = onnx.ModelProto.FromString(m.SerializeToString())
    res = fix_proto(m)
    assert _kinds(res) == ["function"] and "local::F" in res.changes[0].what
    assert len(m.functions) == 1 and m.functions[0] == original.functions[0]
    onnx.checker.check_model(m, full_check=True)
    x = np.array([-1, 0.5, 2], np.float32)
    report, notes = verify_fix(original, m)
    assert report.ok and report.rows and not notes
    # the CLI opens such a model for fix (and inspect lists the defect) instead of refusing it
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(original, src)
    assert main(["fix", str(src), "-o", str(out)]) == 0
    assert "removed a second definition of function local::F" in capsys.readouterr().out
    assert len(onnx.load(out).functions) == 1
    assert main(["inspect", str(src)]) == 0
    assert "function local::F" in capsys.readouterr().out
    assert main(["inline", str(src), "-o", str(out)]) == 2  # other commands still refuse it
    np.testing.assert_allclose(run_onnxruntime(m, {"x": x})[0], evaluate(m, {"x": x})["y"],
                               rtol=1e-6)


def test_differing_function_definitions_refused(tmp_path, capsys):
    m = _twice("Relu", "Neg")
    with pytest.raises(ConversionError, match="local::F is defined twice with different bodies"):
        fix(m)
    src = tmp_path / "m.onnx"
    onnx.save(m, src)
    assert main(["fix", str(src), "-o", str(tmp_path / "o.onnx")]) == 2
    assert "defined twice with different bodies" in capsys.readouterr().err
    assert not (tmp_path / "o.onnx").exists()


# -- IR version ---------------------------------------------------------------------------------

@pytest.mark.parametrize("opset,declared", [(13, 3), (13, 14), (7, 11), (17, 4)])
def test_ir_version_other_than_the_opsets_is_left_alone(opset, declared):
    """Runtimes read a model whose IR is above or below its opset's era (issue 38, item 1):
    no defect (tests/test_ir_versions.py holds the rule's own tests)."""
    m = make_model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [3])],
                   [vi("y", T.FLOAT, [3])], opset=opset, ir_version=declared)
    res = fix_proto(m)
    assert not res.modified and m.ir_version == declared
    if declared <= onnx.IR_VERSION:
        run_onnxruntime(m, {"x": np.ones(3, np.float32)})


def test_ir_version_raised_for_initializers_outside_inputs():
    m = make_model([h.make_node("Add", ["x", "c"], ["y"])], [vi("x", T.FLOAT, [3])],
                   [vi("y", T.FLOAT, [3])], opset=7,
                   initializers=[nh.from_array(np.ones(3, np.float32), "c")])
    assert m.ir_version == 3
    res = fix_proto(m)
    assert _kinds(res) == ["ir_version"] and m.ir_version == 4
    onnx.checker.check_model(m, full_check=True)


def test_ir_version_raised_to_what_features_need():
    m = _function_model(True)
    m.ir_version = 7
    fix_proto(m)
    assert m.ir_version == 8  # model-local functions need IR 8 although opset 13 is IR 7
    m.ir_version = 14
    assert not fix_proto(m).modified and m.ir_version == 14
    m = make_model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.BFLOAT16, [3])],
                   [vi("y", T.BFLOAT16, [3])], opset=14, ir_version=10)
    assert not fix_proto(m).modified


# -- API kinds and the onnx_ir pass ---------------------------------------------------------------

def test_fix_does_not_mutate_and_keeps_kind():
    m = _prelu_model([2, 3, 4], np.ones(3, np.float32), 9)
    before = m.SerializeToString()
    out = fix(m)
    assert m.SerializeToString() == before and isinstance(out, onnx.ModelProto)
    assert out.graph.initializer[0].dims == [3, 1]
    irm = ir.serde.deserialize_model(m)
    out_ir = fix(irm)
    assert isinstance(out_ir, ir.Model) and out_ir is not irm
    assert list(out_ir.graph.initializers["slope"].shape) == [3, 1]
    assert list(irm.graph.initializers["slope"].shape) == [3]


def test_fix_pass_in_pass_manager():
    from onnx_ir.passes.common import RemoveUnusedNodesPass

    m = _prelu_model([2, 3, 4], np.ones(3, np.float32), 9)
    irm = ir.serde.deserialize_model(m)
    pm = ir.passes.PassManager([FixPass(), RemoveUnusedNodesPass()])
    r = pm(irm)
    assert r.modified and r.model is irm
    assert list(irm.graph.initializers["slope"].shape) == [3, 1]
    p = FixPass()
    assert not p(irm).modified and not p.last_result.changes


# -- command line --------------------------------------------------------------------------------

def _write_defect_model(path):
    n = h.make_node("PRelu", ["x", "slope"], ["y"], name="p")
    n.attribute.append(h.make_attribute("consumed_inputs", [0, 0]))
    m = make_model([n], [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 3, 4])], opset=9,
                   initializers=[nh.from_array(np.array([0.5, 1, 2], np.float32), "slope")])
    onnx.save(m, path)
    return path.read_bytes()


def test_cli_dry_run_writes_nothing(tmp_path, capsys):
    src = tmp_path / "in.onnx"
    data = _write_defect_model(src)
    out = tmp_path / "out.onnx"
    assert main(["fix", str(src), "-o", str(out), "--dry-run"]) == 0
    assert not out.exists() and src.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]
    text = capsys.readouterr().out
    assert "consumed_inputs" in text and "slope 'slope' [3] -> [3, 1]" in text
    assert "nothing written" in text


def test_cli_fix_verify_json(tmp_path, capsys, rng):
    src = tmp_path / "in.onnx"
    data = _write_defect_model(src)
    out = tmp_path / "out.onnx"
    # the original is invalid as-is: nothing compared, so the check is incomplete (exit 4),
    # the fixed model written all the same
    assert main(["fix", str(src), "-o", str(out), "--verify", "--json"]) == 4
    d = json.loads(capsys.readouterr().out)
    assert sorted(c["kind"] for c in d["changes"]) == ["consumed_inputs", "prelu_slope"]
    assert d["verify"]["verdict"] == "incomplete" and d["verify"]["rows"] == []
    (gap,) = d["verify"]["unchecked"]
    assert gap["what"] == "whole model" and gap["why"].startswith("the original does not run")
    assert d["verify"]["notes"] == ["the fixed model runs; each fix is exact by construction"]
    assert d["output"] == str(out) and not d["ok"] and d["error"] is None
    assert src.read_bytes() == data
    fixed = onnx.load(out)
    onnx.checker.check_model(fixed, full_check=True)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(run_onnxruntime(fixed, {"x": x})[0],
                                  _prelu_channel(x, np.array([0.5, 1, 2], np.float32)))


def test_cli_verify_runs_both_when_original_runnable(tmp_path, capsys):
    nodes = [h.make_node("LeakyRelu", ["x"], ["y"], name="n", alpha=0.5),
             h.make_node("Selu", ["y"], ["z"], name="n")]
    m = make_model(nodes, [vi("x", T.FLOAT, [5])], [vi("z", T.FLOAT, [5])], opset=16)
    src, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(m, src)
    assert main(["fix", str(src), "-o", str(out), "--verify"]) == 0
    text = capsys.readouterr().out
    assert "verify: ok: the whole model (1 output) matches" in text
    assert "renamed this Selu node" in text


def test_cli_refusal_exit_2_no_output(tmp_path, capsys):
    n = h.make_node("LeakyRelu", ["x"], ["y"], name="lr")
    n.attribute.append(h.make_attribute("alpha", nh.from_array(np.array(0.1, np.float64))))
    m = make_model([n], [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])], opset=13)
    src, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(m, src)
    assert main(["fix", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "node 'lr'" in err and "float32" in err
    assert not out.exists()


def test_cli_prelu_slope_option(tmp_path, capsys):
    m = _prelu_model([2, 3, 4, 3], np.array([1, 2, 3], np.float32), 13)
    src, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(m, src)
    assert main(["fix", str(src), "-o", str(out)]) == 0
    assert "left alone" in capsys.readouterr().out
    assert onnx.load(out).graph.initializer[0].dims == [3]
    assert main(["fix", str(src), "-o", str(out), "--prelu-slope", "channel"]) == 0
    assert onnx.load(out).graph.initializer[0].dims == [3, 1, 1]


@pytest.mark.parametrize("command", ["fix", "inspect"])
@pytest.mark.parametrize("kind", ["missing", "directory", "empty", "garbage"])
def test_cli_bad_input_one_line_exit_2(command, kind, tmp_path, capsys):
    src = tmp_path / "in.onnx"
    if kind == "directory":
        src.mkdir()
    elif kind == "empty":
        src.write_bytes(b"")
    elif kind == "garbage":
        src.write_bytes(np.random.default_rng(0).bytes(256))
    args = [command, str(src)] + (["-o", str(tmp_path / "out.onnx")] if command == "fix"
                                  else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and str(src) in err
    assert not (tmp_path / "out.onnx").exists()


def test_cli_external_data_kept_and_verified(tmp_path, capsys, monkeypatch):
    slope = np.arange(1, 4, dtype=np.float32)
    m = _prelu_model([2, 3, 4], slope, 13, share=True)
    src_dir, out_dir = tmp_path / "src", tmp_path / "out"
    src_dir.mkdir()
    out_dir.mkdir()
    onnx.save(m, src_dir / "in.onnx", save_as_external_data=True, location="w.bin",
              size_threshold=0)
    monkeypatch.chdir(tmp_path)  # not the model's folder: data must be found beside it
    assert main(["fix", str(src_dir / "in.onnx"), "-o", str(out_dir / "f.onnx"), "--verify",
                 "--json", "--allow-incomplete"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verify"]["verdict"] == "incomplete"
    # the original is invalid as-is; the fixed one must run (its weights found beside it)
    assert d["verify"]["backend"] == "opshift" and d["verify"]["rows"] == []
    assert d["verify"]["notes"][-1] == "the fixed model runs; each fix is exact by construction"
    assert sorted(p.name for p in out_dir.iterdir()) == ["f.onnx", "w.bin"]
    fixed = onnx.load(out_dir / "f.onnx")  # loads w.bin from beside it
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    y, s_out = run_onnxruntime(fixed, {"x": x})
    np.testing.assert_array_equal(y, _prelu_channel(x, slope))
    np.testing.assert_array_equal(s_out, -slope)


def test_ir_version_features_found_in_subgraphs_and_nodes():
    """IR 10's node features keep the IR version at 10 wherever the node is, a subgraph
    included; without them it is left alone (an IR above the opset's era is no defect)."""
    def model(mark):
        return if_with_marked_branch(mark, 10)

    def metadata(n):
        n.metadata_props.add(key="k", value="v")

    def overload(n):
        n.overload = "o"

    for mark in (metadata, overload, lambda n: None):
        m = model(mark)
        assert not fix_proto(m).modified and m.ir_version == 10, mark.__name__
    m = model(overload)
    m.ir_version = 7
    assert _kinds(fix_proto(m)) == ["ir_version"] and m.ir_version == 10


def test_unsqueeze_axes_are_each_nodes_own():
    """Unsqueezes below version 13 share how their axes attribute is made, never the
    attribute itself: editing one node's axes leaves the others and later ones alone."""
    from opshift.graph.edit import axes_nodes
    from opshift.graph.names import Names

    names = Names.from_used(set())
    (a,), (b,) = (axes_nodes("Unsqueeze", "s", o, [1, 2], 9, names) for o in ("p", "q"))
    a.attribute[0].ints[0] = 7
    (c,) = axes_nodes("Unsqueeze", "s", "r", [1, 2], 9, names)
    assert list(a.attribute[0].ints) == [7, 2]
    assert list(b.attribute[0].ints) == list(c.attribute[0].ints) == [1, 2]
    assert [n.name for n in (a, b, c)] == ["p/unsqueeze", "q/unsqueeze", "r/unsqueeze"]


def test_fresh_names_of_one_base_skip_taken_ones_in_order():
    """A base asked for again and again (the slope that every PRelu shares) gets base, base_1,
    base_2, ... in order, never a name in use, including names taken after it was first
    asked for; other bases are unaffected."""
    from opshift.graph.names import Names

    used = {"s_per_channel_2", "t_1"}
    names = Names.from_used(used)
    got = [names.fresh("s_per_channel") for _ in range(4)]
    assert got == ["s_per_channel", "s_per_channel_1", "s_per_channel_3", "s_per_channel_4"]
    used.add("s_per_channel_5")  # a pass extends the set it shares
    assert names.fresh("s_per_channel") == "s_per_channel_6"
    assert [names.fresh("t") for _ in range(3)] == ["t", "t_2", "t_3"]
    assert names.fresh_all("s_per_channel", ["", "_x"]) == ["s_per_channel_7", "s_per_channel_x"]
    assert len(used) == 2 + 4 + 1 + 1 + 3 + 2


def test_fix_of_many_prelus_sharing_a_graph_input_slope():
    """Each PRelu reads the shared slope through its own Unsqueeze, named apart."""
    x_shape = [1, 3, 2, 2]
    n = 40
    nodes = [h.make_node("PRelu", ["x" if i == 0 else f"y{i}", "s"], [f"y{i + 1}"],
                         name=f"p{i}") for i in range(n)]
    m = h.make_model(
        h.make_graph(nodes, "g",
                     [h.make_tensor_value_info("x", T.FLOAT, x_shape),
                      h.make_tensor_value_info("s", T.FLOAT, [3])],
                     [h.make_tensor_value_info(f"y{n}", T.FLOAT, x_shape)],
                     [nh.from_array(np.array([0.5, -2, 3], np.float32), "s")]),
        opset_imports=[h.make_opsetid("", 9)])
    m.ir_version = 4
    result = fix_proto(m)
    unsq = [x for x in m.graph.node if x.op_type == "Unsqueeze"]
    assert len(unsq) == n and len(result.changes) == n
    outs = [u.output[0] for u in unsq]
    assert outs[:3] == ["s_per_channel", "s_per_channel_1", "s_per_channel_2"]
    assert len(set(outs)) == n and len({u.name for u in unsq}) == n
    onnx.checker.check_model(m, full_check=True)


def test_cli_dry_run_says_would_fix_and_a_run_says_fixed(tmp_path):
    src = tmp_path / "in.onnx"
    _write_defect_model(src)

    def run(*argv):
        p = opshift("fix", src, *argv)
        assert p.returncode == 0, p.stderr
        return p.stdout

    dry = run("--dry-run", "-v")
    assert dry.count("would fix: ") == 2 and "\nfixed: " not in dry
    assert "nothing written (--dry-run)" in dry
    done = run("-o", str(tmp_path / "out.onnx"), "-v")
    assert done.count("fixed: ") == 2 and "would fix" not in done
    would = [x.removeprefix("would ") for x in dry.splitlines() if x.startswith("would fix")]
    assert would == [x.replace("fixed: ", "fix: ") for x in done.splitlines()
                     if x.startswith("fixed: ")]  # the same changes
    dry_json = json.loads(run("--dry-run", "--json"))
    done_json = json.loads(run("-o", str(tmp_path / "out2.onnx"), "--json"))
    assert dry_json["details"]["dry_run"] is True and done_json["details"]["dry_run"] is False
    assert dry_json.keys() == done_json.keys() and len(dry_json["changes"]) == 2
    assert dry_json["changes"] == done_json["changes"]
