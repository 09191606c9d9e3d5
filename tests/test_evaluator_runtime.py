"""The runtime's per-node caches (prepared nodes, initializers, onnx.reference kernels) across
loop iterations: every node, branch and kernel keeps its own entry; and the main graph's
values dropped after their last read, never before (subgraphs read outer values too)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_model, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.evaluator import evaluate


def _branch(name: str, op: str, value: float):
    return helper.make_graph([helper.make_node(op, ["acc", "c"], ["o"])], name, [], [vi("o")],
                             [numpy_helper.from_array(np.float32(value), "c")])


def test_loop_alternating_branches_with_same_named_initializers():
    """Each iteration runs the other If branch; both hold an initializer 'c' and one node
    of the same kind, so a cache keyed by a reused object id would mix them up."""
    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two"], ["r"]),
         helper.make_node("Equal", ["r", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["t"], then_branch=_branch("then", "Add", 1),
                          else_branch=_branch("else", "Add", 100)),
         helper.make_node("Atan", ["t"], ["e"]),  # onnx.reference's kernel, every iteration
         helper.make_node("Add", ["t", "e"], ["acc_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [vi("i", T.INT64, []), vi("cond", T.BOOL, []), vi("acc", T.FLOAT, [])],
        [vi("cond_out", T.BOOL, []), vi("acc_out", T.FLOAT, [])],
        [numpy_helper.from_array(np.int64(2), "two"),
         numpy_helper.from_array(np.int64(0), "zero")])
    m = make_model([helper.make_node("Loop", ["n", "", "a0"], ["a"], body=body)],
                   [vi("n", T.INT64, []), vi("a0", T.FLOAT, [])], [vi("a")], opset=16)
    want = np.float32(-0.5)
    for i in range(7):
        t = want + np.float32(1 if i % 2 == 0 else 100)
        want = t + np.float32(math.atan(float(t)))
    got = evaluate(m, {"n": np.array(7, np.int64), "a0": np.float32(-0.5)})["a"]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_type_check_once_per_op_and_dtypes_still_refuses_each_bad_node():
    """The schema's type check is made once per (op, input dtypes): a later node of the same
    op with other dtypes is checked on its own and refused by name; nodes without attributes
    share the schema's defaults, a node that sets one gets its own."""
    import pytest

    from opshift.errors import EvaluationError

    nodes = [helper.make_node("Add", ["x", "x"], ["a"], name="ok1"),
             helper.make_node("Add", ["a", "x"], ["b"], name="ok2"),
             helper.make_node("LeakyRelu", ["b"], ["c"], name="lr_default"),
             helper.make_node("LeakyRelu", ["c"], ["d"], name="lr_half", alpha=0.5),
             helper.make_node("LeakyRelu", ["d"], ["e"], name="lr_default2"),
             helper.make_node("Add", ["e", "w"], ["y"], name="bad")]
    m = make_model(nodes, [vi("x", shape=[2]), vi("w", T.DOUBLE, [2])], [vi("y", shape=[2])],
                   opset=16)
    x, w = np.array([-4.0, 2.0], np.float32), np.zeros(2)
    with pytest.raises(EvaluationError, match=r"node 'bad'.*inputs bound to T have different"):
        evaluate(m, {"x": x, "w": w})
    m.graph.node[-1].input[1] = "e"
    y = evaluate(m, {"x": x, "w": w})["y"]
    # x + x + x = [-12, 6]; LeakyRelu 0.01, 0.5, 0.01 on -12: -12 * 0.00005; then doubled
    assert y.dtype == np.float32
    assert y.tolist() == [np.float32(np.float32(np.float32(-12 * np.float32(0.01)) * 0.5)
                                     * np.float32(0.01)) * 2, 12.0]


def _live_counts(monkeypatch) -> list[int]:
    """How many values the main graph holds after each of its nodes (graphs of any size
    drop their values here: the tests' graphs are small)."""
    from opshift.evaluator import lifetimes
    from opshift.evaluator.runtime import Runtime

    monkeypatch.setattr(lifetimes, "FEW", 0)

    counts: list[int] = []
    real = Runtime.run_node

    def run_node(self, node, env, *a, **k):
        real(self, node, env, *a, **k)
        if not hasattr(env, "maps"):  # the main graph's own dict, not a subgraph's chain
            counts.append(len(env))

    monkeypatch.setattr(Runtime, "run_node", run_node)
    return counts


def test_values_are_dropped_after_their_last_read(monkeypatch):
    """A chain of ten nodes holds two or three values at a time, not eleven; a value read
    twice lives until its second read; an output that later nodes read is kept."""
    counts = _live_counts(monkeypatch)
    nodes = [helper.make_node("Relu" if i % 2 else "Neg", [f"v{i}"], [f"v{i + 1}"])
             for i in range(10)]
    nodes.append(helper.make_node("Add", ["v10", "v3"], ["y"]))  # v3 read again at the end
    m = make_model(nodes, [vi("v0", T.FLOAT, [4])], [vi("y"), vi("v5")], opset=14)
    x = np.float32([-2, -1, 1, 2])
    got = evaluate(m, {"v0": x})
    assert counts and max(counts) <= 4, counts  # v3, v5 (an output), the newest, one more
    chain = x
    for i in range(10):
        chain = np.maximum(chain, 0) if i % 2 else -chain
        if i == 2:
            v3 = chain
        if i == 4:
            v5 = chain
    np.testing.assert_array_equal(got["y"], chain + v3)
    np.testing.assert_array_equal(got["v5"], v5)


def test_subgraph_reads_keep_outer_values_alive(monkeypatch):
    """'a' is read directly by the Neg, then only by an If branch (and a Loop body's If
    inside): it must outlive the Neg."""
    counts = _live_counts(monkeypatch)
    inner_then = helper.make_graph([helper.make_node("Identity", ["a"], ["t"])], "it", [],
                                   [vi("t")])
    inner_else = helper.make_graph([helper.make_node("Neg", ["a"], ["t"])], "ie", [],
                                   [vi("t")])
    body = helper.make_graph(
        [helper.make_node("If", ["c"], ["t"], then_branch=inner_then, else_branch=inner_else),
         helper.make_node("Add", ["acc", "t"], ["acc_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [vi("i", T.INT64, []), vi("cond", T.BOOL, []), vi("acc", T.FLOAT, [2])],
        [vi("cond_out", T.BOOL, []), vi("acc_out", T.FLOAT, [2])])
    then = helper.make_graph([helper.make_node("Mul", ["a", "a"], ["s"])], "then", [],
                             [vi("s")])
    other = helper.make_graph([helper.make_node("Sub", ["a", "a"], ["s"])], "else", [],
                              [vi("s")])
    m = make_model([helper.make_node("Relu", ["x"], ["a"]),
                    helper.make_node("Neg", ["a"], ["b"]),
                    helper.make_node("If", ["c"], ["s"], then_branch=then, else_branch=other),
                    helper.make_node("Loop", ["n", "", "b"], ["l"], body=body),
                    helper.make_node("Add", ["s", "l"], ["y"])],
                   [vi("x", T.FLOAT, [2]), vi("c", T.BOOL, []), vi("n", T.INT64, [])],
                   [vi("y")], opset=16)
    x = np.float32([3, -1])
    a = np.maximum(x, 0)
    for c in (True, False):
        got = evaluate(m, {"x": x, "c": np.array(c), "n": np.array(3, np.int64)})["y"]
        s = a * a if c else a - a
        loop = -a + 3 * (a if c else -a)
        np.testing.assert_array_equal(got, s + loop)
    assert len(counts) == 10


def test_small_graphs_keep_their_values():
    """Below FEW nodes nothing is planned (verify's region checks run thousands of those)."""
    from opshift.evaluator.lifetimes import FEW, last_reads

    def chain(n):  # v5 is an output that node 5 reads too
        return helper.make_graph([helper.make_node("Neg", [f"v{i}"], [f"v{i + 1}"])
                                  for i in range(n)], "g", [vi("v0")], [vi(f"v{n}"), vi("v5")])

    assert last_reads(chain(FEW - 1)) == ([None] * (FEW - 1), {})
    names, done = last_reads(chain(FEW))
    assert names[3] == ["v3"] and done[3] == ["v3"] and 5 not in done and len(done) == FEW - 1


@pytest.mark.parametrize("op, inputs, feeds", [
    ("Range", ["s", "l", "d"], {"s": np.array(0, np.int64), "l": np.array(2**28 + 1, np.int64),
                                "d": np.array(1, np.int64)}),
    ("ConstantOfShape", ["shape"], {"shape": np.array([2**14, 2**14 + 1], np.int64)}),
    ("Expand", ["x", "shape"], {"x": np.ones([1], np.float32),
                                "shape": np.array([2**28 + 1], np.int64)}),
    ("Tile", ["x", "shape"], {"x": np.ones([2], np.float32),
                              "shape": np.array([2**27 + 1], np.int64)}),
    ("Pad", ["x", "shape"], {"x": np.ones([2], np.float32),
                             "shape": np.array([0, 2**28], np.int64)}),
])
def test_shapes_made_from_input_values_are_bounded(op, inputs, feeds):
    """A size taken from an input's values (a generated 2**31, say) is refused past the
    limit, before anything is allocated, as a LimitError (verify's note, not an OOM kill);
    just past it here, so that a missing check costs a GiB, not the machine."""
    from opshift.errors import LimitError
    from opshift.evaluator.ops.common import MAX_MADE_ELEMENTS

    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                         list(v.shape)) for k, v in feeds.items()]
    m = helper.make_model(helper.make_graph(
        [helper.make_node(op, inputs, ["y"])], "g", ins,
        [helper.make_tensor_value_info("y", T.FLOAT if op != "Range" else T.INT64, None)]),
        opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(LimitError, match=f"over the evaluator's limit of {MAX_MADE_ELEMENTS}"):
        evaluate(m, feeds)


@pytest.mark.parametrize("opset", [11, 27])
@pytest.mark.parametrize("limit, count", [(3.0, 4), (np.nan, 0), (np.inf, 0), (-1.0, 0)])
def test_range_counts_like_onnxruntime_at_every_version(opset, limit, count):
    """One kernel for Range-11 and -27 (a conversion between them must not change what runs);
    a NaN or infinite count makes no elements, as onnxruntime's cast of it does. Each element
    is the previous one plus delta, in the type (the function body's Loop)."""
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Range", ["s", "l", "d"], ["y"])], "g",
        [helper.make_tensor_value_info(n, T.FLOAT, []) for n in "sld"],
        [helper.make_tensor_value_info("y", T.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", opset)])
    y = evaluate(m, {"s": np.float32(0.5), "l": np.float32(limit), "d": np.float32(0.7)})["y"]
    want = np.add.accumulate(np.array([0.5] + [0.7] * (count - 1), np.float32)[:count])
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("op,attrs", [("LpNormalization", {"axis": 1}),
                                      ("Softmax", {"axis": 1}), ("LogSoftmax", {"axis": 0})])
def test_equal_values_give_equal_sums_whatever_made_them(op, attrs):
    """A kernel's output is held as a C-contiguous array, and Softmax adds along a last axis in
    memory: float sums come out the same whether the values came from a Transpose (a strided
    view) or as they are, and on whichever axis Softmax reads them (numpy orders a reduction
    by the memory layout: pairwise along a contiguous axis, one by one across others)."""
    x = np.random.default_rng(5).standard_normal((37, 64)).astype(np.float32) * 100
    transposed = make_model([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                             helper.make_node(op, ["t"], ["y"], **attrs)],
                            [vi("x", T.FLOAT, [37, 64])], [vi("y")], opset=13)
    given = make_model([helper.make_node(op, ["t"], ["y"], **attrs)],
                       [vi("t", T.FLOAT, [64, 37])], [vi("y")], opset=13)
    a = evaluate(transposed, {"x": x})["y"]
    b = evaluate(given, {"t": np.ascontiguousarray(x.T)})["y"]
    assert a.dtype == b.dtype == np.float32 and a.tobytes() == b.tobytes()
    if op.endswith("Softmax"):  # and the same values on the last axis: the same sums
        last = make_model([helper.make_node(op, ["t"], ["y"], axis=-1)],
                          [vi("t", T.FLOAT, [37, 64] if attrs["axis"] == 0 else [64, 37])],
                          [vi("y")], opset=13)
        moved = np.ascontiguousarray(np.moveaxis(x.T, attrs["axis"], -1))
        c = evaluate(last, {"t": moved})["y"]
        assert np.moveaxis(c, -1, attrs["axis"]).tobytes() == np.ascontiguousarray(b).tobytes()
