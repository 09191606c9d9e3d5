"""Sequences, maps and optionals: how the evaluator takes, computes and returns them, how
``verify.compare`` judges them, and the ai.onnx.ml ops that make maps (ZipMap,
CategoryMapper, CastMap)."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import onnx
import pytest
from conftest import make_model, onnxruntime_outputs, vi
from onnx import TensorProto as T
from onnx import helper

from opshift import cli
from opshift.errors import EvaluationError
from opshift.evaluator import evaluate
from opshift.evaluator.values import held
from opshift.verify import compare

ML = [helper.make_opsetid("ai.onnx.ml", 1)]


def _seq(elem=T.FLOAT, shape=None) -> onnx.TypeProto:
    return helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, shape))


def _map(key, value) -> onnx.TypeProto:
    return helper.make_map_type_proto(key, helper.make_tensor_type_proto(value, []))


def _typed(name: str, tp: onnx.TypeProto) -> onnx.ValueInfoProto:
    return helper.make_value_info(name, tp)


def _ml(node, inputs, outputs) -> onnx.ModelProto:
    return make_model([node], inputs, outputs, opset=13, extra_opsets=ML)


def test_onnx_node_tests_of_sequences_optionals_and_maps():
    """Every onnx node test whose graph takes or gives something other than tensors
    (sequences, optionals; Loop, If, SequenceMap and Identity over them): opshift's outputs
    are the expected ones exactly (compare with no ulp)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    seen = 0
    for c in cases:
        g = c.model.graph
        if all(v.type.HasField("tensor_type") for v in [*g.input, *g.output]):
            continue
        inputs, expected = c.data_sets[0]
        got = evaluate(c.model, {v.name: t for v, t in zip(g.input, inputs)})
        for v, want in zip(g.output, expected):
            r = compare(want, got[v.name], ulp=0)
            assert r.ok, (c.name, v.name, r.reason)
            seen += 1
    assert seen >= 25


# -- compare ----------------------------------------------------------------------------------

def test_compare_sequences_element_by_element():
    a = [np.array([1.0, -0.0], np.float32), np.array([3], np.int64)]
    assert compare(a, [x.copy() for x in a]).ok
    assert compare([], []).ok
    r = compare(a, a[:1])
    assert not r.ok and r.reason == "sequence length differs: expected 2, got 1"
    r = compare(a, [np.array([1.0, 0.0], np.float32), a[1]])
    assert not r.ok and r.reason.startswith("1 of 2 differ; first, element 0: ")
    assert "-0.0 vs +0.0" in r.reason
    assert compare(a, [np.array([1.0, 0.0], np.float32), a[1]], signed_zeros=False).ok
    near = np.nextafter(np.float32(1), np.float32(2))  # one ulp: within the policy
    r = compare(a, [np.array([near, -0.0], np.float32), a[1]])
    assert r.ok and r.max_ulp == 1
    r = compare(a, [a[0], np.array([3], np.int32)])
    assert not r.ok and "element 1: dtype differs" in r.reason


def test_compare_maps_key_by_key():
    e = {1: np.float32(0.25), 7: np.float32(0.75)}
    assert compare(e, dict(e)).ok
    r = compare(e, {1: np.float32(0.25), 8: np.float32(0.75)})
    assert not r.ok and r.reason == "map keys differ: missing 7; unexpected 8"
    r = compare(e, {1: np.float32(0.25), 7: np.float32(0.5)})
    assert not r.ok and "key 7: 1 of 1 elements differ" in r.reason
    r = compare(e, {1: np.float32(0.25), 7: 0.75})  # a Python float is not a float32
    assert not r.ok and "key 7" in r.reason
    assert compare([e, e], [dict(e), dict(e)]).ok


def test_compare_optionals():
    x = np.ones(2, np.float32)
    assert compare(None, None).ok
    r = compare(None, x)
    assert not r.ok and r.reason == "expected empty optional, got float32 tensor"
    r = compare([x], None)
    assert not r.ok and r.reason == "expected sequence[1] of float32 tensor, got empty optional"


# -- values fed to a model --------------------------------------------------------------------

def test_fed_values_checked_against_the_declared_types():
    m = make_model([helper.make_node("SequenceLength", ["s"], ["n"])], [_typed("s", _seq())],
                   [vi("n", T.INT64, [])], opset=13)
    assert evaluate(m, {"s": [np.ones(2, np.float32), np.ones((3, 1), np.float32)]})["n"] == 2
    assert evaluate(m, {"s": []})["n"] == 0
    with pytest.raises(EvaluationError, match=r"graph input 's': float32 tensor given, the "
                                              "model declares a sequence"):
        evaluate(m, {"s": np.ones((2, 2), np.float32)})
    with pytest.raises(EvaluationError, match=r"graph input 's', element 1: dtype float64 "
                                              "given, the model declares float32"):
        evaluate(m, {"s": [np.ones(2, np.float32), np.ones(2)]})
    t = make_model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", T.FLOAT, [2])],
                   [vi("y")], opset=13)
    with pytest.raises(EvaluationError, match="graph input 'x': map.* declares a tensor"):
        evaluate(t, {"x": {1: np.ones(2, np.float32)}})
    with pytest.raises(EvaluationError, match="graph input 'x': empty optional given, the "
                                              "model declares a tensor"):
        evaluate(t, {"x": None})
    with pytest.raises(EvaluationError, match="graph input 'x': not a tensor: "):
        evaluate(t, {"x": [[1.0], [1.0, 2.0]]})
    ints = make_model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", T.INT64, [2])],
                      [vi("y")], opset=13)
    assert evaluate(ints, {"x": [3, 4]})["y"].tolist() == [3, 4]  # array-like, as numpy
    c = _ml(helper.make_node("CastMap", ["m"], ["y"], domain="ai.onnx.ml"),
            [_typed("m", _map(T.INT64, T.FLOAT))], [vi("y")])
    # Python values take the map's declared value type
    assert evaluate(c, {"m": {2: 0.5, 0: 1}})["y"].tolist() == [[1.0, 0.5]]
    with pytest.raises(EvaluationError, match=r"graph input 'm': key 'a' is not int"):
        evaluate(c, {"m": {"a": 0.5}})


# -- optionals --------------------------------------------------------------------------------

def _optional_model(full: bool, opset: int = 18) -> onnx.ModelProto:
    opt = helper.make_optional_type_proto(helper.make_tensor_type_proto(T.FLOAT, [2]))
    made = helper.make_node("Optional", ["x"] if full else [], ["o"],
                            **({} if full else {"type": helper.make_tensor_type_proto(
                                T.FLOAT, [2])}))
    nodes = [made, helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("Identity", ["o"], ["same"])]
    return make_model(nodes, [vi("x", T.FLOAT, [2])],
                      [vi("has", T.BOOL, []), _typed("same", opt)], opset=opset)


def test_optional_holds_its_element_and_the_empty_one_is_none():
    x = np.array([1.5, -0.0], np.float32)
    out = evaluate(_optional_model(True), {"x": x})
    assert out["has"].dtype == bool and bool(out["has"]) is True
    assert compare(x, out["same"], ulp=0).ok
    out = evaluate(_optional_model(False), {"x": x})
    assert bool(out["has"]) is False and out["same"] is None  # Identity of an empty one
    get = make_model([helper.make_node("Optional", [], ["o"], type=helper.make_tensor_type_proto(
        T.FLOAT, [2])), helper.make_node("OptionalGetElement", ["o"], ["y"], name="get")],
        [], [vi("y")], opset=18)
    with pytest.raises(EvaluationError, match=r"node 'get' \(OptionalGetElement-18.*the "
                                              "optional is empty"):
        evaluate(get, {})
    left_out = make_model([helper.make_node("OptionalHasElement", [""], ["has"])], [],
                          [vi("has", T.BOOL, [])], opset=18)
    assert bool(evaluate(left_out, {})["has"]) is False


def test_optionals_against_onnxruntime():
    x = np.array([1.5, -0.0], np.float32)
    for full in (True, False):
        m = _optional_model(full)
        theirs = onnxruntime_outputs(m, {"x": x})
        if isinstance(theirs, str):
            pytest.skip(theirs)
        ours = evaluate(m, {"x": x})
        for v, t in zip(m.graph.output, theirs):
            assert compare(held(v.type, t), ours[v.name], ulp=0).ok, (full, v.name)


# -- ZipMap -----------------------------------------------------------------------------------

def _zipmap(labels: dict, shape) -> onnx.ModelProto:
    key = T.INT64 if "classlabels_int64s" in labels else T.STRING
    return _ml(helper.make_node("ZipMap", ["x"], ["z"], domain="ai.onnx.ml", name="zm",
                                **labels),
               [vi("x", T.FLOAT, shape)],
               [_typed("z", helper.make_sequence_type_proto(_map(key, T.FLOAT)))])


def test_zipmap_one_map_per_row():
    x = np.array([[0.25, -0.0, np.nan], [1e-45, np.inf, 3.0]], np.float32)
    z = evaluate(_zipmap({"classlabels_int64s": [5, 1, 9]}, [2, 3]), {"x": x})["z"]
    assert [list(m) for m in z] == [[5, 1, 9], [5, 1, 9]]
    for row, m in zip(x, z):
        got = np.array(list(m.values()))
        assert got.dtype == np.float32 and got.tobytes() == row.tobytes()
        assert all(type(v) is np.float32 for v in m.values())
    one = evaluate(_zipmap({"classlabels_strings": ["a", "b", "a"]}, [3]), {"x": x[1]})["z"]
    assert len(one) == 1 and list(one[0]) == ["a", "b"]  # a 1-D X is one row
    assert one[0]["a"] == np.float32(3.0)  # a label listed twice: the later column
    assert one[0]["b"] == np.float32(np.inf)


@pytest.mark.parametrize("labels,shape,msg", [
    ({"classlabels_int64s": [1, 2]}, [2, 3], "X has 3 columns for 2 class labels"),
    ({"classlabels_int64s": [1], "classlabels_strings": ["a"]}, [2, 1], "exactly one of"),
    ({}, [2, 1], "exactly one of"),
    ({"classlabels_int64s": [1]}, [1, 1, 1], r"X must be 1-D or 2-D, got shape \[1, 1, 1\]"),
])
def test_zipmap_refuses_what_it_cannot_zip(labels, shape, msg):
    with pytest.raises(EvaluationError, match=r"node 'zm' \(ai.onnx.ml::ZipMap-1.*" + msg):
        evaluate(_zipmap(labels, shape), {"x": np.zeros(shape, np.float32)})


def test_zipmap_against_onnxruntime(rng):
    x = rng.standard_normal((5, 3)).astype(np.float32)
    for labels in ({"classlabels_int64s": [5, 1, 9]}, {"classlabels_strings": ["b", "a", "c"]}):
        m = _zipmap(labels, [5, 3])
        theirs = onnxruntime_outputs(m, {"x": x})
        if isinstance(theirs, str):
            pytest.skip(theirs)
        r = compare(held(m.graph.output[0].type, theirs[0]), evaluate(m, {"x": x})["z"], ulp=0)
        assert r.ok, r.reason


# -- CategoryMapper ---------------------------------------------------------------------------

def _category_mapper(x_elem, y_elem, **attrs) -> onnx.ModelProto:
    attrs = {"cats_strings": ["a", "b", "c", "b"], "cats_int64s": [1, 2, 3, 4], **attrs}
    return _ml(helper.make_node("CategoryMapper", ["x"], ["y"], domain="ai.onnx.ml",
                                name="cm", **attrs),
               [vi("x", x_elem, None)], [vi("y", y_elem, None)])


def test_category_mapper_both_ways():
    s = np.array([["a", "b"], ["zz", "c"]], object)
    y = evaluate(_category_mapper(T.STRING, T.INT64, default_int64=-7), {"x": s})["y"]
    assert y.dtype == np.int64 and y.tolist() == [[1, 4], [-7, 3]]  # "b" twice: the later
    y = evaluate(_category_mapper(T.STRING, T.INT64), {"x": s})["y"]
    assert y.tolist() == [[1, 4], [-1, 3]]  # the schema's default_int64
    i = np.array([1, 2, 7, 4], np.int64)
    y = evaluate(_category_mapper(T.INT64, T.STRING, default_string="nope"), {"x": i})["y"]
    assert y.dtype == object and y.tolist() == ["a", "b", "nope", "b"]
    y = evaluate(_category_mapper(T.INT64, T.STRING), {"x": i})["y"]
    assert y.tolist() == ["a", "b", "_Unused", "b"]
    with pytest.raises(EvaluationError, match=r"node 'cm'.*cats_strings has 4 entries, "
                                              "cats_int64s 2"):
        evaluate(_category_mapper(T.INT64, T.STRING, cats_int64s=[1, 2]), {"x": i})


def test_category_mapper_against_onnxruntime():
    for x, a, b in ((np.array([["a", "b"], ["zz", "c"]], object), T.STRING, T.INT64),
                    (np.array([1, 2, 7, 3, 4], np.int64), T.INT64, T.STRING)):
        m = _category_mapper(a, b, default_int64=-7, default_string="nope")
        theirs = onnxruntime_outputs(m, {"x": x})
        if isinstance(theirs, str):
            pytest.skip(theirs)
        assert evaluate(m, {"x": x})["y"].tolist() == theirs[0].tolist()


# -- CastMap ----------------------------------------------------------------------------------

def _cast_map(value_elem, form="DENSE", cast="TO_FLOAT", max_map=1) -> onnx.ModelProto:
    out = {"TO_FLOAT": T.FLOAT, "TO_INT64": T.INT64, "TO_STRING": T.STRING}.get(cast, T.FLOAT)
    return _ml(helper.make_node("CastMap", ["m"], ["y"], domain="ai.onnx.ml", name="cast",
                                map_form=form, cast_to=cast, max_map=max_map),
               [_typed("m", _map(T.INT64, value_elem))], [vi("y", out, None)])


FLOATS = {3: np.float32(1.75), 0: np.float32(-2.5), 1: np.float32(0.1)}


@pytest.mark.parametrize("form,cast,want", [
    ("DENSE", "TO_FLOAT", [-2.5, np.float32(0.1), 1.75]),
    ("DENSE", "TO_INT64", [-2, 0, 1]),  # toward zero
    ("DENSE", "TO_STRING", ["-2.500000", "0.100000", "1.750000"]),  # as C's %f writes them
    ("SPARSE", "TO_FLOAT", [-2.5, np.float32(0.1), 0.0, 1.75, 0.0]),
    ("SPARSE", "TO_INT64", [-2, 0, 0, 1, 0]),
    ("SPARSE", "TO_STRING", ["-2.500000", "0.100000", "0.f", "1.750000", "0.f"]),
])
def test_cast_map_of_floats(form, cast, want):
    m = _cast_map(T.FLOAT, form, cast, max_map=5)
    y = evaluate(m, {"m": FLOATS})["y"]
    assert y.shape == (1, len(want))
    assert y.dtype == {"TO_FLOAT": np.float32, "TO_INT64": np.int64, "TO_STRING": object}[cast]
    assert y[0].tolist() == np.array(want, y.dtype).tolist()
    theirs = onnxruntime_outputs(m, {"m": {k: float(v) for k, v in FLOATS.items()}})
    if not isinstance(theirs, str):  # a second opinion
        assert theirs[0].tolist() == y.tolist()


def test_cast_map_of_strings():
    m = {2: " 7", 0: "1.000000059604644775390625000000001", 1: "-5e-1"}
    y = evaluate(_cast_map(T.STRING), {"m": m})["y"]
    # the decimal just above the float32 midpoint 1 + 2**-24: rounded once, up (through
    # float64 first, the tie would round down to 1.0)
    assert y.dtype == np.float32 and y[0].tolist() == [1 + 2**-23, -0.5, 7.0]
    y = evaluate(_cast_map(T.STRING, "SPARSE", "TO_INT64", 4), {"m": {3: "-12", 1: "+4"}})["y"]
    assert y.tolist() == [[0, 4, 0, -12]]
    y = evaluate(_cast_map(T.STRING, cast="TO_STRING"), {"m": m})["y"]
    assert y.tolist() == [[m[0], m[1], m[2]]]


@pytest.mark.parametrize("value_elem,feed,form,cast,msg", [
    (T.STRING, {0: "1.5x"}, "DENSE", "TO_FLOAT", "value '1.5x' is not a number"),
    (T.STRING, {0: "1e39"}, "DENSE", "TO_FLOAT", "value '1e39' is out of float32's range"),
    (T.STRING, {0: "1.5"}, "DENSE", "TO_INT64", "value '1.5' is not an integer"),
    (T.FLOAT, {0: np.float32(np.nan)}, "DENSE", "TO_INT64", "has no int64 value"),
    (T.FLOAT, {5: np.float32(1)}, "SPARSE", "TO_FLOAT", r"key 5 is outside 0 .. 4"),
    (T.FLOAT, {-1: np.float32(1)}, "SPARSE", "TO_FLOAT", r"key -1 is outside 0 .. 4"),
    (T.FLOAT, {0: np.float32(1)}, "DENSE", "TO_BOOL", "cast_to 'TO_BOOL' is not"),
])
def test_cast_map_refuses(value_elem, feed, form, cast, msg):
    with pytest.raises(EvaluationError, match=r"node 'cast' \(ai.onnx.ml::CastMap-1.*" + msg):
        evaluate(_cast_map(value_elem, form, cast, 5), {"m": feed})


# -- the verify command on such models --------------------------------------------------------

def _classifier(labels_scale: float = 1.0) -> onnx.ModelProto:
    """A LinearClassifier whose scores ZipMap turns into one map per row, as skl2onnx
    writes classifiers."""
    lc = helper.make_node("LinearClassifier", ["X"], ["label", "scores"], domain="ai.onnx.ml",
                          classlabels_ints=[0, 1], coefficients=[1., 2., 3., -1., -2., -3.],
                          intercepts=[0.5, -0.5 * labels_scale], post_transform="SOFTMAX")
    zm = helper.make_node("ZipMap", ["scores"], ["probabilities"], domain="ai.onnx.ml",
                          classlabels_int64s=[0, 1])
    return _ml_graph([lc, zm])


def _ml_graph(nodes) -> onnx.ModelProto:
    return make_model(nodes, [vi("X", T.FLOAT, [None, 3])],
                      [vi("label", T.INT64, [None]), _typed(
                          "probabilities", helper.make_sequence_type_proto(
                              _map(T.INT64, T.FLOAT)))], opset=13, extra_opsets=ML)


def test_verify_and_convert_of_a_classifier(tmp_path, capsys):
    a, b, c = tmp_path / "a.onnx", tmp_path / "b.onnx", tmp_path / "c.onnx"
    onnx.save(_classifier(), a)
    onnx.save(_classifier(3.0), b)
    assert cli.main(["verify", str(a), str(a), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["verify"]["rows"]
    assert [(r["output"], r["dtype"], r["ok"]) for r in rows] == [
        ("label", "int64", True), ("probabilities", "sequence[2] of map(int -> float32)", True)]
    assert cli.main(["verify", str(a), str(b), "-q"]) == 1
    err = capsys.readouterr().err
    assert re.search(r"FAIL probabilities: [12] of 2 differ; first, element [01]: [12] of 2 "
                     r"differ; first, key [01]: 1 of 1 elements differ \(more than 4 ulp",
                     err), err
    assert cli.main(["convert", str(a), "--opset", "9", "-o", str(c), "--verify", "-q"]) == 0
    assert cli.main(["verify", str(a), str(c)]) == 0
    out = capsys.readouterr().out
    assert "verify: ok: the whole model (2 outputs) matches" in out
    rc = cli.main(["verify", str(a), str(c), "--backend", "onnxruntime"])
    out = capsys.readouterr().out
    if rc == 2:
        pytest.skip("onnxruntime cannot run the classifier")
    assert rc == 0 and "matches" in out


def test_verify_cannot_generate_a_sequence_input(tmp_path, capsys):
    m = make_model([helper.make_node("SequenceLength", ["s"], ["n"])], [_typed("s", _seq())],
                   [vi("n", T.INT64, [])], opset=13)
    p = tmp_path / "s.onnx"
    onnx.save(m, p)
    assert cli.main(["verify", str(p), str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "graph input 's': cannot generate a value of sequence " \
        "type; give it through the Python API" in err


def test_a_hostile_size_is_a_one_line_error():
    """CastMap's SPARSE output has max_map positions: 2**40 of them (8 TiB) is numpy's
    MemoryError, reported as the node's limit (not attempted: not the model's fault)."""
    from opshift.errors import LimitError

    m = _cast_map(T.FLOAT, "SPARSE", "TO_INT64", max_map=1 << 40)
    with pytest.raises(LimitError, match=r"node 'cast' \(ai.onnx.ml::CastMap-1.*Unable to "
                                         "allocate"):
        evaluate(m, {"m": {0: np.float32(1)}})
