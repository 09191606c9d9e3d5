"""Einsum below 12: where it sums nothing (outer and broadcast products, transposes) a Mul of
its inputs placed by Transpose and Unsqueeze, or a Transpose, bit for bit against Einsum-12
on the evaluator, with numpy's einsum as the meaning, and on onnxruntime where it runs; two
inputs summed over shared indices one MatMul (float32, float16, integers: bit for bit on
the evaluator; float64 refused). Diagonals, ellipses, an index summed in one input alone and
three inputs stay refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import (
    assert_conversion_exact,
    assert_exact,
    converted,
    make_model,
    onnxruntime_outputs,
    vi,
)
from onnx import TensorProto as T
from onnx import helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.verify import compare

DIMS = {"i": 3, "j": 4, "b": 2, "k": 5, "a": 2, "c": 3, "d": 4, "e": 5}


def _model(equation: str, elem: int = T.FLOAT) -> tuple[onnx.ModelProto, list]:
    terms = equation.replace(" ", "").split("->")[0].split(",")
    shapes = [[DIMS[c] for c in t] for t in terms]
    names = [f"x{k}" for k in range(len(terms))]
    out = np.einsum(equation, *(np.zeros(s) for s in shapes)).shape
    m = make_model([helper.make_node("Einsum", names, ["y"], equation=equation)],
                   [vi(n, elem, s) for n, s in zip(names, shapes)], [vi("y", elem, out)],
                   opset=12)
    return m, shapes


@pytest.mark.parametrize("target", [11, 9, 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
@pytest.mark.parametrize("equation", ["i, j -> i j", "ij,i->ji", "bi,ij->bji", "ij->ji",
                                      "ij", "j,i", "ji,ij->ij"])
def test_einsum_without_sums_below_12(equation, dtype, target):
    m, shapes = _model(equation, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    c = converted(m, target)
    assert "Einsum" not in {n.op_type for n in c.graph.node}
    rng = np.random.default_rng(4)
    feeds = {f"x{k}": (rng.standard_normal(s) * 100).astype(dtype) for k, s in
             enumerate(shapes)}
    with np.errstate(all="ignore"):  # (1e30 is inf in float16)
        feeds["x0"].reshape(-1)[:3] = [0, 7, 7] if dtype == np.int64 else [0, -0.0, 1e30]
        meaning = np.einsum(equation, *feeds.values())
    assert_conversion_exact(m, c, feeds, meaning)


@pytest.mark.parametrize("target", [11, 9])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
@pytest.mark.parametrize("equation", ["ij,jk->ik", "i,i", "bij,bjk->bik", "abcd,cde->abe",
                                      "bjk,bik->bji", "kj,ji", "ki,kj->ij"])
def test_einsum_contractions_below_12_as_one_matmul(equation, dtype, target):
    """Two inputs summed over the indices they share: one MatMul of them transposed and
    reshaped, back to the output's order; the evaluator sums both in float64, rounded once
    (+0.0 added, as Einsum sums into it)."""
    m, shapes = _model(equation, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    c = converted(m, target)
    assert [n.op_type for n in c.graph.node].count("MatMul") == 1
    rng = np.random.default_rng(5)
    feeds = {f"x{k}": (rng.standard_normal(s) * 10).astype(dtype) for k, s in
             enumerate(shapes)}
    feeds["x0"].reshape(-1)[:1] = 0
    _same_sums(m, c, feeds)


def test_einsum_contraction_of_dynamic_dims():
    """The reshapes read the dims from the inputs' shapes at run time."""
    eq = "bij,bjk->bik"
    m = make_model([helper.make_node("Einsum", ["x0", "x1"], ["y"], equation=eq)],
                   [vi("x0", T.FLOAT, ["b", "i", 3]), vi("x1", T.FLOAT, ["b", 3, "k"])],
                   [vi("y", T.FLOAT, ["b", "i", "k"])], opset=12)
    c = converted(m, 10)
    rng = np.random.default_rng(6)
    for b, i, k in ((2, 4, 5), (1, 1, 1)):
        feeds = {"x0": rng.standard_normal((b, i, 3)).astype(np.float32),
                 "x1": rng.standard_normal((b, 3, k)).astype(np.float32)}
        _same_sums(m, c, feeds)


def _same_sums(m, c, feeds) -> None:
    """The converted model's sums are the original's: bit for bit on the evaluator for
    float32 and float16 (both sum in float64 and round once) and integers; onnxruntime's
    MatMul within the verify policy's ulp bound of its Einsum, where it runs both."""
    assert_exact(evaluate(m, feeds)["y"], evaluate(c, feeds)["y"])
    theirs = [onnxruntime_outputs(x, feeds) for x in (m, c)]
    if not any(isinstance(r, str) for r in theirs):
        assert compare(theirs[0][0], theirs[1][0]).ok, compare(theirs[0][0], theirs[1][0]).reason


def test_float64_contractions_are_refused_below_12():
    """float64 sums: the order of the additions shows in their last bits (tens of ulps where
    terms cancel), which no wider sum rounds away."""
    m, _ = _model("ij,jk->ik", T.DOUBLE)
    with pytest.raises(ConversionError, match=r"its sums are DOUBLE"):
        convert_proto(m, 11)


@pytest.mark.parametrize("equation, pattern", [
    ("ij->i", r"sums over an index of one input alone"), ("ij,jk->i", r"one input alone"),
    ("ii->i", r"index twice"), ("...i,i->...i", "ellipsis"), ("i,j,k->ijk", r"3 inputs")])
def test_einsum_that_sums_or_needs_more_is_refused_below_12(equation, pattern):
    terms = equation.split("->")[0].split(",")
    shapes = [[3] * len(t.replace(".", "")) for t in terms]
    names = [f"x{k}" for k in range(len(terms))]
    m = make_model([helper.make_node("Einsum", names, ["y"], equation=equation)],
                   [vi(n, T.FLOAT, s) for n, s in zip(names, shapes)], [vi("y", T.FLOAT, None)],
                   opset=12)
    with pytest.raises(ConversionError, match=pattern):
        convert_proto(m, 11)
