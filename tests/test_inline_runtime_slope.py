"""inline at opsets 1..8 with a PRelu slope that is not a constant: refused by default (the
``Relu(x) - slope*Relu(-x)`` form gives NaN for an infinite or NaN slope where x >= 0),
inlined with ``allow_nonfinite_slope`` and a note per node."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from conftest import MODELS, assert_exact, bundled, const, init, make_model, vi

from opshift import convert, evaluate, opsets
from opshift.cli import main
from opshift.errors import ConversionError
from opshift.inline import inline
from opshift.inline.inliner import inline_proto
from opshift.verify import compare

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

X = np.array([[2.0, -2.0, 0.0], [-0.0, 1e-3, -7.5]], np.float32)
S = np.array([0.25, -1.5, 3.0], np.float32)


def _model(opset: int, slope: str = "input") -> onnx.ModelProto:
    """One PRelu 'act' in graph 'g': slope 's' is a graph input, an IR 3 initializer that is
    also an input ('ir3'), computed from an input ('computed') or a Constant ('constant')."""
    ins, inits, pre = [vi("x", shape=[2, 3])], [], []
    slope_name = "s"
    if slope == "input":
        ins.append(vi("s", shape=[3]))
    elif slope == "ir3":
        ins.append(vi("s", shape=[3]))
        inits.append(init("s", S))
    elif slope == "computed":
        ins.append(vi("t", shape=[3]))
        pre.append(onnx.helper.make_node("Abs", ["t"], ["s"], name="abs"))
    else:
        pre.append(const("s", S))
    node = onnx.helper.make_node("PRelu", ["x", slope_name], ["y"], name="act")
    return make_model([*pre, node], ins, [vi("y", shape=[2, 3])], opset=opset,
                      initializers=inits)


def _feeds(slope: str, s=S) -> dict[str, np.ndarray]:
    return {"x": X, **({"s": s} if slope in ("input", "ir3") else {}),
            **({"t": s} if slope == "computed" else {})}


@pytest.mark.parametrize("opset", [1, 6, 7, 8])
@pytest.mark.parametrize("slope", ["input", "computed"])
def test_refused_by_default(opset, slope):
    m = _model(opset, slope)
    before = m.SerializeToString()
    with pytest.raises(ConversionError) as e:
        inline(m)
    msg = str(e.value)
    assert "\n" not in msg
    assert f"node 'act' (PRelu-{opsets.since_version('PRelu', opset)}, graph 'g')" in msg
    assert f"cannot inline at opset {opset}: the slope is not a constant" in msg
    assert "+-inf or NaN and x >= 0" in msg and "--allow-nonfinite-slope" in msg
    assert m.SerializeToString() == before


@pytest.mark.parametrize("opset", [6, 7, 8])
@pytest.mark.parametrize("slope", ["input", "computed"])
def test_accepted_on_request_with_a_note_and_the_same_numbers(opset, slope):
    m = _model(opset, slope)
    out = onnx.ModelProto()
    out.CopyFrom(m)
    result = inline_proto(out, allow_nonfinite_slope=True)
    assert [n.op_type for n in out.graph.node if n.op_type == "PRelu"] == []
    assert len(result.notes) == 1 and "\n" not in result.notes[0]
    assert result.notes[0].startswith("node 'act' (PRelu-")
    assert "slope is not a constant" in result.notes[0]
    assert result.nodes[0].note == result.notes[0]
    assert result.to_dict()["nodes"][0]["note"] == result.notes[0]
    assert result.to_dict()["notes"] == result.notes
    feeds = _feeds(slope)
    ref, got = evaluate(m, feeds)["y"], evaluate(out, feeds)["y"]
    c = compare(ref, got, ulp=0, signed_zeros=all(n.signed_zero_exact for n in result.nodes))
    assert c.ok, c.reason
    # the documented limit the option accepts: an infinite slope where x >= 0
    inf = np.array([np.inf, 0.5, 0.5], np.float32)
    ref, got = evaluate(m, _feeds(slope, inf))["y"], evaluate(out, _feeds(slope, inf))["y"]
    assert ref[0, 0] == 2.0 and np.isnan(got[0, 0])


@pytest.mark.parametrize("opset", [1, 7, 8, 9, 13, 18])
def test_constant_slope_needs_no_option(opset):
    m = _model(opset, "constant")
    out = onnx.ModelProto()
    out.CopyFrom(m)
    result = inline_proto(out)
    assert result.notes == [] and result.nodes[0].note == ""
    assert "note" not in result.to_dict()["nodes"][0]
    assert np.array_equal(evaluate(m, {"x": X})["y"], evaluate(out, {"x": X})["y"])


@pytest.mark.parametrize("opset", [9, 13, 15, 18])
@pytest.mark.parametrize("slope", ["input", "computed"])
def test_opset_9_and_later_unaffected(opset, slope):
    m = _model(opset, slope)
    out = onnx.ModelProto()
    out.CopyFrom(m)
    result = inline_proto(out)
    assert result.notes == [] and len(result.nodes) == 1
    inf = np.array([np.inf, np.nan, -np.inf], np.float32)
    for s in (S, inf):
        ref, got = evaluate(m, _feeds(slope, s))["y"], evaluate(out, _feeds(slope, s))["y"]
        c = compare(ref, got, ulp=0, signed_zeros=result.nodes[0].signed_zero_exact)
        assert c.ok, c.reason


def test_bundled_slope_input_model_below_opset_9(tmp_path, capsys):
    m, feeds, _ = bundled("prelu_slope_input")
    legacy = convert(m, 8)
    src = tmp_path / "p8.onnx"
    onnx.save(legacy, src)
    out = tmp_path / "out.onnx"
    assert main(["inline", str(src), "-o", str(out)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert "p8.onnx" in err and "(PRelu-" in err and "slope is not a constant" in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["p8.onnx"]

    assert main(["inline", str(src), "-o", str(out), "--allow-nonfinite-slope"]) == 0
    text = capsys.readouterr().out
    assert any(line.startswith("note: ") and "slope is not a constant" in line
               for line in text.splitlines()), text
    got = evaluate(onnx.load(out), feeds)
    ref = evaluate(legacy, feeds)
    for k in ref:
        assert compare(ref[k], got[k], ulp=0, signed_zeros=False).ok

    out2 = tmp_path / "out2.onnx"
    assert main(["inline", str(src), "-o", str(out2), "--allow-nonfinite-slope", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any("slope is not a constant" in n for n in doc["notes"]), doc
    assert (MODELS / "prelu_slope_input.onnx").exists()


def test_inline_pass_and_graphsurgeon_take_the_option():
    import onnx_ir as ir

    from opshift.errors import OpshiftError
    from opshift.plugins.onnx_ir import InlinePass

    m = _model(8, "input")
    with pytest.raises(OpshiftError, match="slope is not a constant"):
        InlinePass()(ir.from_proto(m))
    p = InlinePass(allow_nonfinite_slope=True)
    assert p(ir.from_proto(m)).modified
    assert len(p.last_result.notes) == 1

    gs = pytest.importorskip("onnx_graphsurgeon")
    import opshift.plugins.graphsurgeon  # noqa: F401  (registers the methods)

    with pytest.raises(OpshiftError, match="slope is not a constant"):
        gs.import_onnx(m).opshift_inline()
    graph = gs.import_onnx(m).opshift_inline(allow_nonfinite_slope=True)
    assert "PRelu" not in {n.op for n in graph.nodes}


# -- --verify with the option: the accepted nodes are checked on finite slopes ---------------


def _inlined(m: onnx.ModelProto, **kw):
    out = onnx.ModelProto()
    out.CopyFrom(m)
    return out, inline_proto(out, keep_before=True, **kw)


@pytest.mark.parametrize("opset", [6, 7, 8])
@pytest.mark.parametrize("slope", ["input", "computed"])
def test_verify_generates_finite_slopes_for_the_accepted_nodes_only(opset, slope):
    from opshift.inline.verify import verify_inline

    m = _model(opset, slope)
    out, result = _inlined(m, allow_nonfinite_slope=True)
    report, notes = verify_inline(m, out, result)
    assert report.ok, [r.reason for r in report.rows if not r.ok]
    source = "s" if slope == "input" else "t"
    # the region's slope and the graph input the slope comes from: finite; x keeps them all
    assert report.inputs["act: s"]["source"] == "generated, finite"
    assert report.inputs["act: x"]["source"] == "generated"
    # (the whole model's inputs are realistic values: finite everywhere)
    assert report.inputs[source]["source"] == "generated, realistic, finite"
    assert report.inputs["x"]["source"] == "generated, realistic"
    assert any(n.startswith("act: slope 's' generated without +-inf and NaN") for n in notes)
    assert any(n.startswith(f"whole model: input(s) '{source}' generated without +-inf and "
                            "NaN: the slope of 'act'") for n in notes), notes


def test_verify_of_accepted_nodes_still_catches_a_wrong_replacement():
    from opshift.inline.verify import verify_inline

    m = _model(8, "input")
    out, result = _inlined(m, allow_nonfinite_slope=True)
    (sub,) = [n for n in out.graph.node if n.op_type == "Sub"]
    sub.op_type = "Add"  # relu(x) + s*relu(-x): wrong for every negative x
    report, _ = verify_inline(m, out, result)
    assert not report.ok
    assert {r.label for r in report.rows if not r.ok} == {"act", ""}


def test_verify_without_accepted_nodes_generates_every_special_value():
    from opshift.inline.verify import verify_inline

    m = _model(9, "input")  # PRelu's own form: no option, no note
    out, result = _inlined(m)
    report, notes = verify_inline(m, out, result)
    assert report.ok and not any("without +-inf" in n for n in notes)
    assert {v["source"] for v in report.inputs.values()} == {"generated", "generated, realistic"}


def test_finite_inputs_get_every_other_special_value():
    from opshift.verify import make_inputs
    from opshift.verify.inputs import generate_round, input_specs, round_count

    g = _model(8, "input").graph
    specs = input_specs(g, None, finite=["s"])
    rounds = [generate_round(specs, 0, p) for p in range(round_count(specs))]
    s = np.concatenate([r["s"] for r in rounds])
    x = np.concatenate([r["x"].ravel() for r in rounds])
    assert np.isfinite(s).all() and np.isinf(x).any() and np.isnan(x).any()
    fmax = np.finfo(np.float32).max
    assert fmax in s and -fmax in s and np.signbit(s[s == 0]).any()
    assert np.isfinite(make_inputs(g, finite=["s", "x"])["x"]).all()


def test_cli_inline_verify_with_the_option_passes_and_says_why(tmp_path, capsys):
    src = tmp_path / "p8.onnx"
    onnx.save(_model(8, "computed"), src)
    out = tmp_path / "out.onnx"
    argv = ["inline", str(src), "-o", str(out), "--verify"]
    assert main(argv) == 2  # refused without the option, as before
    capsys.readouterr()
    assert main([*argv, "--allow-nonfinite-slope"]) == 0
    text = capsys.readouterr().out
    assert "verify: ok" in text and "without +-inf and NaN" in text, text
    assert out.exists()
    assert main([*argv, "--allow-nonfinite-slope", "--json", "--force"]) == 0
    v = json.loads(capsys.readouterr().out)["verify"]
    assert v["ok"] and v["checks"]["whole_model"]
    assert any(n.startswith("whole model: input(s) 't' generated without +-inf and NaN")
               for n in v["notes"]), v["notes"]


@pytest.mark.parametrize("opset", [1, 6])
def test_legacy_run_time_slope_read_without_its_outer_1s(opset):
    """A run-time slope [3, 1] on X [2, 3, 4]: legacy Mul reads it as [3] with axis=1, so a
    Squeeze of its axis 1 (an attribute at these opsets) feeds the Mul."""
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    s = np.array([[0.5], [-2.0], [4.0]], np.float32)
    node = onnx.helper.make_node("PRelu", ["x", "s"], ["y"], name="act")
    m = make_model([node], [vi("x", shape=[2, 3, 4]), vi("s", shape=[3, 1])],
                   [vi("y", shape=[2, 3, 4])], opset=opset)
    out = inline(m, allow_nonfinite_slope=True)
    squeeze = [n for n in out.graph.node if n.op_type == "Squeeze"]
    assert len(squeeze) == 1 and list(squeeze[0].input) == ["s"]
    assert onnx.helper.get_attribute_value(squeeze[0].attribute[0]) == [1]
    muls = [n for n in out.graph.node if n.op_type == "Mul" and squeeze[0].output[0] in n.input]
    assert len(muls) == 1
    assert {a.name: a.i for a in muls[0].attribute} == {"broadcast": 1, "axis": 1}
    feeds = {"x": x, "s": s}
    c = compare(evaluate(m, feeds)["y"], evaluate(out, feeds)["y"], ulp=0)
    assert c.ok, c.reason


def test_legacy_slope_legacy_mul_cannot_place_is_refused_naming_the_node():
    """A slope [3, 1, 5] on X [2, 3, 4, 5] spans dims 1..3 with a 1 against 4 inside: legacy
    Mul broadcasting cannot express that, and inline says so."""
    node = onnx.helper.make_node("PRelu", ["x", "s"], ["y"], name="act")
    m = make_model([node], [vi("x", shape=[2, 3, 4, 5])], [vi("y", shape=[2, 3, 4, 5])],
                   opset=6, initializers=[init("s", np.ones((3, 1, 5), np.float32))])
    before = m.SerializeToString()
    with pytest.raises(ConversionError) as e:
        inline(m)
    msg = str(e.value)
    assert "\n" not in msg and "node 'act' (PRelu-6, graph 'g')" in msg
    assert "slope shape [3, 1, 5] placed as [1, 3, 1, 5]" in msg
    assert "legacy Mul broadcasting cannot express it" in msg and "dim 2 is 1 against 4" in msg
    assert m.SerializeToString() == before


@pytest.mark.parametrize(("x_shape", "s_shape"), [([1, None, 4], [None]),
                                                  ([2, None, 4], [None, 1])])
def test_legacy_slope_over_unknown_dims_is_refused(x_shape, s_shape):
    """Two unknown dims are not known to be equal: legacy Mul's ``axis`` placement of the
    slope could fail at run time where PRelu-6 computes, so inline refuses it."""
    node = onnx.helper.make_node("PRelu", ["x", "s"], ["y"], name="act")
    m = make_model([node], [vi("x", shape=x_shape), vi("s", shape=s_shape)],
                   [vi("y", shape=x_shape)], opset=6)
    with pytest.raises(ConversionError, match=r"node 'act' .*legacy Mul broadcasting cannot "
                       r"express it \(dim 1 is None against None"):
        inline(m, allow_nonfinite_slope=True)


# -- what a constant slope is: Facts' answer, seen from the node's scope ----------------------


def _in_then_branch(opset: int, slope_init: bool, main_act: bool = False) -> onnx.ModelProto:
    """PRelu 'act' in the then branch of If 'if'; slope 's' is the main graph's initializer
    (``slope_init``, not a graph input at IR 4) or its graph input. ``main_act``: a
    LeakyRelu 'lr' after the If in the main graph too."""
    branch = onnx.helper.make_graph(
        [onnx.helper.make_node("PRelu", ["x", "s"], ["yt"], name="act")], "then", [],
        [vi("yt", shape=[2, 3])])
    other = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["ye"], name="id")], "else", [],
        [vi("ye", shape=[2, 3])])
    node = onnx.helper.make_node("If", ["c"], ["y" if not main_act else "z"], name="if",
                                 then_branch=branch, else_branch=other)
    after = [onnx.helper.make_node("LeakyRelu", ["z"], ["y"], name="lr")] if main_act else []
    ins = [vi("x", shape=[2, 3]), vi("c", onnx.TensorProto.BOOL, shape=[])]
    if not slope_init:
        ins.append(vi("s", shape=[3]))
    return make_model([node, *after], ins, [vi("y", shape=[2, 3])], opset=opset, ir_version=4,
                      initializers=[init("s", np.array([0.25, 0.5, 1.0], np.float32))]
                      if slope_init else [])


@pytest.mark.parametrize("opset", [6, 8])
def test_enclosing_graph_initializer_slope_is_a_constant(opset):
    # the main graph's LeakyRelu: its node list is rebuilt after the branch's
    m = _in_then_branch(opset, slope_init=True, main_act=True)
    out, result = _inlined(m)  # no option needed: the slope cannot change at run time
    assert result.notes == [] and [n.scope for n in result.nodes] == [
        "graph 'g'/node 'if'/then_branch", "graph 'g'"]
    then = next(a.g for a in out.graph.node[0].attribute if a.name == "then_branch")
    assert [n.op_type for n in then.node] == ["Mul", "Max"]  # every slope element in (0, 1]
    for c in (True, False):
        feeds = {"x": X, "c": np.array(c)}
        assert_exact(evaluate(m, feeds)["y"], evaluate(out, feeds)["y"])
    from opshift.inline.verify import verify_inline

    # the region reads the slope the pass read, as a constant
    report, notes = verify_inline(m, out, result)
    assert report.ok and {r.label for r in report.rows} >= {"act", "lr", ""}
    assert "act: s" not in report.inputs and "act: x" in report.inputs
    assert not any("without +-inf" in n or "not verified" in n for n in notes), notes


def test_enclosing_graph_input_slope_is_refused_in_a_branch():
    m = _in_then_branch(8, slope_init=False)
    with pytest.raises(ConversionError, match=r"node 'act' .*slope is not a constant"):
        inline(m)


def test_make_inputs_takes_a_model_for_its_main_graph():
    from opshift.verify import make_inputs

    m = _model(8, "input")
    a, b = make_inputs(m, seed=3), make_inputs(m.graph, seed=3)
    assert a.keys() == b.keys() and len(a) >= 1
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes()
