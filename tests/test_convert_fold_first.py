"""convert folds a value a step needs as a constant (a Pad's pads below 11, a Slice's ends
below 10) when nodes compute it from constants alone -- PyTorch's pads pattern, a Split of an
initializer -- and only then: a value read at run time or an op whose result a runtime may
compute its own way stays refused (below opset 7, where Pad has no computed form), the input
untouched."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from clirun import opshift
from conftest import assert_exact, make_model, onnxruntime_outputs, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate


def _const(name: str, value) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=f"c_{name}",
                            value=numpy_helper.from_array(np.array(value, np.int64)))


def _torch_pads(x_rank: int, pads_first_axes: list[int], tag: str = "") -> list:
    """The nodes PyTorch's exporter writes for F.pad(x, pads) at opset 13 (ConstantOfShape,
    Concat, Reshape, reversing Slice, Transpose, Reshape, Cast), ending in 'pads{tag}'."""
    t = tag
    return [
        _const(f"given{t}", pads_first_axes),
        _const(f"fill{t}", [2 * x_rank - len(pads_first_axes)]),
        helper.make_node("ConstantOfShape", [f"fill{t}"], [f"zeros{t}"], name=f"zeros{t}",
                         value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Concat", [f"given{t}", f"zeros{t}"], [f"cat{t}"], name=f"cat{t}",
                         axis=0),
        _const(f"pairs{t}", [-1, 2]),
        helper.make_node("Reshape", [f"cat{t}", f"pairs{t}"], [f"r{t}"], name=f"r{t}"),
        _const(f"s1{t}", [-1]), _const(f"s2{t}", [0]),
        _const(f"s3{t}", [-1]),
        helper.make_node("Slice", [f"r{t}", f"s1{t}", _min(t), f"s2{t}", f"s3{t}"],
                         [f"rev{t}"], name=f"rev{t}"),
        _const(f"minint{t}", [-(2**63)]),
        helper.make_node("Transpose", [f"rev{t}"], [f"tr{t}"], name=f"tr{t}"),
        _const(f"flat{t}", [-1]),
        helper.make_node("Reshape", [f"tr{t}", f"flat{t}"], [f"r2{t}"], name=f"r2{t}"),
        helper.make_node("Cast", [f"r2{t}"], [f"pads{t}"], name=f"cast{t}", to=T.INT64),
    ]


def _min(t: str) -> str:
    return f"minint{t}"


def _ordered(nodes: list) -> list:
    """``nodes`` with each Constant placed before its first reader."""
    made = {o for n in nodes if n.op_type != "Constant" for o in n.output}
    consts = {n.output[0]: n for n in nodes if n.op_type == "Constant"}
    out, placed = [], set()
    for n in nodes:
        if n.op_type == "Constant":
            continue
        for i in n.input:
            if i in consts and i not in placed and i not in made:
                out.append(consts[i])
                placed.add(i)
        out.append(n)
    return out


def _padded(extra: list | None = None, outputs: list | None = None) -> onnx.ModelProto:
    nodes = _ordered(_torch_pads(4, [1, 2, 0, 3]) + [
        helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode="constant")])
    return make_model(nodes + (extra or []), [vi("x", T.FLOAT, [1, 2, 3, 4])],
                      [vi("y", T.FLOAT, 4)] + (outputs or []), opset=13)


def _copy(m: onnx.ModelProto) -> onnx.ModelProto:
    c = onnx.ModelProto()
    c.CopyFrom(m)
    return c


@pytest.mark.parametrize("target", [10, 9, 7, 2])
def test_pytorch_pads_are_folded_and_the_pad_converted(target):
    m = _padded()
    c = _copy(m)
    res = convert_proto(c, target)
    onnx.checker.check_model(c, full_check=True)
    assert [n.op_type for n in c.graph.node] == ["Pad"]  # every node of the pads went
    pad = c.graph.node[0]
    assert list(helper.get_attribute_value(
        next(a for a in pad.attribute if a.name == "pads"))) == [0, 0, 0, 1, 0, 0, 3, 2]
    folds = [ch for ch in res.changes if ch.action == "fold"]
    assert len(folds) == 1 and folds[0].node == "cast"
    assert folds[0].to_dict()["kind"] == "fold"
    assert "7 node(s) (ConstantOfShape, Concat, Reshape, Slice, Transpose, Cast)" in \
        folds[0].what and "pads (input 1, 'pads') is not a constant" in folds[0].why
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4) - 11.5
    want = evaluate(m, {"x": x})["y"]
    assert want.shape == (1, 2, 6, 7)
    assert_exact(want, evaluate(c, {"x": x})["y"], f"opset {target}")
    ort = onnxruntime_outputs(c, {"x": x})
    if not isinstance(ort, str):
        assert_exact(want, ort[0], f"onnxruntime at opset {target}")


def test_nodes_something_else_reads_are_kept():
    # 'cat' also feeds a graph output: it stays (with what it reads), the rest goes
    m = _padded(outputs=[vi("cat", T.INT64, 1)])
    c = _copy(m)
    res = convert_proto(c, 10)
    onnx.checker.check_model(c, full_check=True)
    assert sorted(n.op_type for n in c.graph.node) == [
        "Concat", "Constant", "Constant", "ConstantOfShape", "Pad"]
    fold = next(ch for ch in res.changes if ch.action == "fold")
    assert "(2 of them kept: other nodes read them)" in fold.what
    x = np.ones((1, 2, 3, 4), np.float32)
    want = evaluate(m, {"x": x})
    got = evaluate(c, {"x": x})
    for k in want:
        assert_exact(want[k], got[k], k)


def test_a_split_of_an_initializer_is_folded_and_the_split_kept_for_its_other_output():
    # tf2onnx: a Slice's starts and ends as outputs of one Split of an initializer; its third
    # output is the graph's, so the Split stays for that one
    init = numpy_helper.from_array(np.array([1, 3, 7], np.int64), "bounds")
    nodes = [helper.make_node("Split", ["bounds"], ["lo", "hi", "rest"], name="split", axis=0),
             helper.make_node("Slice", ["x", "lo", "hi"], ["y"], name="slice")]
    m = make_model(nodes, [vi("x", T.FLOAT, [5])], [vi("y", T.FLOAT, 1),
                                                    vi("rest", T.INT64, 1)], opset=13,
                   initializers=[init])
    c = _copy(m)
    res = convert_proto(c, 9)
    onnx.checker.check_model(c, full_check=True)
    assert [n.op_type for n in c.graph.node] == ["Split", "Slice"]
    assert [ch.node for ch in res.changes if ch.action == "fold"] == ["split", "split"]
    x = np.arange(5, dtype=np.float32)
    for k, v in evaluate(m, {"x": x}).items():
        assert_exact(v, evaluate(c, {"x": x})[k], k)


def test_a_graph_output_is_not_folded():
    init = numpy_helper.from_array(np.array([1, 3], np.int64), "bounds")
    nodes = [helper.make_node("Split", ["bounds"], ["lo", "hi"], name="split", axis=0),
             helper.make_node("Concat", ["lo", "hi"], ["pads"], name="cat", axis=0),
             helper.make_node("Pad", ["x", "pads"], ["y"], name="pad")]
    m = make_model(nodes, [vi("x", T.FLOAT, [5])], [vi("y", T.FLOAT, 1),
                                                    vi("pads", T.INT64, 1)], opset=13,
                   initializers=[init])
    with pytest.raises(ConversionError, match=r"pads \(input 1, 'pads'\) is not a constant"):
        convert_proto(m, 6)


def test_a_value_read_at_run_time_stays_refused_and_the_input_untouched():
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Concat", ["s", "s"], ["pads"], name="cat", axis=0),
             helper.make_node("Pad", ["x", "pads"], ["y"], name="pad")]
    m = make_model(nodes, [vi("x", T.FLOAT, ["n", 3])], [vi("y", T.FLOAT, None)], opset=13)
    before = m.SerializeToString()
    with pytest.raises(ConversionError, match=r"pads \(input 1, 'pads'\) is not a constant$"):
        convert_proto(m, 6)
    assert m.SerializeToString() == before


@pytest.mark.parametrize("start", [None, 1])
def test_the_shape_of_an_input_declared_with_known_dims_is_folded(start):
    """The Shape of a main-graph input whose declared dims are all known is a constant (the
    model's contract): pads computed from it fold (Shape-15's start read); the Shape of an
    intermediate value is not folded (its shape is only inferred)."""
    kw = {} if start is None else {"start": start}
    cat = ["s1", "s1"] if start is None else ["zero", "s1", "zero", "s1"]
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape", **kw),
             helper.make_node("Sub", ["s", "one"], ["s1"], name="sub"),
             helper.make_node("Concat", cat, ["pads"], name="cat", axis=0),
             helper.make_node("Pad", ["x", "pads"], ["y"], name="pad")]
    inits = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in
             (("one", 1), ("zero", 0))]
    pads = [1, 2, 1, 2] if start is None else [0, 2, 0, 2]
    m = make_model(nodes, [vi("x", T.FLOAT, [2, 3])],
                   [vi("y", T.FLOAT, [2 + pads[0] * 2, 7])], opset=15, initializers=inits)
    c = _copy(m)
    convert_proto(c, 8)
    (pad,) = c.graph.node
    assert pad.op_type == "Pad" and helper.get_attribute_value(pad.attribute[0]) == pads
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    assert_exact(evaluate(m, feeds)["y"], evaluate(c, feeds)["y"])
    # the same Shape of an intermediate value (Identity of x) is read at run time
    m.graph.node.insert(0, helper.make_node("Identity", ["x"], ["x2"], name="id"))
    m.graph.node[1].input[0] = "x2"
    with pytest.raises(ConversionError, match=r"pads \(input 1, 'pads'\) is not a constant"):
        convert_proto(m, 6)


@pytest.mark.parametrize("index,folds", [(1, True), (-1, True), (0, False)])
def test_a_known_dim_picked_from_a_partly_declared_input_is_folded(index, folds):
    """``x.shape[1]`` of an input declared ``[n, 3]`` is the constant 3 (the model's
    contract), whatever n is: pads computed from it fold; ``x.shape[0]`` is read at run
    time."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "at"], ["d"], name="dim", axis=0),
             helper.make_node("Concat", ["zero", "d", "zero", "d"], ["pads"], name="cat",
                              axis=0),
             helper.make_node("Pad", ["x", "pads"], ["y"], name="pad")]
    inits = [numpy_helper.from_array(np.array([index], np.int64), "at"),
             numpy_helper.from_array(np.array([0], np.int64), "zero")]
    m = make_model(nodes, [vi("x", T.FLOAT, ["n", 3])], [vi("y", T.FLOAT, ["n", None])],
                   opset=13, initializers=inits)
    c = _copy(m)
    if not folds:  # (from 7 computed pads have a form of their own)
        with pytest.raises(ConversionError, match=r"pads \(input 1, 'pads'\) is not a const"):
            convert_proto(c, 6)
        return
    convert_proto(c, 8)
    (pad,) = c.graph.node
    assert helper.get_attribute_value(pad.attribute[0]) == [0, 3, 0, 3]
    for n in (1, 4):
        feeds = {"x": np.arange(3 * n, dtype=np.float32).reshape(n, 3)}
        assert_exact(evaluate(m, feeds)["y"], evaluate(c, feeds)["y"])


def test_an_op_runtimes_compute_their_own_way_is_not_folded():
    # Exp is a library function: its folded value could differ from a runtime's
    nodes = [helper.make_node("Exp", ["f"], ["e"], name="exp"),
             helper.make_node("Cast", ["e"], ["pads"], name="cast", to=T.INT64),
             helper.make_node("Pad", ["x", "pads"], ["y"], name="pad")]
    m = make_model(nodes, [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, None)], opset=13,
                   initializers=[numpy_helper.from_array(np.zeros(2, np.float32), "f")])
    with pytest.raises(ConversionError, match="is not a constant"):
        convert_proto(m, 6)


@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_a_range_is_folded_when_it_counts_integers(dtype):
    # TopK's k below 10: a float Range adds delta up or multiplies it, as each runtime does:
    # not folded (nor float arithmetic, which a runtime may fuse or approximate)
    consts = [numpy_helper.from_array(np.array(v, dtype), k)
              for k, v in (("start", 2), ("limit", 3), ("delta", 1))]
    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"], name="range"),
             helper.make_node("Cast", ["r"], ["k"], name="cast", to=T.INT64),
             helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk")]
    m = make_model(nodes, [vi("x", T.FLOAT, [5])], [vi("v", T.FLOAT, 1), vi("i", T.INT64, 1)],
                   opset=13, initializers=consts)
    if dtype == np.float32:
        with pytest.raises(ConversionError, match=r"k \(input 1, 'k'\) is not a constant"):
            convert_proto(m, 9)
        return
    c = _copy(m)
    convert_proto(c, 9)
    assert [n.op_type for n in c.graph.node] == ["TopK"]
    x = np.array([3, 1, 4, 1, 5], np.float32)
    for k, v in evaluate(m, {"x": x}).items():
        assert_exact(v, evaluate(c, {"x": x})[k], k)


@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_arithmetic_is_folded_on_integers_only(dtype):
    consts = [numpy_helper.from_array(np.array(v, dtype), k) for k, v in (("a", [1, 2]),
                                                                          ("b", [3, 0]))]
    nodes = [helper.make_node("Mul", ["a", "b"], ["ab"], name="mul"),
             helper.make_node("Add", ["ab", "a"], ["s"], name="add"),
             helper.make_node("Cast", ["s"], ["pads"], name="cast", to=T.INT64),
             helper.make_node("Pad", ["x", "pads"], ["y"], name="pad")]
    m = make_model(nodes, [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, 1)], opset=13,
                   initializers=consts)
    if dtype == np.float32:
        with pytest.raises(ConversionError, match="is not a constant"):
            convert_proto(m, 6)
        return
    c = _copy(m)
    convert_proto(c, 10)
    assert [n.op_type for n in c.graph.node] == ["Pad"]


def test_a_refusal_after_folding_says_so_and_leaves_the_input_untouched():
    # the pads fold; the Mod (a float one below 10) is refused: nothing is written
    m = _padded(extra=[helper.make_node("Mod", ["y", "y"], ["z"], name="mod", fmod=1)],
                outputs=[vi("z", T.FLOAT, 4)])
    before = m.SerializeToString()
    with pytest.raises(ConversionError, match=r"node 'mod' .*\(after folding 1 value\(s\) "
                                              r"computed from constants into initializers "
                                              r"first\)"):
        convert_proto(m, 9)
    assert m.SerializeToString() == before


def _in_branch() -> onnx.ModelProto:
    branch = helper.make_graph(
        _ordered(_torch_pads(1, [2, 1])
                 + [helper.make_node("Pad", ["x", "pads"], ["b"], name="pad")]),
        "then", [], [vi("b", T.FLOAT, 1)])
    other = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["o"], name="twice",
                                                axis=0)],
                              "else", [], [vi("o", T.FLOAT, 1)])
    nodes = [helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch,
                              else_branch=other)]
    return make_model(nodes, [vi("c", T.BOOL, []), vi("x", T.FLOAT, [3])],
                      [vi("y", T.FLOAT, 1)], opset=13)


@pytest.mark.parametrize("target", [9, 8])
def test_a_value_in_a_subgraph_is_folded_there(target):
    m = _in_branch()
    c = _copy(m)
    convert_proto(c, target)
    onnx.checker.check_model(c, full_check=True)
    then = next(a.g for a in c.graph.node[0].attribute if a.name == "then_branch")
    assert [n.op_type for n in then.node] == ["Pad"]
    assert [t.name for t in then.initializer] == []  # the pads are the Pad's attribute now
    x = np.array([1, -2, 3], np.float32)
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": x}
        assert_exact(evaluate(m, feeds)["y"], evaluate(c, feeds)["y"], str(cond))


def test_cli_says_what_it_folded_and_verifies_the_whole_model(tmp_path):
    src, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(_padded(), src)
    before = src.read_bytes()
    p = opshift("convert", src, "--opset", 10, "-o", out, "--verify", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    (fold,) = [c for c in d["changes"] if c.get("kind") == "fold"]
    assert fold["node"] == "cast" and fold["op"] == "Cast-13 -> initializer"
    assert any(n.startswith("folded 1 value computed from constants alone") for n in d["notes"])
    assert d["verify"]["ok"] and d["verify"]["checks"]["whole_model"]
    assert d["ops_after"] == {"Pad": 1} and src.read_bytes() == before
